/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/cli.h"
#include "proto/paths.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("kotoba: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int dial(struct conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	strcpy(sa.sun_path, c->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		cli_error("cannot reach the broker at %s: %s\n"
			  "  Is kotoba-brokerd running?  Start it with `make run`, or pass --socket.",
			  c->path, strerror(errno));
		return -1;
	}
	return 0;
}

int conn_open(struct conn *c, const char *socket_path, bool channel)
{
	struct msg_hello h = { .version = PROTO_VERSION, .channel = channel,
			       .client = pstr_c("kotoba/0.1") };
	struct frame f;
	struct msg m;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (socket_path)
		snprintf(c->path, sizeof(c->path), "%s", socket_path);
	else if (default_socket_path(c->path, sizeof(c->path)) < 0) {
		cli_error("the default socket path is too long; pass --socket");
		return KOTOBA_EXIT_UNREACHABLE;
	}
	if (strlen(c->path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		cli_error("socket path %s is too long", c->path);
		return KOTOBA_EXIT_UNREACHABLE;
	}
	if (dial(c) < 0 || enc_hello(&f, &h) < 0)
		return KOTOBA_EXIT_UNREACHABLE;
	/* A broker that refuses this peer says why and closes at once, so the
	 * hello may fail to send: read the reason either way. */
	(void)write_all(c->fd, f.data, f.len);
	frame_free(&f);
	if (conn_recv(c, &m) < 0)
		return KOTOBA_EXIT_UNREACHABLE;
	if (m.type == MSG_ERROR) {
		cli_error("the broker refused the connection: %.*s", (int)m.u.error.message.len,
			  m.u.error.message.ptr);
		return KOTOBA_EXIT_UNREACHABLE;
	}
	if (m.type != MSG_WELCOME) {
		cli_error("the broker answered hello with '%s'", msg_type_name(m.type));
		return KOTOBA_EXIT_UNREACHABLE;
	}
	c->welcome = m.u.welcome;
	return 0;
}

void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->buf = NULL;
	c->fd = -1;
}

int conn_send(struct conn *c, struct frame *f)
{
	int rc = write_all(c->fd, f->data, f->len);

	frame_free(f);
	if (rc < 0)
		cli_error("lost the broker while sending: %s", strerror(-rc));
	return rc;
}

int conn_recv(struct conn *c, struct msg *m)
{
	struct proto_error err = { 0 };
	ssize_t n;

	free(c->buf);
	c->buf = NULL;
	n = frame_read_blocking(c->fd, PROTO_FRAME_MAX_DEFAULT, &c->buf);
	if (n <= 0) {
		cli_error("lost the broker: %s", n == 0 ? "connection closed" : strerror((int)-n));
		return -1;
	}
	if (proto_decode(c->buf, (size_t)n, PROTO_SNIPPET_MAX_DEFAULT, m, &err) == MSG_UNKNOWN) {
		cli_error("the broker sent a frame this client cannot read: %s", err.message);
		return -1;
	}
	return 0;
}
