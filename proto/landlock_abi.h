/* SPDX-License-Identifier: MIT
 * The Landlock user-space ABI up to version 7, for building against older
 * kernel headers (Debian 12's linux-libc-dev knows ABI 1 and 2 only).
 *
 * Shared by the worker (the snippet's sandbox) and the broker (its own
 * confinement).  Values are from the kernel's include/uapi/linux/landlock.h;
 * each is guarded so a newer header wins.  What the *running* kernel supports is
 * probed at run time (landlock_probe_abi), never assumed from these.
 */
#ifndef KOTOBA_PROTO_LANDLOCK_ABI_H
#define KOTOBA_PROTO_LANDLOCK_ABI_H

#include <linux/landlock.h>
#include <stdint.h>

/* The newest ABI this code knows how to use; a newer kernel is driven
 * as this one (every ABI is a superset of the previous). */
#define KL_ABI_KNOWN 7

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* ABI 1 (Linux 5.13) */
#ifndef LANDLOCK_ACCESS_FS_EXECUTE
#define LANDLOCK_ACCESS_FS_EXECUTE (1ULL << 0)
#define LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define LANDLOCK_ACCESS_FS_READ_FILE (1ULL << 2)
#define LANDLOCK_ACCESS_FS_READ_DIR (1ULL << 3)
#define LANDLOCK_ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define LANDLOCK_ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define LANDLOCK_ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define LANDLOCK_ACCESS_FS_MAKE_DIR (1ULL << 7)
#define LANDLOCK_ACCESS_FS_MAKE_REG (1ULL << 8)
#define LANDLOCK_ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define LANDLOCK_ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define LANDLOCK_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define LANDLOCK_ACCESS_FS_MAKE_SYM (1ULL << 12)
#endif
/* ABI 2 (5.19): linking or renaming into another directory */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
/* ABI 3 (6.2): truncate(2), ftruncate(2) and open(O_TRUNC) */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
/* ABI 4 (6.7): TCP bind and connect by port */
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
/* ABI 5 (6.10): ioctl on character and block devices */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
/* ABI 6 (6.12): IPC scoping to the sandbox's own domain */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
/* ABI 7 (6.15) adds only landlock_restrict_self() logging flags, which
 * this code leaves at their defaults (denials are audited). */

/* The ruleset attribute as of ABI 6.  The kernel takes its size as the
 * third argument and reads the fields an older ABI knows, so the size
 * passed is cut to what the running kernel understands (an older kernel
 * rejects a larger struct whose extra fields are not zero, E2BIG). */
struct kl_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

/* As struct landlock_path_beneath_attr (ABI 1), under our own name so the
 * code reads the same whichever header is installed. */
struct kl_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define KL_RULE_PATH_BENEATH 1

/* Every file-system right of ABI 1. */
#define KL_FS_ABI1                                                                           \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                        \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                        \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                    \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                        \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                        \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                      \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)

/* Every file-system right a kernel of this ABI knows. */
static inline uint64_t kl_fs_rights(unsigned int abi)
{
	uint64_t fs = KL_FS_ABI1;

	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return fs;
}

#endif
