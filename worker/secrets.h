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
 * path for the snippet (cwd): a user and mount namespace of its own, and
 * a mask over each of p->masks.  Nothing happens when the plan has no
 * masks.  Returns 1 when it made the namespaces, 0 when there was
 * nothing to mask, or -errno with the failing call in *what.  Does not
 * allocate. */
int mask_secrets(const struct plan *p, const char **what);

#endif
