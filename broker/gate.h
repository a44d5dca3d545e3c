/* SPDX-License-Identifier: MIT
 * The approval gate: what happens to an `exec` between the client's request
 * and the worker (DESIGN.md, "The decision").
 */
#ifndef KOTOBA_GATE_H
#define KOTOBA_GATE_H
#include "broker/broker.h"

int gate_init(struct broker *b, char *err, size_t errlen);
void gate_fini(void);
void gate_exec(struct client_link *cl, const struct msg_exec *e);
int gate_on_answer(struct client_link *cl, const struct msg *m);
int gate_on_grants(struct client_link *cl, const struct msg *m);
int gate_on_revoke(struct client_link *cl, const struct msg *m);
int gate_on_audit(struct client_link *cl, const struct msg *m);
bool gate_card_for_id(struct client_link *cl, uint64_t id);
bool gate_cancel_card(struct client_link *cl, uint64_t id);
void gate_session_closed(struct client_link *cl);
/* The client shut its sending side: its cards are withdrawn (cancelled). */
void gate_withdraw_cards(struct client_link *cl);
/* Whether an exec of cl waits in the queue for a slot. */
bool gate_has_queued(const struct client_link *cl);
void gate_tick(struct broker *b, uint64_t now);
int gate_next_deadline(struct broker *b, uint64_t now);
/* A connection refused by peer.c: a `connect` row with decision
 * `refused`, the uid it is filed under (the run's person when ri is known),
 * the connecting pid, and why ("from-a-run" | "unseen") in labels. */
void gate_audit_refused_connection(uid_t uid, pid_t pid, const struct run_info *ri,
				   const char *why);
#endif
