/* SPDX-License-Identifier: MIT
 * Secret masks for the unattended profile: the kernel refuses reads of the
 * secret set however the path is spelled or reached, because at the place
 * each secret lives the snippet's mount namespace holds an empty mode-000
 * directory or file instead (see secrets.c).
 */
#ifndef KOTOBA_WORKER_SECRETS_H
#define KOTOBA_WORKER_SECRETS_H

#include "worker/worker.h"

/* In S, before the fork: expands job->secrets into p->masks, as the
 * snippet's user, from what exists now (the set is taken at run start).
 * Returns 0 or -errno with err filled. */
int plan_secrets(struct plan *p, char *err, size_t errlen);
void plan_free_secrets(struct plan *p);

/* Engine: replaces the argument PROTO_SECRET_MASKS_ARG of a malloc'd,
 * NULL-terminated argv with one mount argument per mask (none when
 * nothing matched).  0 or -errno with err filled. */
int secrets_engine_args(const struct plan *p, char ***argv, char *err, size_t errlen);

/* In C, after the fds are closed and before anything resolves a
 * path for the snippet (cwd): a user and mount namespace with a mask over
 * each of p->masks.  Joins kept, the one an earlier run kept, when it is
 * not -1 (its key is this run's: p->join_kept) and every mask reads back
 * there; patches a
 * private copy of it when one does not.  Returns what it did, or -errno
 * with the failing call in *what.  Does not allocate. */
enum masks_made {
	MASKS_NONE,    /* nothing to mask */
	MASKS_NEW,     /* new namespaces: worth keeping for the next run */
	MASKS_JOINED,  /* the kept ones, every mask read back */
	MASKS_PATCHED, /* a copy of the kept ones with the masks made again */
};
int mask_secrets(const struct plan *p, int kept, const char **what);

/* In S: every path of p->masks shows its mask (or nothing) in the mount
 * namespace of pid, read through /proc/<pid>/root: a secret unlinked and
 * linked back under its name since is the same file, but its mount there
 * went with the old name. */
bool masks_hold_in(const struct plan *p, pid_t pid);

/* In C, right after mask_secrets (made: what it returned) and after S was
 * given the masks' namespace to keep: unattended only, the run's own
 * /dev/shm, a tmpfs in a mount namespace of this run alone (a copy of the
 * masks' one, or new user and mount namespaces when there are no masks),
 * so that POSIX semaphores and shared memory (multiprocessing) work and
 * no other run sees them; in the same namespace, the scratch directory as
 * a nosuid,nodev mount of its own (S tells a file in it by that mount).
 * Returns which of the two the run has (OWN_SHM, OWN_SCRATCH), 0 when
 * this kernel gives the user no namespace (then /dev/shm stays the
 * host's, read-only to the snippet), or -errno with the failing call in
 * *what. */
#define SHM_DIR "/dev/shm"
#define OWN_SHM 1
#define OWN_SCRATCH 2
int private_shm(const struct plan *p, enum masks_made made, const char **what);

#endif
