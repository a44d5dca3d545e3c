/* SPDX-License-Identifier: MIT
 * Exit statuses of every program of the project, one place for all.
 *
 * The `kotoba` CLI (see README, "Exit statuses"): a snippet's own status
 * passes through unchanged, so these overlap with what a snippet may
 * return; `kotoba run --json` tells them apart without ambiguity.
 */
#ifndef KOTOBA_STATUS_H
#define KOTOBA_STATUS_H

#define KOTOBA_EXIT_USAGE 64       /* bad command line (EX_USAGE) */
#define KOTOBA_EXIT_TIMEOUT 124    /* wall-clock timeout, as timeout(1) */
#define KOTOBA_EXIT_UNREACHABLE 125/* broker unreachable or protocol failure */
#define KOTOBA_EXIT_DID_NOT_RUN 126/* denied, expired, refused, not offered */
#define KOTOBA_EXIT_SETUP 127      /* the sandbox could not be set up */
#define KOTOBA_EXIT_SIGNAL_BASE 128/* killed by signal N: 128 + N */

/* kotoba-brokerd (sysexits.h where one fits). */
#define BROKERD_EXIT_OK 0
#define BROKERD_EXIT_START 1       /* could not start serving; the log says why */
#define BROKERD_EXIT_USAGE 64      /* bad command line (EX_USAGE) */
#define BROKERD_EXIT_CONFIG 78     /* bad configuration (EX_CONFIG) */

/* kotoba-worker, and the processes it and the broker fork on its way:
 * the broker reads the worker link for why, never these numbers alone. */
#define WORKER_EXIT_OK 0
#define WORKER_EXIT_FAIL 1         /* setup failed, or the broker went away */
#define WORKER_CHILD_DIED 127      /* a forked child could not be set up (it reported why) */

#endif
