/* SPDX-License-Identifier: MIT
 * A small program over libkotoba-client, driven by client/tests/test_libkotoba.py
 * against a real broker.  It uses only the public header and prints one
 * JSON object per event, so the test reads what the library reported.
 *
 *   kc-test SOCKET welcome
 *   kc-test SOCKET run CODE [channel] [answer=once|always|deny|defer|late|none]
 *                           [cwd=DIR] [timeout_ms=N] [env=NAME=value]
 *   kc-test SOCKET cancel CODE [DIR]  cancels from another thread after output
 *   kc-test SOCKET poll CODE [DIR]    runs it from a poll() loop, not blocking
 *   kc-test SOCKET escalate CODE DIR rerun|leave|defer|once|none|poll|wait|cancel
 *                      saves a grant, then runs CODE with escalation cards
 *                      declared, answering the escalation card as told
 *   kc-test SOCKET grants | revoke FAMILY | tail N | verify | misuse | version
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kotoba-client.h>

static void json_str(const char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void print_error(const char *event, enum kotoba_code rc, const struct kotoba_error *e)
{
	/* On success the library leaves *e as it was: the code is rc's. */
	printf("{\"event\":\"%s\",\"rc\":%d,\"code\":\"%s\",\"name\":", event, (int)rc,
	       kotoba_code_name(rc));
	json_str(e->name, strlen(e->name));
	printf(",\"from_broker\":%s,\"message\":", e->from_broker ? "true" : "false");
	json_str(e->message, strlen(e->message));
	printf(",\"step\":\"%s\",\"errno\":%d}\n", e->step, e->sys_errno);
}

static int cmd_grants(struct kotoba_client *c);

/* ---- run --------------------------------------------------------------------- */

struct run_state {
	struct kotoba_client *c;
	enum kotoba_choice answer;
	bool defer;
	unsigned delay_ms; /* before a deferred answer */
	bool after_expiry; /* answer=late: once the broker has recorded the expiry */
	/* deferral: the card id handed to the answering thread */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char card[256];
	bool have_card, saw_output, done;
	/* for_ms= and scope=: an `always` sent with terms from the callback */
	struct kotoba_grant_terms terms;
};

static void on_output(void *arg, enum kotoba_stream stream, const void *data, size_t len)
{
	struct run_state *st = arg;

	printf("{\"event\":\"output\",\"stream\":\"%s\",\"data\":",
	       stream == KOTOBA_STDOUT ? "stdout" : "stderr");
	json_str(data, len);
	printf("}\n");
	fflush(stdout);
	pthread_mutex_lock(&st->lock);
	st->saw_output = true;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
}

static void print_card(const struct kotoba_card *k)
{
	printf("{\"event\":\"card\",\"id\":\"%s\",\"snippet\":", k->id);
	json_str(k->snippet, k->snippet_len);
	printf(",\"labels\":[");
	for (size_t i = 0; i < k->n_labels; i++)
		printf("%s{\"label\":\"%s\",\"line\":%llu,\"start\":%llu,\"end\":%llu}",
		       i ? "," : "", k->labels[i].label, (unsigned long long)k->labels[i].line,
		       (unsigned long long)k->labels[i].start,
		       (unsigned long long)k->labels[i].end);
	printf("],\"options\":[");
	for (size_t i = 0; k->options[i]; i++)
		printf("%s\"%s\"", i ? "," : "", k->options[i]);
	printf("],\"family\":\"%s\",\"button\":\"%s\",\"detail\":\"%s\",\"expires_ms\":%llu,"
	       "\"grant_ttl_ms\":%llu,\"reason\":",
	       k->family, k->family_button, k->family_detail, (unsigned long long)k->expires_ms,
	       (unsigned long long)k->grant_ttl_ms);
	json_str(k->reason, strlen(k->reason));
	printf("}\n");
	fflush(stdout);
}

static enum kotoba_choice on_card(void *arg, const struct kotoba_card *k)
{
	struct run_state *st = arg;

	print_card(k);
	if (st->answer == KOTOBA_CARD_ALWAYS && (st->terms.for_ms || st->terms.scope)) {
		struct kotoba_error err = KOTOBA_ERROR_INIT;
		enum kotoba_code rc = kotoba_answer_always(st->c, k->id, &st->terms, &err);

		if (rc)
			print_error("answer-failed", rc, &err);
		return rc ? KOTOBA_CARD_DENY : KOTOBA_CARD_DEFER;
	}
	if (!st->defer)
		return st->answer;
	pthread_mutex_lock(&st->lock);
	snprintf(st->card, sizeof(st->card), "%s", k->id);
	st->have_card = true;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	return KOTOBA_CARD_DEFER;
}

static void on_notice(void *arg, const struct kotoba_error *n)
{
	print_error("notice", n->code, n);
}

/* Whether the broker has recorded a card's expiry: an audit row, read on
 * a connection of its own. */
static bool expiry_recorded(const char *socket_path)
{
	struct kotoba_audit_row *rows = calloc(KOTOBA_AUDIT_MAX, sizeof(*rows));
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	struct kotoba_client *c = NULL;
	bool found = false;
	size_t n = 0;

	if (!rows)
		return false;
	rows[0].size = sizeof(rows[0]);
	if (!kotoba_open(&c, socket_path, false, &err) &&
	    !kotoba_audit_tail(c, rows, 10, &n, &err))
		for (size_t i = 0; i < n; i++)
			found = found || !strcmp(rows[i].decision, "expired");
	kotoba_close(c);
	free(rows);
	return found;
}

/* The deferred answer, given later from another thread, as a GUI would. */
static void *answer_later(void *arg)
{
	struct run_state *st = arg;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;

	pthread_mutex_lock(&st->lock);
	while (!st->have_card && !st->done)
		pthread_cond_wait(&st->cond, &st->lock);
	pthread_mutex_unlock(&st->lock);
	if (!st->have_card)
		return NULL; /* the run ended without a card */
	usleep(st->delay_ms * 1000);
	/* A late answer: after the expiry however slow the machine (30 s, a
	 * backstop; the answer then finds the card still open, and the test
	 * says so). */
	for (int i = 0; st->after_expiry && i < 300; i++) {
		if (expiry_recorded(kotoba_socket_path(st->c)))
			break;
		usleep(100000);
	}
	rc = kotoba_answer(st->c, st->card, KOTOBA_CARD_ONCE, &err);
	if (rc)
		print_error("answer-failed", rc, &err);
	return NULL;
}

static void print_result(const struct kotoba_result *r)
{
	printf("{\"event\":\"exit\",\"exited\":%s,\"exit_code\":%d,\"signal\":%d,"
	       "\"timed_out\":%s,\"truncated\":%s,\"output_limit\":%llu,\"limit\":\"%s\","
	       "\"duration_us\":%llu,"
	       "\"cpu_us\":%llu,\"max_rss_kb\":%llu,\"profile\":\"%s\",\"decision\":\"%s\","
	       "\"approver\":\"%s\",\"labels\":[",
	       r->exited ? "true" : "false", r->exit_code, r->signal,
	       r->timed_out ? "true" : "false", r->truncated ? "true" : "false",
	       (unsigned long long)r->output_limit, r->limit,
	       (unsigned long long)r->duration_us, (unsigned long long)r->cpu_us,
	       (unsigned long long)r->max_rss_kb, r->profile, r->decision, r->approver);
	for (size_t i = 0; i < r->n_labels; i++)
		printf("%s\"%s\"", i ? "," : "", r->labels[i]);
	/* The name comes from the broker; a test must not emit bad JSON. */
	printf("],\"where\":\"%s\",\"container\":\"", r->where);
	for (const char *p = r->container; *p; p++)
		printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
	printf("\"}\n");
}

static enum kotoba_choice choice_of(const char *w)
{
	return !strcmp(w, "once") ? KOTOBA_CARD_ONCE : !strcmp(w, "always") ? KOTOBA_CARD_ALWAYS :
	       !strcmp(w, "defer") ? KOTOBA_CARD_DEFER : KOTOBA_CARD_DENY;
}

struct run_args {
	bool channel, answer_none;
	const char *env[4];
	size_t n_env;
	struct kotoba_exec_opts x;
};

static void parse_run(int argc, char **argv, struct run_args *a, struct run_state *st)
{
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "channel"))
			a->channel = true;
		else if (!strcmp(argv[i], "answer=none"))
			a->answer_none = true;
		else if (!strcmp(argv[i], "answer=late"))
			st->answer = KOTOBA_CARD_DEFER, st->after_expiry = true;
		else if (!strncmp(argv[i], "answer=", 7))
			st->answer = choice_of(argv[i] + 7);
		else if (!strncmp(argv[i], "cwd=", 4))
			a->x.cwd = argv[i] + 4;
		else if (!strncmp(argv[i], "timeout_ms=", 11))
			a->x.timeout_ms = strtoull(argv[i] + 11, NULL, 10);
		else if (!strncmp(argv[i], "env=", 4) && a->n_env < 3)
			a->env[a->n_env++] = argv[i] + 4;
		else if (!strncmp(argv[i], "for_ms=", 7))
			st->terms.for_ms = strtoull(argv[i] + 7, NULL, 10);
		else if (!strncmp(argv[i], "scope=", 6))
			st->terms.scope = argv[i] + 6;
	}
	st->defer = st->answer == KOTOBA_CARD_DEFER;
	if (st->defer && !st->delay_ms)
		st->delay_ms = 100;
}

static int run_end(enum kotoba_code rc, const struct kotoba_result *res,
		   const struct kotoba_error *err)
{
	if (rc == KOTOBA_OK)
		print_result(res);
	else
		print_error("error", rc, err);
	return 0;
}

static int cmd_run(const char *sock, const char *code, int argc, char **argv)
{
	struct run_state st = { .answer = KOTOBA_CARD_DENY, .lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER, .terms = KOTOBA_GRANT_TERMS_INIT };
	struct run_args a = { .x = { .size = sizeof(a.x), .code = code, .on_output = on_output, .on_card = on_card,
				     .on_notice = on_notice, .arg = &st } };
	struct kotoba_result res = KOTOBA_RESULT_INIT;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	pthread_t t;

	parse_run(argc, argv, &a, &st);
	a.x.env = a.env;
	if (a.answer_none)
		a.x.on_card = NULL;
	if ((rc = kotoba_open(&st.c, sock, a.channel, &err)))
		return print_error("open", rc, &err), 0;
	if (st.defer)
		pthread_create(&t, NULL, answer_later, &st);
	rc = kotoba_exec(st.c, &a.x, &res, &err);
	if (st.defer) {
		pthread_mutex_lock(&st.lock);
		st.done = true;
		pthread_cond_broadcast(&st.cond);
		pthread_mutex_unlock(&st.lock);
		pthread_join(t, NULL);
	}
	run_end(rc, &res, &err);
	/* After a late answer the broker's no-such-card is still on its way:
	 * the next request on this connection must not take it for its answer. */
	if (st.after_expiry)
		cmd_grants(st.c);
	kotoba_close(st.c);
	return 0;
}

/* ---- cancel ------------------------------------------------------------------- */

struct exec_thread {
	struct run_state *st;
	struct kotoba_exec_opts x;
	struct kotoba_result res;
	struct kotoba_error err;
	enum kotoba_code rc;
};

static void *exec_main(void *arg)
{
	struct exec_thread *e = arg;

	e->rc = kotoba_exec(e->st->c, &e->x, &e->res, &e->err);
	pthread_mutex_lock(&e->st->lock);
	e->st->done = true;
	pthread_cond_broadcast(&e->st->cond);
	pthread_mutex_unlock(&e->st->lock);
	return NULL;
}

static int cmd_cancel(const char *sock, const char *code, const char *cwd)
{
	struct run_state st = { .answer = KOTOBA_CARD_DENY, .lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER, .terms = KOTOBA_GRANT_TERMS_INIT };
	struct exec_thread e = { .st = &st, .x = { .size = sizeof(e.x), .code = code, .cwd = cwd,
						   .on_output = on_output, .arg = &st },
				 .res = KOTOBA_RESULT_INIT, .err = KOTOBA_ERROR_INIT };
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	pthread_t t;

	if ((rc = kotoba_open(&st.c, sock, false, &err)))
		return print_error("open", rc, &err), 0;
	pthread_create(&t, NULL, exec_main, &e);
	pthread_mutex_lock(&st.lock);
	while (!st.saw_output && !st.done)
		pthread_cond_wait(&st.cond, &st.lock);
	pthread_mutex_unlock(&st.lock);
	rc = st.saw_output ? kotoba_cancel(st.c, &err) : KOTOBA_OK;
	if (rc)
		print_error("cancel-failed", rc, &err);
	pthread_join(t, NULL);
	run_end(e.rc, &e.res, &e.err);
	/* nothing runs now: a second cancel is refused locally */
	rc = kotoba_cancel(st.c, &err);
	print_error("cancel-again", rc, &err);
	kotoba_close(st.c);
	return 0;
}

/* ---- from an event loop ----------------------------------------------------- */

/* Runs CODE with kotoba_exec_start() and kotoba_conn_process() from a
 * poll() loop that also wakes on a timer, as an event loop would: the
 * ticks counted while the snippet sleeps show that no call blocked. */
static int cmd_poll(const char *sock, const char *code, const char *cwd)
{
	struct run_state st = { .answer = KOTOBA_CARD_DENY };
	struct kotoba_exec_opts x = { .size = sizeof(x), .code = code, .cwd = cwd,
				      .on_output = on_output, .arg = &st };
	struct kotoba_result res = KOTOBA_RESULT_INIT;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	unsigned ticks = 0, steps = 0;
	bool done = false;

	if ((rc = kotoba_open(&st.c, sock, false, &err)))
		return print_error("open", rc, &err), 0;
	rc = kotoba_exec_start(st.c, &x, &err);
	if (!rc) {
		struct kotoba_error busy = KOTOBA_ERROR_INIT;
		struct kotoba_grant row = { .size = sizeof(row) };
		size_t n;

		print_error("grants-while-running", kotoba_grants(st.c, &row, 1, &n, &busy), &busy);
		print_error("exec-while-running", kotoba_exec_start(st.c, &x, &busy), &busy);
	}
	while (!rc && !done) {
		struct pollfd p = { .fd = kotoba_conn_fd(st.c), .events = POLLIN };
		int n = poll(&p, 1, 50);

		if (n == 0) {
			ticks++;
			continue;
		}
		steps++;
		rc = kotoba_conn_process(st.c, &done, &res, &err);
	}
	printf("{\"event\":\"loop\",\"ticks\":%u,\"steps\":%u}\n", ticks, steps);
	run_end(rc, &res, &err);
	kotoba_close(st.c);
	return 0;
}

/* ---- grants and audit -------------------------------------------------------- */

static int cmd_grants(struct kotoba_client *c)
{
	struct kotoba_grant rows[KOTOBA_GRANTS_MAX] = { { .size = sizeof(rows[0]) } };
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	size_t n;

	if ((rc = kotoba_grants(c, rows, KOTOBA_GRANTS_MAX, &n, &err)))
		return print_error("error", rc, &err), 0;
	for (size_t i = 0; i < n; i++)
		printf("{\"event\":\"grant\",\"family\":\"%s\",\"card\":\"%s\",\"saved_at_ms\":%lld,"
		       "\"use_count\":%llu,\"last_used_ms\":%lld,\"expires_ms\":%lld,"
		       "\"expired\":%s,\"scope\":\"%s\"}\n",
		       rows[i].family, rows[i].card, (long long)rows[i].saved_at_ms,
		       (unsigned long long)rows[i].use_count, (long long)rows[i].last_used_ms,
		       (long long)rows[i].expires_ms, rows[i].expired ? "true" : "false",
		       rows[i].scope);
	printf("{\"event\":\"grants\",\"n\":%zu}\n", n);
	return 0;
}

static int cmd_text(enum kotoba_code rc, const char *msg, const struct kotoba_error *err)
{
	if (rc)
		return print_error("error", rc, err), 0;
	printf("{\"event\":\"ok\",\"message\":");
	json_str(msg, strlen(msg));
	printf("}\n");
	return 0;
}

static int cmd_tail(struct kotoba_client *c, size_t max)
{
	struct kotoba_audit_row *rows = calloc(KOTOBA_AUDIT_MAX, sizeof(*rows));
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	size_t n = 0;

	if (!rows)
		return print_error("nomem", KOTOBA_ERR_NOMEM, NULL), 0;
	rows[0].size = sizeof(rows[0]);
	rc = kotoba_audit_tail(c, rows, max, &n, &err);
	if (rc)
		print_error("error", rc, &err);
	for (size_t i = 0; i < n; i++)
		printf("{\"event\":\"row\",\"seq\":%llu,\"run\":%llu,\"kind\":\"%s\",\"decision\":\"%s\","
		       "\"approver\":\"%s\",\"profile\":\"%s\",\"sha256\":\"%s\",\"labels\":\"%s\","
		       "\"mode\":\"%s\",\"has_exit\":%s,\"exit_code\":%lld,\"after\":%llu}\n",
		       (unsigned long long)rows[i].seq, (unsigned long long)rows[i].run,
		       rows[i].event, rows[i].decision, rows[i].approver, rows[i].profile,
		       rows[i].sha256, rows[i].labels, rows[i].mode,
		       rows[i].has_exit ? "true" : "false", (long long)rows[i].exit_code,
		       (unsigned long long)rows[i].after);
	free(rows);
	return 0;
}

static int cmd_welcome(struct kotoba_client *c)
{
	const struct kotoba_welcome *w = kotoba_welcome(c);

	printf("{\"event\":\"welcome\",\"version\":%u,\"broker\":\"%s\",\"mode\":\"%s\","
	       "\"execute_code\":%s,\"max_frame\":%llu,\"max_snippet\":%llu,"
	       "\"max_timeout_ms\":%llu,\"socket\":\"%s\"}\n",
	       w->version, w->broker, w->mode, w->execute_code ? "true" : "false",
	       (unsigned long long)w->max_frame, (unsigned long long)w->max_snippet,
	       (unsigned long long)w->max_timeout_ms, kotoba_socket_path(c));
	return 0;
}

/* Calls out of order are errors as values, never aborts. */
static int cmd_misuse(const char *sock)
{
	struct kotoba_exec_opts x = { .size = sizeof(x), .code = "print(1)" };
	struct kotoba_result short_res = { .size = 8 };
	struct kotoba_grant row = { .size = 8 };
	/* options as a newer header would lay them out, one field appended */
	struct {
		struct kotoba_exec_opts o;
		uint64_t later;
	} newer = { .o = { .size = sizeof(newer), .code = "print(1)" }, .later = 1 };
	struct kotoba_client *c;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;
	size_t n;

	if ((rc = kotoba_connect(&c, sock, &err)))
		return print_error("open", rc, &err), 0;
	print_error("exec-before-hello", kotoba_exec(c, &x, NULL, &err), &err);
	print_error("grants-before-hello", kotoba_grants(c, NULL, 0, &n, &err), &err);
	kotoba_hello(c, false, "kc-test", &err);
	print_error("hello-twice", kotoba_hello(c, false, NULL, &err), &err);
	print_error("answer-defer", kotoba_answer(c, "c-x", KOTOBA_CARD_DEFER, &err), &err);
	print_error("cancel-idle", kotoba_cancel(c, &err), &err);
	print_error("tail-zero", kotoba_audit_tail(c, NULL, 0, &n, &err), &err);
	x.size = 0;
	print_error("exec-unsized", kotoba_exec(c, &x, NULL, &err), &err);
	x.size = sizeof(x);
	print_error("exec-short-result", kotoba_exec(c, &x, &short_res, &err), &err);
	print_error("grants-short-row", kotoba_grants(c, &row, 1, &n, &err), &err);
	print_error("process-idle", kotoba_conn_process(c, &(bool){ false }, NULL, &err), &err);
	print_error("exec-unknown-field", kotoba_exec(c, &newer.o, NULL, &err), &err);
	newer.later = 0;
	print_error("exec-unknown-field-unset", kotoba_exec(c, &newer.o, NULL, &err), &err);
	x.code = NULL;
	print_error("exec-null", kotoba_exec(c, &x, NULL, &err), &err);
	x.code = "print(1)";
	x.env = (const char *const[]){ "NOEQUALS", NULL };
	print_error("exec-bad-env", kotoba_exec(c, &x, NULL, &err), &err);
	/* the connection is still good after all of that */
	x.env = NULL;
	print_error("exec-after", kotoba_exec(c, &x, NULL, &err), &err);
	kotoba_close(c);
	return 0;
}

static int admin(const char *sock, const char *cmd, const char *arg)
{
	char msg[KOTOBA_MESSAGE_MAX + 1] = "";
	struct kotoba_client *c;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_code rc;

	if ((rc = kotoba_open(&c, sock, false, &err)))
		return print_error("open", rc, &err), 0;
	if (!strcmp(cmd, "welcome"))
		rc = cmd_welcome(c);
	else if (!strcmp(cmd, "grants"))
		rc = cmd_grants(c);
	else if (!strcmp(cmd, "revoke"))
		rc = cmd_text(kotoba_revoke(c, arg, msg, sizeof(msg), &err), msg, &err);
	else if (!strcmp(cmd, "verify"))
		rc = cmd_text(kotoba_audit_verify(c, msg, sizeof(msg), &err), msg, &err);
	else if (!strcmp(cmd, "tail"))
		rc = cmd_tail(c, arg ? strtoul(arg, NULL, 10) : 20);
	else
		rc = 2;
	kotoba_close(c);
	return rc;
}

/* ---- escalation ------------------------------------------------------------- */

struct esc_state {
	struct kotoba_client *c;
	const char *mode;
	unsigned cards;
};

static enum kotoba_choice save_grant(void *arg, const struct kotoba_card *k)
{
	return KOTOBA_CARD_ALWAYS;
}

static enum kotoba_choice on_escalation(void *arg, const struct kotoba_card *k)
{
	struct esc_state *st = arg;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	struct kotoba_result first = KOTOBA_RESULT_INIT;
	enum kotoba_escalation e;
	uint64_t after = 0;
	enum kotoba_code rc;
	char *text;

	st->cards++;
	rc = kotoba_escalation(st->c, &e, &after, &first, &err);
	printf("{\"event\":\"card\",\"escalate\":%s,\"id\":\"%s\",\"options\":[",
	       k->escalate ? "true" : "false", k->id);
	for (size_t i = 0; k->options[i]; i++)
		printf("%s\"%s\"", i ? "," : "", k->options[i]);
	printf("],\"family\":%s,\"after_seq\":%llu,\"blocked_total\":%llu,\"blocked\":[",
	       k->family ? "\"set\"" : "null", (unsigned long long)k->after_seq,
	       (unsigned long long)k->blocked_total);
	for (size_t i = 0; i < k->n_blocked; i++) {
		printf("%s{\"kind\":\"%s\",\"target\":", i ? "," : "", k->blocked[i].kind);
		json_str(k->blocked[i].target, strlen(k->blocked[i].target));
		printf(",\"seen_by\":\"%s\"}", k->blocked[i].seen_by);
	}
	printf("],\"during\":{\"rc\":%d,\"outcome\":%d,\"after_seq\":%llu,"
	       "\"first_exit_code\":%d},\"text\":", (int)rc, (int)e,
	       (unsigned long long)after, first.exit_code);
	text = kotoba_card_text(k, 80, 0);
	json_str(text ? text : "", text ? strlen(text) : 0);
	free(text);
	printf("}\n");
	fflush(stdout);
	if (!k->escalate)
		return KOTOBA_CARD_DENY;
	if (!strcmp(st->mode, "wait"))
		return KOTOBA_CARD_DEFER; /* never answered: it expires */
	if (!strcmp(st->mode, "cancel")) {
		if ((rc = kotoba_cancel(st->c, &err)))
			print_error("cancel-failed", rc, &err);
		return KOTOBA_CARD_DEFER;
	}
	if (!strcmp(st->mode, "defer")) {
		if ((rc = kotoba_answer(st->c, k->id, KOTOBA_CARD_RERUN, &err)))
			print_error("answer-failed", rc, &err);
		return KOTOBA_CARD_DEFER;
	}
	return !strcmp(st->mode, "rerun") ? KOTOBA_CARD_RERUN :
	       !strcmp(st->mode, "once") ? KOTOBA_CARD_ONCE : KOTOBA_CARD_LEAVE;
}

static int cmd_escalate(const char *sock, const char *code, const char *cwd, const char *mode)
{
	struct esc_state st = { .mode = mode };
	struct kotoba_exec_opts grant = { .size = sizeof(grant), .code = "print(1)", .cwd = cwd,
					  .on_card = save_grant };
	struct kotoba_exec_opts x = { .size = sizeof(x), .code = code, .cwd = cwd,
				      .on_card = on_escalation,
				      .on_notice = on_notice, .arg = &st };
	struct kotoba_result res = KOTOBA_RESULT_INIT, first = KOTOBA_RESULT_INIT;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_escalation e;
	uint64_t after;
	enum kotoba_code rc;
	bool done = false;

	if ((rc = kotoba_connect(&st.c, sock, &err)) ||
	    (rc = kotoba_hello_flags(st.c, KOTOBA_HELLO_CHANNEL | KOTOBA_HELLO_ESCALATE, NULL,
				     &err)))
		return print_error("open", rc, &err), kotoba_close(st.c), 0;
	if ((rc = kotoba_exec(st.c, &grant, NULL, &err)))
		return print_error("grant", rc, &err), kotoba_close(st.c), 0;
	if (!strcmp(mode, "none"))
		x.on_card = NULL;
	if (!strcmp(mode, "poll")) {
		struct pollfd p = { .fd = kotoba_conn_fd(st.c), .events = POLLIN };

		st.mode = "rerun";
		rc = kotoba_exec_start(st.c, &x, &err);
		while (!rc && !done && poll(&p, 1, 30000) == 1)
			rc = kotoba_conn_process(st.c, &done, &res, &err);
	} else {
		rc = kotoba_exec(st.c, &x, &res, &err);
	}
	run_end(rc, &res, &err);
	kotoba_escalation(st.c, &e, &after, &first, NULL);
	printf("{\"event\":\"escalation\",\"outcome\":%d,\"after_seq\":%llu,\"cards\":%u,"
	       "\"first\":{\"exit_code\":%d,\"approver\":\"%s\",\"profile\":\"%s\","
	       "\"blocked_total\":%llu}}\n", (int)e, (unsigned long long)after, st.cards,
	       first.exit_code, first.approver, first.profile,
	       (unsigned long long)first.blocked_total);
	cmd_tail(st.c, 8);
	kotoba_close(st.c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	if (!strcmp(argv[2], "run") && argc >= 4)
		return cmd_run(argv[1], argv[3], argc - 4, argv + 4);
	if (!strcmp(argv[2], "cancel") && argc >= 4)
		return cmd_cancel(argv[1], argv[3], argc > 4 ? argv[4] : NULL);
	if (!strcmp(argv[2], "poll") && argc >= 4)
		return cmd_poll(argv[1], argv[3], argc > 4 ? argv[4] : NULL);
	if (!strcmp(argv[2], "escalate") && argc >= 6)
		return cmd_escalate(argv[1], argv[3], argv[4], argv[5]);
	if (!strcmp(argv[2], "version"))
		return printf("{\"event\":\"version\",\"header\":\"%s\",\"library\":\"%s\"}\n",
			      KOTOBA_CLIENT_VERSION, kotoba_version()) < 0;
	if (!strcmp(argv[2], "misuse"))
		return cmd_misuse(argv[1]);
	return admin(argv[1], argv[2], argc > 3 ? argv[3] : NULL);
}
