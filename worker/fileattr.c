/* SPDX-License-Identifier: MIT
 * Modes and times inside the run's own places (unattended profile).
 *
 * Landlock has no right for a file's mode or times, and seccomp cannot
 * read the path a chmod or utime names, so the unattended filter sends
 * those calls (@file-mode-time) to S through the exec gate's listener
 * instead of refusing them all.  S does not let the snippet's call go on
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE would re-read a path that another
 * thread can change after S looked): it makes the change itself, on the
 * file it resolved, and answers with the result.
 *
 * Which files: those reached through the run's own mounts, its scratch
 * directory (bound onto itself, nosuid, in the run's mount namespace) and
 * its own /dev/shm tmpfs (secrets.c, private_shm), each known by the
 * mount id of a descriptor C handed over before its exec.  S resolves the
 * path as the snippet named it, in the snippet's view: from its root
 * (/proc/<pid>/root, absolute paths, RESOLVE_IN_ROOT), its working
 * directory or the directory descriptor it passed; magic links
 * (/proc/self/...) refused on the way.  The descriptor S gets names one
 * file and its mount; S changes that file through it, so nothing can be
 * swapped in between.  A file reached through another mount gets EPERM,
 * the answer the filter gave before, and so does a mode with the setuid
 * or setgid bit (scratch is nosuid as well, so such a bit would give
 * nothing).  Nothing outside can be reached through these mounts: the
 * snippet cannot mount, and Landlock refuses a link or rename across
 * scratch's edge (without Landlock the filter refuses them all).
 *
 * S acts with the snippet's own uid and groups, and no capability, so
 * the kernel's own checks (owner, write permission for "now") hold as
 * for the snippet.  Runs without the two mounts (no user namespace) get
 * EPERM everywhere, as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

#include "worker/worker.h"

/* What one call asks, in the terms of utimensat/fchmodat. */
struct attr_call {
	bool chmod;          /* else times */
	int dirfd;           /* AT_FDCWD or the snippet's descriptor */
	bool fd_form;        /* no path: dirfd itself (fchmod, futimens) */
	uint64_t path;       /* address in the snippet */
	bool follow;         /* the last component's symlink */
	bool empty_ok;       /* AT_EMPTY_PATH: "" names dirfd */
	mode_t mode;
	enum { T_NOW, T_TIMESPEC, T_TIMEVAL, T_UTIMBUF } times_kind;
	uint64_t times;      /* address in the snippet; 0: now */
};

/* Decodes req; false when it is not one of ours.  -errno in *err for
 * flags the kernel itself would refuse. */
static bool decode(const struct seccomp_notif *req, struct attr_call *c, int *err)
{
	const __u64 *a = req->data.args;

	memset(c, 0, sizeof(*c));
	*err = 0;
	c->dirfd = AT_FDCWD;
	c->follow = true;
	switch (req->data.nr) {
#ifdef __NR_chmod
	case __NR_chmod:
		c->chmod = true, c->path = a[0], c->mode = (mode_t)a[1];
		return true;
#endif
	case __NR_fchmod:
		c->chmod = true, c->dirfd = (int)a[0], c->mode = (mode_t)a[1], c->fd_form = true;
		return true;
	case __NR_fchmodat:
		c->chmod = true, c->dirfd = (int)a[0], c->path = a[1], c->mode = (mode_t)a[2];
		return true;
#ifdef __NR_utime
	case __NR_utime:
		c->path = a[0], c->times = a[1], c->times_kind = T_UTIMBUF;
		return true;
#endif
#ifdef __NR_utimes
	case __NR_utimes:
		c->path = a[0], c->times = a[1], c->times_kind = T_TIMEVAL;
		return true;
#endif
#ifdef __NR_futimesat
	case __NR_futimesat:
		c->dirfd = (int)a[0], c->path = a[1], c->times = a[2], c->times_kind = T_TIMEVAL;
		return true;
#endif
	case __NR_utimensat:
		c->dirfd = (int)a[0], c->path = a[1], c->times = a[2], c->times_kind = T_TIMESPEC;
		if (a[3] & ~(__u64)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) ||
		    (!c->path && c->dirfd != AT_FDCWD && a[3]))
			*err = -EINVAL;
		c->follow = !(a[3] & AT_SYMLINK_NOFOLLOW);
		c->empty_ok = a[3] & AT_EMPTY_PATH;
		/* futimens: no path and a real descriptor (with AT_FDCWD the
		 * kernel reads the NULL path, EFAULT). */
		c->fd_form = !c->path && c->dirfd != AT_FDCWD;
		return true;
	default:
		return false;
	}
}

/* The path at addr in the snippet's memory: 0, or -errno as the kernel
 * would have said it (EFAULT, ENAMETOOLONG). */
static int read_path(int mem, uint64_t addr, char *out, size_t len)
{
	ssize_t n = addr ? pread(mem, out, len - 1, (off_t)addr) : -1;

	if (n <= 0)
		return -EFAULT;
	out[n] = '\0';
	if (strlen(out) == (size_t)n)
		return n == (ssize_t)len - 1 ? -ENAMETOOLONG : -EFAULT;
	return 0;
}

static int read_times(int mem, const struct attr_call *c, struct timespec ts[2])
{
	union {
		struct timespec ts[2];
		struct timeval tv[2];
		struct utimbuf ub;
	} u;
	size_t len = c->times_kind == T_TIMESPEC  ? sizeof(u.ts)
		     : c->times_kind == T_TIMEVAL ? sizeof(u.tv)
						  : sizeof(u.ub);

	if (pread(mem, &u, len, (off_t)c->times) != (ssize_t)len)
		return -EFAULT;
	if (c->times_kind == T_TIMESPEC) {
		memcpy(ts, u.ts, sizeof(u.ts));
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		if (c->times_kind == T_TIMEVAL) {
			if (u.tv[i].tv_usec < 0 || u.tv[i].tv_usec >= 1000000)
				return -EINVAL;
			ts[i].tv_sec = u.tv[i].tv_sec;
			ts[i].tv_nsec = u.tv[i].tv_usec * 1000;
		} else {
			ts[i].tv_sec = i ? u.ub.modtime : u.ub.actime;
			ts[i].tv_nsec = 0;
		}
	}
	return 0;
}

/* glibc's fchmodat(AT_SYMLINK_NOFOLLOW) (os.chmod(follow_symlinks=False))
 * opens the file O_PATH and chmods /proc/self/fd/N: a magic link, which
 * S does not follow, but which names the caller's descriptor N.  Returns
 * N for exactly that spelling (and /dev/fd/N, /proc/thread-self/fd/N),
 * else -1. */
static int proc_self_fd(const char *path)
{
	static const char *const prefixes[] = { "/proc/self/fd/", "/proc/thread-self/fd/",
						"/dev/fd/" };
	long n = -1;

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t len = strlen(prefixes[i]);
		const char *d = path + len;

		if (strncmp(path, prefixes[i], len) || !*d || strlen(d) > 9)
			continue;
		n = 0;
		for (; *d; d++) {
			if (*d < '0' || *d > '9')
				return -1;
			n = n * 10 + (*d - '0');
		}
	}
	return (int)n;
}

/* The snippet's descriptor fd, or its working directory, as S's own
 * O_PATH descriptor. */
static int snippet_dir(pid_t pid, int fd)
{
	char link[48];
	int got;

	if (fd == AT_FDCWD)
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	else if (fd >= 0)
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, fd);
	else
		return -EBADF;
	got = open(link, O_PATH | O_CLOEXEC);
	return got < 0 ? (errno == ENOENT && fd != AT_FDCWD ? -EBADF : -errno) : got;
}

/* The file the call names, as an O_PATH descriptor of S's, resolved in
 * the snippet's view. */
static int open_target(pid_t pid, const struct attr_call *c, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS };
	char root[32];
	int base, fd;

	if (c->fd_form || !path[0])
		return snippet_dir(pid, c->dirfd);
	if (proc_self_fd(path) >= 0)
		return snippet_dir(pid, proc_self_fd(path));
	if (path[0] == '/') {
		snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
		base = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		how.resolve |= RESOLVE_IN_ROOT;
		if (base < 0)
			return -errno;
	} else {
		base = snippet_dir(pid, c->dirfd);
		if (base < 0)
			return base;
	}
	if (!c->follow)
		how.flags |= O_NOFOLLOW;
	/* ENOSYS: before Linux 5.6; ELOOP: a magic link on the way
	 * (/proc/self/..., /dev/fd/N), which would be S's own, or a loop.
	 * Both are refused as the filter refused everything before. */
	fd = (int)syscall(SYS_openat2, base, path, &how, sizeof(how));
	if (fd < 0)
		fd = errno == ENOSYS || errno == ELOOP ? -EPERM : -errno;
	close(base);
	return fd;
}

/* Whether fd was reached through one of the run's own mounts. */
static bool in_own_place(const struct exec_gate *g, int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return false;
	for (size_t i = 0; i < sizeof(g->own_mounts) / sizeof(g->own_mounts[0]); i++)
		if (g->own_mounts[i] && g->own_mounts[i] == stx.stx_mnt_id)
			return true;
	return false;
}

static int change_mode(int fd, mode_t mode)
{
	char self[32];
	struct stat st;

	if (mode & (S_ISUID | S_ISGID))
		return -EPERM;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -EOPNOTSUPP; /* Linux has no mode for a symlink */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return chmod(self, mode) < 0 ? -errno : 0;
}

static int change_times(int fd, const struct timespec *ts)
{
	return utimensat(fd, "", ts, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

/* 0 or -errno: the call's answer. */
static int serve(const struct exec_gate *g, const struct seccomp_notif *req,
		 const struct attr_call *c)
{
	char path[PATH_MAX], mem_path[32];
	struct timespec ts[2];
	int mem, fd, rc = 0;

	if (!g->own_mounts[0] && !g->own_mounts[1])
		return -EPERM;
	snprintf(mem_path, sizeof(mem_path), "/proc/%u/mem", req->pid);
	mem = open(mem_path, O_RDONLY | O_CLOEXEC);
	if (mem < 0)
		return -EPERM;
	path[0] = '\0';
	if (!c->fd_form)
		rc = read_path(mem, c->path, path, sizeof(path));
	if (rc == 0 && !c->chmod && c->times)
		rc = read_times(mem, c, ts);
	close(mem);
	if (rc < 0)
		return rc;
	if (!c->fd_form && !path[0] && !c->empty_ok)
		return -ENOENT;
	fd = open_target((pid_t)req->pid, c, path);
	if (fd < 0)
		return fd;
	/* The descriptors above are the caller's: still waiting, it is the
	 * process they were opened for, not a later one with its pid. */
	if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		rc = -ENOENT;
	else if (!in_own_place(g, fd))
		rc = -EPERM;
	else
		rc = c->chmod ? change_mode(fd, c->mode) : change_times(fd, c->times ? ts : NULL);
	close(fd);
	return rc;
}

bool file_attr_answer(const struct exec_gate *g, const struct seccomp_notif *req,
		      struct seccomp_notif_resp *resp)
{
	struct attr_call c;
	int err;

	if (!decode(req, &c, &err))
		return false;
	resp->id = req->id;
	resp->flags = 0;
	resp->val = 0;
	resp->error = err ? err : serve(g, req, &c);
	return true;
}

/* ---- opens for writing: the write witness ---------------------------------
 *
 * The unattended filter sends every open that may write, create or
 * truncate (seccomp.c, add_open_witnessed) here, so that a refusal is in
 * the receipt whoever made it: Python, sqlite3, a C extension.  S only
 * looks: it judges the path as the snippet named it, in the snippet's
 * view (as serve() above resolves it), against the places the run's
 * Landlock ruleset lets it write (scratch and /dev/shm, by their mounts;
 * /dev/null), and records a `write` (or `create`, when the file does not
 * exist) outside them that the user's own permissions would allow.  Then,
 * with Landlock holding the paths, it answers SECCOMP_USER_NOTIF_FLAG_
 * CONTINUE: the kernel resolves the path again and Landlock and the mount
 * view decide, exactly as without the witness.  CONTINUE never lets a
 * call do what it could not have done without the notification.  Where
 * the filter holds the rule itself (no Landlock: every open for writing;
 * ABI 1-2: O_TRUNC without write access) S answers EACCES, the filter's
 * answer before, and records every one.
 *
 * The record can be wrong: another thread may swap the path between S's
 * look and the kernel's.  It is a witness, not the boundary. */

struct open_call {
	int dirfd;     /* AT_FDCWD or the snippet's descriptor */
	uint64_t path; /* address in the snippet */
	int flags;
};

static bool decode_open(const struct seccomp_notif *req, struct open_call *c)
{
	const __u64 *a = req->data.args;

	c->dirfd = AT_FDCWD;
	switch (req->data.nr) {
#ifdef __NR_open
	case __NR_open:
		c->path = a[0], c->flags = (int)a[1];
		return true;
#endif
#ifdef __NR_creat
	case __NR_creat:
		c->path = a[0], c->flags = O_CREAT | O_WRONLY | O_TRUNC;
		return true;
#endif
	case __NR_openat:
		c->dirfd = (int)a[0], c->path = a[1], c->flags = (int)a[2];
		return true;
	default:
		return false;
	}
}

/* /proc/self and /proc/thread-self name S's own process when S resolves
 * them: the caller's own, as the kernel will read them, is /proc/<pid>
 * (the calling thread's id, which /proc resolves like its process's). */
static void own_proc(pid_t pid, char *path, size_t len)
{
	static const char *const selves[] = { "/proc/self", "/proc/thread-self" };
	char rest[PATH_MAX];

	for (size_t i = 0; i < sizeof(selves) / sizeof(selves[0]); i++) {
		size_t n = strlen(selves[i]);

		if (strncmp(path, selves[i], n) || (path[n] != '/' && path[n] != '\0'))
			continue;
		snprintf(rest, sizeof(rest), "%s", path + n);
		if (snprintf(path, len, "/proc/%d%s", (int)pid, rest) >= (int)len)
			path[0] = '\0';
		return;
	}
}

/* Whether the filter, not Landlock, holds this open's rule. */
static bool filter_refuses(const struct exec_gate *g, int flags)
{
	int mode = flags & O_ACCMODE;

	if (g->landlock_abi == 0)
		return true;
	return g->landlock_abi < 3 && (flags & O_TRUNC) && mode != O_WRONLY && mode != O_RDWR;
}

/* Collapses "//", "." and ".." of an absolute path in place, as Python's
 * os.path.normpath does, so the witness names a file as the snippet's
 * own report (kotoba_receipt.py, _at) does. */
static void normalize(char *path)
{
	char *out = path, *in = path;

	while (*in) {
		char *end;
		size_t n;

		while (*in == '/')
			in++;
		end = strchrnul(in, '/');
		n = (size_t)(end - in);
		if (n == 0 || (n == 1 && in[0] == '.')) {
			/* nothing */
		} else if (n == 2 && in[0] == '.' && in[1] == '.') {
			while (out > path && *--out != '/')
				;
		} else {
			*out++ = '/';
			memmove(out, in, n);
			out += n;
		}
		in = end;
	}
	if (out == path)
		*out++ = '/';
	*out = '\0';
}

/* The file's name for the receipt: absolute, from the snippet's working
 * directory or the descriptor it passed. */
static void absolute_name(pid_t pid, int dirfd, const char *path, char *out, size_t len)
{
	char link[48], base[PATH_MAX];
	ssize_t n = 0;

	if (path[0] != '/') {
		if (dirfd == AT_FDCWD)
			snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
		else
			snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, dirfd);
		n = readlink(link, base, sizeof(base) - 1);
		if (n <= 0 || base[0] != '/')
			n = 0;
	}
	base[n > 0 ? n : 0] = '\0';
	/* Cut when too long: the receipt keeps a shorter target anyway. */
	if (snprintf(out, len, "%s/", base) < (int)len)
		strncat(out, path, len - strlen(out) - 1);
	normalize(out);
}

static bool is_dev_null(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

static bool user_may(int fd, int how)
{
	char self[32];

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return access(self, how) == 0;
}

/* The directory a new file at path would be made in, resolved as
 * open_target() does. */
static int open_parent(pid_t pid, const struct open_call *c, const char *path)
{
	struct attr_call dir = { .dirfd = c->dirfd, .follow = true };
	char parent[PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash)
		return snippet_dir(pid, c->dirfd);
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	return open_target(pid, &dir, parent);
}

/* The directory O_CREAT makes a missing file in: path's own, or, when
 * path's last component is a dangling symlink the open follows, that of
 * the file it points to (a few links deep at most; deeper: -ELOOP, no
 * record). */
static int open_new_file_dir(pid_t pid, const struct open_call *c, const char *path,
			     bool follow)
{
	struct attr_call link = { .dirfd = c->dirfd };
	struct open_call at = *c;
	char cur[PATH_MAX], text[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(cur, sizeof(cur), "%s", path);
	for (int hops = 0; follow && hops < 8; hops++) {
		struct stat st;
		char *slash;

		fd = open_target(pid, &link, cur);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISLNK(st.st_mode)) {
			if (fd >= 0)
				close(fd);
			return open_parent(pid, &at, cur);
		}
		n = readlinkat(fd, "", text, sizeof(text) - 1);
		close(fd);
		if (n <= 0)
			return -ENOENT;
		text[n] = '\0';
		slash = strrchr(cur, '/');
		if (text[0] == '/' || !slash) {
			snprintf(cur, sizeof(cur), "%s", text);
		} else {
			slash[1] = '\0';
			if (strlen(cur) + strlen(text) >= sizeof(cur))
				return -ENAMETOOLONG;
			strcat(cur, text);
		}
	}
	return follow ? -ELOOP : open_parent(pid, &at, cur);
}

/* BLOCK_WRITE or BLOCK_CREATE when Landlock will refuse this open and the
 * user's own permissions would not; -1 when the open is the kernel's to
 * answer otherwise (a place the run may write, no such directory, no
 * permission anyway, a path S cannot follow). */
static int landlock_refuses(const struct exec_gate *g, pid_t pid, const struct open_call *c,
			    const char *path)
{
	bool creates = c->flags & O_CREAT, tmpfile = (c->flags & O_TMPFILE) == O_TMPFILE;
	struct attr_call how = { .dirfd = c->dirfd };
	int fd, kind = BLOCK_WRITE;
	struct stat st;

	how.follow = !(c->flags & O_NOFOLLOW) && !(creates && (c->flags & O_EXCL));
	fd = open_target(pid, &how, path);
	if (fd == -ENOENT && creates && !tmpfile) {
		fd = open_new_file_dir(pid, c, path, how.follow);
		kind = BLOCK_CREATE;
	}
	if (fd < 0)
		return -1;
	if (tmpfile)
		kind = BLOCK_CREATE;
	if (in_own_place(g, fd) || is_dev_null(fd) || fstat(fd, &st) < 0 ||
	    (S_ISDIR(st.st_mode) && kind == BLOCK_WRITE) || (!S_ISDIR(st.st_mode) && kind == BLOCK_CREATE) ||
	    !user_may(fd, kind == BLOCK_CREATE ? W_OK | X_OK : W_OK))
		kind = -1;
	close(fd);
	return kind;
}

/* Where the filter refuses: `create` when the file is not there. */
static int access_kind(pid_t pid, const struct open_call *c, const char *path)
{
	struct attr_call how = { .dirfd = c->dirfd, .follow = true };
	int fd = open_target(pid, &how, path);

	if (fd >= 0)
		close(fd);
	return fd == -ENOENT && (c->flags & O_CREAT) ? BLOCK_CREATE : BLOCK_WRITE;
}

static void witness_open(const struct exec_gate *g, const struct seccomp_notif *req,
			 const struct open_call *c, bool refused_here)
{
	char path[PATH_MAX], name[PATH_MAX + 64], mem_path[32];
	pid_t pid = (pid_t)req->pid;
	int mem, rc, kind;

	snprintf(mem_path, sizeof(mem_path), "/proc/%d/mem", (int)pid);
	mem = open(mem_path, O_RDONLY | O_CLOEXEC);
	if (mem < 0)
		return;
	rc = read_path(mem, c->path, path, sizeof(path));
	close(mem);
	if (rc == 0 && proc_self_fd(path) < 0)
		own_proc(pid, path, sizeof(path));
	if (rc < 0 || !path[0])
		return; /* the kernel says EFAULT, ENAMETOOLONG or ENOENT */
	if (refused_here)
		kind = access_kind(pid, c, path);
	else
		kind = landlock_refuses(g, pid, c, path);
	/* Still waiting: the descriptors and the memory were this caller's. */
	if (kind < 0 || ioctl(g->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		return;
	absolute_name(pid, c->dirfd, path, name, sizeof(name));
	receipt_add(g->blocked, (enum proto_block_kind)kind, name,
		    refused_here ? BY_SECCOMP : BY_LANDLOCK, SEEN_BY_WORKER, !refused_here);
}

bool write_witness_answer(const struct exec_gate *g, const struct seccomp_notif *req,
			  struct seccomp_notif_resp *resp)
{
	struct open_call c;
	bool refused_here;

	if (!decode_open(req, &c))
		return false;
	refused_here = filter_refuses(g, c.flags);
	if (g->blocked)
		witness_open(g, req, &c, refused_here);
	resp->id = req->id;
	resp->val = 0;
	resp->error = refused_here ? -EACCES : 0;
	resp->flags = refused_here ? 0 : SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	return true;
}
