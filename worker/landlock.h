/* SPDX-License-Identifier: MIT
 * Landlock for the unattended profile: file-system and network rules that
 * hold whatever the snippet does, where the kernel has Landlock.
 */
#ifndef KOTOBA_WORKER_LANDLOCK_H
#define KOTOBA_WORKER_LANDLOCK_H

#include "proto/proto.h"

/* Called in the snippet child after NO_NEW_PRIVS and before the rlimits
 * and seccomp.  Returns the Landlock ABI in force (0: none), or -errno;
 * the caller dies on a negative value, so a failure never runs unconfined. */
int apply_landlock(const struct msg_job *job);

#endif
