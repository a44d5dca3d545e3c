/* SPDX-License-Identifier: MIT
 * `kotoba mcp`: the protocol side.  Reads newline-delimited JSON-RPC from
 * stdin, answers the lifecycle and tools/list itself and hands tools/call
 * to client/mcp_run.c; one poll loop over stdin and every run's broker
 * connection, so a card waiting for its elicitation never blocks the rest.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/mcp.h"

/* Newest first: an initialize asking for another gets the newest. */
static const char *const versions[] = { "2025-11-25", "2025-06-18", NULL };

uint64_t mcp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void mcp_send(json_t *msg)
{
	json_object_set_new(msg, "jsonrpc", json_string("2.0"));
	if (json_dumpf(msg, stdout, JSON_COMPACT) < 0)
		cli_error("out of memory writing a message");
	putchar('\n');
	fflush(stdout);
	json_decref(msg);
}

void mcp_error(json_t *id, int code, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mcp_send(json_pack("{s:O,s:{s:i,s:o}}", "id", id ? id : json_null(), "error", "code", code,
			   "message", json_text(msg, strlen(msg))));
}

static void answer(json_t *id, json_t *result)
{
	mcp_send(json_pack("{s:O,s:o}", "id", id, "result", result));
}

static void on_initialize(struct mcp *m, json_t *id, json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = versions[0];
	json_t *caps = json_object_get(params, "capabilities");

	if (!asked)
		return mcp_error(id, -32602, "initialize: params.protocolVersion must be a string");
	for (size_t i = 0; versions[i]; i++)
		if (!strcmp(asked, versions[i]))
			version = versions[i];
	/* An empty elicitation object means form mode; one that lists its
	 * modes must list form, the only mode a card uses. */
	json_t *el = json_object_get(caps, "elicitation");
	m->client_elicits = json_is_object(el) &&
			    (!json_object_size(el) || json_object_get(el, "form"));
	answer(id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s}}", "protocolVersion", version,
			     "capabilities", "tools", "listChanged", 0,
			     "serverInfo", "name", "kotoba", "version", kotoba_version()));
}

static void on_tools_list(struct mcp *m, json_t *id)
{
	char mode[16];
	json_t *tools = json_array();

	/* The spec: in mode none execute_code is not offered, not refused.
	 * A broker that cannot be reached now may be later: the tool is
	 * listed, and a call says why it cannot run. */
	mcp_broker_mode(m, mode, sizeof(mode));
	if (strcmp(mode, "none"))
		json_array_append_new(tools, mcp_tool());
	answer(id, json_pack("{s:o}", "tools", tools));
}

static void on_request(struct mcp *m, json_t *id, const char *method, json_t *params)
{
	if (params && !json_is_object(params))
		return mcp_error(id, -32602, "%s: params must be an object", method);
	if (!strcmp(method, "initialize"))
		on_initialize(m, id, params);
	else if (!strcmp(method, "ping"))
		answer(id, json_object());
	else if (!strcmp(method, "tools/list"))
		on_tools_list(m, id);
	else if (!strcmp(method, "tools/call"))
		mcp_call(m, id, params);
	else
		mcp_error(id, -32601, "unknown method %s", method);
}

static void on_notification(struct mcp *m, const char *method, json_t *params)
{
	if (!strcmp(method, "notifications/cancelled"))
		mcp_cancel(m, json_object_get(params, "requestId"));
	/* Others (initialized, roots changes...) need nothing from us. */
}

static void on_line(struct mcp *m, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr), *id;
	const char *method;

	if (!msg)
		return mcp_error(NULL, -32700, "invalid JSON at byte %d: %s", jerr.position,
				 jerr.text);
	id = json_object_get(msg, "id");
	method = json_string_value(json_object_get(msg, "method"));
	if (!json_is_object(msg) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") ||
	    (id && !json_is_string(id) && !json_is_integer(id)))
		mcp_error(json_is_object(msg) && (json_is_string(id) || json_is_integer(id)) ? id : NULL,
			  -32600, "not a JSON-RPC 2.0 message: an object with \"jsonrpc\": \"2.0\" "
			  "and a string or integer id");
	else if (!method && id)
		mcp_elicit_reply(m, msg);
	else if (!method)
		mcp_error(NULL, -32600, "a request needs a string method");
	else if (id)
		on_request(m, id, method, json_object_get(msg, "params"));
	else
		on_notification(m, method, json_object_get(msg, "params"));
	json_decref(msg);
}

struct lines {
	char *p;
	size_t len;
	bool skipping;                  /* inside a line over MCP_LINE_MAX */
};

/* Reads what stdin holds and handles each whole line.  False at EOF. */
static bool read_stdin(struct mcp *m, struct lines *l)
{
	char chunk[65536];
	ssize_t n = read(0, chunk, sizeof(chunk));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	for (ssize_t i = 0; i < n; i++) {
		if (chunk[i] != '\n') {
			if (l->skipping)
				continue;
			if (l->len == MCP_LINE_MAX) {
				mcp_error(NULL, -32600, "a message is longer than %u bytes: "
					  "it was not read", MCP_LINE_MAX);
				l->skipping = true;
				l->len = 0;
				continue;
			}
			l->p[l->len++] = chunk[i];
			continue;
		}
		if (!l->skipping && l->len && !(l->len == 1 && l->p[0] == '\r'))
			on_line(m, l->p, l->len);
		l->skipping = false;
		l->len = 0;
	}
	return true;
}

static void serve(struct mcp *m)
{
	struct lines l = { .p = malloc(MCP_LINE_MAX) };
	struct pollfd fds[1 + MCP_RUNS_MAX];
	struct mcp_run *at[1 + MCP_RUNS_MAX];

	if (!l.p)
		return cli_error("out of memory");
	for (;;) {
		nfds_t n = 1;

		fds[0] = (struct pollfd){ .fd = 0, .events = POLLIN };
		for (size_t i = 0; i < MCP_RUNS_MAX; i++)
			if (m->runs[i].used) {
				at[n] = &m->runs[i];
				fds[n++] = (struct pollfd){ .fd = kotoba_conn_fd(m->runs[i].c),
							    .events = POLLIN };
			}
		if (poll(fds, n, 1000) < 0 && errno != EINTR)
			break;
		for (nfds_t i = 1; i < n; i++)
			if (fds[i].revents)
				mcp_run_step(at[i]);
		mcp_progress(m);
		if (fds[0].revents && !read_stdin(m, &l))
			break;
	}
	/* EOF: the client is gone; nothing it started goes on. */
	mcp_cancel(m, NULL);
	free(l.p);
}

static void usage_mcp(FILE *f)
{
	fputs("usage: kotoba mcp [--socket PATH] [--cwd DIR] [--no-elicitation]\n", f);
}

int cmd_mcp(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "cwd", required_argument, NULL, 'C' },
		{ "no-elicitation", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct mcp m = { .next_id = 1 };
	bool seen[256] = { false };
	const char *cwd = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (!cli_option_once(c, lo, seen) || (c == 'S' && !cli_socket_fits(optarg)))
			return usage_mcp(stderr), KOTOBA_EXIT_USAGE;
		if (c == 'S')
			m.socket = optarg;
		else if (c == 'C')
			cwd = optarg;
		else if (c == 'n')
			m.no_elicitation = true;
		else if (c == 'h')
			return usage_mcp(stdout), 0;
		else
			return usage_mcp(stderr), KOTOBA_EXIT_USAGE;
	}
	if (optind < argc)
		return usage_mcp(stderr), KOTOBA_EXIT_USAGE;
	if (cwd ? !realpath(cwd, m.cwd) : !getcwd(m.cwd, sizeof(m.cwd))) {
		cli_error("working directory %s: %s", cwd ? cwd : ".", strerror(errno));
		return KOTOBA_EXIT_USAGE;
	}
	serve(&m);
	return 0;
}
