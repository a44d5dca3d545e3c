/* SPDX-License-Identifier: MIT
 * The system broker's own confinement, once its start-up is done and the
 * monitor holds every privilege (ARCHITECTURE.md, "The monitor's
 * requests"): no_new_privs, Landlock over what it may write, and a seccomp
 * filter that kills the broker on any call that could change who it is,
 * run another program, enter or make a namespace, trace a process, or
 * reach the network.
 */
#ifndef KOTOBA_CONFINE_H
#define KOTOBA_CONFINE_H
#include <stdbool.h>
#include <stddef.h>

/* A directory the broker still writes in: beneath it, everything a file
 * store or a cgroup tree needs (`remove_only`: unlinking a file alone, for
 * the socket it removes at stop). */
struct confine_dir {
	int fd;            /* O_PATH or a directory fd; the caller's */
	bool remove_only;
};

/* no_new_privs; Landlock, where the kernel has it: no write, exec or file
 * creation anywhere but beneath `dirs`, no TCP, no signal to a process
 * outside the broker; then the seccomp filter.  0, or -1 with the failing
 * step in err.  Irreversible.  *landlock_abi: the ABI applied (0: none). */
int confine_broker(const struct confine_dir *dirs, size_t n, unsigned *landlock_abi, char *err,
		   size_t errlen);
#endif
