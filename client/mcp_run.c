/* SPDX-License-Identifier: MIT
 * `kotoba mcp`: the execute_code tool.  Each tools/call is a run on a
 * broker connection of its own (so a broker that restarted is met afresh
 * by the next call); a card becomes an elicitation/create request to the
 * client, whose answer goes back with kotoba_answer().
 */
#include <errno.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>

#include "client/card.h"
#include "client/mcp.h"
#include "proto/proto.h" /* proto_labels */

/* The spec's table in a few lines: what the tool does and when it asks.
 * The labels are the protocol's list (proto_labels). */
static const char description_head[] =
	"Runs a Python snippet with python3 on this computer, in a kernel sandbox "
	"(seccomp, and Landlock for snippets nobody approved), and returns its output "
	"and exit status. Every snippet is scanned for these labels:";
static const char description_tail[] =
	". In sandbox mode local a person approves each snippet through a card unless "
	"they saved a grant; a grant never covers a labelled snippet. In mode docker "
	"unlabelled snippets run in a container with no card. When this client cannot "
	"show cards (no elicitation), plain snippets run unattended under the tightest "
	"sandbox and labelled ones are refused. Files the snippet writes stay written.";

static json_t *description(void)
{
	char text[1024];
	size_t n = snprintf(text, sizeof(text), "%s", description_head);

	for (size_t i = 0; proto_labels[i] && n < sizeof(text); i++)
		n += snprintf(text + n, sizeof(text) - n, "%s %s", i ? "," : "", proto_labels[i]);
	if (n < sizeof(text))
		snprintf(text + n, sizeof(text) - n, "%s", description_tail);
	return json_string(text);
}

json_t *mcp_tool(void)
{
	return json_pack(
		"{s:s,s:s,s:o,"
		"s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:s,s:i},s:{s:s,s:s}},s:[s],s:b},"
		"s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:[s,s]},s:{s:[s,s]},"
		"s:{s:s},s:{s:s},s:{s:s,s:{s:s}},s:{s:s}},s:[s,s,s]},"
		"s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", "execute_code", "title", "Run Python (kotoba sandbox)",
		"description", description(),
		"inputSchema", "type", "object", "properties",
		"code", "type", "string", "description", "the Python source to run",
		"timeout_s", "type", "number", "description",
		"wall-clock limit in seconds (the broker caps it)", "exclusiveMinimum", 0,
		"cwd", "type", "string", "description",
		"absolute working directory; default: the server's",
		"required", "code", "additionalProperties", 0,
		"outputSchema", "type", "object", "properties",
		"stdout", "type", "string", "stderr", "type", "string",
		"status", "type", "integer",
		"exit", "type", "integer", "null", "signal", "type", "integer", "null",
		"approver", "type", "string", "timed_out", "type", "boolean",
		"labels", "type", "array", "items", "type", "string",
		"error", "type", "object",
		"required", "stdout", "stderr", "status",
		"annotations", "title", "Run Python (kotoba sandbox)", "readOnlyHint", 0,
		"destructiveHint", 1, "idempotentHint", 0, "openWorldHint", 1);
}

static void buf_add(struct mcp_buf *b, const void *p, size_t len)
{
	char *n;

	if (b->len + len > MCP_OUTPUT_MAX) {
		b->cut = true;
		len = MCP_OUTPUT_MAX - b->len;
	}
	if (!len || !(n = realloc(b->p, b->len + len)))
		return;
	b->p = n;
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

static void run_free(struct mcp_run *r)
{
	kotoba_close(r->c);
	json_decref(r->id);
	json_decref(r->progress);
	json_decref(r->images);
	json_decref(r->other_files);
	for (int i = 0; i < 2; i++) {
		free(r->out[i].p);
		free(r->first_out[i].p);
	}
	memset(r, 0, sizeof(*r));
}

static enum kotoba_code open_conn(const struct mcp *m, struct kotoba_client **c, unsigned flags,
				  struct kotoba_error *err)
{
	char path[108], name[48];
	const char *sock = m->socket;
	enum kotoba_code rc;

	if (!sock) {
		if ((rc = kotoba_default_socket(path, sizeof(path), err)))
			return rc;
		sock = path;
	}
	if ((rc = kotoba_connect(c, sock, err))) {
		if (rc == KOTOBA_ERR_UNREACHABLE)
			snprintf(err->message, sizeof(err->message),
				 "cannot reach the broker at %s: %s (is kotoba-brokerd running?)",
				 sock, strerror(err->sys_errno));
		return rc;
	}
	snprintf(name, sizeof(name), "kotoba-mcp/%s", kotoba_version());
	if ((rc = kotoba_hello_flags(*c, flags | KOTOBA_HELLO_MCP, name, err))) {
		kotoba_close(*c);
		*c = NULL;
	}
	return rc;
}

void mcp_broker_mode(const struct mcp *m, char *mode, size_t len)
{
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	struct kotoba_client *c = NULL;

	snprintf(mode, len, "%s", "");
	if (open_conn(m, &c, 0, &err) == KOTOBA_OK)
		snprintf(mode, len, "%s", kotoba_welcome(c)->mode);
	kotoba_close(c);
}

static void on_output(void *arg, enum kotoba_stream stream, const void *data, size_t len)
{
	struct mcp_run *r = arg;

	buf_add(&r->out[stream == KOTOBA_STDERR], data, len);
}

/* A file of $KOTOBA_OUTPUT_DIR: an image (by its magic bytes) becomes
 * MCP image content, base64 (Nettle); any other is named in the text. */
static void on_file(void *arg, const char *name, const void *data, size_t len)
{
	struct mcp_run *r = arg;
	const char *mime = kotoba_mime_type(data, len);
	char *b64;

	if (strncmp(mime, "image/", 6)) {
		json_array_append_new(r->other_files, json_string(name));
		return;
	}
	if (!(b64 = malloc(BASE64_ENCODE_RAW_LENGTH(len) + 1)))
		return;
	base64_encode_raw(b64, len, data);
	b64[BASE64_ENCODE_RAW_LENGTH(len)] = '\0';
	json_array_append_new(r->images, json_pack("{s:s,s:s,s:s}", "type", "image", "data", b64,
						   "mimeType", mime));
	free(b64);
}

/* The card as an elicitation: its whole text as the terminal shows it
 * (kotoba_card_text, the same escaping), its options as the answer's
 * enum, and for an `always` the grant's terms. */
static json_t *elicitation(const struct kotoba_card *card)
{
	char *text = kotoba_card_text(card, 0, 0);
	json_t *opts = json_array(), *props;

	for (const char *const *o = card->options; o && *o; o++)
		json_array_append_new(opts, json_string(*o));
	props = json_pack("{s:{s:s,s:s,s:o}}", "answer", "type", "string", "title", "Answer",
			  "enum", opts);
	if (!card->escalate) {
		json_object_set_new(props, "for", json_pack("{s:s,s:s}", "type", "string",
			"description", "with always: how long the grant lasts, e.g. 8h or 30m "
			"(empty: as long as the broker allows)"));
		json_object_set_new(props, "scope", json_pack("{s:s,s:s}", "type", "string",
			"description", "with always: a directory the grant is limited to "
			"(empty: any)"));
	}
	json_t *e = json_pack("{s:s,s:o,s:{s:s,s:o,s:[s]}}", "mode", "form",
			      "message", json_text(text ? text : "(out of memory)",
						   text ? strlen(text) : 15),
			      "requestedSchema", "type", "object", "properties", props,
			      "required", "answer");

	free(text);
	return e;
}

static enum kotoba_choice on_card(void *arg, const struct kotoba_card *card)
{
	struct mcp_run *r = arg;
	json_t *params;

	if (card->escalate) {
		/* The first run is over: keep its output and result apart. */
		kotoba_escalation(r->c, NULL, NULL, &r->first, NULL);
		memcpy(r->first_out, r->out, sizeof(r->out));
		memset(r->out, 0, sizeof(r->out));
	}
	if (!(params = elicitation(card)))
		return card->escalate ? KOTOBA_CARD_LEAVE : KOTOBA_CARD_DENY;
	snprintf(r->card_id, sizeof(r->card_id), "%s", card->id);
	r->card_escalate = card->escalate;
	r->elicit_id = r->m->next_id++;
	mcp_send(json_pack("{s:I,s:s,s:o}", "id", (json_int_t)r->elicit_id,
			   "method", "elicitation/create", "params", params));
	return KOTOBA_CARD_DEFER;
}

static struct mcp_run *run_for_elicitation(struct mcp *m, json_t *id)
{
	for (size_t i = 0; i < MCP_RUNS_MAX; i++)
		if (m->runs[i].used && m->runs[i].elicit_id &&
		    json_integer_value(id) == m->runs[i].elicit_id)
			return &m->runs[i];
	return NULL;
}

/* The person's answer, relayed by the client.  Decline, cancel, an error
 * or anything malformed is a deny (leave, on an escalation card). */
void mcp_elicit_reply(struct mcp *m, json_t *msg)
{
	struct mcp_run *r = run_for_elicitation(m, json_object_get(msg, "id"));
	json_t *res = json_object_get(msg, "result"), *content = json_object_get(res, "content");
	const char *action = json_string_value(json_object_get(res, "action"));
	const char *ans = json_string_value(json_object_get(content, "answer"));
	const char *dur = json_string_value(json_object_get(content, "for"));
	const char *scope = json_string_value(json_object_get(content, "scope"));
	enum kotoba_choice choice = r && r->card_escalate ? KOTOBA_CARD_LEAVE : KOTOBA_CARD_DENY;
	struct kotoba_grant_terms t = KOTOBA_GRANT_TERMS_INIT;
	struct kotoba_error err = KOTOBA_ERROR_INIT;

	if (!r)
		return; /* late: its run is over */
	r->elicit_id = 0;
	if (action && !strcmp(action, "accept") && ans) {
		if (r->card_escalate && !strcmp(ans, "rerun"))
			choice = KOTOBA_CARD_RERUN;
		else if (!r->card_escalate && !strcmp(ans, "once"))
			choice = KOTOBA_CARD_ONCE;
		else if (!r->card_escalate && !strcmp(ans, "always"))
			choice = KOTOBA_CARD_ALWAYS;
	}
	if (choice == KOTOBA_CARD_ALWAYS && ((dur && *dur) || (scope && *scope))) {
		if ((dur && *dur && !card_duration(dur, &t.for_ms)) ||
		    (scope && *scope && *scope != '/'))
			choice = KOTOBA_CARD_DENY; /* malformed terms */
		t.scope = scope && *scope ? scope : NULL;
		if (choice == KOTOBA_CARD_ALWAYS) {
			kotoba_answer_always(r->c, r->card_id, &t, &err);
			return;
		}
	}
	kotoba_answer(r->c, r->card_id, choice, &err);
}

static void text_add(json_t *content, const char *s, size_t len)
{
	if (len)
		json_array_append_new(content, json_pack("{s:s,s:o}", "type", "text", "text",
							 json_text(s, len)));
}

static void note(json_t *content, const char *s)
{
	text_add(content, s, strlen(s));
}

/* What the terminal says after a run, in words for the agent. */
static void add_notes(json_t *content, const struct mcp_run *r, bool ok,
		      enum kotoba_escalation esc)
{
	char line[256];

	for (int i = 0; i < 2; i++)
		if (r->out[i].cut || (ok && r->res.truncated)) {
			if (r->out[i].cut)
				snprintf(line, sizeof(line), "[kotoba: %s was truncated: this result "
					 "keeps its first 1 MiB]", i ? "stderr" : "stdout");
			else
				snprintf(line, sizeof(line), "[kotoba: %s may have been cut at %"
					 PRIu64 " bytes, the broker's per-stream limit ([limits] "
					 "output raises it)]", i ? "stderr" : "stdout",
					 r->res.output_limit);
			note(content, line);
		}
	if (!ok)
		return note(content, r->err.message[0] ? r->err.message : "the snippet did not run");
	if (r->res.timed_out)
		note(content, "[kotoba: the snippet was stopped after its timeout]");
	else if (!r->res.exited) {
		snprintf(line, sizeof(line), "[kotoba: the snippet was killed by signal %d%s%s]",
			 r->res.signal, r->res.limit[0] ? " at its limit: " : "", r->res.limit);
		note(content, line);
	}
	if (r->res.blocked_total) {
		char *s = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&s, &n);

		if (f) {
			kotoba_show_receipt(f, &r->res, 0);
			fclose(f);
			text_add(content, s, n);
			free(s);
		}
		if (esc == KOTOBA_ESCALATION_NONE)
			note(content, "[kotoba: the sandbox stopped what is listed above; a person "
				      "approving the snippet through a card would run it with their "
				      "permissions: tell them if it is needed]");
	}
	if (esc == KOTOBA_ESCALATION_LEFT || esc == KOTOBA_ESCALATION_EXPIRED)
		note(content, "[kotoba: the person did not approve running it again]");
}

/* A card the broker closed (expired, or the run ended) while its
 * elicitation waits: the client may stop asking. */
static void withdraw_elicitation(struct mcp_run *r, const char *why)
{
	if (!r->elicit_id)
		return;
	mcp_send(json_pack("{s:s,s:{s:I,s:s}}", "method", "notifications/cancelled",
			   "params", "requestId", (json_int_t)r->elicit_id, "reason", why));
	r->elicit_id = 0;
}

/* After the text: the images, then a line naming the other files and
 * what was left out. */
static void add_files(json_t *content, const struct mcp_run *r, bool ok)
{
	char line[512];
	size_t n = 0, i;
	json_t *v;

	json_array_extend(content, r->images);
	if (json_array_size(r->other_files)) {
		n = (size_t)snprintf(line, sizeof(line), "[kotoba: the snippet also left these "
				     "files in KOTOBA_OUTPUT_DIR:");
		json_array_foreach(r->other_files, i, v)
			if (n < sizeof(line))
				n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %s",
						      i ? "," : "", json_string_value(v));
		if (n < sizeof(line))
			snprintf(line + n, sizeof(line) - n, "]");
		text_add(content, line, strlen(line));
	}
	if (ok && r->res.files_left_out) {
		snprintf(line, sizeof(line), "[kotoba: %" PRIu64 " entries of KOTOBA_OUTPUT_DIR "
			 "were not returned: only regular files with plain names, at most 16 "
			 "files, 2 MiB each, 8 MiB in all]", r->res.files_left_out);
		text_add(content, line, strlen(line));
	}
}

static void finish(struct mcp_run *r, enum kotoba_code rc)
{
	bool ok = rc == KOTOBA_OK;
	enum kotoba_escalation esc = KOTOBA_ESCALATION_NONE;
	int status = run_status(ok, &r->res, r->err.code);
	json_t *sc = json_object(), *content = json_array();
	const struct mcp_buf *out = r->out;

	withdraw_elicitation(r, "the card is closed: nobody answered it in time");
	kotoba_escalation(r->c, &esc, NULL, NULL, NULL);
	/* Left or expired: the first run is the result, its output too. */
	if (esc == KOTOBA_ESCALATION_LEFT || esc == KOTOBA_ESCALATION_EXPIRED ||
	    esc == KOTOBA_ESCALATION_CANCELLED)
		out = r->first_out;
	json_object_set_new(sc, "stdout", json_text(out[0].p, out[0].len));
	json_object_set_new(sc, "stderr", json_text(out[1].p, out[1].len));
	if (ok)
		json_add_result(sc, &r->res);
	else
		json_add_error(sc, &r->err);
	if (json_escalation_name(esc))
		json_object_set_new(sc, "escalation", json_string(json_escalation_name(esc)));
	json_object_set_new(sc, "status", json_integer(status));
	text_add(content, out[0].p, out[0].len);
	text_add(content, out[1].p, out[1].len);
	add_notes(content, r, ok, esc);
	add_files(content, r, ok);
	if (!json_array_size(content))
		note(content, "[kotoba: the snippet printed nothing; exit status 0]");
	mcp_send(json_pack("{s:O,s:{s:o,s:o,s:b}}", "id", r->id, "result", "content", content,
			   "structuredContent", sc, "isError", status != 0));
	run_free(r);
}

static void tool_error(json_t *id, const char *msg)
{
	mcp_send(json_pack("{s:O,s:{s:[{s:s,s:o}],s:b}}", "id", id, "result", "content", "type",
			   "text", "text", json_text(msg, strlen(msg)), "isError", 1));
}

/* The arguments, checked: -32602 naming the field when one is wrong. */
static bool check_args(json_t *id, json_t *params, json_t **args)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *a = json_object_get(params, "arguments"), *t, *cwd, *code;
	const char *key;
	json_t *v;

	if (!name || strcmp(name, "execute_code"))
		return mcp_error(id, -32602, "params.name: unknown tool (the one tool is "
				 "execute_code)"), false;
	if (!json_is_object(a))
		return mcp_error(id, -32602, "params.arguments must be an object"), false;
	code = json_object_get(a, "code");
	t = json_object_get(a, "timeout_s");
	cwd = json_object_get(a, "cwd");
	if (!json_is_string(code))
		return mcp_error(id, -32602, "arguments.code must be a string"), false;
	if (t && (!json_is_number(t) || json_number_value(t) <= 0 ||
		  json_number_value(t) > 86400))
		return mcp_error(id, -32602, "arguments.timeout_s must be a number of seconds "
				 "above 0, at most 86400"), false;
	if (cwd && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
		return mcp_error(id, -32602, "arguments.cwd must be an absolute path"), false;
	json_object_foreach(a, key, v)
		if (strcmp(key, "code") && strcmp(key, "timeout_s") && strcmp(key, "cwd"))
			return mcp_error(id, -32602, "arguments.%.64s: no such argument (code, "
					 "timeout_s, cwd)", key), false;
	*args = a;
	return true;
}

static struct mcp_run *free_slot(struct mcp *m)
{
	for (size_t i = 0; i < MCP_RUNS_MAX; i++)
		if (!m->runs[i].used)
			return &m->runs[i];
	return NULL;
}

void mcp_call(struct mcp *m, json_t *id, json_t *params)
{
	json_t *args, *meta = json_object_get(params, "_meta");
	struct mcp_run *r;
	bool elicits = m->client_elicits && !m->no_elicitation;
	json_t *t, *cwd;
	struct kotoba_exec_opts x = { .size = sizeof(x), .on_output = on_output,
				      .on_card = on_card, .on_file = on_file };
	size_t code_len;

	if (!check_args(id, params, &args))
		return;
	if (!(r = free_slot(m)))
		return tool_error(id, "too many calls in flight: wait for one to end");
	*r = (struct mcp_run){ .used = true, .m = m, .id = json_incref(id),
			       .res = KOTOBA_RESULT_INIT, .first = KOTOBA_RESULT_INIT,
			       .err = KOTOBA_ERROR_INIT, .started_ms = mcp_now_ms(),
			       .images = json_array(), .other_files = json_array() };
	r->progress = json_incref(json_object_get(meta, "progressToken"));
	r->progress_ms = r->started_ms;
	/* Without elicitation nobody can answer a card: no approval channel,
	 * so plain snippets run unattended and labelled ones are refused. */
	if (open_conn(m, &r->c, elicits ? KOTOBA_HELLO_CHANNEL | KOTOBA_HELLO_ESCALATE : 0,
		      &r->err)) {
		tool_error(id, r->err.message);
		return run_free(r);
	}
	t = json_object_get(args, "timeout_s");
	cwd = json_object_get(args, "cwd");
	x.code = json_string_value(json_object_get(args, "code"));
	code_len = json_string_length(json_object_get(args, "code"));
	x.code_len = code_len;
	if (!code_len)
		x.code = "\n", x.code_len = 1;
	x.cwd = cwd ? json_string_value(cwd) : m->cwd;
	x.timeout_ms = t ? (uint64_t)(json_number_value(t) * 1000) : 0;
	x.arg = r;
	if (kotoba_exec_start(r->c, &x, &r->err)) {
		tool_error(id, r->err.message);
		run_free(r);
	}
}

void mcp_run_step(struct mcp_run *r)
{
	bool done = false;
	enum kotoba_code rc = kotoba_conn_process(r->c, &done, &r->res, &r->err);

	if (done)
		finish(r, rc);
}

static bool same_id(json_t *a, json_t *b)
{
	return a && b && json_equal(a, b);
}

void mcp_cancel(struct mcp *m, json_t *id)
{
	for (size_t i = 0; i < MCP_RUNS_MAX; i++) {
		struct mcp_run *r = &m->runs[i];
		struct kotoba_error err = KOTOBA_ERROR_INIT;

		if (!r->used || (id && !same_id(id, r->id)))
			continue;
		withdraw_elicitation(r, "the tool call was cancelled");
		/* The broker kills the snippet or withdraws its card; the
		 * client asked for no answer, so none is sent. */
		kotoba_cancel(r->c, &err);
		run_free(r);
	}
}

/* Every second of a run whose call asked for progress. */
void mcp_progress(struct mcp *m)
{
	uint64_t now = mcp_now_ms();

	for (size_t i = 0; i < MCP_RUNS_MAX; i++) {
		struct mcp_run *r = &m->runs[i];
		char msg[64];

		if (!r->used || !r->progress || now - r->progress_ms < 1000)
			continue;
		r->progress_ms = now;
		snprintf(msg, sizeof(msg), "%s for %.0f s", r->elicit_id ? "waiting for approval" :
			 "running", (double)(now - r->started_ms) / 1000);
		mcp_send(json_pack("{s:s,s:{s:O,s:I,s:s}}", "method", "notifications/progress",
				   "params", "progressToken", r->progress,
				   "progress", (json_int_t)((now - r->started_ms) / 1000),
				   "message", msg));
	}
}
