/* SPDX-License-Identifier: MIT
 * The broker's state: its sessions (one per client connection) and its runs
 * (one per snippet, each with its worker).  broker/session.c speaks the
 * client's socket, broker/run.c the worker link; struct session and struct
 * run are theirs alone, and the others hold them by pointer.
 */
#ifndef KOTOBA_BROKER_H
#define KOTOBA_BROKER_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "broker/cgroup.h"
#include "broker/client_link.h"
#include "broker/config.h"
#include "broker/loop.h"
#include "proto/proto.h"

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)                                             \
	for ((var) = TAILQ_FIRST(head); (var) && ((tvar) = TAILQ_NEXT(var, field), 1);          \
	     (var) = (tvar))
#endif

struct run;
struct container;
struct engine_job;
struct session;

/* How a run ended. */
enum run_end { END_NONE, END_FINISHED, END_SETUP, END_LOST };

/* What the other modules read of a run (run_describe()): who asked and
 * what the gate decided, and once it is over, how it ended.  A copy, so
 * that struct run stays run.c's own; its strings last as long as the run. */
struct run_info {
	uint64_t id;     /* the client's id */
	uint64_t run_id; /* broker-wide, for logs and audit */
	uid_t uid;
	pid_t peer_pid;
	enum proto_profile profile;
	enum proto_approver approver;
	size_t n_labels;
	const char *const *labels;
	const char *sha256;
	enum run_end end; /* END_NONE while it runs */
	bool cancelled;
	struct run_result result;
	const struct receipt *blocked; /* what the sandbox refused (finished) */
	const struct network *network; /* what went through the egress proxy */
	const char *setup_step, *setup_msg;
	int64_t after_seq;   /* a re-run's link: run_request's */
	/* When it ended: the client still waiting for its frames (NULL: gone),
	 * and whether its exit said an escalation card follows. */
	struct client_link *cl;
	bool escalating;
};

/* How a run tells whoever started it that it ended: once, after the
 * client's last frame and before the run is freed.  The gate writes the
 * audit row; container.c reads an engine command's outcome.  run.c calls
 * no module above it: this and the client link are its ways up. */
struct run_ops {
	void (*ended)(const struct run_info *ri, void *ctx);
	/* Asked as a finished run's exit is sent to cl: whether it says that
	 * an escalation card follows (the exec goes on).  NULL: never. */
	bool (*escalates)(struct client_link *cl, const struct run_info *ri, void *ctx);
};

/* Snippet code and what the gate decided, handed to run_start(). */
struct run_request {
	uint64_t id;
	const char *code;
	size_t code_len;
	const char *cwd;
	uint64_t timeout_ms;
	const struct env_pair *env;
	size_t n_env;
	enum proto_profile profile;
	enum proto_approver approver;
	size_t n_labels;
	const char *labels[PROTO_LABELS_MAX];
	char sha256[65];      /* of the code, for the audit trail */
	uint64_t arrived_us;  /* when the exec frame was read, for timings */
	uid_t peer_uid;       /* the client's uid (SO_PEERCRED) */
	pid_t peer_pid;
	const struct engine_job *engine; /* an engine command, not a snippet */
	const struct run_ops *ops;       /* told when it ends; NULL: nobody */
	void *ctx;                       /* handed back to ops */
	int64_t after_seq; /* a re-run from an escalation card: the first run's exit row */
};

struct broker {
	struct config cfg;
	char socket_path[108];
	char worker_path[4096];
	char state_dir[4096];
	struct watch listen;
	struct watch attach;      /* the monitor's connections (system mode) */
	struct watch sig;
	struct watch egress;      /* the egress proxy's events (egresslink) */
	bool stopping;
	bool failed;              /* stopping for a fault (the monitor ended) */
	uint64_t next_sid, next_run_id;
	unsigned nsessions, nruns;
	unsigned nspares;         /* warm jobs no snippet took yet (run.c) */
	TAILQ_HEAD(, session) sessions;
	TAILQ_HEAD(, run) runs;
};

/* session.c */
void session_accept(struct watch *w, uint32_t events);
void session_attach(struct watch *w, uint32_t events);
/* At shutdown: every connection closed, its runs cancelled. */
void sessions_close_all(struct broker *b);
/* Closes the connections past [quota] hello_timeout or frame_timeout. */
void sessions_tick(struct broker *b, uint64_t now);
int sessions_next_deadline(struct broker *b, uint64_t now);

/* run.c */
/* -EBUSY: a limit; -EPERM: no identity for the peer; -EINVAL: the working
 * directory cannot be used; -ENOEXEC: the container engine cannot be
 * driven; other -errno: the broker failed.  With a sentence in err.  The
 * run sends its frames to cl (NULL: no client) until it ends or cl goes. */
int run_start(struct broker *b, struct client_link *cl, const struct run_request *rq,
	      char *err, size_t errlen);
/* The `error` for a sandbox step that failed (bad-cwd for "cwd"); in a
 * container it also says that nothing runs on the host instead. */
void run_send_setup_error(struct client_link *cl, uint64_t id, const char *step,
			  int64_t err_no, const char *why, bool in_container);
/* Runs one engine command as the user a peer's snippets run as, with no
 * client: how the broker stops containers without engine access.  ops,
 * if not NULL, is told how it ended.  container.c reaches it only as its
 * engine runner (container_set_runner()). */
struct engine_job;
int run_start_engine(struct broker *b, uid_t peer, const struct engine_job *j,
		     const struct run_ops *ops, void *ctx, char *err, size_t errlen);
/* Starts the worker on fds 0-3 (code, stdout, stderr, worker link) as id
 * and sets *pid: by default kotoba-worker, spawned, through the fork
 * child F, or by the monitor (fd[4]: the write end of the start-report
 * pipe, -1 without a monitor).  Tests give their own (NULL: the default
 * again); nothing else of a run is replaced. */
struct identity;
typedef int worker_starter(struct broker *b, const int *fd, const struct identity *id,
			   struct cgroup_run *cg, pid_t *pid);
void run_set_worker_starter(worker_starter *fn);
void run_cancel(struct run *r);
void run_describe(const struct run *r, struct run_info *out);
/* The run whose worker, not yet reaped, is pid; NULL: none. */
struct run *run_of_worker(struct broker *b, pid_t pid);
/* Counts a connection from inside r that peer.c refused; returns how many
 * were refused before it. */
unsigned run_note_refusal(struct run *r);
/* An event of the egress proxy's, checked (egresslink.c), to the run it
 * names; false when no run that is still going has that id. */
struct egress_event;
bool run_take_egress_event(struct broker *b, const struct egress_event *ev);
/* The run of cl with the client's id, or NULL. */
struct run *run_of_client(struct client_link *cl, uint64_t id);
void runs_detach(struct client_link *cl); /* the client went away: its runs are cancelled */
void runs_resume(struct client_link *cl); /* the client's queue drained */
void runs_reap(struct broker *b);
/* At shutdown: the workers that did not end in time are killed. */
void runs_kill(struct broker *b);
/* Every spare interpreter stops (a reload: they were built from the old
 * configuration). */
void runs_stop_spares(struct broker *b, const char *why);
void runs_tick(struct broker *b, uint64_t now);
int runs_next_deadline(struct broker *b, uint64_t now);

/* env.c: the snippet's environment, never the broker's. */
#define ENV_OUT_MAX (PROTO_ENV_MAX)
struct identity;
/* From the identity privsep_identity() resolved: no second lookup. */
int env_build(const struct identity *id, const struct env_pair *req, size_t n_req, char **out,
	      size_t *n_out, char *err, size_t errlen);
bool env_name_allowed(const char *name, size_t len);
/* A name that decides which code runs (PYTHON*, LD_*...): never passed. */
bool env_name_refused(const char *name, size_t len);
/* 0, or -EPERM with a sentence when the request carries a refused name or
 * a value that imports code: checked before any card. */
int env_check_request(const struct env_pair *req, size_t n_req, char *err, size_t errlen);
void env_free(char **env, size_t n);
#endif
