/* SPDX-License-Identifier: MIT
 * kotoba-egress: started by the broker with its link at EGRESS_FD_LINK
 * and the policy on the command line; takes each unattended run's (and,
 * with [egress] approved = proxy, each approved run's) listening socket
 * (wire.h) and serves every connection accepted on it, one thread each,
 * attributed to that run and under the rule the broker named for it.
 * Runs as the broker's user with no capability, no_new_privs, Landlock
 * (read-only /etc and /usr, nothing else) and a seccomp filter that
 * kills it on exec, ptrace, namespace, mount and module calls.  When
 * the link closes (the broker has gone) it exits.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cap-ng.h>

#include "broker/egress/egress.h"
#include "broker/egress/wire.h"
#include "proto/landlock_abi.h"

struct egress_policy egress_policy, egress_policy_approved;

const char *egress_rule_name(const struct egress_run *r, char *buf, size_t len)
{
	if (r->policy == &egress_policy_approved)
		snprintf(buf, len, "approved = proxy");
	else
		snprintf(buf, len, "unattended = %s", egress_mode_name(r->policy->mode));
	return buf;
}

#define RUNS_MAX 4096

static struct egress_run *runs[RUNS_MAX];

/* [egress] connections and connections_per_user, from the command line:
 * how many connections (each a thread) all runs together, and all the
 * runs of one user, may have at once. */
static int conns_max = 512, conns_per_uid_max = 128;
static atomic_int conns_total;

/* One user's share: its runs attached (the main thread's count) and
 * their connections being served (the threads').  A slot with neither is
 * free: no thread can count into it any more. */
struct egress_share {
	uid_t uid;
	int runs;
	atomic_int conns;
};

static struct egress_share shares[RUNS_MAX];

/* A refusal waits up to LINGER_S for the client (http.c) on a thread of
 * its own, never in the loop that accepts for every run; past this many
 * at once, one is answered without waiting. */
#define REFUSALS_MAX 64
static atomic_int refusals;

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

struct refusal {
	int fd;
	char body[256];
};

/* Lets go of one connection's places in each cap (admit()). */
static void release(struct egress_run *r)
{
	atomic_fetch_sub(&conns_total, 1);
	atomic_fetch_sub(&r->share->conns, 1);
	atomic_fetch_sub(&r->conns, 1);
}

/* A place for one more connection in everyone's cap, its user's and
 * the run's, in that order (the broadest that is full is the one named);
 * NULL, or why it is refused, naming the cap, for the answer's body and
 * the run's receipt (the log line says it too).  Only the accepting thread adds: a count over a cap is
 * never seen by another admit(). */
static const char *admit(struct egress_run *r, char *why, size_t len)
{
	if (atomic_fetch_add(&conns_total, 1) >= conns_max) {
		atomic_fetch_sub(&conns_total, 1);
		egress_log(r, "connection refused: %d open already for all users "
			      "([egress] connections)", conns_max);
		snprintf(why, len, "the egress proxy serves %d connections for all "
				    "users already, its most ([egress] connections)", conns_max);
		return why;
	}
	if (atomic_fetch_add(&r->share->conns, 1) >= conns_per_uid_max) {
		atomic_fetch_sub(&r->share->conns, 1);
		atomic_fetch_sub(&conns_total, 1);
		egress_log(r, "connection refused: the user's runs have %d open already "
			      "([egress] connections_per_user)", conns_per_uid_max);
		snprintf(why, len, "this user's runs have %d connections open through "
				    "the egress proxy, their most ([egress] connections_per_user)",
			 conns_per_uid_max);
		return why;
	}
	if (atomic_fetch_add(&r->conns, 1) >= EGRESS_CONNS_PER_RUN) {
		atomic_fetch_sub(&r->conns, 1);
		atomic_fetch_sub(&r->share->conns, 1);
		atomic_fetch_sub(&conns_total, 1);
		egress_log(r, "connection refused: the run has %d open already",
			   EGRESS_CONNS_PER_RUN);
		snprintf(why, len, "this run has too many connections open through "
				    "the egress proxy (%d)", EGRESS_CONNS_PER_RUN);
		return why;
	}
	return NULL;
}

static void *refuse_thread(void *arg)
{
	struct refusal *f = arg;
	struct egress_io c = { f->fd, NULL };

	egress_refuse(&c, 503, f->body);
	close(f->fd);
	free(f);
	atomic_fetch_sub(&refusals, 1);
	return NULL;
}

/* 503 with body, then the socket closed: on a thread of its own while
 * there are few, else at once. */
static void refuse(int fd, const char *body, const pthread_attr_t *attr)
{
	struct refusal *f = NULL;
	pthread_t t;

	if (atomic_fetch_add(&refusals, 1) < REFUSALS_MAX && (f = malloc(sizeof(*f)))) {
		f->fd = fd;
		snprintf(f->body, sizeof(f->body), "%s", body);
		if (pthread_create(&t, attr, refuse_thread, f) == 0)
			return;
		free(f);
	}
	atomic_fetch_sub(&refusals, 1);
	egress_refuse_now(fd, 503, body);
	close(fd);
}

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
	release(j->run);
	egress_run_put(j->run);
	free(j);
	return NULL;
}

static void accept_all(struct egress_run *r)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		int fd = accept4(r->fd, NULL, NULL, SOCK_CLOEXEC);
		char why[160], body[200];
		struct job *j;
		pthread_t t;

		if (fd < 0)
			break;
		if (admit(r, why, sizeof(why))) {
			egress_report_refusal(r, "a connection", why);
			snprintf(body, sizeof(body), "a connection refused: %s", why);
			refuse(fd, body, &attr);
			continue;
		}
		j = malloc(sizeof(*j));
		atomic_fetch_add(&r->refs, 1);
		if (!j || (*j = (struct job){ r, fd }, pthread_create(&t, &attr, serve_thread, j))) {
			free(j);
			close(fd);
			release(r);
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

/* The uid's share, or a free slot made its own; NULL when every slot
 * is some other user's.  The main thread's only. */
static struct egress_share *share_of(uid_t uid)
{
	struct egress_share *free_slot = NULL;

	for (int i = 0; i < RUNS_MAX; i++) {
		struct egress_share *s = &shares[i];
		bool used = s->runs > 0 || atomic_load(&s->conns) > 0;

		if (used && s->uid == uid)
			return s;
		if (!used && !free_slot)
			free_slot = s;
	}
	if (free_slot)
		free_slot->uid = uid;
	return free_slot;
}

static void attach(int ep, const struct egress_req *q, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct egress_share *share = share_of(q->uid);
	struct egress_run *r;
	int i, acc = 0;
	socklen_t al = sizeof(acc);

	for (i = 0; i < RUNS_MAX && runs[i]; i++)
		;
	/* The broker's own, but checked: a listening socket, one per run,
	 * and a rule this proxy knows. */
	if (i == RUNS_MAX || !share || slot_of(q->run_id) >= 0 ||
	    (q->rule != EGRESS_RULE_UNATTENDED && q->rule != EGRESS_RULE_APPROVED) ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc ||
	    !(r = calloc(1, sizeof(*r)))) {
		egress_log(NULL, "run=%llu: listener not taken", (unsigned long long)q->run_id);
		close(fd);
		return;
	}
	*r = (struct egress_run){ .run_id = q->run_id, .uid = q->uid, .fd = fd,
				  .policy = q->rule == EGRESS_RULE_APPROVED ? &egress_policy_approved
									    : &egress_policy,
				  .share = share };
	atomic_init(&r->refs, 1);
	atomic_init(&r->conns, 0);
	ev.data.ptr = r;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		egress_run_put(r);
		return;
	}
	share->runs++;
	runs[i] = r;
}

static void detach(int ep, uint64_t run_id)
{
	int i = slot_of(run_id);

	if (i < 0)
		return;
	epoll_ctl(ep, EPOLL_CTL_DEL, runs[i]->fd, NULL);
	shutdown(runs[i]->fd, SHUT_RDWR);
	runs[i]->share->runs--;
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

static int cap_arg(const char *s, const char *opt)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s < '0' || *s > '9' || *end || v < 1 || v > 16384)
		die("%s %s: not a whole number from 1 to 16384", opt, s);
	return (int)v;
}

static void parse_args(int argc, char **argv, const char **upstream_ca)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "allow", required_argument, NULL, 'a' },
		{ "deny", required_argument, NULL, 'd' },
		{ "upstream-ca", required_argument, NULL, 'u' },
		{ "connections", required_argument, NULL, 'c' },
		{ "connections-per-user", required_argument, NULL, 'p' },
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
		case 'c': conns_max = cap_arg(optarg, "--connections"); break;
		case 'p': conns_per_uid_max = cap_arg(optarg, "--connections-per-user"); break;
		default: die("usage: kotoba-egress [--mode M] [--allow H]... [--deny H]... "
			     "[--upstream-ca FILE] [--connections N] [--connections-per-user N]");
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
	struct rlimit nofile;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, got[64];
	char err[512];
	int ep;

	signal(SIGPIPE, SIG_IGN);
	/* Again after the exec: an SELinux domain change clears the death
	 * signal the broker's child set.  A broker already gone has closed
	 * the link. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || broker_gone())
		exit(0);
	/* A broker that stops reading holds a refusal this long at most. */
	setsockopt(EGRESS_FD_LINK, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){ 5, 0 },
		   sizeof(struct timeval));
	parse_args(argc, argv, &upstream_ca);
	/* Two descriptors a connection and one a run's listener: as many
	 * as the hard limit allows. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* Runs a person approved: any method, the same host lists (their
	 * entries are shared, never freed while the proxy runs). */
	egress_policy_approved = (struct egress_policy){ .mode = EGRESS_ANY,
							 .allow = egress_policy.allow,
							 .deny = egress_policy.deny };
	if (egress_tls_init(EGRESS_FD_BUNDLE, upstream_ca, err, sizeof(err)) < 0)
		die("%s", err);
	confine();
	if (send(EGRESS_FD_LINK, "S", 1, MSG_NOSIGNAL) != 1)
		die("cannot tell the broker it serves: %s", strerror(errno));
	serve_in_child();
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, EGRESS_FD_LINK, &ev) < 0)
		die("epoll: %s", strerror(errno));
	egress_log(NULL, "serving: [egress] unattended = %s, %zu allowed, %zu denied hosts, "
			 "at most %d connections, %d per user, %d per run",
		   egress_mode_name(egress_policy.mode), egress_policy.allow.n,
		   egress_policy.deny.n, conns_max, conns_per_uid_max, EGRESS_CONNS_PER_RUN);
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
