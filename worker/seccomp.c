/* SPDX-License-Identifier: MIT
 * The baseline seccomp policy for a snippet, as named groups.
 *
 * An allowlist: anything no group names gets ENOSYS, which libc and Python
 * read as "this kernel lacks the call" and fall back from (clone3 -> clone).
 * What we refuse on purpose gets EPERM, which Python turns into a readable
 * PermissionError.  Nothing is ever KILL: a denied call must be an
 * exception the snippet can report, not a mystery SIGSYS.
 *
 * Names are resolved with libseccomp for the native architecture; names
 * this architecture lacks (mmap2, socketcall...) or that this libseccomp
 * does not know yet are skipped, which for an allowlist fails closed.
 * Foreign architectures (i386 via int 0x80, x32) get EPERM as a whole.
 */
#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/seccomp.h"

/* Which profiles a group belongs to.  Both share the baseline today; the
 * unattended profile will narrow it by moving calls out of groups it does
 * not get (file writes, exec, listening sockets...). */
enum {
	P_APPROVED = 1u << 0,
	P_UNATTENDED = 1u << 1,
	P_ALL = P_APPROVED | P_UNATTENDED,
};

enum group_action {
	G_ALLOW,
	G_DENY, /* EPERM: deliberate, the snippet is told "not permitted" */
};

struct syscall_group {
	const char *name;
	const char *help;
	enum group_action action;
	unsigned int profiles;
	const char *const *calls;
};

/* Groups whose rules look at arguments are added by code, not by name. */
struct arg_group {
	const char *name;
	const char *help;
	unsigned int profiles;
	const char *calls; /* for the documentation only */
	int (*add)(scmp_filter_ctx ctx);
};

#define CALLS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct syscall_group groups[] = {
	/* ---- allowed ---------------------------------------------------- */
	{ "@basic-io", "Read, write, seek and close what is already open", G_ALLOW, P_ALL,
	  CALLS("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
		"preadv2", "pwritev2", "lseek", "_llseek", "close", "close_range", "dup", "dup2",
		"dup3", "pipe", "pipe2", "sendfile", "sendfile64", "splice", "tee", "vmsplice",
		"copy_file_range") },
	{ "@file-system", "Open, inspect, create, change and remove files (the user's normal work)",
	  G_ALLOW, P_ALL,
	  CALLS("open", "openat", "openat2", "creat", "access", "faccessat", "faccessat2", "stat",
		"lstat", "fstat", "newfstatat", "statx", "stat64", "lstat64", "fstat64",
		"fstatat64", "statfs", "fstatfs", "statfs64", "fstatfs64", "getdents",
		"getdents64", "readlink", "readlinkat", "getcwd", "chdir", "fchdir", "umask",
		"fcntl", "fcntl64", "flock", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
		"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
		"mknod", "mknodat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
		"fchownat", "chown32", "fchown32", "lchown32", "truncate", "ftruncate",
		"truncate64", "ftruncate64", "fallocate", "fadvise64", "fadvise64_64",
		"readahead", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "utime",
		"utimes", "utimensat", "futimesat", "inotify_init", "inotify_init1",
		"inotify_add_watch", "inotify_rm_watch", "getxattr", "lgetxattr", "fgetxattr",
		"listxattr", "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr",
		"removexattr", "lremovexattr", "fremovexattr") },
	{ "@process", "Create, run and wait for processes and threads; read and drop identity",
	  G_ALLOW, P_ALL,
	  CALLS("fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
		"waitpid", "getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid",
		"getsid", "setsid", "set_tid_address", "set_robust_list", "get_robust_list",
		"futex", "futex_waitv", "arch_prctl", "set_thread_area", "get_thread_area",
		"restart_syscall", "pidfd_open", "getuid", "geteuid", "getgid", "getegid",
		"getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid", "setregid",
		"setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capget", "capset",
		"getrlimit", "setrlimit", "prlimit64", "getrusage", "times", "getpriority",
		"setpriority", "ioprio_get", "ioprio_set", "sched_yield", "sched_getaffinity",
		"sched_setaffinity", "sched_getparam", "sched_setparam", "sched_getscheduler",
		"sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min",
		"sched_rr_get_interval", "sched_getattr", "sched_setattr") },
	{ "@signal", "Handle, mask and send signals", G_ALLOW, P_ALL,
	  CALLS("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
		"rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
		"sigaltstack", "signalfd", "signalfd4", "kill", "tkill", "tgkill",
		"pidfd_send_signal", "pause", "alarm", "sigaction", "sigprocmask", "sigreturn",
		"sigsuspend", "sigpending", "signal") },
	{ "@memory", "Map, protect and advise on the process's own memory", G_ALLOW, P_ALL,
	  CALLS("brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore",
		"msync", "mlock", "mlock2", "munlock", "mlockall", "munlockall", "memfd_create",
		"pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy", "set_mempolicy",
		"mbind", "remap_file_pages", "membarrier") },
	{ "@time", "Read clocks, sleep, and set timers (never set the clock)", G_ALLOW, P_ALL,
	  CALLS("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
		"time", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
		"timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
		"getitimer", "setitimer") },
	{ "@io-event", "Wait for file descriptors: poll, select, epoll, eventfd", G_ALLOW, P_ALL,
	  CALLS("poll", "ppoll", "select", "_newselect", "pselect6", "epoll_create",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
		"eventfd", "eventfd2") },
	{ "@aio", "Linux native asynchronous I/O (not io_uring)", G_ALLOW, P_ALL,
	  CALLS("io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
		"io_pgetevents") },
	{ "@network", "Sockets: create, connect, send and receive (DNS and NETLINK included)",
	  G_ALLOW, P_ALL,
	  CALLS("socket", "socketpair", "bind", "listen", "accept", "accept4", "connect",
		"getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg",
		"sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt", "socketcall") },
	{ "@ipc", "SysV and POSIX IPC: shared memory, semaphores, message queues", G_ALLOW, P_ALL,
	  CALLS("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
		"msgget", "msgsnd", "msgrcv", "msgctl", "ipc", "mq_open", "mq_unlink",
		"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr") },
	{ "@misc", "Runtime odds and ends: randomness, system info, prctl, rseq, self-seccomp",
	  G_ALLOW, P_ALL,
	  /* seccomp(2) is allowed because a filter can only narrow what this
	   * one permits; landlock_* is not, and its ENOSYS reads as "no
	   * Landlock here" to the libraries that probe it. */
	  CALLS("getrandom", "uname", "olduname", "sysinfo", "prctl", "rseq", "getcpu",
		"seccomp") },

	/* ---- denied with EPERM --------------------------------------------- */
	{ "@debug", "Inspect or change other processes (ptrace and friends)", G_DENY, P_ALL,
	  CALLS("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
		"process_madvise") },
	{ "@mount", "Mount, unmount and change the root; new mount API", G_DENY, P_ALL,
	  CALLS("mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
		"fsmount", "fspick", "move_mount", "open_tree", "mount_setattr") },
	{ "@namespaces", "Enter or create namespaces (kernel attack surface)", G_DENY, P_ALL,
	  CALLS("unshare", "setns") },
	{ "@bpf", "Load BPF programs and maps", G_DENY, P_ALL, CALLS("bpf") },
	{ "@module", "Load and unload kernel modules", G_DENY, P_ALL,
	  CALLS("init_module", "finit_module", "delete_module", "create_module") },
	{ "@kexec", "Load a new kernel", G_DENY, P_ALL, CALLS("kexec_load", "kexec_file_load") },
	{ "@reboot", "Reboot or halt", G_DENY, P_ALL, CALLS("reboot") },
	{ "@swap", "Enable and disable swap", G_DENY, P_ALL, CALLS("swapon", "swapoff") },
	{ "@keyring", "Kernel keyrings (shared per user, a frequent CVE source)", G_DENY, P_ALL,
	  CALLS("keyctl", "add_key", "request_key") },
	{ "@userfaultfd", "User-space page faults (a race-widening primitive for exploits)",
	  G_DENY, P_ALL, CALLS("userfaultfd") },
	{ "@perf", "Performance counters (kernel attack surface, side channels)", G_DENY, P_ALL,
	  CALLS("perf_event_open") },
	{ "@io-uring", "io_uring (bypasses seccomp for the operations it performs)", G_DENY, P_ALL,
	  CALLS("io_uring_setup", "io_uring_enter", "io_uring_register") },
	{ "@file-handles", "Open files by handle, around path permission checks", G_DENY, P_ALL,
	  CALLS("open_by_handle_at", "name_to_handle_at") },
	{ "@raw-io", "Direct port I/O", G_DENY, P_ALL,
	  CALLS("iopl", "ioperm", "pciconfig_iobase", "pciconfig_read", "pciconfig_write") },
	{ "@accounting", "Process accounting", G_DENY, P_ALL, CALLS("acct") },
	{ "@quota", "Disk quotas", G_DENY, P_ALL, CALLS("quotactl", "quotactl_fd") },
	{ "@syslog", "Read or control the kernel log", G_DENY, P_ALL, CALLS("syslog") },
	{ "@clock", "Set or adjust the system clock", G_DENY, P_ALL,
	  CALLS("settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime") },
	{ "@tty-hangup", "Hang up the controlling terminal", G_DENY, P_ALL, CALLS("vhangup") },
	{ "@obsolete-profiling", "Profiling support removed from modern kernels", G_DENY, P_ALL,
	  CALLS("lookup_dcookie") },
	{ "@fanotify", "Watch whole file systems (needs privilege; surface only)", G_DENY, P_ALL,
	  CALLS("fanotify_init") },
};

/* libseccomp lets an unconditional rule swallow every conditional rule of
 * the same syscall, whatever the order they are added in.  So the "allow
 * the rest" half of an argument filter carries a comparison that is always
 * true (arg >= 0, unsigned): the rule stays conditional, and libseccomp
 * evaluates the equality tests before it.  tests/unit/test_seccomp.c checks
 * that the exceptions still bite. */
#define ALWAYS(arg) SCMP_CMP((arg), SCMP_CMP_GE, 0)

/* The namespace flags of clone(2).  CLONE_NEWTIME (0x80) is not one of
 * them: clone(2) reads the low byte as the exit signal, and only clone3
 * and unshare accept it; both are refused outright. */
static const unsigned long clone_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

/* s390 passes clone's flags second (CLONE_BACKWARDS2). */
static unsigned int clone_flags_arg(void)
{
	uint32_t arch = seccomp_arch_native();

	return arch == SCMP_ARCH_S390 || arch == SCMP_ARCH_S390X ? 1 : 0;
}

static int add_clone(scmp_filter_ctx ctx)
{
	unsigned int arg = clone_flags_arg();
	unsigned long all = 0;
	int rc;

	for (size_t i = 0; i < sizeof(clone_ns_flags) / sizeof(clone_ns_flags[0]); i++) {
		unsigned long f = clone_ns_flags[i];

		all |= f;
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, f, f));
		if (rc < 0)
			return rc;
	}
	/* seccomp cannot read clone3's flags (they sit in a struct in user
	 * memory), so clone3 is left to the default ENOSYS and glibc falls
	 * back to clone, whose flags the rules above can see.  libseccomp
	 * refuses a rule whose action equals the default, so there is no
	 * explicit one; tests/unit/test_seccomp.c pins the ENOSYS. */
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, all, 0));
}

static int add_ioctl(scmp_filter_ctx ctx)
{
	static const unsigned long denied[] = { TIOCSTI, TIOCLINUX };
	int rc;

	/* The kernel reads cmd as 32 bits; compare it masked to 32 bits, or
	 * TIOCSTI with a high bit set slips past (CVE-2019-10063). */
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, denied[i]));
		if (rc < 0)
			return rc;
	}
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, ALWAYS(1));
}

static int add_personality(scmp_filter_ctx ctx)
{
	/* Docker's set: Linux, 32-bit Linux, UNAME26 of both, and the query.
	 * The kernel reads 32 bits, hence the mask.  Any other persona (e.g.
	 * READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE) weakens the process. */
	static const unsigned long allowed[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffffUL };
	int rc;

	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, allowed[i]));
		if (rc < 0)
			return rc;
	}
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1, ALWAYS(0));
}

static const struct arg_group arg_groups[] = {
	{ "@clone", "clone without namespace flags (any CLONE_NEW*: EPERM); clone3 gets ENOSYS",
	  P_ALL, "clone clone3", add_clone },
	{ "@ioctl", "ioctl, except faking terminal input (TIOCSTI, TIOCLINUX: EPERM)", P_ALL,
	  "ioctl", add_ioctl },
	{ "@personality", "personality: Linux personas and the query only, others EPERM", P_ALL,
	  "personality", add_personality },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static unsigned int profile_bit(const char *profile)
{
	if (!strcmp(profile, "approved"))
		return P_APPROVED;
	if (!strcmp(profile, "unattended"))
		return P_UNATTENDED;
	return 0;
}

static int add_group(scmp_filter_ctx ctx, const struct syscall_group *g, char *err,
		     size_t errlen)
{
	uint32_t action = g->action == G_ALLOW ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EPERM);

	for (const char *const *c = g->calls; *c; c++) {
		int nr = seccomp_syscall_resolve_name(*c);
		int rc;

		if (nr < 0)
			continue; /* not on this architecture, or newer than libseccomp */
		rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc < 0) {
			snprintf(err, errlen, "seccomp rule for %s in %s: %s", *c, g->name,
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int add_rules(scmp_filter_ctx ctx, unsigned int profile, char *err, size_t errlen)
{
	int rc;

	for (size_t i = 0; i < ARRAY_LEN(groups); i++) {
		if (!(groups[i].profiles & profile))
			continue;
		rc = add_group(ctx, &groups[i], err, errlen);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < ARRAY_LEN(arg_groups); i++) {
		if (!(arg_groups[i].profiles & profile))
			continue;
		rc = arg_groups[i].add(ctx);
		if (rc < 0) {
			snprintf(err, errlen, "seccomp rules for %s: %s", arg_groups[i].name,
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int read_exact_at(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		got += (size_t)n;
	}
	return 0;
}

/* libseccomp 2.5 can only export into a file descriptor: a memfd keeps
 * the program off the file system, and it is read back into memory the
 * child can hand to seccomp(2) directly. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *out, char *err, size_t errlen)
{
	struct sock_filter *prog;
	struct stat st;
	size_t n;
	int fd, rc;

	fd = memfd_create("kotoba-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "memfd_create for the seccomp program: %s", strerror(-rc));
		return rc;
	}
	rc = seccomp_export_bpf(ctx, fd);
	if (rc == 0 && fstat(fd, &st) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "exporting the seccomp program: %s", strerror(-rc));
		close(fd);
		return rc;
	}
	n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (n == 0 || n > BPF_MAXINSNS || (size_t)st.st_size % sizeof(struct sock_filter)) {
		snprintf(err, errlen, "seccomp program has a bad size (%lld bytes)",
			 (long long)st.st_size);
		close(fd);
		return -E2BIG;
	}
	prog = malloc((size_t)st.st_size);
	rc = prog ? read_exact_at(fd, prog, (size_t)st.st_size) : -ENOMEM;
	close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "reading back the seccomp program: %s", strerror(-rc));
		free(prog);
		return rc;
	}
	out->len = (unsigned short)n;
	out->filter = prog;
	return 0;
}

static int new_filter(scmp_filter_ctx *ctx, char *err, size_t errlen)
{
	int rc;

	*ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!*ctx) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	rc = seccomp_attr_set(*ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	/* A binary tree over syscall numbers: every call of the snippet
	 * passes through this program. */
	if (rc == 0)
		rc = seccomp_attr_set(*ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp filter attributes: %s", strerror(-rc));
		seccomp_release(*ctx);
		*ctx = NULL;
	}
	return rc;
}

int seccomp_build(const char *profile, struct sock_fprog *out, char *err, size_t errlen)
{
	unsigned int p = profile_bit(profile);
	scmp_filter_ctx ctx;
	int rc;

	out->len = 0;
	out->filter = NULL;
	if (!p) {
		snprintf(err, errlen, "unknown seccomp profile '%s'", profile);
		return -EINVAL;
	}
	rc = new_filter(&ctx, err, errlen);
	if (rc < 0)
		return rc;
	rc = add_rules(ctx, p, err, errlen);
	if (rc == 0)
		rc = export_bpf(ctx, out, err, errlen);
	seccomp_release(ctx);
	return rc;
}

void seccomp_prog_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}

static const char *profiles_text(unsigned int p)
{
	switch (p) {
	case P_ALL:
		return "approved, unattended";
	case P_APPROVED:
		return "approved";
	case P_UNATTENDED:
		return "unattended";
	default:
		return "none";
	}
}

void seccomp_describe(FILE *out)
{
	fprintf(out, "# default: ENOSYS; foreign architectures: EPERM\n");
	for (size_t i = 0; i < ARRAY_LEN(groups); i++) {
		const struct syscall_group *g = &groups[i];

		fprintf(out, "%s (%s; %s): %s\n   ", g->name,
			g->action == G_ALLOW ? "allow" : "EPERM", profiles_text(g->profiles),
			g->help);
		for (const char *const *c = g->calls; *c; c++)
			fprintf(out, " %s%s", *c, seccomp_syscall_resolve_name(*c) < 0 ? "(-)" : "");
		fputc('\n', out);
	}
	for (size_t i = 0; i < ARRAY_LEN(arg_groups); i++)
		fprintf(out, "%s (by argument; %s): %s\n    %s\n", arg_groups[i].name,
			profiles_text(arg_groups[i].profiles), arg_groups[i].help,
			arg_groups[i].calls);
	fprintf(out, "# (-): not on this architecture or unknown to this libseccomp; "
		     "left to the default\n");
}
