// link: broker/confine.c broker/privsep.c broker/config.c broker/log.c proto/names.c broker/egress/policy.c
/* SPDX-License-Identifier: MIT
 * broker/confine.c: the system broker's own confinement, exactly as
 * production calls it after its drop to the service user with nothing kept
 * (privsep_drop(0), then confine_broker()).  Each forbidden act runs in a
 * child of its own that becomes the broker, so that its death can be read
 * (the broker may not fork once confined): the filter's answer is
 * SIGSYS, told apart from the kernel's own refusal (an errno) and checked
 * against a control run of the same act without the filter.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/confine.h"
#include "broker/privsep.h"
#include "tests/unit/child.h"

static char base[64]; /* a directory of the service user's (make_dirs) */

/* Each act: 0 when the call went through, else its errno. */
static int act_setuid(void) { return setresuid(0, 0, 0) < 0 ? errno : 0; }
static int act_setgroups(void) { return setgroups(0, NULL) < 0 ? errno : 0; }
static int act_execve(void)
{
	char *const argv[] = { (char *)"true", NULL }, *const envp[] = { NULL };

	execve("/bin/true", argv, envp);
	return errno;
}
static int act_ptrace(void) { return ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0 ? errno : 0; }
static int act_inet_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	return fd < 0 ? errno : (close(fd), 0);
}
static int act_bind(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	return bind(fd, (struct sockaddr *)&a, sizeof(sa_family_t)) < 0 ? errno : 0;
}
static int act_unshare(void) { return unshare(CLONE_NEWUSER) < 0 ? errno : 0; }
static int act_mount(void) { return mount("none", "/", NULL, MS_REMOUNT, NULL) < 0 ? errno : 0; }
static int act_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	return pid < 0 ? errno : (waitpid(pid, NULL, 0), 0);
}

static int act_chmod(void) { return chmod(base, 0755) < 0 ? errno : 0; }
static int act_utimensat(void) { return utimensat(AT_FDCWD, base, NULL, 0) < 0 ? errno : 0; }
static int act_prlimit_other(void)
{
	struct rlimit rl;

	return prlimit(getppid(), RLIMIT_NOFILE, NULL, &rl) < 0 ? errno : 0;
}

struct act {
	const char *name;
	int (*fn)(void);
	/* LeakSanitizer stops the world at exit with a ptrace'ing clone:
	 * a sanitizer build's filter lets fork and ptrace through. */
	bool sanitizer_needs;
};

static const struct act forbidden[] = {
	{ "setresuid(0)", act_setuid, false }, { "setgroups", act_setgroups, false },
	{ "execve", act_execve, false },       { "ptrace", act_ptrace, true },
	{ "socket(AF_INET)", act_inet_socket, false }, { "bind", act_bind, false },
	{ "unshare(CLONE_NEWUSER)", act_unshare, false }, { "mount", act_mount, false },
	{ "fork", act_fork, true }, { "chmod", act_chmod, false },
	{ "utimensat", act_utimensat, false }, { "prlimit of another process", act_prlimit_other, false },
};

#ifdef __SANITIZE_ADDRESS__
#define SANITIZED true
#else
#define SANITIZED false
#endif

/* A directory of the service user's with `store` (the broker may write
 * there) and `outside` (it may not) in it. */
static void make_dirs(void)
{
	struct passwd *pw = getpwnam("kotoba");
	char path[128];

	snprintf(base, sizeof(base), "/tmp/kotoba-confine-XXXXXX");
	if (!mkdtemp(base) || chmod(base, 0755) < 0)
		fail_msg("mkdtemp: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", base, i ? "outside" : "store");
		if (mkdir(path, 0700) < 0 || chown(path, pw->pw_uid, pw->pw_gid) < 0)
			fail_msg("mkdir %s: %s", path, strerror(errno));
	}
}

static void remove_dirs(void)
{
	char path[128];

	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", base, i ? "outside" : "store");
		rmdir(path);
	}
	rmdir(base);
}

/* The act in a child of a broker made from root as production makes it,
 * in directories made for it here. */
static void in_broker_child(void (*body)(void))
{
	need_root_and_service_user("the broker's drop");
	make_dirs();
	run_in_child_after(NULL, body);
	remove_dirs();
}

static unsigned landlock_abi;

static void become_broker(bool confined)
{
	struct confine_dir d = { -1, false };
	struct config c;
	char err[600] = "", path[128];

	config_defaults(&c);
	if (privsep_resolve(&c, err, sizeof(err)) < 0)
		child_fail("privsep_resolve: %s", err);
	snprintf(path, sizeof(path), "%s/store", base);
	d.fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (privsep_drop(0, err, sizeof(err)) < 0)
		child_fail("privsep_drop(0): %s", err);
	if (confined && confine_broker(&d, 1, &landlock_abi, err, sizeof(err)) < 0)
		child_fail("confine_broker: %s", err);
}

/* 0 when a file can be made in base/sub, else the errno. */
static int make_file_in(const char *sub)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/%s/f", base, sub);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	close(fd);
	unlink(path);
	return 0;
}

/* Runs the act in a new child that becomes the broker (confined or not):
 * its signal, or 0 with *err the act's errno. */
static int try_act(const struct act *a, bool confined, int *err)
{
	int p[2], status;
	pid_t pid;

	if (pipe(p) < 0)
		child_fail("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		int e;

		become_broker(confined);
		e = a->fn();
		(void)!write(p[1], &e, sizeof(e));
		_exit(0);
	}
	close(p[1]);
	*err = -1;
	(void)!read(p[0], err, sizeof(*err));
	close(p[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		child_fail("%s: fork or wait failed", a->name);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void each_forbidden_act_kills(void)
{
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++) {
		int err, sig;

		if (SANITIZED && forbidden[i].sanitizer_needs)
			continue;
		sig = try_act(&forbidden[i], true, &err);
		if (sig != SIGSYS)
			child_fail("%s under the filter: signal %d, errno %d; wanted SIGSYS",
				   forbidden[i].name, sig, err);
	}
}

/* The control: without the filter, no act dies of SIGSYS; the kernel
 * refuses some of them on its own (no capability), with an errno. */
static void control_without_filter(void)
{
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++) {
		int err, sig = try_act(&forbidden[i], false, &err);

		if (sig == SIGSYS)
			child_fail("control: %s died of SIGSYS without the filter", forbidden[i].name);
	}
	become_broker(false);
	if (make_file_in("outside") != 0)
		child_fail("control: the service user cannot make a file in its own directory");
}

/* What the broker needs still works: a Unix socket (sd_notify, the user
 * database), connect() on it, a file of its own. */
static void *thread_body(void *arg)
{
	return arg;
}

static void what_it_needs_still_works(void)
{
	pthread_t t;
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "/nonexistent/kotoba" };
	int fd;

	become_broker(true);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		child_fail("socket(AF_UNIX): %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno != ENOENT)
		child_fail("connect(AF_UNIX) to a missing path: not ENOENT");
	close(fd);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		child_fail("open /dev/null: %s", strerror(errno));
	close(fd);
	/* fchmod of a file it made (SQLite does so beside its database), and
	 * its own limits. */
	{
		char path[160];
		struct rlimit rl;

		snprintf(path, sizeof(path), "%s/store/m", base);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || fchmod(fd, 0644) < 0)
			child_fail("fchmod of its own file: %s", strerror(errno));
		close(fd);
		unlink(path);
		if (prlimit(0, RLIMIT_NOFILE, NULL, &rl) < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
			child_fail("its own limits cannot be read");
	}
	if (make_file_in("store") != 0)
		child_fail("a file in the directory it may write: %s", strerror(make_file_in("store")));
	/* Landlock's refusal (EACCES) where the kernel's own rights allow it
	 * (the control below makes the same file). */
	if (landlock_abi && make_file_in("outside") != EACCES)
		child_fail("a file outside its directories under Landlock ABI %u: not EACCES",
			   landlock_abi);
	if (getpwuid(0) == NULL)
		child_fail("the user database cannot be read");
	/* A thread (clone3 answers ENOSYS, libc falls back to clone with
	 * CLONE_THREAD), where a process is refused. */
	if (pthread_create(&t, NULL, thread_body, NULL) != 0 || pthread_join(t, NULL) != 0)
		child_fail("a thread cannot be made");
	/* No capability: the kernel's own refusal of another user's file. */
	fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		child_fail("/etc/shadow: wanted EACCES from the kernel");
	/* ... and of a signal to another user's process (pid 1, root's). */
	if (kill(1, 0) == 0 || errno != EPERM)
		child_fail("kill(1, 0): wanted EPERM from the kernel");
}

static void test_forbidden_acts_kill(void **state)
{
	(void)state;
	in_broker_child(each_forbidden_act_kills);
}

static void test_control_without_filter(void **state)
{
	(void)state;
	in_broker_child(control_without_filter);
}

static void test_what_it_needs_still_works(void **state)
{
	(void)state;
	in_broker_child(what_it_needs_still_works);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forbidden_acts_kill),
		cmocka_unit_test(test_control_without_filter),
		cmocka_unit_test(test_what_it_needs_still_works),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
