/* SPDX-License-Identifier: MIT
 * kotoba-egress, the egress proxy: the one way out of an unattended run's
 * network namespace (worker/netns.c, ARCHITECTURE.md "The egress proxy").
 */
#ifndef KOTOBA_EGRESS_H
#define KOTOBA_EGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "broker/egress/policy.h"

/* Connections one run may have open at once: past it, the next is
 * answered 503 and closed, and no run can take every thread.  All the
 * runs of one user, and all runs together, have caps of their own
 * ([egress] connections_per_user, connections), so no user can take
 * every thread either. */
#define EGRESS_CONNS_PER_RUN 32
/* The request line and headers together; past it 431. */
#define EGRESS_HEAD_MAX 16384
/* A whole request head must arrive within this (slowloris). */
#define EGRESS_HEAD_TIMEOUT_S 15
/* Connecting upstream; a TLS handshake; silence on a relayed
 * connection. */
#define EGRESS_CONNECT_TIMEOUT_S 10
#define EGRESS_IDLE_TIMEOUT_S 60

/* One user's share of the proxy (egress.c). */
struct egress_share;

/* One run's listening socket and what accepted from it holds. */
struct egress_run {
	uint64_t run_id;
	uid_t uid;
	int fd;
	/* The rule its connections are served under (wire.h, ATTACH):
	 * egress_policy, or egress_policy_approved for a run a person
	 * approved. */
	const struct egress_policy *policy;
	struct egress_share *share; /* its user's, which counts all their runs' connections */
	atomic_int conns; /* connections being served */
	atomic_int refs;  /* the table's, and one per connection */
};

void egress_run_put(struct egress_run *r);

/* [egress] unattended's mode with allow_hosts and deny_hosts; and for
 * runs a person approved (approved = proxy), the same lists with any
 * method (the `any` mode). */
extern struct egress_policy egress_policy, egress_policy_approved;

/* What the run's rule is called in the log: "unattended = get",
 * "approved = proxy". */
const char *egress_rule_name(const struct egress_run *r, char *buf, size_t len);

/* http.c: serves one accepted connection to its end (a thread's body). */
void egress_serve(struct egress_run *r, int fd);

/* tls.c: the per-broker CA, made at start; the bundle (system CAs and
 * this CA) written to the file open at fd bundle (then closed), for the
 * runs' SSL_CERT_FILE.  0 or -1 with err filled. */
int egress_tls_init(int bundle, const char *upstream_ca, char *err, size_t errlen);

/* One side of a relayed connection: a socket, and the TLS session over
 * it when there is one (tls.c). */
struct egress_io {
	int fd;
	void *tls; /* gnutls_session_t; NULL: plain */
};
ssize_t egress_io_read(struct egress_io *io, void *buf, size_t len);
int egress_io_write(struct egress_io *io, const void *buf, size_t len);

/* http.c: one request read from client and, when the policy allows it,
 * sent to host:port (the request's own for plain HTTP, the CONNECT's for
 * TLS) and its answer relayed.  wrap, when set, makes the upstream side
 * TLS for host once connected (0, or -1 with why filled). */
typedef int (*egress_wrap_fn)(struct egress_io *up, const char *host, char *why, size_t len);
void egress_serve_request(struct egress_run *r, struct egress_io *client, const char *host,
			  const char *port, egress_wrap_fn wrap);
/* The answer to a refused request: status, a reason phrase, and a body
 * of one line that says why. */
void egress_refuse(struct egress_io *client, int status, const char *body);
/* The same on a plain socket without waiting for anything: sent if the
 * socket takes it at once, for a refusal that may not hold a thread. */
void egress_refuse_now(int fd, int status, const char *body);

/* CONNECT in the `get` mode: TLS with the run on fd (a leaf for host
 * signed by the CA), each request inside checked as plain HTTP's, and a
 * verified TLS connection upstream. */
void egress_serve_tls(struct egress_run *r, int fd, const char *host, const char *port);

/* Bytes the TLS session holds already decrypted; closing one (a plain
 * io: nothing). */
bool egress_tls_pending(struct egress_io *io);
void egress_tls_close(struct egress_io *io);
/* close_notify: nothing more will be written. */
void egress_tls_shut_wr(struct egress_io *io);

/* Events to the broker (wire.h): a refusal ("WHAT refused: WHY", the
 * sentence the refusal's body has), sent before the refusal is written;
 * a connection's traffic when it ends. */
void egress_report_refusal(const struct egress_run *r, const char *what, const char *why);
void egress_report_traffic(const struct egress_run *r, const char *host, const char *port,
			   const char *method, uint64_t requests, uint64_t out, uint64_t in);

/* A line in the broker's log (stderr). */
__attribute__((format(printf, 2, 3))) void egress_log(const struct egress_run *r,
						      const char *fmt, ...);

#endif
