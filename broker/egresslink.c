/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/egress/wire.h"
#include "broker/egresslink.h"
#include "broker/log.h"

/* The proxy says it serves within this, or the broker does not start. */
#define START_TIMEOUT_S 10
#define ARGS_MAX (14 + 4 * EGRESS_HOSTS_MAX)

static int link_fd = -1, bundle_fd = -1;
static pid_t egress_pid;
static char bundle[512];

bool egresslink_bundle_open(void)
{
	return bundle_fd >= 0;
}

pid_t egresslink_pid(void)
{
	return egress_pid;
}

const char *egresslink_bundle(void)
{
	return link_fd >= 0 ? bundle : "";
}

/* "--allow"/"--deny" and each entry of a config list. */
static size_t add_hosts(char **argv, size_t n, char *opt, const char *list, char *store,
			size_t cap)
{
	const char *w;
	size_t len, used = 0;

	while ((len = config_list_next(&list, &w)) && n + 2 < ARGS_MAX && used + len + 1 <= cap) {
		memcpy(store + used, w, len);
		store[used + len] = '\0';
		argv[n++] = opt;
		argv[n++] = store + used;
		used += len + 1;
	}
	return n;
}

static __attribute__((noreturn)) void exec_egress(const char *path, char **argv, int link,
						  int file, pid_t broker)
{
	sigset_t none;
	int fd[2] = { fcntl(link, F_DUPFD, 16), fcntl(file, F_DUPFD, 16) };

	/* The proxy goes with the broker, however the broker ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != broker)
		_exit(127);
	if (fd[0] < 0 || fd[1] < 0 || dup2(fd[0], EGRESS_FD_LINK) < 0 ||
	    dup2(fd[1], EGRESS_FD_BUNDLE) < 0)
		_exit(127);
	close_range(EGRESS_FD_BUNDLE + 1, ~0U, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execv(path, argv);
	_exit(127);
}

static int wait_serving(char *err, size_t errlen)
{
	struct timeval tv = { START_TIMEOUT_S, 0 };
	char byte;

	setsockopt(link_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(link_fd, &byte, 1, 0) != 1) {
		snprintf(err, errlen, "the egress proxy did not start (its log line says why)");
		return -1;
	}
	tv.tv_sec = 0;
	setsockopt(link_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return 0;
}

int egresslink_open_bundle(const char *dir, char *err, size_t errlen)
{
	snprintf(bundle, sizeof(bundle), "%s/egress-ca.pem", dir);
	/* Opened by the broker while it may still be root: the proxy, the
	 * service user, could not create it there. */
	bundle_fd = open(bundle, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (bundle_fd < 0) {
		snprintf(err, errlen, "cannot open the egress CA bundle %s: %s", bundle,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int egresslink_start(const char *path, const struct config *c, char *err, size_t errlen)
{
	static char allow[sizeof(c->egress_allow)], deny[sizeof(c->egress_deny)];
	static char mode[16], ca[sizeof(c->egress_upstream_ca)], conns[16], per_uid[16];
	char *argv[ARGS_MAX];
	size_t n = 0;
	int sp[2];
	pid_t pid, self;

	if (access(path, X_OK) < 0) {
		snprintf(err, errlen, "the egress proxy %s is not executable: %s", path,
			 strerror(errno));
		return -1;
	}
	if (bundle_fd < 0) {
		snprintf(err, errlen, "the egress CA bundle is not open");
		return -1;
	}
	argv[n++] = (char *)"kotoba-egress";
	argv[n++] = (char *)"--mode";
	snprintf(mode, sizeof(mode), "%s", egress_mode_name(c->egress));
	argv[n++] = mode;
	if (c->egress_upstream_ca[0]) {
		argv[n++] = (char *)"--upstream-ca";
		snprintf(ca, sizeof(ca), "%s", c->egress_upstream_ca);
		argv[n++] = ca;
	}
	snprintf(conns, sizeof(conns), "%u", c->egress_conns);
	snprintf(per_uid, sizeof(per_uid), "%u", c->egress_conns_per_uid);
	argv[n++] = (char *)"--connections";
	argv[n++] = conns;
	argv[n++] = (char *)"--connections-per-user";
	argv[n++] = per_uid;
	n = add_hosts(argv, n, (char *)"--allow", c->egress_allow, allow, sizeof(allow));
	n = add_hosts(argv, n, (char *)"--deny", c->egress_deny, deny, sizeof(deny));
	argv[n] = NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		snprintf(err, errlen, "cannot make the egress proxy's link: %s", strerror(errno));
		return -1;
	}
	self = getpid();
	pid = fork();
	if (pid == 0)
		exec_egress(path, argv, sp[1], bundle_fd, self);
	close(sp[1]);
	close(bundle_fd);
	bundle_fd = -1;
	if (pid < 0) {
		snprintf(err, errlen, "cannot start the egress proxy: %s", strerror(errno));
		close(sp[0]);
		return -1;
	}
	link_fd = sp[0];
	egress_pid = pid;
	if (wait_serving(err, errlen) < 0) {
		kill(pid, SIGKILL);
		return -1;
	}
	log_info("egress proxy pid=%d: [egress] unattended = %s, CA bundle %s", (int)pid,
		 egress_mode_name(c->egress), bundle);
	return 0;
}

void egresslink_gone(int status)
{
	log_err("the egress proxy (pid %d) ended (%s %d): runs nobody read have no network "
		"until the broker restarts",
		(int)egress_pid, WIFSIGNALED(status) ? "signal" : "status",
		WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	egress_pid = 0;
	if (link_fd >= 0)
		close(link_fd);
	link_fd = -1;
}

static void send_req(uint32_t op, uint64_t run_id, uid_t uid, uint32_t rule, int fd)
{
	struct egress_req q = { .op = op, .uid = (uint32_t)uid, .run_id = run_id, .rule = rule };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { &q, sizeof(q) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (link_fd < 0)
		return;
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(link_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_warn("run=%" PRIu64 " cannot reach the egress proxy: %s: the run has no "
			 "network", run_id, strerror(errno));
}

void egresslink_attach(uint64_t run_id, uid_t uid, bool approved, int fd)
{
	send_req(EGRESS_ATTACH, run_id, uid,
		 approved ? EGRESS_RULE_APPROVED : EGRESS_RULE_UNATTENDED, fd);
	close(fd);
}

void egresslink_detach(uint64_t run_id)
{
	send_req(EGRESS_DETACH, run_id, 0, 0, -1);
}

/* ---- events from the proxy ------------------------------------------------ */

/* Messages taken per wake-up of the loop, and when a run ends: a proxy
 * that floods the link cannot hold the broker in one call. */
#define EVENTS_PER_WAKE 64
#define EVENTS_AT_END 4096

/* A flood of bad events is a few log lines (1st, 2nd, 4th, 8th...). */
static void drop_event(const char *why, uint64_t run_id)
{
	static uint64_t dropped;

	dropped++;
	if (dropped & (dropped - 1))
		return;
	log_warn("an event from the egress proxy dropped (%" PRIu64 " so far): %s (run=%" PRIu64
		 ")", dropped, why, run_id);
}

/* A string of the proxy's: NUL-ended within its field, control
 * characters made '?'; the receipt checks its UTF-8 (receipt_add). */
static bool event_str_ok(char *s, size_t cap)
{
	char *end = memchr(s, '\0', cap);

	if (!end || end == s)
		return false;
	for (; s < end; s++)
		if ((unsigned char)*s < ' ' || *s == 127)
			*s = '?';
	return true;
}

static const char *event_invalid(struct egress_event *ev)
{
	if (ev->version != EGRESS_EVENT_VERSION)
		return "not this broker's version of the events";
	if (ev->kind != EGRESS_EV_REFUSED && ev->kind != EGRESS_EV_TRAFFIC)
		return "an unknown kind";
	if (!event_str_ok(ev->text, sizeof(ev->text)))
		return "its text is not a string";
	if (ev->kind == EGRESS_EV_TRAFFIC && !event_str_ok(ev->method, sizeof(ev->method)))
		return "its method is not a string";
	return NULL;
}

/* An empty message reads as 0 as the end does: only a hang-up is one. */
static bool peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

static egress_event_sink *event_sink;

void egresslink_set_sink(egress_event_sink *fn)
{
	event_sink = fn;
}

/* One message from fd: 1 taken (valid or not), 0 none waits, -1 the
 * proxy's end is closed. */
static int take_event(struct broker *b, int fd)
{
	struct egress_event ev;
	struct iovec iov = { &ev, sizeof(ev) };
	/* No room for descriptors: any the proxy sent are closed unread. */
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	const char *bad;

	if (n < 0)
		return errno == EINTR ? 1 : errno == EAGAIN ? 0 : -1;
	if (n == 0 && peer_closed(fd))
		return -1;
	if (n != (ssize_t)sizeof(ev) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		drop_event("not an event's size", 0);
	else if ((bad = event_invalid(&ev)))
		drop_event(bad, ev.run_id);
	else if (!event_sink || !event_sink(b, &ev))
		drop_event("no run of that id is going (one that ended: the rest of its "
			   "traffic is in the proxy's log lines)", ev.run_id);
	return 1;
}

static int drain(struct broker *b, int fd, unsigned max)
{
	int rc = 0;

	for (unsigned i = 0; i < max && (rc = take_event(b, fd)) > 0; i++)
		;
	return rc;
}

int egresslink_events_fd(void)
{
	return link_fd >= 0 ? fcntl(link_fd, F_DUPFD_CLOEXEC, 0) : -1;
}

int egresslink_take_events(struct broker *b, int fd)
{
	return drain(b, fd, EVENTS_PER_WAKE);
}

void egresslink_drain(struct broker *b)
{
	if (link_fd >= 0)
		drain(b, link_fd, EVENTS_AT_END);
}
