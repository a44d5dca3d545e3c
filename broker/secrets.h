/* SPDX-License-Identifier: MIT
 * The secret set: the places an unattended snippet must not read
 * ([sandbox] secrets, secret_paths).  The broker names them; the worker
 * finds which exist and masks them (worker/secrets.c), and in docker mode
 * the container's command line masks the working directory's (.env).
 */
#ifndef KOTOBA_BROKER_SECRETS_H
#define KOTOBA_BROKER_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/privsep.h"
#include "proto/proto.h"

struct broker;

/* Fills job->secrets for a run of the unattended profile as `id`: the
 * built-in set, the broker's own state directory and [sandbox]
 * secret_paths, with "~/" made the user's home; for engine steps that
 * start a container, the file-name entries only (the container sees the
 * working directory alone).  Leaves the job without them when [sandbox]
 * secrets = off.  The strings live until the next call.  0, or -E2BIG
 * with err filled. */
int secrets_fill_job(const struct broker *b, const struct identity *id, struct msg_job *job,
		     char *err, size_t errlen);

/* What `exit` says about the masks: "masked", "off" or "unmasked". */
const char *secrets_state(const struct broker *b, enum proto_profile profile);

/* The masks' namespaces kept between a user's unattended runs
 * (PROTOCOL.md, "masks").  secrets_kept(): the uid's descriptor (the
 * table keeps it) and its key, or -1.  secrets_keep(): takes fd, in place
 * of the uid's earlier one.  secrets_kept_tick(): closes those unused for
 * a minute; the ms until the next such close, or -1. */
int secrets_kept(uid_t uid, uint64_t now, uint8_t key[PROTO_MASKS_KEY_LEN]);
void secrets_keep(uid_t uid, int fd, const uint8_t key[PROTO_MASKS_KEY_LEN], uint64_t now);
int secrets_kept_tick(uint64_t now);

/* /proc/self/mountinfo as of now, read again only when it changed; len 0
 * when it cannot be read (the worker then reads its own). */
struct pstr secrets_mount_table(void);
/* Counts the mount table's changes, read as secrets_mount_table() does:
 * what a spare was masked under is what runs now while this holds. */
uint64_t secrets_mount_generation(void);

#endif
