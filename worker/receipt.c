/* SPDX-License-Identifier: MIT
 * The run's receipt: what the sandbox refused (PROTOCOL.md, "exit",
 * `blocked`).  Two witnesses feed it.
 *
 * The exec gate (execgate.c) is S's own: every exec it answers EPERM is a
 * fact, recorded with the program's path as the caller passed it.  Its
 * listener also carries every open for writing, which the write witness
 * (fileattr.c) records when it judges that the sandbox refuses it; a
 * report of the interpreter's about the same file is then left out.
 *
 * The snippet's interpreter is the other: the main program
 * (PYTHON_SNIPPET_MAIN) wraps the few Python calls that open, create,
 * remove, rename, signal and make sockets, and reports each that failed
 * with PermissionError as one line "kind<TAB>target" on a pipe whose read
 * end S holds.  That is the snippet's word, which it can forge or
 * suppress, so S believes no line as it stands: it keeps only what this
 * run's profile refuses and the user's own permissions allow (S runs as
 * the user, unconfined, so access() and kill(pid, 0) say what the kernel
 * would have done without the sandbox), names the layer that holds the
 * rule, and marks the entry inferred.  The pipe is bounded (bytes, line
 * length, distinct lines), and its write end is non-blocking: a snippet
 * that floods it loses its own reports, never its progress or S's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/worker.h"

/* ---- the interpreter's reports ------------------------------------------ */

/* PYTHON_RECEIPT_FILE in the worker's own directory, where the build and
 * the installation put it, readable by the snippet's user (S is that
 * user).  Without it the run has no interpreter witness. */
bool receipt_find_program(char *path, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", path, len - 1);
	char *slash;

	if (n <= 0)
		return false;
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash - path) + 1 + sizeof(PYTHON_RECEIPT_FILE) > len)
		return false;
	memcpy(slash + 1, PYTHON_RECEIPT_FILE, sizeof(PYTHON_RECEIPT_FILE));
	return access(path, R_OK) == 0;
}

/* The pipe: the read end stays S's, the write end goes to C (at
 * PYTHON_RECEIPT_FD) and above the low fds, so that moving it there
 * clobbers nothing C still needs.  Both non-blocking. */
int receipt_open_pipe(struct receipt_log *l, int *write_end)
{
	int fds[2];

	l->fd = -1;
	*write_end = -1;
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	l->fd = fds[0];
	*write_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 16);
	close(fds[1]);
	return *write_end < 0 ? -errno : 0;
}

static void note_report(struct receipt_log *l, const char *kind, const char *target)
{
	size_t len = strlen(kind);
	struct receipt_report *r;

	for (size_t i = 0; i < l->n_reports; i++) {
		r = &l->reports[i];
		if (!strcmp(r->kind, kind) && !strcmp(r->target, target)) {
			r->count++;
			return;
		}
	}
	if (l->n_reports == RECEIPT_REPORTS_MAX || len >= sizeof(r->kind))
		return;
	r = &l->reports[l->n_reports++];
	memcpy(r->kind, kind, len + 1);
	receipt_copy_target(r->target, target, strlen(target));
	r->count = 1;
}

static void take_line(struct receipt_log *l)
{
	char *tab;

	l->line[l->line_len] = '\0';
	tab = strchr(l->line, '\t');
	if (tab && !l->line_too_long) {
		*tab = '\0';
		note_report(l, l->line, tab + 1);
	}
	l->line_len = 0;
	l->line_too_long = false;
}

static void take_bytes(struct receipt_log *l, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			take_line(l);
		} else if (l->line_len + 1 < sizeof(l->line)) {
			l->line[l->line_len++] = buf[i];
		} else {
			l->line_too_long = true;
		}
	}
}

/* Reads what is there, at most RECEIPT_READ_ROUND bytes a call, so that a
 * snippet that keeps the pipe full cannot hold S here (the clock, the
 * gate and the broker wait on the same loop).  Past RECEIPT_BYTES_MAX S
 * reads no more and the pipe fills: the snippet's writes then fail
 * (EAGAIN) and its reports are lost, nothing else.  The pipe stays open,
 * so no write of the snippet's ever meets a closed pipe (SIGPIPE). */
void receipt_read(struct receipt_log *l)
{
	char buf[4096];
	size_t round = 0;
	ssize_t n;

	while (receipt_wants_bytes(l) && round < RECEIPT_READ_ROUND) {
		n = read(l->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(l->fd);
			l->fd = -1;
			return;
		}
		take_bytes(l, buf, (size_t)n);
		l->bytes += (size_t)n;
		round += (size_t)n;
	}
}

bool receipt_wants_bytes(const struct receipt_log *l)
{
	return l->fd >= 0 && l->bytes < RECEIPT_BYTES_MAX;
}

/* A warm job at `go`: what its interpreter reported before the code came
 * (the preload's imports run under the wrappers) is not the snippet's. */
void receipt_forget(struct receipt_log *l)
{
	char buf[4096];
	int fd = l->fd;
	ssize_t n;

	do
		n = fd >= 0 ? read(fd, buf, sizeof(buf)) : 0;
	while (n > 0 || (n < 0 && errno == EINTR));
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	if (n == 0 && fd >= 0) {
		close(fd); /* the interpreter is gone: nothing more comes */
		l->fd = -1;
	}
}

/* ---- what S believes of them --------------------------------------------- */

static bool under(const char *path, const struct secret_mask *m)
{
	size_t n = strlen(m->path);

	return !strncmp(path, m->path, n) && (path[n] == '\0' || (m->dir && path[n] == '/'));
}

/* Whether path is, or is below, a masked place: as given, or as it
 * resolves in S's view (which has no masks). */
static bool masked(const struct plan *p, const char *path)
{
	char real[PATH_MAX];

	for (size_t i = 0; i < p->n_masks; i++)
		if (under(path, &p->masks[i]))
			return true;
	if (!realpath(path, real))
		return false;
	for (size_t i = 0; i < p->n_masks; i++)
		if (under(real, &p->masks[i]))
			return true;
	return false;
}

static bool parent_writable(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return false;
	slash = strrchr(dir, '/');
	if (!slash)
		return false;
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	return access(dir, W_OK | X_OK) == 0;
}

/* The user's own permissions allow a write of path (a create when it
 * does not exist). */
static bool user_may_write(const char *path, enum proto_block_kind *kind)
{
	if (access(path, W_OK) == 0)
		return true;
	if (errno != ENOENT)
		return false;
	*kind = BLOCK_CREATE;
	return parent_writable(path);
}

static bool signal_allowed_to_user(const char *target)
{
	char *end;
	long pid;

	errno = 0;
	pid = strtol(target, &end, 10);
	if (errno || *end || end == target || pid <= 1 || pid > INT_MAX)
		return false;
	return kill((pid_t)pid, 0) == 0;
}

static bool kind_named(const char *s, enum proto_block_kind *kind)
{
	int k = names_find(&proto_block_kinds, s, strlen(s));

	if (k < 0)
		return false;
	*kind = (enum proto_block_kind)k;
	return true;
}

/* The layer that refuses a file-system change in this run. */
static enum proto_blocker fs_blocker(const struct plan *p)
{
	return p->landlock_abi ? BY_LANDLOCK : BY_SECCOMP;
}

/* One distinct report: which kind, and refused by what, if the profile
 * refuses it and the user's own permissions do not.  False: drop it. */
static bool judge(const struct plan *p, const struct receipt_report *r,
		  enum proto_block_kind *kind, enum proto_blocker *by)
{
	bool fs_path = r->target[0] == '/';

	if (p->profile != PROFILE_UNATTENDED)
		return false; /* approved: nothing of these is the sandbox's */
	if (!strcmp(r->kind, "read")) {
		*kind = BLOCK_SECRET_READ;
		*by = BY_MOUNT_MASK;
		return fs_path && masked(p, r->target);
	}
	if (!kind_named(r->kind, kind))
		return false;
	switch (*kind) {
	case BLOCK_WRITE:
	case BLOCK_CREATE:
	case BLOCK_DELETE:
	case BLOCK_RENAME:
		if (!fs_path)
			return false;
		if (masked(p, r->target)) {
			*by = BY_MOUNT_MASK;
			return true;
		}
		*by = fs_blocker(p);
		return *kind == BLOCK_WRITE ? user_may_write(r->target, kind)
					    : parent_writable(r->target);
	case BLOCK_SIGNAL:
		/* ABI 6 scopes signals; below, seccomp lets none out. */
		*by = p->landlock_abi >= 6 ? BY_LANDLOCK : BY_SECCOMP;
		return signal_allowed_to_user(r->target);
	case BLOCK_CONNECT_UNIX:
	case BLOCK_BIND:
	case BLOCK_LISTEN:
	case BLOCK_SYSCALL:
		*by = BY_SECCOMP;
		return true;
	case BLOCK_EXEC:        /* the gate's own entries say that */
	case BLOCK_SECRET_READ: /* reported as "read" */
	case BLOCK_REQUEST:     /* the egress proxy's word only */
	case BLOCK_KIND_COUNT:
	default:
		return false;
	}
}

/* Whether the write witness (fileattr.c) saw the refusal the snippet
 * reports: the same file, written or created.  The witness's entry then
 * stands for both, and the report adds nothing, not even to the total. */
static bool witness_saw(const struct receipt *b, const struct blocked_op *o)
{
	if (o->kind != BLOCK_WRITE && o->kind != BLOCK_CREATE)
		return false;
	for (size_t i = 0; i < b->n; i++)
		if (b->op[i].seen_by == SEEN_BY_WORKER &&
		    (b->op[i].kind == BLOCK_WRITE || b->op[i].kind == BLOCK_CREATE) &&
		    !strcmp(b->op[i].target, o->target))
			return true;
	return false;
}

/* After the snippet's last process: the rest of the pipe, then each
 * distinct report judged once. */
void receipt_conclude(struct receipt_log *l, const struct plan *p)
{
	/* Every writer is gone: what is left is at most a pipe's worth. */
	while (receipt_wants_bytes(l)) {
		size_t before = l->bytes;

		receipt_read(l);
		if (l->bytes == before)
			break;
	}
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	for (size_t i = 0; i < l->n_reports; i++) {
		const struct receipt_report *r = &l->reports[i];
		struct blocked_op o = { .seen_by = SEEN_BY_PYTHON, .inferred = true };

		if (!judge(p, r, &o.kind, &o.by))
			continue;
		memcpy(o.target, r->target, sizeof(o.target));
		if (!witness_saw(&l->blocked, &o))
			receipt_add_n(&l->blocked, &o, r->count);
	}
}
