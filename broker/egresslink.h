/* SPDX-License-Identifier: MIT
 * The broker's side of the egress proxy (broker/egress/): it starts
 * kotoba-egress with the [egress] policy, and hands it each unattended
 * run's (and, with approved = proxy, each approved run's) listening socket (worker/netns.c) as the run's `ready` brings it.
 */
#ifndef KOTOBA_EGRESSLINK_H
#define KOTOBA_EGRESSLINK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/config.h"

/* Before the broker gives up root: opens (creates) the CA bundle's file
 * in dir, the socket's directory, which every user who may connect can
 * read.  0, or -1 with a sentence. */
int egresslink_open_bundle(const char *dir, char *err, size_t errlen);
bool egresslink_bundle_open(void);
/* Starts the proxy at path, as the broker's user, with the bundle's file;
 * waits until it says it serves.  0, or -1 with a sentence. */
int egresslink_start(const char *path, const struct config *c, char *err, size_t errlen);
/* The proxy's pid (the broker reaps it); 0 when none. */
pid_t egresslink_pid(void);
/* Reaped: the proxy has gone, and with it every run's network. */
void egresslink_gone(int status);
/* The CA bundle the runs' SSL_CERT_FILE names; "" without a proxy. */
const char *egresslink_bundle(void);
/* The run's listening socket, to the proxy (fd is closed here), served
 * under the unattended rule, or any method when approved. */
void egresslink_attach(uint64_t run_id, uid_t uid, bool approved, int fd);
/* The run has ended: the proxy closes its socket. */
void egresslink_detach(uint64_t run_id);
/* Events from the proxy (wire.h), each checked here, then handed to the
 * sink main.c sets (run.c's run_take_egress_event(), a layer above: false
 * when no run of its id is going).  A copy of the link's fd for the loop,
 * whose watch takes them as they come (-1 from egresslink_take_events():
 * the proxy's end is closed); and what waits, taken before a run's end is
 * reported, so a refusal the run saw is on its receipt. */
struct broker;
struct egress_event;
typedef bool egress_event_sink(struct broker *b, const struct egress_event *ev);
void egresslink_set_sink(egress_event_sink *fn);
int egresslink_events_fd(void);
int egresslink_take_events(struct broker *b, int fd);
void egresslink_drain(struct broker *b);
#endif
