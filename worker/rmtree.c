/* SPDX-License-Identifier: MIT
 * Removing the run's scratch directory, whatever the snippet left in it.
 *
 * The snippet owns the tree and may have made it hostile: nested deeper
 * than PATH_MAX (mkdir + chdir, one level at a time), directories whose
 * modes refuse their owner (mkdir with mode 0), symlinks pointing out of
 * it.  So the walk never builds a path: it holds the directory it is
 * emptying by descriptor, descends by name with O_NOFOLLOW, and climbs
 * back through "..", checking that ".." is the directory it came from.
 * Four descriptors at most, at any depth, no recursion; the only memory
 * that grows with depth is one inode number per level.
 *
 * It runs when no process of the snippet is left (supervise() kills and
 * reaps every one first), so nothing changes the tree under it; the
 * checks are there so that, if something did, the walk stops instead of
 * deleting anywhere else.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/rmtree.h"

struct walk {
	const char *top;
	dev_t dev;   /* the tree's file system, never left */
	ino_t *inos; /* the directory held at each depth */
	size_t depth, cap;
	char *err;
	size_t errlen;
};

static int fail(struct walk *w, int rc, const char *what, const char *name)
{
	snprintf(w->err, w->errlen, "could not remove scratch directory %s: %s %s at depth %zu: %s",
		 w->top, what, name, w->depth, strerror(-rc));
	return rc;
}

/* Gives the owner rwx on a directory held by an O_PATH descriptor (chmod
 * through /proc follows the descriptor, never a name). */
static int unlock(int pfd, const struct stat *st)
{
	char proc[64];

	if ((st->st_mode & 0700) == 0700)
		return 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	return chmod(proc, (st->st_mode & 07777) | 0700) < 0 ? -errno : 0;
}

/* Opens the directory `name` in `dfd` for reading, never through a
 * symlink nor onto another file system, unlocking it first. */
static int open_dir(struct walk *w, int dfd, const char *name, struct stat *st)
{
	int pfd, fd, rc;

	pfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	rc = fstat(pfd, st) < 0 ? -errno : 0;
	if (rc == 0 && w->inos && st->st_dev != w->dev)
		rc = -EXDEV;
	if (rc == 0)
		rc = unlock(pfd, st);
	fd = rc == 0 ? openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (rc == 0 && fd < 0)
		rc = -errno;
	close(pfd);
	return rc < 0 ? rc : fd;
}

/* Removes one entry; 1 when it is a directory with something in it. */
static int remove_entry(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	return errno == ENOTEMPTY || errno == EEXIST ? 1 : -errno;
}

/* One pass over the directory held by `dfd`: removes what it can and
 * stops at the first directory that is not empty, which it opens into
 * `*child` (returns 1).  Returns 0 when the pass saw nothing at all (the
 * directory is empty), 2 when it removed everything it saw. */
static int pass(struct walk *w, int dfd, int *child, struct stat *st)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *d;
	int rc = 0;
	DIR *dir;

	if (fd < 0)
		return fail(w, -errno, "cannot read", ".");
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return fail(w, -errno, "cannot read", ".");
	}
	while (rc == 0 || rc == 2) {
		errno = 0;
		d = readdir(dir);
		if (!d) {
			if (errno)
				rc = fail(w, -errno, "cannot read", ".");
			break;
		}
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		rc = remove_entry(dfd, d->d_name);
		if (rc < 0) {
			rc = fail(w, rc, "cannot remove", d->d_name);
		} else if (rc == 1) {
			*child = open_dir(w, dfd, d->d_name, st);
			if (*child < 0)
				rc = fail(w, *child, "cannot enter", d->d_name);
		} else {
			rc = 2;
		}
	}
	closedir(dir);
	return rc;
}

static int push(struct walk *w, ino_t ino)
{
	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		ino_t *n = realloc(w->inos, cap * sizeof(*n));

		if (!n)
			return fail(w, -ENOMEM, "no memory for the walk at", "");
		w->inos = n;
		w->cap = cap;
	}
	w->inos[w->depth++] = ino;
	return 0;
}

/* Leaves the emptied directory `fd` for its parent, which must be the
 * directory the walk came down from. */
static int climb(struct walk *w, int fd)
{
	int parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	close(fd);
	w->depth--;
	if (parent < 0)
		return fail(w, -errno, "cannot go back up to", "..");
	if (fstat(parent, &st) < 0 || st.st_dev != w->dev || st.st_ino != w->inos[w->depth - 1]) {
		close(parent);
		return fail(w, -ESTALE, "the tree moved while being removed, at", "..");
	}
	return parent;
}

/* Empties the tree below `fd` (depth 1); consumes fd. */
static int empty_tree(struct walk *w, int fd)
{
	struct stat st;
	int child = -1, rc;

	for (;;) {
		rc = pass(w, fd, &child, &st);
		if (rc == 2)
			continue; /* everything seen went: look again */
		if (rc == 1) {
			rc = push(w, st.st_ino);
			close(rc == 0 ? fd : child);
			if (rc == 0) {
				fd = child;
				continue;
			}
			break;
		}
		if (rc < 0 || w->depth == 1)
			break;
		fd = climb(w, fd);
		if (fd < 0)
			return fd;
	}
	close(fd);
	return rc;
}

int remove_tree(const char *path, char *err, size_t errlen)
{
	struct walk w = { .top = path, .err = err, .errlen = errlen };
	struct stat st;
	int fd, rc;

	fd = open_dir(&w, AT_FDCWD, path, &st);
	if (fd < 0)
		return fail(&w, fd, "cannot open", path);
	w.dev = st.st_dev;
	rc = push(&w, st.st_ino);
	if (rc == 0)
		rc = empty_tree(&w, fd);
	else
		close(fd);
	free(w.inos);
	if (rc == 0 && rmdir(path) < 0)
		rc = fail(&w, -errno, "cannot remove", path);
	return rc;
}
