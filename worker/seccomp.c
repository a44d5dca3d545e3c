/* SPDX-License-Identifier: MIT
 * The seccomp policy of a snippet, as named groups, for three profiles.
 *
 * An allowlist: anything no group names gets ENOSYS, which libc and Python
 * read as "this kernel lacks the call" and fall back from (clone3 -> clone,
 * openat2 -> openat).  What we refuse on purpose gets EPERM (EACCES where
 * Landlock would have said EACCES), which Python turns into a readable
 * PermissionError.  Nothing is ever KILL: a denied call must be an
 * exception the snippet can report, not a mystery SIGSYS.
 *
 * approved    the baseline: normal work, kernel-attack surface denied.
 * unattended  the baseline narrowed to the spec's honest statement of a
 *             grant (compute, read, connect out).  Where Landlock holds a
 *             rule (worker/landlock.c) the filter lets the call through
 *             and Landlock decides by path; where the Landlock ABI in force
 *             is too old, or Landlock is off, the filter holds the rule
 *             itself, by argument, as far as seccomp can see: it cannot
 *             read paths, so without Landlock no file can be opened for
 *             writing at all, not even in the scratch directory.
 *             chmod and utime go to the supervisor through the exec
 *             gate's listener (worker/fileattr.c), which makes the change
 *             itself beneath the run's scratch and /dev/shm mounts only;
 *             so does every open for writing, which the supervisor's write
 *             witness records when the sandbox refuses it, then leaves to
 *             Landlock (or, without it, refuses itself).
 * engine      sandbox = docker: not the snippet but the container engine's
 *             CLI (podman --remote, docker), a client of the engine's API
 *             socket; the snippet runs in the container.  The approved
 *             baseline with SysV/POSIX IPC refused and sockets narrowed to
 *             what a client needs: Unix, IPv4, IPv6 and routing netlink,
 *             nothing that listens.  exec stays open (credential helpers,
 *             plugins): the snippet is not on this host.  Its Landlock
 *             ruleset is unattended's (worker/landlock.c).
 *
 * Names are resolved with libseccomp for the native architecture; names
 * this architecture lacks (mmap2, socketcall...) add nothing to its
 * program, and names this libseccomp does not know yet are skipped, which
 * for an allowlist fails closed.  Foreign architectures (i386 via int
 * 0x80, x32) get EPERM as a whole.  The unattended and engine profiles are
 * not built where socketcall(2) exists (refuse_socketcall_arch).
 *
 * kotoba-worker does not link this file: worker/gen/seccomp_gen.c runs it
 * at build time for every profile and Landlock ABI, and the worker loads
 * the programs it wrote (worker/seccomp.h, worker/seccomp_load.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/ioprio.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/net.h>
#include <linux/netlink.h>

#include "worker/seccomp.h"

enum profile {
	P_APPROVED = 1u << 0,
	P_UNATTENDED = 1u << 1,
	P_ENGINE = 1u << 2,
};

enum action {
	A_NONE,     /* not listed: the filter's default, ENOSYS */
	A_ALLOW,
	A_EPERM,    /* deliberate: the snippet is told "not permitted" */
	A_LANDLOCK, /* allowed while Landlock ABI >= ll_abi holds it, else EPERM */
	A_GATE,     /* the exec gate: SECCOMP_RET_USER_NOTIF, see execgate.c */
	A_ATTR,     /* the same listener; S changes modes and times in the
		     * run's own places only, see fileattr.c */
};

struct syscall_group {
	const char *name;
	const char *help;
	enum action approved, unattended, engine;
	unsigned int ll_abi; /* with A_LANDLOCK */
	const char *const *calls;
};

/* What a rule needs to know about the snippet it is built for. */
struct build {
	enum profile profile;
	unsigned int abi;
	pid_t self;
};

/* Groups whose rules look at arguments are added by code, not by name. */
struct arg_group {
	const char *name;
	const char *approved;   /* help text per profile ("same": as approved) */
	const char *unattended;
	const char *engine;
	const char *calls;      /* for the documentation only */
	int (*add)(scmp_filter_ctx ctx, const struct build *b);
};

#define CALLS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define ALL(a) (a), (a), (a), 0

static const struct syscall_group groups[] = {
	/* ---- allowed ---------------------------------------------------- */
	{ "@basic-io", "Read, write, seek and close what is already open", ALL(A_ALLOW),
	  CALLS("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
		"preadv2", "pwritev2", "lseek", "_llseek", "close", "close_range", "dup", "dup2",
		"dup3", "pipe", "pipe2", "sendfile", "sendfile64", "splice", "tee", "vmsplice",
		"copy_file_range") },
	{ "@file-read", "Inspect, list and watch files; sync (opening: see @open)",
	  ALL(A_ALLOW),
	  CALLS("access", "faccessat", "faccessat2", "stat", "lstat", "fstat", "newfstatat",
		"statx", "stat64", "lstat64", "fstat64", "fstatat64", "statfs", "fstatfs",
		"statfs64", "fstatfs64", "getdents", "getdents64", "readlink", "readlinkat",
		"getcwd", "chdir", "fchdir", "umask", "flock", "fadvise64", "fadvise64_64",
		"readahead", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
		"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
		"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr") },
	{ "@file-write-fd", "Resize or preallocate a file already open for writing",
	  ALL(A_ALLOW), CALLS("ftruncate", "ftruncate64", "fallocate") },
	{ "@file-create", "Create, remove, rename and link names (Landlock limits them to "
			  "the scratch directory)",
	  A_ALLOW, A_LANDLOCK, A_ALLOW, 1,
	  CALLS("mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
		"renameat2", "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat") },
	{ "@file-truncate", "Truncate a file by path (Landlock ABI 3 holds it)", A_ALLOW,
	  A_LANDLOCK, A_ALLOW, 3, CALLS("truncate", "truncate64") },
	{ "@file-mode-time", "Change modes and times (no Landlock right covers these): "
			     "unattended, the supervisor makes the change, only in scratch and "
			     "the run's own /dev/shm (worker/fileattr.c)",
	  A_ALLOW, A_ATTR, A_ALLOW, 0,
	  CALLS("chmod", "fchmod", "fchmodat", "utime", "utimes", "utimensat", "futimesat") },
	{ "@file-owner-xattr", "Change owners and extended attributes (no Landlock right "
			       "covers these)",
	  A_ALLOW, A_EPERM, A_ALLOW, 0,
	  CALLS("chown", "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32",
		"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
		"fremovexattr") },
	{ "@exec", "Run a program: unattended, only python3 itself, once (the exec gate); "
		   "engine: any (the snippet is not on this host)",
	  A_ALLOW, A_GATE, A_ALLOW, 0, CALLS("execve", "execveat") },
	{ "@process", "Create, wait for and end processes and threads; read and drop identity",
	  ALL(A_ALLOW),
	  CALLS("fork", "vfork", "exit", "exit_group", "wait4", "waitid", "waitpid", "getpid",
		"getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
		"set_tid_address", "set_robust_list", "get_robust_list", "futex", "futex_waitv",
		"arch_prctl", "set_thread_area", "get_thread_area", "restart_syscall",
		"pidfd_open", "getuid", "geteuid", "getgid", "getegid", "getresuid",
		"getresgid", "getgroups", "setuid", "setgid", "setreuid", "setregid",
		"setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capget",
		"capset", "getrlimit", "setrlimit", "getrusage", "times", "getpriority",
		"ioprio_get", "sched_yield", "sched_getaffinity", "sched_getparam",
		"sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
		"sched_rr_get_interval", "sched_getattr") },
	{ "@signal", "Handle, mask and wait for signals (sending: see @signal-send)",
	  ALL(A_ALLOW),
	  CALLS("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
		"rt_sigpending", "rt_sigtimedwait", "sigaltstack", "signalfd", "signalfd4",
		"pause", "alarm", "sigaction", "sigprocmask", "sigreturn", "sigsuspend",
		"sigpending", "signal") },
	{ "@memory", "Map, protect and advise on the process's own memory", ALL(A_ALLOW),
	  CALLS("brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore",
		"msync", "mlock", "mlock2", "munlock", "mlockall", "munlockall", "memfd_create",
		"pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy", "set_mempolicy",
		"mbind", "remap_file_pages", "membarrier") },
	{ "@time", "Read clocks, sleep, and set timers (never set the clock)", ALL(A_ALLOW),
	  CALLS("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
		"time", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
		"timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
		"getitimer", "setitimer") },
	{ "@io-event", "Wait for file descriptors: poll, select, epoll, eventfd", ALL(A_ALLOW),
	  CALLS("poll", "ppoll", "select", "_newselect", "pselect6", "epoll_create",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
		"eventfd", "eventfd2") },
	{ "@aio", "Linux native asynchronous I/O (not io_uring)", ALL(A_ALLOW),
	  CALLS("io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
		"io_pgetevents") },
	{ "@network", "Use sockets: connect, send, receive (creating, binding, pairs, options: "
		      "see @socket)",
	  ALL(A_ALLOW),
	  CALLS("accept", "accept4", "connect", "getsockname", "getpeername", "sendto",
		"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
		"getsockopt") },
	{ "@ipc", "SysV IPC and POSIX message queues (objects that outlive the run)", A_ALLOW,
	  A_EPERM, A_EPERM, 0,
	  CALLS("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
		"msgget", "msgsnd", "msgrcv", "msgctl", "ipc", "mq_open", "mq_unlink",
		"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr") },
	{ "@misc", "Runtime odds and ends: randomness, system info, prctl, rseq", ALL(A_ALLOW),
	  /* landlock_* is not listed: its ENOSYS reads as "no Landlock here"
	   * to the libraries that probe it, and a snippet can only narrow
	   * itself with it anyway. */
	  CALLS("getrandom", "uname", "olduname", "sysinfo", "prctl", "rseq", "getcpu") },

	/* ---- denied with EPERM --------------------------------------------- */
	{ "@debug", "Inspect or change other processes (ptrace and friends)", ALL(A_EPERM),
	  CALLS("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
		"process_madvise") },
	{ "@mount", "Mount, unmount and change the root; new mount API", ALL(A_EPERM),
	  CALLS("mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
		"fsmount", "fspick", "move_mount", "open_tree", "mount_setattr") },
	{ "@namespaces", "Enter or create namespaces (kernel attack surface)", ALL(A_EPERM),
	  CALLS("unshare", "setns") },
	{ "@bpf", "Load BPF programs and maps", ALL(A_EPERM), CALLS("bpf") },
	{ "@module", "Load and unload kernel modules", ALL(A_EPERM),
	  CALLS("init_module", "finit_module", "delete_module", "create_module") },
	{ "@kexec", "Load a new kernel", ALL(A_EPERM), CALLS("kexec_load", "kexec_file_load") },
	{ "@reboot", "Reboot or halt", ALL(A_EPERM), CALLS("reboot") },
	{ "@swap", "Enable and disable swap", ALL(A_EPERM), CALLS("swapon", "swapoff") },
	{ "@keyring", "Kernel keyrings (shared per user, a frequent CVE source)", ALL(A_EPERM),
	  CALLS("keyctl", "add_key", "request_key") },
	{ "@userfaultfd", "User-space page faults (a race-widening primitive for exploits)",
	  ALL(A_EPERM), CALLS("userfaultfd") },
	{ "@perf", "Performance counters (kernel attack surface, side channels)", ALL(A_EPERM),
	  CALLS("perf_event_open") },
	{ "@io-uring", "io_uring (bypasses seccomp for the operations it performs)",
	  ALL(A_EPERM), CALLS("io_uring_setup", "io_uring_enter", "io_uring_register") },
	{ "@file-handles", "Open files by handle, around path permission checks", ALL(A_EPERM),
	  CALLS("open_by_handle_at", "name_to_handle_at") },
	{ "@raw-io", "Direct port I/O", ALL(A_EPERM),
	  CALLS("iopl", "ioperm", "pciconfig_iobase", "pciconfig_read", "pciconfig_write") },
	{ "@accounting", "Process accounting", ALL(A_EPERM), CALLS("acct") },
	{ "@quota", "Disk quotas", ALL(A_EPERM), CALLS("quotactl", "quotactl_fd") },
	{ "@syslog", "Read or control the kernel log", ALL(A_EPERM), CALLS("syslog") },
	{ "@clock", "Set or adjust the system clock", ALL(A_EPERM),
	  CALLS("settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime") },
	{ "@tty-hangup", "Hang up the controlling terminal", ALL(A_EPERM), CALLS("vhangup") },
	{ "@obsolete-profiling", "Profiling support removed from modern kernels", ALL(A_EPERM),
	  CALLS("lookup_dcookie") },
	{ "@fanotify", "Watch whole file systems (needs privilege; surface only)", ALL(A_EPERM),
	  CALLS("fanotify_init") },
};

/* ---- rules by argument ---------------------------------------------------- */

/* libseccomp lets an unconditional rule swallow every conditional rule of
 * the same syscall, whatever the order they are added in.  So the "and
 * the rest" half of an argument filter carries a comparison that is always
 * true (arg >= 0, unsigned): the rule stays conditional, and libseccomp
 * evaluates the specific tests before it.  tests/unit/test_seccomp.c checks
 * that both the exceptions and the rest still bite. */
#define ALWAYS(arg) SCMP_CMP((arg), SCMP_CMP_GE, 0)
/* The kernel reads int and unsigned int arguments as 32 bits; compare
 * them masked, so a value with high bits set cannot slip past. */
#define INT_EQ(arg, v) SCMP_CMP((arg), SCMP_CMP_MASKED_EQ, 0xffffffffUL, (uint32_t)(v))
#define EPERM_ACT SCMP_ACT_ERRNO(EPERM)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A rule by name, skipped where libseccomp does not know the call.  A
 * call the native architecture lacks (socketcall on x86_64) resolves to a
 * pseudo number: libseccomp puts it in the program of each architecture
 * of the filter that has it (seccomp_build_arch) and nowhere else. */
static int rule(scmp_filter_ctx ctx, uint32_t action, const char *call, unsigned int n,
		struct scmp_arg_cmp a, struct scmp_arg_cmp b, struct scmp_arg_cmp c)
{
	const struct scmp_arg_cmp cmp[3] = { a, b, c };
	int nr = seccomp_syscall_resolve_name(call);

	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

#define NOARG SCMP_A0(SCMP_CMP_GE, 0)
#define RULE0(ctx, act, call) rule((ctx), (act), (call), 0, NOARG, NOARG, NOARG)
#define RULE1(ctx, act, call, a) rule((ctx), (act), (call), 1, (a), NOARG, NOARG)
#define RULE2(ctx, act, call, a, b) rule((ctx), (act), (call), 2, (a), (b), NOARG)
#define RULE3(ctx, act, call, a, b, c) rule((ctx), (act), (call), 3, (a), (b), (c))

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

static int add_clone(scmp_filter_ctx ctx, const struct build *b)
{
	unsigned int arg = clone_flags_arg();
	unsigned long all = 0;
	int rc;

	for (size_t i = 0; i < ARRAY_LEN(clone_ns_flags); i++) {
		unsigned long f = clone_ns_flags[i];

		all |= f;
		rc = RULE1(ctx, EPERM_ACT, "clone", SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, f, f));
		if (rc < 0)
			return rc;
	}
	/* seccomp cannot read clone3's flags (they sit in a struct in user
	 * memory), so clone3 is left to the default ENOSYS and glibc falls
	 * back to clone, whose flags the rules above can see.  libseccomp
	 * refuses a rule whose action equals the default, so there is no
	 * explicit one; tests/unit/test_seccomp.c pins the ENOSYS. */
	return RULE1(ctx, SCMP_ACT_ALLOW, "clone", SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, all, 0));
}

/* Terminal and socket queries Python and its libraries make, for the
 * unattended allowlist: isatty, terminal size, bytes waiting, blocking
 * and close-on-exec modes, network interface names and addresses. */
static const unsigned long ioctl_queries[] = {
	TCGETS, TIOCGWINSZ, TIOCGPGRP, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX, FIOASYNC,
	FIOQSIZE, TIOCOUTQ, SIOCGIFNAME, SIOCGIFINDEX, SIOCGIFCONF, SIOCGIFFLAGS,
	SIOCGIFADDR, SIOCGIFNETMASK, SIOCGIFHWADDR, SIOCGIFMTU,
	/* TCGETS2 (_IOR('T', 0x2A, struct termios2)), which newer glibc
	 * uses for tcgetattr; struct termios2 clashes with <termios.h>. */
	0x802c542aUL,
};

static int add_ioctl_approved(scmp_filter_ctx ctx)
{
	static const unsigned long denied[] = { TIOCSTI, TIOCLINUX };
	int rc;

	/* cmd compared as 32 bits, or TIOCSTI with a high bit set slips
	 * past (CVE-2019-10063). */
	for (size_t i = 0; i < ARRAY_LEN(denied); i++) {
		rc = RULE1(ctx, EPERM_ACT, "ioctl", INT_EQ(1, denied[i]));
		if (rc < 0)
			return rc;
	}
	return RULE1(ctx, SCMP_ACT_ALLOW, "ioctl", ALWAYS(1));
}

/* Unattended: an allowlist.  Device and file-system ioctls are a large
 * driver surface, and some change files through a read-only descriptor
 * (FS_IOC_SETFLAGS: chattr).  The engine CLI gets approved's rule. */
static int add_ioctl(scmp_filter_ctx ctx, const struct build *b)
{
	int rc;

	if (b->profile != P_UNATTENDED)
		return add_ioctl_approved(ctx);
	for (size_t i = 0; i < ARRAY_LEN(ioctl_queries); i++) {
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "ioctl", INT_EQ(1, ioctl_queries[i]));
		if (rc < 0)
			return rc;
	}
	return RULE1(ctx, EPERM_ACT, "ioctl", ALWAYS(1));
}

static int add_personality(scmp_filter_ctx ctx, const struct build *b)
{
	/* Docker's set: Linux, 32-bit Linux, UNAME26 of both, and the query.
	 * Any other persona (e.g. READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE)
	 * weakens the process. */
	static const unsigned long allowed[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffffUL };
	int rc;

	for (size_t i = 0; i < ARRAY_LEN(allowed); i++) {
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "personality", INT_EQ(0, allowed[i]));
		if (rc < 0)
			return rc;
	}
	return RULE1(ctx, EPERM_ACT, "personality", ALWAYS(0));
}

/* open(2) takes its flags second, openat(2) third. */
static int open_flag_rules(scmp_filter_ctx ctx, unsigned long mask, unsigned long want)
{
	int rc = RULE1(ctx, SCMP_ACT_ALLOW, "open", SCMP_A1(SCMP_CMP_MASKED_EQ, mask, want));

	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "openat", SCMP_A2(SCMP_CMP_MASKED_EQ, mask, want));
	return rc;
}

/* Unattended: an open that only reads goes on; every other (an access
 * mode with write, 3 included, which opens for ioctl and still truncates;
 * O_CREAT; O_TRUNC; O_TMPFILE, whose bit is the one glibc's O_TMPFILE adds
 * to O_DIRECTORY, which plain directory opens carry) goes to the
 * supervisor's write witness (worker/fileattr.c), which records what the
 * sandbox refuses and lets Landlock decide, or refuses the call itself
 * where the filter holds the rule (no Landlock; O_TRUNC without write
 * access below ABI 3).  openat2 hides its flags in a struct: it gets the
 * default ENOSYS (no rule), and libc and Python use openat. */
#define OPEN_WRITES ((unsigned long)(O_ACCMODE | O_CREAT | O_TRUNC | (O_TMPFILE & ~O_DIRECTORY)))

static int add_open_witnessed(scmp_filter_ctx ctx)
{
	int rc = open_flag_rules(ctx, OPEN_WRITES, 0);

	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_NOTIFY, "open", ALWAYS(1));
	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_NOTIFY, "openat", ALWAYS(2));
	return rc ? rc : RULE0(ctx, SCMP_ACT_NOTIFY, "creat");
}

static int add_open(scmp_filter_ctx ctx, const struct build *b)
{
	static const char *const calls[] = { "open", "openat", "creat", "openat2" };
	int rc = 0;

	if (b->profile == P_UNATTENDED)
		return add_open_witnessed(ctx);
	for (size_t i = 0; i < ARRAY_LEN(calls) && rc == 0; i++)
		rc = RULE0(ctx, SCMP_ACT_ALLOW, calls[i]);
	return rc;
}

/* Unattended without Landlock ABI 6: F_SETOWN would let SIGIO/SIGURG reach
 * another process whenever the descriptor becomes ready. */
static int add_fcntl(scmp_filter_ctx ctx, const struct build *b)
{
	static const char *const calls[] = { "fcntl", "fcntl64" };
	int rc = 0;

	for (size_t i = 0; i < ARRAY_LEN(calls) && rc == 0; i++) {
		if (b->profile != P_UNATTENDED || b->abi >= 6) {
			rc = RULE0(ctx, SCMP_ACT_ALLOW, calls[i]);
			continue;
		}
		rc = RULE1(ctx, EPERM_ACT, calls[i], INT_EQ(1, F_SETOWN));
		if (rc == 0)
			rc = RULE1(ctx, EPERM_ACT, calls[i], INT_EQ(1, F_SETOWN_EX));
		if (rc == 0)
			rc = RULE1(ctx, SCMP_ACT_ALLOW, calls[i], ALWAYS(1));
	}
	return rc;
}

/* Unattended without Landlock ABI 6: signals only to the snippet's first
 * process, its threads and its process group (the snippet leads its own
 * group and session), and the existence probe (signal 0) to anyone.  The
 * pids of later children are not known when the filter is built, so they
 * cannot be signalled by pid. */
static int add_signal_self(scmp_filter_ctx ctx, pid_t self)
{
	static const char *const first_is_tgid[] = {
		"tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	};
	int rc;

	rc = RULE1(ctx, SCMP_ACT_ALLOW, "kill", INT_EQ(0, 0));
	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "kill", INT_EQ(0, self));
	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "kill", INT_EQ(0, -self));
	if (rc == 0)
		rc = RULE1(ctx, SCMP_ACT_ALLOW, "kill", INT_EQ(1, 0));
	if (rc == 0)
		rc = RULE1(ctx, EPERM_ACT, "kill", ALWAYS(0));
	for (size_t i = 0; i < ARRAY_LEN(first_is_tgid) && rc == 0; i++) {
		rc = RULE1(ctx, SCMP_ACT_ALLOW, first_is_tgid[i], INT_EQ(0, self));
		if (rc == 0)
			rc = RULE1(ctx, EPERM_ACT, first_is_tgid[i], ALWAYS(0));
	}
	/* A pidfd may name any process: no way to tell ours apart. */
	return rc ? rc : RULE0(ctx, EPERM_ACT, "pidfd_send_signal");
}

static int add_signal_send(scmp_filter_ctx ctx, const struct build *b)
{
	static const char *const calls[] = {
		"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
		"pidfd_send_signal",
	};
	int rc = 0;

	if (b->profile == P_UNATTENDED && b->abi < 6)
		return add_signal_self(ctx, b->self);
	for (size_t i = 0; i < ARRAY_LEN(calls) && rc == 0; i++)
		rc = RULE0(ctx, SCMP_ACT_ALLOW, calls[i]);
	return rc;
}

/* Unattended sockets: IPv4/IPv6 stream and datagram with the default,
 * TCP or UDP protocol (no raw, no SCTP or other module-loaded protocols),
 * and the routing netlink that getaddrinfo asks about interfaces.  No
 * AF_UNIX socket: a path socket can be a door to a more privileged service
 * (D-Bus, systemd, docker.sock) that Landlock does not guard, and name
 * resolution works without it (glibc falls back from nscd, and
 * nss-resolve to dns).  Pairs: see add_socketpair. */
static int add_socket_unattended(scmp_filter_ctx ctx)
{
	static const int families[] = { AF_INET, AF_INET6 };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	static const int protos[] = { 0, IPPROTO_TCP, IPPROTO_UDP };
	int rc = 0;

	for (size_t f = 0; f < ARRAY_LEN(families); f++)
		for (size_t t = 0; t < ARRAY_LEN(types); t++)
			for (size_t p = 0; p < ARRAY_LEN(protos) && rc == 0; p++)
				rc = RULE3(ctx, SCMP_ACT_ALLOW, "socket", INT_EQ(0, families[f]),
					   SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, types[t]),
					   INT_EQ(2, protos[p]));
	for (size_t t = 0; t < ARRAY_LEN(types) && rc == 0; t++)
		rc = RULE3(ctx, SCMP_ACT_ALLOW, "socket", INT_EQ(0, AF_NETLINK),
			   SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, t ? SOCK_DGRAM : SOCK_RAW),
			   INT_EQ(2, NETLINK_ROUTE));
	return rc ? rc : RULE1(ctx, EPERM_ACT, "socket", ALWAYS(0));
}

/* The engine CLI: a client of the engine's API socket, which is a Unix
 * socket (podman --remote, docker) or TCP (a remote engine), and of name
 * resolution.  AF_UNIX, AF_INET and AF_INET6 of any type; for IP only the
 * default, TCP or UDP protocol, as unattended (raw sockets need
 * CAP_NET_RAW, which is gone; SCTP, DCCP and the like would load kernel
 * modules nobody asked for); and routing netlink.  Everything else EPERM:
 * packet, vsock, Bluetooth, other netlink families. */
static int add_socket_engine(scmp_filter_ctx ctx)
{
	static const int families[] = { AF_INET, AF_INET6 };
	static const int protos[] = { 0, IPPROTO_TCP, IPPROTO_UDP };
	static const int nl_types[] = { SOCK_RAW, SOCK_DGRAM };
	int rc = RULE1(ctx, SCMP_ACT_ALLOW, "socket", INT_EQ(0, AF_UNIX));

	for (size_t f = 0; f < ARRAY_LEN(families); f++)
		for (size_t p = 0; p < ARRAY_LEN(protos) && rc == 0; p++)
			rc = RULE2(ctx, SCMP_ACT_ALLOW, "socket", INT_EQ(0, families[f]),
				   INT_EQ(2, protos[p]));
	for (size_t t = 0; t < ARRAY_LEN(nl_types) && rc == 0; t++)
		rc = RULE3(ctx, SCMP_ACT_ALLOW, "socket", INT_EQ(0, AF_NETLINK),
			   SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, nl_types[t]),
			   INT_EQ(2, NETLINK_ROUTE));
	return rc ? rc : RULE1(ctx, EPERM_ACT, "socket", ALWAYS(0));
}

/* Engine bind: only an address the size of a sockaddr_nl, which is
 * getaddrinfo binding its netlink socket.  IPv4 and IPv6 need at least 16
 * bytes (EINVAL), so nothing listens or receives on a port.  A Unix
 * socket could still take a 10-byte path: Landlock stops that outside the
 * scratch directory, so without Landlock bind is refused.
 *
 * Unattended: no bind at all.  A 12-byte address is also an abstract Unix
 * name of nine characters, and a socketpair end takes one, connected or
 * not, where any host process can find it; seccomp cannot read the
 * address to tell the two apart.  glibc's getaddrinfo does without: when
 * it cannot bind its netlink socket it assumes both IPv4 and IPv6 are
 * configured (check_pf.c).  getifaddrs() and if_nameindex() fail. */
static int add_bind(scmp_filter_ctx ctx, const struct build *b)
{
	int rc = 0;

	if (b->profile == P_UNATTENDED || b->abi == 0)
		return RULE0(ctx, EPERM_ACT, "bind");
	rc = RULE1(ctx, SCMP_ACT_ALLOW, "bind", INT_EQ(2, sizeof(struct sockaddr_nl)));
	return rc ? rc : RULE1(ctx, EPERM_ACT, "bind", ALWAYS(2));
}

/* Whether socketpair and setsockopt are narrowed (else allowed outright). */
static bool pairs_narrowed(const struct build *b)
{
	return b->profile == P_UNATTENDED;
}

/* Unattended pairs: AF_UNIX stream only (with SOCK_CLOEXEC, SOCK_NONBLOCK),
 * which is what multiprocessing.Pipe and asyncio's self-pipe make.  A
 * connected stream end cannot be re-aimed: sendto with an address gives
 * EISCONN, connect EISCONN (or EINVAL for AF_UNSPEC).  A datagram end can
 * (sendto any path or abstract name, connect(AF_UNSPEC) and connect
 * again), and other families would load kernel modules (AF_TIPC). */
static int add_socketpair(scmp_filter_ctx ctx, const struct build *b)
{
	const unsigned long type_mask = 0xffffffffUL & ~(unsigned long)(SOCK_CLOEXEC | SOCK_NONBLOCK);
	int rc;

	if (!pairs_narrowed(b))
		return RULE0(ctx, SCMP_ACT_ALLOW, "socketpair");
	rc = RULE3(ctx, SCMP_ACT_ALLOW, "socketpair", INT_EQ(0, AF_UNIX),
		   SCMP_A1(SCMP_CMP_MASKED_EQ, type_mask, SOCK_STREAM), INT_EQ(2, 0));
	return rc ? rc : RULE1(ctx, EPERM_ACT, "socketpair", ALWAYS(0));
}

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif

/* Unattended: not SO_PASSCRED or SO_PASSPIDFD.  With either set, connect
 * on a Unix socket without an address autobinds it to an abstract name
 * before it finds the socket connected, and that name stays: an abstract
 * address the snippet holds on the host. */
static int add_setsockopt(scmp_filter_ctx ctx, const struct build *b)
{
	static const int passing[] = { SO_PASSCRED, SO_PASSPIDFD };
	int rc = 0;

	if (!pairs_narrowed(b))
		return RULE0(ctx, SCMP_ACT_ALLOW, "setsockopt");
	for (size_t i = 0; i < ARRAY_LEN(passing) && rc == 0; i++)
		rc = RULE2(ctx, EPERM_ACT, "setsockopt", INT_EQ(1, SOL_SOCKET),
			   INT_EQ(2, passing[i]));
	return rc ? rc : RULE1(ctx, SCMP_ACT_ALLOW, "setsockopt", ALWAYS(1));
}

/* Unattended and engine share listen: the engine CLI dials out and never
 * serves. */
static int add_socket(scmp_filter_ctx ctx, const struct build *b)
{
	static const char *const calls[] = { "socket", "bind", "listen" };
	int rc = 0;

	if (b->profile == P_APPROVED) {
		for (size_t i = 0; i < ARRAY_LEN(calls) && rc == 0; i++)
			rc = RULE0(ctx, SCMP_ACT_ALLOW, calls[i]);
	} else {
		rc = b->profile == P_ENGINE ? add_socket_engine(ctx) : add_socket_unattended(ctx);
		if (rc == 0)
			rc = add_bind(ctx, b);
		if (rc == 0)
			rc = RULE0(ctx, EPERM_ACT, "listen");
	}
	if (rc == 0)
		rc = add_socketpair(ctx, b);
	if (rc == 0)
		rc = add_setsockopt(ctx, b);
	/* Approved only; see refuse_socketcall_arch. */
	if (rc == 0 && b->profile == P_APPROVED)
		rc = RULE0(ctx, SCMP_ACT_ALLOW, "socketcall");
	return rc;
}

/* Calls that may name another process of the same user: only the caller
 * itself (pid 0).  Otherwise a snippet could lower the broker's rlimits
 * (RLIMIT_CPU kills it), renice it, or pin it to a CPU. */
static int add_self_only(scmp_filter_ctx ctx, const struct build *b)
{
	static const char *const pid_first[] = {
		"prlimit64", "sched_setaffinity", "sched_setparam", "sched_setscheduler",
		"sched_setattr",
	};
	int rc = 0;

	for (size_t i = 0; i < ARRAY_LEN(pid_first) && rc == 0; i++) {
		rc = RULE1(ctx, SCMP_ACT_ALLOW, pid_first[i], INT_EQ(0, 0));
		if (rc == 0)
			rc = RULE1(ctx, EPERM_ACT, pid_first[i], ALWAYS(0));
	}
	if (rc == 0)
		rc = RULE2(ctx, SCMP_ACT_ALLOW, "setpriority", INT_EQ(0, PRIO_PROCESS),
			   INT_EQ(1, 0));
	if (rc == 0)
		rc = RULE1(ctx, EPERM_ACT, "setpriority", ALWAYS(0));
	if (rc == 0)
		rc = RULE2(ctx, SCMP_ACT_ALLOW, "ioprio_set", INT_EQ(0, IOPRIO_WHO_PROCESS),
			   INT_EQ(1, 0));
	return rc ? rc : RULE1(ctx, EPERM_ACT, "ioprio_set", ALWAYS(0));
}

/* seccomp(2) is allowed because a filter can only narrow what this one
 * permits.  Unattended, not with a listener of its own: a newer
 * USER_NOTIF filter would answer exec before the exec gate (the kernel
 * refuses it with EBUSY while the gate listens; this says so first). */
static int add_seccomp(scmp_filter_ctx ctx, const struct build *b)
{
	int rc;

	if (b->profile != P_UNATTENDED)
		return RULE0(ctx, SCMP_ACT_ALLOW, "seccomp");
	rc = RULE1(ctx, EPERM_ACT, "seccomp",
		   SCMP_A1(SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			   SECCOMP_FILTER_FLAG_NEW_LISTENER));
	return rc ? rc : RULE1(ctx, SCMP_ACT_ALLOW, "seccomp", ALWAYS(1));
}

static const struct arg_group arg_groups[] = {
	{ "@clone", "clone without namespace flags (CLONE_NEW*: EPERM); clone3 ENOSYS", "same",
	  "as approved", "clone clone3", add_clone },
	{ "@ioctl", "all but faking terminal input (TIOCSTI, TIOCLINUX: EPERM)",
	  "terminal, readiness and network-interface queries only; others EPERM", "as approved",
	  "ioctl", add_ioctl },
	{ "@personality", "Linux personas and the query only, others EPERM", "same", "as approved",
	  "personality", add_personality },
	{ "@open", "open, openat, openat2, creat",
	  "reading: allow; for writing, creating or truncating: the supervisor's write "
	  "witness, which records a refusal and lets Landlock decide by path (ABI >= 3; "
	  "ABI 1-2: O_TRUNC only with write access, else EACCES; no Landlock: EACCES, "
	  "the supervisor's own answer); openat2 ENOSYS",
	  "as approved (with Landlock, Landlock decides by path)", "open openat openat2 creat",
	  add_open },
	{ "@fcntl", "all",
	  "all, but F_SETOWN and F_SETOWN_EX (EPERM) below Landlock ABI 6", "as approved",
	  "fcntl fcntl64", add_fcntl },
	{ "@signal-send", "to any process the user may signal",
	  "Landlock ABI >= 6: scoped to the snippet's own processes; below: only its first "
	  "process, its threads, its group, and signal 0; pidfd_send_signal EPERM",
	  "as approved (Landlock ABI >= 6 scopes it to the CLI's own processes)",
	  "kill tkill tgkill rt_sigqueueinfo rt_tgsigqueueinfo pidfd_send_signal",
	  add_signal_send },
	{ "@socket", "any socket, bind, listen, socketpair, setsockopt, socketcall",
	  "AF_INET/AF_INET6 stream and datagram (default, TCP or UDP protocol) and "
	  "AF_NETLINK/NETLINK_ROUTE; others EPERM (raw, packet, AF_UNIX); socketpair only "
	  "AF_UNIX stream, others EPERM (datagram, seqpacket); bind and listen EPERM; "
	  "setsockopt SO_PASSCRED and SO_PASSPIDFD EPERM; socketcall: not built where it exists",
	  "AF_UNIX of any type, AF_INET/AF_INET6 of any type (default, TCP or UDP "
	  "protocol) and AF_NETLINK/NETLINK_ROUTE; others EPERM (packet, vsock...); bind "
	  "only a netlink-sized address and only under Landlock; listen EPERM; socketcall: "
	  "not built where it exists",
	  "socket bind listen socketpair setsockopt socketcall", add_socket },
	{ "@self-only", "pid 0 (the caller) only, others EPERM", "same", "as approved",
	  "prlimit64 setpriority ioprio_set sched_setaffinity sched_setparam "
	  "sched_setscheduler sched_setattr",
	  add_self_only },
	{ "@seccomp", "narrow the filter further",
	  "narrow it further, but with no listener of its own (EPERM)", "as approved", "seccomp",
	  add_seccomp },
};

/* ---- building ----------------------------------------------------------- */

/* The profile named `name` in proto/names.h's table, as this policy's bit;
 * 0 for a name the worker never runs under. */
static enum profile profile_of(const char *name)
{
	switch (names_find(&proto_profiles, name, strlen(name))) {
	case PROFILE_APPROVED: return P_APPROVED;
	case PROFILE_UNATTENDED: return P_UNATTENDED;
	case PROFILE_ENGINE: return P_ENGINE;
	default: return 0;
	}
}

static uint32_t group_action(const struct syscall_group *g, const struct build *b)
{
	enum action a = b->profile == P_APPROVED     ? g->approved
			: b->profile == P_UNATTENDED ? g->unattended
						     : g->engine;

	switch (a) {
	case A_ALLOW:
		return SCMP_ACT_ALLOW;
	case A_EPERM:
		return EPERM_ACT;
	case A_LANDLOCK:
		return b->abi >= g->ll_abi ? SCMP_ACT_ALLOW : EPERM_ACT;
	case A_GATE:
	case A_ATTR:
		return SCMP_ACT_NOTIFY;
	case A_NONE:
	default:
		return SCMP_ACT_ERRNO(ENOSYS);
	}
}

static int add_group(scmp_filter_ctx ctx, const struct syscall_group *g, const struct build *b,
		     char *err, size_t errlen)
{
	uint32_t action = group_action(g, b);

	if (action == SCMP_ACT_ERRNO(ENOSYS))
		return 0; /* the default already */
	for (const char *const *c = g->calls; *c; c++) {
		int rc = RULE0(ctx, action, *c);

		if (rc < 0) {
			snprintf(err, errlen, "seccomp rule for %s in %s: %s", *c, g->name,
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int add_rules(scmp_filter_ctx ctx, const struct build *b, char *err, size_t errlen)
{
	int rc;

	for (size_t i = 0; i < ARRAY_LEN(groups); i++) {
		rc = add_group(ctx, &groups[i], b, err, errlen);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < ARRAY_LEN(arg_groups); i++) {
		rc = arg_groups[i].add(ctx, b);
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
 * the program off the file system, and it is read back into memory that
 * seccomp(2) takes directly. */
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

/* A filter for `arch` alone; calls of any other architecture get
 * `badarch`. */
static int new_filter(scmp_filter_ctx *ctx, uint32_t arch, uint32_t badarch, char *err,
		      size_t errlen)
{
	int rc = 0;

	*ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!*ctx) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	if (arch != seccomp_arch_native()) {
		rc = seccomp_arch_add(*ctx, arch);
		if (rc == 0)
			rc = seccomp_arch_remove(*ctx, seccomp_arch_native());
	}
	if (rc == 0)
		rc = seccomp_attr_set(*ctx, SCMP_FLTATR_ACT_BADARCH, badarch);
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

/* socketcall(2) multiplexes every socket call on i386, s390, PowerPC,
 * MIPS o32 and others, with the arguments in user memory that seccomp
 * cannot read.  libseccomp folds a rule on socket(2) into one on
 * socketcall by call number there, and drops or refuses the argument
 * comparisons: the narrowing profiles would allow socket(AF_UNIX) and bind
 * through socketcall, or not build at all.  So they are not built where
 * socketcall exists; the approved profile allows it. */
static int refuse_socketcall_arch(const struct build *b, uint32_t arch, char *err,
				  size_t errlen)
{
	if (b->profile == P_APPROVED || seccomp_syscall_resolve_name_arch(arch, "socketcall") < 0)
		return 0;
	snprintf(err, errlen, "the %s seccomp profile filters socket calls by their arguments, "
		 "which socketcall(2) hides on this architecture (%#x): not supported",
		 profile_name(b->profile == P_UNATTENDED ? PROFILE_UNATTENDED : PROFILE_ENGINE), arch);
	return -EOPNOTSUPP;
}

int seccomp_build_arch(const struct seccomp_opts *o, uint32_t arch, uint32_t badarch,
		       struct sock_fprog *out, char *err, size_t errlen)
{
	struct build b = { profile_of(o->profile), o->landlock_abi, o->self };
	scmp_filter_ctx ctx;
	int rc;

	out->len = 0;
	out->filter = NULL;
	if (!b.profile) {
		snprintf(err, errlen, "unknown seccomp profile '%s'", o->profile);
		return -EINVAL;
	}
	if (b.profile == P_UNATTENDED && b.self <= 0) {
		snprintf(err, errlen, "the unattended filter needs the snippet's pid");
		return -EINVAL;
	}
	rc = refuse_socketcall_arch(&b, arch, err, errlen);
	if (rc == 0)
		rc = new_filter(&ctx, arch, badarch, err, errlen);
	if (rc < 0)
		return rc;
	rc = add_rules(ctx, &b, err, errlen);
	if (rc == 0)
		rc = export_bpf(ctx, out, err, errlen);
	seccomp_release(ctx);
	return rc;
}

/* Foreign architectures (i386 on x86_64, x32) get EPERM as a whole. */
int seccomp_build(const struct seccomp_opts *o, struct sock_fprog *out, char *err,
		  size_t errlen)
{
	return seccomp_build_arch(o, seccomp_arch_native(), SCMP_ACT_ERRNO(EPERM), out, err,
				  errlen);
}

void seccomp_prog_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}

/* ---- documentation -------------------------------------------------------- */

static const char *action_text(enum action a)
{
	switch (a) {
	case A_ALLOW:
		return "allow";
	case A_EPERM:
		return "EPERM";
	case A_LANDLOCK:
		return "allow while Landlock holds it, else EPERM";
	case A_GATE:
		return "exec gate";
	case A_ATTR:
		return "the supervisor: scratch and the run's /dev/shm only, else EPERM";
	case A_NONE:
	default:
		return "ENOSYS";
	}
}

/* A's wording in the documentation; A_LANDLOCK names its ABI. */
static void describe_action(FILE *out, enum action a, unsigned int ll_abi)
{
	if (a == A_LANDLOCK)
		fprintf(out, "allow with Landlock ABI >= %u, else EPERM", ll_abi);
	else
		fputs(action_text(a), out);
}

static void describe_group(FILE *out, const struct syscall_group *g)
{
	if (g->approved == g->unattended && g->approved == g->engine) {
		fprintf(out, "%s (%s in all profiles): %s\n   ", g->name, action_text(g->approved),
			g->help);
	} else {
		fprintf(out, "%s (approved: ", g->name);
		describe_action(out, g->approved, g->ll_abi);
		fputs("; unattended: ", out);
		describe_action(out, g->unattended, g->ll_abi);
		fputs("; engine: ", out);
		describe_action(out, g->engine, g->ll_abi);
		fprintf(out, "): %s\n   ", g->help);
	}
	for (const char *const *c = g->calls; *c; c++)
		fprintf(out, " %s%s", *c, seccomp_syscall_resolve_name(*c) < 0 ? "(-)" : "");
	fputc('\n', out);
}

void seccomp_describe(FILE *out)
{
	fprintf(out, "# profiles: approved (a person read the snippet), unattended (it runs "
		     "without anyone seeing it), engine (sandbox = docker: the container "
		     "engine's CLI, whose snippet runs in the container)\n"
		     "# default: ENOSYS; foreign architectures: EPERM\n");
	for (size_t i = 0; i < ARRAY_LEN(groups); i++)
		describe_group(out, &groups[i]);
	for (size_t i = 0; i < ARRAY_LEN(arg_groups); i++) {
		const struct arg_group *g = &arg_groups[i];

		fprintf(out, "%s (by argument): %s\n    approved: %s\n    unattended: %s\n"
			     "    engine: %s\n",
			g->name, g->calls, g->approved, g->unattended, g->engine);
	}
	fprintf(out, "# exec gate: the first exec (python3, by the worker) is let through by "
		     "the supervisor; every later one fails with EPERM\n"
		     "# (-): not on this architecture or unknown to this libseccomp; "
		     "left to the default\n");
}
