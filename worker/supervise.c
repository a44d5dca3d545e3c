/* SPDX-License-Identifier: MIT
 * S after the fork: wait for C to exec (or say why it could not), report
 * `ready`, then watch three things until the snippet is over: the broker
 * (fd 3), C's exit (SIGCHLD via signalfd) and the wall clock.  Whatever
 * ends the run, every descendant is killed before S reports and exits:
 * no process of a snippet outlives it.  With the engine profile, C is the
 * engine's CLI and the container may outlive it: the engine's oom and
 * kill commands run after C (engine.c), before S reports.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/seccomp.h"
#include "worker/util.h"
#include "worker/worker.h"

struct supervision {
	struct plan *plan;
	pid_t child;
	int sigfd;
	struct exec_gate gate;      /* unattended: answers the snippet's execs */
	struct receipt_log *log;    /* what the sandbox refused */
	struct output_files outputs; /* $KOTOBA_OUTPUT_DIR, for the client */
	bool outputs_lost;          /* engine: the copy out of the container failed */
	uint64_t t_fork, t_end;    /* monotonic, microseconds */
	uint64_t deadline;          /* 0: no wall-clock limit */
	uint64_t kill_at;           /* after the timeout; 0: at once */
	bool ready, reaped, timed_out, failed, broker_gone;
	bool awaiting_go;           /* a warm job before `go` (warm.c) */
	bool go_pending;            /* `go` came before python3 said it waits */
	bool warm_sent, go_cold;    /* `warm` reported; `go` came, C does not fit */
	bool oom_killed;            /* engine: the container ran out of memory */
	int mounts;                 /* C's masks' mount namespace (CHILD_MSG_GATE); -1: none */
	int egress;                 /* the egress proxy's listener (CHILD_GATE_NET); -1: none */
	bool new_masks;             /* C made it: the broker may keep it */
	struct setup_report rep;
	int status;
	struct rusage ru;
};

static void note_reaped(struct supervision *r, pid_t pid, int status, const struct rusage *ru)
{
	if (pid != r->child)
		return; /* an orphan of the snippet: nothing to record */
	r->reaped = true;
	r->status = status;
	r->ru = *ru;
	r->t_end = monotonic_us();
}

/* Reaps whatever has exited, C or orphans reparented to us. */
static void reap_exited(struct supervision *r)
{
	struct rusage ru;
	pid_t pid;
	int status;

	while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0)
		note_reaped(r, pid, status, &ru);
}

/* The group first (one call reaches what C forked without setsid), then
 * the tree.  Only while C is unreaped: afterwards its pid, and so the
 * group id, may belong to someone else. */
static void signal_all(struct supervision *r, int sig)
{
	if (!r->reaped)
		kill(-r->child, sig);
	signal_descendants(sig);
}

/* SIGKILL everything below S until S has no children left.  A process
 * killed mid-fork leaves its new child to us; the next round gets it.
 *
 * No child at all (ECHILD) means no descendant either: S is their
 * subreaper, and a dying process's children are handed to S before it
 * can be reaped, so every live descendant hangs from S through live or
 * unreaped ones.  The usual end, a snippet that started nothing, then
 * costs one wait4 and no walk through /proc. */
static void kill_all(struct supervision *r)
{
	struct rusage ru;
	pid_t pid;
	int status;

	for (;;) {
		pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid > 0) {
			note_reaped(r, pid, status, &ru);
			continue;
		}
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break; /* ECHILD: nothing left */
		signal_all(r, SIGKILL);
		pid = wait4(-1, &status, 0, &ru);
		if (pid > 0)
			note_reaped(r, pid, status, &ru);
		else if (errno != EINTR)
			break;
	}
}

static void drain_signals(struct supervision *r)
{
	struct signalfd_siginfo si;

	while (read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		/* SIGTERM/SIGINT/SIGHUP to S: whoever started us wants
		 * the run stopped, as when the broker closes fd 3. */
		if (si.ssi_signo != SIGCHLD)
			r->broker_gone = true;
	}
	reap_exited(r);
}

static void child_protocol_error(struct supervision *r, int err, const char *what)
{
	snprintf(r->rep.step, sizeof(r->rep.step), "%s", step_name(STEP_SUPERVISE));
	r->rep.err = err;
	snprintf(r->rep.msg, sizeof(r->rep.msg), "%s", what);
	r->failed = true;
}

/* The nth descriptor a message carried (of up to CHILD_GATE_FDS_MAX), or
 * -1. */
static int received_fd_n(struct msghdr *mh, size_t nth)
{
	struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
	int fds[CHILD_GATE_FDS_MAX] = { -1, -1, -1, -1, -1 };

	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len >= CMSG_LEN(sizeof(int)) &&
	    cm->cmsg_len <= CMSG_LEN(CHILD_GATE_FDS_MAX * sizeof(int)) &&
	    (cm->cmsg_len - CMSG_LEN(0)) % sizeof(int) == 0)
		memcpy(fds, CMSG_DATA(cm), cm->cmsg_len - CMSG_LEN(0));
	return nth < CHILD_GATE_FDS_MAX ? fds[nth] : -1;
}

static int received_fd(struct msghdr *mh)
{
	return received_fd_n(mh, 0);
}

/* C hands over the exec gate's listener, then execs: the gate must be
 * served from now on, or that exec waits forever.  With it come the
 * descriptors `have` names (worker.h, CHILD_GATE_*), in that order. */
static void take_gate(struct supervision *r, struct msghdr *mh, unsigned int have)
{
	static const unsigned int places[] = { CHILD_GATE_SCRATCH, CHILD_GATE_SHM };
	int fd = received_fd(mh);
	size_t next = 1;
	int rc;

	if (fd < 0 || r->gate.fd >= 0 || !seccomp_has_exec_gate(profile_name(r->plan->profile))) {
		for (size_t i = 0; i < CHILD_GATE_FDS_MAX; i++)
			if (received_fd_n(mh, i) >= 0)
				close(received_fd_n(mh, i));
		child_protocol_error(r, EPROTO, "unexpected exec gate from the child");
		return;
	}
	rc = exec_gate_open(&r->gate, fd, r->child, &r->log->blocked);
	r->gate.landlock_abi = r->plan->landlock_abi;
	if (rc < 0)
		child_protocol_error(r, -rc, "cannot serve the exec gate");
	if (have & CHILD_GATE_MOUNTS) {
		r->mounts = received_fd_n(mh, next++);
		r->new_masks = r->rep.step[0] == CHILD_MSG_GATE_NEW_MASKS && r->mounts >= 0;
	}
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		if (!(have & places[i]))
			continue;
		rc = exec_gate_own_place(&r->gate, i, received_fd_n(mh, next++));
		if (rc < 0)
			child_protocol_error(r, -rc, "cannot read the run's own places");
	}
	if (have & CHILD_GATE_NET)
		r->egress = received_fd_n(mh, next++);
}

/* Without an exec gate (approved with [egress] approved = proxy), the
 * egress listener comes alone, once, before the exec. */
static void take_network(struct supervision *r, struct msghdr *mh, unsigned int have)
{
	int fd = received_fd(mh);

	if (fd < 0 || have != CHILD_GATE_NET || r->egress >= 0 || !plan_has_egress(r->plan) ||
	    seccomp_has_exec_gate(profile_name(r->plan->profile))) {
		for (size_t i = 0; i < CHILD_GATE_FDS_MAX; i++)
			if (received_fd_n(mh, i) >= 0)
				close(received_fd_n(mh, i));
		child_protocol_error(r, EPROTO, "unexpected egress listener from the child");
		return;
	}
	r->egress = fd;
}

/* `ready`, with the egress proxy's listener when the run has one: from
 * then on the broker and the proxy hold it, S does not. */
/* Once per worker: a warm job reports it before the code goes to python3
 * (hand_over), and a cold child that replaces that python3 then does not
 * report it again. */
static bool send_ready(struct supervision *r)
{
	bool sent = r->plan->ready_sent ||
		    report_ready(r->child, r->plan->landlock_abi, r->egress);

	r->plan->ready_sent = true;
	if (r->egress >= 0)
		close(r->egress);
	r->egress = -1;
	return sent;
}

/* EOF on the report channel.  Unattended, C execs only through the gate,
 * so EOF before the gate let C's exec through means C died during setup
 * (a signal): nothing of the snippet ran, and it is reported as a failed
 * setup.  Ask the gate what it did, not whether its listener is still
 * open: a snippet that ends at once leaves the filter without users, and
 * serve_gate() may close the listener on that POLLHUP in the same poll
 * round, before this EOF is read. */
static void child_exec_done(struct supervision *r)
{
	if (seccomp_has_exec_gate(profile_name(r->plan->profile)) && !r->gate.spent) {
		child_protocol_error(r, EPROTO,
				     "the child ended before the exec gate let its exec through");
		return;
	}
	if (r->awaiting_go || r->go_pending)
		return; /* `warm` once python3 says it waits (take_waiting) */
	r->ready = true;
	if (!send_ready(r))
		r->broker_gone = true;
}

/* C's reports: a whole struct setup_report means a failed step; one byte
 * with a descriptor is the exec gate; EOF means exec succeeded (C's end
 * is CLOEXEC) or C died, which its status will say.  Returns false when
 * nothing was waiting. */
static bool read_setup_report(struct supervision *r)
{
	union {
		char buf[CMSG_SPACE(CHILD_GATE_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct plan *p = r->plan;
	struct iovec iov = { .iov_base = &r->rep, .iov_len = sizeof(r->rep) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;

	do
		n = recvmsg(p->err_r, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return false;
	if (n == 2 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
	    (r->rep.step[0] == CHILD_MSG_GATE || r->rep.step[0] == CHILD_MSG_GATE_NEW_MASKS)) {
		take_gate(r, &mh, (unsigned char)r->rep.step[1]);
		return true;
	}
	if (n == 2 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
	    r->rep.step[0] == CHILD_MSG_NET) {
		take_network(r, &mh, (unsigned char)r->rep.step[1]);
		return true;
	}

	for (size_t i = 0; n > 0 && i < CHILD_GATE_FDS_MAX; i++)
		if (received_fd_n(&mh, i) >= 0)
			close(received_fd_n(&mh, i));
	close(p->err_r);
	p->err_r = -1;
	if (n == (ssize_t)sizeof(r->rep) && !(mh.msg_flags & MSG_TRUNC)) {
		r->rep.step[sizeof(r->rep.step) - 1] = '\0';
		r->rep.msg[sizeof(r->rep.msg) - 1] = '\0';
		r->failed = true;
	} else if (n != 0) {
		child_protocol_error(r, n < 0 ? errno : EPROTO, "unreadable report from the child");
	} else {
		child_exec_done(r);
	}
	return true;
}

static void serve_gate(struct supervision *r, short revents)
{
	bool ok = true;

	if (revents & POLLIN)
		ok = exec_gate_serve(&r->gate);
	/* POLLHUP: no process uses the filter any more.  A receive that
	 * failed for good would only spin.  Once closed, any exec fails
	 * with ENOSYS, and the filter refuses the snippet a listener of its
	 * own (see @seccomp), so nobody else can answer. */
	if (!ok || (revents & (POLLHUP | POLLERR | POLLNVAL)))
		exec_gate_close(&r->gate);
}

static void step_failed(struct supervision *r, enum proto_step step, int err, const char *msg);
static void hand_over(struct supervision *r);

/* A warm job's python3 says with one byte that it has imported the
 * preload list and waits for the code: now `warm`, and the code goes at
 * once when `go` came first.  EOF: it died, which its exit status says. */
static void take_waiting(struct supervision *r)
{
	char byte;
	ssize_t n;

	do
		n = read(r->plan->code_tx, &byte, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && byte == 'w' && !r->warm_sent) {
		r->warm_sent = true;
		if (!report_warm(r->child))
			r->broker_gone = true;
		else if (r->go_pending)
			hand_over(r);
	} else if (n != 0 || !r->warm_sent) {
		step_failed(r, STEP_WARM, EPROTO, "the warm interpreter broke its bootstrap");
	}
}

/* The clock starts when the snippet does: at `go` for a warm job. */
static void start_clock(struct supervision *r)
{
	r->t_fork = monotonic_us();
	if (r->plan->timeout_ms)
		r->deadline = deadline_after_ms(r->t_fork, r->plan->timeout_ms);
}

static void step_failed(struct supervision *r, enum proto_step step, int err, const char *msg)
{
	snprintf(r->rep.step, sizeof(r->rep.step), "%s", step_name(step));
	r->rep.err = err;
	snprintf(r->rep.msg, sizeof(r->rep.msg), "%s", msg);
	r->failed = true;
}

/* `go`: the code's memfd and the wall clock.  It may come while python3
 * still starts (the broker gives a run a spare that is on its way rather
 * than start another interpreter beside it): then the code waits here
 * for python3's byte (take_waiting). */
static void take_go(struct supervision *r)
{
	struct plan *p = r->plan;
	struct proto_error perr = { 0 };
	uint8_t *buf = NULL;
	struct msg m;
	ssize_t n = frame_read_blocking_fd(FD_BROKER, PROTO_FRAME_MAX_DEFAULT, &buf, &p->code_fd);

	if (n <= 0 || proto_decode(buf, (size_t)n, 0, &m, &perr) != MSG_GO || p->code_fd < 0) {
		free(buf);
		if (p->code_fd >= 0)
			close(p->code_fd);
		p->code_fd = -1;
		r->broker_gone = true; /* EOF, or not our broker: nothing runs */
		return;
	}
	p->timeout_ms = m.u.go.timeout_ms;
	free(buf);
	r->awaiting_go = false;
	r->go_pending = true;
	if (r->warm_sent)
		hand_over(r);
}

/* The code to python3 when it still fits what the run would be built from
 * now; else supervise() returns SUPERVISE_COLD and main.c starts a cold
 * child with it. */
/* python3 closed its end of the code's socket: it died since `warm`. */
static bool interpreter_gone(const struct plan *p)
{
	struct pollfd pf = { .fd = p->code_tx, .events = POLLIN };

	return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR));
}

static void hand_over(struct supervision *r)
{
	struct plan *p = r->plan;
	char err[200] = "";
	bool fits = false;
	int rc;

	r->go_pending = false;
	start_clock(r);
	rc = warm_still_fits(p, r->child, &fits, err, sizeof(err));
	if (rc < 0) {
		step_failed(r, STEP_SECRETS, -rc, err);
		return;
	}
	receipt_forget(r->log);
	if (!fits || interpreter_gone(p)) {
		r->go_cold = true;
		return;
	}
	/* `ready` first: handing the code over wakes python3, which on a busy
	 * machine runs at once on this CPU, and `ready` would wait for the
	 * snippet's first milliseconds.  An interpreter that dies between the
	 * look above and the hand-over is replaced by a cold child all the
	 * same, which reports no second `ready` (and `ready` named the dead
	 * interpreter's pid). */
	r->ready = true;
	if (!send_ready(r))
		r->broker_gone = true;
	if (warm_hand_over(p) < 0) {
		r->go_cold = true;
		return;
	}
	close(p->code_fd);
	p->code_fd = -1;
}

static void check_broker(struct supervision *r, short revents)
{
	if (r->awaiting_go && (revents & POLLIN))
		take_go(r);
	else if (broker_says_stop(revents))
		r->broker_gone = true;
}

static void check_clock(struct supervision *r)
{
	uint64_t t = monotonic_us();

	if (r->deadline && !r->timed_out && t >= r->deadline) {
		r->timed_out = true;
		r->kill_at = deadline_after_ms(t, r->plan->job->grace_ms);
		signal_all(r, SIGTERM);
	}
	if (r->timed_out && (!r->kill_at || t >= r->kill_at))
		kill_all(r);
}

static int poll_timeout(const struct supervision *r)
{
	uint64_t next = r->timed_out ? r->kill_at : r->deadline, t = monotonic_us();

	if (!next)
		return r->timed_out ? 0 : -1;
	if (next <= t)
		return 0;
	return (next - t) / 1000u + 1 > 60000 ? 60000 : (int)((next - t) / 1000u + 1);
}

static void watch(struct supervision *r)
{
	while (!r->reaped && !r->failed && !r->broker_gone && !r->go_cold) {
		/* A negative fd is skipped by poll(): no report channel once
		 * C has exec'd, no gate in the approved profile. */
		struct pollfd pfd[6] = {
			{ .fd = FD_BROKER, .events = POLLIN },
			{ .fd = r->sigfd, .events = POLLIN },
			{ .fd = r->plan->err_r, .events = POLLIN },
			{ .fd = r->gate.fd, .events = POLLIN },
			{ .fd = receipt_wants_bytes(r->log) ? r->log->fd : -1, .events = POLLIN },
			{ .fd = (r->awaiting_go || r->go_pending) && !r->warm_sent ? r->plan->code_tx : -1,
			  .events = POLLIN },
		};
		int n = poll(pfd, 6, poll_timeout(r));

		if (n < 0 && errno != EINTR) {
			r->broker_gone = true; /* cannot watch: do not run unwatched */
			break;
		}
		/* The gate first: C's exec waits on it, and the report
		 * channel's EOF comes only after that exec. */
		if (n > 0 && pfd[3].fd >= 0 && pfd[3].revents)
			serve_gate(r, pfd[3].revents);
		/* The report before the exit status, so `ready` precedes
		 * `finished` even for a snippet that exits at once. */
		if (n > 0 && pfd[2].fd >= 0 && pfd[2].revents)
			read_setup_report(r);
		if (n > 0 && pfd[5].fd >= 0 && pfd[5].revents)
			take_waiting(r);
		if (n > 0 && pfd[0].revents)
			check_broker(r, pfd[0].revents);
		if (n > 0 && pfd[1].revents)
			drain_signals(r);
		/* Read as it comes, so that a full pipe drops no report. */
		if (n > 0 && pfd[4].fd >= 0 && pfd[4].revents)
			receipt_read(r->log);
		check_clock(r);
	}
}

static const char *limit_hit(const struct supervision *r, uint64_t cpu_us)
{
	uint64_t cpu_s = r->plan->job->lim.cpu_s;
	int sig;

	if (r->timed_out)
		return "wall";
	if (r->oom_killed)
		return "memory";
	if (!WIFSIGNALED(r->status))
		return "";
	sig = WTERMSIG(r->status);
	if (sig == SIGXCPU || (sig == SIGKILL && cpu_s && cpu_us >= cpu_s * 1000000u))
		return "cpu";
	if (sig == SIGXFSZ)
		return "file-size";
	return "";
}

static void fill_result(const struct supervision *r, struct run_result *res)
{
	const struct rusage *ru = &r->ru;
	uint64_t cpu = (uint64_t)ru->ru_utime.tv_sec * 1000000u + (uint64_t)ru->ru_utime.tv_usec +
		       (uint64_t)ru->ru_stime.tv_sec * 1000000u + (uint64_t)ru->ru_stime.tv_usec;

	memset(res, 0, sizeof(*res));
	res->exited = WIFEXITED(r->status);
	res->code = res->exited ? WEXITSTATUS(r->status) : 0;
	res->signal = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
	res->timed_out = r->timed_out;
	res->limit = limit_hit(r, cpu);
	res->duration_us = r->t_end - r->t_fork;
	res->cpu_us = cpu;
	res->max_rss_kb = (uint64_t)ru->ru_maxrss; /* Linux: kilobytes */
}

/* After C is gone: its setup report, if it is still in the channel
 * (perhaps behind the exec gate's message). */
static void final_report(struct supervision *r)
{
	while (r->plan->err_r >= 0 && !r->failed && read_setup_report(r))
		;
}

static int report_end(struct supervision *r)
{
	struct run_result res;

	if (r->failed) {
		report_setup_error(r->rep.step, r->rep.err, r->rep.msg);
		return WORKER_EXIT_FAIL;
	}
	if (r->awaiting_go || r->go_pending) {
		report_setup_error(step_name(STEP_WARM), ECHILD,
				   r->awaiting_go ? "the warm interpreter ended before a snippet came"
						  : "the warm interpreter ended before it took the snippet");
		return WORKER_EXIT_FAIL;
	}
	if (r->timed_out && !r->ready) {
		report_setup_error(step_name(STEP_TIMEOUT), ETIMEDOUT,
				   "the sandbox was not set up within the time limit");
		return WORKER_EXIT_FAIL;
	}
	if (!r->ready && !send_ready(r))
		return WORKER_EXIT_FAIL;
	fill_result(r, &res);
	receipt_conclude(r->log, r->plan);
	/* Every process of the snippet has ended: the directory holds still.
	 * A copy out of a container that failed may have stopped inside a
	 * file: none of it goes. */
	if (!r->outputs_lost)
		outputs_collect(r->plan, &r->outputs);
	if (!report_finished(&res, &r->log->blocked, r->outputs.left_out))
		return WORKER_EXIT_FAIL;
	outputs_send(&r->outputs);
	return WORKER_EXIT_OK;
}

/* The result, then the scratch directory goes: what cannot be removed is
 * reported after the result (setup_error, step cleanup), which stands.
 * Then fd 3 goes at once: the broker sees EOF now, not after S has freed
 * its memory and the kernel has torn S down, and only then sends the
 * client `exit`, so scratch is gone by the time a client hears the end. */
static int conclude(struct supervision *r)
{
	int rc = r->broker_gone ? WORKER_EXIT_FAIL : report_end(r);

	/* The broker holds it from here: closing ours tears nothing down. */
	if (rc == WORKER_EXIT_OK && r->ready && r->new_masks)
		report_masks(r->mounts, r->plan->masks_key);
	plan_remove_scratch(r->plan);
	close(FD_BROKER);
	return rc;
}

/* Engine: C was the CLI, and the container may still run.  Exit 137 is
 * the container's process SIGKILLed: ask the engine whether for memory.
 * Then stop the container whenever the CLI did not see it to its end: a
 * timeout, a cancel, an exit of 137 (SIGKILL, perhaps of only one
 * process in it) or a CLI killed by a signal (RLIMIT_CPU, say).  Not when
 * C failed its own setup: then no CLI ever ran.  A snippet that ended by
 * itself leaves the container as it is, and its files are copied out. */
static void engine_after(struct supervision *r)
{
	bool exit137 = r->reaped && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 137;
	bool signalled = r->reaped && WIFSIGNALED(r->status);

	if (r->failed)
		return;
	if (exit137 && !r->timed_out && !r->broker_gone)
		r->oom_killed = engine_oom_killed(r->plan, r->sigfd, &r->broker_gone);
	if (r->timed_out || r->broker_gone || exit137 || signalled) {
		engine_kill(r->plan, r->sigfd);
		return;
	}
	if (r->reaped)
		r->outputs_lost = !engine_copy_outputs(r->plan, r->sigfd, &r->broker_gone);
}

int supervise(struct plan *p, pid_t child, int sigfd, struct receipt_log *log)
{
	struct supervision r = { .plan = p, .child = child, .sigfd = sigfd,
				 .gate = { .fd = -1 }, .log = log, .mounts = -1, .egress = -1,
				 .awaiting_go = p->code_tx >= 0 };
	int rc;

	if (!r.awaiting_go)
		start_clock(&r);
	watch(&r);
	/* Broker gone, setup failed, C exited, or C is not to run the code:
	 * nothing may stay. */
	kill_all(&r);
	if (r.go_cold) {
		exec_gate_close(&r.gate);
		if (r.mounts >= 0)
			close(r.mounts);
		return SUPERVISE_COLD;
	}
	if (!r.broker_gone)
		final_report(&r);
	exec_gate_close(&r.gate);
	/* Its commands use the scratch directory (their HOME, TMPDIR and
	 * XDG_RUNTIME_DIR): before it goes. */
	if (p->engine.run)
		engine_after(&r);
	rc = conclude(&r);
	/* After the report: the last reference to the secret masks' mount
	 * namespace, whose teardown waits for an RCU grace period. */
	if (r.mounts >= 0)
		close(r.mounts);
	return rc;
}
