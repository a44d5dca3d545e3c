/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"

/* Messages often carry the broker's words or a path: shown through
 * kotoba_show(), so no byte of them reaches the terminal as a control. */
void cli_error(const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	fputs("kotoba: ", stderr);
	if (n < 0)
		fputs("(out of memory formatting a message)", stderr);
	else
		kotoba_show(stderr, msg, (size_t)n, KOTOBA_SHOW_LINES);
	fputc('\n', stderr);
	free(msg);
}

/* The library's sentences are the CLI's, except where the CLI can say
 * which of its own flags helps. */
static int open_failed(const char *path, const struct kotoba_error *err)
{
	if (err->code == KOTOBA_ERR_UNREACHABLE)
		cli_error("cannot reach the broker at %s: %s\n"
			  "  Is kotoba-brokerd running?  Start it with `make run`, or pass --socket.",
			  path, strerror(err->sys_errno));
	else if (err->from_broker)
		cli_error("the broker refused the connection: %s", err->message);
	else
		cli_error("%s", err->message);
	return KOTOBA_EXIT_UNREACHABLE;
}

int cli_open(struct kotoba_client **c, const char *socket_path, bool channel)
{
	struct kotoba_error err;
	char path[108];

	*c = NULL;
	if (!socket_path) {
		if (kotoba_default_socket(path, sizeof(path), NULL)) {
			cli_error("the default socket path is too long; pass --socket");
			return KOTOBA_EXIT_UNREACHABLE;
		}
		socket_path = path;
	}
	if (kotoba_connect(c, socket_path, &err))
		return open_failed(socket_path, &err);
	if (kotoba_hello(*c, channel, "kotoba/0.1", &err)) {
		kotoba_close(*c);
		*c = NULL;
		return open_failed(socket_path, &err);
	}
	return 0;
}
