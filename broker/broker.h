/* SPDX-License-Identifier: MIT
 * The broker's state: its sessions (one per client connection) and its runs
 * (one per snippet, each with its worker).  broker/session.c speaks the
 * client link, broker/run.c the worker link.
 */
#ifndef KOTOBA_BROKER_H
#define KOTOBA_BROKER_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "broker/cgroup.h"
#include "broker/config.h"
#include "broker/loop.h"
#include "proto/proto.h"

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)                                             \
	for ((var) = TAILQ_FIRST(head); (var) && ((tvar) = TAILQ_NEXT(var, field), 1);          \
	     (var) = (tvar))
#endif

#define SESSION_QUEUE_HIGH (1u << 20) /* stop reading a run's output above this */
#define SESSION_QUEUE_LOW (256u << 10)
#define OUTPUT_CHUNK 65536

struct run;
struct container;
struct engine_job;
struct session;

/* How a run tells whoever started it that it ended: once, after the
 * client's last frame and before the run is freed.  The gate writes the
 * audit row; container.c reads an engine command's outcome.  run.c calls
 * no module above it: this is its only way up. */
struct run_ops {
	void (*ended)(const struct run *r, void *ctx);
};

struct outbuf {
	TAILQ_ENTRY(outbuf) link;
	struct frame f;
	size_t off;
};

struct session {
	TAILQ_ENTRY(session) link;
	struct broker *b;
	struct watch w;
	uint64_t sid;
	struct ucred peer;
	enum { SESSION_NEW, SESSION_READY, SESSION_CLOSING } state;
	bool channel;
	bool dispatching; /* inside read_frames: flush must not re-enter it */
	bool read_eof;    /* the peer shut its sending side: its runs go on */
	struct frame_reader rd;
	TAILQ_HEAD(, outbuf) outq;
	size_t queued;
	unsigned nruns;
	TAILQ_HEAD(, run) runs;
	uint64_t frame_us; /* when the frame being dispatched was read */
	uint64_t opened_ms;      /* for [quota] hello_timeout */
	uint64_t frame_start_ms; /* first byte of an unfinished frame; 0: none */
	bool stalled;            /* seen backlogged: the clocks start again after */
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
};

struct run {
	TAILQ_ENTRY(run) slink;   /* in session->runs while the client waits */
	TAILQ_ENTRY(run) blink;   /* in broker->runs until the worker is reaped */
	struct broker *b;
	struct session *s;        /* NULL once the client has gone */
	uint64_t id;              /* the client's id */
	uint64_t run_id;          /* broker-wide, for logs and audit */
	uid_t uid;
	pid_t worker;
	bool reaped, ready, done, reported;
	struct watch sock;
	struct watch out[2];
	uint64_t out_bytes[2];
	bool truncated;
	bool paused;
	bool cancelled;
	uint64_t kill_at_ms, abandon_at_ms;
	uint64_t start_us;
	/* how it ended */
	enum { END_NONE, END_FINISHED, END_SETUP, END_LOST } end;
	struct run_result result;
	struct receipt blocked;     /* what the sandbox refused (finished) */
	char setup_step[32];
	int64_t setup_errno;
	char setup_msg[384];
	enum proto_profile profile;
	enum proto_approver approver;
	size_t n_labels;
	const char *labels[PROTO_LABELS_MAX];
	char sha256[65];
	pid_t peer_pid;
	/* monotonic us: exec frame read, worker ready, worker finished */
	uint64_t t_arrived, t_ready, t_finished;
	struct container *ct;     /* sandbox = docker: where the snippet runs */
	char container[64];       /* its name, for the exit frame */
	bool engine_only;         /* an engine command (stop a container): no client */
	struct cgroup_run cg;     /* its memory and process limits, all processes together */
	unsigned peer_refusals;   /* connections from inside this run refused (peer.c) */
	const struct run_ops *ops;
	void *ctx;
};

struct broker {
	struct config cfg;
	char socket_path[108];
	char worker_path[4096];
	char state_dir[4096];
	struct watch listen;
	struct watch sig;
	bool stopping;
	uint64_t next_sid, next_run_id;
	unsigned nsessions, nruns;
	TAILQ_HEAD(, session) sessions;
	TAILQ_HEAD(, run) runs;
};

/* session.c */
void session_accept(struct watch *w, uint32_t events);
int session_send(struct session *s, struct frame *f);
void session_send_error(struct session *s, bool has_id, uint64_t id, const char *code,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
bool session_backlogged(const struct session *s);
/* A run left s->runs: a half-closed session may now be done. */
void session_run_gone(struct session *s);
void session_close(struct session *s);
/* Closes the connections past [quota] hello_timeout or frame_timeout. */
void sessions_tick(struct broker *b, uint64_t now);
int sessions_next_deadline(struct broker *b, uint64_t now);

/* run.c */
/* -EBUSY: a limit; -EPERM: no identity for the peer; -EINVAL: the working
 * directory cannot be used; -ENOEXEC: the container engine cannot be
 * driven; other -errno: the broker failed.  With a sentence in err. */
int run_start(struct broker *b, struct session *s, const struct run_request *rq,
	      char *err, size_t errlen);
/* The `error` for a sandbox step that failed (bad-cwd for "cwd"); in a
 * container it also says that nothing runs on the host instead. */
void run_send_setup_error(struct session *s, uint64_t id, const char *step, int64_t err_no,
			  const char *why, bool in_container);
/* Runs one engine command as the user a peer's snippets run as, with no
 * client: how the broker stops containers without engine access.  ops,
 * if not NULL, is told how it ended.  container.c reaches it only as its
 * engine runner (container_set_runner()). */
struct engine_job;
int run_start_engine(struct broker *b, uid_t peer, const struct engine_job *j,
		     const struct run_ops *ops, void *ctx, char *err, size_t errlen);
/* Starts the worker on fds 0-3 (code, stdout, stderr, worker link) as id
 * and sets *pid: by default kotoba-worker, spawned or through the fork
 * child F.  Tests give their own (NULL: the default again); nothing else
 * of a run is replaced. */
struct identity;
typedef int worker_starter(struct broker *b, const int *fd, const struct identity *id,
			   struct cgroup_run *cg, pid_t *pid);
void run_set_worker_starter(worker_starter *fn);
void run_cancel(struct run *r);
void run_detach(struct run *r);  /* the client went away */
void run_resume(struct run *r);  /* the client's queue drained */
void runs_reap(struct broker *b);
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
