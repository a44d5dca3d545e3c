/* SPDX-License-Identifier: MIT
 * Every message of both links: one encoder and one decoder each, in the
 * order PROTOCOL.md lists them.  Unknown fields are ignored (a newer peer
 * may add optional ones); unknown types, missing or mistyped fields and
 * values outside their set are errors that name the field.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/check.h"
#include "proto/decode_util.h"
#include "proto/encode_util.h"
#include "proto/limits.h"

#define PATH_FIELD_MAX 4095
#define NAME_FIELD_MAX 255
#define TEXT_FIELD_MAX 4096

/* Profiles, approvers and decisions are the tables of proto/names.h.
 * "engine" is a worker profile only (the container engine's CLI runs
 * under it): `started` and `exit` keep saying how the snippet was approved. */
#define APPROVERS_ALL ((1u << APPROVER_COUNT) - 1)
#define DECISIONS_ALL ((1u << DECISION_COUNT) - 1)
#define EVENTS_ALL ((1u << EVENT_COUNT) - 1)
static const char *const streams[] = { "stdout", "stderr", NULL };
static const char *const modes[] = { "local", "docker", "none", NULL };
static const char *const limits[] = { "", "cpu", "wall", "file-size", "memory", NULL };
static const char *const statuses[] = { "exited", "signaled", NULL };
static const char *const wheres[] = { "host", "container", NULL };
static const char *const secret_states[] = { "masked", "off", "unmasked", NULL };
const char *const proto_labels[] = { "fs-destroy", "shell-spawn", "raw-socket", "dynamic-eval",
				     "fs-write",   "data-out",	  "secret-read", NULL };

static const char *const type_names[MSG_TYPE_COUNT] = {
	[MSG_UNKNOWN] = "unknown",     [MSG_HELLO] = "hello",
	[MSG_EXEC] = "exec",	       [MSG_ANSWER] = "answer",
	[MSG_CANCEL] = "cancel",       [MSG_GRANTS] = "grants",
	[MSG_REVOKE] = "revoke",       [MSG_AUDIT] = "audit",
	[MSG_WELCOME] = "welcome",     [MSG_STARTED] = "started",
	[MSG_OUTPUT] = "output",       [MSG_EXIT] = "exit",
	[MSG_CARD] = "card",	       [MSG_GRANT_LIST] = "grant_list",
	[MSG_AUDIT_ROWS] = "audit_rows", [MSG_OK] = "ok",
	[MSG_ERROR] = "error",	       [MSG_JOB] = "job",
	[MSG_READY] = "ready",	       [MSG_SETUP_ERROR] = "setup_error",
	[MSG_FINISHED] = "finished",   [MSG_QUEUED] = "queued",
	[MSG_MASKS] = "masks",	       [MSG_GO] = "go",
	[MSG_WARM] = "warm",	       [MSG_FILE] = "file",
	[MSG_OUTPUT_FILE] = "output_file",
};

const char *msg_type_name(enum msg_type t)
{
	return (unsigned)t < MSG_TYPE_COUNT && type_names[t] ? type_names[t] : "unknown";
}

/* The job's `limits` map, in wire order. */
#define JOB_LIMITS 5
static const char *const job_limit_keys[JOB_LIMITS] = { "cpu_s", "as_bytes", "nproc",
							 "fsize_bytes", "nofile" };
static uint64_t *job_limit(struct job_limits *l, size_t i)
{
	uint64_t *v[JOB_LIMITS] = { &l->cpu_s, &l->as_bytes, &l->nproc, &l->fsize_bytes,
				    &l->nofile };

	return v[i];
}

const char *const card_run_choices[] = { "once", "always", "deny", NULL };
const char *const card_escalation_choices[] = { "rerun", "leave", NULL };

/* The canonical string of choice among set's; NULL: not one of them. */
static const char *choice_in(const char *const *set, struct pstr choice)
{
	for (size_t i = 0; set[i]; i++)
		if (pstr_eq(choice, set[i]))
			return set[i];
	return NULL;
}

bool card_choice_fits(const char *choice, bool escalate)
{
	return choice_in(escalate ? card_escalation_choices : card_run_choices,
			 pstr_c(choice)) != NULL;
}

/* ---- encoders ------------------------------------------------------------ */

int enc_hello(struct frame *f, const struct msg_hello *m)
{
	struct enc e;

	enc_begin(&e, "hello", 3 + m->escalate + m->mcp);
	put_uint(&e, "version", m->version);
	put_bool(&e, "channel", m->channel);
	if (m->escalate)
		put_bool(&e, "escalate", true);
	if (m->mcp)
		put_bool(&e, "mcp", true);
	put_pstr(&e, "client", m->client);
	return enc_end(&e, f);
}

int enc_welcome(struct frame *f, const struct msg_welcome *m)
{
	struct enc e;

	enc_begin(&e, "welcome", 7);
	put_uint(&e, "version", m->version);
	put_str(&e, "broker", m->broker);
	put_str(&e, "mode", m->mode);
	put_key(&e, "tools");
	raw_array(&e, m->execute_code ? 1 : 0);
	if (m->execute_code)
		raw_str(&e, "execute_code", 12);
	put_uint(&e, "max_frame", m->max_frame);
	put_uint(&e, "max_snippet", m->max_snippet);
	put_uint(&e, "max_timeout_ms", m->max_timeout_ms);
	return enc_end(&e, f);
}

static void put_env_map(struct enc *e, const struct env_pair *env, size_t n)
{
	put_key(e, "env");
	raw_map(e, n);
	for (size_t i = 0; i < n; i++) {
		raw_str(e, env[i].name.ptr, env[i].name.len);
		raw_str(e, env[i].value.ptr, env[i].value.len);
	}
}

int enc_exec(struct frame *f, const struct msg_exec *m)
{
	struct enc e;

	enc_begin(&e, "exec", 2 + (m->cwd.len > 0) + (m->timeout_ms > 0) + (m->n_env > 0));
	put_uint(&e, "id", m->id);
	put_pstr(&e, "code", m->code);
	if (m->cwd.len)
		put_pstr(&e, "cwd", m->cwd);
	if (m->timeout_ms)
		put_uint(&e, "timeout_ms", m->timeout_ms);
	if (m->n_env)
		put_env_map(&e, m->env, m->n_env);
	return enc_end(&e, f);
}

int enc_cancel(struct frame *f, const struct msg_cancel *m)
{
	struct enc e;

	enc_begin(&e, "cancel", 1);
	put_uint(&e, "id", m->id);
	return enc_end(&e, f);
}

int enc_started(struct frame *f, const struct msg_started *m)
{
	struct enc e;

	enc_begin(&e, "started", 3);
	put_uint(&e, "id", m->id);
	put_str(&e, "profile", profile_name(m->profile));
	put_str(&e, "approver", approver_name(m->approver));
	return enc_end(&e, f);
}

int enc_queued(struct frame *f, const struct msg_queued *m)
{
	struct enc e;

	enc_begin(&e, "queued", 3);
	put_uint(&e, "id", m->id);
	put_uint(&e, "position", m->position);
	put_uint(&e, "timeout_ms", m->timeout_ms);
	return enc_end(&e, f);
}

int enc_output(struct frame *f, const struct msg_output *m)
{
	struct enc e;

	enc_begin(&e, "output", 3);
	put_uint(&e, "id", m->id);
	put_str(&e, "stream", m->stream);
	put_bin(&e, "data", m->data, m->len);
	return enc_end(&e, f);
}

bool proto_file_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > PROTO_FILE_NAME_MAX || (len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '/' || c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

int enc_file(struct frame *f, const struct msg_file *m)
{
	struct enc e;

	enc_begin(&e, "file", 3);
	put_uint(&e, "id", m->id);
	put_pstr(&e, "name", m->name);
	put_bin(&e, "data", m->data, m->len);
	return enc_end(&e, f);
}

int enc_output_file(struct frame *f, const struct msg_output_file *m)
{
	struct enc e;

	enc_begin(&e, "output_file", 2);
	put_pstr(&e, "name", m->name);
	put_uint(&e, "size", m->size);
	return enc_end(&e, f);
}

/* The fields a run_result adds to `finished` and `exit`. */
#define RESULT_FIELDS 7
static void put_result(struct enc *e, const struct run_result *r)
{
	put_str(e, "status", r->exited ? "exited" : "signaled");
	if (r->exited)
		put_int(e, "code", r->code);
	else
		put_int(e, "signal", r->signal);
	put_bool(e, "timed_out", r->timed_out);
	put_str(e, "limit", r->limit);
	put_uint(e, "duration_us", r->duration_us);
	put_uint(e, "cpu_us", r->cpu_us);
	put_uint(e, "max_rss_kb", r->max_rss_kb);
}

/* A receipt: two fields, only when something was refused (a receiver
 * takes their absence as an empty receipt). */
#define RECEIPT_FIELDS(b) ((b)->total ? 2 : 0)
#define BLOCKED_OP_FIELDS 6
static void put_blocked_list(struct enc *e, const struct receipt *b);

static void put_receipt(struct enc *e, const struct receipt *b)
{
	if (!b->total)
		return;
	put_key(e, "blocked");
	put_blocked_list(e, b);
	put_uint(e, "blocked_total", b->total);
}

/* The array alone: its key is the caller's (a frame's field, or a row's). */
static void put_blocked_list(struct enc *e, const struct receipt *b)
{
	raw_array(e, b->n);
	for (size_t i = 0; i < b->n; i++) {
		const struct blocked_op *o = &b->op[i];

		raw_map(e, BLOCKED_OP_FIELDS);
		raw_str(e, "kind", 4);
		raw_str(e, block_kind_name(o->kind), strlen(block_kind_name(o->kind)));
		raw_str(e, "target", 6);
		raw_str(e, o->target, strnlen(o->target, PROTO_BLOCKED_TARGET_MAX));
		raw_str(e, "count", 5);
		raw_uint(e, o->count);
		raw_str(e, "by", 2);
		raw_str(e, blocker_name(o->by), strlen(blocker_name(o->by)));
		raw_str(e, "seen_by", 7);
		raw_str(e, witness_name(o->seen_by), strlen(witness_name(o->seen_by)));
		raw_str(e, "inferred", 8);
		raw_bool(e, o->inferred);
	}
}

int enc_exit(struct frame *f, const struct msg_exit *m)
{
	const char *where = m->where ? m->where : "host";
	bool in_container = !strcmp(where, "container");
	struct enc e;

	/* An encoder never reads past the fixed arrays. */
	if (m->n_labels > PROTO_LABELS_MAX || m->blocked.n > PROTO_BLOCKED_MAX)
		return -E2BIG;
	bool cut = m->truncated && m->output_limit;

	enc_begin(&e, "exit", 1 + RESULT_FIELDS + 6 + cut + in_container + (m->secrets != NULL) +
				      RECEIPT_FIELDS(&m->blocked) + m->escalate +
				      (m->files_left_out > 0));
	put_uint(&e, "id", m->id);
	put_result(&e, &m->r);
	put_bool(&e, "truncated", m->truncated);
	if (cut)
		put_uint(&e, "output_limit", m->output_limit);
	put_str(&e, "profile", profile_name(m->profile));
	put_str(&e, "decision", decision_name(m->decision));
	put_str(&e, "approver", approver_name(m->approver));
	put_key(&e, "labels");
	raw_array(&e, m->n_labels);
	for (size_t i = 0; i < m->n_labels; i++)
		raw_str(&e, m->labels[i], strlen(m->labels[i]));
	put_str(&e, "where", where);
	if (in_container)
		put_pstr(&e, "container", m->container);
	if (m->secrets)
		put_str(&e, "secrets", m->secrets);
	put_receipt(&e, &m->blocked);
	if (m->escalate)
		put_bool(&e, "escalate", true);
	if (m->files_left_out)
		put_uint(&e, "files_left_out", m->files_left_out);
	return enc_end(&e, f);
}

int enc_error(struct frame *f, const struct msg_error *m)
{
	struct enc e;

	enc_begin(&e, "error", 2 + m->has_id + (m->step.len > 0) * 2 + m->has_dup_id);
	if (m->has_id)
		put_uint(&e, "id", m->id);
	put_pstr(&e, "code", m->code);
	put_pstr(&e, "message", m->message);
	if (m->has_dup_id)
		put_uint(&e, "dup_id", m->dup_id);
	if (m->step.len) {
		put_pstr(&e, "step", m->step);
		put_int(&e, "errno", m->err_no);
	}
	return enc_end(&e, f);
}

int enc_error_simple(struct frame *f, bool has_id, uint64_t id, const char *code,
		     const char *fmt, ...)
{
	struct msg_error m = { .has_id = has_id, .id = id, .code = pstr_c(code) };
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	m.message = pstr_c(text);
	return enc_error(f, &m);
}

static void raw_argv(struct enc *e, const struct job_argv *a)
{
	raw_array(e, a->n);
	for (size_t i = 0; i < a->n; i++)
		raw_str(e, a->v[i].ptr, a->v[i].len);
}

static bool engine_fits(const struct job_engine *g)
{
	bool ok = g->n_steps <= PROTO_STEPS_MAX && g->run.n <= PROTO_ARGV_MAX &&
		  g->kill.n <= PROTO_ARGV_MAX && g->oom.n <= PROTO_ARGV_MAX &&
		  g->outputs.n <= PROTO_ARGV_MAX;

	for (size_t i = 0; ok && i < g->n_steps; i++)
		ok = g->steps[i].argv.n <= PROTO_ARGV_MAX;
	return ok;
}

/* The `engine` map goes last, so a job without one is the same frame it
 * was before containers existed; `outputs` only when there is one. */
static void put_engine(struct enc *e, const struct job_engine *g)
{
	put_key(e, "engine");
	raw_map(e, g->outputs.n ? 5 : 4);
	raw_str(e, "steps", 5);
	raw_array(e, g->n_steps);
	for (size_t i = 0; i < g->n_steps; i++) {
		raw_map(e, 2);
		raw_str(e, "step", 4);
		raw_str(e, g->steps[i].name.ptr, g->steps[i].name.len);
		raw_str(e, "argv", 4);
		raw_argv(e, &g->steps[i].argv);
	}
	raw_str(e, "run", 3);
	raw_argv(e, &g->run);
	raw_str(e, "kill", 4);
	raw_argv(e, &g->kill);
	raw_str(e, "oom", 3);
	raw_argv(e, &g->oom);
	if (g->outputs.n) {
		raw_str(e, "outputs", 7);
		raw_argv(e, &g->outputs);
	}
}

int enc_job(struct frame *f, const struct msg_job *m)
{
	struct job_limits lim = m->lim;
	struct enc e;

	/* The counts index fixed arrays: past them is a caller's bug, not
	 * something to read beyond the struct for. */
	if (m->has_engine && !engine_fits(&m->engine))
		return -E2BIG;
	if (m->n_secrets > PROTO_SECRETS_MAX)
		return -E2BIG;
	if (m->has_masks_key && !m->has_secrets)
		return -EINVAL;
	if (m->mounts.len && !m->has_secrets)
		return -EINVAL;
	if (m->n_preload > PROTO_PRELOAD_MAX || (m->n_preload && !m->warm))
		return -EINVAL;
	if (m->proxy && m->profile != PROFILE_APPROVED)
		return -EINVAL;
	enc_begin(&e, "job", 9 + m->has_engine + m->has_secrets + m->has_masks_key +
			     (m->mounts.len > 0) + m->warm + m->proxy);
	put_str(&e, "profile", profile_name(m->profile));
	put_pstr(&e, "python", m->python);
	put_pstr(&e, "cwd", m->cwd);
	put_pstr(&e, "scratch_base", m->scratch_base);
	put_uint(&e, "timeout_ms", m->timeout_ms);
	put_uint(&e, "grace_ms", m->grace_ms);
	put_bool(&e, "landlock", m->landlock);
	if (m->proxy)
		put_bool(&e, "proxy", true);
	put_key(&e, "limits");
	raw_map(&e, JOB_LIMITS);
	for (size_t i = 0; i < JOB_LIMITS; i++) {
		raw_str(&e, job_limit_keys[i], strlen(job_limit_keys[i]));
		raw_uint(&e, *job_limit(&lim, i));
	}
	put_key(&e, "env");
	raw_array(&e, m->n_env);
	for (size_t i = 0; i < m->n_env; i++)
		raw_str(&e, m->env[i].ptr, m->env[i].len);
	if (m->has_engine)
		put_engine(&e, &m->engine);
	if (m->has_secrets) {
		put_key(&e, "secrets");
		raw_array(&e, m->n_secrets);
		for (size_t i = 0; i < m->n_secrets; i++)
			raw_str(&e, m->secrets[i].ptr, m->secrets[i].len);
	}
	if (m->has_masks_key)
		put_bin(&e, "masks", m->masks_key, sizeof(m->masks_key));
	if (m->mounts.len)
		put_bin(&e, "mounts", m->mounts.ptr, m->mounts.len);
	if (m->warm) {
		put_key(&e, "preload");
		raw_array(&e, m->n_preload);
		for (size_t i = 0; i < m->n_preload; i++)
			raw_str(&e, m->preload[i].ptr, m->preload[i].len);
	}
	return enc_end(&e, f);
}

int enc_go(struct frame *f, const struct msg_go *m)
{
	struct enc e;

	enc_begin(&e, "go", 1);
	put_uint(&e, "timeout_ms", m->timeout_ms);
	return enc_end(&e, f);
}

int enc_warm(struct frame *f, const struct msg_warm *m)
{
	struct enc e;

	enc_begin(&e, "warm", 1);
	put_uint(&e, "pid", m->pid);
	return enc_end(&e, f);
}

int enc_ready(struct frame *f, const struct msg_ready *m)
{
	struct enc e;

	enc_begin(&e, "ready", 2);
	put_uint(&e, "pid", m->pid);
	put_uint(&e, "landlock_abi", m->landlock_abi);
	return enc_end(&e, f);
}

int enc_masks(struct frame *f, const struct msg_masks *m)
{
	struct enc e;

	enc_begin(&e, "masks", 1);
	put_bin(&e, "key", m->key, sizeof(m->key));
	return enc_end(&e, f);
}

int enc_setup_error(struct frame *f, const struct msg_setup_error *m)
{
	struct enc e;

	enc_begin(&e, "setup_error", 3);
	put_pstr(&e, "step", m->step);
	put_int(&e, "errno", m->err_no);
	put_pstr(&e, "message", m->message);
	return enc_end(&e, f);
}

int enc_finished(struct frame *f, const struct msg_finished *m)
{
	struct enc e;

	if (m->blocked.n > PROTO_BLOCKED_MAX)
		return -E2BIG;
	enc_begin(&e, "finished", RESULT_FIELDS + RECEIPT_FIELDS(&m->blocked) +
					  (m->files_left_out > 0));
	put_result(&e, &m->r);
	put_receipt(&e, &m->blocked);
	if (m->files_left_out)
		put_uint(&e, "files_left_out", m->files_left_out);
	return enc_end(&e, f);
}

const char *card_family_detail(uint64_t grant_ttl_ms, char *out, size_t len)
{
	char ttl[32];

	if (!grant_ttl_ms) {
		snprintf(out, len, "%s", CARD_FAMILY_DETAIL);
		return out;
	}
	duration_text(grant_ttl_ms, ttl, sizeof(ttl));
	snprintf(out, len, CARD_FAMILY_DETAIL_TTL, ttl);
	return out;
}

static void put_family(struct enc *e, uint64_t grant_ttl_ms)
{
	char detail[256];

	put_str(e, "family", CARD_FAMILY);
	put_key(e, "family_text");
	raw_map(e, 2);
	raw_str(e, "button", 6);
	raw_str(e, CARD_FAMILY_BUTTON, strlen(CARD_FAMILY_BUTTON));
	raw_str(e, "detail", 6);
	card_family_detail(grant_ttl_ms, detail, sizeof(detail));
	raw_str(e, detail, strlen(detail));
}

/* A run card offers the grant (family, family_text, grant_ttl_ms); an
 * escalation card the first run's receipt and its audit row instead. */
int enc_card(struct frame *f, const struct msg_card *m)
{
	const char *const *options = m->escalate ? card_escalation_choices : card_run_choices;
	size_t n = 0;
	struct enc e;

	/* An encoder never reads past the fixed arrays. */
	if (m->n_labels > PROTO_LABELS_MAX || m->n_env > PROTO_ENV_MAX ||
	    m->n_limits > PROTO_CARD_LIMITS_MAX || m->blocked.n > PROTO_BLOCKED_MAX)
		return -E2BIG;
	if (m->escalate)
		enc_begin(&e, "card", 12 + RECEIPT_FIELDS(&m->blocked) + 1);
	else
		enc_begin(&e, "card", 13 + (m->grant_ttl_ms > 0));
	put_uint(&e, "id", m->id);
	if (m->escalate)
		put_str(&e, "kind", "escalate");
	put_pstr(&e, "card", m->card);
	put_pstr(&e, "snippet", m->snippet);
	put_key(&e, "labels");
	raw_array(&e, m->n_labels);
	for (size_t i = 0; i < m->n_labels; i++) {
		raw_map(&e, 4);
		raw_str(&e, "label", 5);
		raw_str(&e, m->labels[i].label, strlen(m->labels[i].label));
		raw_str(&e, "start", 5);
		raw_uint(&e, m->labels[i].start);
		raw_str(&e, "end", 3);
		raw_uint(&e, m->labels[i].end);
		raw_str(&e, "line", 4);
		raw_uint(&e, m->labels[i].line);
	}
	put_key(&e, "options");
	while (options[n])
		n++;
	raw_array(&e, n);
	for (size_t i = 0; i < n; i++)
		raw_str(&e, options[i], strlen(options[i]));
	if (!m->escalate)
		put_family(&e, m->grant_ttl_ms);
	put_uint(&e, "expires_ms", m->expires_ms);
	put_pstr(&e, "reason", m->reason);
	put_pstr(&e, "cwd", m->cwd);
	put_uint(&e, "timeout_ms", m->timeout_ms);
	put_env_map(&e, m->env, m->n_env);
	put_key(&e, "limits");
	raw_map(&e, m->n_limits);
	for (size_t i = 0; i < m->n_limits; i++) {
		raw_str(&e, m->limits[i].name.ptr, m->limits[i].name.len);
		raw_uint(&e, m->limits[i].value);
	}
	if (m->escalate) {
		put_receipt(&e, &m->blocked);
		put_uint(&e, "after_seq", m->after_seq);
	} else if (m->grant_ttl_ms) {
		put_uint(&e, "grant_ttl_ms", m->grant_ttl_ms);
	}
	return enc_end(&e, f);
}

int enc_answer(struct frame *f, const struct msg_answer *m)
{
	struct enc e;

	enc_begin(&e, "answer", 2 + m->has_id + (m->for_ms > 0) + (m->scope.len > 0));
	if (m->has_id)
		put_uint(&e, "id", m->id);
	put_pstr(&e, "card", m->card);
	put_str(&e, "choice", m->choice);
	if (m->for_ms)
		put_uint(&e, "for_ms", m->for_ms);
	if (m->scope.len)
		put_pstr(&e, "scope", m->scope);
	return enc_end(&e, f);
}

int enc_grants(struct frame *f, const struct msg_grants *m)
{
	struct enc e;

	enc_begin(&e, "grants", 1);
	put_uint(&e, "id", m->id);
	return enc_end(&e, f);
}

int enc_grant_list(struct frame *f, const struct msg_grant_list *m)
{
	struct enc e;

	enc_begin(&e, "grant_list", 2);
	put_uint(&e, "id", m->id);
	put_key(&e, "grants");
	raw_array(&e, m->n);
	for (size_t i = 0; i < m->n; i++) {
		const struct grant_info *g = &m->rows[i];

		raw_map(&e, 5 + (g->expires_ms ? 2 : 0) + (g->scope.len > 0));
		raw_str(&e, "family", 6);
		raw_str(&e, g->family.ptr, g->family.len);
		raw_str(&e, "saved_at_ms", 11);
		raw_int(&e, g->saved_at_ms);
		raw_str(&e, "card", 4);
		raw_str(&e, g->card.ptr, g->card.len);
		raw_str(&e, "use_count", 9);
		raw_uint(&e, g->use_count);
		raw_str(&e, "last_used_ms", 12);
		raw_int(&e, g->last_used_ms);
		if (g->expires_ms) {
			raw_str(&e, "expires_ms", 10);
			raw_int(&e, g->expires_ms);
			raw_str(&e, "expired", 7);
			raw_bool(&e, g->expired);
		}
		if (g->scope.len) {
			raw_str(&e, "scope", 5);
			raw_str(&e, g->scope.ptr, g->scope.len);
		}
	}
	return enc_end(&e, f);
}

int enc_revoke(struct frame *f, const struct msg_revoke *m)
{
	struct enc e;

	enc_begin(&e, "revoke", 2);
	put_uint(&e, "id", m->id);
	put_pstr(&e, "family", m->family);
	return enc_end(&e, f);
}

int enc_audit(struct frame *f, const struct msg_audit *m)
{
	struct enc e;

	bool show = !strcmp(m->op, "show");

	enc_begin(&e, "audit", 3 + show);
	put_uint(&e, "id", m->id);
	put_str(&e, "op", m->op);
	put_uint(&e, "max", m->max);
	if (show)
		put_uint(&e, "seq", m->seq);
	return enc_end(&e, f);
}

#define AUDIT_ROW_FIELDS 12
static void put_net_list(struct enc *e, const struct network *net);

static void put_audit_row(struct enc *e, const struct audit_info *a,
			  const struct msg_audit_rows *m)
{
	const struct receipt *b = &m->blocked;
	bool total = a->has_exit && a->blocked_total, list = total && a->has_blocked && b->total;
	bool net = a->has_exit && a->net_hosts, net_list = net && a->has_network && m->network.n;

	raw_map(e, AUDIT_ROW_FIELDS + (a->has_exit ? 4 : 0) + total + list + (a->after > 0) +
			   3 * net + net_list);
	raw_str(e, "seq", 3);
	raw_uint(e, a->seq);
	raw_str(e, "time_ms", 7);
	raw_int(e, a->time_ms);
	raw_str(e, "run", 3);
	raw_uint(e, a->run);
	raw_str(e, "pid", 3);
	raw_int(e, a->pid);
#define KV(k, v) raw_str(e, k, strlen(k)), raw_str(e, (v), strlen(v))
	KV("event", a->event);
	raw_str(e, "sha256", 6);
	raw_str(e, a->sha256.ptr, a->sha256.len);
	raw_str(e, "labels", 6);
	raw_str(e, a->labels.ptr, a->labels.len);
	KV("mode", a->mode);
	KV("decision", decision_name(a->decision));
	KV("approver", approver_name(a->approver));
	KV("profile", profile_name(a->profile));
#undef KV
	raw_str(e, "has_exit", 8);
	raw_bool(e, a->has_exit);
	if (a->has_exit) {
		raw_str(e, "exit_code", 9);
		raw_int(e, a->exit_code);
		raw_str(e, "signal", 6);
		raw_int(e, a->signal);
		raw_str(e, "timed_out", 9);
		raw_bool(e, a->timed_out);
		raw_str(e, "duration_ms", 11);
		raw_int(e, a->duration_ms);
	}
	if (total) {
		raw_str(e, "blocked_total", 13);
		raw_uint(e, a->blocked_total);
	}
	if (list) {
		raw_str(e, "blocked", 7);
		put_blocked_list(e, b);
	}
	if (a->after) {
		raw_str(e, "after", 5);
		raw_uint(e, a->after);
	}
	if (net) {
		raw_str(e, "net_hosts", 9);
		raw_uint(e, a->net_hosts);
		raw_str(e, "net_bytes_out", 13);
		raw_uint(e, a->net_bytes_out);
		raw_str(e, "net_bytes_in", 12);
		raw_uint(e, a->net_bytes_in);
	}
	if (net_list) {
		raw_str(e, "network", 7);
		put_net_list(e, &m->network);
	}
}

int enc_audit_rows(struct frame *f, const struct msg_audit_rows *m)
{
	struct enc e;

	if (m->n > PROTO_ROWS_MAX || m->blocked.n > PROTO_BLOCKED_MAX ||
	    m->network.n > PROTO_NETWORK_MAX)
		return -E2BIG;
	enc_begin(&e, "audit_rows", 2);
	put_uint(&e, "id", m->id);
	put_key(&e, "rows");
	raw_array(&e, m->n);
	for (size_t i = 0; i < m->n; i++)
		put_audit_row(&e, &m->rows[i], m);
	return enc_end(&e, f);
}

int enc_ok(struct frame *f, const struct msg_ok *m)
{
	struct enc e;

	enc_begin(&e, "ok", 2);
	put_uint(&e, "id", m->id);
	put_pstr(&e, "message", m->message);
	return enc_end(&e, f);
}

/* ---- decoders ------------------------------------------------------------ */

static int dec_hello(struct dec *d, struct msg_hello *m)
{
	int rc;

	if ((rc = dec_uint(d, "version", true, &m->version)) < 0 ||
	    (rc = dec_bool(d, "channel", true, &m->channel)) < 0 ||
	    (rc = dec_bool(d, "escalate", false, &m->escalate)) < 0 ||
	    (rc = dec_bool(d, "mcp", false, &m->mcp)) < 0 ||
	    (rc = dec_str(d, "client", false, NAME_FIELD_MAX, &m->client)) < 0)
		return rc;
	return 0;
}

static int dec_welcome(struct dec *d, struct msg_welcome *m)
{
	const msgpack_object *tools;
	struct pstr broker;
	int rc;

	if ((rc = dec_uint(d, "version", true, &m->version)) < 0 ||
	    (rc = dec_str(d, "broker", true, sizeof(m->broker) - 1, &broker)) < 0 ||
	    (rc = dec_enum(d, "mode", true, modes, &m->mode)) < 0 ||
	    (rc = dec_uint(d, "max_frame", true, &m->max_frame)) < 0 ||
	    (rc = dec_uint(d, "max_snippet", true, &m->max_snippet)) < 0 ||
	    (rc = dec_uint(d, "max_timeout_ms", true, &m->max_timeout_ms)) < 0)
		return rc;
	memcpy(m->broker, broker.ptr, broker.len);
	m->broker[broker.len] = '\0';
	tools = dec_find(d, "tools");
	if (!tools || tools->type != MSGPACK_OBJECT_ARRAY)
		return dec_fail(d, PERR_BAD_FIELD, "field 'tools' must be an array");
	m->execute_code = false;
	for (uint32_t i = 0; i < tools->via.array.size; i++) {
		const msgpack_object *t = &tools->via.array.ptr[i];

		if (t->type == MSGPACK_OBJECT_STR && t->via.str.size == 12 &&
		    !memcmp(t->via.str.ptr, "execute_code", 12))
			m->execute_code = true;
	}
	return 0;
}

/* Environment names follow POSIX: a letter or _, then letters, digits, _. */
static bool env_name_ok(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 || k->via.str.size > 128)
		return false;
	for (uint32_t i = 0; i < k->via.str.size; i++) {
		char c = k->via.str.ptr[i];
		bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';

		if (!alpha && (i == 0 || c < '0' || c > '9'))
			return false;
	}
	return true;
}

static int dec_env_map(struct dec *d, const char *type, struct env_pair *env, size_t *n_env)
{
	const msgpack_object *o = dec_find(d, "env");
	struct dec sub = { .err = d->err, .type = type };
	int rc;

	*n_env = 0;
	if (!o)
		return 0;
	if ((rc = dec_map(&sub, o, PROTO_ENV_MAX)) < 0)
		return rc;
	for (uint32_t i = 0; i < sub.m->size; i++) {
		const msgpack_object *k = &sub.m->ptr[i].key, *v = &sub.m->ptr[i].val;

		if (!env_name_ok(k))
			return dec_fail(d, PERR_BAD_FIELD, "env name '%.*s' is not a valid name",
					(int)k->via.str.size, k->via.str.ptr);
		if (v->type != MSGPACK_OBJECT_STR || v->via.str.size > TEXT_FIELD_MAX ||
		    memchr(v->via.str.ptr, '\0', v->via.str.size))
			return dec_fail(d, PERR_BAD_FIELD, "env value of '%.*s' must be a str "
					"without NUL of at most %d bytes",
					(int)k->via.str.size, k->via.str.ptr, TEXT_FIELD_MAX);
		env[*n_env].name = (struct pstr){ k->via.str.ptr, k->via.str.size };
		env[*n_env].value = (struct pstr){ v->via.str.ptr, v->via.str.size };
		(*n_env)++;
	}
	return 0;
}

static int dec_exec(struct dec *d, struct msg_exec *m, size_t max_snippet)
{
	const msgpack_object *code = dec_find(d, "code");
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0)
		return rc;
	/* The size limit gets its own code so a client can tell it apart. */
	if (code && code->type == MSGPACK_OBJECT_STR && code->via.str.size > max_snippet)
		return dec_fail(d, PERR_SNIPPET_TOO_LARGE,
				"the snippet is %u bytes; the limit is %zu bytes",
				code->via.str.size, max_snippet);
	if ((rc = dec_str(d, "code", true, max_snippet, &m->code)) < 0 ||
	    (rc = dec_str(d, "cwd", false, PATH_FIELD_MAX, &m->cwd)) < 0 ||
	    (rc = dec_uint(d, "timeout_ms", false, &m->timeout_ms)) < 0)
		return rc;
	if (m->cwd.len && m->cwd.ptr[0] != '/')
		return dec_fail(d, PERR_BAD_CWD, "field 'cwd' must be an absolute path");
	return dec_env_map(d, "exec.env", m->env, &m->n_env);
}

static int dec_cancel(struct dec *d, struct msg_cancel *m)
{
	return dec_uint(d, "id", true, &m->id) < 0 ? -EPROTO : 0;
}

static int dec_started(struct dec *d, struct msg_started *m)
{
	int rc, profile, approver;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_name(d, "profile", true, &proto_profiles, PROFILES_RAN, &profile)) < 0 ||
	    (rc = dec_name(d, "approver", true, &proto_approvers, APPROVERS_ALL, &approver)) < 0)
		return rc;
	m->profile = (enum proto_profile)profile;
	m->approver = (enum proto_approver)approver;
	return 0;
}

static int dec_queued(struct dec *d, struct msg_queued *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_uint(d, "position", true, &m->position)) < 0 ||
	    (rc = dec_uint(d, "timeout_ms", true, &m->timeout_ms)) < 0)
		return rc;
	return 0;
}

static int dec_output(struct dec *d, struct msg_output *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_enum(d, "stream", true, streams, &m->stream)) < 0 ||
	    (rc = dec_bin(d, "data", true, PROTO_FRAME_MAX_DEFAULT, &m->data, &m->len)) < 0)
		return rc;
	return 0;
}

/* A file's name: also refused here, so no client of this library ever
 * sees one that could leave the directory it saves into. */
static int dec_file_name(struct dec *d, struct pstr *name)
{
	int rc = dec_str(d, "name", true, PROTO_FILE_NAME_MAX, name);

	if (rc < 0)
		return rc;
	if (!proto_file_name_ok(name->ptr, name->len))
		return dec_fail(d, PERR_BAD_FIELD,
				"field 'name' must be a plain file name: no '/', no control "
				"character, not '.' or '..'");
	return 0;
}

static int dec_file(struct dec *d, struct msg_file *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 || (rc = dec_file_name(d, &m->name)) < 0 ||
	    (rc = dec_bin(d, "data", true, PROTO_FILE_MAX, &m->data, &m->len)) < 0)
		return rc;
	return 0;
}

static int dec_output_file(struct dec *d, struct msg_output_file *m)
{
	int rc;

	if ((rc = dec_file_name(d, &m->name)) < 0 || (rc = dec_uint(d, "size", true, &m->size)) < 0)
		return rc;
	if (m->size > PROTO_FILE_MAX)
		return dec_fail(d, PERR_BAD_FIELD, "field 'size' is over the file cap");
	return 0;
}

/* Optional, and at least 1 when present. */
static int dec_files_left_out(struct dec *d, uint64_t *n)
{
	int rc;

	*n = 0;
	if ((rc = dec_uint(d, "files_left_out", false, n)) <= 0)
		return rc;
	if (*n == 0)
		return dec_fail(d, PERR_BAD_FIELD, "field 'files_left_out' is at least 1");
	return 0;
}

static int dec_result(struct dec *d, struct run_result *r)
{
	const char *status;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = dec_enum(d, "status", true, statuses, &status)) < 0)
		return rc;
	r->exited = !strcmp(status, "exited");
	if ((rc = dec_int(d, r->exited ? "code" : "signal", true,
			  r->exited ? &r->code : &r->signal)) < 0 ||
	    (rc = dec_bool(d, "timed_out", true, &r->timed_out)) < 0 ||
	    (rc = dec_enum(d, "limit", true, limits, &r->limit)) < 0 ||
	    (rc = dec_uint(d, "duration_us", true, &r->duration_us)) < 0 ||
	    (rc = dec_uint(d, "cpu_us", true, &r->cpu_us)) < 0 ||
	    (rc = dec_uint(d, "max_rss_kb", true, &r->max_rss_kb)) < 0)
		return rc;
	return 0;
}

static int dec_labels(struct dec *d, const char *key, const char **out, size_t *n)
{
	const msgpack_object *o = dec_find(d, key);

	*n = 0;
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > PROTO_LABELS_MAX)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be an array of labels", key);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];
		size_t k;

		for (k = 0; proto_labels[k]; k++)
			if (s->type == MSGPACK_OBJECT_STR &&
			    s->via.str.size == strlen(proto_labels[k]) &&
			    !memcmp(s->via.str.ptr, proto_labels[k], s->via.str.size))
				break;
		if (!proto_labels[k])
			return dec_fail(d, PERR_BAD_FIELD, "field '%s' holds an unknown label", key);
		out[(*n)++] = proto_labels[k];
	}
	return 0;
}

/* `where` came after version 1 was out: a broker that predates it ran
 * every snippet on the host, so its absence means "host" (PROTOCOL.md,
 * "Versioning"). */
static int dec_where(struct dec *d, struct msg_exit *m)
{
	int rc;

	m->where = wheres[0];
	m->container = (struct pstr){ 0 };
	if ((rc = dec_enum(d, "where", false, wheres, &m->where)) < 0)
		return rc;
	if (strcmp(m->where, "container"))
		return 0;
	if ((rc = dec_str(d, "container", true, NAME_FIELD_MAX, &m->container)) < 0)
		return rc;
	/* C clients hold the name as a C string: a NUL would cut it short. */
	if (m->container.len == 0 || memchr(m->container.ptr, '\0', m->container.len))
		return dec_fail(d, PERR_BAD_FIELD,
				"field 'container' must name the container, without NUL");
	return 0;
}

static int dec_array(struct dec *d, const char *key, size_t max, const msgpack_object_array **a);

static int dec_blocked_op(struct dec *d, const msgpack_object *o, struct blocked_op *b)
{
	struct dec sub = { .err = d->err, .type = "blocked" };
	struct pstr target;
	int rc, kind, by, seen_by;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_name(&sub, "kind", true, &proto_block_kinds, (1u << BLOCK_KIND_COUNT) - 1,
			   &kind)) < 0 ||
	    (rc = dec_str(&sub, "target", true, PROTO_BLOCKED_TARGET_MAX, &target)) < 0 ||
	    (rc = dec_uint(&sub, "count", true, &b->count)) < 0 ||
	    (rc = dec_name(&sub, "by", true, &proto_blockers, (1u << BLOCKER_COUNT) - 1, &by)) < 0 ||
	    (rc = dec_name(&sub, "seen_by", true, &proto_witnesses, (1u << WITNESS_COUNT) - 1,
			   &seen_by)) < 0 ||
	    (rc = dec_bool(&sub, "inferred", true, &b->inferred)) < 0)
		return rc;
	if (b->count == 0)
		return dec_fail(d, PERR_BAD_FIELD, "a 'blocked' entry must count at least 1");
	b->kind = (enum proto_block_kind)kind;
	b->by = (enum proto_blocker)by;
	b->seen_by = (enum proto_witness)seen_by;
	memcpy(b->target, target.ptr, target.len);
	b->target[target.len] = '\0';
	return 0;
}

/* `blocked` and `blocked_total` came after version 1 was out: absent, the
 * receipt is empty.  Either without the other is malformed. */
static int dec_receipt(struct dec *d, struct receipt *b)
{
	const msgpack_object_array *a = NULL;
	uint64_t counted = 0;
	int rc;

	b->total = 0;
	b->n = 0;
	if (!dec_find(d, "blocked") && !dec_find(d, "blocked_total"))
		return 0;
	if ((rc = dec_array(d, "blocked", PROTO_BLOCKED_MAX, &a)) < 0 ||
	    (rc = dec_uint(d, "blocked_total", true, &b->total)) < 0)
		return rc;
	for (uint32_t i = 0; i < a->size; i++) {
		if ((rc = dec_blocked_op(d, &a->ptr[i], &b->op[i])) < 0)
			return rc;
		if (b->op[i].count > b->total - counted)
			break;
		counted += b->op[i].count;
		b->n++;
	}
	if (b->total == 0 || b->n < a->size)
		return dec_fail(d, PERR_BAD_FIELD,
				"field 'blocked_total' must be at least the entries' counts, and 1");
	return 0;
}

/* Optional (a broker before it sent none), with truncated only, and a cap
 * of at least one byte, as the configuration allows. */
static int dec_output_limit(struct dec *d, struct msg_exit *m)
{
	int rc;

	m->output_limit = 0;
	if ((rc = dec_uint(d, "output_limit", false, &m->output_limit)) <= 0)
		return rc;
	if (!m->truncated || m->output_limit == 0)
		return dec_fail(d, PERR_BAD_FIELD,
				"field 'output_limit' comes with 'truncated' true only, and is at least 1");
	return 0;
}

static int dec_exit(struct dec *d, struct msg_exit *m)
{
	int rc, profile, decision, approver;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 || (rc = dec_result(d, &m->r)) < 0 ||
	    (rc = dec_bool(d, "truncated", true, &m->truncated)) < 0 ||
	    (rc = dec_output_limit(d, m)) < 0 ||
	    (rc = dec_name(d, "profile", true, &proto_profiles, PROFILES_RAN, &profile)) < 0 ||
	    (rc = dec_name(d, "decision", true, &proto_decisions, DECISIONS_ALL, &decision)) < 0 ||
	    (rc = dec_name(d, "approver", true, &proto_approvers, APPROVERS_ALL, &approver)) < 0 ||
	    (rc = dec_labels(d, "labels", m->labels, &m->n_labels)) < 0)
		return rc;
	m->profile = (enum proto_profile)profile;
	m->decision = (enum proto_decision)decision;
	m->approver = (enum proto_approver)approver;
	m->secrets = NULL;
	if ((rc = dec_enum(d, "secrets", false, secret_states, &m->secrets)) < 0 ||
	    (rc = dec_receipt(d, &m->blocked)) < 0 ||
	    (rc = dec_bool(d, "escalate", false, &m->escalate)) < 0 ||
	    (rc = dec_files_left_out(d, &m->files_left_out)) < 0)
		return rc;
	return dec_where(d, m);
}

/* ---- the receipt alone (the audit trail's `blocked` column) --------------- */

#define NET_USE_FIELDS 5

static void put_net_list(struct enc *e, const struct network *net)
{
	raw_array(e, net->n);
	for (size_t i = 0; i < net->n; i++) {
		const struct net_use *u = &net->use[i];

		raw_map(e, NET_USE_FIELDS);
		raw_str(e, "host", 4);
		raw_str(e, u->host, strnlen(u->host, PROTO_BLOCKED_TARGET_MAX));
		raw_str(e, "methods", 7);
		raw_str(e, u->methods, strnlen(u->methods, PROTO_NETWORK_METHODS_MAX));
		raw_str(e, "requests", 8);
		raw_uint(e, u->requests);
		raw_str(e, "bytes_out", 9);
		raw_uint(e, u->bytes_out);
		raw_str(e, "bytes_in", 8);
		raw_uint(e, u->bytes_in);
	}
}

int enc_receipt(struct frame *f, const struct receipt *b, const struct network *net)
{
	bool has_net = net && net->n;
	struct enc e;

	if (b->n > PROTO_BLOCKED_MAX || (net && net->n > PROTO_NETWORK_MAX))
		return -E2BIG;
	enc_begin(&e, "receipt", RECEIPT_FIELDS(b) + has_net);
	put_receipt(&e, b);
	if (has_net) {
		put_key(&e, "network");
		put_net_list(&e, net);
	}
	return enc_end(&e, f);
}

static int dec_net_use(struct dec *d, const msgpack_object *o, struct net_use *u)
{
	struct dec sub = { .err = d->err, .type = "network" };
	struct pstr host, methods;
	int rc;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_str(&sub, "host", true, PROTO_BLOCKED_TARGET_MAX, &host)) < 0 ||
	    (rc = dec_str(&sub, "methods", true, PROTO_NETWORK_METHODS_MAX, &methods)) < 0 ||
	    (rc = dec_uint(&sub, "requests", true, &u->requests)) < 0 ||
	    (rc = dec_uint(&sub, "bytes_out", true, &u->bytes_out)) < 0 ||
	    (rc = dec_uint(&sub, "bytes_in", true, &u->bytes_in)) < 0)
		return rc;
	if (!host.len)
		return dec_fail(d, PERR_BAD_FIELD, "a 'network' entry names a host");
	memcpy(u->host, host.ptr, host.len);
	u->host[host.len] = '\0';
	memcpy(u->methods, methods.ptr, methods.len);
	u->methods[methods.len] = '\0';
	return 0;
}

/* Optional: absent, nothing went through the egress proxy. */
static int dec_network(struct dec *d, struct network *net)
{
	const msgpack_object_array *a = NULL;
	int rc;

	net->n = 0;
	if (!dec_find(d, "network"))
		return 0;
	if ((rc = dec_array(d, "network", PROTO_NETWORK_MAX, &a)) < 0)
		return rc;
	for (uint32_t i = 0; i < a->size; i++, net->n++)
		if ((rc = dec_net_use(d, &a->ptr[i], &net->use[i])) < 0)
			return rc;
	return 0;
}

int dec_receipt_map(const uint8_t *p, size_t len, struct receipt *out, struct network *net)
{
	struct proto_error err = { 0 };
	struct dec d = { .err = &err, .type = "receipt" };
	msgpack_unpacked up;
	size_t off = 0;
	int rc = -EPROTO;

	struct network none;

	out->total = 0;
	out->n = 0;
	if (!net)
		net = &none;
	net->n = 0;
	if (!p || !len || len > PROTO_FRAME_MAX_DEFAULT)
		return len ? -EMSGSIZE : 0;
	/* Depth and UTF-8 first, as for any frame. */
	if (proto_check(p, len, &err) < 0)
		return -EPROTO;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, (const char *)p, len, &off) == MSGPACK_UNPACK_SUCCESS &&
	    off == len && dec_map(&d, &up.data, MAP_FIELDS_MAX) == 0 && dec_receipt(&d, out) == 0 &&
	    dec_network(&d, net) == 0)
		rc = 0;
	msgpack_unpacked_destroy(&up);
	return rc;
}

static int dec_finished(struct dec *d, struct msg_finished *m)
{
	int rc;

	if ((rc = dec_result(d, &m->r)) < 0 || (rc = dec_receipt(d, &m->blocked)) < 0)
		return rc;
	return dec_files_left_out(d, &m->files_left_out);
}

static int dec_error(struct dec *d, struct msg_error *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", false, &m->id)) < 0)
		return rc;
	m->has_id = rc > 0;
	if ((rc = dec_str(d, "code", true, NAME_FIELD_MAX, &m->code)) < 0 ||
	    (rc = dec_str(d, "message", true, TEXT_FIELD_MAX, &m->message)) < 0 ||
	    (rc = dec_str(d, "step", false, NAME_FIELD_MAX, &m->step)) < 0 ||
	    (rc = dec_int(d, "errno", false, &m->err_no)) < 0 ||
	    (rc = dec_uint(d, "dup_id", false, &m->dup_id)) < 0)
		return rc;
	m->has_dup_id = rc > 0;
	return 0;
}

static int dec_job_limits(struct dec *d, struct msg_job *m)
{
	struct dec sub = { .err = d->err, .type = "job.limits" };
	const msgpack_object *o = dec_find(d, "limits");
	int rc;

	if (!o)
		return dec_fail(d, PERR_BAD_FIELD, "missing field 'limits'");
	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0)
		return rc;
	for (size_t i = 0; i < JOB_LIMITS; i++)
		if ((rc = dec_uint(&sub, job_limit_keys[i], true, job_limit(&m->lim, i))) < 0)
			return rc;
	return 0;
}

static int dec_job_env(struct dec *d, struct msg_job *m)
{
	const msgpack_object *o = dec_find(d, "env");

	m->n_env = 0;
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > PROTO_ENV_MAX)
		return dec_fail(d, PERR_BAD_FIELD, "field 'env' must be an array of at most %d",
				PROTO_ENV_MAX);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];

		if (s->type != MSGPACK_OBJECT_STR || !memchr(s->via.str.ptr, '=', s->via.str.size) ||
		    memchr(s->via.str.ptr, '\0', s->via.str.size))
			return dec_fail(d, PERR_BAD_FIELD, "env entries must be NAME=value strings");
		m->env[m->n_env++] = (struct pstr){ s->via.str.ptr, s->via.str.size };
	}
	return 0;
}

/* One engine command line.  The worker execs v[0] without a PATH search,
 * so it must be absolute; a NUL would cut an argument short at execve. */
static int dec_argv(struct dec *d, const char *key, bool may_be_empty, struct job_argv *a)
{
	const msgpack_object *o = dec_find(d, key);

	a->n = 0;
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > PROTO_ARGV_MAX ||
	    (o->via.array.size == 0 && !may_be_empty))
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be an array of %d to %d str",
				key, may_be_empty ? 0 : 1, PROTO_ARGV_MAX);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];

		if (s->type != MSGPACK_OBJECT_STR || s->via.str.size > PROTO_ARG_MAX ||
		    (s->via.str.size && memchr(s->via.str.ptr, '\0', s->via.str.size)))
			return dec_fail(d, PERR_BAD_FIELD, "field '%s' holds an argument that is "
					"not a str without NUL of at most %d bytes",
					key, PROTO_ARG_MAX);
		a->v[a->n++] = (struct pstr){ s->via.str.ptr, s->via.str.size };
	}
	if (a->n && (a->v[0].len == 0 || a->v[0].ptr[0] != '/'))
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must start with an absolute path",
				key);
	return 0;
}

static int dec_job_step(struct dec *d, const msgpack_object *o, struct job_step *s)
{
	struct dec sub = { .err = d->err, .type = "job.engine.steps" };
	int rc;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_str(&sub, "step", true, NAME_FIELD_MAX, &s->name)) < 0)
		return rc;
	/* The name is what a failure reports as its setup step. */
	if (s->name.len == 0 || memchr(s->name.ptr, '\0', s->name.len))
		return dec_fail(&sub, PERR_BAD_FIELD, "field 'step' must be a name without NUL");
	return dec_argv(&sub, "argv", false, &s->argv);
}

/* The engine's commands come with the "engine" profile and only with it:
 * that profile is what lets the worker run the engine's CLI at all. */
static int dec_job_engine(struct dec *d, struct msg_job *m)
{
	struct dec sub = { .err = d->err, .type = "job.engine" };
	const msgpack_object *o = dec_find(d, "engine"), *steps;
	struct job_engine *g = &m->engine;
	int rc;

	m->has_engine = o != NULL;
	g->n_steps = 0;
	g->outputs.n = 0;
	if (m->has_engine != (m->profile == PROFILE_ENGINE))
		return dec_fail(d, PERR_BAD_FIELD,
				"field 'engine' is required with profile 'engine' and only there");
	if (!o)
		return 0;
	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0)
		return rc;
	steps = dec_find(&sub, "steps");
	if (!steps || steps->type != MSGPACK_OBJECT_ARRAY ||
	    steps->via.array.size > PROTO_STEPS_MAX)
		return dec_fail(&sub, PERR_BAD_FIELD, "field 'steps' must be an array of at most %d",
				PROTO_STEPS_MAX);
	for (uint32_t i = 0; i < steps->via.array.size; i++)
		if ((rc = dec_job_step(&sub, &steps->via.array.ptr[i], &g->steps[i])) < 0)
			return rc;
	g->n_steps = steps->via.array.size;
	if ((rc = dec_argv(&sub, "run", false, &g->run)) < 0 ||
	    (rc = dec_argv(&sub, "kill", true, &g->kill)) < 0 ||
	    (rc = dec_argv(&sub, "oom", true, &g->oom)) < 0 ||
	    (dec_find(&sub, "outputs") && (rc = dec_argv(&sub, "outputs", true, &g->outputs)) < 0))
		return rc;
	return 0;
}

/* Each entry an absolute path, or a file name without '/' (looked for
 * in the working directory and each of its parents; a final '*' matches
 * any rest of the name).  The unattended profile masks them on the host;
 * with "engine", the container's command line masks the working
 * directory's (PROTO_SECRET_MASKS_ARG). */
static int dec_job_secrets(struct dec *d, struct msg_job *m)
{
	const msgpack_object *o = dec_find(d, "secrets");

	m->n_secrets = 0;
	m->has_secrets = o != NULL;
	if (!o)
		return 0;
	if (m->profile != PROFILE_UNATTENDED && m->profile != PROFILE_ENGINE)
		return dec_fail(d, PERR_BAD_FIELD, "field 'secrets' is for profiles 'unattended' "
				"and 'engine' only");
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > PROTO_SECRETS_MAX)
		return dec_fail(d, PERR_BAD_FIELD, "field 'secrets' must be an array of at most %d",
				PROTO_SECRETS_MAX);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];
		const char *p = s->via.str.ptr;
		size_t n = s->via.str.size;

		if (s->type != MSGPACK_OBJECT_STR || n == 0 || n > PATH_FIELD_MAX ||
		    memchr(p, '\0', n) || (p[0] != '/' && memchr(p, '/', n)))
			return dec_fail(d, PERR_BAD_FIELD, "field 'secrets' holds an entry that is "
					"neither an absolute path nor a file name");
		m->secrets[m->n_secrets++] = (struct pstr){ p, n };
	}
	return 0;
}

/* A key of exactly PROTO_MASKS_KEY_LEN bytes into out; *has: present. */
static int dec_masks_key(struct dec *d, const char *key, bool required, bool *has,
			 uint8_t *out)
{
	const uint8_t *p = NULL;
	size_t len = 0;
	int rc = dec_bin(d, key, required, PROTO_MASKS_KEY_LEN, &p, &len);

	*has = rc == 1;
	if (rc <= 0)
		return rc;
	if (len != PROTO_MASKS_KEY_LEN)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be %d bytes", key,
				PROTO_MASKS_KEY_LEN);
	memcpy(out, p, len);
	return 0;
}

/* The mount table's text beside the secret set (unattended: the masks'
 * aliases and key); bytes, as mount points need not be UTF-8. */
static int dec_job_mounts(struct dec *d, struct msg_job *m)
{
	const uint8_t *p = NULL;
	size_t len = 0;
	int rc = dec_bin(d, "mounts", false, PROTO_MOUNTS_MAX, &p, &len);

	m->mounts = (struct pstr){ NULL, 0 };
	if (rc <= 0)
		return rc;
	if (!m->has_secrets || m->profile != PROFILE_UNATTENDED)
		return dec_fail(d, PERR_BAD_FIELD, "field 'mounts' is for an unattended job with "
				"'secrets' only");
	if (len == 0 || memchr(p, '\0', len))
		return dec_fail(d, PERR_BAD_FIELD, "field 'mounts' must be a mount table, "
				"without NUL");
	m->mounts = (struct pstr){ (const char *)p, len };
	return 0;
}

/* Only beside the secret set of an unattended job: the engine's masks
 * are the container's volumes, not a namespace. */
static int dec_job_masks(struct dec *d, struct msg_job *m)
{
	int rc = dec_masks_key(d, "masks", false, &m->has_masks_key, m->masks_key);

	if (rc < 0)
		return rc;
	if (m->has_masks_key && (!m->has_secrets || m->profile != PROFILE_UNATTENDED))
		return dec_fail(d, PERR_BAD_FIELD, "field 'masks' is for an unattended job with "
				"'secrets' only");
	return dec_job_mounts(d, m);
}

/* Present: a warm job (the approved and unattended profiles only). */
static int dec_job_preload(struct dec *d, struct msg_job *m)
{
	const msgpack_object *o = dec_find(d, "preload");

	m->n_preload = 0;
	m->warm = o != NULL;
	if (!o)
		return 0;
	if (m->profile != PROFILE_UNATTENDED && m->profile != PROFILE_APPROVED)
		return dec_fail(d, PERR_BAD_FIELD, "field 'preload' is for profiles 'approved' "
				"and 'unattended' only");
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > PROTO_PRELOAD_MAX)
		return dec_fail(d, PERR_BAD_FIELD, "field 'preload' must be an array of at most %d",
				PROTO_PRELOAD_MAX);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];

		if (s->type != MSGPACK_OBJECT_STR ||
		    !proto_module_name_ok(s->via.str.ptr, s->via.str.size))
			return dec_fail(d, PERR_BAD_FIELD, "field 'preload' holds an entry that is "
					"not a module name");
		m->preload[m->n_preload++] = (struct pstr){ s->via.str.ptr, s->via.str.size };
	}
	return 0;
}

static int dec_job(struct dec *d, struct msg_job *m)
{
	int rc, profile;

	if ((rc = dec_name(d, "profile", true, &proto_profiles, PROFILES_JOB, &profile)) < 0 ||
	    (rc = dec_str(d, "python", true, PATH_FIELD_MAX, &m->python)) < 0 ||
	    (rc = dec_str(d, "cwd", true, PATH_FIELD_MAX, &m->cwd)) < 0 ||
	    (rc = dec_str(d, "scratch_base", true, PATH_FIELD_MAX, &m->scratch_base)) < 0 ||
	    (rc = dec_uint(d, "timeout_ms", true, &m->timeout_ms)) < 0 ||
	    (rc = dec_uint(d, "grace_ms", true, &m->grace_ms)) < 0 ||
	    (rc = dec_bool(d, "landlock", true, &m->landlock)) < 0 ||
	    (rc = dec_bool(d, "proxy", false, &m->proxy)) < 0)
		return rc;
	m->profile = (enum proto_profile)profile;
	if (m->proxy && m->profile != PROFILE_APPROVED)
		return dec_fail(d, PERR_BAD_FIELD, "field 'proxy' is for profile 'approved' only");
	if ((rc = dec_job_limits(d, m)) < 0 ||
	    (rc = dec_job_env(d, m)) < 0 || (rc = dec_job_secrets(d, m)) < 0 ||
	    (rc = dec_job_masks(d, m)) < 0 || (rc = dec_job_preload(d, m)) < 0)
		return rc;
	return dec_job_engine(d, m);
}

static int dec_go(struct dec *d, struct msg_go *m)
{
	return dec_uint(d, "timeout_ms", true, &m->timeout_ms);
}

static int dec_warm(struct dec *d, struct msg_warm *m)
{
	return dec_uint(d, "pid", true, &m->pid);
}

static int dec_masks(struct dec *d, struct msg_masks *m)
{
	bool has;

	return dec_masks_key(d, "key", true, &has, m->key);
}

static int dec_ready(struct dec *d, struct msg_ready *m)
{
	int rc;

	if ((rc = dec_uint(d, "pid", true, &m->pid)) < 0 ||
	    (rc = dec_uint(d, "landlock_abi", true, &m->landlock_abi)) < 0)
		return rc;
	return 0;
}

static int dec_setup_error(struct dec *d, struct msg_setup_error *m)
{
	int rc;

	if ((rc = dec_str(d, "step", true, NAME_FIELD_MAX, &m->step)) < 0 ||
	    (rc = dec_int(d, "errno", true, &m->err_no)) < 0 ||
	    (rc = dec_str(d, "message", true, TEXT_FIELD_MAX, &m->message)) < 0)
		return rc;
	return 0;
}

static const char *const card_kinds[] = { "escalate", NULL };
static const char *const audit_ops[] = { "tail", "verify", "show", NULL };

/* Decodes element i of array field `key` as a map into *sub. */
static int dec_array(struct dec *d, const char *key, size_t max, const msgpack_object_array **a)
{
	const msgpack_object *o = dec_find(d, key);

	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > max)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be an array of at most %zu",
				key, max);
	*a = &o->via.array;
	return 0;
}

static int dec_card_label(struct dec *d, const msgpack_object *o, struct card_label *l)
{
	struct dec sub = { .err = d->err, .type = "card.labels" };
	int rc;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_enum(&sub, "label", true, proto_labels, &l->label)) < 0 ||
	    (rc = dec_uint(&sub, "start", true, &l->start)) < 0 ||
	    (rc = dec_uint(&sub, "end", true, &l->end)) < 0 ||
	    (rc = dec_uint(&sub, "line", true, &l->line)) < 0)
		return rc;
	return 0;
}

/* `limits`: a map of names to uints; the names are the broker's to choose
 * (a client shows them as they come), so only their shape is checked. */
static int dec_card_limits(struct dec *d, struct msg_card *m)
{
	const msgpack_object *o = dec_find(d, "limits");
	struct dec sub = { .err = d->err, .type = "card.limits" };
	int rc;

	m->n_limits = 0;
	if (!o)
		return 0;
	if ((rc = dec_map(&sub, o, PROTO_CARD_LIMITS_MAX)) < 0)
		return rc;
	for (uint32_t i = 0; i < sub.m->size; i++) {
		const msgpack_object *k = &sub.m->ptr[i].key, *v = &sub.m->ptr[i].val;

		if (!env_name_ok(k) || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return dec_fail(d, PERR_BAD_FIELD, "card limit '%.*s' must be a name and a uint",
					(int)k->via.str.size, k->via.str.ptr);
		m->limits[i] = (struct card_limit){ { k->via.str.ptr, k->via.str.size },
						    v->via.u64 };
		m->n_limits++;
	}
	return 0;
}

/* kind `escalate` carries the first run's receipt (not empty) and its
 * audit row; a run card carries neither. */
static int dec_card_kind(struct dec *d, struct msg_card *m)
{
	const char *kind = NULL;
	int rc;

	if ((rc = dec_enum(d, "kind", false, card_kinds, &kind)) < 0)
		return rc;
	m->escalate = kind != NULL;
	m->after_seq = 0;
	if (!m->escalate) {
		m->blocked = (struct receipt){ 0 };
		if (dec_find(d, "blocked") || dec_find(d, "after_seq"))
			return dec_fail(d, PERR_BAD_FIELD,
					"fields 'blocked' and 'after_seq' are for an escalation card");
		return 0;
	}
	if ((rc = dec_receipt(d, &m->blocked)) < 0 ||
	    (rc = dec_uint(d, "after_seq", true, &m->after_seq)) < 0)
		return rc;
	if (!m->blocked.total)
		return dec_fail(d, PERR_BAD_FIELD, "an escalation card needs field 'blocked'");
	return 0;
}

static int dec_card(struct dec *d, struct msg_card *m, size_t max_snippet)
{
	const msgpack_object_array *a = NULL;
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_str(d, "card", true, NAME_FIELD_MAX, &m->card)) < 0 ||
	    (rc = dec_str(d, "snippet", true, max_snippet, &m->snippet)) < 0 ||
	    (rc = dec_uint(d, "expires_ms", true, &m->expires_ms)) < 0 ||
	    (rc = dec_str(d, "reason", true, TEXT_FIELD_MAX, &m->reason)) < 0 ||
	    (rc = dec_array(d, "labels", PROTO_LABELS_MAX, &a)) < 0)
		return rc;
	for (uint32_t i = 0; i < a->size; i++)
		if ((rc = dec_card_label(d, &a->ptr[i], &m->labels[i])) < 0)
			return rc;
	m->n_labels = a->size;
	if ((rc = dec_str(d, "cwd", false, PATH_FIELD_MAX, &m->cwd)) < 0 ||
	    (rc = dec_uint(d, "timeout_ms", false, &m->timeout_ms)) < 0 ||
	    (rc = dec_env_map(d, "card.env", m->env, &m->n_env)) < 0 ||
	    (rc = dec_uint(d, "grant_ttl_ms", false, &m->grant_ttl_ms)) < 0 ||
	    (rc = dec_card_kind(d, m)) < 0)
		return rc;
	return dec_card_limits(d, m);
}

/* A grant's terms go with the answer that saves one, and only there: a
 * `once` that names a scope would read as if something were saved. */
static int dec_answer_terms(struct dec *d, struct msg_answer *m)
{
	bool always = !strcmp(m->choice, "always");
	int has_for, has_scope;

	m->for_ms = 0;
	m->scope = (struct pstr){ NULL, 0 };
	if ((has_for = dec_uint(d, "for_ms", false, &m->for_ms)) < 0)
		return has_for;
	if ((has_scope = dec_str(d, "scope", false, PATH_FIELD_MAX, &m->scope)) < 0)
		return has_scope;
	if (has_for && !always)
		return dec_fail(d, PERR_BAD_FIELD, "field 'for_ms' goes with choice 'always' only");
	if (has_scope && !always)
		return dec_fail(d, PERR_BAD_FIELD, "field 'scope' goes with choice 'always' only");
	if (has_for && m->for_ms == 0)
		return dec_fail(d, PERR_BAD_FIELD, "field 'for_ms' must be at least 1");
	if (has_scope && (m->scope.len == 0 || m->scope.ptr[0] != '/'))
		return dec_fail(d, PERR_BAD_FIELD, "field 'scope' must be an absolute directory");
	return 0;
}

/* Either kind's choice: which one the card takes is the gate's to say. */
static int dec_choice(struct dec *d, const char **out)
{
	struct pstr s;
	int rc = dec_str(d, "choice", true, 64, &s);

	if (rc < 0)
		return rc;
	*out = choice_in(card_run_choices, s);
	if (!*out)
		*out = choice_in(card_escalation_choices, s);
	if (!*out)
		return dec_fail(d, PERR_BAD_FIELD, "field 'choice' has an unknown value '%.*s'",
				(int)s.len, s.ptr);
	return 0;
}

static int dec_answer(struct dec *d, struct msg_answer *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", false, &m->id)) < 0)
		return rc;
	m->has_id = rc > 0;
	if ((rc = dec_str(d, "card", true, NAME_FIELD_MAX, &m->card)) < 0 ||
	    (rc = dec_choice(d, &m->choice)) < 0)
		return rc;
	return dec_answer_terms(d, m);
}

static int dec_grant(struct dec *d, const msgpack_object *o, struct grant_info *g)
{
	struct dec sub = { .err = d->err, .type = "grant_list.grants" };
	int rc;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_str(&sub, "family", true, NAME_FIELD_MAX, &g->family)) < 0 ||
	    (rc = dec_int(&sub, "saved_at_ms", true, &g->saved_at_ms)) < 0 ||
	    (rc = dec_str(&sub, "card", true, NAME_FIELD_MAX, &g->card)) < 0 ||
	    (rc = dec_uint(&sub, "use_count", true, &g->use_count)) < 0 ||
	    (rc = dec_int(&sub, "last_used_ms", true, &g->last_used_ms)) < 0 ||
	    (rc = dec_int(&sub, "expires_ms", false, &g->expires_ms)) < 0 ||
	    (rc = dec_bool(&sub, "expired", false, &g->expired)) < 0 ||
	    (rc = dec_str(&sub, "scope", false, PATH_FIELD_MAX, &g->scope)) < 0)
		return rc;
	return 0;
}

static int dec_grant_list(struct dec *d, struct msg_grant_list *m)
{
	const msgpack_object_array *a = NULL;
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_array(d, "grants", sizeof(m->rows) / sizeof(m->rows[0]), &a)) < 0)
		return rc;
	for (uint32_t i = 0; i < a->size; i++)
		if ((rc = dec_grant(d, &a->ptr[i], &m->rows[i])) < 0)
			return rc;
	m->n = a->size;
	return 0;
}

static int dec_id_only(struct dec *d, uint64_t *id)
{
	return dec_uint(d, "id", true, id) < 0 ? -EPROTO : 0;
}

static int dec_revoke(struct dec *d, struct msg_revoke *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_str(d, "family", true, NAME_FIELD_MAX, &m->family)) < 0)
		return rc;
	return 0;
}

static int dec_audit(struct dec *d, struct msg_audit *m)
{
	int rc;

	m->max = 20;
	m->seq = 0;
	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_enum(d, "op", true, audit_ops, &m->op)) < 0 ||
	    (rc = dec_uint(d, "max", false, &m->max)) < 0 ||
	    (rc = dec_uint(d, "seq", !strcmp(m->op, "show"), &m->seq)) < 0)
		return rc;
	return 0;
}

static int dec_audit_exit(struct dec *d, struct audit_info *a)
{
	int rc;

	if (!a->has_exit)
		return 0;
	if ((rc = dec_int(d, "exit_code", true, &a->exit_code)) < 0 ||
	    (rc = dec_int(d, "signal", true, &a->signal)) < 0 ||
	    (rc = dec_bool(d, "timed_out", true, &a->timed_out)) < 0 ||
	    (rc = dec_int(d, "duration_ms", true, &a->duration_ms)) < 0)
		return rc;
	return 0;
}

/* An exit row's receipt: its count, and on one row at most its list. */
static int dec_audit_receipt(struct dec *sub, struct audit_info *a, struct msg_audit_rows *m)
{
	int rc;

	a->blocked_total = 0;
	a->has_blocked = dec_find(sub, "blocked") != NULL;
	if (!a->has_blocked)
		return dec_uint(sub, "blocked_total", false, &a->blocked_total);
	if (!a->has_exit || m->blocked.total)
		return dec_fail(sub, PERR_BAD_FIELD, "field 'blocked' is for one exit row only");
	if ((rc = dec_receipt(sub, &m->blocked)) < 0)
		return rc;
	a->blocked_total = m->blocked.total;
	return 0;
}

/* An exit row's traffic: its sums on every row, its list on one at most. */
static int dec_audit_network(struct dec *sub, struct audit_info *a, struct msg_audit_rows *m)
{
	static struct network none;
	int rc;

	a->net_hosts = a->net_bytes_out = a->net_bytes_in = 0;
	a->has_network = dec_find(sub, "network") != NULL;
	if ((rc = dec_uint(sub, "net_hosts", false, &a->net_hosts)) < 0 ||
	    (rc = dec_uint(sub, "net_bytes_out", a->net_hosts > 0, &a->net_bytes_out)) < 0 ||
	    (rc = dec_uint(sub, "net_bytes_in", a->net_hosts > 0, &a->net_bytes_in)) < 0)
		return rc;
	if ((a->net_hosts || a->has_network) && !a->has_exit)
		return dec_fail(sub, PERR_BAD_FIELD, "field 'net_hosts' is for exit rows only");
	if (!a->has_network)
		return 0;
	if (m->network.n || !a->net_hosts)
		return dec_fail(sub, PERR_BAD_FIELD,
				"field 'network' is for one exit row with 'net_hosts' only");
	if ((rc = dec_network(sub, &m->network)) < 0)
		return rc;
	if (!m->network.n) {
		m->network = none;
		return dec_fail(sub, PERR_BAD_FIELD, "field 'network' lists a host at least");
	}
	return 0;
}

static int dec_audit_row(struct dec *d, const msgpack_object *o, struct audit_info *a,
			 struct msg_audit_rows *m)
{
	struct dec sub = { .err = d->err, .type = "audit_rows.rows" };
	int rc, event, decision, approver, profile;

	if ((rc = dec_map(&sub, o, MAP_FIELDS_MAX)) < 0 ||
	    (rc = dec_uint(&sub, "seq", true, &a->seq)) < 0 ||
	    (rc = dec_int(&sub, "time_ms", true, &a->time_ms)) < 0 ||
	    (rc = dec_uint(&sub, "run", true, &a->run)) < 0 ||
	    (rc = dec_int(&sub, "pid", true, &a->pid)) < 0 ||
	    (rc = dec_name(&sub, "event", true, &proto_events, EVENTS_ALL, &event)) < 0 ||
	    (rc = dec_str(&sub, "sha256", true, 64, &a->sha256)) < 0 ||
	    (rc = dec_str(&sub, "labels", true, TEXT_FIELD_MAX, &a->labels)) < 0 ||
	    (rc = dec_enum(&sub, "mode", true, modes, &a->mode)) < 0 ||
	    (rc = dec_name(&sub, "decision", true, &proto_decisions, DECISIONS_ALL, &decision)) < 0 ||
	    (rc = dec_name(&sub, "approver", true, &proto_approvers, APPROVERS_ALL, &approver)) < 0 ||
	    (rc = dec_name(&sub, "profile", true, &proto_profiles, PROFILES_AUDIT, &profile)) < 0 ||
	    (rc = dec_bool(&sub, "has_exit", true, &a->has_exit)) < 0)
		return rc;
	a->event = names_get(&proto_events, (unsigned)event);
	a->decision = (enum proto_decision)decision;
	a->approver = (enum proto_approver)approver;
	a->profile = (enum proto_profile)profile;
	a->after = 0;
	if ((rc = dec_audit_exit(&sub, a)) < 0 ||
	    (rc = dec_uint(&sub, "after", false, &a->after)) < 0)
		return rc;
	if ((rc = dec_audit_receipt(&sub, a, m)) < 0)
		return rc;
	return dec_audit_network(&sub, a, m);
}

static int dec_audit_rows(struct dec *d, struct msg_audit_rows *m)
{
	const msgpack_object_array *a = NULL;
	int rc;

	m->blocked.total = 0;
	m->blocked.n = 0;
	m->network.n = 0;
	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_array(d, "rows", PROTO_ROWS_MAX, &a)) < 0)
		return rc;
	for (uint32_t i = 0; i < a->size; i++)
		if ((rc = dec_audit_row(d, &a->ptr[i], &m->rows[i], m)) < 0)
			return rc;
	m->n = a->size;
	return 0;
}

static int dec_ok(struct dec *d, struct msg_ok *m)
{
	int rc;

	if ((rc = dec_uint(d, "id", true, &m->id)) < 0 ||
	    (rc = dec_str(d, "message", true, TEXT_FIELD_MAX, &m->message)) < 0)
		return rc;
	return 0;
}

static enum msg_type type_of(struct pstr t)
{
	for (int i = MSG_UNKNOWN + 1; i < MSG_TYPE_COUNT; i++)
		if (type_names[i] && pstr_eq(t, type_names[i]))
			return (enum msg_type)i;
	return MSG_UNKNOWN;
}

static int dec_body(struct dec *d, struct msg *out, size_t max_snippet)
{
	switch (out->type) {
	case MSG_HELLO: return dec_hello(d, &out->u.hello);
	case MSG_EXEC: return dec_exec(d, &out->u.exec, max_snippet);
	case MSG_CANCEL: return dec_cancel(d, &out->u.cancel);
	case MSG_WELCOME: return dec_welcome(d, &out->u.welcome);
	case MSG_STARTED: return dec_started(d, &out->u.started);
	case MSG_OUTPUT: return dec_output(d, &out->u.output);
	case MSG_QUEUED: return dec_queued(d, &out->u.queued);
	case MSG_EXIT: return dec_exit(d, &out->u.exit);
	case MSG_ERROR: return dec_error(d, &out->u.error);
	case MSG_JOB: return dec_job(d, &out->u.job);
	case MSG_READY: return dec_ready(d, &out->u.ready);
	case MSG_SETUP_ERROR: return dec_setup_error(d, &out->u.setup_error);
	case MSG_FINISHED: return dec_finished(d, &out->u.finished);
	case MSG_MASKS: return dec_masks(d, &out->u.masks);
	case MSG_GO: return dec_go(d, &out->u.go);
	case MSG_WARM: return dec_warm(d, &out->u.warm);
	case MSG_FILE: return dec_file(d, &out->u.file);
	case MSG_OUTPUT_FILE: return dec_output_file(d, &out->u.output_file);
	case MSG_CARD: return dec_card(d, &out->u.card, max_snippet);
	case MSG_ANSWER: return dec_answer(d, &out->u.answer);
	case MSG_GRANTS: return dec_id_only(d, &out->u.grants.id);
	case MSG_GRANT_LIST: return dec_grant_list(d, &out->u.grant_list);
	case MSG_REVOKE: return dec_revoke(d, &out->u.revoke);
	case MSG_AUDIT: return dec_audit(d, &out->u.audit);
	case MSG_AUDIT_ROWS: return dec_audit_rows(d, &out->u.audit_rows);
	case MSG_OK: return dec_ok(d, &out->u.ok);
	case MSG_UNKNOWN: case MSG_TYPE_COUNT:
	default:
		return dec_fail(d, PERR_UNKNOWN_TYPE, "no decoder for this type");
	}
}

/* The one entry named `key` of a map that may not have passed dec_map()
 * (duplicate keys, too many entries): NULL when absent or not unique. */
static const msgpack_object *raw_field(const msgpack_object *o, const char *key)
{
	const msgpack_object *found = NULL;
	size_t klen = strlen(key);

	if (o->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;

		if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != klen ||
		    memcmp(k->via.str.ptr, key, klen))
			continue;
		if (found)
			return NULL;
		found = &o->via.map.ptr[i].val;
	}
	return found;
}

/* What an answer needs even when the frame is refused: its `id`, so a
 * client with several requests in flight can match the error to one, and
 * its type, so a message no client sends is bad-state however malformed. */
static void peek_frame(const msgpack_object *o, struct proto_error *err)
{
	const msgpack_object *id = raw_field(o, "id"), *t = raw_field(o, "type");

	if (id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		err->has_id = true;
		err->id = id->via.u64;
	}
	if (t && t->type == MSGPACK_OBJECT_STR)
		err->type = type_of((struct pstr){ t->via.str.ptr, t->via.str.size });
}

/* `type` is a str naming a message: anything else is unknown-type, not a
 * bad field, so a client can tell "not a message" from "a bad message". */
static int dec_type(struct dec *d, enum msg_type *out)
{
	const msgpack_object *o = dec_find(d, "type");
	struct pstr t;

	if (!o || o->type != MSGPACK_OBJECT_STR)
		return dec_fail(d, PERR_UNKNOWN_TYPE, "field 'type' must be a str naming a message");
	t = (struct pstr){ o->via.str.ptr, o->via.str.size };
	*out = type_of(t);
	if (*out == MSG_UNKNOWN)
		return dec_fail(d, PERR_UNKNOWN_TYPE, "unknown message type '%.*s'",
				(int)(t.len > 64 ? 64 : t.len), t.ptr ? t.ptr : "");
	return 0;
}

/* Whether any str in o (keys included, at any depth) holds a NUL byte.
 * The decoders refuse one in each field they read, naming it; this finds
 * one in a field they skip, so that no str on the wire carries a NUL. */
static bool holds_nul(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_STR:
		return o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size);
	case MSGPACK_OBJECT_ARRAY:
		for (uint32_t i = 0; i < o->via.array.size; i++)
			if (holds_nul(&o->via.array.ptr[i]))
				return true;
		return false;
	case MSGPACK_OBJECT_MAP:
		for (uint32_t i = 0; i < o->via.map.size; i++)
			if (holds_nul(&o->via.map.ptr[i].key) || holds_nul(&o->via.map.ptr[i].val))
				return true;
		return false;
	case MSGPACK_OBJECT_NIL:
	case MSGPACK_OBJECT_BOOLEAN:
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT:
	default:
		return false;
	}
}

enum msg_type proto_decode(const uint8_t *payload, size_t len, size_t max_snippet,
			   struct msg *out, struct proto_error *err)
{
	struct dec d = { .err = err, .type = "frame" };
	msgpack_unpacked up;
	size_t off = 0;
	bool bad_utf8;

	memset(out, 0, sizeof(*out));
	err->type = MSG_UNKNOWN;
	err->has_id = false;
	err->id = 0;
	/* Past a bad-utf8 the structure holds (proto_check walked it all):
	 * msgpack-c may read it for the id and type. */
	bad_utf8 = proto_check(payload, len, err) < 0;
	if (bad_utf8 && strcmp(err->code, PERR_BAD_UTF8))
		return MSG_UNKNOWN;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, (const char *)payload, len, &off) != MSGPACK_UNPACK_SUCCESS) {
		if (!bad_utf8)
			dec_fail(&d, PERR_BAD_MSGPACK, "msgpack-c could not decode the map");
		goto fail;
	}
	peek_frame(&up.data, err);
	if (bad_utf8 || dec_map(&d, &up.data, MAP_FIELDS_MAX) < 0 || dec_type(&d, &out->type) < 0)
		goto fail;
	d.type = type_names[out->type];
	if (dec_body(&d, out, max_snippet) < 0)
		goto fail;
	if (holds_nul(&up.data)) {
		dec_fail(&d, PERR_BAD_FIELD, "a field this receiver does not read holds a str "
			 "with a NUL byte");
		goto fail;
	}
	out->has_id = err->has_id;
	out->id = err->id;
	/* Decoded strings point into `payload`, never into the zone. */
	msgpack_unpacked_destroy(&up);
	return out->type;
fail:
	msgpack_unpacked_destroy(&up);
	out->type = MSG_UNKNOWN;
	return MSG_UNKNOWN;
}

int proto_encode(struct frame *f, const struct msg *m)
{
	switch (m->type) {
	case MSG_HELLO: return enc_hello(f, &m->u.hello);
	case MSG_EXEC: return enc_exec(f, &m->u.exec);
	case MSG_ANSWER: return enc_answer(f, &m->u.answer);
	case MSG_CANCEL: return enc_cancel(f, &m->u.cancel);
	case MSG_GRANTS: return enc_grants(f, &m->u.grants);
	case MSG_REVOKE: return enc_revoke(f, &m->u.revoke);
	case MSG_AUDIT: return enc_audit(f, &m->u.audit);
	case MSG_WELCOME: return enc_welcome(f, &m->u.welcome);
	case MSG_STARTED: return enc_started(f, &m->u.started);
	case MSG_QUEUED: return enc_queued(f, &m->u.queued);
	case MSG_OUTPUT: return enc_output(f, &m->u.output);
	case MSG_EXIT: return enc_exit(f, &m->u.exit);
	case MSG_CARD: return enc_card(f, &m->u.card);
	case MSG_GRANT_LIST: return enc_grant_list(f, &m->u.grant_list);
	case MSG_AUDIT_ROWS: return enc_audit_rows(f, &m->u.audit_rows);
	case MSG_OK: return enc_ok(f, &m->u.ok);
	case MSG_ERROR: return enc_error(f, &m->u.error);
	case MSG_JOB: return enc_job(f, &m->u.job);
	case MSG_GO: return enc_go(f, &m->u.go);
	case MSG_READY: return enc_ready(f, &m->u.ready);
	case MSG_SETUP_ERROR: return enc_setup_error(f, &m->u.setup_error);
	case MSG_FINISHED: return enc_finished(f, &m->u.finished);
	case MSG_MASKS: return enc_masks(f, &m->u.masks);
	case MSG_WARM: return enc_warm(f, &m->u.warm);
	case MSG_FILE: return enc_file(f, &m->u.file);
	case MSG_OUTPUT_FILE: return enc_output_file(f, &m->u.output_file);
	case MSG_UNKNOWN:
	case MSG_TYPE_COUNT:
	default:
		return -EINVAL;
	}
}
