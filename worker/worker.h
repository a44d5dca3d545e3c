/* SPDX-License-Identifier: MIT
 * kotoba-worker: one per snippet.  The process the broker execs is the
 * supervisor (S); it prepares everything that allocates, forks the snippet
 * child (C), which confines itself and execs python3, then supervises the
 * run and reports on fd 3.
 *
 * fds at exec: 0 sealed memfd with the source, 1/2 the snippet's stdout and
 * stderr pipes (read by the broker directly), 3 SOCK_SEQPACKET to the broker.
 */
#ifndef KOTOBA_WORKER_H
#define KOTOBA_WORKER_H

#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <sys/types.h>

#include "proto/proto.h"

enum {
	FD_CODE = 0,
	FD_STDOUT = 1,
	FD_STDERR = 2,
	FD_BROKER = 3,
};

#define WORKER_EXIT_OK 0
#define WORKER_EXIT_FAIL 1     /* setup failed, or the broker went away */
#define WORKER_CHILD_DIED 127  /* C could not be set up (it reported why) */

/* What C sends over the report channel when a step fails: one fixed-size
 * SOCK_SEQPACKET message, so it arrives whole or not at all. */
struct setup_report {
	char step[32];
	int err;
	char msg[160];
};

/* What S learns from C over the report channel besides a failed step:
 * one byte carrying the exec gate's listener as SCM_RIGHTS. */
#define CHILD_MSG_GATE 'G'

/* Everything C needs, built by S before the fork.  C builds only its
 * seccomp program itself (it depends on C's pid), before the rlimits. */
struct plan {
	const struct msg_job *job; /* strings point into the job frame */
	char python[PATH_MAX];
	char cwd[PATH_MAX];
	char profile[16];
	char scratch[PATH_MAX];    /* "" until created */
	char **envp;               /* NULL-terminated, malloc'd */
	unsigned int landlock_abi; /* the ABI C applies; 0: none (see landlock.h) */
	gid_t groups[PROTO_GROUPS_MAX];
	pid_t supervisor;
	/* The report channel, a SOCK_SEQPACKET pair, both ends CLOEXEC: C
	 * sends a struct setup_report when a step fails, or the exec gate's
	 * listener; EOF means C exec'd python3 (or died). */
	int err_r, err_w;
};

/* S's side of the exec gate (execgate.c). */
struct exec_gate {
	int fd;             /* the seccomp listener; -1: none */
	pid_t child;        /* C: the only process whose exec is let through */
	bool spent;         /* C's exec has been let through */
	void *req, *resp;   /* struct seccomp_notif(_resp), as the kernel sizes them */
	size_t req_len, resp_len;
};

/* main.c: S gives up, reporting a setup failure (never returns). */
__attribute__((noreturn, format(printf, 4, 5))) void
fail_setup(struct plan *p, const char *step, int err, const char *fmt, ...);

/* plan.c: turn the job into a plan (copies, env, scratch dir). */
int plan_paths(struct plan *p, char *err, size_t errlen);
int plan_scratch(struct plan *p, char *err, size_t errlen);
int plan_env(struct plan *p, char *err, size_t errlen);
void plan_remove_scratch(struct plan *p);
void plan_free(struct plan *p);

/* enter.c: C's way into the sandbox, ending in exec (never returns). */
__attribute__((noreturn)) void enter_sandbox(const struct plan *p);

/* execgate.c: S answers the unattended profile's exec notifications. */
int exec_gate_open(struct exec_gate *g, int fd, pid_t child);
bool exec_gate_serve(struct exec_gate *g);
void exec_gate_close(struct exec_gate *g);

/* supervise.c: S's life after the fork; returns the exit status. */
int supervise(struct plan *p, pid_t child, int sigfd);

/* tree.c: every process below S (it is their subreaper). */
void signal_descendants(int sig);

/* report.c: frames to the broker; false when fd 3 is unusable. */
bool report_ready(pid_t pid, uint64_t landlock_abi);
bool report_setup_error(const char *step, int err, const char *msg);
bool report_finished(const struct run_result *r);

#endif
