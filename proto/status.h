/* SPDX-License-Identifier: MIT
 * Exit statuses of the `kotoba` CLI, one place for all (see README, "Exit
 * statuses").  A snippet's own status passes through unchanged, so these
 * overlap with what a snippet may return; `kotoba run --json` tells them
 * apart without ambiguity.
 */
#ifndef KOTOBA_STATUS_H
#define KOTOBA_STATUS_H

#define KOTOBA_EXIT_USAGE 64       /* bad command line (EX_USAGE) */
#define KOTOBA_EXIT_TIMEOUT 124    /* wall-clock timeout, as timeout(1) */
#define KOTOBA_EXIT_UNREACHABLE 125/* broker unreachable or protocol failure */
#define KOTOBA_EXIT_DID_NOT_RUN 126/* denied, expired, refused, not offered */
#define KOTOBA_EXIT_SETUP 127      /* the sandbox could not be set up */
#define KOTOBA_EXIT_SIGNAL_BASE 128/* killed by signal N: 128 + N */

#endif
