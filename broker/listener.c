/* SPDX-License-Identifier: MIT
 * The listening socket: taken from systemd when socket-activated, else
 * created here.  A stale socket file is replaced only when nothing answers
 * on it, so a second broker cannot steal a running one's address.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "broker/listener.h"
#include "broker/log.h"

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* The parent directory is created 0700 for a per-user broker (only the
 * user reaches the socket) and 0755 for a system one (the socket's own
 * mode and group decide). */
static int make_parent(const char *path, char *err, size_t errlen)
{
	char dir[108];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	dirname(dir);
	if (mkdir(dir, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the socket directory %s: %s", dir,
			 strerror(errno));
		return -1;
	}
	/* Someone else's directory, or one others may write to, could let
	 * them swap the socket for their own. */
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen, "the socket directory %s must be a directory owned by uid %u "
			 "and writable by it alone", dir, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

/* How long the monitor of a broker that died may take to let its socket
 * go: it is killed with its broker, but runs to its end first. */
#define ORPHAN_WAIT_MS 5000

/* 0: nobody listens at sa (errno ECONNREFUSED or ENOENT); 1: someone
 * does, and *owner_gone says whether the process that made the listening
 * socket (a broker, whose monitor holds it) no longer exists. */
static int probe(const struct sockaddr_un *sa, bool *owner_gone)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int rc;

	if (fd < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	if (rc < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return 0;
	}
	*owner_gone = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0 &&
		      kill(cr.pid, 0) < 0 && errno == ESRCH;
	close(fd);
	return 1;
}

static int remove_stale(const struct sockaddr_un *sa, char *err, size_t errlen)
{
	bool owner_gone;
	int live = probe(sa, &owner_gone);

	/* A broker that was just killed: its monitor is on its way out. */
	for (int waited = 0; live == 1 && owner_gone && waited < ORPHAN_WAIT_MS; waited += 10) {
		usleep(10000);
		live = probe(sa, &owner_gone);
	}
	if (live == 1) {
		snprintf(err, errlen, "another broker is already listening on %s", sa->sun_path);
		return -1;
	}
	if (errno == ECONNREFUSED)
		unlink(sa->sun_path);
	return 0;
}

static int systemd_socket(char *err, size_t errlen)
{
	int n = sd_listen_fds(1);

	if (n <= 0)
		return n;
	if (n > 1 || sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		snprintf(err, errlen, "systemd passed %d sockets; expected one listening Unix "
			 "stream socket", n);
		return -1;
	}
	fcntl(SD_LISTEN_FDS_START, F_SETFL, O_NONBLOCK);
	return SD_LISTEN_FDS_START;
}

int listener_open(const char *path, unsigned mode, bool *activated, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	int fd = systemd_socket(err, errlen);

	*activated = fd > 0;
	if (fd != 0)
		return fd;
	if (fill_addr(&sa, path) < 0) {
		snprintf(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	if (make_parent(path, err, errlen) < 0 || remove_stale(&sa, err, errlen) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, mode) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}
