/* SPDX-License-Identifier: MIT
 * Helpers shared by S's supervision of the snippet (supervise.c) and of
 * the engine's commands (engine.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "worker/util.h"
#include "worker/worker.h"

uint64_t monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t deadline_after_ms(uint64_t t, uint64_t ms)
{
	if (ms > (UINT64_MAX - t) / 1000u)
		return 0;
	return t + ms * 1000u;
}

/* SOCK_SEQPACKET rather than a pipe: a report arrives whole, and C can
 * pass the exec gate's listener along as SCM_RIGHTS. */
int open_report_pair(int *r, int *w)
{
	int fds[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
		return -errno;
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		int rc = -errno;

		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	*r = fds[0];
	*w = fds[1];
	return 0;
}

/* The broker has nothing to say to a worker after the job: EOF, an error
 * or any frame at all means "stop" (cancel, or the broker is gone). */
bool broker_says_stop(short revents)
{
	char b;
	ssize_t n;

	if (revents & (POLLHUP | POLLERR | POLLNVAL))
		return true;
	n = recv(FD_BROKER, &b, 1, MSG_DONTWAIT | MSG_TRUNC);
	return !(n < 0 && (errno == EAGAIN || errno == EINTR));
}
