// link: worker/seccomp.c worker/seccomp_load.c worker/seccomp_programs.c worker/execgate.c worker/fileattr.c worker/receipt.c worker/landlock.c proto/names.c proto/check.c proto/receipt.c
/* SPDX-License-Identifier: MIT
 * The seccomp filters against the real kernel, in the manner of
 * systemd's test-seccomp and bubblewrap's try-syscall: in a forked child,
 * see a call behave normally, load the filter (after NO_NEW_PRIVS, as the
 * worker does), then see it fail with the errno only the filter returns.
 * EPERM means "denied on purpose", ENOSYS "not in any group", and nothing
 * may kill the process.  The child reports the first surprise through a
 * pipe, so the failure names the call.
 *
 * The unattended filter is built "as if" a given Landlock ABI held the
 * path rules (no Landlock is applied here): what is checked is the
 * filter's own share of each rule at each ABI.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "worker/landlock.h"
#include "worker/seccomp.h"
#include "worker/worker.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

#include "tests/unit/child.h"

/* rc must be -1 with errno `want`. */
#define EXPECT_ERRNO(want, call)                                                           \
	do {                                                                               \
		long rc_;                                                                  \
		errno = 0;                                                                 \
		rc_ = (long)(call);                                                        \
		if (rc_ != -1 || errno != (want))                                          \
			child_fail("%s: rc %ld errno %d (%s), want errno %d (%s)", #call, rc_, \
				   errno, strerror(errno), (want), strerror(want));        \
	} while (0)

#define EXPECT_OK(call)                                                                    \
	do {                                                                               \
		long rc_;                                                                  \
		errno = 0;                                                                 \
		rc_ = (long)(call);                                                        \
		if (rc_ < 0)                                                               \
			child_fail("%s: rc %ld errno %d (%s), want success", #call, rc_,   \
				   errno, strerror(errno));                                \
	} while (0)

/* Loads a profile's filter, as if Landlock ABI `abi` held the path rules;
 * returns the exec gate's listener when asked for one.  The program is the
 * worker's: the one generated at build time, with our pid patched in
 * (test_prebuilt_programs_are_the_policy checks it is seccomp_build()'s). */
static int load_profile(const char *profile, unsigned int abi, bool listener)
{
	struct seccomp_opts o = { profile, abi, getpid() };
	struct sock_fprog prog;
	char err[256];
	int rc;

	rc = seccomp_program_for(&o, &prog, err, sizeof(err));
	if (rc < 0)
		child_fail("seccomp_program_for(%s, ABI %u): %s", profile, abi, err);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	rc = seccomp_load_prog(&prog, listener);
	if (rc < 0)
		child_fail("loading the filter: %s", strerror(-rc));
	return rc;
}

/* The supervisor's write witness (worker/fileattr.c) for a test process
 * under the unattended filter: a thread made before the filter (so not
 * under it) answers the opens for writing as S does, Landlock at `abi`
 * deciding, and every other notification (exec, chmod, utime) ENOSYS, as
 * the kernel does with no listener. */
struct witness_thread {
	int pipe[2];
	unsigned int abi;
};

static void *serve_witness(void *arg)
{
	struct witness_thread *w = arg;
	struct exec_gate g = { .fd = -1 };
	int fd;

	if (read(w->pipe[0], &fd, sizeof(fd)) != (ssize_t)sizeof(fd) ||
	    exec_gate_open(&g, fd, getpid(), NULL) < 0)
		return NULL;
	g.landlock_abi = w->abi;
	for (;;) {
		struct seccomp_notif *req = g.req;
		struct seccomp_notif_resp *resp = g.resp;

		memset(req, 0, g.req_len);
		memset(resp, 0, g.resp_len);
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			return NULL;
		}
		if (!write_witness_answer(&g, req, resp)) {
			resp->id = req->id;
			resp->error = -ENOSYS;
		}
		(void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
}

static void load_unattended(unsigned int abi)
{
	static struct witness_thread w;
	pthread_t t;
	int fd;

	w.abi = abi;
	if (pipe(w.pipe) < 0 || pthread_create(&t, NULL, serve_witness, &w) != 0)
		child_fail("the write witness's thread: %s", strerror(errno));
	fd = load_profile("unattended", abi, true);
	if (write(w.pipe[1], &fd, sizeof(fd)) != (ssize_t)sizeof(fd))
		child_fail("handing the listener over: %s", strerror(errno));
}

static void load_baseline(const char *profile)
{
	load_profile(profile, 0, false);
}

/* The filter must never kill: a signal fails the test. */
static void run_in_child(void (*body)(void))
{
	run_in_child_after(NULL, body);
}

static int landlock_abi(void)
{
	return (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
			    LANDLOCK_CREATE_RULESET_VERSION);
}

/* A call the filter refuses, with arguments that make the kernel's own
 * answer anything but EPERM: a missing path, a bad pointer, an unknown
 * flag, a pid nobody has, each checked before the capability the call
 * needs (or the call is not built into this kernel: ENOSYS).  The control
 * runs each one first without the filter; an EPERM afterwards is then the
 * filter's, and the check fails if the rule let the call through.  The
 * arguments also keep the unfiltered call harmless as root: nothing is
 * mounted, attached, created or loaded. */
struct denial {
	const char *what;
	long nr;
	uintptr_t a[6];
};

#define BAD_PTR ((uintptr_t)1)
#define NO_PID ((uintptr_t)0x7fffffff)

static long call_denial(const struct denial *d)
{
	return syscall(d->nr, d->a[0], d->a[1], d->a[2], d->a[3], d->a[4], d->a[5]);
}

/* Without the filter: false (and a note) when the kernel itself answers
 * EPERM, as it does for some calls to a process without capabilities;
 * then that call proves nothing here. */
static bool kernel_answer_differs(const struct denial *d)
{
	long rc;

	errno = 0;
	rc = call_denial(d);
	if (rc == -1 && errno == EPERM) {
		fprintf(stderr, "# SKIP %s: the kernel itself answers EPERM here (no "
				"capability?), so the filter's answer cannot be told apart\n",
			d->what);
		return false;
	}
	return true;
}

static void denied_with_eperm(void)
{
	const struct denial d[] = {
		{ "ptrace(PTRACE_ATTACH, no such pid)", SYS_ptrace, { PTRACE_ATTACH, NO_PID } },
		{ "process_vm_readv(bad iovecs)", SYS_process_vm_readv,
		  { NO_PID, BAD_PTR, 1, BAD_PTR, 1, 0 } },
		{ "mount(on a missing directory)", SYS_mount,
		  { (uintptr_t)"none", (uintptr_t)"/nonexistent-kotoba", (uintptr_t)"tmpfs" } },
		{ "umount2(an unknown flag)", SYS_umount2, { (uintptr_t)"/", 0x100 } },
		{ "fsopen(unknown flags)", SYS_fsopen, { (uintptr_t)"tmpfs", 0xff00 } },
		{ "chroot(a missing directory)", SYS_chroot, { (uintptr_t)"/nonexistent-kotoba" } },
		{ "unshare(CLONE_NEWUSER and an unknown flag)", SYS_unshare, { CLONE_NEWUSER | 1 } },
		{ "setns(a closed fd)", SYS_setns, { (uintptr_t)-1, 0 } },
		{ "bpf(an attribute over a page)", SYS_bpf, { 0, 0, 0x10000 } },
		{ "keyctl(an unknown command)", SYS_keyctl, { 0x7fffffff } },
		{ "add_key(a bad type pointer)", SYS_add_key,
		  { BAD_PTR, (uintptr_t)"k", (uintptr_t)"v", 1, 0 } },
		{ "userfaultfd(an unknown flag)", SYS_userfaultfd, { 1 | 0x40000000 } },
		{ "perf_event_open(NULL)", SYS_perf_event_open, { 0, 0, (uintptr_t)-1, (uintptr_t)-1 } },
		{ "io_uring_setup(NULL)", SYS_io_uring_setup, { 1, 0 } },
		{ "io_uring_enter(a closed fd)", SYS_io_uring_enter, { (uintptr_t)-1 } },
		{ "init_module(a bad pointer)", SYS_init_module, { BAD_PTR, 1, (uintptr_t)"" } },
		{ "kexec_load(unknown flags)", SYS_kexec_load, { 0, 0, 0, 0xdead0000 } },
		{ "open_by_handle_at(NULL)", SYS_open_by_handle_at, { (uintptr_t)-1, 0, 0 } },
		{ "clock_settime(NULL)", SYS_clock_settime, { 0, 0 } },
		{ "syslog(an unknown action)", SYS_syslog, { 999, 0, 0 } },
		/* clone with a namespace flag, and a flag the kernel refuses
		 * beside it (CLONE_FS, CLONE_THREAD without CLONE_SIGHAND):
		 * EPERM from the filter, EINVAL from the kernel, never a child. */
		{ "clone(CLONE_NEWNS | CLONE_FS)", SYS_clone, { CLONE_NEWNS | CLONE_FS | SIGCHLD } },
		{ "clone(CLONE_NEWUSER | CLONE_NEWNET | CLONE_FS)", SYS_clone,
		  { CLONE_NEWUSER | CLONE_NEWNET | CLONE_FS | SIGCHLD } },
		{ "clone(CLONE_NEWPID | CLONE_THREAD)", SYS_clone,
		  { CLONE_NEWPID | CLONE_THREAD | SIGCHLD } },
	};
	enum { N = sizeof(d) / sizeof(d[0]) };
	struct clone_args ca = { .exit_signal = SIGCHLD };
	bool telling[N];

	for (size_t i = 0; i < N; i++)
		telling[i] = kernel_answer_differs(&d[i]);
	load_baseline("approved");
	for (size_t i = 0; i < N; i++) {
		long rc;

		errno = 0;
		rc = call_denial(&d[i]);
		if (telling[i] && (rc != -1 || errno != EPERM))
			child_fail("%s under the filter: rc %ld errno %d (%s), want the filter's "
				   "EPERM", d[i].what, rc, errno, strerror(errno));
	}
	/* clone3 hides its flags from seccomp: ENOSYS, so glibc uses clone. */
	EXPECT_ERRNO(ENOSYS, syscall(SYS_clone3, &ca, sizeof(ca)));
}

static void test_denied_calls_get_eperm(void **state)
{
	(void)state;
	run_in_child(denied_with_eperm);
}

#ifdef __x86_64__
/* getpid through the i386 entry point (int 0x80); returns -errno. */
static long i386_getpid(void)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	return ret;
}

/* IA32 emulation may be off (then int 0x80 faults): probe in a child. */
static bool have_i386_abi(void)
{
	int status;
	pid_t pid = fork_child();

	if (pid == 0)
		_exit(i386_getpid() == (long)getpid() ? 0 : 1);
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}
#endif

static void unknown_calls(void)
{
#ifdef __x86_64__
	bool have_i386 = have_i386_abi();
#endif
	bool have_landlock = landlock_abi() > 0;

	load_baseline("approved");
	EXPECT_ERRNO(ENOSYS, syscall(1000));
	/* A call the kernel has (checked before the filter) but no group
	 * lists: the default action answers. */
	if (have_landlock)
		EXPECT_ERRNO(ENOSYS, landlock_abi());
	/* x32 numbers on x86_64: another ABI, refused. */
	if (syscall(__X32_SYSCALL_BIT | SYS_getpid) >= 0)
		child_fail("an x32 syscall number got through");
#ifdef __x86_64__
	/* i386 through int 0x80: a foreign architecture, EPERM. */
	if (have_i386 && i386_getpid() != -EPERM)
		child_fail("i386 getpid via int 0x80: got %ld, want -EPERM", i386_getpid());
#endif
}

static void test_unlisted_calls_get_enosys(void **state)
{
	(void)state;
	if (landlock_abi() <= 0)
		fprintf(stderr, "# SKIP part: no Landlock in this kernel, the unlisted-call "
				"probe uses syscall 1000 only\n");
	run_in_child(unknown_calls);
}

static void ioctl_masking(void)
{
	struct termios tio;
	char c = 'x';
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		child_fail("open /dev/null: %s", strerror(errno));
	/* Before the filter the kernel says ENOTTY: any EPERM later is ours. */
	EXPECT_ERRNO(ENOTTY, ioctl(fd, TIOCSTI, &c));
	load_baseline("approved");
	EXPECT_ERRNO(EPERM, ioctl(0, TIOCSTI, &c));
	EXPECT_ERRNO(EPERM, ioctl(fd, TIOCSTI, &c));
	/* The kernel ignores the high 32 bits of cmd (CVE-2019-10063). */
	EXPECT_ERRNO(EPERM, syscall(SYS_ioctl, fd, TIOCSTI | 0x100000000ULL, &c));
	EXPECT_ERRNO(EPERM, syscall(SYS_ioctl, fd, TIOCLINUX | 0xffffffff00000000ULL, &c));
	/* Other ioctls still reach the kernel: isatty's TCGETS gets the
	 * kernel's ENOTTY, FIONCLEX succeeds. */
	EXPECT_ERRNO(ENOTTY, ioctl(fd, TCGETS, &tio));
	EXPECT_OK(ioctl(fd, FIONCLEX));
}

static void test_tiocsti_is_denied_even_with_high_bits(void **state)
{
	(void)state;
	run_in_child(ioctl_masking);
}

static void still_allowed(void)
{
	pid_t me = getpid(), child;
	char buf[16];
	int status;

	load_baseline("approved");
	EXPECT_OK(syscall(SYS_getpid));
	if (syscall(SYS_getpid) != me)
		child_fail("getpid changed under the filter");
	EXPECT_OK(syscall(SYS_getrandom, buf, sizeof(buf), 0));
	EXPECT_OK(personality(0xffffffff));
	EXPECT_OK(personality(PER_LINUX));
	EXPECT_ERRNO(EPERM, personality(PER_LINUX | ADDR_NO_RANDOMIZE));
	EXPECT_ERRNO(EPERM, personality(READ_IMPLIES_EXEC));
	/* Plain clone (fork) must still work: the namespace rule is
	 * conditional. */
	child = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (child == 0)
		_exit(42);
	if (child < 0)
		child_fail("plain clone: %s", strerror(errno));
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 42)
		child_fail("plain clone: child did not exit 42");
	/* A thread-style clone via fork() (glibc: clone3 ENOSYS -> clone). */
	child = fork_child();
	if (child == 0)
		_exit(43);
	if (child < 0 || waitpid(child, &status, 0) != child || WEXITSTATUS(status) != 43)
		child_fail("fork under the filter failed");
}

static void test_ordinary_calls_still_work(void **state)
{
	(void)state;
	run_in_child(still_allowed);
}

static void unattended_builds(void)
{
	load_baseline("unattended");
	EXPECT_ERRNO(EPERM, syscall(SYS_bpf, 0, NULL, 0));
	EXPECT_OK(syscall(SYS_getpid));
}

static void test_unattended_profile_loads(void **state)
{
	(void)state;
	run_in_child(unattended_builds);
}

/* The calls no unattended filter lets through by itself: Landlock has no
 * right for modes, owners, times or extended attributes.  Owners and
 * xattrs: EPERM.  Modes and times go to the supervisor (fileattr.c); with
 * no listener, as here, the kernel answers ENOSYS. */
static void attrs_refused(void)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

	EXPECT_ERRNO(ENOSYS, chmod("/nonexistent-kotoba", 0600));
	EXPECT_ERRNO(ENOSYS, fchmod(0, 0600));
	EXPECT_ERRNO(EPERM, chown("/nonexistent-kotoba", 0, 0));
	EXPECT_ERRNO(ENOSYS, utimensat(AT_FDCWD, "/nonexistent-kotoba", ts, 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_setxattr, "/nonexistent-kotoba", "user.k", "v", 1, 0));
}

/* Without Landlock: no file may be opened for writing or created. */
static void open_without_landlock(void)
{
	struct { uint64_t flags, mode, resolve; } how = { O_RDONLY, 0, 0 };

	load_unattended(0);
	EXPECT_OK(close(open("/dev/null", O_RDONLY | O_CLOEXEC)));
	/* glibc's __O_TMPFILE contains O_DIRECTORY: a plain directory
	 * open must not be mistaken for O_TMPFILE. */
	EXPECT_OK(close(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
	EXPECT_ERRNO(EACCES, open("/dev/null", O_WRONLY));
	EXPECT_ERRNO(EACCES, open("/dev/null", O_RDWR));
	EXPECT_ERRNO(EACCES, open("/dev/null", O_RDONLY | O_APPEND | 3));
	EXPECT_ERRNO(EACCES, open("/nonexistent-kotoba", O_RDONLY | O_CREAT, 0600));
	EXPECT_ERRNO(EACCES, open("/dev/null", O_RDONLY | O_TRUNC));
	EXPECT_ERRNO(EACCES, open("/tmp", O_TMPFILE | O_RDWR, 0600));
	EXPECT_ERRNO(EACCES, creat("/nonexistent-kotoba", 0600));
	EXPECT_ERRNO(EACCES, syscall(SYS_openat, AT_FDCWD, "/dev/null", O_WRONLY | (1UL << 40)));
	EXPECT_ERRNO(ENOSYS, syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how, sizeof(how)));
	EXPECT_ERRNO(EPERM, mkdir("/nonexistent-kotoba", 0700));
	EXPECT_ERRNO(EPERM, unlink("/nonexistent-kotoba"));
	EXPECT_ERRNO(EPERM, rename("/nonexistent-kotoba", "/nonexistent-kotoba2"));
	EXPECT_ERRNO(EPERM, symlink("/etc", "/nonexistent-kotoba"));
	EXPECT_ERRNO(EPERM, link("/etc/hostname", "/nonexistent-kotoba"));
	EXPECT_ERRNO(EPERM, mknod("/nonexistent-kotoba", S_IFIFO | 0600, 0));
	EXPECT_ERRNO(EPERM, truncate("/nonexistent-kotoba", 0));
	attrs_refused();
}

static void test_unattended_without_landlock_opens_read_only(void **state)
{
	(void)state;
	run_in_child(open_without_landlock);
}

/* Landlock ABI 1-2 hold the paths, but not O_TRUNC without write access,
 * and not truncate(2). */
static void open_with_landlock_abi1(void)
{
	load_unattended(1);
	EXPECT_OK(close(open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC)));
	EXPECT_OK(close(open("/dev/null", O_RDWR | O_TRUNC | O_CLOEXEC)));
	EXPECT_ERRNO(EACCES, open("/dev/null", O_RDONLY | O_TRUNC));
	EXPECT_ERRNO(EACCES, open("/dev/null", 3 | O_TRUNC));
	/* Reaches the kernel, which Landlock would then ask. */
	EXPECT_ERRNO(EEXIST, mkdir("/", 0700));
	EXPECT_ERRNO(EPERM, truncate("/nonexistent-kotoba", 0));
	attrs_refused();
}

static void open_with_landlock_abi7(void)
{
	struct { uint64_t flags, mode, resolve; } how = { O_RDONLY, 0, 0 };

	load_unattended(7);
	EXPECT_OK(close(open("/dev/null", O_RDONLY | O_TRUNC | O_CLOEXEC)));
	EXPECT_ERRNO(ENOENT, truncate("/nonexistent-kotoba", 0));
	EXPECT_ERRNO(ENOSYS, syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how, sizeof(how)));
	attrs_refused();
}

static void test_unattended_with_landlock_leaves_paths_to_it(void **state)
{
	(void)state;
	run_in_child(open_with_landlock_abi1);
	run_in_child(open_with_landlock_abi7);
}

/* An abstract name of nine characters: as long as a sockaddr_nl. */
static socklen_t abstract_name(struct sockaddr_un *un, const char *name)
{
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	memcpy(un->sun_path + 1, name, strlen(name));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

/* Unattended Unix pairs: stream only, and a stream end can neither be
 * re-aimed nor given an address (the pair itself is the kernel's). */
static void unix_pairs_checked(const struct sockaddr_un *lst, socklen_t lst_len)
{
	struct sockaddr_un un, got;
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	char name[16];
	socklen_t len, got_len = sizeof(got);
	int sv[2], one = 1, sndbuf = 65536;

	snprintf(name, sizeof(name), "b%08d", (int)getpid() % 100000000);
	len = abstract_name(&un, name);

	assert_int_equal(len, sizeof(struct sockaddr_nl));
	EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv));
	EXPECT_ERRNO(EPERM, socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
	EXPECT_ERRNO(EPERM, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv));
	EXPECT_ERRNO(EPERM, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	EXPECT_ERRNO(EPERM, socketpair(AF_UNIX, SOCK_STREAM, PF_UNIX, sv));
	EXPECT_ERRNO(EPERM, socketpair(AF_TIPC, SOCK_STREAM, 0, sv));
	EXPECT_ERRNO(EPERM, syscall(SYS_socketpair, AF_UNIX, SOCK_DGRAM | (1UL << 32), 0, sv));
	EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	/* The kernel's own answers: a connected stream end stays aimed. */
	EXPECT_ERRNO(EISCONN, sendto(sv[0], "x", 1, 0, (struct sockaddr *)&un, len));
	EXPECT_ERRNO(EINVAL, connect(sv[0], &unspec, sizeof(unspec)));
	/* The filter's: no address for a pair end, directly or by autobind. */
	EXPECT_ERRNO(EPERM, bind(sv[0], (struct sockaddr *)&un, len));
	EXPECT_ERRNO(EPERM, bind(sv[0], (struct sockaddr *)&un, sizeof(sa_family_t)));
	EXPECT_ERRNO(EPERM, setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	EXPECT_ERRNO(EPERM, setsockopt(sv[0], SOL_SOCKET, 76 /* SO_PASSPIDFD */, &one,
				       sizeof(one)));
	EXPECT_OK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)));
	EXPECT_ERRNO(EISCONN, connect(sv[0], (const struct sockaddr *)lst, lst_len));
	EXPECT_ERRNO(EISCONN, sendto(sv[0], "x", 1, 0, (const struct sockaddr *)lst, lst_len));
	EXPECT_OK(getsockname(sv[0], (struct sockaddr *)&got, &got_len));
	if (got_len != sizeof(sa_family_t))
		child_fail("the pair end has an address (%u bytes)", (unsigned)got_len);
}

static void sockets_checked(unsigned int abi)
{
	struct sockaddr_in in = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct sockaddr_un lst;
	char name[16];
	socklen_t lst_len;
	int tcp, rt, srv;

	/* A listener of the host's, made before the filter. */
	snprintf(name, sizeof(name), "l%08d", (int)getpid() % 100000000);
	lst_len = abstract_name(&lst, name);
	srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv < 0 || bind(srv, (struct sockaddr *)&lst, lst_len) < 0 || listen(srv, 4) < 0)
		child_fail("the test's listener: %s", strerror(errno));
	load_profile("unattended", abi, false);
	tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT_OK(tcp);
	EXPECT_OK(close(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP)));
	EXPECT_ERRNO(EPERM, socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
	EXPECT_ERRNO(EPERM, socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6));
	EXPECT_ERRNO(EPERM, socket(AF_PACKET, SOCK_RAW, 0));
	EXPECT_ERRNO(EPERM, socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERRNO(EPERM, socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP));
	EXPECT_ERRNO(EPERM, socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
	EXPECT_ERRNO(EPERM, syscall(SYS_socket, AF_INET | (1UL << 32), SOCK_RAW, 0));
	rt = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	EXPECT_OK(rt);
	EXPECT_ERRNO(EPERM, bind(tcp, (struct sockaddr *)&in, sizeof(in)));
	EXPECT_ERRNO(EPERM, listen(tcp, 1));
	/* No bind at all, at any ABI: a netlink address is as long as a
	 * nine-character abstract Unix name. */
	EXPECT_ERRNO(EPERM, bind(rt, (struct sockaddr *)&nl, sizeof(nl)));
	unix_pairs_checked(&lst, lst_len);
}

/* The control: the approved profile lets every one of those through, so
 * the EPERMs above are the unattended filter's. */
static void unix_pairs_approved(void)
{
	struct sockaddr_un un;
	socklen_t len;
	char name[16];
	int sv[2], one = 1;

	snprintf(name, sizeof(name), "a%08d", (int)getpid() % 100000000);
	len = abstract_name(&un, name);
	load_baseline("approved");
	EXPECT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	EXPECT_OK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv));
	EXPECT_OK(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	EXPECT_OK(bind(sv[0], (struct sockaddr *)&un, len));
}

static void sockets_abi0(void)
{
	sockets_checked(0);
}

static void sockets_abi7(void)
{
	sockets_checked(7);
}

static void test_unattended_sockets(void **state)
{
	(void)state;
	run_in_child(sockets_abi0);
	run_in_child(sockets_abi7);
	run_in_child(unix_pairs_approved);
}

#ifdef __x86_64__
/* socketcall(SYS_SOCKET, {AF_UNIX, SOCK_STREAM, 0}) through the i386 entry;
 * its argument block must lie below 4 GiB.  Returns the fd or -errno. */
static long i386_socketcall_unix(void)
{
	unsigned int *args = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	long ret;

	if (args == MAP_FAILED)
		child_fail("mmap MAP_32BIT: %s", strerror(errno));
	args[0] = AF_UNIX;
	args[1] = SOCK_STREAM;
	args[2] = 0;
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(102L), "b"(1L /* SYS_SOCKET */), "c"((long)(uintptr_t)args)
			 : "memory");
	return ret;
}

/* The control: a filter for i386 alone (x86_64 calls pass as a foreign
 * architecture) in which socketcall is allowed, as approved has it. */
static void socketcall_i386_approved(void)
{
	struct seccomp_opts o = { "approved", 0, getpid() };
	struct sock_fprog prog;
	char err[256] = "";
	long fd;

	if (seccomp_build_arch(&o, SCMP_ARCH_X86, SCMP_ACT_ALLOW, &prog, err, sizeof(err)) < 0)
		child_fail("building approved for i386: %s", err);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load_prog(&prog, false) < 0)
		child_fail("loading the i386 filter: %s", strerror(errno));
	fd = i386_socketcall_unix();
	if (fd < 0)
		child_fail("approved i386 socketcall(SYS_SOCKET, AF_UNIX): %ld, want a socket", fd);
}

/* What the worker loads on x86_64: the i386 entry is a foreign
 * architecture, socketcall included. */
static void socketcall_i386_unattended(void)
{
	long fd;

	load_profile("unattended", 0, false);
	fd = i386_socketcall_unix();
	if (fd != -EPERM)
		child_fail("unattended i386 socketcall(SYS_SOCKET, AF_UNIX): %ld, want -EPERM", fd);
}
#endif

/* socketcall(2) hides the socket calls' arguments.  Where it exists,
 * libseccomp folds an argument rule on socket(2) into socketcall without
 * the arguments, so the profiles that narrow sockets refuse to build
 * there (checked for each such architecture libseccomp knows); where it
 * does not (x86_64, arm64) they build.  On x86_64 the kernel is asked
 * too, through the i386 entry. */
static void test_socketcall_never_reopens_sockets(void **state)
{
	static const uint32_t with_socketcall[] = {
		SCMP_ARCH_X86, SCMP_ARCH_S390, SCMP_ARCH_S390X, SCMP_ARCH_PPC64LE,
		SCMP_ARCH_PPC, SCMP_ARCH_MIPSEL,
	};
	static const char *const narrowing[] = { "unattended", "engine" };
	struct sock_fprog prog;
	char err[256] = "";
	struct seccomp_opts approved = { "approved", 0, 1 };

	(void)state;
	for (size_t a = 0; a < sizeof(with_socketcall) / sizeof(with_socketcall[0]); a++) {
		assert_true(seccomp_syscall_resolve_name_arch(with_socketcall[a], "socketcall") >= 0);
		for (size_t p = 0; p < 2; p++) {
			struct seccomp_opts o = { narrowing[p], 7, 1 };

			err[0] = '\0';
			assert_int_equal(seccomp_build_arch(&o, with_socketcall[a], SCMP_ACT_ALLOW,
							    &prog, err, sizeof(err)),
					 -EOPNOTSUPP);
			assert_null(prog.filter);
			assert_non_null(strstr(err, "socketcall"));
		}
	}
	/* The approved profile builds there (i386 shown; a filter of another
	 * byte order cannot be built on this host at all). */
	assert_int_equal(seccomp_build_arch(&approved, SCMP_ARCH_X86, SCMP_ACT_ALLOW, &prog, err,
					    sizeof(err)),
			 0);
	seccomp_prog_free(&prog);
	assert_true(seccomp_syscall_resolve_name_arch(SCMP_ARCH_AARCH64, "socketcall") < 0);
#ifdef __x86_64__
	assert_true(seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, "socketcall") < 0);
	if (!have_i386_abi()) {
		fprintf(stderr, "# SKIP part: no IA32 emulation in this kernel, the i386 "
				"socketcall probe is not run\n");
		return;
	}
	run_in_child(socketcall_i386_approved);
	run_in_child(socketcall_i386_unattended);
#endif
}

/* Without Landlock's signal scope: only our own process and group.  The
 * parent (the test runner) must be out of reach; SIGURG is ignored by
 * default, so a failure here harms nobody. */
static void signals_without_scope(void)
{
	pid_t me = getpid(), parent = getppid();
	siginfo_t si = { .si_code = SI_QUEUE };

	load_profile("unattended", 5, false);
	EXPECT_OK(kill(me, 0));
	EXPECT_OK(kill(parent, 0));
	EXPECT_OK(kill(me, SIGURG));
	EXPECT_OK(syscall(SYS_tgkill, me, syscall(SYS_gettid), SIGURG));
	EXPECT_ERRNO(EPERM, kill(parent, SIGURG));
	EXPECT_ERRNO(EPERM, kill(-1, SIGURG));
	EXPECT_ERRNO(EPERM, kill(1, SIGURG));
	EXPECT_ERRNO(EPERM, syscall(SYS_kill, (long)parent | (1L << 32), SIGURG));
	EXPECT_ERRNO(EPERM, syscall(SYS_tgkill, parent, parent, SIGURG));
	EXPECT_ERRNO(EPERM, syscall(SYS_tkill, parent, SIGURG));
	EXPECT_ERRNO(EPERM, syscall(SYS_rt_sigqueueinfo, parent, SIGURG, &si));
	EXPECT_ERRNO(EPERM, syscall(SYS_pidfd_send_signal, 0, SIGURG, NULL, 0));
	EXPECT_ERRNO(EPERM, fcntl(0, F_SETOWN, parent));
	EXPECT_OK(fcntl(0, F_GETFL));
}

static void signals_with_scope(void)
{
	load_profile("unattended", 6, false);
	/* Landlock scopes these; the filter lets them reach the kernel. */
	EXPECT_ERRNO(EBADF, syscall(SYS_pidfd_send_signal, -1, SIGURG, NULL, 0));
	EXPECT_OK(fcntl(0, F_SETOWN, getpid()));
}

static void test_unattended_signals(void **state)
{
	(void)state;
	run_in_child(signals_without_scope);
	run_in_child(signals_with_scope);
}

/* Both profiles: resource and scheduling calls only on the caller. */
static void self_only(void)
{
	pid_t parent = getppid();
	struct rlimit rl;
	cpu_set_t set;

	load_baseline("approved");
	EXPECT_OK(prlimit(0, RLIMIT_CORE, NULL, &rl));
	EXPECT_ERRNO(EPERM, prlimit(parent, RLIMIT_CORE, NULL, &rl));
	EXPECT_OK(setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0)));
	EXPECT_ERRNO(EPERM, setpriority(PRIO_PROCESS, parent, 19));
	EXPECT_ERRNO(EPERM, setpriority(PRIO_USER, 0, 19));
	EXPECT_OK(sched_getaffinity(0, sizeof(set), &set));
	EXPECT_OK(sched_setaffinity(0, sizeof(set), &set));
	EXPECT_ERRNO(EPERM, sched_setaffinity(parent, sizeof(set), &set));
	EXPECT_ERRNO(EPERM, syscall(SYS_ioprio_set, 1, parent, 0));
}

static void test_other_processes_are_out_of_reach(void **state)
{
	(void)state;
	run_in_child(self_only);
}

static void ioctl_allowlist(void)
{
	struct termios tio;
	long flags = 0;
	int on = 1, fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	char c = 'x';

	if (fd < 0)
		child_fail("open /dev/null: %s", strerror(errno));
	load_profile("unattended", 7, false);
	EXPECT_ERRNO(ENOTTY, ioctl(fd, TCGETS, &tio));
	EXPECT_ERRNO(ENOTTY, syscall(SYS_ioctl, fd, TCGETS | (1UL << 32), &tio));
	EXPECT_OK(ioctl(fd, FIONBIO, &on));
	EXPECT_OK(ioctl(fd, FIOCLEX));
	EXPECT_ERRNO(EPERM, ioctl(fd, FS_IOC_SETFLAGS, &flags));
	EXPECT_ERRNO(EPERM, ioctl(fd, TIOCSTI, &c));
	EXPECT_ERRNO(EPERM, ioctl(fd, 0x1234, NULL));
}

static void test_unattended_ioctl_is_an_allowlist(void **state)
{
	(void)state;
	run_in_child(ioctl_allowlist);
}

static void ipc_and_listeners(void)
{
	uint32_t act = SECCOMP_RET_ERRNO;

	load_profile("unattended", 7, false);
	EXPECT_ERRNO(EPERM, shmget(IPC_PRIVATE, 4096, 0600));
	EXPECT_ERRNO(EPERM, syscall(SYS_mq_open, "kotoba", 0, 0, NULL));
	EXPECT_ERRNO(EPERM, syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				    SECCOMP_FILTER_FLAG_NEW_LISTENER, NULL));
	EXPECT_OK(syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &act));
	/* The gate's USER_NOTIF with no listener: the kernel says ENOSYS. */
	EXPECT_ERRNO(ENOSYS, execl("/bin/true", "true", (char *)NULL));
}

static void test_unattended_ipc_and_exec_without_gate(void **state)
{
	(void)state;
	run_in_child(ipc_and_listeners);
}

/* C's half of the exec-gate test: the worker's sequence in small. */
__attribute__((noreturn)) static void gate_child(int sock)
{
	char tag = CHILD_MSG_GATE;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl = { { 0 } };
	struct iovec iov = { &tag, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int listener = load_profile("unattended", 7, true), status;
	pid_t g;

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &listener, sizeof(int));
	if (sendmsg(sock, &mh, 0) != 1)
		_exit(90);
	close(listener);
	/* Another process asks first: refused, and the gate stays unspent. */
	g = fork_child();
	if (g == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(errno == EPERM ? 0 : 91);
	}
	if (waitpid(g, &status, 0) != g || !WIFEXITED(status) || WEXITSTATUS(status))
		_exit(92);
	/* A chmod goes to the same listener and does not spend the exec:
	 * with no place of the run's own handed over, S answers EPERM
	 * (were it let through, root's chmod of / to 0755 would succeed). */
	if (chmod("/", 0755) == 0 || errno != EPERM)
		_exit(94);
	/* Ours passes; the shell's own exec of true does not. */
	execl("/bin/sh", "sh", "-c", "exec 2>/dev/null; /bin/true && exit 5; exit 9", (char *)NULL);
	_exit(93);
}

/* S's half: serve the listener until C ends. */
static int serve_until_exit(int sock, pid_t c)
{
	struct exec_gate gate = { .fd = -1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char tag;
	struct iovec iov = { &tag, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	int fd, status;

	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1 || !CMSG_FIRSTHDR(&mh))
		child_fail("no exec gate from the child");
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
	if (exec_gate_open(&gate, fd, c, NULL) < 0)
		child_fail("exec_gate_open: %s", strerror(errno));
	gate.landlock_abi = 7; /* as C loaded it: the shell's 2>/dev/null opens */
	while (waitpid(c, &status, WNOHANG) == 0) {
		struct pollfd pfd = { .fd = gate.fd, .events = POLLIN };

		if (poll(&pfd, 1, 100) > 0 && (pfd.revents & POLLIN))
			exec_gate_serve(&gate);
	}
	exec_gate_close(&gate);
	return status;
}

static void gate_end_to_end(void)
{
	int sv[2], status;
	pid_t c;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		child_fail("socketpair: %s", strerror(errno));
	c = fork_child();
	if (c == 0)
		gate_child(sv[1]);
	close(sv[1]);
	status = serve_until_exit(sv[0], c);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 9)
		child_fail("exec gate: child status %#x, want exit 9 (one exec, then EPERM)",
			   status);
}

static void test_exec_gate_lets_exactly_one_exec_through(void **state)
{
	(void)state;
	run_in_child(gate_end_to_end);
}

/* ---- the engine profile: the container engine's CLI ---------------- */

/* Forks and execs /bin/true; 0 when it ran and exited 0, else the wait
 * status (or -1 when fork or wait failed). */
static int exec_true(void)
{
	int status = -1;
	pid_t child = fork_child();

	if (child == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(99);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : (status ? status : -1);
}

/* What a Go CLI such as podman --remote or docker does on its way to the
 * engine's API socket, under the engine filter as if Landlock ABI `abi`
 * held the paths: threads (clone, futex), epoll and eventfd, a Unix socket
 * connected to a listener, TCP and UDP sockets, routing netlink, exec of
 * a helper, its own rlimits. */
static void *thread_body(void *arg)
{
	return arg;
}

static void engine_cli_calls(unsigned int abi)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct { uint64_t flags, mode, resolve; } how = { O_RDONLY | O_CLOEXEC, 0, 0 };
	struct epoll_event ev = { .events = EPOLLIN };
	socklen_t un_len;
	struct rlimit rl;
	pthread_t t;
	void *ret = NULL;
	int srv, cli, ep, efd, rt, status;

	/* The engine's API socket, set up before the filter (abstract, so
	 * no file is left behind). */
	snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "kotoba-engine-test-%d", (int)getpid());
	un_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(un.sun_path + 1));
	srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv < 0 || bind(srv, (struct sockaddr *)&un, un_len) < 0 || listen(srv, 4) < 0)
		child_fail("the test's API socket: %s", strerror(errno));
	load_profile("engine", abi, false);
	cli = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	EXPECT_OK(cli);
	EXPECT_OK(connect(cli, (struct sockaddr *)&un, un_len));
	EXPECT_OK(close(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)));
	EXPECT_OK(close(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)));
	EXPECT_OK(close(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)));
	EXPECT_OK(close(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP)));
	EXPECT_OK(close(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP)));
	rt = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	EXPECT_OK(rt);
	if (abi > 0)
		EXPECT_OK(bind(rt, (struct sockaddr *)&nl, sizeof(nl)));
	else
		EXPECT_ERRNO(EPERM, bind(rt, (struct sockaddr *)&nl, sizeof(nl)));
	/* The Go runtime: threads (glibc: clone3 ENOSYS, then clone), the
	 * poller, its timers' eventfd, raising its own RLIMIT_NOFILE. */
	if (pthread_create(&t, NULL, thread_body, &rl) != 0 || pthread_join(t, &ret) != 0 ||
	    ret != &rl)
		child_fail("a thread under the engine filter");
	ep = epoll_create1(EPOLL_CLOEXEC);
	EXPECT_OK(ep);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	EXPECT_OK(efd);
	EXPECT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
	EXPECT_OK(prlimit(0, RLIMIT_NOFILE, NULL, &rl));
	EXPECT_OK(setrlimit(RLIMIT_NOFILE, &rl));
	EXPECT_OK(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGURG));
	/* The approved file rules: these reach the kernel (Landlock, when
	 * in force, decides by path). */
	EXPECT_OK(close((int)syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how, sizeof(how))));
	EXPECT_ERRNO(ENOENT, mkdir("/nonexistent-kotoba/d", 0700));
	EXPECT_ERRNO(ENOENT, chmod("/nonexistent-kotoba", 0600));
	/* No exec gate: a credential helper or plugin may run. */
	if ((status = exec_true()) != 0)
		child_fail("exec of /bin/true under the engine filter: status %#x", status);
}

static void engine_cli_abi0(void)
{
	engine_cli_calls(0);
}

static void engine_cli_abi7(void)
{
	engine_cli_calls(7);
}

static void test_engine_profile_allows_what_the_cli_needs(void **state)
{
	(void)state;
	run_in_child(engine_cli_abi0);
	run_in_child(engine_cli_abi7);
}

/* What the engine CLI must never do: the kernel-attack surface stays
 * closed, no socket family beyond a client's, nothing listens, no IPC
 * object outlives the run. */
static void engine_denials(void)
{
	struct sockaddr_in in = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/tmp/kotoba-engine-bind" };
	struct clone_args ca = { .exit_signal = SIGCHLD };
	char c = 'x';
	int tcp, unix_s;

	load_profile("engine", 7, false);
	EXPECT_ERRNO(EPERM, syscall(SYS_unshare, CLONE_NEWUSER));
	EXPECT_ERRNO(EPERM, syscall(SYS_unshare, CLONE_NEWNS));
	EXPECT_ERRNO(EPERM, syscall(SYS_setns, 0, 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0));
	EXPECT_ERRNO(ENOSYS, syscall(SYS_clone3, &ca, sizeof(ca)));
	EXPECT_ERRNO(EPERM, syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, NULL));
	EXPECT_ERRNO(EPERM, syscall(SYS_fsopen, "tmpfs", 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_pivot_root, "/", "/"));
	EXPECT_ERRNO(EPERM, syscall(SYS_bpf, 0, NULL, 0));
	EXPECT_ERRNO(EPERM, ptrace(PTRACE_ATTACH, getppid(), NULL, NULL));
	EXPECT_ERRNO(EPERM, syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_io_uring_setup, 1, NULL));
	EXPECT_ERRNO(EPERM, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_userfaultfd, 0));
	EXPECT_ERRNO(EPERM, ioctl(0, TIOCSTI, &c));
	EXPECT_ERRNO(EPERM, socket(AF_PACKET, SOCK_RAW, 0));
	EXPECT_ERRNO(EPERM, socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP));
	EXPECT_ERRNO(EPERM, socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
	EXPECT_ERRNO(EPERM, socket(AF_VSOCK, SOCK_STREAM, 0));
	EXPECT_ERRNO(EPERM, syscall(SYS_socket, AF_PACKET | (1UL << 32), SOCK_RAW, 0));
	tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT_OK(tcp);
	EXPECT_ERRNO(EPERM, bind(tcp, (struct sockaddr *)&in, sizeof(in)));
	EXPECT_ERRNO(EPERM, listen(tcp, 1));
	unix_s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT_OK(unix_s);
	EXPECT_ERRNO(EPERM, bind(unix_s, (struct sockaddr *)&un, sizeof(un)));
	EXPECT_ERRNO(EPERM, listen(unix_s, 1));
	EXPECT_ERRNO(EPERM, shmget(IPC_PRIVATE, 4096, 0600));
	EXPECT_ERRNO(EPERM, syscall(SYS_semget, IPC_PRIVATE, 1, 0600));
	EXPECT_ERRNO(EPERM, syscall(SYS_msgget, IPC_PRIVATE, 0600));
	EXPECT_ERRNO(EPERM, syscall(SYS_mq_open, "kotoba", 0, 0, NULL));
}

static void test_engine_profile_denies_the_rest(void **state)
{
	(void)state;
	run_in_child(engine_denials);
}

/* No exec gate and no pid in the program: the worker loads it as built. */
static void test_engine_profile_has_no_gate_and_no_pid(void **state)
{
	struct sock_fprog prog;
	char err[256] = "";

	(void)state;
	assert_false(seccomp_has_exec_gate("engine"));
	assert_false(seccomp_has_exec_gate("approved"));
	assert_true(seccomp_has_exec_gate("unattended"));
	for (unsigned int abi = 0; abi <= SECCOMP_ABI_MAX; abi++) {
		struct seccomp_opts o = { "engine", abi, 0 };

		assert_int_equal(seccomp_program_for(&o, &prog, err, sizeof(err)), 0);
		assert_true(prog.len > 0);
	}
}

/* ---- Landlock and seccomp together, at every ABI -------------------- */

/* Set by the test before each child: fork copies them. */
static unsigned int ll_abi;
static char ll_scratch[64], ll_outside[64];

static void path_in(char *buf, size_t len, const char *dir, const char *leaf)
{
	snprintf(buf, len, "%s/%s", dir, leaf);
}

/* The unattended profile as the worker applies it (Landlock at ll_abi,
 * then the filter built for that ABI), seen from inside. */
static void unattended_at_abi(void)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct plan p = { .landlock_abi = ll_abi };
	char in_f[96], in_g[96], out_f[96], victim[96];
	const char *what;
	int rc;

	p.profile = PROFILE_UNATTENDED;
	snprintf(p.scratch, sizeof(p.scratch), "%s", ll_scratch);
	path_in(in_f, sizeof(in_f), ll_scratch, "f");
	path_in(in_g, sizeof(in_g), ll_scratch, "g");
	path_in(out_f, sizeof(out_f), ll_outside, "new");
	path_in(victim, sizeof(victim), ll_outside, "victim");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	rc = apply_landlock(&p, false, &what);
	if (rc < 0)
		child_fail("ABI %u: %s: %s", ll_abi, what, strerror(-rc));
	load_unattended(ll_abi);
	EXPECT_OK(close(open(in_f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)));
	EXPECT_OK(rename(in_f, in_g));
	EXPECT_OK(close(open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC)));
	EXPECT_OK(close(open("/etc/hostname", O_RDONLY | O_CLOEXEC)));
	EXPECT_ERRNO(EACCES, open(out_f, O_WRONLY | O_CREAT, 0600));
	EXPECT_ERRNO(EACCES, open(victim, O_WRONLY | O_APPEND));
	EXPECT_ERRNO(EACCES, open(victim, O_RDONLY | O_TRUNC));
	EXPECT_ERRNO(EACCES, mkdir(out_f, 0700));
	EXPECT_ERRNO(EACCES, unlink(victim));
	EXPECT_ERRNO(ll_abi >= 3 ? EACCES : EPERM, truncate(victim, 0));
	if (ll_abi >= 3)
		EXPECT_OK(truncate(in_g, 0));
	else
		EXPECT_ERRNO(EPERM, truncate(in_g, 0));
	/* Moving a file out of a read-only tree into scratch: no. */
	EXPECT_ERRNO(EACCES, rename(victim, in_f));
	EXPECT_ERRNO(EPERM, kill(getppid(), SIGURG));
	EXPECT_ERRNO(EPERM, bind(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
				 (struct sockaddr *)&in, sizeof(in)));
}

/* Runs child once per Landlock ABI this kernel has, each time with a fresh
 * scratch directory (ll_scratch) and a directory outside it (ll_outside)
 * holding a file, "victim", that must come through unchanged. */
static void at_every_landlock_abi(void (*child)(void))
{
	unsigned int kernel = landlock_probe_abi();
	char victim[96], cmd[192];
	struct stat st;
	int fd;

	if (kernel == 0) {
		fprintf(stderr, "# SKIP: this kernel has no Landlock\n");
		skip();
	}
	for (ll_abi = 1; ll_abi <= kernel && ll_abi <= 7; ll_abi++) {
		snprintf(ll_scratch, sizeof(ll_scratch), "/tmp/kotoba-ll-scratch-XXXXXX");
		snprintf(ll_outside, sizeof(ll_outside), "/tmp/kotoba-ll-outside-XXXXXX");
		assert_non_null(mkdtemp(ll_scratch));
		assert_non_null(mkdtemp(ll_outside));
		path_in(victim, sizeof(victim), ll_outside, "victim");
		fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		assert_true(fd >= 0 && write(fd, "keep", 4) == 4);
		close(fd);
		run_in_child(child);
		assert_int_equal(stat(victim, &st), 0);
		assert_int_equal(st.st_size, 4);
		snprintf(cmd, sizeof(cmd), "rm -rf -- %s %s", ll_scratch, ll_outside);
		assert_int_equal(system(cmd), 0);
	}
	if (kernel < 7)
		fprintf(stderr, "# SKIP part: ABIs %u-7 are newer than this kernel\n", kernel + 1);
}

static void test_unattended_profile_at_every_landlock_abi(void **state)
{
	(void)state;
	at_every_landlock_abi(unattended_at_abi);
}

/* The engine profile as the worker applies it, at the kernel's Landlock
 * ABI: unattended's ruleset, then the engine filter.  The CLI writes only
 * in scratch (its HOME, TMPDIR, XDG_RUNTIME_DIR), still reaches the
 * engine's socket and may exec. */
static void engine_at_abi(void)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct plan p = { .landlock_abi = ll_abi };
	char in_f[96], out_f[96], victim[96];
	socklen_t un_len;
	const char *what;
	int rc, srv, cli, status;

	p.profile = PROFILE_ENGINE;
	snprintf(p.scratch, sizeof(p.scratch), "%s", ll_scratch);
	path_in(in_f, sizeof(in_f), ll_scratch, "containers.conf");
	path_in(out_f, sizeof(out_f), ll_outside, "new");
	path_in(victim, sizeof(victim), ll_outside, "victim");
	snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "kotoba-engine-ll-%d", (int)getpid());
	un_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(un.sun_path + 1));
	srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv < 0 || bind(srv, (struct sockaddr *)&un, un_len) < 0 || listen(srv, 4) < 0)
		child_fail("the test's API socket: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	rc = apply_landlock(&p, false, &what);
	if (rc < 0)
		child_fail("ABI %u: %s: %s", ll_abi, what, strerror(-rc));
	load_profile("engine", ll_abi, false);
	EXPECT_OK(close(open(in_f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)));
	EXPECT_OK(chmod(in_f, 0644));
	EXPECT_OK(unlink(in_f));
	EXPECT_OK(close(open("/dev/null", O_WRONLY | O_CLOEXEC)));
	EXPECT_OK(close(open("/etc/hostname", O_RDONLY | O_CLOEXEC)));
	EXPECT_ERRNO(EACCES, open(out_f, O_WRONLY | O_CREAT, 0600));
	EXPECT_ERRNO(EACCES, open(victim, O_WRONLY | O_APPEND));
	EXPECT_ERRNO(EACCES, unlink(victim));
	EXPECT_ERRNO(EACCES, mkdir(out_f, 0700));
	/* The abstract socket was made outside the domain: Landlock ABI 6
	 * scopes abstract sockets, so only below it does connect work.  The
	 * engines listen on path sockets, which no ABI scopes. */
	cli = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT_OK(cli);
	if (ll_abi >= 6)
		EXPECT_ERRNO(EPERM, connect(cli, (struct sockaddr *)&un, un_len));
	else
		EXPECT_OK(connect(cli, (struct sockaddr *)&un, un_len));
	if ((status = exec_true()) != 0)
		child_fail("ABI %u: exec of /bin/true under the engine profile: status %#x", ll_abi,
			   status);
}

static void test_engine_profile_under_landlock(void **state)
{
	(void)state;
	at_every_landlock_abi(engine_at_abi);
}

/* What the worker loads is what the policy compiles to: for each profile
 * at each Landlock ABI and a spread of pids (the smallest, ours, the
 * kernel's PID_MAX_LIMIT, the largest pid_t), the generated program with
 * the pid patched in equals seccomp_build()'s, byte for byte. */
static void test_prebuilt_programs_are_the_policy(void **state)
{
	static const char *const profiles[] = { "approved", "unattended", "engine" };
	const pid_t pids[] = { 1, 2, 300, 32768, getpid(), 4194304, 0x7fffffff };
	struct seccomp_opts one = { "unattended", 0, 1 }, two = { "unattended", 0, 2 };
	struct sock_filter first[BPF_MAXINSNS];
	struct sock_fprog got;
	char err[256] = "";

	(void)state;
	for (size_t pr = 0; pr < sizeof(profiles) / sizeof(profiles[0]); pr++) {
		for (unsigned int abi = 0; abi <= SECCOMP_ABI_MAX; abi++) {
			for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
				struct seccomp_opts o = { profiles[pr], abi, pids[i] };
				struct sock_fprog want;

				assert_int_equal(seccomp_build(&o, &want, err, sizeof(err)), 0);
				assert_int_equal(seccomp_program_for(&o, &got, err, sizeof(err)), 0);
				if (got.len != want.len ||
				    memcmp(got.filter, want.filter, want.len * sizeof(*want.filter)))
					fail_msg("%s at Landlock ABI %u for pid %d: the prebuilt program "
						 "(%u instructions) is not seccomp_build()'s (%u)",
						 profiles[pr], abi, (int)pids[i], got.len, want.len);
				seccomp_prog_free(&want);
			}
		}
	}
	/* Patching was exercised: without Landlock the unattended program
	 * holds the pid (signals), so two pids give two programs. */
	assert_int_equal(seccomp_program_for(&one, &got, err, sizeof(err)), 0);
	memcpy(first, got.filter, got.len * sizeof(*first));
	assert_int_equal(seccomp_program_for(&two, &got, err, sizeof(err)), 0);
	assert_true(memcmp(first, got.filter, got.len * sizeof(*first)) != 0);
}

/* The table has no program for an unknown profile or a newer ABI, and the
 * programs that hold the pid refuse to go without one. */
static void test_prebuilt_program_refusals(void **state)
{
	struct seccomp_opts root = { "root", 0, 1 }, newer = { "unattended", SECCOMP_ABI_MAX + 1, 1 },
			    nopid = { "unattended", 0, 0 }, approved = { "approved", 0, 0 };
	struct sock_fprog prog;
	char err[256] = "";

	(void)state;
	assert_int_equal(seccomp_program_for(&root, &prog, err, sizeof(err)), -EINVAL);
	assert_null(prog.filter);
	assert_non_null(strstr(err, "root"));
	assert_int_equal(seccomp_program_for(&newer, &prog, err, sizeof(err)), -EINVAL);
	assert_null(prog.filter);
	assert_int_equal(seccomp_program_for(&nopid, &prog, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "pid"));
	/* The approved program does not depend on the pid at all. */
	assert_int_equal(seccomp_program_for(&approved, &prog, err, sizeof(err)), 0);
	assert_true(prog.len > 0);
}

static void test_unknown_profile_is_an_error(void **state)
{
	struct seccomp_opts o = { "root", 0, 1 };
	struct sock_fprog prog = { 0 };
	char err[256] = "";

	(void)state;
	assert_int_equal(seccomp_build(&o, &prog, err, sizeof(err)), -EINVAL);
	assert_null(prog.filter);
	assert_non_null(strstr(err, "root"));
	seccomp_prog_free(&prog); /* harmless on an empty program */
}

static void test_groups_are_documented(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	seccomp_describe(f);
	fclose(f);
	/* kotoba-worker --list-syscall-groups prints the generator's copy. */
	assert_string_equal(text, seccomp_description);
	assert_non_null(strstr(text, "@debug (EPERM in all profiles"));
	assert_non_null(strstr(text, "@io-uring (EPERM in all profiles"));
	assert_non_null(strstr(text, "@namespaces (EPERM in all profiles"));
	assert_non_null(strstr(text, "@file-read (allow in all profiles"));
	assert_non_null(strstr(text, "@exec (approved: allow; unattended: exec gate; engine: allow)"));
	assert_non_null(strstr(text, "@ipc (approved: allow; unattended: EPERM; engine: EPERM)"));
	assert_non_null(strstr(text, "@file-create (approved: allow; unattended: allow with "
				     "Landlock ABI >= 1, else EPERM; engine: allow)"));
	assert_non_null(strstr(text, "@socket"));
	assert_non_null(strstr(text, "    engine: AF_UNIX of any type"));
	assert_non_null(strstr(text, "@ioctl"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_denied_calls_get_eperm),
		cmocka_unit_test(test_unlisted_calls_get_enosys),
		cmocka_unit_test(test_tiocsti_is_denied_even_with_high_bits),
		cmocka_unit_test(test_ordinary_calls_still_work),
		cmocka_unit_test(test_unattended_profile_loads),
		cmocka_unit_test(test_unattended_without_landlock_opens_read_only),
		cmocka_unit_test(test_unattended_with_landlock_leaves_paths_to_it),
		cmocka_unit_test(test_unattended_sockets),
		cmocka_unit_test(test_socketcall_never_reopens_sockets),
		cmocka_unit_test(test_unattended_signals),
		cmocka_unit_test(test_other_processes_are_out_of_reach),
		cmocka_unit_test(test_unattended_ioctl_is_an_allowlist),
		cmocka_unit_test(test_unattended_ipc_and_exec_without_gate),
		cmocka_unit_test(test_exec_gate_lets_exactly_one_exec_through),
		cmocka_unit_test(test_engine_profile_allows_what_the_cli_needs),
		cmocka_unit_test(test_engine_profile_denies_the_rest),
		cmocka_unit_test(test_engine_profile_has_no_gate_and_no_pid),
		cmocka_unit_test(test_engine_profile_under_landlock),
		cmocka_unit_test(test_unattended_profile_at_every_landlock_abi),
		cmocka_unit_test(test_prebuilt_programs_are_the_policy),
		cmocka_unit_test(test_prebuilt_program_refusals),
		cmocka_unit_test(test_unknown_profile_is_an_error),
		cmocka_unit_test(test_groups_are_documented),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
