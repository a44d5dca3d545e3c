// link: worker/rmtree.c
/* SPDX-License-Identifier: MIT
 * Removing a scratch tree on the real file system: deeper than PATH_MAX,
 * with directories whose modes refuse their owner, symlinks pointing out
 * (their targets stay), another file system mounted inside (never
 * entered), and a descriptor limit far below the depth.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/child.h"
#include "worker/rmtree.h"

static void run_in_child(void (*body)(void))
{
	run_in_child_after(NULL, body);
}

#define DEPTH 40 /* 40 names of 250 bytes: 10 KiB of path, past PATH_MAX */

static void check(bool ok, const char *what)
{
	if (!ok)
		child_fail("%s: %s", what, strerror(errno));
}

static void write_file(int dfd, const char *name, size_t size)
{
	static char block[65536];
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	check(fd >= 0, name);
	for (size_t done = 0; done < size; done += sizeof(block))
		check(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block), "write");
	close(fd);
}

/* A directory `name` in dfd holding one file, then given `mode`. */
static void locked_dir(int dfd, const char *name, mode_t mode)
{
	int fd;

	check(mkdirat(dfd, name, 0700) == 0, name);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(fd >= 0, name);
	write_file(fd, "inside", 10);
	check(fchmod(fd, mode) == 0, "fchmod");
	close(fd);
}

/* Snippets run as an ordinary user, for whom modes bind: so do we. */
static void become_nobody(void)
{
	if (geteuid() == 0)
		check(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0,
		      "becoming nobody");
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The victim outside the tree: a file and a directory with a file, which
 * links in the tree point at, and which the walk's user could delete. */
static void make_outside(char *dir, size_t len)
{
	char p[PATH_MAX];

	snprintf(dir, len, "/tmp/kotoba-rmtree-outside-XXXXXX");
	check(mkdtemp(dir) != NULL, "mkdtemp outside");
	snprintf(p, sizeof(p), "%s/keep", dir);
	write_file(AT_FDCWD, p, 0);
	snprintf(p, sizeof(p), "%s/sub", dir);
	check(mkdir(p, 0700) == 0, "mkdir outside/sub");
	snprintf(p, sizeof(p), "%s/sub/keep", dir);
	write_file(AT_FDCWD, p, 0);
}

static void outside_intact(const char *dir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/keep", dir);
	if (!exists(p))
		child_fail("%s went through a symlink", p);
	snprintf(p, sizeof(p), "%s/sub/keep", dir);
	if (!exists(p))
		child_fail("%s went through a symlink", p);
}

/* The hostile tree: each level a 250-byte name, a file, and at the
 * bottom links out, a MiB, and directories no one may enter or write. */
static void make_deep_tree(const char *top, const char *outside)
{
	char name[251], target[PATH_MAX];
	int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC), next;

	memset(name, 'd', 250);
	name[250] = '\0';
	check(fd >= 0, top);
	check(symlinkat("..", fd, "up") == 0, "symlink up");
	for (int i = 0; i < DEPTH; i++) {
		write_file(fd, "f", 0);
		if (i == DEPTH / 2) {
			locked_dir(fd, "no-entry", 0);
			locked_dir(fd, "read-only", 0500);
		}
		check(mkdirat(fd, name, 0700) == 0, "mkdirat");
		next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		check(next >= 0, "openat");
		close(fd);
		fd = next;
	}
	write_file(fd, "mib", 1 << 20);
	check(symlinkat(outside, fd, "out-dir") == 0, "symlink out-dir");
	snprintf(target, sizeof(target), "%s/keep", outside);
	check(symlinkat(target, fd, "out-file") == 0, "symlink out-file");
	check(mkdirat(fd, "empty-no-entry", 0) == 0, "mkdirat mode 0");
	close(fd);
}

static void deep_tree_goes(void)
{
	struct rlimit few = { 12, 12 };
	char top[] = "/tmp/kotoba-rmtree-XXXXXX", outside[64], err[PATH_MAX + 256] = "";
	int rc;

	become_nobody();
	make_outside(outside, sizeof(outside));
	check(mkdtemp(top) != NULL, "mkdtemp");
	make_deep_tree(top, outside);
	/* Far fewer descriptors than levels. */
	check(setrlimit(RLIMIT_NOFILE, &few) == 0, "RLIMIT_NOFILE");
	rc = remove_tree(top, err, sizeof(err));
	if (rc != 0)
		child_fail("remove_tree: %d: %s", rc, err);
	if (exists(top))
		child_fail("%s is still there", top);
	outside_intact(outside);
	snprintf(err, sizeof(err), "%s/sub/keep", outside);
	unlink(err);
	snprintf(err, sizeof(err), "%s/sub", outside);
	rmdir(err);
	snprintf(err, sizeof(err), "%s/keep", outside);
	unlink(err);
	rmdir(outside);
}

static void test_deep_hostile_tree_is_removed(void **state)
{
	(void)state;
	run_in_child(deep_tree_goes);
}

/* A file system mounted inside the tree is never entered, and the error
 * names the directory that stayed. */
static void mount_inside_stays(void)
{
	char top[] = "/tmp/kotoba-rmtree-XXXXXX", p[PATH_MAX], err[PATH_MAX + 256] = "";
	int rc;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "# SKIP part: no private mount namespace here (%s), the mount "
				"case is not run\n", strerror(errno));
		return;
	}
	check(mkdtemp(top) != NULL, "mkdtemp");
	snprintf(p, sizeof(p), "%s/a", top);
	check(mkdir(p, 0700) == 0, "mkdir a");
	snprintf(p, sizeof(p), "%s/a/mnt", top);
	check(mkdir(p, 0700) == 0, "mkdir mnt");
	check(mount("tmpfs", p, "tmpfs", 0, "size=1m") == 0, "mount tmpfs");
	snprintf(p, sizeof(p), "%s/a/mnt/keep", top);
	write_file(AT_FDCWD, p, 0);
	rc = remove_tree(top, err, sizeof(err));
	if (rc >= 0)
		child_fail("remove_tree went through a mount point");
	if (!strstr(err, top) || !strstr(err, "mnt"))
		child_fail("the error does not name the directory and what stayed: %s", err);
	if (!exists(p))
		child_fail("%s, on another file system, was removed", p);
	snprintf(p, sizeof(p), "%s/a/mnt", top);
	check(umount(p) == 0, "umount");
	rc = remove_tree(top, err, sizeof(err));
	if (rc != 0 || exists(top))
		child_fail("after the unmount: %d: %s", rc, err);
}

static void test_other_file_systems_are_never_entered(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "# SKIP: mounting needs root\n");
		return;
	}
	run_in_child(mount_inside_stays);
}

static void missing_is_an_error(void)
{
	char err[256] = "";

	if (remove_tree("/tmp/kotoba-rmtree-never-made", err, sizeof(err)) != -ENOENT)
		child_fail("a missing tree: want -ENOENT");
	if (!strstr(err, "/tmp/kotoba-rmtree-never-made"))
		child_fail("the error does not name the directory: %s", err);
}

static void test_missing_tree_is_named(void **state)
{
	(void)state;
	run_in_child(missing_is_an_error);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deep_hostile_tree_is_removed),
		cmocka_unit_test(test_other_file_systems_are_never_entered),
		cmocka_unit_test(test_missing_tree_is_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
