/* SPDX-License-Identifier: MIT
 * kotoba-worker, the supervisor (S): read one job from the broker, prepare
 * everything that allocates, fork the snippet child, supervise it.  For
 * the engine profile (sandbox = docker), first run the engine's setup
 * steps, each a confined child of its own (engine.c).
 *
 * Exec'd by the broker with an empty environment and exactly fds 0-3
 * (see worker.h).  Every failure before the snippet runs is reported as a
 * `setup_error` naming the step, and S exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/limits.h"
#include "worker/landlock.h"
#include "worker/seccomp.h"
#include "worker/secrets.h"
#include "worker/util.h"
#include "worker/worker.h"

/* AddressSanitizer: gcc says __SANITIZE_ADDRESS__, clang __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZER_BUILD 1
#endif
#endif
#ifndef SANITIZER_BUILD
#define SANITIZER_BUILD 0
#endif

static uint8_t *job_frame;
static struct msg job_msg;

/* Nothing of the snippet runs (any more): clean up and exit. */
__attribute__((noreturn)) static void give_up(struct plan *p)
{
	plan_remove_scratch(p);
	plan_free(p);
	free(job_frame);
	exit(WORKER_EXIT_FAIL);
}

void fail_setup(struct plan *p, const char *step, int err, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	report_setup_error(step, err, msg);
	give_up(p);
}

/* Without fd 3 there is nobody to report to: say so on stderr. */
static void check_broker_fd(void)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(FD_BROKER, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET) {
		dprintf(FD_STDERR, "kotoba-worker: fd 3 must be the broker's SOCK_SEQPACKET "
				   "socket; this program is started by kotoba-brokerd\n");
		exit(WORKER_EXIT_FAIL);
	}
}

/* fds 0-2 are the snippet's code and output streams. */
static void check_std_fds(struct plan *p)
{
	for (int fd = FD_CODE; fd <= FD_STDERR; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			fail_setup(p, step_name(STEP_FDS), EBADF, "fd %d is not open", fd);
}

static void harden_supervisor(struct plan *p)
{
	/* A write to a vanished broker must fail with EPIPE, not kill S
	 * before it has killed the snippet. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fail_setup(p, step_name(STEP_SUPERVISOR), errno, "ignoring SIGPIPE");
	/* The snippet may run as our uid: without this (and with no Yama)
	 * it could open /proc/<S>/mem and rewrite its supervisor. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail_setup(p, step_name(STEP_SUPERVISOR), errno, "prctl(PR_SET_DUMPABLE)");
	/* Orphans of the snippet (double fork, setsid) reparent to S, so
	 * they can be found and killed. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fail_setup(p, step_name(STEP_SUBREAPER), errno, "prctl(PR_SET_CHILD_SUBREAPER)");
}

static void read_job(struct plan *p)
{
	struct proto_error perr = { 0 };
	ssize_t n;

	n = frame_read_blocking_fd(FD_BROKER, PROTO_FRAME_MAX_DEFAULT, &job_frame,
				   &p->kept_masks);
	if (n == 0)
		exit(WORKER_EXIT_FAIL); /* the broker left before sending a job */
	if (n < 0)
		fail_setup(p, step_name(STEP_JOB), (int)-n, "reading the job frame: %s",
			   strerror((int)-n));
	if (proto_decode(job_frame, (size_t)n, PROTO_SNIPPET_MAX_DEFAULT, &job_msg, &perr) !=
	    MSG_JOB) {
		if (job_msg.type == MSG_UNKNOWN)
			fail_setup(p, step_name(STEP_JOB), EPROTO, "bad job frame (%s): %s",
				   perr.code ? perr.code : "?", perr.message);
		fail_setup(p, step_name(STEP_JOB), EPROTO, "expected a job frame, got '%s'",
			   msg_type_name(job_msg.type));
	}
	p->job = &job_msg.u.job;
	/* A namespace without its key is nothing to join (nor a key alone). */
	if (p->kept_masks >= 0 && !p->job->has_masks_key) {
		close(p->kept_masks);
		p->kept_masks = -1;
	}
}

static void prepare(struct plan *p)
{
	char err[200] = "";
	int rc;

	if ((rc = plan_paths(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_JOB), -rc, "%s", err);
	if ((rc = plan_scratch(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_SCRATCH), -rc, "%s", err);
	if ((rc = plan_env(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_ENV), -rc, "%s", err);
	/* Before the engine's commands, which carry the container's masks. */
	if ((rc = plan_secrets(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_SECRETS), -rc, "%s", err);
	if ((rc = plan_engine(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_JOB), -rc, "%s", err);
	if ((rc = plan_warm(p, err, sizeof(err))) < 0)
		fail_setup(p, step_name(STEP_WARM), -rc, "%s", err);
	/* Probed here, at start, so that C applies and S reports the same
	 * ABI (ready.landlock_abi). */
	p->landlock_abi = landlock_plan_abi(p->job, p->profile);
	/* Runs that join a kept namespace share its user namespace, across
	 * which the kernel's ptrace checks no longer part them: Landlock's
	 * own keeps one run out of another's /proc/<pid>/mem.  Without it,
	 * every run masks in namespaces of its own. */
	if (!p->landlock_abi)
		p->join_kept = false;
}

/* The interpreter's reports of what was refused (receipt.c), unattended
 * only: the approved profile refuses none of what they cover (a refusal
 * there is the user's own permissions), and the engine profile runs no
 * python3 here. */
static void open_receipt_pipe(struct plan *p, struct receipt_log *log)
{
	int rc;

	log->fd = -1;
	if (p->profile != PROFILE_UNATTENDED ||
	    !receipt_find_program(p->receipt_py, sizeof(p->receipt_py)))
		return;
	rc = receipt_open_pipe(log, &p->receipt_w);
	if (rc < 0)
		fail_setup(p, step_name(STEP_PIPE), -rc, "creating the receipt pipe");
}

static void open_report_channel(struct plan *p)
{
	int rc = open_report_pair(&p->err_r, &p->err_w);

	if (rc < 0)
		fail_setup(p, step_name(STEP_PIPE), -rc, "creating the report channel");
}

/* Engine: the setup steps run before C, each confined like C.  A failed
 * step is this run's setup error; a cancel meanwhile ends it quietly. */
static void run_engine_steps(struct plan *p, int sigfd)
{
	struct setup_report rep;

	switch (engine_steps(p, sigfd, &rep)) {
	case 0:
		return;
	case 1:
		fail_setup(p, rep.step, rep.err, "%s", rep.msg);
	default:
		give_up(p);
	}
}

/* What C execs: python3 reading the code from stdin, or (engine) the
 * engine CLI's run command, which hands the same stdin to the container.
 * PYTHON_SNIPPET_ARGV says why python3 is started isolated, and what its
 * arguments after it are: the receipt's fd and program, and for a warm
 * job the preload list (its stdin then the socket the code comes by; a
 * cold child after a warm one has the code's memfd instead). */
__attribute__((noreturn)) static void enter_snippet_child(struct plan *p)
{
	static char *python_argv[] = { (char *)"python3", PYTHON_SNIPPET_ARGV, NULL, NULL, NULL,
				       NULL };
	char **args = python_argv + sizeof(python_argv) / sizeof(*python_argv) - 4;
	struct sandbox_exec x = { .path = p->python, .argv = python_argv, .envp = p->envp,
				  .report_fd = p->err_w, .receipt_fd = p->receipt_w,
				  .stdio = { -1, -1, -1 } };
	bool warm = p->code_rx >= 0;

	if (p->engine.run) {
		x.path = p->engine.run[0];
		x.argv = p->engine.run;
	} else if (p->receipt_w >= 0 || warm) {
		args[0] = (char *)(p->receipt_w >= 0 ? PYTHON_RECEIPT_FD_ARG : "");
		args[1] = p->receipt_w >= 0 ? p->receipt_py : (char *)"";
		args[2] = warm ? p->preload : NULL;
	}
	if (warm) {
		x.stdio[FD_CODE] = p->code_rx;
	} else if (p->code_fd >= 0) {
		x.stdio[FD_CODE] = p->code_fd;
		x.stdio[FD_STDOUT] = p->out_keep[0];
		x.stdio[FD_STDERR] = p->out_keep[1];
	}
	enter_sandbox(p, &x);
}

/* SIGCHLD through a signalfd, so one poll() watches the broker, the
 * child and the clock.  SIGTERM/SIGINT/SIGHUP too: whoever sends them
 * means "stop", and the default action would leave the snippet running. */
static int open_signalfd(struct plan *p)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		fail_setup(p, step_name(STEP_SIGNALS), errno, "blocking SIGCHLD");
	fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		fail_setup(p, step_name(STEP_SIGNALS), errno, "signalfd");
	return fd;
}

/* S never reads the code or writes the snippet's output.  Its copies of
 * the two pipes' write ends go as soon as C holds its own, so the broker
 * sees EOF the moment the snippet's last process lets go, not when S is
 * done.  Everything S reports goes through fd 3 from here on; the
 * /dev/null in their place keeps fds 0-2 from being reused.
 *
 * A sanitizer build keeps stderr: its reports (S's leaks at exit, say)
 * must reach someone, and the test suite reads them there. */
static void release_std_streams(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return; /* then the broker sees EOF when S exits, as it would */
	dup2(fd, FD_CODE);
	dup2(fd, FD_STDOUT);
#if !SANITIZER_BUILD
	dup2(fd, FD_STDERR);
#endif
	close(fd);
}

static int usage(void)
{
	fprintf(stderr, "usage: kotoba-worker            (started by kotoba-brokerd)\n"
			"       kotoba-worker --list-syscall-groups\n");
	return 64;
}

/* Forks C: its report channel and receipt pipe first, S's copies of
 * C's ends closed after. */
static pid_t start_child(struct plan *p, struct receipt_log *log)
{
	pid_t pid;

	open_report_channel(p);
	open_receipt_pipe(p, log);
	pid = fork();
	if (pid < 0) {
		char why[160];
		int err = errno;

		limit_named(err, "the worker", why, sizeof(why));
		fail_setup(p, step_name(STEP_FORK), err, "fork: %s", why);
	}
	if (pid == 0)
		enter_snippet_child(p);
	close(p->err_w);
	p->err_w = -1;
	if (p->receipt_w >= 0)
		close(p->receipt_w);
	p->receipt_w = -1;
	if (p->code_rx >= 0)
		close(p->code_rx);
	p->code_rx = -1;
	warm_drop_outputs(p);
	return pid;
}

/* `go` came, but the warm C no longer fits (warm.c): it is gone, and a
 * cold child runs the code under what holds now. */
static pid_t start_cold_child(struct plan *p, struct receipt_log *log)
{
	if (p->code_tx >= 0)
		close(p->code_tx);
	p->code_tx = -1;
	if (p->err_r >= 0)
		close(p->err_r);
	p->err_r = -1;
	if (log->fd >= 0)
		close(log->fd);
	memset(log, 0, sizeof(*log));
	return start_child(p, log);
}

int main(int argc, char **argv)
{
	static struct plan plan = { .err_r = -1, .err_w = -1, .kept_masks = -1, .receipt_w = -1,
				    .code_tx = -1, .code_rx = -1, .code_fd = -1,
				    .out_keep = { -1, -1 } };
	static struct receipt_log log;
	pid_t pid;
	int sigfd, rc;

	if (argc == 2 && !strcmp(argv[1], "--list-syscall-groups")) {
		fputs(seccomp_description, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (argc > 1)
		return usage();
	check_broker_fd();
	harden_supervisor(&plan);
	check_std_fds(&plan);
	read_job(&plan);
	prepare(&plan);
	sigfd = open_signalfd(&plan);
	plan.supervisor = getpid();
	if (plan.engine.run)
		run_engine_steps(&plan, sigfd);
	warm_keep_outputs(&plan);
	pid = start_child(&plan, &log);
	release_std_streams();
	rc = supervise(&plan, pid, sigfd, &log);
	if (rc == SUPERVISE_COLD)
		rc = supervise(&plan, start_cold_child(&plan, &log), sigfd, &log);
	close(sigfd);
	plan_free(&plan);
	free(job_frame);
	return rc;
}
