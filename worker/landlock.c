/* SPDX-License-Identifier: MIT
 * Landlock for the unattended and engine profiles.
 *
 * "approved" (a person read the card) gets the baseline only, by design.
 * "unattended" gets one ruleset, sized to the ABI the kernel has, and so
 * does "engine" (sandbox = docker: the container engine's CLI, which the
 * worker runs instead of python3; its HOME, TMPDIR and XDG_RUNTIME_DIR
 * are the scratch directory, so its own files land there):
 *
 *   /           read files, list directories, execute (ABI 1).  Execute
 *               stays open because the one exec python3 needs is ours;
 *               every later exec is refused by the seccomp exec gate
 *               (unattended; the engine CLI may exec, see seccomp.c).
 *   scratch     everything but device nodes: TMPDIR, MPLCONFIGDIR and
 *               XDG_CACHE_HOME live there, and S removes it afterwards.
 *   /dev/null   read, write, truncate (open(os.devnull, "w") works).
 *   /dev/shm    as scratch, when it is the run's own tmpfs (secrets.c,
 *               private_shm): POSIX semaphores and shared memory.
 *
 * Every other write, create, delete, rename, link and (ABI 3) truncation
 * fails with EACCES.  ABI 4 adds TCP bind: handled, no port allowed, so
 * nothing listens.  ABI 6 scopes signals and abstract Unix sockets to the
 * snippet's own processes.  Landlock also refuses ptrace-mode access
 * (/proc/<pid>/mem, environ) to any process outside the domain, from
 * ABI 1 on.  What Landlock cannot express (chown/xattrs, sockets by
 * family, exec once, IPC objects) is seccomp's job; chmod and utime go
 * from seccomp to the supervisor (fileattr.c), which allows them beneath
 * scratch and the run's /dev/shm only.  Seccomp's job too is
 * everything here when the ABI is lower or Landlock is off: see
 * worker/seccomp.c, which is built knowing the ABI in force.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "worker/landlock.h"
#include "proto/landlock_abi.h"
#include "worker/secrets.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define FS_READ_ONLY                                                                         \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE)
#define FS_DEVICES (LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK)
#define FS_DEV_NULL                                                                          \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |                      \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

unsigned int landlock_probe_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	/* ENOSYS: not built in; EOPNOTSUPP: built in, disabled at boot. */
	return abi > 0 ? (unsigned int)abi : 0;
}

unsigned int landlock_plan_abi(const struct msg_job *job, enum proto_profile profile)
{
	unsigned int abi;

	if ((profile != PROFILE_UNATTENDED && profile != PROFILE_ENGINE) || !job->landlock)
		return 0;
	abi = landlock_probe_abi();
	return abi > KL_ABI_KNOWN ? KL_ABI_KNOWN : abi;
}

static uint64_t fs_handled(unsigned int abi)
{
	return kl_fs_rights(abi);
}

/* The attribute struct grew with the ABI: pass only the fields this
 * kernel knows, so an older kernel is not handed fields it rejects. */
static int create_ruleset(unsigned int abi)
{
	struct kl_ruleset_attr attr = { .handled_access_fs = fs_handled(abi) };
	size_t size = sizeof(attr.handled_access_fs);

	if (abi >= 4) {
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP;
		size += sizeof(attr.handled_access_net);
	}
	if (abi >= 6) {
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		size += sizeof(attr.scoped);
	}
	return (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
}

static int allow_beneath(int ruleset, const char *path, uint64_t access)
{
	struct kl_path_beneath_attr rule = { .allowed_access = access };
	int rc = 0;

	rule.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (rule.parent_fd < 0)
		return -errno;
	if (syscall(SYS_landlock_add_rule, ruleset, KL_RULE_PATH_BENEATH, &rule, 0) < 0)
		rc = -errno;
	close(rule.parent_fd);
	return rc;
}

static int add_rules(int ruleset, const struct plan *p, bool own_shm, const char **what)
{
	uint64_t handled = fs_handled(p->landlock_abi);
	int rc;

	*what = "landlock_add_rule /";
	rc = allow_beneath(ruleset, "/", FS_READ_ONLY);
	if (rc == 0) {
		*what = "landlock_add_rule (scratch directory)";
		rc = allow_beneath(ruleset, p->scratch, handled & ~FS_DEVICES);
	}
	if (rc == 0) {
		*what = "landlock_add_rule /dev/null";
		rc = allow_beneath(ruleset, "/dev/null", handled & FS_DEV_NULL);
	}
	if (rc == 0 && own_shm) {
		*what = "landlock_add_rule /dev/shm (the run's own tmpfs)";
		rc = allow_beneath(ruleset, SHM_DIR, handled & ~FS_DEVICES);
	}
	return rc;
}

int apply_landlock(const struct plan *p, bool own_shm, const char **what)
{
	int ruleset, rc;

	*what = "";
	if (p->landlock_abi == 0)
		return 0;
	*what = "landlock_create_ruleset";
	ruleset = create_ruleset(p->landlock_abi);
	if (ruleset < 0)
		return -errno;
	rc = add_rules(ruleset, p, own_shm, what);
	if (rc == 0) {
		/* Needs NO_NEW_PRIVS (set just before) or CAP_SYS_ADMIN. */
		*what = "landlock_restrict_self";
		if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
			rc = -errno;
	}
	close(ruleset);
	return rc;
}
