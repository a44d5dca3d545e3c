/* SPDX-License-Identifier: MIT
 * The approval gate (DESIGN.md, "The decision"): every `exec` is scanned,
 * checked against the caller's saved grant, and then run, put on a card for
 * a person, or refused.  Every decision and every run is written to the
 * audit trail first; when that write fails, nothing runs (fail closed).
 */
#include <errno.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker/gate.h"
#include "broker/log.h"
#include "broker/privsep.h"
#include "broker/scan.h"
#include "broker/store.h"

#define FAMILY CARD_FAMILY

/* A snippet waiting for a person.  It owns copies of everything the run
 * will need, because the frame it came in is gone by then. */
struct card {
	TAILQ_ENTRY(card) link;
	struct session *s;
	uint64_t id;
	char card_id[40];
	char *code;
	size_t code_len;
	char *cwd;
	uint64_t timeout_ms;
	size_t n_env;
	struct env_pair env[PROTO_ENV_MAX];
	char *env_buf;
	struct scan_result scan;
	char sha256[65];
	uint64_t expires_at;
};

static struct broker *gb;
static struct store *store;
static TAILQ_HEAD(, card) cards = TAILQ_HEAD_INITIALIZER(cards);

/* The words of the decision table, for the audit trail and the wire. */
struct verdict {
	enum { V_RUN, V_CARD, V_REFUSE, V_NOT_OFFERED } what;
	enum proto_approver approver;
	enum proto_profile profile;
	const char *reason;
};

int gate_init(struct broker *b, char *err, size_t errlen)
{
	gb = b;
	if (scan_init(err, errlen) < 0)
		return -1;
	if (store_open(b->state_dir, &store, err, errlen) < 0)
		return -1;
	log_info("grants and audit trail in %s/kotoba.db", b->state_dir);
	return 0;
}

static void card_free(struct card *c)
{
	free(c->code);
	free(c->cwd);
	free(c->env_buf);
	free(c);
}

void gate_fini(void)
{
	struct card *c;

	while ((c = TAILQ_FIRST(&cards))) {
		TAILQ_REMOVE(&cards, c, link);
		card_free(c);
	}
	store_close(store);
	store = NULL;
	scan_fini();
}

/* ---- audit ---------------------------------------------------------------- */

static void labels_csv(const struct scan_result *sr, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sr->n && off < len; i++)
		off += (size_t)snprintf(out + off, len - off, "%s%s", i ? "," : "",
					scan_label_name(sr->hits[i].label));
}

/* Records one decision; returns 0, or -1 after telling the client that
 * nothing runs because nothing could be recorded. */
static int audit_decision(struct session *s, uint64_t id, const char *code, size_t code_len,
			  const struct scan_result *sr, enum proto_decision decision,
			  const struct verdict *v, char sha256_out[65])
{
	char labels[256];
	struct audit_row row = { .uid = s->peer.uid, .pid = s->peer.pid, .run_id = id,
				 .event = "decision", .code = code, .code_len = code_len,
				 .labels = labels, .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .decision = decision_name(decision),
				 .approver = approver_name(v ? v->approver : APPROVER_NONE),
				 .profile = profile_name(v ? v->profile : PROFILE_NONE) };
	int rc;

	labels_csv(sr, labels, sizeof(labels));
	rc = store_audit_append(store, &row);
	if (rc < 0) {
		log_err("uid=%u audit write failed: %s", (unsigned)s->peer.uid,
			store_last_error(store));
		session_send_error(s, true, id, PERR_AUDIT,
				   "the snippet did not run: the broker cannot write its audit "
				   "trail (%s)", store_last_error(store));
		return -1;
	}
	if (sha256_out)
		memcpy(sha256_out, row.sha256, 65);
	return 0;
}

void gate_run_ended(struct run *r)
{
	struct audit_row row = { .uid = r->uid, .pid = r->peer_pid, .run_id = r->id,
				 .event = "exit", .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .approver = approver_name(r->approver),
				 .profile = profile_name(r->profile) };
	char labels[256] = "";
	size_t off = 0;

	memcpy(row.sha256, r->sha256, sizeof(row.sha256));
	for (size_t i = 0; i < r->n_labels; i++)
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, "%s%s", i ? "," : "",
					r->labels[i]);
	row.labels = labels;
	if (r->end == END_FINISHED) {
		row.decision = decision_name(DECISION_RAN);
		row.has_exit = true;
		row.exit_code = r->result.exited ? r->result.code : -1;
		row.signal = r->result.exited ? 0 : r->result.signal;
		row.timed_out = r->result.timed_out;
		row.duration_ms = (int64_t)(r->result.duration_us / 1000);
	} else {
		row.decision = decision_name(r->cancelled ? DECISION_CANCELLED : DECISION_FAILED);
	}
	if (store_audit_append(store, &row) < 0)
		log_err("uid=%u run=%" PRIu64 " audit write of the exit failed: %s",
			(unsigned)r->uid, r->run_id, store_last_error(store));
}

/* ---- the decision ------------------------------------------------------------ */

/* In a container the container is the boundary: the host-side kernel
 * profiles (approved, unattended) confine only the engine's client. */
static enum proto_profile profile_of(const struct config *c, enum proto_profile host_profile)
{
	return c->sandbox == SANDBOX_DOCKER ? PROFILE_CONTAINER : host_profile;
}

/* DESIGN.md's table, row by row. */
static struct verdict decide(const struct session *s, bool has_grant, bool labelled)
{
	const struct config *c = &gb->cfg;

	if (c->sandbox == SANDBOX_NONE)
		return (struct verdict){ V_NOT_OFFERED, APPROVER_NONE, PROFILE_NONE, "" };
	if (!s->channel) {
		if (labelled)
			return (struct verdict){ V_REFUSE, APPROVER_NONE, PROFILE_NONE, "" };
		if (c->unattended == UNATTENDED_REFUSE)
			return (struct verdict){ V_REFUSE, APPROVER_NONE, PROFILE_NONE,
						 "policy: nothing runs without an approval channel" };
		return (struct verdict){ V_RUN, APPROVER_UNATTENDED,
					 profile_of(c, PROFILE_UNATTENDED), "" };
	}
	if (labelled)
		return (struct verdict){ V_CARD, APPROVER_NONE, PROFILE_NONE,
					 has_grant ? "the snippet matches the pre-screen, which a "
						     "saved grant never covers"
						   : "the snippet matches the pre-screen" };
	if (c->sandbox == SANDBOX_DOCKER)
		return (struct verdict){ V_RUN, APPROVER_CONTAINER, PROFILE_CONTAINER, "" };
	if (has_grant)
		return (struct verdict){ V_RUN, APPROVER_GRANT, PROFILE_UNATTENDED, "" };
	return (struct verdict){ V_CARD, APPROVER_NONE, PROFILE_NONE,
				 "arbitrary Python is never auto-safe on the host, and no "
				 "execute_code grant is saved" };
}

/* "writes files and sends data out over the network" */
static void describe(const struct scan_result *sr, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sr->n && off < len; i++)
		off += (size_t)snprintf(out + off, len - off, "%s%s",
					i == 0 ? "" : i + 1 == sr->n ? " and " : ", ",
					scan_label_summary(sr->hits[i].label));
}

static void refuse(struct session *s, uint64_t id, const struct scan_result *sr,
		   const struct verdict *v)
{
	char what[512], labels[256];

	if (v->reason[0]) {
		session_send_error(s, true, id, PERR_REFUSED, "This snippet was not run: %s.",
				   v->reason);
		return;
	}
	describe(sr, what, sizeof(what));
	labels_csv(sr, labels, sizeof(labels));
	session_send_error(s, true, id, PERR_REFUSED,
			   "This snippet was not run: nobody can be asked to approve it here, "
			   "and it %s (%s). Run it from a client with an approval channel, or "
			   "change it.", what, labels);
}

static void fill_request(struct run_request *rq, const struct scan_result *sr,
			 const struct verdict *v, const char *sha256)
{
	rq->profile = v->profile;
	rq->approver = v->approver;
	rq->n_labels = sr->n;
	for (size_t i = 0; i < sr->n && i < PROTO_LABELS_MAX; i++)
		rq->labels[i] = scan_label_name(sr->hits[i].label);
	memcpy(rq->sha256, sha256, 65);
}

static void start_run(struct session *s, struct run_request *rq)
{
	char err[300] = "";
	int rc;

	rq->peer_uid = s->peer.uid;
	rq->peer_pid = s->peer.pid;
	rc = run_start(gb, s, rq, err, sizeof(err));
	switch (rc) {
	case 0:
		break;
	case -EBUSY:
		session_send_error(s, true, rq->id, PERR_BUSY, "%s", err);
		break;
	case -EPERM:
		session_send_error(s, true, rq->id, PERR_REFUSED, "%s", err);
		break;
	case -EINVAL:
		session_send_error(s, true, rq->id, PERR_BAD_CWD, "%s", err);
		break;
	case -ENOEXEC:
		run_send_setup_error(s, rq->id, "engine", ENOEXEC, err, true);
		break;
	default:
		session_send_error(s, true, rq->id, PERR_INTERNAL, "%s", err);
		break;
	}
}

/* Whether the user id could enter dir, from its mode bits (ACLs aside;
 * the worker still enters it as that user and says bad-cwd if not). */
static bool enterable_by(const char *dir, const struct identity *id)
{
	struct stat st;
	bool in_group;

	if (dir[0] != '/' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	in_group = st.st_gid == id->gid;
	for (size_t i = 0; i < id->n_groups && !in_group; i++)
		in_group = st.st_gid == id->groups[i];
	if (st.st_uid == id->uid)
		return st.st_mode & S_IXUSR;
	return st.st_mode & (in_group ? S_IXGRP : S_IXOTH);
}

/* The working directory when the client gave none: the home of the user
 * the snippet runs as (a root client's snippets run as root_user, whose
 * home is often /nonexistent), or `/` when that user cannot enter it.
 * Chosen before any card, so an approved snippet never fails on it. */
static void default_cwd(uid_t peer, char *out, size_t len)
{
	struct identity id;
	char err[200];

	if (privsep_identity(peer, &id, err, sizeof(err)) == 0 && enterable_by(id.home, &id))
		snprintf(out, len, "%s", id.home);
	else
		snprintf(out, len, "/");
}

static void run_now(struct session *s, const struct msg_exec *e, const struct scan_result *sr,
		    const struct verdict *v, const char *sha256)
{
	struct run_request rq = { .id = e->id, .code = e->code.ptr, .code_len = e->code.len,
				  .timeout_ms = e->timeout_ms ? e->timeout_ms : gb->cfg.timeout_ms,
				  .env = e->env, .n_env = e->n_env };
	char cwd[4096];

	if (e->cwd.len)
		snprintf(cwd, sizeof(cwd), "%.*s", (int)e->cwd.len, e->cwd.ptr);
	else
		default_cwd(s->peer.uid, cwd, sizeof(cwd));
	rq.cwd = cwd;
	rq.arrived_us = s->frame_us;
	fill_request(&rq, sr, v, sha256);
	if (v->approver == APPROVER_GRANT && store_grant_touch(store, s->peer.uid, FAMILY) < 0)
		log_warn("uid=%u could not count a grant use: %s", (unsigned)s->peer.uid,
			 store_last_error(store));
	start_run(s, &rq);
}

static unsigned cards_of(const struct session *s)
{
	unsigned n = 0;
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		n += c->s == s;
	return n;
}

/* Copies the request so it outlives its frame. */
static struct card *card_new(struct session *s, const struct msg_exec *e,
			     const struct scan_result *sr)
{
	struct card *c = calloc(1, sizeof(*c));
	uint8_t rnd[8];
	size_t env_len = 0, off = 0;
	char home[4096];

	if (!c)
		return NULL;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		goto fail;
	snprintf(c->card_id, sizeof(c->card_id), "c-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	for (size_t i = 0; i < e->n_env; i++)
		env_len += e->env[i].name.len + e->env[i].value.len + 2;
	if (!e->cwd.len)
		default_cwd(s->peer.uid, home, sizeof(home));
	c->code = pstr_dup(e->code);
	c->cwd = e->cwd.len ? pstr_dup(e->cwd) : strdup(home);
	c->env_buf = malloc(env_len + 1);
	if (!c->code || !c->cwd || !c->env_buf)
		goto fail;
	for (size_t i = 0; i < e->n_env; i++) {
		struct pstr parts[2] = { e->env[i].name, e->env[i].value };

		for (int k = 0; k < 2; k++) {
			memcpy(c->env_buf + off, parts[k].ptr, parts[k].len);
			c->env_buf[off + parts[k].len] = '\0';
			(k ? &c->env[i].value : &c->env[i].name)->ptr = c->env_buf + off;
			(k ? &c->env[i].value : &c->env[i].name)->len = parts[k].len;
			off += parts[k].len + 1;
		}
	}
	c->n_env = e->n_env;
	c->s = s;
	c->id = e->id;
	c->code_len = e->code.len;
	c->timeout_ms = e->timeout_ms ? e->timeout_ms : gb->cfg.timeout_ms;
	c->scan = *sr;
	c->expires_at = now_ms() + gb->cfg.card_timeout_ms;
	return c;
fail:
	card_free(c);
	return NULL;
}

static void send_card(struct session *s, const struct card *c, const char *reason)
{
	struct msg_card m = { .id = c->id, .card = pstr_c(c->card_id),
			      .snippet = { c->code, c->code_len }, .n_labels = c->scan.n,
			      .expires_ms = gb->cfg.card_timeout_ms, .reason = pstr_c(reason) };
	struct frame f;

	for (size_t i = 0; i < c->scan.n; i++) {
		const struct scan_hit *h = &c->scan.hits[i];

		m.labels[i] = (struct card_label){ scan_label_name(h->label), h->start, h->end,
						   h->line };
	}
	if (enc_card(&f, &m) == 0)
		session_send(s, &f);
}

static void ask(struct session *s, const struct msg_exec *e, const struct scan_result *sr,
		const struct verdict *v, const char *sha256)
{
	struct card *c;

	if (cards_of(s) >= gb->cfg.max_cards_per_conn) {
		session_send_error(s, true, e->id, PERR_BUSY,
				   "%u cards are already waiting on this connection; answer them "
				   "first", cards_of(s));
		return;
	}
	c = card_new(s, e, sr);
	if (!c) {
		session_send_error(s, true, e->id, PERR_INTERNAL, "out of memory");
		return;
	}
	memcpy(c->sha256, sha256, 65);
	TAILQ_INSERT_TAIL(&cards, c, link);
	log_info("uid=%u card %s for request %" PRIu64 ": %s", (unsigned)s->peer.uid, c->card_id,
		 e->id, v->reason);
	send_card(s, c, v->reason);
}

static enum proto_decision decision_of(const struct verdict *v)
{
	switch (v->what) {
	case V_RUN: return DECISION_RAN;
	case V_CARD: return DECISION_CARD;
	case V_REFUSE: return DECISION_REFUSED;
	case V_NOT_OFFERED: return DECISION_NOT_OFFERED;
	default: return DECISION_FAILED;
	}
}

void gate_exec(struct session *s, const struct msg_exec *e)
{
	struct scan_result sr = { 0 };
	struct verdict v;
	char sha256[65];
	bool has_grant = false;

	if (gb->cfg.sandbox != SANDBOX_NONE &&
	    scan_snippet(e->code.ptr, e->code.len, gb->cfg.snippet_max, &sr) < 0) {
		session_send_error(s, true, e->id, PERR_SNIPPET_TOO_LARGE,
				   "the snippet is over the limit of %" PRIu64 " bytes",
				   gb->cfg.snippet_max);
		return;
	}
	if (store_grant_get(store, s->peer.uid, FAMILY, &has_grant) < 0) {
		session_send_error(s, true, e->id, PERR_AUDIT,
				   "the snippet did not run: the grant store cannot be read (%s)",
				   store_last_error(store));
		return;
	}
	v = decide(s, has_grant, sr.n > 0);
	if (audit_decision(s, e->id, e->code.ptr, e->code.len, &sr, decision_of(&v), &v,
			   sha256) < 0)
		return;
	switch (v.what) {
	case V_NOT_OFFERED:
		session_send_error(s, true, e->id, PERR_NOT_OFFERED,
				   "execute_code is not offered: the broker runs with sandbox = none");
		break;
	case V_REFUSE:
		refuse(s, e->id, &sr, &v);
		break;
	case V_CARD:
		ask(s, e, &sr, &v, sha256);
		break;
	case V_RUN:
	default:
		run_now(s, e, &sr, &v, sha256);
		break;
	}
}

/* ---- answers ------------------------------------------------------------------ */

static struct card *card_find(const struct session *s, struct pstr id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->s == s && pstr_eq(id, c->card_id))
			return c;
	return NULL;
}

/* Records how the card ended; a person's deny and an expiry are different
 * rows, never confused. */
static int audit_card_end(struct card *c, enum proto_decision decision,
			  const struct verdict *v)
{
	return audit_decision(c->s, c->id, c->code, c->code_len, &c->scan, decision, v, NULL);
}

static void run_card(struct card *c)
{
	const struct verdict approved = { V_RUN, APPROVER_USER,
					  profile_of(&gb->cfg, PROFILE_APPROVED), "" };
	struct run_request rq = { .id = c->id, .code = c->code, .code_len = c->code_len,
				  .cwd = c->cwd, .timeout_ms = c->timeout_ms, .env = c->env,
				  .n_env = c->n_env };

	if (audit_card_end(c, DECISION_RAN, &approved) < 0)
		return;
	fill_request(&rq, &c->scan, &approved, c->sha256);
	rq.arrived_us = c->s->frame_us; /* the answer's frame: the person's time is not ours */
	start_run(c->s, &rq);
}

static void answer_taken(struct session *s, const struct msg_answer *a, const struct card *c)
{
	struct msg_ok ok = { .id = a->id };
	char text[128];
	struct frame f;

	snprintf(text, sizeof(text), "card %s answered %s", c->card_id, a->choice);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) == 0)
		session_send(s, &f);
}

/* The card leaves the list before anything runs: a second answer finds
 * nothing, so one approval runs the snippet once. */
int gate_on_answer(struct session *s, const struct msg *m)
{
	const struct msg_answer *a = &m->u.answer;
	struct card *c = card_find(s, a->card);

	if (!c) {
		session_send_error(s, a->has_id, a->id, PERR_NO_SUCH_CARD,
				   "answer: no open card '%.*s' on this connection", (int)a->card.len,
				   a->card.ptr);
		return 0;
	}
	TAILQ_REMOVE(&cards, c, link);
	log_info("uid=%u card %s answered %s", (unsigned)s->peer.uid, c->card_id, a->choice);
	/* The answer's own reply comes first: what follows (started, an
	 * error) belongs to the exec. */
	if (a->has_id) {
		answer_taken(s, a, c);
		if (s->w.fd < 0) { /* the client went away meanwhile */
			card_free(c);
			return 0;
		}
	}
	if (!strcmp(a->choice, "deny")) {
		if (audit_card_end(c, DECISION_DENIED, NULL) == 0)
			session_send_error(s, true, c->id, PERR_DENIED,
					   "You denied this snippet; it did not run.");
	} else if (!strcmp(a->choice, "always") &&
		   store_grant_save(store, s->peer.uid, FAMILY, c->card_id) < 0) {
		session_send_error(s, true, c->id, PERR_AUDIT,
				   "the snippet did not run: the grant could not be saved (%s)",
				   store_last_error(store));
	} else {
		run_card(c);
	}
	card_free(c);
	return 0;
}

static void expire(struct card *c)
{
	TAILQ_REMOVE(&cards, c, link);
	log_info("uid=%u card %s expired", (unsigned)c->s->peer.uid, c->card_id);
	if (audit_card_end(c, DECISION_EXPIRED, NULL) == 0)
		session_send_error(c->s, true, c->id, PERR_EXPIRED,
				   "Nobody answered the approval card within %" PRIu64
				   " s; the snippet did not run.", gb->cfg.card_timeout_ms / 1000);
	card_free(c);
}

void gate_tick(struct broker *b, uint64_t now)
{
	struct card *c;

	/* Telling a client its card expired may fail and close its session,
	 * which frees that session's other cards: after each expiry, look
	 * again from the start rather than trust a saved next pointer. */
	do {
		TAILQ_FOREACH(c, &cards, link)
			if (now >= c->expires_at)
				break;
		if (c)
			expire(c);
	} while (c);
}

int gate_next_deadline(struct broker *b, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->expires_at < next)
			next = c->expires_at;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

bool gate_card_for_id(struct session *s, uint64_t id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->s == s && c->id == id)
			return true;
	return false;
}

bool gate_cancel_card(struct session *s, uint64_t id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link) {
		if (c->s != s || c->id != id)
			continue;
		TAILQ_REMOVE(&cards, c, link);
		if (audit_card_end(c, DECISION_CANCELLED, NULL) == 0)
			session_send_error(s, true, id, PERR_CANCELLED,
					   "the card was withdrawn; the snippet did not run");
		card_free(c);
		return true;
	}
	return false;
}

void gate_withdraw_cards(struct session *s)
{
	struct card *c;

	/* Each withdrawal tells the client, which may close the session and
	 * free its other cards: look again from the start every time. */
	do {
		TAILQ_FOREACH(c, &cards, link)
			if (c->s == s)
				break;
		if (c)
			gate_cancel_card(s, c->id);
	} while (c);
}

/* A client that goes away leaves its cards unanswered: they are recorded
 * as expired (nobody answered), not as a denial. */
void gate_session_closed(struct session *s)
{
	struct card *c, *tmp;

	TAILQ_FOREACH_SAFE(c, &cards, link, tmp) {
		if (c->s != s)
			continue;
		TAILQ_REMOVE(&cards, c, link);
		audit_decision(s, c->id, c->code, c->code_len, &c->scan, DECISION_EXPIRED, NULL,
			       NULL);
		card_free(c);
	}
}

/* ---- grants and audit, each caller's own ---------------------------------------- */

int gate_on_grants(struct session *s, const struct msg *m)
{
	struct msg_grant_list gl = { .id = m->u.grants.id };
	struct grant_row rows[16];
	struct frame f;
	size_t n = 0;

	if (store_grant_list(store, s->peer.uid, rows, 16, &n) < 0) {
		session_send_error(s, true, gl.id, PERR_AUDIT, "cannot read grants: %s",
				   store_last_error(store));
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		gl.rows[i] = (struct grant_info){ pstr_c(rows[i].family), rows[i].saved_at_ms,
						  pstr_c(rows[i].card_id), rows[i].use_count,
						  rows[i].last_used_ms };
	gl.n = n;
	if (enc_grant_list(&f, &gl) < 0)
		return -ENOMEM;
	return session_send(s, &f);
}

int gate_on_revoke(struct session *s, const struct msg *m)
{
	const struct msg_revoke *r = &m->u.revoke;
	char family[32], text[128];
	struct msg_ok ok = { .id = r->id };
	struct frame f;
	bool existed = false;

	snprintf(family, sizeof(family), "%.*s", (int)r->family.len, r->family.ptr);
	if (r->family.len >= sizeof(family) ||
	    store_grant_revoke(store, s->peer.uid, family, &existed) < 0) {
		session_send_error(s, true, r->id, PERR_BAD_FIELD, "revoke: %s",
				   r->family.len >= sizeof(family) ? "family name too long"
								   : store_last_error(store));
		return 0;
	}
	log_info("uid=%u revoked %s (%s)", (unsigned)s->peer.uid, family,
		 existed ? "was saved" : "none saved");
	snprintf(text, sizeof(text), existed ? "revoked %s" : "there was no %s grant to revoke",
		 family);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) < 0)
		return -ENOMEM;
	return session_send(s, &f);
}

struct tail_ctx {
	struct msg_audit_rows *out;
	char (*sha)[65];
	char (*labels)[256];
};

static const char *canonical(const char *word, const char *const *set)
{
	for (size_t i = 0; set[i]; i++)
		if (!strcmp(word, set[i]))
			return set[i];
	return set[0];
}

/* A stored word read back as its value in a proto/names.h table; a word
 * the table does not have (a database a newer broker wrote) is `dflt`. */
static int named(const struct proto_names *t, const char *word, int dflt)
{
	int v = word ? names_find(t, word, strlen(word)) : -1;

	return v < 0 ? dflt : v;
}

static int take_row(const struct audit_row *row, void *arg)
{
	static const char *const events[] = { "decision", "exit", NULL };
	static const char *const modes[] = { "local", "docker", "none", NULL };
	struct tail_ctx *t = arg;
	size_t i = t->out->n++;
	struct audit_info *a = &t->out->rows[i];

	snprintf(t->sha[i], 65, "%s", row->sha256);
	snprintf(t->labels[i], 256, "%s", row->labels ? row->labels : "");
	*a = (struct audit_info){ .seq = (uint64_t)row->seq, .time_ms = row->time_ms,
				  .run = row->run_id, .pid = row->pid,
				  .event = canonical(row->event, events),
				  .sha256 = pstr_c(t->sha[i]), .labels = pstr_c(t->labels[i]),
				  .mode = canonical(row->mode, modes),
				  .decision = (enum proto_decision)named(&proto_decisions, row->decision,
									 DECISION_FAILED),
				  .approver = (enum proto_approver)named(&proto_approvers, row->approver,
									 APPROVER_NONE),
				  .profile = (enum proto_profile)named(&proto_profiles, row->profile,
								       PROFILE_NONE),
				  .has_exit = row->has_exit, .exit_code = row->exit_code,
				  .signal = row->signal, .timed_out = row->timed_out,
				  .duration_ms = row->duration_ms };
	return 0;
}

static int audit_tail(struct session *s, uint64_t id, uint64_t max)
{
	static struct msg_audit_rows out;
	static char sha[PROTO_ROWS_MAX][65], labels[PROTO_ROWS_MAX][256];
	struct tail_ctx t = { &out, sha, labels };
	struct frame f;

	memset(&out, 0, sizeof(out));
	out.id = id;
	if (store_audit_tail(store, s->peer.uid, max > PROTO_ROWS_MAX ? PROTO_ROWS_MAX : max,
			     take_row, &t) < 0) {
		session_send_error(s, true, id, PERR_AUDIT, "cannot read the audit trail: %s",
				   store_last_error(store));
		return 0;
	}
	if (enc_audit_rows(&f, &out) < 0)
		return -ENOMEM;
	return session_send(s, &f);
}

static int audit_verify(struct session *s, uint64_t id)
{
	struct msg_ok ok = { .id = id };
	uint64_t rows = 0;
	int64_t bad = 0;
	char text[160];
	struct frame f;
	int rc = store_audit_verify(store, &rows, &bad);

	if (rc == -EBADMSG) {
		session_send_error(s, true, id, PERR_AUDIT_BROKEN,
				   "the audit chain is broken at row %" PRId64
				   " (%" PRIu64 " rows before it verify)", bad, rows);
		return 0;
	}
	if (rc < 0) {
		session_send_error(s, true, id, PERR_AUDIT, "cannot read the audit trail: %s",
				   store_last_error(store));
		return 0;
	}
	snprintf(text, sizeof(text), "%" PRIu64 " rows, hash chain intact", rows);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) < 0)
		return -ENOMEM;
	return session_send(s, &f);
}

int gate_on_audit(struct session *s, const struct msg *m)
{
	const struct msg_audit *a = &m->u.audit;

	if (!strcmp(a->op, "verify"))
		return audit_verify(s, a->id);
	return audit_tail(s, a->id, a->max);
}
