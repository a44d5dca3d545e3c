/* SPDX-License-Identifier: MIT
 * Connecting, hello, and the frame I/O every request shares.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/lib/internal.h"
#include "proto/paths.h"

enum kotoba_code kotoba_default_socket(char *buf, size_t len, struct kotoba_error *err)
{
	if (client_socket_path(buf, len) < 0)
		return kc_fail(err, KOTOBA_ERR_INVALID, ENAMETOOLONG,
			       "the default socket path is too long; set KOTOBA_SOCKET");
	return KOTOBA_OK;
}

static enum kotoba_code dial(struct kotoba_client *c, struct kotoba_error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memcpy(sa.sun_path, c->path, sizeof(c->path));
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return kc_fail(err, KOTOBA_ERR_UNREACHABLE, errno,
			       "cannot reach the broker at %s: %s (is kotoba-brokerd running?)",
			       c->path, strerror(errno));
	return KOTOBA_OK;
}

static enum kotoba_code set_path(struct kotoba_client *c, const char *socket_path,
				 struct kotoba_error *err)
{
	enum kotoba_code rc;

	if (!socket_path) {
		rc = kotoba_default_socket(c->path, sizeof(c->path), err);
		if (rc)
			return rc;
	} else if (strlen(socket_path) >= sizeof(c->path)) {
		return kc_fail(err, KOTOBA_ERR_INVALID, ENAMETOOLONG,
			       "socket path %s is too long", socket_path);
	} else {
		snprintf(c->path, sizeof(c->path), "%s", socket_path);
	}
	return KOTOBA_OK;
}

static struct kotoba_client *client_new(void)
{
	struct kotoba_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->msg = malloc(sizeof(*c->msg));
	if (!c->msg) {
		free(c);
		return NULL;
	}
	c->fd = -1;
	c->next_id = 1;
	c->max_frame = PROTO_FRAME_MAX_DEFAULT;
	c->max_snippet = PROTO_SNIPPET_MAX_DEFAULT;
	frame_reader_init(&c->in, c->max_frame);
	pthread_mutex_init(&c->wlock, NULL);
	return c;
}

enum kotoba_code kotoba_connect(struct kotoba_client **out, const char *socket_path,
				struct kotoba_error *err)
{
	struct kotoba_client *c;
	enum kotoba_code rc;

	*out = NULL;
	c = client_new();
	if (!c)
		return kc_fail(err, KOTOBA_ERR_NOMEM, ENOMEM, "out of memory");
	rc = set_path(c, socket_path, err);
	if (!rc)
		rc = dial(c, err);
	if (rc) {
		kotoba_close(c);
		return rc;
	}
	*out = c;
	return KOTOBA_OK;
}

static void take_welcome(struct kotoba_client *c, const struct msg_welcome *w)
{
	struct kotoba_welcome *k = &c->welcome;

	k->version = (unsigned)w->version;
	snprintf(k->broker, sizeof(k->broker), "%s", w->broker);
	snprintf(k->mode, sizeof(k->mode), "%s", w->mode);
	k->execute_code = w->execute_code;
	k->max_frame = w->max_frame;
	k->max_snippet = w->max_snippet;
	k->max_timeout_ms = w->max_timeout_ms;
	/* Read at least the defaults: a frame the broker sends may be larger
	 * than what it accepts (a card carries a whole snippet). */
	if (w->max_frame > c->max_frame && w->max_frame <= UINT32_MAX)
		c->max_frame = (size_t)w->max_frame;
	c->in.max = c->max_frame;
	if (w->max_snippet > c->max_snippet && w->max_snippet <= UINT32_MAX)
		c->max_snippet = (size_t)w->max_snippet;
	c->welcomed = true;
}

enum kotoba_code kotoba_hello(struct kotoba_client *c, bool channel, const char *client_name,
			      struct kotoba_error *err)
{
	return kotoba_hello_flags(c, channel ? KOTOBA_HELLO_CHANNEL : 0, client_name, err);
}

enum kotoba_code kotoba_hello_flags(struct kotoba_client *c, unsigned flags,
				    const char *client_name, struct kotoba_error *err)
{
	bool channel = flags & KOTOBA_HELLO_CHANNEL, escalate = flags & KOTOBA_HELLO_ESCALATE;
	struct msg_hello h = { .version = PROTO_VERSION, .channel = channel,
			       .escalate = escalate, .mcp = flags & KOTOBA_HELLO_MCP,
			       .client = pstr_c(client_name ? client_name :
					       "libkotoba-client/" KOTOBA_CLIENT_VERSION) };
	/* kotoba_version() and the name sent agree: both are this library's. */
	struct frame f = { 0 };
	enum kotoba_code rc;

	if (c->welcomed)
		return kc_fail(err, KOTOBA_ERR_INVALID, 0, "hello was already said");
	if (flags & ~(KOTOBA_HELLO_CHANNEL | KOTOBA_HELLO_ESCALATE | KOTOBA_HELLO_MCP))
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "hello flags this library (%s) does not know", kotoba_version());
	if (escalate && !channel)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "escalation cards need an approval channel: KOTOBA_HELLO_CHANNEL");
	if ((rc = kc_encoded(enc_hello(&f, &h), err)))
		return rc;
	rc = kc_send(c, &f, err);
	/* A broker that refuses this peer says why and closes without reading
	 * hello: the sentence is still there to read after EPIPE. */
	if (rc == KOTOBA_ERR_DISCONNECTED && kc_recv(c, NULL) == KOTOBA_OK &&
	    c->msg->type == MSG_ERROR)
		return kc_broker_error(err, &c->msg->u.error);
	if (rc || (rc = kc_recv(c, err)))
		return rc;
	if (c->msg->type == MSG_ERROR)
		return kc_broker_error(err, &c->msg->u.error);
	if (c->msg->type != MSG_WELCOME)
		return kc_fail(err, KOTOBA_ERR_PROTOCOL, EPROTO,
			       "the broker answered hello with '%s'", msg_type_name(c->msg->type));
	take_welcome(c, &c->msg->u.welcome);
	c->escalate = escalate;
	return KOTOBA_OK;
}

enum kotoba_code kotoba_open(struct kotoba_client **out, const char *socket_path, bool channel,
			     struct kotoba_error *err)
{
	enum kotoba_code rc = kotoba_connect(out, socket_path, err);

	if (rc)
		return rc;
	rc = kotoba_hello(*out, channel, NULL, err);
	if (rc) {
		kotoba_close(*out);
		*out = NULL;
	}
	return rc;
}

const struct kotoba_welcome *kotoba_welcome(const struct kotoba_client *c)
{
	return c->welcomed ? &c->welcome : NULL;
}

int kotoba_conn_fd(const struct kotoba_client *c)
{
	return c->fd;
}

const char *kotoba_socket_path(const struct kotoba_client *c)
{
	return c->path;
}

void kotoba_close(struct kotoba_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	frame_reader_free(&c->in);
	free(c->msg);
	free(c);
}

enum kotoba_code kc_ready(const struct kotoba_client *c, struct kotoba_error *err)
{
	if (!c->welcomed)
		return kc_fail(err, KOTOBA_ERR_INVALID, 0, "say hello before any request");
	return KOTOBA_OK;
}

uint64_t kc_next_id(struct kotoba_client *c)
{
	uint64_t id;

	pthread_mutex_lock(&c->wlock);
	id = c->next_id++;
	pthread_mutex_unlock(&c->wlock);
	return id;
}

enum kotoba_code kc_send_locked(struct kotoba_client *c, struct frame *f,
				struct kotoba_error *err)
{
	int rc = send_all(c->fd, f->data, f->len);

	frame_free(f);
	if (rc < 0)
		return kc_fail(err, KOTOBA_ERR_DISCONNECTED, -rc, "lost the broker while sending: %s",
			       strerror(-rc));
	return KOTOBA_OK;
}

enum kotoba_code kc_send(struct kotoba_client *c, struct frame *f, struct kotoba_error *err)
{
	enum kotoba_code rc;

	pthread_mutex_lock(&c->wlock);
	rc = kc_send_locked(c, f, err);
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

/* Decodes the next whole frame the reader holds into c->msg (which points
 * into the reader's buffer until its next call).  *got is false when there
 * is none yet. */
static enum kotoba_code next_frame(struct kotoba_client *c, bool *got, struct kotoba_error *err)
{
	struct proto_error perr = { 0 };
	const uint8_t *p;
	size_t len;
	int rc = frame_reader_next(&c->in, &p, &len);

	*got = rc > 0;
	if (rc < 0)
		return kc_fail(err, KOTOBA_ERR_PROTOCOL, -rc,
			       "the broker sent a frame over the %zu-byte limit", c->max_frame);
	if (rc > 0 && proto_decode(p, len, c->max_snippet, c->msg, &perr) == MSG_UNKNOWN)
		return kc_fail(err, KOTOBA_ERR_PROTOCOL, EPROTO,
			       "the broker sent a frame this client cannot read: %s", perr.message);
	return KOTOBA_OK;
}

/* One read into the reader: blocks on the (blocking) socket unless the
 * caller knows it is readable. */
static enum kotoba_code fill(struct kotoba_client *c, struct kotoba_error *err)
{
	ssize_t n = frame_reader_fill(&c->in, c->fd);

	if (n <= 0)
		return kc_fail(err, KOTOBA_ERR_DISCONNECTED, n == 0 ? 0 : (int)-n,
			       "lost the broker: %s",
			       n == 0 ? "connection closed" : strerror((int)-n));
	return KOTOBA_OK;
}

enum kotoba_code kc_recv(struct kotoba_client *c, struct kotoba_error *err)
{
	enum kotoba_code rc;
	bool got;

	while (!(rc = next_frame(c, &got, err)) && !got)
		if ((rc = fill(c, err)))
			return rc;
	return rc;
}

enum kotoba_code kc_recv_ready(struct kotoba_client *c, bool *got, struct kotoba_error *err)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	enum kotoba_code rc = next_frame(c, got, err);
	int n;

	if (rc || *got)
		return rc;
	/* The socket stays blocking (sends from other threads rely on it):
	 * poll says whether one read would return at once. */
	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return kc_fail(err, KOTOBA_ERR_DISCONNECTED, errno, "poll: %s", strerror(errno));
	if (n == 0)
		return KOTOBA_OK;
	if ((rc = fill(c, err)))
		return rc;
	return next_frame(c, got, err);
}

/* The id an answer frame carries, if any. */
static bool answer_id(const struct msg *m, uint64_t *id)
{
	switch (m->type) {
	case MSG_GRANT_LIST:
		*id = m->u.grant_list.id;
		return true;
	case MSG_AUDIT_ROWS:
		*id = m->u.audit_rows.id;
		return true;
	case MSG_OK:
		*id = m->u.ok.id;
		return true;
	case MSG_ERROR:
		*id = m->u.error.id;
		return m->u.error.has_id;
	case MSG_UNKNOWN:
	case MSG_HELLO:
	case MSG_EXEC:
	case MSG_ANSWER:
	case MSG_CANCEL:
	case MSG_GRANTS:
	case MSG_REVOKE:
	case MSG_AUDIT:
	case MSG_WELCOME:
	case MSG_STARTED:
	case MSG_QUEUED:
	case MSG_OUTPUT:
	case MSG_FILE:
	case MSG_OUTPUT_FILE:
	case MSG_EXIT:
	case MSG_CARD:
	case MSG_JOB:
	case MSG_READY:
	case MSG_SETUP_ERROR:
	case MSG_FINISHED:
	case MSG_MASKS:
	case MSG_GO:
	case MSG_WARM:
	case MSG_TYPE_COUNT:
	default:
		return false;
	}
}

enum kotoba_code kc_request(struct kotoba_client *c, struct frame *f, uint64_t id,
			    struct kotoba_error *err)
{
	enum kotoba_code rc;
	uint64_t got, running;

	/* Reading this answer would consume the run's frames. */
	pthread_mutex_lock(&c->wlock);
	running = c->running;
	pthread_mutex_unlock(&c->wlock);
	if (running) {
		frame_free(f);
		return kc_fail(err, KOTOBA_ERR_INVALID, EBUSY,
			       "a snippet is running on this connection: wait for its end, "
			       "or use another connection");
	}
	rc = kc_send(c, f, err);

	while (!rc && !(rc = kc_recv(c, err))) {
		/* An error without id answers a frame the broker could not
		 * read: with one request outstanding, it is this one, unless
		 * it is about a late answer to a card (answers carry no id). */
		if (c->msg->type == MSG_ERROR && !c->msg->u.error.has_id &&
		    !pstr_eq(c->msg->u.error.code, PERR_NO_SUCH_CARD))
			return kc_broker_error(err, &c->msg->u.error);
		if (!answer_id(c->msg, &got) || got != id)
			continue; /* left over from an earlier, cancelled run */
		if (c->msg->type == MSG_ERROR)
			return kc_broker_error(err, &c->msg->u.error);
		return KOTOBA_OK;
	}
	return rc;
}
