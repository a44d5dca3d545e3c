/* SPDX-License-Identifier: MIT
 * A connection made from inside one of this broker's own runs is refused
 * before anything is served: a snippet runs as its person's uid, so the
 * socket's permissions would let an approved one say hello, declare a
 * channel and answer its own next card `always`.
 *
 * How a run is recognised: every process of a snippet descends from this
 * broker.  The broker starts each worker; the worker is the child
 * subreaper of the snippet, so a double fork or setsid leaves the orphan
 * below the worker; and the broker is the subreaper of a worker that died
 * first.  So the peer's pid (SO_PEERCRED) is walked up through
 * /proc/<pid>/stat: reaching the broker's own pid means "from a run", and
 * so does passing a process named kotoba-worker (another broker's run:
 * a snippet may not approve itself there either).
 *
 * What the walk cannot be fooled by:
 *  - the connecting process exiting and its pid being taken by another:
 *    SO_PEERPIDFD (Linux 6.5) pins the process that called connect(); once
 *    the walk is done, the pidfd must still name a running process, so the
 *    pid read was its own.  A peer that has exited is refused.
 *  - an ancestor's pid being reused mid-walk: a parent never started after
 *    its child (a reparented orphan's new parent is an older ancestor), so
 *    an ancestor younger than the process below it is a reused pid, and
 *    the connection is refused.
 *  - a peer whose /proc entry cannot be read (gone, another pid namespace,
 *    /proc mounted hidepid): refused, fail closed, saying why.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/gate.h"
#include "broker/log.h"
#include "broker/peer.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5; the headers here may predate it */
#endif

/* Deeper than any real process tree; stops a walk that loops. */
#define WALK_MAX 4096

enum origin { OUTSIDE, FROM_A_RUN, UNSEEN };

/* A worker's command name: how a run of another broker on this host is
 * recognised (its pids are not ours to know).  A process may name itself
 * so, but only to be refused. */
#define WORKER_COMM "kotoba-worker"

struct proc_stat {
	pid_t ppid;
	unsigned long long start; /* clock ticks after boot */
	bool worker;		  /* its command name is WORKER_COMM */
};

/* ppid (field 4) and starttime (field 22) of /proc/<pid>/stat.  The
 * command name (field 2) may hold spaces and ')': fields are counted from
 * the last ')'. */
static int read_stat(pid_t pid, struct proc_stat *st)
{
	char path[40], buf[1024], *p, *end, *name;
	ssize_t n;
	int fd, ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ESRCH; /* an empty read: it is going away */
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -EPROTO;
	name = strchr(buf, '(');
	st->worker = name && !strncmp(name + 1, WORKER_COMM ")", sizeof(WORKER_COMM));
	/* the space before field 3 (state), then 19 more: before field 22 */
	for (int k = 0; k < 20 && p; k++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EPROTO;
	errno = 0;
	st->start = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1)
		return -EPROTO;
	st->ppid = ppid;
	return 0;
}

/* The broker's own start: no process that started before it can descend
 * from it.  Read once; 0 (every walk goes to the top) if it cannot be. */
static unsigned long long broker_start(void)
{
	static bool tried;
	static unsigned long long start;
	struct proc_stat st;

	if (!tried && read_stat(getpid(), &st) == 0)
		start = st.start;
	tried = true;
	return start;
}

/* Walks from pid up to pid 1 (or the edge of the broker's pid namespace),
 * or to the first ancestor older than the broker: a client's shell and
 * session usually are, so the walk is a few reads.  *run is the run whose
 * worker was passed, when one was. */
static enum origin walk(struct broker *b, pid_t pid, struct run **run, char *why,
			size_t whylen)
{
	const pid_t self = getpid();
	const unsigned long long self_start = broker_start();
	struct proc_stat st = { 0 }, below = { 0 };
	pid_t cur = pid, child = 0;
	int rc;

	/* The broker itself is no run: only its descendants are (an
	 * in-process test harness connects as the broker). */
	if (pid == self)
		return OUTSIDE;
	for (int depth = 0; depth < WALK_MAX; depth++) {
		if (cur == self) {
			*run = run_of_worker(b, child);
			return FROM_A_RUN;
		}
		rc = read_stat(cur, &st);
		if (rc < 0) {
			snprintf(why, whylen, "the broker cannot read /proc/%d/stat (%s)", (int)cur,
				 strerror(-rc));
			return UNSEEN;
		}
		if (st.worker) {
			*run = run_of_worker(b, cur);
			return FROM_A_RUN;
		}
		if (depth > 0 && st.start > below.start) {
			snprintf(why, whylen, "pid %d was reused while the broker read the "
				 "connecting process's ancestors", (int)cur);
			return UNSEEN;
		}
		if (st.ppid <= 0 || st.start < self_start)
			return OUTSIDE;
		below = st;
		child = cur;
		cur = st.ppid;
	}
	snprintf(why, whylen, "the connecting process's ancestry is deeper than %d", WALK_MAX);
	return UNSEEN;
}

/* The pidfd of the process that called connect(), or -1 on a kernel
 * without SO_PEERPIDFD (then the pid alone is used, as before 6.5). */
static int peer_pidfd(int fd, bool *gone)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	*gone = false;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0)
		return pidfd;
	*gone = errno == ESRCH || errno == EINVAL; /* the peer was already reaped */
	return -1;
}

/* A pidfd polls readable once its process has exited. */
static bool still_running(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

static enum origin origin_of(struct broker *b, int fd, pid_t pid, struct run **run,
			     char *why, size_t whylen)
{
	enum origin o;
	bool gone;
	int pidfd;

	*run = NULL;
	if (pid <= 0) {
		snprintf(why, whylen, "the connecting process is outside the broker's pid "
			 "namespace");
		return UNSEEN;
	}
	pidfd = peer_pidfd(fd, &gone);
	if (gone) {
		snprintf(why, whylen, "the connecting process %d has already exited", (int)pid);
		return UNSEEN;
	}
	o = walk(b, pid, run, why, whylen);
	if (pidfd >= 0) {
		if (o == OUTSIDE && !still_running(pidfd)) {
			snprintf(why, whylen, "the connecting process %d exited before the broker "
				 "could tell where it runs", (int)pid);
			o = UNSEEN;
		}
		close(pidfd);
	}
	return o;
}

/* One audit row per run (the first attempt), and at most one a second for
 * attempts no run can be named for: a snippet looping on connect() must
 * not turn each try into a synchronous write. */
static void record(const struct ucred *cr, struct run *r, const struct run_info *ri,
		   enum origin o)
{
	static time_t last_unnamed;
	time_t now = time(NULL);

	if (r) {
		if (run_note_refusal(r) > 0)
			return;
	} else {
		if (now == last_unnamed)
			return;
		last_unnamed = now;
	}
	gate_audit_refused_connection(r ? ri->uid : cr->uid, cr->pid, r ? ri : NULL,
				      o == FROM_A_RUN ? "from-a-run" : "unseen");
}

bool peer_from_a_run(struct broker *b, int fd, const struct ucred *cr, char *why,
		     size_t whylen)
{
	struct run *r;
	char detail[200] = "";
	enum origin o = origin_of(b, fd, cr->pid, &r, detail, sizeof(detail));
	struct run_info ri = { 0 };

	if (o == OUTSIDE)
		return false;
	if (r)
		run_describe(r, &ri);
	if (o == FROM_A_RUN) {
		snprintf(why, whylen, "a connection from inside a snippet's run is refused: a "
			 "snippet may not answer cards, change grants or read the audit trail");
		log_warn("uid=%u pid=%d refused: connection from inside run %" PRIu64,
			 (unsigned)cr->uid, (int)cr->pid, ri.run_id);
	} else {
		snprintf(why, whylen, "the broker could not tell whether this connection comes "
			 "from inside a snippet's run, so it is refused: %s", detail);
		log_warn("uid=%u pid=%d refused: %s", (unsigned)cr->uid, (int)cr->pid, detail);
	}
	record(cr, r, &ri, o);
	return true;
}
