/* SPDX-License-Identifier: MIT
 * sandbox = docker: the container engine's commands around the snippet
 * child.  The snippet runs in a container; what runs on this host is the
 * engine's CLI (podman --remote, docker), a client of the engine's API
 * socket, and every one of its processes is confined like a snippet: each
 * command is a child of S that goes through enter_sandbox() (fds,
 * cwd, capabilities, NO_NEW_PRIVS, Landlock, seccomp, rlimits, read-back)
 * under the "engine" profile and execs the command's argv.
 *
 *   steps   before C, in order (e.g. checking the image): a step that
 *           exits non-zero or dies fails the run as a setup_error named
 *           after the step, whose message is the engine's own last line of
 *           output ("Error: ...: image not known"); so does one still
 *           running when the steps together have taken the job's timeout
 *           (the broker allows the steps as long again as the snippet).
 *           A step child that cannot confine itself reports the step of
 *           enter_sandbox() that failed, as C does.
 *   run     C itself (main.c): the CLI that runs the container, the code
 *           memfd as its stdin, the broker's pipes as stdout and stderr.
 *   oom     after C exited 137 (the container's process was SIGKILLed):
 *           an integer > 0 on its output means the engine killed it for
 *           memory, and the result's limit is "memory".
 *   kill    after a timeout, a cancel, an exit of 137 or a CLI killed by a
 *           signal: killing the CLI does not stop the container, this does.
 *   outputs after a snippet that ended by itself (the CLI exited, not 137):
 *           the engine's `cp` of the container's output directory into
 *           the run's (PROTO_OUTPUT_DIR_ARG), where outputs.c takes what
 *           it may send, as on the host.  It writes as the snippet's user,
 *           under Landlock, which lets it write in scratch only.  When it
 *           fails or times out, nothing is collected: what it wrote before
 *           may be a file cut short.
 *
 * Each command: stdin /dev/null, stdout and stderr into one pipe S drains
 * to the end and keeps the last CONFINED_OUT_MAX bytes of; a report
 * channel of its own; a deadline, at which S kills the command and all it
 * started.  S is the subreaper of all of them, as of C.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/util.h"
#include "worker/worker.h"

/* oom and kill are short queries of the engine; the run is over by then,
 * and the broker is waiting for `finished` (broker/run.c, ENGINE_AFTER_MS,
 * allows oom and kill, or outputs).  outputs moves a few files. */
#define OOM_TIMEOUT_MS 10000
#define KILL_TIMEOUT_MS 10000
#define OUTPUTS_TIMEOUT_MS 15000

/* S's side of one running command. */
struct child {
	struct confined *c;
	pid_t pid;
	int report_r;      /* -1 once at EOF */
	int out_r;         /* -1 once at EOF */
	uint64_t deadline; /* 0: none */
	bool reaped, reported, timed_out, cancelled;
	int broken;        /* S could not watch it or read its report: errno */
};

__attribute__((format(printf, 4, 5))) static void
set_report(struct setup_report *rep, const char *step, int err, const char *fmt, ...)
{
	va_list ap;

	memset(rep, 0, sizeof(*rep));
	snprintf(rep->step, sizeof(rep->step), "%s", step);
	rep->err = err;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
}

/* Keeps the last bytes: an engine says what went wrong at the end. */
static void keep_tail(struct confined *c, const char *buf, size_t n)
{
	const size_t cap = sizeof(c->out);

	if (n >= cap) {
		memcpy(c->out, buf + n - cap, cap);
		c->out_len = cap;
		return;
	}
	if (c->out_len + n > cap) {
		size_t drop = c->out_len + n - cap;

		memmove(c->out, c->out + drop, c->out_len - drop);
		c->out_len -= drop;
	}
	memcpy(c->out + c->out_len, buf, n);
	c->out_len += n;
}

/* Reads what the pipe holds; at EOF closes it.  Never blocks. */
static void drain_output(struct child *ch)
{
	char buf[4096];
	ssize_t n;

	while (ch->out_r >= 0) {
		n = read(ch->out_r, buf, sizeof(buf));
		if (n > 0) {
			keep_tail(ch->c, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		close(ch->out_r); /* EOF, or a pipe that cannot be read */
		ch->out_r = -1;
	}
}

/* The child's report channel: a whole struct setup_report is a failed
 * step; EOF means it exec'd (its end is CLOEXEC) or died, which its status
 * says.  No engine command has an exec gate to hand over, so anything else
 * is a protocol error.  recv() without room for control data: the kernel
 * drops any descriptor passed along. */
static void read_report(struct child *ch)
{
	struct setup_report rep;
	ssize_t n;

	while (ch->report_r >= 0) {
		n = recv(ch->report_r, &rep, sizeof(rep), MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n == (ssize_t)sizeof(rep) && !ch->reported) {
			rep.step[sizeof(rep.step) - 1] = '\0';
			rep.msg[sizeof(rep.msg) - 1] = '\0';
			ch->c->rep = rep;
			ch->reported = true;
			continue;
		}
		if (n != 0 && !ch->broken)
			ch->broken = n < 0 ? errno : EPROTO;
		close(ch->report_r);
		ch->report_r = -1;
	}
}

static void reap(struct child *ch)
{
	pid_t pid;
	int status;

	/* Anything below S that has exited: the command, or orphans of it. */
	while ((pid = wait4(-1, &status, WNOHANG, NULL)) > 0) {
		if (pid == ch->pid) {
			ch->reaped = true;
			ch->c->status = status;
		}
	}
}

static void read_signals(struct child *ch, int sigfd)
{
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		/* SIGTERM/SIGINT/SIGHUP to S: stop, as at the broker's EOF.
		 * The kill command is not cancellable: it is how we stop. */
		if (si.ssi_signo != SIGCHLD && ch->c->cancellable)
			ch->cancelled = true;
	}
	reap(ch);
}

/* SIGKILL the command and everything below S until S has no child left,
 * as supervise.c does for C: its process group while it is unreaped (its
 * pid is ours until then), the tree through the subreaper. */
static void kill_everything(struct child *ch)
{
	pid_t pid;
	int status;

	for (;;) {
		pid = wait4(-1, &status, WNOHANG, NULL);
		if (pid > 0 || (pid < 0 && errno == EINTR)) {
			if (pid == ch->pid) {
				ch->reaped = true;
				ch->c->status = status;
			}
			continue;
		}
		if (pid < 0)
			break; /* ECHILD: nothing left */
		if (!ch->reaped)
			kill(-ch->pid, SIGKILL);
		signal_descendants(SIGKILL);
		pid = wait4(-1, &status, 0, NULL);
		if (pid == ch->pid) {
			ch->reaped = true;
			ch->c->status = status;
		} else if (pid < 0 && errno != EINTR) {
			break;
		}
	}
}

static int poll_timeout(const struct child *ch)
{
	uint64_t t = monotonic_us();

	if (!ch->deadline)
		return -1;
	if (ch->deadline <= t)
		return 0;
	return (ch->deadline - t) / 1000u + 1 > 60000 ? 60000
						       : (int)((ch->deadline - t) / 1000u + 1);
}

/* Until the command exits, the deadline passes or the broker cancels.
 * Its output is drained all along, so it never blocks on a full pipe. */
static void watch(struct child *ch, int sigfd)
{
	while (!ch->reaped && !ch->timed_out && !ch->cancelled && !ch->broken) {
		struct pollfd pfd[4] = {
			{ .fd = sigfd, .events = POLLIN },
			{ .fd = ch->report_r, .events = POLLIN },
			{ .fd = ch->out_r, .events = POLLIN },
			{ .fd = ch->c->cancellable ? FD_BROKER : -1, .events = POLLIN },
		};
		int n = poll(pfd, 4, poll_timeout(ch));

		if (n < 0 && errno != EINTR) {
			ch->broken = errno; /* cannot watch: do not run unwatched */
			break;
		}
		if (n > 0 && pfd[1].fd >= 0 && pfd[1].revents)
			read_report(ch);
		if (n > 0 && pfd[2].fd >= 0 && pfd[2].revents)
			drain_output(ch);
		if (n > 0 && pfd[3].fd >= 0 && pfd[3].revents && broker_says_stop(pfd[3].revents))
			ch->cancelled = true;
		if (n > 0 && pfd[0].revents)
			read_signals(ch, sigfd);
		if (!ch->reaped && ch->deadline && monotonic_us() >= ch->deadline)
			ch->timed_out = true;
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* S's half of starting the child: the channels, then the fork.  Returns
 * false with c->rep set when S could not. */
static bool start(struct plan *p, struct child *ch)
{
	struct confined *c = ch->c;
	int report_w = -1, out[2], null_fd, rc;

	if ((rc = open_report_pair(&ch->report_r, &report_w)) < 0) {
		set_report(&c->rep, step_name(STEP_PIPE), -rc,
			   "creating the report channel of '%s'", c->name);
		return false;
	}
	if (pipe2(out, O_CLOEXEC) < 0) {
		rc = errno;
		close_fd(&report_w);
		set_report(&c->rep, step_name(STEP_PIPE), rc, "creating the output pipe of '%s'",
			   c->name);
		return false;
	}
	ch->out_r = out[0];
	if (fcntl(ch->out_r, F_SETFL, O_NONBLOCK) < 0) {
		rc = errno;
		close(out[1]);
		close_fd(&report_w);
		set_report(&c->rep, step_name(STEP_PIPE), rc,
			   "making the output pipe of '%s' non-blocking", c->name);
		return false;
	}
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0) {
		rc = errno;
		close(out[1]);
		close_fd(&report_w);
		set_report(&c->rep, step_name(STEP_FDS), rc, "opening /dev/null for '%s'", c->name);
		return false;
	}
	ch->pid = fork();
	if (ch->pid == 0) {
		struct sandbox_exec x = { .path = c->argv[0], .argv = c->argv, .envp = p->envp,
					  .receipt_fd = -1,
					  .report_fd = report_w,
					  .stdio = { null_fd, out[1], out[1] } };

		enter_sandbox(p, &x);
	}
	rc = errno;
	/* Only the child holds the write ends now: EOF comes when it and
	 * everything it started are gone. */
	close(out[1]);
	close(null_fd);
	close_fd(&report_w);
	if (ch->pid < 0) {
		set_report(&c->rep, step_name(STEP_FORK), rc, "fork for '%s'", c->name);
		return false;
	}
	if (c->timeout_ms)
		ch->deadline = deadline_after_ms(monotonic_us(), c->timeout_ms);
	return true;
}

void run_confined(struct plan *p, int sigfd, struct confined *c)
{
	struct child ch = { .c = c, .report_r = -1, .out_r = -1 };

	c->end = CONFINED_FAILED;
	c->status = 0;
	c->out_len = 0;
	memset(&c->rep, 0, sizeof(c->rep));
	if (!start(p, &ch)) {
		close_fd(&ch.report_r);
		close_fd(&ch.out_r);
		return;
	}
	watch(&ch, sigfd);
	/* Exited, timed out, cancelled: nothing it started may stay. */
	kill_everything(&ch);
	/* Every writer is dead: the rest of its output, then EOF; and a
	 * failure report it sent just before it exited. */
	drain_output(&ch);
	read_report(&ch);
	close_fd(&ch.out_r);
	close_fd(&ch.report_r);
	if (ch.cancelled)
		c->end = CONFINED_CANCELLED; /* nobody to tell why any more */
	else if (ch.reported)
		c->end = CONFINED_FAILED; /* c->rep: its own step */
	else if (ch.timed_out)
		c->end = CONFINED_TIMED_OUT;
	else if (ch.broken)
		set_report(&c->rep, step_name(STEP_SUPERVISE), ch.broken, "cannot supervise '%s'",
			   c->name);
	else
		c->end = CONFINED_EXITED;
}

/* ---- what the output says ------------------------------------------------ */

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

/* The last non-empty line of the output kept, trimmed ('\r' ends a line
 * too: progress bars redraw with it).  Returns its length; *line points
 * into c->out. */
static size_t last_line(const struct confined *c, const char **line)
{
	size_t end = c->out_len, start;

	while (end > 0 && blank(c->out[end - 1]))
		end--;
	start = end;
	while (start > 0 && c->out[start - 1] != '\n' && c->out[start - 1] != '\r')
		start--;
	while (start < end && blank(c->out[start]))
		start++;
	*line = c->out + start;
	return end - start;
}

/* Copies an engine's words into a report: control bytes and invalid UTF-8
 * become '?', tabs spaces; clipped to fit, never inside a character. */
static void clean_text(char *dst, size_t cap, const char *src, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k + 1 < cap;) {
		unsigned char ch = (unsigned char)src[i];
		size_t len = ch < 0x80 ? 1 : ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;

		if (len > 1 && i + len <= n && utf8_valid((const uint8_t *)src + i, len)) {
			if (k + len + 1 > cap)
				break;
			memcpy(dst + k, src + i, len);
			k += len;
			i += len;
			continue;
		}
		dst[k++] = ch == '\t' ? ' ' : ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
		i++;
	}
	dst[k] = '\0';
}

static const char *program_name(const struct confined *c)
{
	const char *slash = strrchr(c->argv[0], '/');

	return slash ? slash + 1 : c->argv[0];
}

/* Why a step failed, as a setup_error: the step's name, and the engine's
 * last line, or what S saw when the engine said nothing. */
static void step_failed(const struct confined *c, uint64_t budget_ms, struct setup_report *rep)
{
	const char *line;
	size_t n = last_line(c, &line);
	int sig;

	if (c->end == CONFINED_FAILED) {
		*rep = c->rep;
		return;
	}
	if (c->end == CONFINED_TIMED_OUT) {
		set_report(rep, c->name, ETIMEDOUT,
			   "%s did not finish within the time limit (%llu ms for all steps)",
			   program_name(c), (unsigned long long)budget_ms);
		return;
	}
	if (WIFSIGNALED(c->status)) {
		sig = WTERMSIG(c->status);
		set_report(rep, c->name, 0, "%s was killed by signal %d (SIG%s)", program_name(c),
			   sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
		return;
	}
	set_report(rep, c->name, 0, "%s exited with status %d and said nothing", program_name(c),
		   WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1);
	if (n)
		clean_text(rep->msg, sizeof(rep->msg), line, n);
}

/* What is left of the steps' time, at least 1 ms; 0: no limit. */
static uint64_t remaining_ms(uint64_t deadline)
{
	uint64_t t = monotonic_us();

	if (!deadline)
		return 0;
	return deadline > t + 1000u ? (deadline - t) / 1000u : 1;
}

int engine_steps(struct plan *p, int sigfd, struct setup_report *rep)
{
	const struct engine_plan *e = &p->engine;
	uint64_t budget = p->job->timeout_ms, deadline = 0;
	struct confined c;

	/* One deadline for all of them: the broker gives the steps as long
	 * again as the snippet, and then gives up on the worker. */
	if (budget)
		deadline = deadline_after_ms(monotonic_us(), budget);
	for (size_t i = 0; i < e->n_steps; i++) {
		c = (struct confined){ .name = e->step_names[i], .argv = e->steps[i],
				       .timeout_ms = remaining_ms(deadline), .cancellable = true };
		run_confined(p, sigfd, &c);
		if (c.end == CONFINED_CANCELLED)
			return -1;
		if (c.end == CONFINED_EXITED && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)
			continue;
		step_failed(&c, budget, rep);
		return 1;
	}
	return 0;
}

/* Digits only, not all zeros: a count above zero. */
static bool positive_integer(const char *s, size_t n)
{
	bool nonzero = false;

	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		nonzero |= s[i] != '0';
	}
	return nonzero;
}

bool engine_oom_killed(struct plan *p, int sigfd, bool *cancelled)
{
	struct confined c;
	const char *line;
	size_t n;

	if (!p->engine.oom)
		return false;
	c = (struct confined){ .name = "oom", .argv = p->engine.oom,
			       .timeout_ms = OOM_TIMEOUT_MS, .cancellable = true };
	run_confined(p, sigfd, &c);
	if (c.end == CONFINED_CANCELLED)
		*cancelled = true;
	if (c.end != CONFINED_EXITED || !WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
		return false;
	n = last_line(&c, &line);
	return positive_integer(line, n);
}

void engine_kill(struct plan *p, int sigfd)
{
	struct confined c;

	if (!p->engine.kill)
		return;
	/* Not cancellable: it runs because of a cancel, among others.  Its
	 * outcome changes nothing S reports. */
	c = (struct confined){ .name = "kill", .argv = p->engine.kill,
			       .timeout_ms = KILL_TIMEOUT_MS, .cancellable = false };
	run_confined(p, sigfd, &c);
}

bool engine_copy_outputs(struct plan *p, int sigfd, bool *cancelled)
{
	struct confined c;

	if (!p->engine.outputs)
		return false;
	c = (struct confined){ .name = "outputs", .argv = p->engine.outputs,
			       .timeout_ms = OUTPUTS_TIMEOUT_MS, .cancellable = true };
	run_confined(p, sigfd, &c);
	if (c.end == CONFINED_CANCELLED)
		*cancelled = true;
	return c.end == CONFINED_EXITED && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
}
