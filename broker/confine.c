/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/confine.h"
#include "proto/landlock_abi.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* Every right that changes a file or runs one, as this kernel knows them:
 * reading stays free. */
static uint64_t fs_handled(unsigned abi)
{
	return kl_fs_rights(abi) & ~(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR);
}

/* Beneath the state directory and the cgroup tree: files and directories
 * made, written and removed; nothing executed, no device made. */
static uint64_t fs_store(unsigned abi)
{
	return fs_handled(abi) & ~(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
				   LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_IOCTL_DEV);
}

static int landlock_ruleset(unsigned abi)
{
	struct kl_ruleset_attr attr = { .handled_access_fs = fs_handled(abi) };
	size_t size = sizeof(attr.handled_access_fs);

	if (abi >= 4) {
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP |
					  LANDLOCK_ACCESS_NET_CONNECT_TCP;
		size += sizeof(attr.handled_access_net);
	}
	/* Signals, and abstract sockets unless sd_notify's is one. */
	if (abi >= 6) {
		const char *notify = getenv("NOTIFY_SOCKET");

		attr.scoped = LANDLOCK_SCOPE_SIGNAL;
		if (!notify || notify[0] != '@')
			attr.scoped |= LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
		size += sizeof(attr.scoped);
	}
	return (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
}

/* 0 with *abi_out the ABI applied, 0 too (and *abi_out 0) on a kernel
 * without Landlock, or -errno with *what the failing call. */
static int apply_landlock(const struct confine_dir *dirs, size_t n, unsigned *abi_out,
			  const char **what)
{
	long probe = syscall(SYS_landlock_create_ruleset, NULL, 0,
			     LANDLOCK_CREATE_RULESET_VERSION);
	unsigned abi = probe > 0 ? (probe > KL_ABI_KNOWN ? KL_ABI_KNOWN : (unsigned)probe) : 0;
	int ruleset, rc = 0;

	*abi_out = 0;
	if (!abi)
		return 0;
	*what = "landlock_create_ruleset";
	if ((ruleset = landlock_ruleset(abi)) < 0)
		return -errno;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct kl_path_beneath_attr rule = {
			.allowed_access = dirs[i].remove_only ? LANDLOCK_ACCESS_FS_REMOVE_FILE
							      : fs_store(abi),
			.parent_fd = dirs[i].fd,
		};

		*what = "landlock_add_rule";
		if (syscall(SYS_landlock_add_rule, ruleset, KL_RULE_PATH_BENEATH, &rule, 0) < 0)
			rc = -errno;
	}
	if (rc == 0) {
		*what = "landlock_restrict_self";
		if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
			rc = -errno;
	}
	close(ruleset);
	if (rc == 0)
		*abi_out = abi;
	return rc;
}

/* Each kills the broker: it has no use for them once it serves, and each
 * is a step from a memory-safety bug in its parsers to more than the
 * service user's files.  connect() stays, on AF_UNIX sockets only (the
 * user database's lookups reach nscd or systemd-userdbd that way). */
static const char *const killed[] = {
	"execve", "execveat", "process_vm_readv", "process_vm_writev",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capset",
	"setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "move_mount",
	"open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"bind", "listen", "accept", "accept4",
	/* io_uring does its operations without the syscalls this filter sees */
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	/* a file's owner, mode and times: Landlock has no right for them, and
	 * the broker owns its socket (fchmod stays: SQLite sets the mode of
	 * the files it makes beside its database) */
	"chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchown", "fchownat",
	"utime", "utimes", "utimensat", "futimesat",
#ifndef __SANITIZE_ADDRESS__
	/* the monitor starts every process the broker has; a child of the
	 * broker's own could outlive it holding its links.  (LeakSanitizer
	 * stops the world at exit with a ptrace'ing clone: a sanitizer build
	 * keeps these two, ptrace and clone, out of the filter.) */
	"fork", "vfork", "ptrace",
#endif
};

/* Calls on another process (its first or second argument a pid, or
 * "who", other than 0 for itself): its limits, priority or scheduling,
 * which same-uid permission would let the broker change for the monitor. */
static const struct {
	const char *name;
	unsigned arg;
} on_others[] = {
	{ "prlimit64", 0 }, { "sched_setaffinity", 0 }, { "sched_setscheduler", 0 },
	{ "sched_setparam", 0 }, { "sched_setattr", 0 }, { "setpriority", 1 },
	{ "ioprio_set", 1 },
};


/* clone() with any of these makes a namespace. */
static const unsigned long ns_flags[] = {
	CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWCGROUP,
};

/* SCMP_A0() and kin leave datum_b to the compiler; every field named. */
static struct scmp_arg_cmp arg_is(unsigned arg, enum scmp_compare op, scmp_datum_t a,
				  scmp_datum_t b)
{
	return (struct scmp_arg_cmp){ .arg = arg, .op = op, .datum_a = a, .datum_b = b };
}

static int add_rules(scmp_filter_ctx ctx, const char **what)
{
	int rc;

	for (size_t i = 0; i < sizeof(killed) / sizeof(killed[0]); i++) {
		int nr = seccomp_syscall_resolve_name(killed[i]);

		*what = killed[i];
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0)) < 0)
			return rc;
	}
	*what = "socket";
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(socket), 1,
				   arg_is(0, SCMP_CMP_NE, AF_UNIX, 0))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(on_others) / sizeof(on_others[0]); i++) {
		int nr = seccomp_syscall_resolve_name(on_others[i].name);
		struct scmp_arg_cmp not_self = arg_is(on_others[i].arg, SCMP_CMP_NE, 0, 0);

		*what = on_others[i].name;
		if (nr != __NR_SCMP_ERROR &&
		    (rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 1, not_self)) < 0)
			return rc;
	}
	/* clone() of a thread only (a new process, a namespace: killed);
	 * clone3's flags are behind a pointer the filter cannot read, and
	 * libc falls back to clone() on ENOSYS. */
	*what = "clone";
#ifndef __SANITIZE_ADDRESS__
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
				   arg_is(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))) < 0)
		return rc;
#endif
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
					   arg_is(0, SCMP_CMP_MASKED_EQ, ns_flags[i],
						  ns_flags[i]))) < 0)
			return rc;
	*what = "clone3";
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
}

int confine_broker(const struct confine_dir *dirs, size_t n, unsigned *landlock_abi, char *err,
		   size_t errlen)
{
	scmp_filter_ctx ctx;
	const char *what = "seccomp_init";
	int rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot confine the broker: no_new_privs: %s",
			 strerror(errno));
		return -1;
	}
	if ((rc = apply_landlock(dirs, n, landlock_abi, &what)) < 0) {
		snprintf(err, errlen, "cannot confine the broker: %s: %s", what, strerror(-rc));
		return -1;
	}
	what = "seccomp_init";
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, errlen, "cannot confine the broker: seccomp_init failed");
		return -1;
	}
	/* A call made through another architecture's ABI is killed too. */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc == 0)
		rc = add_rules(ctx, &what);
	if (rc == 0) {
		what = "seccomp_load";
		rc = seccomp_load(ctx);
	}
	seccomp_release(ctx);
	if (rc < 0) {
		snprintf(err, errlen, "cannot confine the broker: %s: %s", what, strerror(-rc));
		return -1;
	}
	return 0;
}
