/* SPDX-License-Identifier: MIT
 * The broker's link to the egress proxy (kotoba-egress): a SOCK_SEQPACKET
 * socketpair at EGRESS_FD_LINK, one fixed-size request per message, no
 * answers.  ATTACH carries the run's listening socket (worker/netns.c) as
 * SCM_RIGHTS: every connection accepted on it is that run's, served
 * under the rule ATTACH names.  DETACH
 * closes it when the run has ended.
 */
#ifndef KOTOBA_EGRESS_WIRE_H
#define KOTOBA_EGRESS_WIRE_H

#include <stdint.h>

#define EGRESS_FD_LINK 3
/* The CA bundle's file, open for writing; the proxy fills and closes it,
 * then sends one byte on the link: it serves. */
#define EGRESS_FD_BUNDLE 4

enum egress_op {
	EGRESS_ATTACH = 1,
	EGRESS_DETACH = 2,
};

/* Which rule the run's connections are served under, decided by the
 * broker from the run's profile (never from anything the run sends):
 * [egress] unattended's mode for a run nobody read, or any method
 * (approved = proxy) for one a person approved.  Both still refuse
 * deny_hosts and, unless allow_hosts lists them, internal addresses. */
enum egress_rule {
	EGRESS_RULE_UNATTENDED = 1,
	EGRESS_RULE_APPROVED = 2,
};

struct egress_req {
	uint32_t op;
	uint32_t uid;
	uint64_t run_id;
	uint32_t rule;   /* ATTACH: enum egress_rule; DETACH: 0 */
	uint32_t unused; /* 0 */
};

/* The other way, kotoba-egress to the broker: one event per message, of
 * exactly this size.  A refusal's is sent before the refusal is written
 * to the run, so it is queued at the broker before the run can end.
 * Traffic comes in two: a request's (requests 1, its head's bytes out)
 * before it goes upstream, and the rest (requests 0) when the connection
 * ends, before the run's side of it is closed; the broker adds them up.
 * The broker trusts none of it: the version, the kind, the run and every
 * string are checked there (broker/egresslink.c). */
#define EGRESS_EVENT_VERSION 1
#define EGRESS_EVENT_TEXT 256

enum egress_event_kind {
	EGRESS_EV_REFUSED = 1, /* text: the sentence the refusal's body has */
	EGRESS_EV_TRAFFIC = 2, /* text: "host:port"; method; the counts */
};

struct egress_event {
	uint32_t version;
	uint32_t kind;
	uint64_t run_id;
	uint64_t requests;  /* TRAFFIC: requests sent upstream (1 or 0) */
	uint64_t bytes_out; /* TRAFFIC: bytes sent upstream */
	uint64_t bytes_in;  /* TRAFFIC: bytes relayed back to the run */
	char method[16];    /* TRAFFIC: the request's, "CONNECT" for a tunnel; NUL-ended */
	char text[EGRESS_EVENT_TEXT]; /* NUL-ended, no control character */
};

#endif
