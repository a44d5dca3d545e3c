/* SPDX-License-Identifier: MIT
 * The broker's watch over its audit trail (AUDIT.md): the check at start,
 * the anchors in the log, and the one-time sealing key.
 */
#ifndef KOTOBA_AUDITLOG_H
#define KOTOBA_AUDITLOG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"

/* After the switch to the service user: checks the chain's newest
 * [audit] verify_rows rows and its head (a new break: an error in the log
 * and an epoch row), then logs the first anchor.  -1 when the store
 * cannot be opened. */
int audit_watch_start(const struct broker *b, char *err, size_t errlen);
/* Milliseconds to the next timed anchor; -1 when not started. */
/* Records a change of [sandbox] secrets as an epoch row (at start, from
 * the default, on: nothing to record unless it is off). */
void audit_watch_secrets(bool was_on, bool on);
int audit_watch_next_deadline(uint64_t now);
void audit_watch_tick(uint64_t now);
/* The last anchor, then the connection is closed. */
void audit_watch_stop(void);
/* --audit-key-init: starts sealing and prints key[0] on stdout, once;
 * the exit status. */
int audit_key_init(const char *state_dir);
#endif
