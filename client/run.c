/* SPDX-License-Identifier: MIT
 * `kotoba run`: send one snippet, stream its output, exit with its status.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/card.h"
#include "client/cli.h"

/* Names the CLI forwards from its own environment; the broker applies its
 * own allowlist on top, so this list is a convenience, not a control. */
static const char *const forwarded[] = { "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
					 "PYTHONPATH", "VIRTUAL_ENV", NULL };

struct run_opts {
	const char *code_arg, *file, *cwd, *socket, *answer;
	uint64_t timeout_ms;
	bool json, no_channel;
};

struct buf {
	char *p;
	size_t len, cap;
};

struct outcome {
	bool have_exit;
	struct msg_exit exit;
	char err_code[32], err_step[32];
	int64_t err_errno;
	char *err_msg;
	struct buf out[2];
};

static void usage_run(FILE *f)
{
	fputs("usage: kotoba run [-c CODE | FILE | -] [--cwd DIR] [--timeout SECONDS]\n"
	      "                  [--socket PATH] [--json] [--no-channel]\n"
	      "                  [--answer once|always|deny]\n", f);
}

static int buf_add(struct buf *b, const void *p, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = (b->len + len + 1) * 2;
		char *n = realloc(b->p, cap);

		if (!n)
			return -ENOMEM;
		b->p = n;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	return 0;
}

static int read_code(const struct run_opts *o, struct buf *code)
{
	FILE *f;
	char chunk[65536];
	size_t n;

	if (o->code_arg)
		return buf_add(code, o->code_arg, strlen(o->code_arg));
	f = strcmp(o->file, "-") ? fopen(o->file, "rb") : stdin;
	if (!f) {
		cli_error("cannot read %s: %s", o->file, strerror(errno));
		return -1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (buf_add(code, chunk, n) < 0)
			break;
	if (ferror(f))
		cli_error("reading %s failed", o->file);
	if (f != stdin)
		fclose(f);
	return 0;
}

static int parse_timeout(const char *s, uint64_t *ms)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v <= 0 || v > 86400)
		return -1;
	*ms = (uint64_t)(v * 1000);
	return 0;
}

static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
	static const struct option lo[] = {
		{ "cwd", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' },
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-channel", no_argument, NULL, 'n' },
		{ "answer", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:h", lo, NULL)) != -1) {
		if (c == 'c')
			o->code_arg = optarg;
		else if (c == 'C')
			o->cwd = optarg;
		else if (c == 't' && parse_timeout(optarg, &o->timeout_ms) < 0)
			return cli_error("--timeout takes seconds, e.g. 30 or 0.5"), -1;
		else if (c == 'S')
			o->socket = optarg;
		else if (c == 'j')
			o->json = true;
		else if (c == 'n')
			o->no_channel = true;
		else if (c == 'a')
			o->answer = optarg;
		else if (c == 'h')
			return usage_run(stdout), exit(0), -1;
		else if (c != 't')
			return usage_run(stderr), -1;
	}
	if (optind < argc)
		o->file = argv[optind++];
	if (optind < argc || !!o->code_arg == !!o->file) {
		cli_error(o->code_arg && o->file ? "give -c CODE or a FILE, not both"
						 : "give the snippet: -c CODE, a FILE, or - for stdin");
		return usage_run(stderr), -1;
	}
	if (o->answer && strcmp(o->answer, "once") && strcmp(o->answer, "always") &&
	    strcmp(o->answer, "deny"))
		return cli_error("--answer takes once, always or deny"), -1;
	return 0;
}

static int build_exec(const struct run_opts *o, const struct buf *code, struct frame *f)
{
	struct msg_exec e = { .id = 1, .code = { code->p ? code->p : "", code->len },
			      .timeout_ms = o->timeout_ms };
	char cwd[PATH_MAX];

	if (o->cwd ? !realpath(o->cwd, cwd) : !getcwd(cwd, sizeof(cwd))) {
		cli_error("working directory %s: %s", o->cwd ? o->cwd : ".", strerror(errno));
		return -1;
	}
	e.cwd = pstr_c(cwd);
	for (size_t i = 0; forwarded[i]; i++) {
		const char *v = getenv(forwarded[i]);

		if (v)
			e.env[e.n_env++] = (struct env_pair){ pstr_c(forwarded[i]), pstr_c(v) };
	}
	return enc_exec(f, &e);
}

static void take_error(struct outcome *oc, const struct msg_error *e)
{
	snprintf(oc->err_code, sizeof(oc->err_code), "%.*s", (int)e->code.len, e->code.ptr);
	snprintf(oc->err_step, sizeof(oc->err_step), "%.*s", (int)e->step.len, e->step.ptr);
	oc->err_errno = e->err_no;
	oc->err_msg = pstr_dup(e->message);
}

/* Reads frames until this run's `exit` or `error`. */
static int converse(struct conn *c, const struct run_opts *o, struct outcome *oc)
{
	struct msg m;

	for (;;) {
		if (conn_recv(c, &m) < 0)
			return -1;
		if (m.type == MSG_OUTPUT) {
			int s = !strcmp(m.u.output.stream, "stderr");

			if (o->json)
				buf_add(&oc->out[s], m.u.output.data, m.u.output.len);
			else
				fwrite(m.u.output.data, 1, m.u.output.len, s ? stderr : stdout),
					fflush(s ? stderr : stdout);
		} else if (m.type == MSG_CARD) {
			if (card_answer(c, &m, o->answer, o->json) < 0)
				return -1;
		} else if (m.type == MSG_EXIT) {
			oc->have_exit = true;
			oc->exit = m.u.exit;
			return 0;
		} else if (m.type == MSG_ERROR) {
			take_error(oc, &m.u.error);
			if (m.u.error.has_id)
				return 0;
			cli_error("broker: %s", oc->err_msg);
		}
	}
}

/* Statuses of a run that did not produce an exit (see proto/status.h). */
static int error_status(const char *code)
{
	static const char *const did_not_run[] = { PERR_NOT_OFFERED, PERR_REFUSED, "denied",
						   "expired", PERR_SNIPPET_TOO_LARGE,
						   PERR_CANCELLED, NULL };

	if (!strcmp(code, PERR_SETUP_FAILED) || !strcmp(code, PERR_BAD_CWD))
		return KOTOBA_EXIT_SETUP;
	for (size_t i = 0; did_not_run[i]; i++)
		if (!strcmp(code, did_not_run[i]))
			return KOTOBA_EXIT_DID_NOT_RUN;
	return KOTOBA_EXIT_UNREACHABLE;
}

static int exit_status(const struct outcome *oc)
{
	const struct run_result *r = &oc->exit.r;

	if (!oc->have_exit)
		return error_status(oc->err_code);
	if (r->timed_out)
		return KOTOBA_EXIT_TIMEOUT;
	if (!r->exited)
		return KOTOBA_EXIT_SIGNAL_BASE + (int)r->signal;
	return (int)(r->code & 0xff);
}

static void print_json(const struct outcome *oc, int status)
{
	const struct msg_exit *x = &oc->exit;

	printf("{\"stdout\":");
	json_string(stdout, oc->out[0].p, oc->out[0].len);
	printf(",\"stderr\":");
	json_string(stdout, oc->out[1].p, oc->out[1].len);
	if (oc->have_exit) {
		if (x->r.exited)
			printf(",\"exit\":%" PRId64 ",\"signal\":null", x->r.code);
		else
			printf(",\"exit\":null,\"signal\":%" PRId64, x->r.signal);
		printf(",\"timed_out\":%s,\"truncated\":%s,\"duration_ms\":%" PRIu64
		       ",\"limit\":\"%s\",\"profile\":\"%s\",\"decision\":\"%s\",\"approver\":\"%s\","
		       "\"labels\":[",
		       x->r.timed_out ? "true" : "false", x->truncated ? "true" : "false",
		       x->r.duration_us / 1000, x->r.limit, x->profile, x->decision, x->approver);
		for (size_t i = 0; i < x->n_labels; i++)
			printf("%s\"%s\"", i ? "," : "", x->labels[i]);
		printf("]");
	} else {
		printf(",\"exit\":null,\"signal\":null,\"error\":{\"code\":");
		json_string(stdout, oc->err_code, strlen(oc->err_code));
		printf(",\"message\":");
		json_string(stdout, oc->err_msg ? oc->err_msg : "", oc->err_msg ? strlen(oc->err_msg) : 0);
		if (oc->err_step[0])
			printf(",\"step\":\"%s\",\"errno\":%" PRId64, oc->err_step, oc->err_errno);
		printf("}");
	}
	printf(",\"status\":%d}\n", status);
}

static void report_plain(const struct outcome *oc)
{
	if (!oc->have_exit) {
		cli_error("%s", oc->err_msg ? oc->err_msg : "the snippet did not run");
		return;
	}
	if (oc->exit.r.timed_out)
		cli_error("the snippet was stopped after its timeout");
	if (oc->exit.truncated)
		cli_error("output was truncated at the broker's per-stream limit");
	if (oc->exit.r.limit[0] && strcmp(oc->exit.r.limit, "wall"))
		cli_error("the snippet hit its %s limit", oc->exit.r.limit);
}

static void outcome_free(struct outcome *oc)
{
	free(oc->out[0].p);
	free(oc->out[1].p);
	free(oc->err_msg);
}

/* Connects, sends the exec, and follows it to its end. */
static int run_snippet(const struct run_opts *o, const struct buf *code, struct outcome *oc)
{
	struct conn c;
	struct frame f;
	int rc;

	if (build_exec(o, code, &f) < 0)
		return KOTOBA_EXIT_USAGE;
	rc = conn_open(&c, o->socket, !o->no_channel);
	if (rc == 0 && (conn_send(&c, &f) < 0 || converse(&c, o, oc) < 0))
		rc = KOTOBA_EXIT_UNREACHABLE;
	frame_free(&f);
	conn_close(&c);
	return rc;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	struct outcome oc = { 0 };
	struct buf code = { 0 };
	int status;

	if (parse_run_args(argc, argv, &o) < 0 || read_code(&o, &code) < 0) {
		free(code.p);
		return KOTOBA_EXIT_USAGE;
	}
	status = run_snippet(&o, &code, &oc);
	if (status == 0) {
		status = exit_status(&oc);
		if (o.json)
			print_json(&oc, status);
		else
			report_plain(&oc);
	}
	free(code.p);
	outcome_free(&oc);
	return status;
}
