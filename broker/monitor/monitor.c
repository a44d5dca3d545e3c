/* SPDX-License-Identifier: MIT
 * kotoba-monitor: the system broker's privileged half (ARCHITECTURE.md,
 * "The monitor's requests").  The broker starts it as root before it
 * reads a byte from anyone; it becomes the service user keeping CAP_SETUID,
 * CAP_SETGID and CAP_KILL, and then does three things only:
 *
 *   - accepts each connection on the broker's socket, reads SO_PEERCRED
 *     itself, attaches the peer's uid (root's is root_user's; never the
 *     service user's, never a uid without a user entry) and hands the
 *     connection to the broker;
 *   - starts a worker, the fixed kotoba-worker as the user of an attached
 *     uid, while a connection of that uid is open (or lately was);
 *   - sends SIGKILL to a child of the broker, through a pidfd.
 *
 * It links no msgpack, PCRE2 or SQLite, and reads from the broker only the
 * fixed-size requests of broker/monitor/wire.h.  The broker holds no
 * capability: what it may do as another user is what this file allows.
 */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "broker/log.h"
#include "broker/monitor/wire.h"
#include "broker/privsep.h"
#include "proto/limits.h"
#include "proto/status.h"

/* Connections held at once (each a descriptor watched for its hang-up),
 * and users attached at once. */
#define CONNS_MAX 4096
#define USERS_MAX 1024

struct conn {
	int fd;        /* -1: free */
	uid_t uid;     /* the worker identity's uid it attached */
};

struct user {
	struct identity id;  /* resolved when its first connection came */
	unsigned conns;      /* open connections */
	uint64_t last_ms;    /* when its last connection closed */
	bool used;
};

static struct conn conns[CONNS_MAX];
static struct user users[USERS_MAX];
static uid_t svc_uid;
static gid_t svc_gid;
static uint64_t linger_ms = 10000;
static char worker_path[4096];
static int epfd = -1, reserve_fd = -1;
/* The broker, this process's parent, as it was at start.  Were it gone,
 * the parent would be another process, whose children are not the
 * broker's: nothing more is done then. */
static pid_t broker_pid;
/* Until MON_STARTED: root_user's user may be started without a connection
 * (broker/container.c checks the image at start, as root_user). */
static bool starting = true;
static struct identity start_id;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- who is attached ------------------------------------------------------ */

/* No connection open, and the last closed more than linger_ms ago. */
static bool gone(const struct user *u)
{
	return !u->conns && now_ms() - u->last_ms > linger_ms;
}

static struct user *user_of(uid_t uid)
{
	for (size_t i = 0; i < USERS_MAX; i++)
		if (users[i].used && users[i].id.uid == uid)
			return &users[i];
	return NULL;
}

static struct user *user_add(const struct identity *id)
{
	struct user *u = user_of(id->uid);

	for (size_t i = 0; !u && i < USERS_MAX; i++)
		if (!users[i].used || gone(&users[i]))
			u = &users[i];
	if (!u)
		return NULL;
	if (!u->used || u->id.uid != id->uid)
		*u = (struct user){ .used = true };
	/* The lookup of this connection: a changed user entry counts now. */
	u->id = *id;
	return u;
}

/* May a worker start as uid?  While one of its connections is open, and
 * for linger_ms after the last closed (a warm spare made as a run ends,
 * a container stopped as its user). */
static bool attached(uid_t uid, const struct identity **id)
{
	struct user *u = user_of(uid);

	if (starting && start_id.uid == uid && uid != 0) {
		*id = &start_id;
		return true;
	}
	if (!u || gone(u))
		return false;
	*id = &u->id;
	return true;
}

/* A connection the broker's link had no room for: the listener rests
 * (the kernel's backlog holds the next ones) until the broker reads. */
static struct {
	bool waiting;
	int fd;
	struct conn *kept;
	struct mon_attach a;
} pending;

static void conn_gone(struct conn *c)
{
	struct user *u = user_of(c->uid);

	/* Gone before the broker had it: nothing is handed over. */
	if (pending.waiting && pending.kept == c)
		pending.waiting = false, pending.kept = NULL;
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (u && u->conns && --u->conns == 0)
		u->last_ms = now_ms();
}

static struct conn *conn_slot(void)
{
	for (size_t i = 0; i < CONNS_MAX; i++)
		if (conns[i].fd < 0)
			return &conns[i];
	return NULL;
}

/* ---- accepting ------------------------------------------------------------ */

/* Decides whether this peer is attached; false with the reason. */
static bool attach(const struct ucred *cr, struct identity *id, char *why, size_t len)
{
	if (cr->uid == svc_uid) {
		snprintf(why, len, "the service user");
		return false;
	}
	return privsep_identity(cr->uid, id, why, len) == 0;
}

/* 1: sent; 0: the link is full; -1: it failed. */
static int send_attach(int fd, struct mon_attach *a)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { a, sizeof(*a) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(MON_FD_ATTACH, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(*a))
		return 1;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	log_warn("cannot hand a connection to the broker: %s", strerror(errno));
	return -1;
}

static void listen_for(bool connections)
{
	epoll_ctl(epfd, EPOLL_CTL_MOD, MON_FD_LISTEN,
		  &(struct epoll_event){ .events = connections ? EPOLLIN : 0, .data.ptr = NULL });
	epoll_ctl(epfd, EPOLL_CTL_MOD, MON_FD_ATTACH,
		  &(struct epoll_event){ .events = connections ? 0 : EPOLLOUT,
					 .data.ptr = &reserve_fd });
}

/* The connection is the broker's now, or (not kept) closed. */
static void handed(int fd, struct conn *kept, int sent)
{
	if (sent < 0 && kept) {
		shutdown(fd, SHUT_RDWR);
		conn_gone(kept);
	} else if (!kept) {
		close(fd);
	}
}

static void hand_over(int fd, struct mon_attach *a, struct conn *kept)
{
	int sent = send_attach(fd, a);

	if (sent == 0) {
		pending.waiting = true;
		pending.fd = fd, pending.kept = kept, pending.a = *a;
		listen_for(false);
		log_warn("the broker is not reading the connections it was handed: accepting "
			 "waits for it");
		return;
	}
	handed(fd, kept, sent);
}

static void on_attach_writable(void)
{
	int sent;

	if (!pending.waiting) {
		listen_for(true);
		return;
	}
	sent = send_attach(pending.fd, &pending.a);
	if (sent == 0)
		return;
	handed(pending.fd, pending.kept, sent);
	pending.waiting = false;
	listen_for(true);
}

/* At the open-file limit: the connection is still taken, so the broker
 * can tell the peer why, and not kept. */
static int accept_at_limit(void)
{
	int fd;

	if (reserve_fd >= 0)
		close(reserve_fd);
	fd = accept4(MON_FD_LISTEN, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return fd;
}

static void on_listen(void)
{
	struct mon_attach a = { 0 };
	struct ucred cr;
	socklen_t sl = sizeof(cr);
	struct identity id;
	struct conn *c = conn_slot();
	struct user *u;
	bool at_limit = false;
	int fd;

	if (pending.waiting)
		return;
	fd = accept4(MON_FD_LISTEN, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE))
		fd = accept_at_limit(), at_limit = true;
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) < 0) {
		close(fd);
		return;
	}
	a.uid = cr.uid, a.gid = cr.gid, a.pid = cr.pid;
	if (at_limit) {
		a.attached = MON_AT_FD_LIMIT;
		snprintf(a.why, sizeof(a.why), "the monitor is at its open-file limit");
	}
	else if (!c)
		snprintf(a.why, sizeof(a.why), "the monitor holds %d connections", CONNS_MAX);
	else if (!attach(&cr, &id, a.why, sizeof(a.why)))
		;
	else if (!(u = user_add(&id)))
		snprintf(a.why, sizeof(a.why), "the monitor holds %d users", USERS_MAX);
	else if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd,
			   &(struct epoll_event){ .events = 0, .data.ptr = c }) == 0) {
		/* No EPOLLIN: only the hang-up (EPOLLHUP comes unasked). */
		c->fd = fd, c->uid = id.uid;
		u->conns++;
		a.attached = MON_ATTACHED;
	}
	if (a.attached != MON_ATTACHED)
		log_info("uid=%u pid=%d not attached: %s", (unsigned)cr.uid, (int)cr.pid,
			 a.why);
	hand_over(fd, &a, a.attached == MON_ATTACHED ? c : NULL);
}

/* ---- starting a worker ---------------------------------------------------- */

/* In the child: the start failed, and M has answered already.  The
 * broker hears why on its start-report pipe. */
static __attribute__((noreturn)) void child_fail(int report_fd, enum mon_step step, int err,
						  const char *what)
{
	struct mon_start_fail f = { step, err, "" };

	snprintf(f.what, sizeof(f.what), "%s", what);
	(void)!write(report_fd, &f, sizeof(f));
	_exit(WORKER_CHILD_DIED);
}

/* Moves the fds to 0..3 without one dup2 overwriting another's source;
 * the others (the report pipe, cgroup.procs) stay above, close-on-exec. */
static int place_fds(int *fd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((fd[i] = fcntl(fd[i], F_DUPFD_CLOEXEC, 16)) < 0)
			return -1;
	for (size_t i = 0; i < 4; i++)
		if (dup2(fd[i], (int)i) < 0)
			return -1;
	return 0;
}

/* In the child, top to bottom: the run's cgroup (as the service user, v1
 * moves a task only for root or its own uid), exactly fds 0-3, default
 * signals, the peer's groups, gid and uid read back, no capability, and
 * the worker exec'd as the peer.  The report pipe, close-on-exec, is
 * kept until the exec so that a failure can still be told. */
static __attribute__((noreturn)) void become_peer_and_exec(const struct identity *id, int *fd,
							   size_t n_fds, int gate)
{
	char *const argv[] = { (char *)"kotoba-worker", NULL };
	char *const envp[] = { NULL };
	char why[200];
	const char *what;
	sigset_t none;
	int rc, report;
	char c;

	/* Nothing before the answer is on its way (see spawn()). */
	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	close(gate);
	if (place_fds(fd, n_fds) < 0)
		_exit(WORKER_CHILD_DIED);
	report = fd[4];
	for (size_t i = MON_SPAWN_FDS; i < n_fds; i++)
		if (write(fd[i], "0", 1) != 1)
			child_fail(report, MON_STEP_CGROUP, errno, "cannot join the run's cgroup");
	close_range(4, (unsigned)report - 1, 0);
	close_range((unsigned)report + 1, ~0U, 0);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	rc = privsep_take_ids(id, &what);
	if (rc < 0)
		child_fail(report, MON_STEP_IDENTITY, -rc, what);
	if (!privsep_ids_are(id))
		child_fail(report, MON_STEP_IDENTITY, EPERM,
			   "the uids, gids or groups read back are not the peer's");
	/* libcap-ng resets itself at fork through pthread_atfork, which a
	 * raw clone3 does not run: it must address this process. */
	capng_setpid((int)getpid());
	rc = privsep_drop_all_caps(why, sizeof(why));
	if (rc < 0)
		child_fail(report, MON_STEP_CAPS, -rc, why);
	execve(worker_path, argv, envp);
	rc = errno;
	limit_named(rc, "the broker's fork of the worker", why, sizeof(why));
	{
		char msg[300];

		snprintf(msg, sizeof(msg), "cannot exec kotoba-worker: %s", why);
		child_fail(report, MON_STEP_WORKER, rc, msg);
	}
}

/* The start-report pipe is a pipe's write end: whatever else the broker
 * sent there, the child would not write its report into. */
static bool is_report_pipe(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_ACCMODE) == O_WRONLY && fstat(fd, &st) == 0 &&
	       S_ISFIFO(st.st_mode);
}

/* The worker is the broker's child (CLONE_PARENT): the broker reaps it and
 * reads its status, as it would its own fork's.  Its exit signal is the
 * monitor's own, SIGCHLD (clone3 takes none with CLONE_PARENT).  The
 * answer goes as soon as the child exists: the monitor never waits for
 * a child, and the broker, which waits for the answer, serves nothing
 * else meanwhile.  What becomes of the start the child tells the broker
 * itself: a failure on the report pipe, the exec by that pipe's closing
 * and the worker's frames on its link. */
static void spawn(const struct mon_request *rq, int *fd, size_t n_fds, struct mon_reply *rp,
		  int *gate)
{
	struct clone_args ca = { .flags = CLONE_PARENT };
	const struct identity *id;
	int g[2];
	long pid;

	if (n_fds < MON_SPAWN_FDS) {
		rp->err = EBADMSG;
		snprintf(rp->what, sizeof(rp->what), "a worker needs %d descriptors, %zu came",
			 MON_SPAWN_FDS, n_fds);
		return;
	}
	if (!is_report_pipe(fd[4])) {
		rp->err = EBADMSG;
		snprintf(rp->what, sizeof(rp->what),
			 "the fifth descriptor is not the write end of a pipe");
		return;
	}
	if (!attached(rq->uid, &id)) {
		rp->err = EPERM;
		snprintf(rp->what, sizeof(rp->what), "uid %u has no open connection", rq->uid);
		return;
	}
	/* The child waits at this gate until the answer is sent: on a busy
	 * machine the scheduler would otherwise run the new child first, and
	 * the broker would wait for its identity switch and exec after all. */
	if (pipe2(g, O_CLOEXEC) < 0) {
		rp->err = errno;
		snprintf(rp->what, sizeof(rp->what), "pipe2: %s", strerror(errno));
		return;
	}
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0) {
		close(g[1]);
		become_peer_and_exec(id, fd, n_fds, g[0]);
	}
	close(g[0]);
	if (pid < 0) {
		rp->err = errno;
		limit_named(errno, "the broker's monitor", rp->what, sizeof(rp->what));
		close(g[1]);
		return;
	}
	rp->pid = (int32_t)pid;
	*gate = g[1];
}

/* ---- killing -------------------------------------------------------------- */

/* The parent pid of the process pidfd was opened for, from /proc: read
 * after the pidfd is held, so a pid reused since then is the other
 * process's, and the pidfd's signal then goes nowhere (ESRCH). */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	if (!rp)
		return -1;
	return (pid_t)strtol(rp + 4, NULL, 10); /* ") S <ppid>" */
}

static void kill_child(const struct mon_request *rq, struct mon_reply *rp)
{
	int pfd;

	if (rq->pid <= 1 || rq->pid == getpid()) {
		rp->err = EPERM;
		snprintf(rp->what, sizeof(rp->what), "pid %d is not a child of the broker", rq->pid);
		return;
	}
	pfd = (int)syscall(SYS_pidfd_open, rq->pid, 0);
	if (pfd < 0) {
		rp->err = errno;
		snprintf(rp->what, sizeof(rp->what), "pid %d: %s", rq->pid, strerror(errno));
		return;
	}
	if (parent_of(rq->pid) != broker_pid) {
		rp->err = EPERM;
		snprintf(rp->what, sizeof(rp->what), "pid %d is not a child of the broker", rq->pid);
	} else if (syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) < 0) {
		rp->err = errno;
		snprintf(rp->what, sizeof(rp->what), "pid %d: %s", rq->pid, strerror(errno));
	}
	close(pfd);
}

/* ---- requests ------------------------------------------------------------- */

static size_t take_fds(struct msghdr *mh, int *fd)
{
	size_t n = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (n < MON_FDS_MAX)
				fd[n++] = f;
			else
				close(f);
		}
	}
	return n;
}

static void refuse(struct mon_reply *rp, const char *what)
{
	rp->err = EBADMSG;
	snprintf(rp->what, sizeof(rp->what), "%s", what);
}

static void answer(const struct mon_request *rq, ssize_t len, int flags, int *fd, size_t n_fds,
		   struct mon_reply *rp, int *gate)
{
	if (getppid() != broker_pid)
		refuse(rp, "the broker that started the monitor is gone");
	else if (len != (ssize_t)sizeof(*rq) || (flags & (MSG_TRUNC | MSG_CTRUNC)))
		refuse(rp, "a request of the wrong size");
	else if (rq->n_fds != n_fds)
		refuse(rp, "a request whose descriptors are not the ones it names");
	else if (rq->op == MON_SPAWN)
		spawn(rq, fd, n_fds, rp, gate);
	else if (rq->op == MON_KILL && n_fds == 0)
		kill_child(rq, rp);
	else if (rq->op == MON_KILL)
		refuse(rp, "a kill that carries descriptors");
	else if (rq->op == MON_STARTED && n_fds == 0)
		starting = false;
	else
		refuse(rp, "an unknown request");
	if (rp->err)
		log_warn("refused op=%u uid=%u pid=%d: %s", rq->op, rq->uid, rq->pid,
			 rp->what);
}

/* false: the broker is gone. */
static bool on_request(void)
{
	char cbuf[CMSG_SPACE(sizeof(int) * MON_FDS_MAX)];
	struct mon_request rq = { 0 };
	struct mon_reply rp = { 0 };
	char spare[sizeof(rq) + 1];
	struct iovec iov = { spare, sizeof(spare) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	int fd[MON_FDS_MAX], gate = -1;
	size_t n_fds;
	ssize_t len;
	bool sent;

	/* One byte more than a request, so a longer one shows as longer. */
	len = recvmsg(MON_FD_REQUESTS, &mh, MSG_CMSG_CLOEXEC);
	if (len == 0 || (len < 0 && errno != EINTR && errno != EAGAIN))
		return false;
	if (len < 0)
		return true;
	memcpy(&rq, spare, (size_t)len < sizeof(rq) ? (size_t)len : sizeof(rq));
	n_fds = take_fds(&mh, fd);
	answer(&rq, len, mh.msg_flags, fd, n_fds, &rp, &gate);
	for (size_t i = 0; i < n_fds; i++)
		close(fd[i]);
	sent = send(MON_FD_REQUESTS, &rp, sizeof(rp), MSG_NOSIGNAL) == (ssize_t)sizeof(rp);
	/* Its close lets the child started go on, the answer sent or not. */
	if (gate >= 0)
		close(gate);
	return sent;
}

/* ---- start ---------------------------------------------------------------- */

static int parse_args(int argc, char **argv, uid_t *root_uid)
{
	static const struct option opts[] = {
		{ "service-uid", required_argument, NULL, 'u' },
		{ "service-gid", required_argument, NULL, 'g' },
		{ "root-uid", required_argument, NULL, 'r' },
		{ "worker", required_argument, NULL, 'w' },
		{ "linger-ms", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	int c, seen = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u': svc_uid = (uid_t)strtoul(optarg, NULL, 10); seen |= 1; break;
		case 'g': svc_gid = (gid_t)strtoul(optarg, NULL, 10); seen |= 2; break;
		case 'r': *root_uid = (uid_t)strtoul(optarg, NULL, 10); seen |= 4; break;
		case 'w': snprintf(worker_path, sizeof(worker_path), "%s", optarg); seen |= 8; break;
		case 'l': linger_ms = strtoull(optarg, NULL, 10); break;
		default: return -1;
		}
	}
	return seen == 15 && svc_uid != 0 && *root_uid != 0 && worker_path[0] == '/' ? 0 : -1;
}

static bool is_socket(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int start(int argc, char **argv)
{
	const uint64_t kept = UINT64_C(1) << CAP_SETUID | UINT64_C(1) << CAP_SETGID |
			      UINT64_C(1) << CAP_KILL;
	char err[400];
	uid_t root_uid = 0;

	if (parse_args(argc, argv, &root_uid) < 0) {
		log_err("usage: kotoba-monitor --service-uid N --service-gid N "
			"--root-uid N --worker PATH [--linger-ms N], with fds 3-5 open "
			"(it is started by kotoba-brokerd)");
		return -1;
	}
	if (!is_socket(MON_FD_LISTEN) || !is_socket(MON_FD_REQUESTS) || !is_socket(MON_FD_ATTACH)) {
		log_err("fds 3, 4 and 5 must be the broker's socket and its two links");
		return -1;
	}
	if (privsep_become(svc_uid, svc_gid, kept, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	/* Dies with the broker (set after the change of uid, which clears
	 * it); a broker already gone has left another parent. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != broker_pid) {
		log_err("the broker that started the monitor is gone");
		return -1;
	}
	privsep_monitor_ids(svc_uid, root_uid);
	if (privsep_identity(0, &start_id, err, sizeof(err)) < 0) {
		log_err("root_user (uid %u): %s", (unsigned)root_uid, err);
		return -1;
	}
	/* Its memory and /proc entries are root's: the broker, the same
	 * uid, cannot read or trace them. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		log_err("prctl: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < CONNS_MAX; i++)
		conns[i].fd = -1;
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, MON_FD_LISTEN,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = NULL }) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, MON_FD_REQUESTS,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &epfd }) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, MON_FD_ATTACH,
		      &(struct epoll_event){ .events = 0, .data.ptr = &reserve_fd }) < 0) {
		log_err("epoll: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Requests first: a request the broker sent before a connection's hang-up
 * is answered as things stood when it was sent. */
static bool serve_batch(struct epoll_event *ev, int n)
{
	for (int i = 0; i < n; i++)
		if (ev[i].data.ptr == &epfd && !on_request())
			return false;
	for (int i = 0; i < n; i++) {
		if (ev[i].data.ptr == &reserve_fd && (ev[i].events & (EPOLLHUP | EPOLLERR)))
			return false; /* the broker closed its end */
		if (ev[i].data.ptr == &reserve_fd)
			on_attach_writable();
		else if (ev[i].data.ptr == NULL)
			on_listen();
		else if (ev[i].data.ptr != &epfd)
			conn_gone(ev[i].data.ptr);
	}
	return true;
}

int main(int argc, char **argv)
{
	struct epoll_event ev[64];

	broker_pid = getppid();
	signal(SIGPIPE, SIG_IGN);
	if (start(argc, argv) < 0)
		return 1;
	log_info("serving, pid %d", (int)getpid());
	for (;;) {
		int n = epoll_wait(epfd, ev, 64, -1);

		if (n < 0 && errno != EINTR)
			return 1;
		if (getppid() != broker_pid || (n > 0 && !serve_batch(ev, n)))
			break;
	}
	/* The socket first: a broker started anew may be waiting for it. */
	close(MON_FD_LISTEN);
	log_info("the broker is gone; stopping");
	return 0;
}
