/* SPDX-License-Identifier: MIT
 * kotoba-egress: started by the broker with its link at EGRESS_FD_LINK
 * and the policy on the command line; takes each unattended run's
 * listening socket (wire.h) and serves every connection accepted on it,
 * one thread each, attributed to that run.  Runs as the broker's user
 * with no capability, no_new_privs, Landlock (read-only /etc and /usr,
 * nothing else) and a seccomp filter that kills it on exec, ptrace,
 * namespace, mount and module calls.  When the link closes
 * (the broker has gone) it exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cap-ng.h>

#include "broker/egress/egress.h"
#include "broker/egress/wire.h"
#include "proto/landlock_abi.h"

struct egress_policy egress_policy;

#define RUNS_MAX 4096

static struct egress_run *runs[RUNS_MAX];

/* Control characters never leave as they are, in a log line or an event. */
static void tame(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 127)
			*s = '?';
}

void egress_log(const struct egress_run *r, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n = r ? snprintf(line, sizeof(line), "kotoba-egress: uid=%u run=%llu ",
			     (unsigned)r->uid, (unsigned long long)r->run_id)
		  : snprintf(line, sizeof(line), "kotoba-egress: ");

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line: threads' lines never interleave. */
	tame(line);
	n = (int)strlen(line);
	line[n] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n + 1) < 0) {
		/* Nowhere left to say it. */
	}
}

/* Blocking, bounded by the link's send timeout (main): a refusal's event
 * is queued at the broker before the refusal reaches the run. */
static void send_event(struct egress_event *ev)
{
	tame(ev->method);
	tame(ev->text);
	if (send(EGRESS_FD_LINK, ev, sizeof(*ev), MSG_NOSIGNAL) != (ssize_t)sizeof(*ev))
		egress_log(NULL, "run=%llu: an event did not reach the broker: %s",
			   (unsigned long long)ev->run_id, strerror(errno));
}

/* The request's part is cut so the reason always fits. */
#define EVENT_WHAT_MAX 160

void egress_report_refusal(const struct egress_run *r, const char *what, const char *why)
{
	struct egress_event ev = { .version = EGRESS_EVENT_VERSION, .kind = EGRESS_EV_REFUSED,
				   .run_id = r->run_id };
	size_t n = strlen(what);

	snprintf(ev.text, sizeof(ev.text), "%.*s%s refused: %s", EVENT_WHAT_MAX, what,
		 n > EVENT_WHAT_MAX ? "..." : "", why);
	send_event(&ev);
}

void egress_report_traffic(const struct egress_run *r, const char *host, const char *port,
			   const char *method, uint64_t requests, uint64_t out, uint64_t in)
{
	struct egress_event ev = { .version = EGRESS_EVENT_VERSION, .kind = EGRESS_EV_TRAFFIC,
				   .run_id = r->run_id, .requests = requests, .bytes_out = out,
				   .bytes_in = in };

	snprintf(ev.method, sizeof(ev.method), "%s", method);
	snprintf(ev.text, sizeof(ev.text), strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
	send_event(&ev);
}

void egress_run_put(struct egress_run *r)
{
	if (atomic_fetch_sub(&r->refs, 1) == 1) {
		close(r->fd);
		free(r);
	}
}

struct job {
	struct egress_run *run;
	int fd;
};

static void *serve_thread(void *arg)
{
	struct job *j = arg;
	struct timeval tv = { EGRESS_IDLE_TIMEOUT_S, 0 };

	int one = 1;

	setsockopt(j->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(j->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(j->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	egress_serve(j->run, j->fd);
	close(j->fd);
	atomic_fetch_sub(&j->run->conns, 1);
	egress_run_put(j->run);
	free(j);
	return NULL;
}

#define TOO_MANY "this run has too many connections open through the egress proxy"

static void accept_all(struct egress_run *r)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		int fd = accept4(r->fd, NULL, NULL, SOCK_CLOEXEC);
		struct job *j;
		pthread_t t;

		if (fd < 0)
			break;
		if (atomic_fetch_add(&r->conns, 1) >= EGRESS_CONNS_PER_RUN) {
			struct egress_io c = { fd, NULL };

			atomic_fetch_sub(&r->conns, 1);
			egress_log(r, "connection refused: the run has %d open already",
				   EGRESS_CONNS_PER_RUN);
			egress_report_refusal(r, "a connection", TOO_MANY);
			egress_refuse(&c, 503, "a connection refused: " TOO_MANY);
			close(fd);
			continue;
		}
		j = malloc(sizeof(*j));
		atomic_fetch_add(&r->refs, 1);
		if (!j || (*j = (struct job){ r, fd }, pthread_create(&t, &attr, serve_thread, j))) {
			free(j);
			close(fd);
			atomic_fetch_sub(&r->conns, 1);
			egress_run_put(r);
		}
	}
	pthread_attr_destroy(&attr);
}

static int slot_of(uint64_t run_id)
{
	for (int i = 0; i < RUNS_MAX; i++)
		if (runs[i] && runs[i]->run_id == run_id)
			return i;
	return -1;
}

static void attach(int ep, const struct egress_req *q, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct egress_run *r;
	int i, acc = 0;
	socklen_t al = sizeof(acc);

	for (i = 0; i < RUNS_MAX && runs[i]; i++)
		;
	/* The broker's own, but checked: a listening socket, one per run. */
	if (i == RUNS_MAX || slot_of(q->run_id) >= 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc ||
	    !(r = calloc(1, sizeof(*r)))) {
		egress_log(NULL, "run=%llu: listener not taken", (unsigned long long)q->run_id);
		close(fd);
		return;
	}
	*r = (struct egress_run){ .run_id = q->run_id, .uid = q->uid, .fd = fd };
	atomic_init(&r->refs, 1);
	atomic_init(&r->conns, 0);
	ev.data.ptr = r;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		egress_run_put(r);
		return;
	}
	runs[i] = r;
}

static void detach(int ep, uint64_t run_id)
{
	int i = slot_of(run_id);

	if (i < 0)
		return;
	epoll_ctl(ep, EPOLL_CTL_DEL, runs[i]->fd, NULL);
	shutdown(runs[i]->fd, SHUT_RDWR);
	egress_run_put(runs[i]);
	runs[i] = NULL;
}

/* false when the broker has gone. */
static bool read_link(int ep)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct egress_req q;
	struct iovec iov = { &q, sizeof(q) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(EGRESS_FD_LINK, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int fd = -1;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (n == (ssize_t)sizeof(q) && q.op == EGRESS_ATTACH && fd >= 0)
		attach(ep, &q, fd);
	else if (n == (ssize_t)sizeof(q) && q.op == EGRESS_DETACH && fd < 0)
		detach(ep, q.run_id);
	else if (fd >= 0)
		close(fd);
	return true;
}

static __attribute__((noreturn)) void die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	egress_log(NULL, "%s", msg);
	exit(1);
}

static void add_host(struct egress_hosts *h, const char *entry, const char *opt)
{
	if (!egress_hosts_add(h, entry))
		die("%s %s: not a host name, *.name pattern or address (or over %d)", opt, entry,
		    EGRESS_HOSTS_MAX);
}

static void parse_args(int argc, char **argv, const char **upstream_ca)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "allow", required_argument, NULL, 'a' },
		{ "deny", required_argument, NULL, 'd' },
		{ "upstream-ca", required_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	int c, m;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if ((m = egress_mode_parse(optarg)) < 0)
				die("--mode %s: not get, allowlist, none or any", optarg);
			egress_policy.mode = (enum egress_mode)m;
			break;
		case 'a': add_host(&egress_policy.allow, optarg, "--allow"); break;
		case 'd': add_host(&egress_policy.deny, optarg, "--deny"); break;
		case 'u': *upstream_ca = optarg; break;
		default: die("usage: kotoba-egress [--mode M] [--allow H]... [--deny H]... "
			     "[--upstream-ca FILE]");
		}
	}
}

/* The files the proxy reads once it serves: name resolution's
 * (resolv.conf, hosts, nsswitch.conf, gai.conf and the NSS modules
 * glibc loads), and nothing else.  Everything else, the broker's state
 * directory (the service user's: grants, the audit trail) included, is
 * out of its reach, and nothing anywhere is writable. */
static const char *const readable[] = { "/etc", "/usr", "/lib", "/lib64",
					 /* resolv.conf's target under systemd-resolved */
					 "/run/systemd/resolve" };

static void landlock(void)
{
	long probe = syscall(SYS_landlock_create_ruleset, NULL, 0,
			     LANDLOCK_CREATE_RULESET_VERSION);
	unsigned abi = probe > 0 ? (probe > KL_ABI_KNOWN ? KL_ABI_KNOWN : (unsigned)probe) : 0;
	struct kl_ruleset_attr attr = { .handled_access_fs = kl_fs_rights(abi) };
	int ruleset;

	if (!abi) {
		egress_log(NULL, "no Landlock on this kernel: files are not confined");
		return;
	}
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr,
			       sizeof(attr.handled_access_fs), 0);
	if (ruleset < 0)
		die("confine: landlock_create_ruleset: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(readable) / sizeof(readable[0]); i++) {
		struct kl_path_beneath_attr rule = {
			.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
			.parent_fd = open(readable[i], O_PATH | O_DIRECTORY | O_CLOEXEC),
		};

		if (rule.parent_fd < 0)
			continue; /* /lib64 on a host without it */
		if (syscall(SYS_landlock_add_rule, ruleset, KL_RULE_PATH_BENEATH, &rule, 0) < 0)
			die("confine: landlock_add_rule %s: %s", readable[i], strerror(errno));
		close(rule.parent_fd);
	}
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		die("confine: landlock_restrict_self: %s", strerror(errno));
	close(ruleset);
}

/* Calls the proxy never needs: a compromised proxy cannot run a program,
 * trace or signal-inject, enter or make namespaces, mount, load modules
 * or BPF, or change its ids. */
static void confine(void)
{
	static const int killed[] = {
		SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(process_vm_readv),
		SCMP_SYS(process_vm_writev), SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(unshare),
		SCMP_SYS(setns), SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(bpf),
		SCMP_SYS(perf_event_open), SCMP_SYS(init_module), SCMP_SYS(finit_module),
		SCMP_SYS(delete_module), SCMP_SYS(kexec_load), SCMP_SYS(kexec_file_load),
		SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
		SCMP_SYS(io_uring_setup), SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setreuid),
		SCMP_SYS(setregid), SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setgroups),
		SCMP_SYS(open_by_handle_at), SCMP_SYS(name_to_handle_at), SCMP_SYS(fsopen),
		SCMP_SYS(fsmount), SCMP_SYS(move_mount), SCMP_SYS(open_tree), SCMP_SYS(reboot),
		SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(acct), SCMP_SYS(settimeofday),
		SCMP_SYS(clock_settime), SCMP_SYS(personality),
#ifndef __SANITIZE_ADDRESS__
		/* LeakSanitizer stops the world at exit with ptrace: a
		 * sanitizer build keeps it out of the filter, as the broker's. */
		SCMP_SYS(ptrace),
#endif
	};
	static const scmp_datum_t new_ns[] = { CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS,
					       CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
					       CLONE_NEWNET };
	scmp_filter_ctx ctx;

	capng_clear(CAPNG_SELECT_BOTH);
	if (capng_apply(CAPNG_SELECT_BOTH) < 0)
		die("confine: cannot drop every capability");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("confine: prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	landlock();
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		die("confine: seccomp_init failed");
	for (size_t i = 0; i < sizeof(killed) / sizeof(killed[0]); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, killed[i], 0) < 0)
			die("confine: seccomp_rule_add(%d) failed", killed[i]);
	/* clone with any CLONE_NEW* flag: a namespace (threads pass). */
	for (size_t i = 0; i < sizeof(new_ns) / sizeof(new_ns[0]); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, new_ns[i], new_ns[i])) < 0)
			die("confine: seccomp_rule_add(clone) failed");
	/* clone3's flags are in a struct the filter cannot read: libc
	 * falls back to clone on ENOSYS. */
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0 ||
	    seccomp_load(ctx) < 0)
		die("confine: cannot load the seccomp filter");
	seccomp_release(ctx);
}

/* The broker closed its end of the link (it stopped or died): however
 * the server ended, nobody needs another.  Read without taking a message:
 * a hang-up, or an end of file behind the messages still queued. */
static bool broker_gone(void)
{
	struct pollfd p = { .fd = EGRESS_FD_LINK, .events = POLLIN | POLLRDHUP };

	return poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

/* The process that serves is a child of this one, which made the CA
 * and only waits: when the server dies (a bug, a signal), every run it
 * served loses its network (their sockets go with it: connections are
 * refused, nothing leaves), and a new server with the same CA takes the
 * runs that start from then on.  Returns in the server; exits when the
 * server ended because the broker has gone. */
static void serve_in_child(void)
{
	pid_t self = getpid();

	for (;;) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			/* The server goes with this process, whatever kills it. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
				_exit(1);
			return;
		}
		if (pid < 0)
			die("fork: %s", strerror(errno));
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				die("waitpid: %s", strerror(errno));
		if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || broker_gone())
			exit(0);
		egress_log(NULL, "the serving process %d ended (%s %d): the runs it served have "
				 "lost their network; starting another",
			   (int)pid, WIFSIGNALED(status) ? "signal" : "status",
			   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		/* Not a busy loop if it dies at once. */
		sleep(1);
	}
}

int main(int argc, char **argv)
{
	const char *upstream_ca = NULL;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, got[64];
	char err[512];
	int ep;

	signal(SIGPIPE, SIG_IGN);
	/* A broker that stops reading holds a refusal this long at most. */
	setsockopt(EGRESS_FD_LINK, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){ 5, 0 },
		   sizeof(struct timeval));
	parse_args(argc, argv, &upstream_ca);
	if (egress_tls_init(EGRESS_FD_BUNDLE, upstream_ca, err, sizeof(err)) < 0)
		die("%s", err);
	confine();
	if (send(EGRESS_FD_LINK, "S", 1, MSG_NOSIGNAL) != 1)
		die("cannot tell the broker it serves: %s", strerror(errno));
	serve_in_child();
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, EGRESS_FD_LINK, &ev) < 0)
		die("epoll: %s", strerror(errno));
	egress_log(NULL, "serving: [egress] unattended = %s, %zu allowed, %zu denied hosts",
		   egress_mode_name(egress_policy.mode), egress_policy.allow.n,
		   egress_policy.deny.n);
	for (;;) {
		int n = epoll_wait(ep, got, 64, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			if (!got[i].data.ptr) {
				if (!read_link(ep))
					return 0;
			} else {
				accept_all(got[i].data.ptr);
			}
		}
	}
}
