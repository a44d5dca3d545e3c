/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "broker/log.h"
#include "broker/monlink.h"

/* A request the monitor has not answered in this long is given up on. */
#define REQUEST_TIMEOUT_S 10

static int req_fd = -1, attach_fd = -1;
static pid_t mon_pid;

bool monlink_active(void)
{
	return mon_pid > 0;
}

pid_t monlink_pid(void)
{
	return mon_pid;
}

int monlink_attach_fd(void)
{
	return attach_fd;
}

/* In the child: fds 3-5 as kotoba-monitor expects them, then the exec. */
static __attribute__((noreturn)) void exec_monitor(const char *path, char *const *argv,
						   int listen_fd, int req, int att)
{
	int fd[3] = { fcntl(listen_fd, F_DUPFD, 16), fcntl(req, F_DUPFD, 16),
		      fcntl(att, F_DUPFD, 16) };
	sigset_t none;

	for (int i = 0; i < 3; i++)
		if (fd[i] < 0 || dup2(fd[i], MON_FD_LISTEN + i) < 0)
			_exit(127);
	close_range(MON_FD_ATTACH + 1, ~0U, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execv(path, argv);
	_exit(127);
}

int monlink_start(const char *path, const char *worker_path, int listen_fd, uid_t service_uid,
		  gid_t service_gid, uid_t root_peer_uid, unsigned long linger_ms, char *err,
		  size_t errlen)
{
	char a_uid[24], a_gid[24], a_root[24], a_linger[24], a_worker[4096];
	char *argv[] = { (char *)"kotoba-monitor", (char *)"--service-uid", a_uid,
			 (char *)"--service-gid", a_gid, (char *)"--root-uid", a_root,
			 (char *)"--worker", a_worker, (char *)"--linger-ms", a_linger,
			 NULL };
	struct timeval tv = { REQUEST_TIMEOUT_S, 0 };
	int rq[2], at[2];
	pid_t pid;

	if (access(path, X_OK) < 0) {
		snprintf(err, errlen, "the monitor %s is not executable: %s", path,
			 strerror(errno));
		return -1;
	}
	snprintf(a_worker, sizeof(a_worker), "%s", worker_path);
	snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)service_uid);
	snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)service_gid);
	snprintf(a_root, sizeof(a_root), "%u", (unsigned)root_peer_uid);
	snprintf(a_linger, sizeof(a_linger), "%lu", linger_ms);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rq) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, at) < 0) {
		snprintf(err, errlen, "cannot make the monitor's links: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot start the monitor: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		exec_monitor(path, argv, listen_fd, rq[1], at[1]);
	close(rq[1]);
	close(at[1]);
	req_fd = rq[0];
	attach_fd = at[0];
	mon_pid = pid;
	if (setsockopt(req_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    fcntl(attach_fd, F_SETFL, O_NONBLOCK) < 0) {
		snprintf(err, errlen, "cannot set up the monitor's links: %s", strerror(errno));
		return -1;
	}
	log_info("started the monitor %s, pid %d", path, (int)pid);
	return 0;
}

int monlink_take_attach(struct mon_attach *a, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { a, sizeof(*a) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	*fd = -1;
	n = recvmsg(attach_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	if (n == 0)
		return -EPIPE;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(*a)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EBADMSG;
	}
	a->why[sizeof(a->why) - 1] = '\0';
	return 0;
}

/* One request, one reply. */
static int ask(struct mon_request *rq, const int *fd, size_t n_fds, struct mon_reply *rp)
{
	char cbuf[CMSG_SPACE(sizeof(int) * MON_FDS_MAX)] = { 0 };
	struct iovec iov = { rq, sizeof(*rq) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (req_fd < 0)
		return -ENOTCONN;
	if (n_fds) {
		struct cmsghdr *cm;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fd, sizeof(int) * n_fds);
	}
	if (sendmsg(req_fd, &mh, MSG_NOSIGNAL) < 0)
		return -errno;
	do
		n = recv(req_fd, rp, sizeof(*rp), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	if (n != (ssize_t)sizeof(*rp))
		return -EPROTO;
	rp->what[sizeof(rp->what) - 1] = '\0';
	return 0;
}

int monlink_spawn(uid_t uid, const int *fd, size_t n_fds, pid_t *pid, char *what,
		  size_t whatlen)
{
	struct mon_request rq = { .op = MON_SPAWN, .uid = (uint32_t)uid, .n_fds = (uint32_t)n_fds };
	struct mon_reply rp;
	int rc = n_fds <= MON_FDS_MAX ? ask(&rq, fd, n_fds, &rp) : -E2BIG;

	*pid = 0;
	if (rc < 0) {
		snprintf(what, whatlen, "the monitor did not answer: %s", strerror(-rc));
		return rc;
	}
	snprintf(what, whatlen, "%s", rp.what);
	if (rp.pid <= 0)
		return -(rp.err ? rp.err : EPROTO);
	*pid = rp.pid;
	return 0;
}

/* The child writes its report before it exits, and its exit closes the
 * worker link: once the link has ended, a report it wrote is here. */
bool monlink_start_failed(int report_fd, unsigned *step, int *err_no, char *what,
			  size_t whatlen)
{
	struct mon_start_fail f;
	ssize_t n;

	if (report_fd < 0)
		return false;
	do
		n = read(report_fd, &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(f))
		return false;
	f.what[sizeof(f.what) - 1] = '\0';
	*step = f.step;
	*err_no = f.err;
	snprintf(what, whatlen, "%s", f.what);
	return true;
}

int monlink_kill(pid_t pid)
{
	struct mon_request rq = { .op = MON_KILL, .pid = pid };
	struct mon_reply rp = { 0 };
	int rc;

	if (pid <= 0)
		return -EINVAL;
	if (!monlink_active())
		return kill(pid, SIGKILL) < 0 ? -errno : 0;
	rc = ask(&rq, NULL, 0, &rp);
	if (rc == 0 && rp.err)
		rc = -rp.err;
	if (rc < 0 && rc != -ESRCH)
		log_warn("the monitor did not kill pid %d: %s", (int)pid,
			 rp.what[0] ? rp.what : strerror(-rc));
	return rc;
}

int monlink_started(void)
{
	struct mon_request rq = { .op = MON_STARTED };
	struct mon_reply rp = { 0 };
	int rc = ask(&rq, NULL, 0, &rp);

	return rc < 0 ? rc : -rp.err;
}
