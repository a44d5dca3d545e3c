/* SPDX-License-Identifier: MIT
 * Landlock for the unattended and engine profiles: file-system, TCP-bind
 * and IPC-scope rules that hold whatever the snippet (or the engine CLI)
 * does, where the kernel has Landlock.
 */
#ifndef KOTOBA_WORKER_LANDLOCK_H
#define KOTOBA_WORKER_LANDLOCK_H

#include "worker/worker.h"

/* The kernel's Landlock ABI: 0 when it has none (not built in, not
 * enabled at boot). */
unsigned int landlock_probe_abi(void);

/* The ABI the plan's profile will run under: 0 for "approved" and when
 * the job turns Landlock off, else what the kernel has, capped at the
 * newest ABI this worker knows. */
unsigned int landlock_plan_abi(const struct msg_job *job, enum proto_profile profile);

/* Called in the snippet child after NO_NEW_PRIVS and before the rlimits
 * and seccomp.  Applies the ruleset of p->landlock_abi (nothing when 0).
 * Returns 0, or -errno with the failing call in *what; the caller dies
 * on failure, so a snippet never runs with less than the plan said. */
int apply_landlock(const struct plan *p, bool own_shm, const char **what);

#endif
