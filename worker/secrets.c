/* SPDX-License-Identifier: MIT
 * Secret masks for the unattended profile.
 *
 * The broker sends the secret set (job.secrets): absolute paths, and file
 * names looked for in the working directory and each of its parents (a
 * final '*' matches any rest of the name, as in ".env.*").  S expands it
 * before the fork, as the snippet's user, into the places that exist now
 * (plan_secrets).  C then, still single-threaded and before it drops its
 * capabilities, sets no_new_privs, Landlock or seccomp (mask_secrets):
 *
 *   1. unshare(CLONE_NEWUSER | CLONE_NEWNS): a user namespace owned by
 *      the snippet's user, mapping only its own uid and gid (setgroups
 *      denied, as the kernel requires of an unprivileged map), and a
 *      private copy of the mount table.  Nothing done here reaches the
 *      host: the mounts are this run's and go when its last process does.
 *   2. Every mount private (MS_REC | MS_PRIVATE), so nothing propagates
 *      back to the host's peer groups.
 *   3. The mask sources: a small tmpfs, its root mode 000, holding one
 *      empty directory and one empty file, both mode 000, all owned by
 *      the snippet's user, then made read-only (chmod fails with EROFS).
 *      It is mounted on the first secret directory, which it masks by
 *      itself; only when the set has no directory does it go on the
 *      scratch directory and leave it again after step 4 (an unmount
 *      costs an RCU grace period, sometimes milliseconds).
 *   4. Each secret: the empty directory bind-mounted over a secret
 *      directory, the empty file over a secret file.  Opening anything
 *      at or below it fails with EACCES (no capability will be left to
 *      override mode 000), however the path is spelled: '..', '//',
 *      /proc/self/root, /proc/self/cwd, openat on a directory fd, a
 *      symlink pointing at it all end at the mount.
 *
 * A place the user cannot read anyway (access() as the user fails) gets
 * no mask: the snippet holds less than S.
 *
 * Then (private_shm) the run's own /dev/shm: a tmpfs in a mount namespace
 * of that run alone, a copy of the masks' one (which S keeps for the
 * user's next runs, and which so never holds it), or, with nothing to
 * mask, new user and mount namespaces made as in step 1.
 *
 * The approved profile gets none of this: a person read the snippet.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "worker/secrets.h"

/* linux/statfs.h: statfs filled f_flags (Linux 2.6.36). */
#ifndef ST_VALID
#define ST_VALID 0x0020
#endif

/* More than any real home and project tree holds; past it the run fails
 * (closed) rather than masking a part. */
#define SECRET_MASKS_MAX 512
/* What p->masks holds at first: a developer's set, found, is a handful. */
#define SECRET_MASKS_FIRST 16
_Static_assert((SECRET_MASKS_MAX & (SECRET_MASKS_MAX - 1)) == 0 &&
	       SECRET_MASKS_MAX % SECRET_MASKS_FIRST == 0, "powers of two");

/* ---- S: expanding the set ---------------------------------------------- */

/* What a path that does not resolve can mean: nothing there to read for
 * this user, now.  Anything else (EIO, ENOMEM) fails the run. */
static bool nothing_there(int err)
{
	return err == ENOENT || err == ENOTDIR || err == EACCES || err == ELOOP ||
	       err == ENAMETOOLONG;
}

/* What the user cannot read already (S runs as the snippet's user, with
 * its groups): /etc/shadow for most, the system broker's state.  The
 * snippet, holding less than S, cannot either, and a mask costs a mount. */
static bool user_cannot_read(const char *path, const struct stat *st)
{
	mode_t need = S_ISDIR(st->st_mode) ? S_IXOTH : S_IROTH;

	/* Open to all, or to us as its owner: nothing to ask the kernel (an
	 * ACL or LSM that refuses after all only makes the mask needless). */
	if ((st->st_mode & need) || (st->st_uid == geteuid() && (st->st_mode & (need << 6))))
		return false;
	return access(path, S_ISDIR(st->st_mode) ? X_OK : R_OK) < 0 && errno == EACCES;
}

/* A symlink another user made (a `.env.x` in /tmp or in a shared
 * directory above the working directory) would aim a mask at any file the
 * snippet's user can read: python3's standard library, say, so that no
 * unattended run of that user there could start.  Only the user's own and
 * root's are followed; another's leads to nothing of the user's that the
 * set's other entries do not already mask. */
static bool foreign_symlink(const struct stat *lst)
{
	return S_ISLNK(lst->st_mode) && lst->st_uid != geteuid() && lst->st_uid != 0;
}

/* Whether an absolute path is spelled as the kernel would name it: no
 * empty, "." or ".." component, no trailing '/'. */
static bool canonical(const char *path)
{
	size_t len = strlen(path);

	return path[0] == '/' && !strstr(path, "//") && !strstr(path, "/./") &&
	       !strstr(path, "/../") && (len == 1 || path[len - 1] != '/') &&
	       strcmp(path + (len >= 2 ? len - 2 : 0), "/.") &&
	       strcmp(path + (len >= 3 ? len - 3 : 0), "/..");
}

/* What path names, into st: 1 to mask it, 0 to leave it (nothing there,
 * or a foreign symlink), -errno.  One call for the many that are absent,
 * and for a file reached with no symlink at its end.  *plain: path is
 * canonical and its last component no symlink, so that it is what it
 * resolves to when no directory above it is a symlink either; the mount
 * aliases, the only ones to ask, check that (plain_is_real). */
static int look_up(const char *path, struct stat *st, bool *plain)
{
	*plain = false;
	if (lstat(path, st) < 0)
		return nothing_there(errno) ? 0 : -errno;
	if (!S_ISLNK(st->st_mode)) {
		*plain = canonical(path);
		return 1;
	}
	if (foreign_symlink(st))
		return 0;
	if (stat(path, st) < 0)
		return nothing_there(errno) ? 0 : -errno;
	return 1;
}

/* Room for the next mask: p->masks holds SECRET_MASKS_FIRST, then twice
 * as many each time it is full (up to SECRET_MASKS_MAX, a power of two).
 * false: out of memory. */
static bool grow_masks(struct plan *p)
{
	size_t n = p->n_masks;
	struct secret_mask *grown;

	if (p->masks && (n < SECRET_MASKS_FIRST || (n & (n - 1))))
		return true; /* not full */
	grown = realloc(p->masks, (n ? 2 * n : SECRET_MASKS_FIRST) * sizeof(*grown));
	if (!grown)
		return false;
	p->masks = grown;
	return true;
}

static int add_mask(struct plan *p, const char *path, char *err, size_t errlen)
{
	struct stat st;
	bool plain;
	char *copy;
	int rc = look_up(path, &st, &plain);

	if (rc < 0)
		snprintf(err, errlen, "cannot stat secret %s: %s", path, strerror(-rc));
	if (rc <= 0)
		return rc;
	if (user_cannot_read(path, &st))
		return 0;
	if (p->n_masks == SECRET_MASKS_MAX) {
		snprintf(err, errlen, "more than %d secrets to mask (last: %s)", SECRET_MASKS_MAX,
			 path);
		return -E2BIG;
	}
	if (!grow_masks(p))
		goto nomem;
	copy = strdup(path);
	if (!copy)
		goto nomem;
	p->masks[p->n_masks++] = (struct secret_mask){ .path = copy, .dir = S_ISDIR(st.st_mode),
						       .real = plain, .dev = st.st_dev,
						       .ino = st.st_ino };
	return 0;
nomem:
	snprintf(err, errlen, "out of memory listing secrets");
	return -ENOMEM;
}

/* A secret whose whole path is PATH_MAX or longer cannot be masked by
 * it, yet a snippet working in its directory opens it by its name: when
 * it is there, the run does not start (fails closed). */
static int too_long(const char *dir, const char *name, size_t namelen, char *err,
		    size_t errlen)
{
	char base[NAME_MAX + 1];
	struct stat st;
	int fd, rc, e;

	if (namelen > NAME_MAX)
		return 0; /* no file has that name */
	memcpy(base, name, namelen);
	base[namelen] = '\0';
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return nothing_there(errno) ? 0 : -errno;
	rc = fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW);
	e = errno;
	close(fd);
	if (rc < 0)
		return nothing_there(e) ? 0 : -e;
	snprintf(err, errlen, "secret %s in %.200s... has a path of %d bytes or more, which cannot "
		 "be masked", base, dir, PATH_MAX);
	return -ENAMETOOLONG;
}

static int add_joined(struct plan *p, const char *dir, const char *name, size_t namelen,
		      char *err, size_t errlen)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%.*s", strcmp(dir, "/") ? dir : "",
			 (int)namelen, name);

	if (n < 0 || (size_t)n >= sizeof(path))
		return too_long(dir, name, namelen, err, errlen);
	return add_mask(p, path, err, errlen);
}

/* ---- listings a spare's check may take again -------------------------------
 *
 * A warm job's S expands the set twice: when it builds C, and at `go`, to
 * tell whether C still fits (warm.c).  Listing a large directory for a
 * pattern (a repository, /tmp) is most of the second expansion.  So such
 * an S watches each directory it lists, with inotify, from before the
 * listing: every name made, removed or moved into or out of it since is an
 * event.  A directory with no event since, opened again at the same path
 * and still the same inode, holds the entries that listing saw; its
 * matches are taken again, each looked up again as add_joined does.  No
 * clock is involved.  Any doubt lists again: no watch (inotify refused, or
 * the user's instances used up), a queue that overflowed, a watch the
 * kernel dropped (the directory deleted or unmounted), more matches than
 * are kept, a file system whose changes may not all pass through this
 * kernel (NFS, SMB, FUSE: inotify sees only local changes there). */
#define LISTED_MAX 16       /* directory and pattern pairs kept */
#define LISTED_NAMES_MAX 16 /* matches kept per pair */
#define LISTED_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
		       IN_MOVE_SELF | IN_ONLYDIR)

struct listed {
	char *dir, *pattern;
	dev_t dev;
	ino_t ino;
	int wd;
	bool valid;
	size_t n;
	char *names[LISTED_NAMES_MAX];
};

static struct {
	int fd; /* the inotify instance; -1: none (listing every time) */
	size_t n;
	struct listed e[LISTED_MAX];
} listings = { .fd = -1 };

static void listings_start(void)
{
	if (listings.fd < 0)
		listings.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

static void listed_clear(struct listed *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	l->n = 0;
	l->valid = false;
}

/* Every event queued so far takes the listings of its directory away; an
 * overflow, all of them. */
static void listings_drain(void)
{
	union {
		struct inotify_event ev;
		char bytes[4096];
	} buf;
	ssize_t got;

	while ((got = read(listings.fd, buf.bytes, sizeof(buf.bytes))) > 0) {
		for (ssize_t at = 0; at < got;) {
			const struct inotify_event *ev = (const void *)(buf.bytes + at);

			at += (ssize_t)(sizeof(*ev) + ev->len);
			for (size_t i = 0; i < listings.n; i++)
				if ((ev->mask & IN_Q_OVERFLOW) || listings.e[i].wd == ev->wd)
					listings.e[i].valid = false;
		}
	}
	if (got < 0 && errno != EAGAIN && errno != EINTR)
		for (size_t i = 0; i < listings.n; i++)
			listings.e[i].valid = false;
}

static struct listed *listed_find(const char *dir, const char *name, size_t len)
{
	for (size_t i = 0; i < listings.n; i++) {
		struct listed *l = &listings.e[i];

		if (!strcmp(l->dir, dir) && strlen(l->pattern) == len &&
		    !memcmp(l->pattern, name, len))
			return l;
	}
	return NULL;
}

/* The pair's slot, its old matches gone; NULL when every slot is taken. */
static struct listed *listed_slot(const char *dir, const char *name, size_t len)
{
	struct listed *l = listed_find(dir, name, len);

	if (l) {
		listed_clear(l);
		return l;
	}
	if (listings.n == LISTED_MAX)
		return NULL;
	l = &listings.e[listings.n];
	*l = (struct listed){ .dir = strdup(dir), .pattern = strndup(name, len), .wd = -1 };
	if (!l->dir || !l->pattern) {
		free(l->dir);
		free(l->pattern);
		return NULL;
	}
	listings.n++;
	return l;
}

/* Local file systems, every change made through this kernel. */
static bool every_change_seen(int fd)
{
	static const unsigned long local[] = { EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC,
					       BTRFS_SUPER_MAGIC, TMPFS_MAGIC, F2FS_SUPER_MAGIC };
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if ((unsigned long)sf.f_type == local[i])
			return true;
	return false;
}

/* Before fd's directory is listed: its watch, on the inode fd holds (not
 * on whatever its path names by then).  NULL: this listing is not kept. */
static struct listed *listing_begin(int fd, const char *dir, const char *name, size_t len)
{
	char self[32];
	struct listed *l;
	struct stat st;

	if (listings.fd < 0 || !every_change_seen(fd) || fstat(fd, &st) < 0 ||
	    !(l = listed_slot(dir, name, len)))
		return NULL;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	l->wd = inotify_add_watch(listings.fd, self, LISTED_EVENTS);
	if (l->wd < 0)
		return NULL;
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	return l;
}

static void listing_match(struct listed *l, const char *entry)
{
	if (!l || l->n == SIZE_MAX)
		return;
	if (l->n == LISTED_NAMES_MAX || !(l->names[l->n] = strdup(entry))) {
		listed_clear(l);
		l->n = SIZE_MAX; /* not kept */
		return;
	}
	l->n++;
}

static void listing_end(struct listed *l, bool complete)
{
	if (!l)
		return;
	if (l->n == SIZE_MAX)
		l->n = 0;
	else
		l->valid = complete;
}

/* The listing of dir for name kept from before, when nothing changed in
 * the directory fd holds since; NULL: list it. */
static struct listed *listing_still_holds(int fd, const char *dir, const char *name, size_t len)
{
	struct listed *l;
	struct stat st;

	if (listings.fd < 0)
		return NULL;
	listings_drain();
	l = listed_find(dir, name, len);
	if (!l || !l->valid || fstat(fd, &st) < 0 || st.st_dev != l->dev || st.st_ino != l->ino)
		return NULL;
	return l;
}

static int add_listed(struct plan *p, const char *dir, const struct listed *l, char *err,
		      size_t errlen)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < l->n; i++)
		rc = add_joined(p, dir, l->names[i], strlen(l->names[i]), err, errlen);
	return rc;
}

/* name ends in '*': every entry of dir that starts with the rest.  A
 * directory the user may enter but not list is skipped: its exact names
 * (".env") are separate entries of the set. */
static int add_matching(struct plan *p, const char *dir, const char *name, size_t len,
			char *err, size_t errlen)
{
	/* getdents64 itself, into the stack: opendir(3) would add an fstat
	 * and a 32 KiB buffer from malloc to each directory. */
	union {
		struct dirent64 e;
		char bytes[8192];
	} buf;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct listed *kept;
	ssize_t got = 1;
	int rc = 0;

	if (fd < 0)
		return nothing_there(errno) ? 0 : -errno;
	if ((kept = listing_still_holds(fd, dir, name, len))) {
		close(fd);
		return add_listed(p, dir, kept, err, errlen);
	}
	kept = listing_begin(fd, dir, name, len);
	while (rc == 0 && got > 0) {
		got = getdents64(fd, buf.bytes, sizeof(buf.bytes));
		for (ssize_t at = 0; rc == 0 && at < got;) {
			const struct dirent64 *e = (const void *)(buf.bytes + at);

			at += e->d_reclen;
			if (!strncmp(e->d_name, name, len - 1) && strcmp(e->d_name, ".") &&
			    strcmp(e->d_name, "..")) {
				listing_match(kept, e->d_name);
				rc = add_joined(p, dir, e->d_name, strlen(e->d_name), err, errlen);
			}
		}
	}
	listing_end(kept, rc == 0 && got == 0);
	/* A directory that stops listing halfway (EIO) is not known to
	 * hold no secret. */
	if (got < 0 && rc == 0 && !nothing_there(errno)) {
		rc = -errno;
		snprintf(err, errlen, "cannot list %s: %s", dir, strerror(-rc));
	}
	close(fd);
	return rc;
}

/* One file name in dir and in each directory above it, up to /. */
static int add_in_parents(struct plan *p, const char *start, struct pstr name, char *err,
			  size_t errlen)
{
	char dir[PATH_MAX];
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s", start);
	for (;;) {
		char *slash;

		if (name.ptr[name.len - 1] == '*')
			rc = add_matching(p, dir, name.ptr, name.len, err, errlen);
		else
			rc = add_joined(p, dir, name.ptr, name.len, err, errlen);
		if (rc < 0 || !strcmp(dir, "/"))
			return rc;
		slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

/* What realpath(3) would answer for the working directory, into real
 * ("" where it does not resolve): the directory itself where it is
 * spelled canonically and no symlink is on the way, which one openat2
 * with RESOLVE_NO_SYMLINKS tells, where realpath(3) reads a link per
 * component. */
static int resolve_cwd(const char *cwd, char real[PATH_MAX])
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_NO_SYMLINKS };
	int fd = canonical(cwd) ? (int)syscall(SYS_openat2, AT_FDCWD, cwd, &how, sizeof(how)) : -1;

	if (fd >= 0) {
		close(fd);
		snprintf(real, PATH_MAX, "%s", cwd);
	} else if (!realpath(cwd, real)) {
		real[0] = '\0';
		return errno;
	}
	return 0;
}

/* The working directory as the job names it, and as the kernel resolves
 * it: '..' from the snippet's cwd follows the second, a path spelled
 * through a symlinked parent the first. */
static int add_name(struct plan *p, const char *real_cwd, struct pstr name, char *err,
		    size_t errlen)
{
	int rc = add_in_parents(p, p->cwd, name, err, errlen);

	if (rc == 0 && real_cwd[0] && strcmp(real_cwd, p->cwd))
		rc = add_in_parents(p, real_cwd, name, err, errlen);
	return rc;
}

/* ---- S: the same file system mounted more than once ---------------------
 *
 * A mask covers one mount.  Where the file system that holds a secret is
 * mounted again (a bind of /home elsewhere, a btrfs top level mounted for
 * snapshots), the secret is reachable through the other mount too, so each
 * such place is masked as well: for every mount of the same device
 * (mountinfo's major:minor) whose root holds the secret's path on that
 * device, the path there, when it is the same file (st_dev and st_ino). */

struct mount_entry {
	unsigned major, minor;
	char *root, *point;
};

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (; *s; s++, w++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w = *s;
		}
	}
	*w = '\0';
}

struct mounts {
	char *text;                 /* the whole of mountinfo; entries point into it */
	struct mount_entry *v;
	size_t n;
};

static void free_mounts(struct mounts *m)
{
	free(m->text);
	free(m->v);
}

/* The next space-separated field of *s, terminated in place. */
static char *next_field(char **s)
{
	char *f = *s, *end;

	while (*f == ' ')
		f++;
	for (end = f; *end && *end != ' '; end++)
		;
	*s = end + (*end != '\0');
	*end = '\0';
	return f;
}

/* A decimal number of at most 9 digits at *s, and past it; false for none. */
static bool parse_uint(const char **s, unsigned *out)
{
	unsigned v = 0;
	int digits = 0;

	for (; **s >= '0' && **s <= '9' && digits < 9; (*s)++, digits++)
		v = v * 10 + (unsigned)(**s - '0');
	*out = v;
	return digits > 0 && !(**s >= '0' && **s <= '9');
}

/* One line's device, root and mount point ("ID PARENT MAJ:MIN ROOT POINT
 * ..."), cut out in place; false for a line not of that form. */
static bool parse_mount(char *line, struct mount_entry *e)
{
	const char *dev;

	next_field(&line);
	next_field(&line);
	dev = next_field(&line);
	e->root = next_field(&line);
	e->point = next_field(&line);
	if (!parse_uint(&dev, &e->major) || *dev++ != ':' || !parse_uint(&dev, &e->minor) ||
	    *dev || e->root[0] != '/' || e->point[0] != '/')
		return false;
	unescape_octal(e->root);
	unescape_octal(e->point);
	return true;
}

/* All of /proc/self/mountinfo, read at once: the kernel makes it anew on
 * every read, so stdio's line-by-line reads would cost several passes. */
static char *read_mountinfo(char *err, size_t errlen)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 16384;
	char *text = fd < 0 ? NULL : malloc(cap + 1), *grown;
	ssize_t got = 1;

	while (text && got > 0) {
		got = read(fd, text + len, cap - len);
		if (got < 0 && errno == EINTR)
			got = 1;
		else if (got > 0 && (len += (size_t)got) == cap) {
			grown = realloc(text, (cap *= 2) + 1);
			if (!grown)
				free(text);
			text = grown;
		}
	}
	if (!text || got < 0) {
		snprintf(err, errlen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
		free(text);
		text = NULL;
	} else {
		text[len] = '\0';
	}
	if (fd >= 0)
		close(fd);
	return text;
}

/* The broker's copy of the table (the same namespace: it started us),
 * else our own read of it; NUL-terminated and ours to cut up. */
static char *mount_table(const struct plan *p, char *err, size_t errlen)
{
	const struct pstr t = p->job->mounts;
	char *text;

	if (!t.len)
		return read_mountinfo(err, errlen);
	if (!(text = strndup(t.ptr, t.len)))
		snprintf(err, errlen, "out of memory copying the mount table");
	return text;
}

/* false after saying why. */
static bool read_mounts(const struct plan *p, struct mounts *m, struct sha256_ctx *key, char *err,
			size_t errlen)
{
	size_t cap = 0;
	char *line, *next;

	*m = (struct mounts){ .text = mount_table(p, err, errlen) };
	if (!m->text)
		return false;
	sha256_update(key, strlen(m->text), (const uint8_t *)m->text);
	for (line = m->text; *line; line = next) {
		/* Lines cut in place, as strtok_r(3) would, empty ones skipped. */
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (!*line)
			continue;
		if (m->n == cap) {
			struct mount_entry *grown = realloc(m->v, (cap = cap ? 2 * cap : 64) *
								  sizeof(*m->v));

			if (!grown) {
				free_mounts(m);
				snprintf(err, errlen, "out of memory reading the mount table");
				return false;
			}
			m->v = grown;
		}
		if (parse_mount(line, &m->v[m->n]))
			m->n++;
	}
	if (m->n)
		return true;
	free_mounts(m);
	snprintf(err, errlen, "/proc/self/mountinfo lists no mount");
	return false;
}

/* Whether path is dir or below it; *rest is what follows dir ("" or "/..."). */
static bool beneath(const char *path, const char *dir, const char **rest)
{
	size_t len = strcmp(dir, "/") ? strlen(dir) : 0;

	if (strncmp(path, dir, len) || (path[len] && path[len] != '/'))
		return false;
	*rest = path + len;
	return true;
}

/* The mount a resolved path is on: the longest mount point above it (the
 * last listed of equals: it is the one on top). */
static const struct mount_entry *mount_of(const struct mount_entry *v, size_t n, const char *path)
{
	const struct mount_entry *best = NULL;
	const char *rest;

	for (size_t i = 0; i < n; i++)
		if (beneath(path, v[i].point, &rest) &&
		    (!best || strlen(v[i].point) >= strlen(best->point)))
			best = &v[i];
	return best;
}

static bool already_masked(const struct plan *p, const char *path)
{
	for (size_t i = 0; i < p->n_masks; i++)
		if (!strcmp(p->masks[i].path, path))
			return true;
	return false;
}

static int add_alias(struct plan *p, const char *alias, dev_t dev, ino_t ino, char *err,
		     size_t errlen)
{
	struct stat st;

	if (already_masked(p, alias) || stat(alias, &st) < 0 || st.st_dev != dev ||
	    st.st_ino != ino)
		return 0;
	return add_mask(p, alias, err, errlen);
}

/* The kernel's own name for what path resolves to (the link of an O_PATH
 * descriptor): three calls, where realpath(3) makes one per component. */
static bool resolve(const char *path, char real[PATH_MAX])
{
	char link[32];
	ssize_t len;
	int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, real, PATH_MAX - 1);
	close(fd);
	if (len <= 0 || len >= PATH_MAX - 1)
		return false;
	real[len] = '\0';
	return real[0] == '/';
}

/* Whether any device is mounted twice: if not, nothing has an alias. */
static bool some_device_twice(const struct mount_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (v[i].major == v[j].major && v[i].minor == v[j].minor)
				return true;
	return false;
}

/* Directories found to be, or not to be, symlinks (lstat), so that the
 * set, which shares a few (the home directory's), asks once each. */
#define DIRS_SEEN 16
struct dirs_seen {
	const char *real_cwd; /* the working directory resolved, or "" */
	size_t n;
	struct {
		char *dir;
		bool real;
	} v[DIRS_SEEN];
};

/* Whether the directory path[0..len) is no symlink: the working
 * directory as resolved (resolve_cwd) and each directory above it are
 * none; any other is asked once. */
static bool dir_real(struct dirs_seen *seen, const char *path, size_t len)
{
	const char *cwd = seen->real_cwd;
	struct stat st;
	char *dir;
	bool real;

	if (cwd[0] && !strncmp(cwd, path, len) && (cwd[len] == '/' || cwd[len] == '\0'))
		return true;
	for (size_t i = 0; i < seen->n; i++)
		if (!strncmp(seen->v[i].dir, path, len) && seen->v[i].dir[len] == '\0')
			return seen->v[i].real;
	if (!(dir = strndup(path, len)))
		return false;
	real = lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	if (seen->n < DIRS_SEEN) {
		seen->v[seen->n].dir = dir;
		seen->v[seen->n++].real = real;
	} else {
		free(dir);
	}
	return real;
}

/* Whether a plain mask's path (look_up) is what it resolves to: whether
 * no directory on the way to it is a symlink. */
static bool plain_is_real(struct dirs_seen *seen, const char *path)
{
	for (const char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/'))
		if (!dir_real(seen, path, (size_t)(slash - path)))
			return false;
	return true;
}

/* A mount of part of a secret directory elsewhere (its root strictly
 * inside the directory, on the same device) shows that part at its mount
 * point: masked there whole, unless that point is inside the directory
 * (real), which its own mask hides. */
static int add_inner_mount(struct plan *p, const struct mount_entry *e,
			   const struct mount_entry *home, const char *on_dev, const char *real,
			   dev_t dev, char *err, size_t errlen)
{
	const char *inside;
	struct stat st;

	if (e == home || e->major != home->major || e->minor != home->minor ||
	    !beneath(e->root, on_dev[0] ? on_dev : "/", &inside) || !inside[0] ||
	    beneath(e->point, real, &inside) || already_masked(p, e->point) ||
	    stat(e->point, &st) < 0 || st.st_dev != dev)
		return 0;
	return add_mask(p, e->point, err, errlen);
}

/* Every other place of one mask's file, through the mounts of its device. */
static int add_aliases_of(struct plan *p, size_t mask, const struct mount_entry *v, size_t n,
			  struct dirs_seen *seen, char *err, size_t errlen)
{
	char resolved[PATH_MAX], on_dev[2 * PATH_MAX], alias[3 * PATH_MAX];
	struct secret_mask m;
	const struct mount_entry *home;
	const char *rest, *real;
	int rc = 0;

	if (p->masks[mask].real && !plain_is_real(seen, p->masks[mask].path))
		p->masks[mask].real = false;
	m = p->masks[mask]; /* a copy: adding an alias may move p->masks */
	real = m.real ? m.path : resolved;
	if ((!m.real && !resolve(m.path, resolved)) || !(home = mount_of(v, n, real)) ||
	    !beneath(real, home->point, &rest))
		return 0;
	snprintf(on_dev, sizeof(on_dev), "%s%s", strcmp(home->root, "/") ? home->root : "", rest);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *below;

		if (&v[i] == home || v[i].major != home->major || v[i].minor != home->minor ||
		    !beneath(on_dev[0] ? on_dev : "/", v[i].root, &below))
			continue;
		snprintf(alias, sizeof(alias), "%s%s", strcmp(v[i].point, "/") ? v[i].point : "",
			 below[0] ? below : (strcmp(v[i].point, "/") ? "" : "/"));
		rc = add_alias(p, alias, m.dev, m.ino, err, errlen);
	}
	for (size_t i = 0; rc == 0 && m.dir && i < n; i++)
		rc = add_inner_mount(p, &v[i], home, on_dev, real, m.dev, err, errlen);
	return rc;
}

static int add_mount_aliases(struct plan *p, const struct mounts *m, const char *real_cwd,
			     char *err, size_t errlen)
{
	size_t found = some_device_twice(m->v, m->n) ? p->n_masks : 0;
	struct dirs_seen seen = { .real_cwd = real_cwd, .n = 0 };
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < found; i++)
		rc = add_aliases_of(p, i, m->v, m->n, &seen, err, errlen);
	for (size_t i = 0; i < seen.n; i++)
		free(seen.v[i].dir);
	/* Unasked, a plain path is not known to be real: say not. */
	for (size_t i = found; i < p->n_masks; i++)
		p->masks[i].real = false;
	return rc;
}

/* What a namespace of masks is made from, hashed (PROTOCOL.md, "masks"):
 * the mount table (already in key), our ids, and each mask with the file
 * it covers.  A kept namespace is joined only under the same key. */
static void finish_key(struct plan *p, struct sha256_ctx *key)
{
	uint64_t ids[2] = { geteuid(), getegid() };

	sha256_update(key, sizeof(ids), (const uint8_t *)ids);
	for (size_t i = 0; i < p->n_masks; i++) {
		const struct secret_mask *m = &p->masks[i];
		uint64_t file[3] = { m->dir, m->dev, m->ino };

		sha256_update(key, strlen(m->path) + 1, (const uint8_t *)m->path);
		sha256_update(key, sizeof(file), (const uint8_t *)file);
	}
	sha256_digest(key, sizeof(p->masks_key), p->masks_key);
	p->join_kept = p->kept_masks >= 0 &&
		       !memcmp(p->masks_key, p->job->masks_key, sizeof(p->masks_key));
}

/* The set's other places and its key, from one read of the mount table. */
static int finish_set(struct plan *p, const char *real_cwd, char *err, size_t errlen)
{
	struct sha256_ctx key;
	struct mounts m;
	int rc;

	if (!p->n_masks)
		return 0;
	sha256_init(&key);
	if (!read_mounts(p, &m, &key, err, errlen))
		return -EIO;
	rc = add_mount_aliases(p, &m, real_cwd, err, errlen);
	free_mounts(&m);
	if (rc == 0)
		finish_key(p, &key);
	return rc;
}

static bool is_engine(const struct plan *p)
{
	return p->profile == PROFILE_ENGINE;
}

/* Engine: the container mounts the working directory alone, so only its
 * own entries of the file names matter there. */
static int add_in_cwd(struct plan *p, struct pstr name, char *err, size_t errlen)
{
	if (name.ptr[0] == '/')
		return 0;
	if (name.ptr[name.len - 1] == '*')
		return add_matching(p, p->cwd, name.ptr, name.len, err, errlen);
	return add_joined(p, p->cwd, name.ptr, name.len, err, errlen);
}

int plan_secrets(struct plan *p, char *err, size_t errlen)
{
	const struct msg_job *job = p->job;
	char real_cwd[PATH_MAX] = "";
	int rc = 0;

	if (!job->has_secrets)
		return 0;
	if (job->warm)
		listings_start();
	if (!grow_masks(p)) {
		snprintf(err, errlen, "out of memory listing secrets");
		return -ENOMEM;
	}
	if (is_engine(p)) {
		for (size_t i = 0; rc == 0 && i < job->n_secrets; i++)
			rc = add_in_cwd(p, job->secrets[i], err, errlen);
		return rc;
	}
	/* A working directory that does not resolve fails at the cwd step;
	 * one whose real path is too long for realpath(3) has parents whose
	 * `.env` a snippet reaches through `..` and this could not name. */
	if (resolve_cwd(p->cwd, real_cwd) == ENAMETOOLONG) {
		snprintf(err, errlen, "the working directory's real path is %d bytes or more: the "
			 ".env files above it cannot be masked", PATH_MAX);
		return -ENAMETOOLONG;
	}
	for (size_t i = 0; rc == 0 && i < job->n_secrets; i++) {
		struct pstr s = job->secrets[i];
		char path[PATH_MAX];

		if (s.len >= sizeof(path))
			continue; /* no such path can be opened */
		if (s.ptr[0] == '/') {
			memcpy(path, s.ptr, s.len);
			path[s.len] = '\0';
			rc = add_mask(p, path, err, errlen);
		} else {
			rc = add_name(p, real_cwd, s, err, errlen);
		}
	}
	return rc ? rc : finish_set(p, real_cwd, err, errlen);
}

/* The empty mode-000 directory bound over secret directories in the
 * container, in the run's scratch.  A bind, not a tmpfs: the engines mount
 * tmpfs before the volumes, so the working directory's volume would cover
 * a tmpfs below it.  A warm container keeps the mount after the run's
 * scratch is removed: it stays an empty directory nobody may enter. */
#define CONTAINER_DIR_MASK "secret-mask"

static int make_dir_mask(const struct plan *p, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (!p->scratch[0]) {
		snprintf(err, errlen, "no scratch directory for the container's masks");
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/" CONTAINER_DIR_MASK, p->scratch) >= (int)sizeof(path)) {
		snprintf(err, errlen, "the scratch directory's name is too long for the masks");
		return -ENAMETOOLONG;
	}
	if (mkdir(path, 0) < 0 && errno != EEXIST) {
		int rc = -errno;

		snprintf(err, errlen, "cannot make %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* One engine argument masking m in the container, or NULL (ENOMEM).
 * docker and podman alike: /dev/null over a file (reads find it empty:
 * no mount of a file can refuse them), the empty mode-000 directory over
 * a directory. */
static char *container_mask(const struct plan *p, const struct secret_mask *m)
{
	char *s;
	int n = m->dir ? asprintf(&s, "--volume=%s/" CONTAINER_DIR_MASK ":%s:ro", p->scratch,
				  m->path)
		       : asprintf(&s, "--volume=/dev/null:%s:ro", m->path);

	return n < 0 ? NULL : s;
}

int secrets_engine_args(const struct plan *p, char ***argv, char *err, size_t errlen)
{
	size_t n = 0, at = SIZE_MAX, k = 0;
	char **v = *argv, **out;

	for (; v && v[n]; n++)
		if (!strcmp(v[n], PROTO_SECRET_MASKS_ARG))
			at = n;
	if (at == SIZE_MAX)
		return 0;
	for (size_t i = 0; i < p->n_masks; i++) {
		/* The engine's volume syntax splits on ':' and ','. */
		if (strpbrk(p->masks[i].path, ":,")) {
			snprintf(err, errlen, "cannot mask %s in the container: its name has "
					      "':' or ','", p->masks[i].path);
			return -EINVAL;
		}
		if (p->masks[i].dir) {
			int rc = make_dir_mask(p, err, errlen);

			if (rc < 0)
				return rc;
		}
	}
	out = calloc(n + p->n_masks + 1, sizeof(*out));
	if (!out)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		if (i != at) {
			out[k++] = v[i];
			continue;
		}
		for (size_t m = 0; m < p->n_masks; m++)
			if (!(out[k++] = container_mask(p, &p->masks[m])))
				goto nomem_out;
		free(v[i]);
	}
	free(v);
	*argv = out;
	return 0;
nomem_out:
	/* v still owns its strings; out owns only the masks made so far. */
	for (size_t i = at; i < k; i++)
		free(out[i]);
	free(out);
nomem:
	snprintf(err, errlen, "out of memory building the container's secret masks");
	return -ENOMEM;
}

void plan_free_secrets(struct plan *p)
{
	for (size_t i = 0; i < p->n_masks; i++)
		free(p->masks[i].path);
	free(p->masks);
	p->masks = NULL;
	p->n_masks = 0;
}

/* ---- C: the namespace and the masks ------------------------------------ */

/* The failing call and its path, for die_step; static, as nothing may be
 * allocated in C. */
static char what_buf[PATH_MAX + 64];

static const char *say(const char *call, const char *path)
{
	snprintf(what_buf, sizeof(what_buf), "%s %s", call, path);
	return what_buf;
}

static int write_file(const char *path, const char *text)
{
	size_t n = strlen(text);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		rc = -errno;
	close(fd);
	return rc;
}

/* Our own uid and gid, and nothing else: all an unprivileged process may
 * map.  Files of other owners then show as the overflow ids (65534).
 * Read before the unshare: until the map is written, getuid() in the new
 * namespace answers the overflow id. */
static int map_ids(uid_t uid, gid_t gid, const char **what)
{
	char line[64];
	int rc;

	*what = "writing /proc/self/setgroups";
	if ((rc = write_file("/proc/self/setgroups", "deny")) < 0)
		return rc;
	*what = "writing /proc/self/uid_map";
	snprintf(line, sizeof(line), "%u %u 1", (unsigned)uid, (unsigned)uid);
	if ((rc = write_file("/proc/self/uid_map", line)) < 0)
		return rc;
	*what = "writing /proc/self/gid_map";
	snprintf(line, sizeof(line), "%u %u 1", (unsigned)gid, (unsigned)gid);
	return write_file("/proc/self/gid_map", line);
}

/* What a failed unshare says; private_shm() tells it from later failures. */
static const char unshare_what[] =
	"unshare(CLONE_NEWUSER | CLONE_NEWNS) (user namespaces are needed to mask "
	"secrets; or set [sandbox] secrets = off)";

/* The map files of a non-dumpable process (S made itself one, and C
 * inherits it) belong to root: C is dumpable only while it writes them.
 * Before the unshare, C's capabilities keep the user's other processes
 * from attaching in that moment; after it, it holds nothing they do not
 * own, and its fds are only the code, the output pipes and the report
 * channel. */
static int unshare_as_self(int flags, const char *unshare_says, const char **what)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int rc;

	*what = "prctl(PR_SET_DUMPABLE, 1)";
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return -errno;
	*what = unshare_says;
	if (unshare(flags) < 0)
		rc = -errno;
	else
		rc = map_ids(uid, gid, what);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 && rc == 0) {
		*what = "prctl(PR_SET_DUMPABLE, 0)";
		rc = -errno;
	}
	return rc;
}

static int enter_namespaces(const char **what)
{
	return unshare_as_self(CLONE_NEWUSER | CLONE_NEWNS, unshare_what, what);
}

int own_user_namespace(const char **what)
{
	return unshare_as_self(CLONE_NEWUSER,
			       "unshare(CLONE_NEWUSER) (with [egress] approved = proxy a run "
			       "a person approved has a network namespace of its own, which "
			       "needs user namespaces)",
			       what);
}

static char mask_dir[PATH_MAX + 4], mask_file[PATH_MAX + 4];
static int src_fd[2] = { -1, -1 };

/* The binds name the sources by fd (/proc/self/fd/N), never by path: a
 * path through the directory carrying them would stop resolving once a
 * mask covers a directory above it, and the binds after that would find
 * no source. */
static int hold_sources(const char **what)
{
	*what = say("open", mask_dir);
	src_fd[0] = open(mask_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (src_fd[0] < 0)
		return -errno;
	*what = say("open", mask_file);
	src_fd[1] = open(mask_file, O_PATH | O_CLOEXEC);
	if (src_fd[1] < 0)
		return -errno;
	snprintf(mask_dir, sizeof(mask_dir), "/proc/self/fd/%d", src_fd[0]);
	snprintf(mask_file, sizeof(mask_file), "/proc/self/fd/%d", src_fd[1]);
	return 0;
}

static void release_sources(void)
{
	for (int i = 0; i < 2; i++)
		if (src_fd[i] >= 0)
			close(src_fd[i]);
	src_fd[0] = src_fd[1] = -1;
}

/* Step 3 above: the tmpfs of the two sources, on `at`.  Its root is mode
 * 000 too: C passes it with CAP_DAC_OVERRIDE of its own namespace, the
 * snippet cannot. */
static int make_sources(const char *at, const char **what)
{
	const unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	int fd;

	*what = say("mount the masks' tmpfs on", at);
	if (mount("kotoba-mask", at, "tmpfs", fl, "mode=0000,size=4k,nr_inodes=4") < 0)
		return -errno;
	snprintf(mask_dir, sizeof(mask_dir), "%s/d", at);
	snprintf(mask_file, sizeof(mask_file), "%s/f", at);
	*what = say("mkdir", mask_dir);
	if (mkdir(mask_dir, 0) < 0)
		return -errno;
	*what = say("creat", mask_file);
	fd = open(mask_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	close(fd);
	*what = say("remount read-only", at);
	if (mount(NULL, at, NULL, MS_REMOUNT | MS_RDONLY | fl, NULL) < 0)
		return -errno;
	return hold_sources(what);
}

/* The first secret directory that still resolves carries the sources
 * (and is masked by them); returns its index, or n_masks when the set
 * has none and they went on the scratch directory. */
static int place_sources(const struct plan *p, size_t *host, const char **what)
{
	int rc;

	for (size_t i = 0; i < p->n_masks; i++) {
		if (!p->masks[i].dir)
			continue;
		rc = make_sources(p->masks[i].path, what);
		if (rc == -ENOENT || rc == -EACCES) {
			release_sources();
			continue; /* gone since S looked: nothing to mask there */
		}
		*host = i;
		return rc;
	}
	*host = p->n_masks;
	return make_sources(p->scratch, what);
}

/* Step 4.  A secret that no longer resolves (gone since S looked, or
 * inside a directory masked just before) has nothing left to read. */
static int mask_one(const struct secret_mask *m, const char **what)
{
	if (mount(m->dir ? mask_dir : mask_file, m->path, NULL, MS_BIND, NULL) == 0)
		return 0;
	if (errno == ENOENT || errno == EACCES)
		return 0;
	*what = say(m->dir ? "mount the empty directory over" : "mount the empty file over",
		    m->path);
	return -errno;
}

/* Every mask, over what it masks now.  The sources are made (and held
 * by fd) on the first secret directory, or on the scratch directory and
 * unmounted from there after. */
static int make_masks(const struct plan *p, const char **what)
{
	size_t host;
	int rc;

	*what = "making every mount private (MS_REC | MS_PRIVATE on /)";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	rc = place_sources(p, &host, what);
	for (size_t i = 0; rc == 0 && i < p->n_masks; i++)
		if (i != host)
			rc = mask_one(&p->masks[i], what);
	release_sources();
	if (rc < 0)
		return rc;
	*what = say("umount", p->scratch);
	if (host == p->n_masks && umount2(p->scratch, MNT_DETACH) < 0)
		return -errno;
	return 0;
}

/* The kept namespaces: the user namespace that owns the mount namespace
 * (C, its owner's uid in the parent namespace, gets every capability
 * there, as after unshare), then the mount namespace itself.  Returns
 * MASKS_JOINED, or where it stopped: MASKS_NONE (still in our own
 * namespaces) or MASKS_PATCHED (in the kept user namespace only). */
static enum masks_made join_kept(int kept)
{
	int user = ioctl(kept, NS_GET_USERNS);
	bool in_user;

	if (user < 0)
		return MASKS_NONE;
	in_user = setns(user, CLONE_NEWUSER) == 0;
	close(user);
	if (!in_user)
		return MASKS_NONE;
	return setns(kept, CLONE_NEWNS) == 0 ? MASKS_JOINED : MASKS_PATCHED;
}

/* Read back, in the kept namespace: each path of this run's set resolves
 * to a mask (mode 000, not the file it covers) or to nothing.  The key
 * says the set and the mount table are unchanged, not that each mount is
 * still over the same name: a secret unlinked and linked back is the same
 * file under a new name, and the user's own processes may unmount. */
static bool masks_hold_below(const struct plan *p, const char *root)
{
	char path[PATH_MAX + 32];
	struct stat st;

	for (size_t i = 0; i < p->n_masks; i++) {
		const struct secret_mask *m = &p->masks[i];
		int n = snprintf(path, sizeof(path), "%s%s", root, m->path);

		if (n < 0 || (size_t)n >= sizeof(path))
			return false;
		if (stat(path, &st) < 0) {
			if (nothing_there(errno))
				continue;
			return false;
		}
		if ((st.st_mode & 07777) || (st.st_dev == m->dev && st.st_ino == m->ino))
			return false;
	}
	return true;
}

static bool masks_hold(const struct plan *p)
{
	return masks_hold_below(p, "");
}

bool masks_hold_in(const struct plan *p, pid_t pid)
{
	char root[32];

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	return masks_hold_below(p, root);
}

/* The tmpfs is as large as the run's address-space limit (its pages are
 * charged to the run's cgroup as it writes them, so memory.max binds
 * first where it is lower); no exec, no devices, no setuid from it; mode
 * 0700 and owned by the snippet's user, the one uid the namespace maps. */
#define SHM_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* Scratch as a mount of its own in the run's namespace: a bind of the
 * directory onto itself, nosuid and nodev.  Its mount is how S knows a
 * file is in scratch when the snippet asks for a mode or a time
 * (fileattr.c): a descriptor reached through it names this mount, and
 * nothing outside scratch can be reached through it (no mount and no
 * link or rename across its edge is allowed to the snippet).  nosuid: a
 * setuid bit there would give nothing even if one were set. */
static int own_scratch_mount(const struct plan *p, const char **what)
{
	/* A remount must keep the flags the host's mount had: in a user
	 * namespace they are locked (EPERM).  statfs's f_flags use the
	 * MS_ values. */
	const unsigned long keep = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME |
				   MS_NODIRATIME | MS_RELATIME;
	struct statfs sf;

	*what = say("bind-mount the scratch directory onto itself:", p->scratch);
	if (mount(p->scratch, p->scratch, NULL, MS_BIND, NULL) < 0)
		return -errno;
	*what = say("statfs", p->scratch);
	if (statfs(p->scratch, &sf) < 0)
		return -errno;
	if (!(sf.f_flags & ST_VALID))
		return -EOPNOTSUPP;
	*what = say("make the scratch directory's mount nosuid,nodev:", p->scratch);
	if (mount(NULL, p->scratch, NULL,
		  MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | ((unsigned long)sf.f_flags & keep),
		  NULL) < 0)
		return -errno;
	return 0;
}

int private_shm(const struct plan *p, enum masks_made made, const char **what)
{
	char opts[64] = "mode=0700";
	uint64_t size = p->job->lim.as_bytes;
	int rc;

	*what = "";
	if (p->profile != PROFILE_UNATTENDED)
		return 0;
	if (made == MASKS_NONE) {
		/* Without user namespaces (a sysctl, a container) there is
		 * nothing to mount in: /dev/shm stays the host's, which
		 * Landlock and seccomp keep read-only as every other place. */
		rc = enter_namespaces(what);
		if (rc < 0 && *what == unshare_what &&
		    (rc == -EPERM || rc == -EINVAL || rc == -ENOSPC || rc == -EUSERS))
			return 0;
		if (rc < 0)
			return rc;
		*what = "making every mount private (MS_REC | MS_PRIVATE on /)";
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return -errno;
	} else {
		/* Not in the masks' namespace: S keeps that one for the
		 * user's next runs, and none of them may see this tmpfs. */
		*what = "unshare(CLONE_NEWNS) for the run's own " SHM_DIR;
		if (unshare(CLONE_NEWNS) < 0)
			return -errno;
	}
	rc = own_scratch_mount(p, what);
	if (rc < 0)
		return rc;
	/* No RLIMIT_AS: tmpfs's default, half the RAM; the cgroup binds. */
	if (size)
		snprintf(opts, sizeof(opts), "mode=0700,size=%llu", (unsigned long long)size);
	*what = "mount a tmpfs on " SHM_DIR;
	if (mount("kotoba-shm", SHM_DIR, "tmpfs", SHM_FLAGS, opts) == 0)
		return OWN_SCRATCH | OWN_SHM;
	/* A system without /dev/shm: the run goes on without one, as
	 * python3 bare would there. */
	return errno == ENOENT || errno == ENOTDIR ? OWN_SCRATCH : -errno;
}

int mask_secrets(const struct plan *p, int kept, const char **what)
{
	enum masks_made made;
	int rc;

	*what = "";
	/* Engine commands run on the host with no snippet code in them;
	 * their masks are the container's. */
	if (p->n_masks == 0 || is_engine(p))
		return MASKS_NONE;
	/* A kept namespace that cannot be joined (its owner is not ours: a
	 * reload changed root_user) or whose masks do not all read back is
	 * not used; the masks are made anew, in a copy where it was joined. */
	made = kept >= 0 ? join_kept(kept) : MASKS_NONE;
	if (made == MASKS_JOINED && masks_hold(p))
		return MASKS_JOINED;
	if (made == MASKS_JOINED) {
		*what = "unshare(CLONE_NEWNS) over the kept masks";
		if (unshare(CLONE_NEWNS) < 0)
			return -errno;
		made = MASKS_PATCHED;
	} else if ((rc = enter_namespaces(what)) < 0) {
		return rc;
	}
	rc = make_masks(p, what);
	return rc < 0 ? rc : made == MASKS_PATCHED ? MASKS_PATCHED : MASKS_NEW;
}
