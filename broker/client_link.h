/* SPDX-License-Identifier: MIT
 * A client's connection as the modules below the session see it: who asks,
 * and how to answer.  broker/session.c keeps one in each session and hands
 * it down to the gate and to the runs it starts; they answer through its
 * ops and never call the session by name (ARCHITECTURE.md, "Layers").
 */
#ifndef KOTOBA_CLIENT_LINK_H
#define KOTOBA_CLIENT_LINK_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "proto/proto.h"

struct client_link;
struct run;

struct client_link_ops {
	/* Queues *f, taking it, and writes what the socket takes; a write
	 * that fails closes the connection.  -EPIPE once it is closed. */
	int (*send)(struct client_link *cl, struct frame *f);
	/* Its unwritten answers are over the high mark: its runs stop
	 * reading their output until it drains. */
	bool (*backlogged)(const struct client_link *cl);
	/* Closed: whatever is sent now is dropped. */
	bool (*closed)(const struct client_link *cl);
	/* Bytes sent to it and not yet written (NULL: none are kept). */
	size_t (*queued)(const struct client_link *cl);
	/* A run left cl->runs: a half-closed connection may now be done. */
	void (*run_gone)(struct client_link *cl);
};

struct client_link {
	const struct client_link_ops *ops;
	struct ucred peer;      /* SO_PEERCRED */
	bool channel;           /* its hello offered an approval channel */
	bool escalate;          /* ... and escalation cards too */
	bool channel_withheld;  /* it offered one as the MCP front; [mcp] elicitation = no */
	bool shut;              /* it shut its sending side: nobody answers cards */
	uint64_t frame_us;      /* when the frame being dispatched was read */
	TAILQ_HEAD(, run) runs; /* run.c's: the runs whose frames it waits for */
	unsigned nruns;
};

static inline int client_send(struct client_link *cl, struct frame *f)
{
	return cl->ops->send(cl, f);
}

static inline bool client_backlogged(const struct client_link *cl)
{
	return cl->ops->backlogged(cl);
}

static inline bool client_closed(const struct client_link *cl)
{
	return cl->ops->closed(cl);
}

static inline size_t client_queued(const struct client_link *cl)
{
	return cl->ops->queued ? cl->ops->queued(cl) : 0;
}

static inline void client_run_gone(struct client_link *cl)
{
	cl->ops->run_gone(cl);
}

/* An `error` frame: code, and the sentence fmt makes. */
static inline __attribute__((format(printf, 5, 6))) void
client_send_error(struct client_link *cl, bool has_id, uint64_t id, const char *code,
		  const char *fmt, ...)
{
	char text[512];
	struct frame f;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (enc_error_simple(&f, has_id, id, code, "%s", text) == 0)
		client_send(cl, &f);
}
#endif
