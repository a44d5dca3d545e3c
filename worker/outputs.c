/* SPDX-License-Identifier: MIT
 * The files a snippet leaves in $KOTOBA_OUTPUT_DIR, for its client.  S
 * chooses and opens them once every process of the snippet has ended (so
 * nothing renames or swaps them any more), as the snippet's user, before
 * scratch goes; the broker gets each as a descriptor (`output_file`) and
 * reads it itself.  Only regular files directly in the directory, opened
 * without following a symlink, within the caps of proto.h; everything
 * else is counted as left out (PROTOCOL.md, "file").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/worker.h"

/* Names read before sorting: the rest are left out unread. */
#define NAMES_READ_MAX 1024

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's entries but . and .., sorted; beyond NAMES_READ_MAX
 * only counted.  n_names 0 when it cannot be read. */
static char **read_names(int dirfd, size_t *n_names, uint64_t *left_out)
{
	char **names = calloc(NAMES_READ_MAX, sizeof(*names));
	DIR *d = names ? fdopendir(dirfd) : NULL;
	struct dirent *e;

	*n_names = 0;
	if (!d) {
		close(dirfd);
		return names;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (*n_names == NAMES_READ_MAX || !(names[*n_names] = strdup(e->d_name)))
			(*left_out)++;
		else
			(*n_names)++;
	}
	closedir(d);
	qsort(names, *n_names, sizeof(*names), by_name);
	return names;
}

/* One entry: kept (its descriptor in o) or counted as left out. */
static void take_one(struct output_files *o, int dirfd, const char *name)
{
	struct stat st;
	int fd;

	if (!proto_file_name_ok(name, strlen(name)) || o->n == PROTO_FILES_MAX) {
		o->left_out++;
		return;
	}
	/* O_NONBLOCK: a FIFO opens at once, and is then refused by fstat. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > PROTO_FILE_MAX ||
	    (uint64_t)st.st_size > PROTO_FILES_TOTAL - o->total) {
		if (fd >= 0)
			close(fd);
		o->left_out++;
		return;
	}
	o->fd[o->n] = fd;
	o->size[o->n] = (uint64_t)st.st_size;
	snprintf(o->name[o->n], sizeof(o->name[o->n]), "%s", name);
	o->total += (uint64_t)st.st_size;
	o->n++;
}

void outputs_collect(const struct plan *p, struct output_files *o)
{
	char path[PATH_MAX];
	char **names;
	size_t n = 0;
	int dirfd, keep;

	memset(o, 0, sizeof(*o));
	if (!p->scratch[0] ||
	    snprintf(path, sizeof(path), "%s/" OUTPUT_LEAF, p->scratch) >= (int)sizeof(path))
		return;
	/* The snippet may have replaced the directory itself by a symlink. */
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return;
	keep = dup(dirfd); /* fdopendir takes one; openat needs another */

	names = read_names(dirfd, &n, &o->left_out);
	for (size_t i = 0; i < n; i++) {
		if (keep >= 0)
			take_one(o, keep, names[i]);
		else
			o->left_out++;
		free(names[i]);
	}
	free(names);
	if (keep >= 0)
		close(keep);
}

/* After `finished`: each kept file, its descriptor with the frame. */
void outputs_send(struct output_files *o)
{
	for (size_t i = 0; i < o->n; i++) {
		struct msg_output_file m = { .name = pstr_c(o->name[i]), .size = o->size[i] };
		struct frame f = { 0 };

		if (enc_output_file(&f, &m) == 0)
			frame_send_fd(FD_BROKER, &f, o->fd[i]);
		frame_free(&f);
		close(o->fd[i]);
	}
	o->n = 0;
}
