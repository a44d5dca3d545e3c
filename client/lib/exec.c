/* SPDX-License-Identifier: MIT
 * Running a snippet: exec, then its card, output and end; answer; cancel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/internal.h"
#include "proto/limits.h"

/* Splits "NAME=value" strings into the exec's env pairs; the broker checks
 * the names and keeps only its allowlist. */
static enum kotoba_code put_env(struct msg_exec *e, const char *const *env,
				struct kotoba_error *err)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');

		if (!eq || eq == env[i])
			return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
				       "environment entry '%s' is not NAME=value", env[i]);
		if (e->n_env == PROTO_ENV_MAX)
			return kc_fail(err, KOTOBA_ERR_INVALID, E2BIG,
				       "at most %d environment entries may be passed",
				       PROTO_ENV_MAX);
		e->env[e->n_env++] = (struct env_pair){ { env[i], (size_t)(eq - env[i]) },
							pstr_c(eq + 1) };
	}
	return KOTOBA_OK;
}

static enum kotoba_code build_exec(const struct kotoba_exec_opts *o, uint64_t id,
				   struct frame *f, struct kotoba_error *err)
{
	struct msg_exec e = { .id = id, .timeout_ms = o->timeout_ms };
	enum kotoba_code rc;

	e.code.ptr = o->code;
	e.code.len = o->code_len ? o->code_len : strlen(o->code);
	e.cwd = pstr_c(o->cwd);
	rc = put_env(&e, o->env, err);
	if (rc)
		return rc;
	return kc_encoded(enc_exec(f, &e), err);
}

/* Sends the exec and marks it in flight in one step, so that a
 * kotoba_cancel() from another thread never overtakes it.  The options are
 * kept for the frames that follow. */
static enum kotoba_code start(struct kotoba_client *c, const struct kotoba_exec_opts *o,
			      struct kotoba_error *err)
{
	uint64_t id;

	struct frame f = { 0 };
	enum kotoba_code rc;

	pthread_mutex_lock(&c->wlock);
	if (c->running) {
		pthread_mutex_unlock(&c->wlock);
		return kc_fail(err, KOTOBA_ERR_INVALID, EBUSY,
			       "a snippet is already running on this connection");
	}
	id = c->next_id++;
	rc = build_exec(o, id, &f, err);
	if (!rc)
		rc = kc_send_locked(c, &f, err);
	if (!rc) {
		c->running = id;
		c->opts = *o;
		c->esc = KOTOBA_ESCALATION_NONE;
		c->esc_rerun = false;
		c->esc_after = 0;
	}
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

static void finish(struct kotoba_client *c)
{
	pthread_mutex_lock(&c->wlock);
	c->running = 0;
	pthread_mutex_unlock(&c->wlock);
}

static enum kotoba_choice ask(const struct kotoba_exec_opts *o, const struct msg_card *m,
			      struct kotoba_card *k, struct kotoba_card_label *labels)
{
	char detail[256];

	for (size_t i = 0; i < m->n_labels; i++)
		labels[i] = (struct kotoba_card_label){ m->labels[i].label, m->labels[i].start,
							m->labels[i].end, m->labels[i].line };
	k->labels = labels;
	k->n_labels = m->n_labels;
	k->snippet_len = m->snippet.len;
	k->expires_ms = m->expires_ms;
	if (m->escalate) {
		k->options = card_escalation_choices;
		return o->on_card ? o->on_card(o->arg, k) : KOTOBA_CARD_LEAVE;
	}
	k->options = card_run_choices;
	k->family = CARD_FAMILY;
	k->family_button = CARD_FAMILY_BUTTON;
	k->family_detail = card_family_detail(m->grant_ttl_ms, detail, sizeof(detail));
	return o->on_card ? o->on_card(o->arg, k) : KOTOBA_CARD_DENY;
}

static void take_receipt(struct kotoba_result *res, const struct receipt *b);

/* The card's settings as NUL-terminated strings, in one allocation the
 * caller frees: the frame they came in is reused by the next read. */
struct settings {
	struct kotoba_card_env env[PROTO_ENV_MAX];
	struct kotoba_card_limit limits[PROTO_CARD_LIMITS_MAX];
	char *cwd;
	char text[]; /* every string, each NUL-terminated */
};

static char *put(char **at, struct pstr s)
{
	char *p = *at;

	memcpy(p, s.ptr, s.len);
	p[s.len] = '\0';
	*at += s.len + 1;
	return p;
}

static struct settings *settings_of(const struct msg_card *m)
{
	size_t len = m->cwd.len + 1;
	struct settings *st;
	char *at;

	for (size_t i = 0; i < m->n_env; i++)
		len += m->env[i].name.len + m->env[i].value.len + 2;
	for (size_t i = 0; i < m->n_limits; i++)
		len += m->limits[i].name.len + 1;
	st = malloc(sizeof(*st) + len);
	if (!st)
		return NULL;
	at = st->text;
	st->cwd = m->cwd.len ? put(&at, m->cwd) : NULL;
	for (size_t i = 0; i < m->n_env; i++) {
		st->env[i].name = put(&at, m->env[i].name);
		st->env[i].value = put(&at, m->env[i].value);
	}
	for (size_t i = 0; i < m->n_limits; i++)
		st->limits[i] = (struct kotoba_card_limit){ put(&at, m->limits[i].name),
							    m->limits[i].value };
	return st;
}

/* Hands the card to the caller and sends the answer, unless deferred.  The
 * strings are copied so they are NUL-terminated for the callback. */
static enum kotoba_code on_card(struct kotoba_client *c, const struct kotoba_exec_opts *o,
				const struct msg_card *m, struct kotoba_error *err)
{
	struct kotoba_card_label labels[PROTO_LABELS_MAX];
	struct kotoba_result receipt = { .size = sizeof(receipt) };
	char *id = pstr_dup(m->card), *snippet = pstr_dup(m->snippet);
	char *reason = pstr_dup(m->reason);
	struct settings *st = settings_of(m);
	struct kotoba_card k = { .id = id, .snippet = snippet, .reason = reason };
	enum kotoba_choice choice;
	enum kotoba_code rc = KOTOBA_OK;

	if (!id || !snippet || !reason || !st) {
		rc = kc_fail(err, KOTOBA_ERR_NOMEM, ENOMEM, "out of memory");
		goto out;
	}
	k.cwd = st->cwd;
	k.timeout_ms = m->timeout_ms;
	k.env = st->env;
	k.n_env = m->n_env;
	k.limits = st->limits;
	k.n_limits = m->n_limits;
	k.grant_ttl_ms = m->grant_ttl_ms;
	if (m->escalate) {
		take_receipt(&receipt, &m->blocked);
		k.escalate = true;
		k.blocked = receipt.blocked;
		k.n_blocked = receipt.n_blocked;
		k.blocked_total = receipt.blocked_total;
		k.after_seq = m->after_seq;
		c->esc_after = m->after_seq;
	}
	choice = ask(o, m, &k, labels);
	/* An answer this library does not know, or one for the other kind of
	 * card, is treated as the safe one: nothing runs (again). */
	if (m->escalate && choice != KOTOBA_CARD_DEFER && choice != KOTOBA_CARD_RERUN)
		choice = KOTOBA_CARD_LEAVE;
	else if (!m->escalate && choice != KOTOBA_CARD_DEFER && choice != KOTOBA_CARD_ONCE &&
		 choice != KOTOBA_CARD_ALWAYS)
		choice = KOTOBA_CARD_DENY;
	if (choice != KOTOBA_CARD_DEFER)
		rc = kotoba_answer(c, id, choice, err);
out:
	free(id);
	free(snippet);
	free(reason);
	free(st);
	return rc;
}

#define COPY_NAME(dst, name) kc_copy((dst), sizeof(dst), (name), strlen(name))

static void take_receipt(struct kotoba_result *res, const struct receipt *b)
{
	res->blocked_total = b->total;
	for (size_t i = 0; i < b->n && i < KOTOBA_BLOCKED_MAX; i++) {
		const struct blocked_op *o = &b->op[i];
		struct kotoba_blocked *k = &res->blocked[res->n_blocked++];

		COPY_NAME(k->kind, block_kind_name(o->kind));
		COPY_NAME(k->target, o->target);
		k->count = o->count;
		COPY_NAME(k->by, blocker_name(o->by));
		COPY_NAME(k->seen_by, witness_name(o->seen_by));
		k->inferred = o->inferred;
	}
}

static void take_exit(struct kotoba_result *out, const struct msg_exit *x)
{
	struct kotoba_result r = { .size = sizeof(r) }, *res = &r;

	if (!out)
		return;
	res->exited = x->r.exited;
	res->exit_code = (int)x->r.code;
	res->signal = (int)x->r.signal;
	res->timed_out = x->r.timed_out;
	res->truncated = x->truncated;
	res->output_limit = x->output_limit;
	res->files_left_out = x->files_left_out;
	kc_copy(res->limit, sizeof(res->limit), x->r.limit, strlen(x->r.limit));
	res->duration_us = x->r.duration_us;
	res->cpu_us = x->r.cpu_us;
	res->max_rss_kb = x->r.max_rss_kb;
	kc_copy(res->profile, sizeof(res->profile), profile_name(x->profile), strlen(profile_name(x->profile)));
	kc_copy(res->decision, sizeof(res->decision), decision_name(x->decision), strlen(decision_name(x->decision)));
	kc_copy(res->approver, sizeof(res->approver), approver_name(x->approver), strlen(approver_name(x->approver)));
	for (size_t i = 0; i < x->n_labels && i < KOTOBA_LABELS_MAX; i++)
		kc_copy(res->labels[res->n_labels++], sizeof(res->labels[0]), x->labels[i],
			strlen(x->labels[i]));
	kc_copy(res->where, sizeof(res->where), x->where, strlen(x->where));
	kc_copy(res->container, sizeof(res->container), x->container.ptr, x->container.len);
	take_receipt(res, &x->blocked);
	kc_put_sized(out, res, sizeof(*res));
}

/* The decoder has held the name to the rule; here it gets its NUL. */
static void give_file(const struct kotoba_exec_opts *o, const struct msg_file *f)
{
	char name[PROTO_FILE_NAME_MAX + 1];

	memcpy(name, f->name.ptr, f->name.len);
	name[f->name.len] = '\0';
	o->on_file(o->arg, name, f->data, f->len);
}

static void notice(const struct kotoba_exec_opts *o, const struct msg_error *e)
{
	struct kotoba_error n = KOTOBA_ERROR_INIT;

	if (!o->on_notice)
		return;
	kc_broker_error(&n, e);
	o->on_notice(o->arg, &n);
}

/* An escalated run that ended with the broker's error: left, expired or
 * withdrawn before anything ran again is the first run's end, @res its
 * result; any other error is the re-run's. */
static enum kotoba_code escalation_end(struct kotoba_client *c, enum kotoba_code rc,
				       struct kotoba_result *res)
{
	enum kotoba_escalation e = KOTOBA_ESCALATION_NONE;
	bool rerun;

	if (c->esc == KOTOBA_ESCALATION_NONE)
		return rc;
	pthread_mutex_lock(&c->wlock);
	rerun = c->esc_rerun;
	pthread_mutex_unlock(&c->wlock);
	if (rc == KOTOBA_ERR_DENIED)
		e = KOTOBA_ESCALATION_LEFT;
	else if (rc == KOTOBA_ERR_EXPIRED && !rerun)
		e = KOTOBA_ESCALATION_EXPIRED;
	else if (rc == KOTOBA_ERR_CANCELLED && !rerun)
		e = KOTOBA_ESCALATION_CANCELLED;
	if (e == KOTOBA_ESCALATION_NONE)
		return rc;
	c->esc = e;
	if (res)
		kc_put_sized(res, &c->esc_first, sizeof(c->esc_first));
	return KOTOBA_OK;
}

/* Handles the frame in c->msg for the run in flight; *done when it was
 * the run's `exit` or `error`.  Frames of other ids are left over from
 * earlier runs (a cancel racing an exit) and dropped.  A `queued` frame
 * (the run waits for a free slot) is dropped too: the run only takes
 * longer, and ends as any other. */
static enum kotoba_code handle(struct kotoba_client *c, bool *done, struct kotoba_result *res,
			       struct kotoba_error *err)
{
	const struct msg *m = c->msg;
	const struct kotoba_exec_opts *o = &c->opts;
	uint64_t id = c->running;

	*done = true;
	if (m->type == MSG_EXIT && m->u.exit.id == id && m->u.exit.escalate &&
	    c->escalate && c->esc == KOTOBA_ESCALATION_NONE) {
		/* The first run of an escalation: its card comes next. */
		c->esc_first = (struct kotoba_result){ .size = sizeof(c->esc_first) };
		take_exit(&c->esc_first, &m->u.exit);
		c->esc = KOTOBA_ESCALATION_RERUN; /* until the end says otherwise */
		*done = false;
		return KOTOBA_OK;
	}
	if (m->type == MSG_EXIT && m->u.exit.id == id) {
		take_exit(res, &m->u.exit);
		return KOTOBA_OK;
	}
	if (m->type == MSG_ERROR && m->u.error.has_id && m->u.error.id == id)
		return escalation_end(c, kc_broker_error(err, &m->u.error), res);
	*done = false;
	if ((m->type == MSG_STARTED && m->u.started.id == id) ||
	    (m->type == MSG_QUEUED && m->u.queued.id == id)) {
		pthread_mutex_lock(&c->wlock);
		c->esc_rerun = c->esc != KOTOBA_ESCALATION_NONE;
		pthread_mutex_unlock(&c->wlock);
	}
	if (m->type == MSG_OUTPUT && m->u.output.id == id && o->on_output)
		o->on_output(o->arg,
			     strcmp(m->u.output.stream, "stderr") ? KOTOBA_STDOUT : KOTOBA_STDERR,
			     m->u.output.data, m->u.output.len);
	else if (m->type == MSG_FILE && m->u.file.id == id && o->on_file)
		give_file(o, &m->u.file);
	else if (m->type == MSG_CARD && m->u.card.id == id)
		return on_card(c, o, &m->u.card, err);
	else if (m->type == MSG_ERROR && !m->u.error.has_id)
		notice(o, &m->u.error);
	return KOTOBA_OK;
}

/* True when the bytes of @s past this library's @known are all zero. */
static bool zero_past(const void *s, size_t size, size_t known)
{
	const unsigned char *p = s;

	for (size_t i = known; i < size; i++)
		if (p[i])
			return false;
	return true;
}

/* The caller's options, as much of them as its size says it has.  Options
 * from a newer header that this library does not know must be unset: one
 * of them ignored could run the snippet other than as asked. */
static enum kotoba_code take_opts(const struct kotoba_exec_opts *opts,
				  struct kotoba_exec_opts *o, struct kotoba_error *err)
{
	if (!opts || kc_size_of(opts) < KC_EXEC_OPTS_SIZE)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "set the exec options' size to sizeof(struct kotoba_exec_opts)");
	if (!zero_past(opts, kc_size_of(opts), sizeof(*o)))
		return kc_fail(err, KOTOBA_ERR_INVALID, E2BIG,
			       "the exec options set fields this library (%s) does not know",
			       kotoba_version());
	memset(o, 0, sizeof(*o));
	memcpy(o, opts, kc_size_of(opts) < sizeof(*o) ? kc_size_of(opts) : sizeof(*o));
	if (!o->code)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL, "no code to run");
	return KOTOBA_OK;
}

/* A result struct the caller gave, or NULL: refused when its size is
 * short of this version's. */
static enum kotoba_code check_result(const struct kotoba_result *res, struct kotoba_error *err)
{
	if (res && kc_size_of(res) < KC_RESULT_SIZE)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "set the result's size to sizeof(struct kotoba_result)");
	return KOTOBA_OK;
}

enum kotoba_code kotoba_exec_start(struct kotoba_client *c, const struct kotoba_exec_opts *opts,
				   struct kotoba_error *err)
{
	struct kotoba_exec_opts o;
	enum kotoba_code rc;

	if ((rc = kc_ready(c, err)) || (rc = take_opts(opts, &o, err)))
		return rc;
	return start(c, &o, err);
}

/* The end of a run, however it ended: the connection takes the next. */
static enum kotoba_code ended(struct kotoba_client *c, enum kotoba_code rc)
{
	finish(c);
	memset(&c->opts, 0, sizeof(c->opts));
	return rc;
}

enum kotoba_code kotoba_exec(struct kotoba_client *c, const struct kotoba_exec_opts *opts,
			     struct kotoba_result *res, struct kotoba_error *err)
{
	enum kotoba_code rc;
	bool done = false;

	if ((rc = check_result(res, err)) || (rc = kotoba_exec_start(c, opts, err)))
		return rc;
	while (!done && !(rc = kc_recv(c, err)))
		rc = handle(c, &done, res, err);
	return ended(c, rc);
}

enum kotoba_code kotoba_conn_process(struct kotoba_client *c, bool *done,
				     struct kotoba_result *res, struct kotoba_error *err)
{
	enum kotoba_code rc;
	bool got = true;

	*done = false;
	if (!c->running)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "no run in flight: kotoba_exec_start() first");
	if ((rc = check_result(res, err)))
		return rc;
	while (!*done && !(rc = kc_recv_ready(c, &got, err)) && got)
		rc = handle(c, done, res, err);
	if (rc || *done) {
		*done = true;
		return ended(c, rc);
	}
	return KOTOBA_OK;
}

enum kotoba_code kotoba_answer(struct kotoba_client *c, const char *card_id,
			       enum kotoba_choice choice, struct kotoba_error *err)
{
	struct msg_answer a = { .card = pstr_c(card_id), .choice = kotoba_choice_name(choice) };
	struct frame f = { 0 };
	enum kotoba_code rc;

	if (!card_id || choice == KOTOBA_CARD_DEFER || !strcmp(a.choice, "defer"))
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "a card is answered once, always or deny (rerun or leave on an "
			       "escalation card)");
	if ((rc = kc_encoded(enc_answer(&f, &a), err)))
		return rc;
	pthread_mutex_lock(&c->wlock);
	rc = kc_send_locked(c, &f, err);
	if (!rc && choice == KOTOBA_CARD_RERUN && c->esc != KOTOBA_ESCALATION_NONE)
		c->esc_rerun = true;
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

enum kotoba_code kotoba_escalation(const struct kotoba_client *c,
				   enum kotoba_escalation *outcome, uint64_t *after_seq,
				   struct kotoba_result *first, struct kotoba_error *err)
{
	if (!c || (first && kc_size_of(first) < KC_RESULT_SIZE))
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "set the result's size to sizeof(struct kotoba_result)");
	if (outcome)
		*outcome = c->esc;
	if (after_seq)
		*after_seq = c->esc == KOTOBA_ESCALATION_NONE ? 0 : c->esc_after;
	if (first && c->esc != KOTOBA_ESCALATION_NONE)
		kc_put_sized(first, &c->esc_first, sizeof(c->esc_first));
	return KOTOBA_OK;
}

enum kotoba_code kotoba_answer_always(struct kotoba_client *c, const char *card_id,
				      const struct kotoba_grant_terms *terms,
				      struct kotoba_error *err)
{
	struct msg_answer a = { .card = pstr_c(card_id),
				.choice = kotoba_choice_name(KOTOBA_CARD_ALWAYS) };
	struct frame f = { 0 };
	enum kotoba_code rc;

	if (!card_id)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL, "which card? card_id is NULL");
	if (terms && kc_size_of(terms) < KC_GRANT_TERMS_SIZE)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "set the terms' size to sizeof(struct kotoba_grant_terms)");
	if (terms && terms->scope && terms->scope[0] != '/')
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "a grant's scope is an absolute directory");
	if (terms) {
		a.for_ms = terms->for_ms;
		a.scope = terms->scope ? pstr_c(terms->scope) : (struct pstr){ NULL, 0 };
	}
	if ((rc = kc_encoded(enc_answer(&f, &a), err)))
		return rc;
	return kc_send(c, &f, err);
}

enum kotoba_code kotoba_cancel(struct kotoba_client *c, struct kotoba_error *err)
{
	struct frame f = { 0 };
	enum kotoba_code rc;

	pthread_mutex_lock(&c->wlock);
	if (!c->running) {
		rc = kc_fail(err, KOTOBA_ERR_NO_SUCH_RUN, 0,
			     "no snippet is running on this connection");
	} else {
		struct msg_cancel m = { c->running };

		rc = kc_encoded(enc_cancel(&f, &m), err);
		if (!rc)
			rc = kc_send_locked(c, &f, err);
	}
	pthread_mutex_unlock(&c->wlock);
	return rc;
}
