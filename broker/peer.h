/* SPDX-License-Identifier: MIT
 * Where a client connection comes from: outside, or from inside one of this
 * broker's own runs, which may never answer a card or touch a grant.
 */
#ifndef KOTOBA_PEER_H
#define KOTOBA_PEER_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct broker;

/* For a freshly accepted connection fd whose SO_PEERCRED is cr: true when
 * it must be refused because it was made from inside a run, or because its
 * process cannot be seen to tell (fail closed); then why holds a sentence
 * for the peer, and the attempt is logged and written to the audit trail. */
bool peer_from_a_run(struct broker *b, int fd, const struct ucred *cr, char *why,
		     size_t whylen);
#endif
