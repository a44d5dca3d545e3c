/* SPDX-License-Identifier: MIT
 * Landlock: a stub until the unattended profile lands.
 *
 * "approved" (a person read the card) gets the baseline only, by design.
 * "unattended" will get a ruleset here: read anything the user can, write
 * only the scratch directory, TCP connect but no bind, signals scoped to
 * its own processes.  Until then it also gets the baseline only; the call
 * site in enter.c already sits where the ruleset must go (after
 * NO_NEW_PRIVS, which landlock_restrict_self needs without CAP_SYS_ADMIN,
 * and before seccomp, which will not allow the landlock_* calls).
 */
#include "worker/landlock.h"

int apply_landlock(const struct msg_job *job)
{
	(void)job;
	return 0;
}
