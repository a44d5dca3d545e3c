/* SPDX-License-Identifier: MIT
 * kotoba-worker: one per snippet.  The process the broker execs is the
 * supervisor (S); it prepares everything that allocates, forks the snippet
 * child (C), which confines itself and execs python3, then supervises the
 * run and reports on fd 3.
 *
 * fds at exec: 0 sealed memfd with the source, 1/2 the snippet's stdout and
 * stderr pipes (read by the broker directly), 3 SOCK_SEQPACKET to the broker.
 *
 * sandbox = docker (profile "engine", job->has_engine): the snippet runs in
 * a container and nothing of it runs here.  C execs the container engine's
 * CLI (job->engine.run) instead of python3, with the same fds.  Around it S
 * runs the engine's other commands, each in its own child confined exactly
 * like C (enter_sandbox, the "engine" profile): the setup steps before C
 * (job->engine.steps, in order; a failure is a setup_error named after the
 * step, carrying the engine's last line), the OOM query after C exits 137,
 * and the kill command after a timeout, a cancel, an exit of 137 or a CLI
 * killed by a signal (killing the CLI does not stop the container).  See
 * worker/engine.c.
 *
 * The steps a setup_error names, in the order they run (proto/PROTOCOL.md
 * keeps the normative list):
 *   S, before the fork   fds, supervisor, subreaper, job, scratch, env,
 *                        secrets, pipe, signals; engine: each engine step by its
 *                        own name (or pipe, fds, fork, supervise when S
 *                        cannot start or watch it, or the enter_sandbox()
 *                        step its child failed at); fork
 *   enter_sandbox()      signals, setsid, pdeathsig, fds,
 *                        secrets, caps, cwd, no-new-privs, landlock,
 *                        seccomp-build,
 *                        rlimits, seccomp, exec-gate, verify, exec
 *   S, supervising       timeout, supervise
 */
#ifndef KOTOBA_WORKER_H
#define KOTOBA_WORKER_H

#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "proto/status.h"

enum {
	FD_CODE = 0,
	FD_STDOUT = 1,
	FD_STDERR = 2,
	FD_BROKER = 3,
};


/* What C sends over the report channel when a step fails: one fixed-size
 * SOCK_SEQPACKET message, so it arrives whole or not at all. */
#define SETUP_STEP_MAX 32
struct setup_report {
	char step[SETUP_STEP_MAX];
	int err;
	char msg[320]; /* engines say a lot: podman's "cannot connect" is 170 bytes */
};

/* What S learns from C over the report channel besides a failed step:
 * two bytes, a tag and the CHILD_GATE_* bits saying which descriptors
 * follow, carrying as SCM_RIGHTS the exec gate's listener and, in this
 * order: when the secrets step made one, C's mount namespace after it
 * (secrets.c), which S keeps until it has reported the run's end, so that
 * tearing the namespace down (an RCU grace period) never delays that
 * report; the roots of the run's own scratch mount and /dev/shm, which
 * tell S where the snippet may change modes and times (fileattr.c).  One
 * message: C execs right after it. */
#define CHILD_MSG_GATE 'G'
/* The same, when C made the namespace itself (not joined a kept one): S
 * may then hand it to the broker after the run (PROTOCOL.md, "masks"). */
#define CHILD_MSG_GATE_NEW_MASKS 'N'
#define CHILD_GATE_MOUNTS 1
#define CHILD_GATE_SCRATCH 2
#define CHILD_GATE_SHM 4
/* The egress proxy's listening socket in the run's network namespace
 * (netns.c), which S passes to the broker with `ready`. */
#define CHILD_GATE_NET 8
#define CHILD_GATE_FDS_MAX 5 /* the listener and the four above */
/* A profile without an exec gate (approved, with [egress] approved =
 * proxy): the egress listener alone, tag and CHILD_GATE_NET, before
 * the exec. */
#define CHILD_MSG_NET 'E'

/* The engine's command lines (job->engine), NUL-terminated copies built by
 * S: each argv is NULL-terminated and malloc'd, argv[0] an absolute path;
 * NULL where the job has no such command. */
struct engine_plan {
	size_t n_steps;
	char **steps[PROTO_STEPS_MAX];
	char step_names[PROTO_STEPS_MAX][SETUP_STEP_MAX];
	char **run, **kill, **oom;
	char **outputs; /* PROTO_OUTPUT_DIR_ARG replaced by scratch's output directory */
};

/* What a confined child execs at the end of enter_sandbox(). */
struct sandbox_exec {
	const char *path;       /* absolute: execve does not search PATH */
	char *const *argv;      /* NULL-terminated */
	char *const *envp;
	int report_fd;          /* the child's end of its report channel */
	int receipt_fd;         /* moved to PYTHON_RECEIPT_FD; -1: none */
	int stdio[3];           /* moved onto fds 0-2 first; -1: keep that fd */
};

/* One place of the secret set that exists at run start (secrets.c). */
struct secret_mask {
	char *path; /* absolute, malloc'd */
	bool dir;   /* masked by an empty directory, else by an empty file */
	bool real;  /* path is what it resolves to (no symlink, no "..") */
	dev_t dev;  /* the file masked: a mask shows as another */
	ino_t ino;
};

/* Everything C needs, built by S before the fork.  C builds only its
 * seccomp program itself (it depends on C's pid), before the rlimits. */
/* The snippet's output directory, $KOTOBA_OUTPUT_DIR, under scratch. */
#define OUTPUT_LEAF "out"

struct plan {
	const struct msg_job *job; /* strings point into the job frame */
	bool ready_sent;           /* `ready` went to the broker: never again */
	char python[PATH_MAX];     /* "" for "engine", which runs no python3 */
	char cwd[PATH_MAX];
	enum proto_profile profile; /* one of PROFILES_JOB */
	char scratch[PATH_MAX];    /* "" until created */
	char **envp;               /* NULL-terminated, malloc'd */
	struct engine_plan engine; /* profile "engine" only */
	unsigned int landlock_abi; /* the ABI C applies; 0: none (see landlock.h) */
	struct secret_mask *masks; /* unattended: what C masks; NULL: nothing */
	size_t n_masks;
	/* The masks' namespace an earlier run kept (PROTOCOL.md, "masks"):
	 * its descriptor from the job (-1: none), and whether its key is
	 * this run's, so that C joins it rather than making one. */
	int kept_masks;
	bool join_kept;
	uint8_t masks_key[PROTO_MASKS_KEY_LEN]; /* this run's, when n_masks > 0 */
	pid_t supervisor;
	/* C's report channel, a SOCK_SEQPACKET pair, both ends CLOEXEC: C
	 * sends a struct setup_report when a step fails, or the exec gate's
	 * listener; EOF means C exec'd (or died).  Each engine command gets
	 * a channel of its own (engine.c). */
	int err_r, err_w;
	/* The write end of the interpreter's receipt pipe (receipt.c), for
	 * C; -1: none (the engine profile, which runs no python3 here). */
	int receipt_w;
	char receipt_py[PATH_MAX]; /* PYTHON_RECEIPT_FILE beside the worker */
	/* A warm job (PROTOCOL.md, "go"): C's stdin is code_rx, one end of
	 * a socket pair; S keeps code_tx and hands C the code's memfd
	 * through it when `go` brings it (code_fd, -1 until then).  The
	 * wall clock is the job's, or go's.  What C was built from that can
	 * change before `go` comes is noted at start (warm_still_fits). */
	int code_tx, code_rx, code_fd;
	int out_keep[2]; /* S's copies of fds 1 and 2 for a cold child, until `go` */
	uint64_t timeout_ms;
	struct stat cwd_st, python_st;
	char preload[PROTO_PRELOAD_MAX * (PROTO_MODULE_NAME_MAX + 1)]; /* "a,b.c" */
};

/* What the snippet's interpreter reported refused, not yet judged
 * (receipt.c): one distinct kind and target, and how often. */
struct receipt_report {
	char kind[16];
	char target[PROTO_BLOCKED_TARGET_MAX + 1];
	uint64_t count;
};

#define RECEIPT_REPORTS_MAX 64           /* distinct reports S judges */
#define RECEIPT_BYTES_MAX (256u << 10)   /* of reports S reads in all */
#define RECEIPT_LINE_MAX 1024            /* one report, newline included */
#define RECEIPT_READ_ROUND (64u << 10)   /* of reports S reads per poll round */

/* The run's receipt as S builds it, and the interpreter's pipe. */
struct receipt_log {
	struct receipt blocked;   /* what `finished` carries */
	int fd;                   /* read end of the reports; -1: none */
	size_t bytes;             /* read so far */
	char line[RECEIPT_LINE_MAX];
	size_t line_len;
	bool line_too_long;
	size_t n_reports;
	struct receipt_report reports[RECEIPT_REPORTS_MAX];
};

/* S's side of the exec gate (execgate.c). */
struct exec_gate {
	int fd;             /* the seccomp listener; -1: none */
	pid_t child;        /* C: the only process whose exec is let through */
	bool spent;         /* C's exec has been let through */
	void *req, *resp;   /* struct seccomp_notif(_resp), as the kernel sizes them */
	size_t req_len, resp_len;
	struct receipt *blocked; /* where each refused exec is written */
	/* The mounts (statx's mount id) beneath which the snippet may change
	 * modes and times: the run's own scratch and /dev/shm; 0: none. */
	uint64_t own_mounts[2];
	/* The Landlock ABI in force for the snippet: with 0 (the default
	 * until S sets it) S refuses every open for writing itself. */
	unsigned int landlock_abi;
};

/* main.c: S gives up, reporting a setup failure (never returns). */
__attribute__((noreturn, format(printf, 4, 5))) void
fail_setup(struct plan *p, const char *step, int err, const char *fmt, ...);

/* plan.c: turn the job into a plan (copies, env, engine commands, scratch
 * dir). */
int plan_paths(struct plan *p, char *err, size_t errlen);
int plan_scratch(struct plan *p, char *err, size_t errlen);
int plan_env(struct plan *p, char *err, size_t errlen);
int plan_engine(struct plan *p, char *err, size_t errlen);
void plan_remove_scratch(struct plan *p);
void plan_free(struct plan *p);

/* enter.c: a confined child's way into the sandbox (C, and each engine
 * command), ending in the exec of x (never returns). */
__attribute__((noreturn)) void enter_sandbox(const struct plan *p, const struct sandbox_exec *x);

/* engine.c: the engine's commands around C (profile "engine"). */
#define CONFINED_OUT_MAX 4096 /* the tail of a command's output that S keeps */

enum confined_end {
	CONFINED_EXITED,    /* status holds its wait status */
	CONFINED_TIMED_OUT, /* killed at the deadline */
	CONFINED_CANCELLED, /* the broker cancelled (or S was told to stop) */
	CONFINED_FAILED,    /* not run: rep names the step (S's or the child's) */
};

/* One command run as a confined child: stdin /dev/null, stdout and stderr
 * into a pipe S reads, waited for with a deadline. */
struct confined {
	const char *name;            /* its step name */
	char *const *argv;           /* argv[0] absolute */
	uint64_t timeout_ms;         /* 0: no deadline */
	bool cancellable;            /* stop at the broker's EOF (or a frame) */
	enum confined_end end;
	int status;
	struct setup_report rep;
	char out[CONFINED_OUT_MAX];  /* the last bytes of its output */
	size_t out_len;
};

/* Runs c->argv in a child that enters the sandbox of the plan's profile,
 * waits until it exits, its deadline passes or (cancellable) the broker
 * stops the run, kills everything it started, and fills the rest of *c.
 * sigfd is S's signalfd (SIGCHLD and the stop signals).  It reaps every
 * child of S: call it only while no other child (C) is alive. */
void run_confined(struct plan *p, int sigfd, struct confined *c);
/* The setup steps, in order, within the job's timeout for all of them.
 * Returns 0 when all succeeded, 1 with *rep filled when one failed, -1
 * when the broker cancelled meanwhile. */
int engine_steps(struct plan *p, int sigfd, struct setup_report *rep);
/* After C exited 137: true when the engine says the container was killed
 * for want of memory.  Sets *cancelled when the broker cancelled meanwhile. */
bool engine_oom_killed(struct plan *p, int sigfd, bool *cancelled);
/* Stops the container after a timeout, a cancel or an abnormal end. */
void engine_kill(struct plan *p, int sigfd);
/* After a snippet that ended by itself: what it left in the container's
 * output directory, copied into the run's.  Sets *cancelled as above.
 * False when the copy did not end well (it may have stopped halfway). */
bool engine_copy_outputs(struct plan *p, int sigfd, bool *cancelled);


/* execgate.c: S answers the unattended profile's exec notifications. */
int exec_gate_open(struct exec_gate *g, int fd, pid_t child, struct receipt *blocked);
bool exec_gate_serve(struct exec_gate *g);
/* Takes a root of the run's own places (CHILD_GATE_SCRATCH, _SHM), and
 * closes it: 0 or -errno. */
int exec_gate_own_place(struct exec_gate *g, size_t which, int fd);

struct seccomp_notif;
struct seccomp_notif_resp;
/* fileattr.c: S's answer to a snippet's chmod or utime family call:
 * true when req is one (resp then holds the answer). */
bool file_attr_answer(const struct exec_gate *g, const struct seccomp_notif *req,
		      struct seccomp_notif_resp *resp);
/* fileattr.c: the write witness, S's answer to an open for writing:
 * records it in g->blocked when the sandbox refuses it, then lets the
 * kernel decide or refuses it where the filter holds the rule.  False
 * when req is not an open. */
bool write_witness_answer(const struct exec_gate *g, const struct seccomp_notif *req,
			  struct seccomp_notif_resp *resp);
void exec_gate_close(struct exec_gate *g);

/* receipt.c: what the sandbox refused in this run. */
bool receipt_find_program(char *path, size_t len);
int receipt_open_pipe(struct receipt_log *l, int *write_end);
void receipt_read(struct receipt_log *l);
bool receipt_wants_bytes(const struct receipt_log *l);
void receipt_forget(struct receipt_log *l);
void receipt_conclude(struct receipt_log *l, const struct plan *p);

/* plan.c: whether the run's network is the egress proxy (unattended, and
 * approved with the job's `proxy`). */
bool plan_has_egress(const struct plan *p);
/* secrets.c: a user namespace of C's own, its uid and gid mapped to
 * themselves, for a run that entered none (approved with `proxy`): what
 * the network namespace is made in.  0 or -errno with *what. */
int own_user_namespace(const char **what);
/* netns.c: C, after the secrets step, when plan_has_egress(): the run's
 * own network namespace with loopback up, and *listener the egress
 * proxy's listening socket in it (EGRESS_PORT); *listener -1 for other
 * runs.  0 or -errno with *what naming the failed call. */
#define EGRESS_BACKLOG 64
int private_network(const struct plan *p, int *listener, const char **what);

/* supervise.c: S's life after the fork; returns the exit status. */
int supervise(struct plan *p, pid_t child, int sigfd, struct receipt_log *log);
/* tree.c: every process below S (it is their subreaper). */
void signal_descendants(int sig);

/* report.c: frames to the broker; false when fd 3 is unusable. */
/* egress: the proxy's listening socket, sent with the frame; -1: none. */
bool report_ready(pid_t pid, uint64_t landlock_abi, int egress);
bool report_setup_error(const char *step, int err, const char *msg);
bool report_finished(const struct run_result *r, const struct receipt *blocked,
		     uint64_t files_left_out);
bool report_masks(int mounts, const uint8_t key[PROTO_MASKS_KEY_LEN]);
bool report_warm(pid_t pid);

/* outputs.c: the files of $KOTOBA_OUTPUT_DIR that go to the client. */
struct output_files {
	size_t n;
	int fd[PROTO_FILES_MAX];
	uint64_t size[PROTO_FILES_MAX];
	char name[PROTO_FILES_MAX][PROTO_FILE_NAME_MAX + 1];
	uint64_t total;
	uint64_t left_out;
};
void outputs_collect(const struct plan *p, struct output_files *o);
void outputs_send(struct output_files *o);

/* warm.c: a warm job's life before `go` and the hand-over. */
int plan_warm(struct plan *p, char *err, size_t errlen);
int warm_still_fits(struct plan *p, pid_t child, bool *fits, char *err, size_t errlen);
int warm_hand_over(struct plan *p);
void warm_keep_outputs(struct plan *p);
void warm_drop_outputs(struct plan *p);
/* supervise()'s return when `go` came but the interpreter no longer fits
 * what the run would be built from now: S starts a cold child instead. */
#define SUPERVISE_COLD (-2)

#endif
