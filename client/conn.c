/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "client/cli.h"

/* Messages often carry the broker's words or a path: shown through
 * kotoba_show(), so no byte of them reaches the terminal as a control. */
void cli_usage(FILE *f)
{
	fputs("usage: kotoba run [-c CODE | FILE | -] [--cwd DIR] [--timeout S] [--json]\n"
	      "                  [--no-channel] [--answer once|always|deny] [--socket PATH]\n"
	      "                  [--for DURATION] [--scope DIR]\n"
	      "       kotoba mcp [--socket PATH] [--cwd DIR] [--no-elicitation]\n"
	      "       kotoba scan FILE|-\n"
	      "       kotoba approvals ls|rm execute_code [--socket PATH]\n"
	      "       kotoba audit tail|verify|show N [--socket PATH]\n"
	      "       kotoba audit verify --db FILE [--key KEY|--key-file FILE] [--anchors FILE]\n"
	      "\n"
	      "Exit status: the snippet's own; 124 timed out; 125 broker unreachable;\n"
	      "126 did not run (denied, expired, refused, not offered); 127 sandbox setup\n"
	      "failed; 128+N killed by signal N; 64 usage error.\n", f);
}

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

static void name_option(char *out, size_t len, int c, const struct option *lo)
{
	for (; lo->name; lo++)
		if (lo->val == c) {
			snprintf(out, len, "--%s", lo->name);
			return;
		}
	snprintf(out, len, "-%c", c);
}

bool cli_option_once(int c, const struct option *lo, bool seen[256])
{
	char name[64];

	if (c < 0 || c > 255 || c == '?' || c == ':')
		return true; /* getopt_long has said what is wrong */
	name_option(name, sizeof(name), c, lo);
	if (seen[c]) {
		cli_error("%s given more than once", name);
		return false;
	}
	seen[c] = true;
	if (optarg && !*optarg) {
		cli_error("%s needs a non-empty argument", name);
		return false;
	}
	return true;
}

bool cli_socket_fits(const char *path)
{
	size_t n = strlen(path), room = sizeof(((struct sockaddr_un *)0)->sun_path);

	if (n < room)
		return true;
	cli_error("--socket: the path is %zu bytes; a socket path holds at most %zu", n,
		  room - 1);
	return false;
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

int cli_open(struct kotoba_client **c, const char *socket_path, unsigned flags)
{
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	char path[108], name[48];

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
	snprintf(name, sizeof(name), "kotoba/%s", kotoba_version());
	if (kotoba_hello_flags(*c, flags, name, &err)) {
		kotoba_close(*c);
		*c = NULL;
		return open_failed(socket_path, &err);
	}
	return 0;
}
