/* SPDX-License-Identifier: MIT
 * The client link: accept, read frames, dispatch by a table that says in
 * which state each message is allowed, queue answers.  Code here never
 * dies on what a client sends: every fault is an `error` frame, and a fault
 * that loses the framing also closes that one connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/gate.h"
#include "broker/log.h"
#include "broker/monlink.h"
#include "broker/peer.h"
#include "broker/privsep.h"
#include "broker/scan.h"
#include "proto/limits.h"

#define BROKER_NAME "kotoba-brokerd/0.1"
/* A reader buffer larger than this is freed once no frame is half-read. */
#define READER_KEEP (64u << 10)
/* Above this much unwritten, the client is not read and its runs' output
 * is not either; both go on below the low mark. */
#define SESSION_QUEUE_HIGH (1u << 20)
#define SESSION_QUEUE_LOW (256u << 10)

struct outbuf {
	TAILQ_ENTRY(outbuf) link;
	struct frame f;
	size_t off;
};

struct session {
	TAILQ_ENTRY(session) link;
	struct broker *b;
	struct watch w;
	uint64_t sid;
	struct client_link client; /* what the gate and the runs see of it */
	enum { SESSION_NEW, SESSION_READY, SESSION_CLOSING } state;
	bool dispatching; /* inside read_frames: flush must not re-enter it */
	bool read_eof;    /* the peer shut its sending side: its runs go on */
	struct frame_reader rd;
	TAILQ_HEAD(, outbuf) outq;
	size_t queued;
	uint64_t opened_ms;      /* for [quota] hello_timeout */
	uint64_t frame_start_ms; /* first byte of an unfinished frame; 0: none */
	bool stalled;            /* seen backlogged: the clocks start again after */
};

static void on_client(struct watch *w, uint32_t events);
static void read_frames(struct session *s);
static void maybe_finish(struct session *s);
static void session_close(struct session *s);

static struct session *session_of(struct client_link *cl)
{
	return (struct session *)((char *)cl - offsetof(struct session, client));
}

static const struct session *const_session_of(const struct client_link *cl)
{
	return (const struct session *)((const char *)cl - offsetof(struct session, client));
}

static bool backlogged(const struct session *s)
{
	return s->queued > SESSION_QUEUE_HIGH;
}

static void flush(struct session *s)
{
	struct outbuf *o;

	while ((o = TAILQ_FIRST(&s->outq))) {
		ssize_t n = send(s->w.fd, o->f.data + o->off, o->f.len - o->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			session_close(s);
			return;
		}
		o->off += (size_t)n;
		s->queued -= (size_t)n;
		if (o->off < o->f.len)
			break;
		TAILQ_REMOVE(&s->outq, o, link);
		frame_free(&o->f);
		free(o);
	}
	if (s->state == SESSION_CLOSING && TAILQ_EMPTY(&s->outq)) {
		session_close(s);
		return;
	}
	/* A client that sends without reading is not read either, above the
	 * high mark: its answers cannot pile up without bound. */
	loop_mod(&s->w, (s->state == SESSION_CLOSING || s->read_eof || backlogged(s)
				 ? 0 : EPOLLIN) |
				(TAILQ_EMPTY(&s->outq) ? 0 : EPOLLOUT));
	if (s->queued < SESSION_QUEUE_LOW) {
		runs_resume(&s->client);
		if (!s->dispatching && !s->read_eof)
			read_frames(s);
	}
	maybe_finish(s);
}

/* Takes ownership of *f. */
static int session_send(struct session *s, struct frame *f)
{
	struct outbuf *o;

	if (s->w.fd < 0) {
		frame_free(f);
		return -EPIPE;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		frame_free(f);
		return -ENOMEM;
	}
	o->f = *f;
	f->data = NULL;
	TAILQ_INSERT_TAIL(&s->outq, o, link);
	s->queued += o->f.len;
	flush(s);
	return 0;
}

/* id-in-use: the one error that does not carry the id it answers, which
 * would read as the end of the live request that has it (PROTOCOL.md). */
static void refuse_reused_id(struct session *s, const struct msg *m)
{
	struct msg_error e = { .code = pstr_c(PERR_ID_IN_USE), .has_dup_id = true,
			       .dup_id = m->id };
	char text[160];
	struct frame f;

	snprintf(text, sizeof(text),
		 "%s: id %" PRIu64 " belongs to a request still in flight on this connection; "
		 "that request goes on, this one was not run", msg_type_name(m->type), m->id);
	e.message = pstr_c(text);
	if (enc_error(&f, &e) == 0)
		session_send(s, &f);
}

/* A client that shut its sending side (shutdown(SHUT_WR)) still gets
 * every frame of its runs; the connection closes once none is in flight
 * and everything queued is written. */
static void maybe_finish(struct session *s)
{
	if (s->w.fd < 0 || !s->read_eof || s->client.nruns || !TAILQ_EMPTY(&s->outq) ||
	    gate_has_queued(&s->client))
		return;
	session_close(s);
}

/* ---- the client link: how the gate and the runs answer -------------------- */

static int link_send(struct client_link *cl, struct frame *f)
{
	return session_send(session_of(cl), f);
}

static bool link_backlogged(const struct client_link *cl)
{
	return backlogged(const_session_of(cl));
}

static size_t link_queued(const struct client_link *cl)
{
	return const_session_of(cl)->queued;
}

static bool link_closed(const struct client_link *cl)
{
	return const_session_of(cl)->w.fd < 0;
}

static void link_run_gone(struct client_link *cl)
{
	maybe_finish(session_of(cl));
}

static const struct client_link_ops link_ops = {
	.send = link_send,
	.backlogged = link_backlogged,
	.closed = link_closed,
	.queued = link_queued,
	.run_gone = link_run_gone,
};

static void half_closed(struct session *s)
{
	log_debug("uid=%u session=%" PRIu64 " shut its sending side; %u runs in flight",
		  (unsigned)s->client.peer.uid, s->sid, s->client.nruns);
	s->read_eof = true;
	s->client.shut = true;
	/* Nobody can answer its cards any more: withdrawn, as a cancel. */
	gate_withdraw_cards(&s->client);
	if (s->w.fd >= 0)
		flush(s);
}

/* Answers what is queued, then closes: used when framing is lost. */
static void session_fail(struct session *s, const char *code, const char *text)
{
	client_send_error(&s->client, false, 0, code, "%s", text);
	if (s->w.fd < 0)
		return;
	s->state = SESSION_CLOSING;
	s->frame_start_ms = now_ms(); /* [quota] frame_timeout to take the answer */
	flush(s);
}

static void session_free(void *p)
{
	struct session *s = p;

	if (s->rd.cap > READER_KEEP)
		loop_trim_later();
	frame_reader_free(&s->rd);
	free(s);
}

static void session_close(struct session *s)
{
	struct outbuf *o;

	if (s->w.fd < 0)
		return;
	/* Off the loop first: what the gate says while closing the cards
	 * (an audit write that failed) is dropped, and a send that fails
	 * cannot enter session_close() a second time and free s twice. */
	/* The monitor holds the connection too, to see it hang up: the peer
	 * hears the end now, not when the last holder lets go. */
	shutdown(s->w.fd, SHUT_RDWR);
	loop_close(&s->w);
	runs_detach(&s->client);
	gate_session_closed(&s->client);
	while ((o = TAILQ_FIRST(&s->outq))) {
		TAILQ_REMOVE(&s->outq, o, link);
		frame_free(&o->f);
		free(o);
	}
	TAILQ_REMOVE(&s->b->sessions, s, link);
	s->b->nsessions--;
	log_debug("uid=%u session=%" PRIu64 " closed", (unsigned)s->client.peer.uid, s->sid);
	loop_defer_free(session_free, s);
}

/* ---- dispatch ------------------------------------------------------------- */

/* The hello's free-form name, for the log: escaped, so a client cannot
 * forge log lines or drive an operator's terminal with it. */
static void log_client_name(const struct session *s, struct pstr name)
{
	char shown[4 * 255 + 1];
	size_t o = 0;

	for (size_t i = 0; i < name.len && o + 5 <= sizeof(shown); i++) {
		unsigned char ch = (unsigned char)name.ptr[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '"')
			shown[o++] = (char)ch;
		else
			o += (size_t)snprintf(shown + o, sizeof(shown) - o, "\\x%02x", ch);
	}
	shown[o] = '\0';
	log_info("uid=%u pid=%d session=%" PRIu64 " hello from client \"%s\"",
		 (unsigned)s->client.peer.uid, (int)s->client.peer.pid, s->sid, shown);
}

static int on_hello(struct client_link *cl, const struct msg *m)
{
	struct session *s = session_of(cl);
	const struct config *c = &s->b->cfg;
	struct msg_welcome w = { .version = PROTO_VERSION, .broker = BROKER_NAME,
				 .mode = sandbox_mode_name(c->sandbox),
				 .execute_code = c->sandbox != SANDBOX_NONE,
				 .max_frame = c->frame_max, .max_snippet = c->snippet_max,
				 .max_timeout_ms = c->timeout_max_ms };
	struct frame f;

	if (m->u.hello.version < 1) {
		session_fail(s, PERR_VERSION, "this broker speaks protocol version 1 only");
		return -EPROTO;
	}
	/* The operator may not trust agent hosts to relay cards to a person:
	 * then the MCP front is served as a client without a channel. */
	s->client.channel_withheld = m->u.hello.channel && m->u.hello.mcp && !c->mcp_elicitation;
	s->client.channel = m->u.hello.channel && !s->client.channel_withheld;
	s->client.escalate = s->client.channel && m->u.hello.escalate;
	s->state = SESSION_READY;
	log_client_name(s, m->u.hello.client);
	if (s->client.channel_withheld)
		log_info("uid=%u session=%" PRIu64 " served without an approval channel: it is "
			 "the MCP front and [mcp] elicitation = no", (unsigned)s->client.peer.uid,
			 s->sid);
	if (enc_welcome(&f, &w) < 0)
		return -ENOMEM;
	return session_send(s, &f);
}

static bool id_in_use(struct session *s, uint64_t id)
{
	return run_of_client(&s->client, id) || gate_card_for_id(&s->client, id);
}

/* A card shows the code as UTF-8; python3 decodes it as its coding line
 * says.  With UTF-7 a comment on the card ("# +AAo-...") is a new line of
 * code to python3, so such a snippet is refused before any card. */
static bool code_declares_foreign_encoding(struct session *s, const struct msg_exec *e)
{
	const char *name;
	size_t len;

	if (!scan_declared_encoding(e->code.ptr, e->code.len, &name, &len) ||
	    scan_encoding_is_utf8(name, len))
		return false;
	client_send_error(&s->client, true, e->id, PERR_BAD_FIELD,
			  "exec: code declares the source encoding '%.*s' on its first lines: "
			  "python3 would decode it otherwise than the card shows it (UTF-8); "
			  "declare utf-8 or remove the declaration",
			  (int)(len > 32 ? 32 : len), name);
	return true;
}

/* python3 reads a carriage return not followed by a line feed as a line
 * break; a card shows it as \x0d inside one numbered line, so the code
 * after it ("# note\rimport os...") would read as part of a comment.  A
 * CR LF is one line break to both. */
static bool code_has_lone_cr(struct session *s, const struct msg_exec *e)
{
	const char *p = e->code.ptr, *end = p + e->code.len;
	unsigned line = 1;

	for (; p + 1 < end; p++) {
		if (*p == '\n')
			line++;
		else if (*p == '\r' && p[1] != '\n')
			break;
	}
	if (p + 1 >= end)
		return false;
	client_send_error(&s->client, true, e->id, PERR_BAD_FIELD,
			  "exec: code has a carriage return without a line feed on line %u: "
			  "python3 starts a new line there, which a card would show inside "
			  "that line; end lines with LF or CR LF",
			  line);
	return true;
}

static int on_exec(struct client_link *cl, const struct msg *m)
{
	struct session *s = session_of(cl);
	const struct msg_exec *e = &m->u.exec;
	const struct config *c = &s->b->cfg;
	char why[300];

	if (e->timeout_ms > c->timeout_max_ms) {
		client_send_error(cl, true, e->id, PERR_BAD_FIELD,
				  "exec: timeout_ms %" PRIu64 " is over the maximum of %" PRIu64,
				  e->timeout_ms, c->timeout_max_ms);
		return 0;
	}
	if (env_check_request(e->env, e->n_env, why, sizeof(why)) < 0) {
		client_send_error(cl, true, e->id, PERR_BAD_FIELD, "%s", why);
		return 0;
	}
	if (code_declares_foreign_encoding(s, e))
		return 0;
	if (code_has_lone_cr(s, e))
		return 0;
	gate_exec(cl, e);
	return 0;
}

static int on_cancel(struct client_link *cl, const struct msg *m)
{
	struct run *r = run_of_client(cl, m->u.cancel.id);

	if (r) {
		run_cancel(r);
		return 0;
	}
	if (gate_cancel_card(cl, m->u.cancel.id))
		return 0;
	client_send_error(cl, true, m->u.cancel.id, PERR_NO_SUCH_RUN,
			  "cancel: no run or card with id %" PRIu64 " on this connection",
			  m->u.cancel.id);
	return 0;
}

#define IN_NEW (1u << SESSION_NEW)
#define IN_READY (1u << SESSION_READY)

/* Which message is allowed in which state: hello once, first; everything
 * else after it.  A known type that a client never sends (a worker-link or
 * broker->client message) is answered `bad-state`. */
static const struct handler {
	enum msg_type type;
	unsigned states;
	bool new_id; /* its id starts a request: refused while a live one has it */
	int (*fn)(struct client_link *cl, const struct msg *m);
} handlers[] = {
	{ MSG_HELLO, IN_NEW, false, on_hello },
	{ MSG_EXEC, IN_READY, true, on_exec },
	{ MSG_CANCEL, IN_READY, false, on_cancel }, /* names the live exec */
	{ MSG_ANSWER, IN_READY, true, gate_on_answer },
	{ MSG_GRANTS, IN_READY, true, gate_on_grants },
	{ MSG_REVOKE, IN_READY, true, gate_on_revoke },
	{ MSG_AUDIT, IN_READY, true, gate_on_audit },
};

static const struct handler *handler_for(enum msg_type t)
{
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].type == t)
			return &handlers[i];
	return NULL;
}

static int dispatch(struct session *s, const uint8_t *p, size_t len)
{
	/* Frames are decoded into one static buffer: a per-frame allocation
	 * of this ~36 KiB union left its pages behind in every connection's
	 * heap.  A dispatch nested inside another (a handler's answer to one
	 * client letting another client's queued frames through) allocates. */
	static struct msg msg;
	static unsigned depth;
	struct msg *m = depth ? malloc(sizeof(*m)) : &msg;
	const struct handler *h;
	struct proto_error err = { 0 };
	int rc = 0;

	if (!m)
		return -ENOMEM;
	depth++;
	s->client.frame_us = now_us();
	/* Every error carries the frame's id when it could be read. */
	if (proto_decode(p, len, s->b->cfg.snippet_max, m, &err) == MSG_UNKNOWN) {
		if (err.type != MSG_UNKNOWN && !handler_for(err.type))
			client_send_error(&s->client, err.has_id, err.id, PERR_BAD_STATE,
					  "'%s' is not a message a client sends",
					  msg_type_name(err.type));
		else
			client_send_error(&s->client, err.has_id, err.id, err.code, "%s", err.message);
		goto out;
	}
	h = handler_for(m->type);
	if (!h) {
		client_send_error(&s->client, m->has_id, m->id, PERR_BAD_STATE,
				  "'%s' is not a message a client sends", msg_type_name(m->type));
		goto out;
	}
	if (!(h->states & (1u << s->state))) {
		client_send_error(&s->client, m->has_id, m->id, PERR_BAD_STATE, "'%s' is not allowed %s",
				  msg_type_name(m->type),
				  s->state == SESSION_NEW ? "before hello" : "after hello");
		goto out;
	}
	if (h->new_id && m->has_id && id_in_use(s, m->id)) {
		refuse_reused_id(s, m);
		goto out;
	}
	rc = h->fn(&s->client, m);
out:
	depth--;
	if (m != &msg)
		free(m);
	return rc;
}

/* Starts the clock of [quota] frame_timeout at the first byte of a frame.
 * A connection with nothing half-read gives back a reader buffer that a
 * large frame grew (up to twice the frame limit), so a thousand idle
 * connections that each once sent a 1 MiB snippet do not keep 2 GiB. */
static void note_partial(struct session *s)
{
	if (frame_reader_partial(&s->rd)) {
		if (!s->frame_start_ms)
			s->frame_start_ms = now_ms();
		return;
	}
	s->frame_start_ms = 0;
	if (s->rd.cap > READER_KEEP) {
		size_t max = s->rd.max;

		frame_reader_free(&s->rd);
		frame_reader_init(&s->rd, max);
		loop_trim_later();
	}
}

/* Dispatches the complete frames already read, until the answers queued
 * for this client reach the high mark; flush() resumes below the low one. */
static void read_frames(struct session *s)
{
	const uint8_t *p;
	size_t len;
	int rc;

	s->dispatching = true;
	while (s->w.fd >= 0 && s->state != SESSION_CLOSING && !backlogged(s) &&
	       (rc = frame_reader_next(&s->rd, &p, &len)) != 0) {
		if (rc < 0) {
			char text[160];

			snprintf(text, sizeof(text),
				 "frame announces more than the limit of %zu bytes; closing",
				 s->rd.max);
			session_fail(s, PERR_TOO_LARGE, text);
			break;
		}
		s->frame_start_ms = 0;
		if (dispatch(s, p, len) < 0 && s->w.fd >= 0 && s->state != SESSION_CLOSING)
			session_fail(s, PERR_INTERNAL, "the broker could not handle that message");
	}
	s->dispatching = false;
	if (s->w.fd >= 0 && s->state != SESSION_CLOSING)
		note_partial(s);
}

static void on_client(struct watch *w, uint32_t events)
{
	struct session *s = w->ctx;
	ssize_t n;

	if (events & EPOLLOUT)
		flush(s);
	/* Half-closed: only the peer's full close (or an error) is news. */
	if (s->w.fd >= 0 && s->read_eof) {
		if (events & (EPOLLHUP | EPOLLERR))
			session_close(s);
		return;
	}
	if (s->w.fd < 0 || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ||
	    s->state == SESSION_CLOSING || (backlogged(s) && !(events & EPOLLHUP)))
		return;
	n = frame_reader_fill(&s->rd, w->fd);
	if (n == -EAGAIN)
		return;
	if (n == -EMSGSIZE) {
		read_frames(s);
		return;
	}
	if (n <= 0) {
		if (n == 0 && frame_reader_partial(&s->rd))
			log_info("uid=%u session=%" PRIu64 " closed mid-frame",
				 (unsigned)s->client.peer.uid, s->sid);
		/* EOF without EPOLLHUP: the peer shut its sending side only
		 * (a full close sets both); its runs go on. */
		else if (n == 0 && s->state == SESSION_READY && !(events & (EPOLLHUP | EPOLLERR))) {
			half_closed(s);
			return;
		}
		session_close(s);
		return;
	}
	read_frames(s);
}

/* shutdown() first, for the monitor's copy (session_close()). */
static void drop_connection(int fd)
{
	shutdown(fd, SHUT_RDWR);
	close(fd);
}

static void refuse(int fd, const char *code, const char *why)
{
	struct frame f;

	if (enc_error_simple(&f, false, 0, code, "%s", why) == 0) {
		/* Best effort on a fresh socket: the buffer is empty. */
		if (send(fd, f.data, f.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("could not tell a refused peer why: %s", strerror(errno));
		frame_free(&f);
	}
	drop_connection(fd);
}

static unsigned sessions_of_uid(struct broker *b, uid_t uid)
{
	struct session *s;
	unsigned n = 0;

	TAILQ_FOREACH(s, &b->sessions, link)
		n += s->client.peer.uid == uid;
	return n;
}

static struct session *session_new(struct broker *b, int fd, const struct ucred *cr)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->b = b;
	s->sid = ++b->next_sid;
	s->client.peer = *cr;
	s->state = SESSION_NEW;
	s->opened_ms = now_ms();
	TAILQ_INIT(&s->outq);
	s->client.ops = &link_ops;
	TAILQ_INIT(&s->client.runs);
	frame_reader_init(&s->rd, b->cfg.frame_max);
	if (loop_add(&s->w, fd, EPOLLIN, on_client, s) < 0) {
		free(s);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&b->sessions, s, link);
	b->nsessions++;
	return s;
}

/* Whether the broker has room for what serving a connection opens next
 * (the peer check's pidfd and /proc file, the audit row): two descriptors
 * beyond the reserve.  At the limit the connection just taken is the one
 * refused, with the limit named, rather than misread as a peer the broker
 * could not see. */
static bool at_fd_limit(int *err)
{
	int a = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int b = a < 0 ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);

	*err = errno;
	if (b >= 0)
		close(b);
	if (a >= 0)
		close(a);
	return b < 0 && (*err == EMFILE || *err == ENFILE);
}

static void refuse_at_fd_limit(int fd, int err)
{
	char why[200], msg[300];

	limit_named(err, "the broker", why, sizeof(why));
	log_warn("refused a connection: %s", why);
	snprintf(msg, sizeof(msg), "the broker cannot take more connections now (%s); "
		 "try again later", why);
	refuse(fd, PERR_BUSY, msg);
}

/* One descriptor held in reserve.  At the open-file limit accept() fails
 * with EMFILE and leaves the connection queued: the listener stays
 * readable and the loop would spin on it.  Giving the reserve up lets the
 * broker take that connection, tell the peer which limit was reached, and
 * close it. */
static int reserve_fd = -1;

static void keep_reserve(void)
{
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void refuse_over_fd_limit(int listen_fd, int err)
{
	int fd;

	if (reserve_fd >= 0) {
		close(reserve_fd);
		reserve_fd = -1;
	}
	fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0)
		refuse_at_fd_limit(fd, err);
	keep_reserve();
}

/* Serves the connection fd of the peer cr, or refuses it saying why.
 * `attached` is false when the monitor will start no worker for it (the
 * reason is in `refusal`): a system broker serves such a peer nothing. */
static void session_admit(struct broker *b, int fd, const struct ucred *cr, bool attached,
			  const char *refusal)
{
	char why[400];
	int err;

	if (at_fd_limit(&err)) {
		refuse_at_fd_limit(fd, err);
		return;
	}
	if (peer_from_a_run(b, fd, cr, why, sizeof(why))) {
		refuse(fd, PERR_FROM_A_RUN, why);
		return;
	}
	if (b->nsessions >= b->cfg.max_connections) {
		log_warn("uid=%u refused: %u connections open", (unsigned)cr->uid, b->nsessions);
		refuse(fd, PERR_BUSY, "the broker has too many connections; try again later");
		return;
	}
	if (sessions_of_uid(b, cr->uid) >= b->cfg.conns_per_uid) {
		log_warn("uid=%u refused: it holds %u connections ([quota] connections)",
			 (unsigned)cr->uid, b->cfg.conns_per_uid);
		snprintf(why, sizeof(why), "you have %u connections open to the broker, the most one "
			 "user may hold ([quota] connections); close one and try again",
			 b->cfg.conns_per_uid);
		refuse(fd, PERR_BUSY, why);
		return;
	}
	if (privsep_is_service_uid(cr->uid)) {
		log_warn("uid=%u pid=%d refused: a client running as the service user",
			 (unsigned)cr->uid, (int)cr->pid);
		gate_audit_refused_connection(cr->uid, cr->pid, NULL, "service-user");
		refuse(fd, PERR_REFUSED, "this is the broker's service user, whose files are every "
		       "user's grants and the audit trail: no snippet runs as it; connect as "
		       "another user");
		return;
	}
	if (!privsep_peer_allowed(&b->cfg, cr->uid, cr->gid, why, sizeof(why))) {
		log_warn("uid=%u pid=%d refused: %s", (unsigned)cr->uid, (int)cr->pid, why);
		refuse(fd, PERR_REFUSED, why);
		return;
	}
	if (!attached) {
		log_warn("uid=%u pid=%d refused: the monitor attached no user: %s",
			 (unsigned)cr->uid, (int)cr->pid, refusal);
		snprintf(why, sizeof(why), "uid %u cannot be served: %s", (unsigned)cr->uid, refusal);
		refuse(fd, PERR_REFUSED, why);
		return;
	}
	if (!session_new(b, fd, cr)) {
		drop_connection(fd);
		return;
	}
	log_debug("uid=%u pid=%d connected", (unsigned)cr->uid, (int)cr->pid);
}

void session_accept(struct watch *w, uint32_t events)
{
	struct broker *b = w->ctx;
	struct ucred cr;
	socklen_t sl = sizeof(cr);
	int fd;

	keep_reserve();
	fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		refuse_over_fd_limit(w->fd, errno);
		return;
	}
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR)
			log_warn("accept: %s", strerror(errno));
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) < 0) {
		log_warn("SO_PEERCRED: %s; closing", strerror(errno));
		close(fd);
		return;
	}
	session_admit(b, fd, &cr, true, NULL);
}

/* A system broker's connections come from its monitor, which accepted
 * them and read the peer's credentials itself.  One a call, as accept
 * takes one: the loop reads the connections already open in between, so
 * a burst of them is admitted at the pace they are served. */
void session_attach(struct watch *w, uint32_t events)
{
	struct broker *b = w->ctx;
	struct mon_attach a;
	int fd, rc, err;
	bool at_limit;

	/* At the open-file limit the descriptor would be lost on the way in:
	 * the reserve makes room for it, and the peer is told which limit. */
	keep_reserve();
	at_limit = at_fd_limit(&err);
	if (at_limit && reserve_fd >= 0) {
		close(reserve_fd);
		reserve_fd = -1;
	}
	rc = monlink_take_attach(&a, &fd);
	if (at_limit && rc == 0 && fd >= 0) {
		refuse_at_fd_limit(fd, err);
		keep_reserve();
		return;
	}
	keep_reserve();
	if (rc == -EAGAIN)
		return;
	if (rc < 0 && rc != -EBADMSG) {
		log_err("the monitor's link: %s", strerror(-rc));
		loop_close(w);
		return;
	}
	if (rc < 0 || fd < 0) {
		log_warn("the monitor handed over a connection without its descriptor (%s)",
			 rc < 0 ? "malformed" : "at the open-file limit");
		return;
	}
	if (a.attached == MON_AT_FD_LIMIT) {
		refuse_at_fd_limit(fd, EMFILE);
		return;
	}
	session_admit(b, fd, &(struct ucred){ .uid = a.uid, .gid = a.gid, .pid = a.pid },
		      a.attached == MON_ATTACHED, a.why);
}

void sessions_close_all(struct broker *b)
{
	struct session *s, *tmp;

	TAILQ_FOREACH_SAFE(s, &b->sessions, link, tmp)
		session_close(s);
}

/* ---- deadlines ------------------------------------------------------------ */

/* When this connection's time is up: [quota] hello_timeout from connecting
 * until hello, [quota] frame_timeout from a frame's first byte to its last.
 * UINT64_MAX: no deadline.  A connection the broker is not reading (its
 * answers are backlogged) is not the one that is slow: both clocks start
 * again once the broker reads it. */
static uint64_t session_deadline(struct session *s, uint64_t now)
{
	const struct config *c = &s->b->cfg;
	uint64_t at = UINT64_MAX;

	if (s->state == SESSION_CLOSING)
		return s->frame_start_ms + c->frame_timeout_ms;
	if (backlogged(s)) {
		s->stalled = true;
		return at;
	}
	if (s->stalled) {
		s->stalled = false;
		s->opened_ms = now;
		if (s->frame_start_ms)
			s->frame_start_ms = now;
	}
	if (s->state == SESSION_NEW)
		at = s->opened_ms + c->hello_timeout_ms;
	if (s->frame_start_ms && s->frame_start_ms + c->frame_timeout_ms < at)
		at = s->frame_start_ms + c->frame_timeout_ms;
	return at;
}

/* The answer goes out if the socket takes it at once; the connection is
 * closed either way, since a client this slow may not be reading. */
static void time_out(struct session *s, uint64_t now)
{
	const struct config *c = &s->b->cfg;
	bool hello = s->state == SESSION_NEW &&
		     now >= s->opened_ms + c->hello_timeout_ms;

	if (s->state == SESSION_CLOSING) {
		/* It was told why it is closed and did not read that either. */
		session_close(s);
		return;
	}
	log_warn("uid=%u pid=%d session=%" PRIu64 " closed: %s", (unsigned)s->client.peer.uid,
		 (int)s->client.peer.pid, s->sid, hello ? "no hello in time" : "a frame took too long");
	if (hello)
		client_send_error(&s->client, false, 0, PERR_TOO_SLOW,
				  "no hello within %" PRIu64 " ms of connecting ([quota] "
				  "hello_timeout); closing", c->hello_timeout_ms);
	else
		client_send_error(&s->client, false, 0, PERR_TOO_SLOW,
				  "a frame was not finished within %" PRIu64 " ms of its first "
				  "byte ([quota] frame_timeout); closing", c->frame_timeout_ms);
	session_close(s);
}

void sessions_tick(struct broker *b, uint64_t now)
{
	struct session *s, *tmp;

	TAILQ_FOREACH_SAFE(s, &b->sessions, link, tmp)
		if (now >= session_deadline(s, now))
			time_out(s, now);
}

int sessions_next_deadline(struct broker *b, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct session *s;

	TAILQ_FOREACH(s, &b->sessions, link) {
		uint64_t at = session_deadline(s, now);

		if (at < next)
			next = at;
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}
