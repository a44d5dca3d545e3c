/* SPDX-License-Identifier: MIT
 * Finding every process a snippet started.  S is their child subreaper, so
 * every descendant stays below S in the process tree whatever it does
 * (double fork, setsid): walking /proc/<pid>/task/<tid>/children from S
 * reaches them all.  A process group alone would miss a setsid'd one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/worker.h"

/* Bounded by RLIMIT_NPROC in practice; this only stops a runaway walk. */
#define TREE_MAX 65536

struct pids {
	pid_t *v;
	size_t n, cap;
};

static void pids_push(struct pids *s, pid_t pid)
{
	pid_t *nv;

	if (s->n == s->cap) {
		if (s->cap >= TREE_MAX)
			return;
		nv = realloc(s->v, (s->cap ? s->cap * 2 : 64) * sizeof(*nv));
		if (!nv)
			return;
		s->v = nv;
		s->cap = s->cap ? s->cap * 2 : 64;
	}
	s->v[s->n++] = pid;
}

/* Parses one children file ("12 34 56 ") streaming, so a long list
 * needs no big buffer; a number split across reads is carried over. */
static void read_children(const char *path, struct pids *out)
{
	char buf[4096];
	long cur = -1;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				cur = (cur < 0 ? 0 : cur * 10) + (buf[i] - '0');
				if (cur > 0x7fffffff)
					cur = -1;
			} else if (cur > 0) {
				pids_push(out, (pid_t)cur);
				cur = -1;
			}
		}
	}
	if (cur > 0)
		pids_push(out, (pid_t)cur);
	close(fd);
}

/* A child may be created by any thread of its parent, so every task's
 * list is read. */
static void children_of(pid_t pid, struct pids *out)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/children", (int)pid, d->d_name);
		read_children(path, out);
	}
	closedir(dir);
}

/* Signals each descendant as it is found, parents before children, so a
 * stopped parent cannot keep producing children we have not seen.  One
 * pass; the SIGKILL path in supervise.c repeats it until nothing is left. */
void signal_descendants(int sig)
{
	struct pids s = { 0 };

	children_of(getpid(), &s);
	for (size_t i = 0; i < s.n; i++) {
		kill(s.v[i], sig);
		children_of(s.v[i], &s);
	}
	free(s.v);
}
