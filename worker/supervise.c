/* SPDX-License-Identifier: MIT
 * S after the fork: wait for C to exec (or say why it could not), report
 * `ready`, then watch three things until the snippet is over: the broker
 * (fd 3), C's exit (SIGCHLD via signalfd) and the wall clock.  Whatever
 * ends the run, every descendant is killed before S reports and exits:
 * no process of a snippet outlives it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker/worker.h"

struct run {
	struct plan *plan;
	pid_t child;
	int sigfd;
	uint64_t t_fork, t_end;    /* monotonic, microseconds */
	uint64_t deadline;          /* 0: no wall-clock limit */
	uint64_t kill_at;           /* after the timeout; 0: at once */
	bool ready, reaped, timed_out, failed, broker_gone;
	struct setup_report rep;
	int status;
	struct rusage ru;
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* t + ms, or 0 ("never") when that would overflow. */
static uint64_t after_ms(uint64_t t, uint64_t ms)
{
	if (ms > (UINT64_MAX - t) / 1000u)
		return 0;
	return t + ms * 1000u;
}

static void note_reaped(struct run *r, pid_t pid, int status, const struct rusage *ru)
{
	if (pid != r->child)
		return; /* an orphan of the snippet: nothing to record */
	r->reaped = true;
	r->status = status;
	r->ru = *ru;
	r->t_end = now_us();
}

/* Reaps whatever has exited, C or orphans reparented to us. */
static void reap_exited(struct run *r)
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
static void signal_all(struct run *r, int sig)
{
	if (!r->reaped)
		kill(-r->child, sig);
	signal_descendants(sig);
}

/* SIGKILL everything below S until S has no children left.  A process
 * killed mid-fork leaves its new child to us; the next round gets it. */
static void kill_all(struct run *r)
{
	struct rusage ru;
	pid_t pid;
	int status;

	for (;;) {
		signal_all(r, SIGKILL);
		pid = wait4(-1, &status, 0, &ru);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break; /* ECHILD: nothing left */
		note_reaped(r, pid, status, &ru);
	}
}

static void drain_signals(struct run *r)
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

/* C's report: a whole struct means a failed step; EOF means exec
 * succeeded (the pipe is CLOEXEC) or C died, which its status will say. */
static void read_setup_report(struct run *r)
{
	struct plan *p = r->plan;
	ssize_t n;

	do
		n = read(p->err_r, &r->rep, sizeof(r->rep));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	close(p->err_r);
	p->err_r = -1;
	if (n == (ssize_t)sizeof(r->rep)) {
		r->rep.step[sizeof(r->rep.step) - 1] = '\0';
		r->rep.msg[sizeof(r->rep.msg) - 1] = '\0';
		r->failed = true;
		return;
	}
	if (n != 0) {
		snprintf(r->rep.step, sizeof(r->rep.step), "supervise");
		r->rep.err = n < 0 ? errno : EPROTO;
		snprintf(r->rep.msg, sizeof(r->rep.msg), "unreadable report from the child");
		r->failed = true;
		return;
	}
	r->ready = true;
	if (!report_ready(r->child, 0))
		r->broker_gone = true;
}

/* The broker has nothing to say to a worker after the job: EOF, an error
 * or any frame at all means "stop" (cancel, or the broker is gone). */
static void check_broker(struct run *r, short revents)
{
	char b;
	ssize_t n;

	if (revents & (POLLHUP | POLLERR | POLLNVAL)) {
		r->broker_gone = true;
		return;
	}
	n = recv(FD_BROKER, &b, 1, MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	r->broker_gone = true;
}

static void check_clock(struct run *r)
{
	uint64_t t = now_us();

	if (r->deadline && !r->timed_out && t >= r->deadline) {
		r->timed_out = true;
		r->kill_at = after_ms(t, r->plan->job->grace_ms);
		signal_all(r, SIGTERM);
	}
	if (r->timed_out && (!r->kill_at || t >= r->kill_at))
		kill_all(r);
}

static int poll_timeout(const struct run *r)
{
	uint64_t next = r->timed_out ? r->kill_at : r->deadline, t = now_us();

	if (!next)
		return r->timed_out ? 0 : -1;
	if (next <= t)
		return 0;
	return (next - t) / 1000u + 1 > 60000 ? 60000 : (int)((next - t) / 1000u + 1);
}

static void watch(struct run *r)
{
	while (!r->reaped && !r->failed && !r->broker_gone) {
		struct pollfd pfd[3] = {
			{ .fd = FD_BROKER, .events = POLLIN },
			{ .fd = r->sigfd, .events = POLLIN },
			{ .fd = r->plan->err_r, .events = POLLIN },
		};
		int n = poll(pfd, r->plan->err_r >= 0 ? 3 : 2, poll_timeout(r));

		if (n < 0 && errno != EINTR) {
			r->broker_gone = true; /* cannot watch: do not run unwatched */
			break;
		}
		/* The report before the exit status, so `ready` precedes
		 * `finished` even for a snippet that exits at once. */
		if (n > 0 && r->plan->err_r >= 0 && pfd[2].revents)
			read_setup_report(r);
		if (n > 0 && pfd[0].revents)
			check_broker(r, pfd[0].revents);
		if (n > 0 && pfd[1].revents)
			drain_signals(r);
		check_clock(r);
	}
}

static const char *limit_hit(const struct run *r, uint64_t cpu_us)
{
	uint64_t cpu_s = r->plan->job->lim.cpu_s;
	int sig;

	if (r->timed_out)
		return "wall";
	if (!WIFSIGNALED(r->status))
		return "";
	sig = WTERMSIG(r->status);
	if (sig == SIGXCPU || (sig == SIGKILL && cpu_s && cpu_us >= cpu_s * 1000000u))
		return "cpu";
	if (sig == SIGXFSZ)
		return "file-size";
	return "";
}

static void fill_result(const struct run *r, struct run_result *res)
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

/* After C is gone: its setup report, if it is still in the pipe. */
static void final_report(struct run *r)
{
	if (r->plan->err_r >= 0 && !r->failed)
		read_setup_report(r);
}

static int conclude(struct run *r)
{
	struct run_result res;

	if (r->failed) {
		report_setup_error(r->rep.step, r->rep.err, r->rep.msg);
		return WORKER_EXIT_FAIL;
	}
	if (r->timed_out && !r->ready) {
		report_setup_error("timeout", ETIMEDOUT,
				   "the sandbox was not set up within the time limit");
		return WORKER_EXIT_FAIL;
	}
	if (!r->ready && !report_ready(r->child, 0))
		return WORKER_EXIT_FAIL;
	fill_result(r, &res);
	return report_finished(&res) ? WORKER_EXIT_OK : WORKER_EXIT_FAIL;
}

int supervise(struct plan *p, pid_t child, int sigfd)
{
	struct run r = { .plan = p, .child = child, .sigfd = sigfd };
	int rc;

	r.t_fork = now_us();
	if (p->job->timeout_ms)
		r.deadline = after_ms(r.t_fork, p->job->timeout_ms);
	watch(&r);
	/* Broker gone, setup failed, or C exited: nothing may stay. */
	kill_all(&r);
	if (!r.broker_gone)
		final_report(&r);
	plan_remove_scratch(p);
	rc = r.broker_gone ? WORKER_EXIT_FAIL : conclude(&r);
	return rc;
}
