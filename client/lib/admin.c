/* SPDX-License-Identifier: MIT
 * The caller's own grants and audit trail (the broker answers per peer uid).
 */
#include <errno.h>
#include <string.h>

#include "client/lib/internal.h"

/* Sends a request and checks its answer is of the expected type. */
static enum kotoba_code ask(struct kotoba_client *c, struct frame *f, uint64_t id,
			    enum msg_type want, struct kotoba_error *err)
{
	enum kotoba_code rc = kc_request(c, f, id, err);

	if (rc)
		return rc;
	if (c->msg->type != want)
		return kc_fail(err, KOTOBA_ERR_PROTOCOL, EPROTO,
			       "the broker answered with '%s' where '%s' was expected",
			       msg_type_name(c->msg->type), msg_type_name(want));
	return KOTOBA_OK;
}

/* The caller's rows are rows[0].size bytes apart: checked before any
 * request is sent. */
static enum kotoba_code check_rows(const void *rows, size_t max, size_t v1_size,
				   struct kotoba_error *err)
{
	if (!rows || max < 1 || kc_size_of(rows) < v1_size)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL,
			       "give at least one row, its size set to sizeof the row");
	return KOTOBA_OK;
}

/* Row @i of the caller's array, its size field set for kc_put_sized(). */
static void *row_at(void *rows, size_t i)
{
	size_t size = kc_size_of(rows);
	char *r = (char *)rows + i * size;

	memcpy(r, &size, sizeof(size));
	return r;
}

static void copy_ok(const struct msg_ok *ok, char *message, size_t len)
{
	if (message)
		kc_copy(message, len, ok->message.ptr, ok->message.len);
}

enum kotoba_code kotoba_grants(struct kotoba_client *c, struct kotoba_grant *rows, size_t max,
			       size_t *n, struct kotoba_error *err)
{
	struct msg_grants g = { 0 };
	struct frame f = { 0 };
	const struct msg_grant_list *l = &c->msg->u.grant_list;
	enum kotoba_code rc;

	*n = 0;
	if ((rc = kc_ready(c, err)) || (rc = check_rows(rows, max, KC_GRANT_SIZE, err)))
		return rc;
	g.id = kc_next_id(c);
	if ((rc = kc_encoded(enc_grants(&f, &g), err)) ||
	    (rc = ask(c, &f, g.id, MSG_GRANT_LIST, err)))
		return rc;
	for (size_t i = 0; i < l->n && i < max; i++) {
		const struct grant_info *gi = &l->rows[i];
		struct kotoba_grant row = { .size = sizeof(row) }, *r = &row;

		kc_copy(r->family, sizeof(r->family), gi->family.ptr, gi->family.len);
		kc_copy(r->card, sizeof(r->card), gi->card.ptr, gi->card.len);
		r->saved_at_ms = gi->saved_at_ms;
		r->use_count = gi->use_count;
		r->last_used_ms = gi->last_used_ms;
		r->expires_ms = gi->expires_ms;
		r->expired = gi->expired;
		kc_copy(r->scope, sizeof(r->scope), gi->scope.ptr, gi->scope.len);
		kc_put_sized(row_at(rows, (*n)++), r, sizeof(*r));
	}
	return KOTOBA_OK;
}

enum kotoba_code kotoba_revoke(struct kotoba_client *c, const char *family, char *message,
			       size_t message_len, struct kotoba_error *err)
{
	struct msg_revoke r = { 0 };
	struct frame f = { 0 };
	enum kotoba_code rc;

	if ((rc = kc_ready(c, err)))
		return rc;
	if (!family || !*family)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL, "name the grant to revoke");
	r.id = kc_next_id(c);
	r.family = pstr_c(family);
	if ((rc = kc_encoded(enc_revoke(&f, &r), err)) ||
	    (rc = ask(c, &f, r.id, MSG_OK, err)))
		return rc;
	copy_ok(&c->msg->u.ok, message, message_len);
	return KOTOBA_OK;
}

#define COPY_STR(dst, s) kc_copy(dst, sizeof(dst), s, strlen(s))

static void take_row(void *out, const struct audit_info *a)
{
	struct kotoba_audit_row row = { .size = sizeof(row) }, *r = &row;

	r->seq = a->seq;
	r->time_ms = a->time_ms;
	r->run = a->run;
	r->pid = a->pid;
	COPY_STR(r->event, a->event);
	kc_copy(r->sha256, sizeof(r->sha256), a->sha256.ptr, a->sha256.len);
	kc_copy(r->labels, sizeof(r->labels), a->labels.ptr, a->labels.len);
	COPY_STR(r->mode, a->mode);
	COPY_STR(r->decision, decision_name(a->decision));
	COPY_STR(r->approver, approver_name(a->approver));
	COPY_STR(r->profile, profile_name(a->profile));
	r->has_exit = a->has_exit;
	if (a->has_exit) {
		r->exit_code = a->exit_code;
		r->signal = a->signal;
		r->duration_ms = a->duration_ms;
		r->timed_out = a->timed_out;
	}
	r->blocked_total = a->blocked_total;
	r->after = a->after;
	r->net_hosts = a->net_hosts;
	r->net_bytes_out = a->net_bytes_out;
	r->net_bytes_in = a->net_bytes_in;
	kc_put_sized(out, r, sizeof(*r));
}

/* `max` is sent with verify and show too, as the broker ignores it there. */
static enum kotoba_code audit_seq(struct kotoba_client *c, const char *op, uint64_t max,
				  uint64_t seq, enum msg_type want, struct kotoba_error *err)
{
	struct msg_audit q = { .op = op, .max = max, .seq = seq };
	struct frame f = { 0 };
	enum kotoba_code rc;

	if ((rc = kc_ready(c, err)))
		return rc;
	q.id = kc_next_id(c);
	if ((rc = kc_encoded(enc_audit(&f, &q), err)))
		return rc;
	return ask(c, &f, q.id, want, err);
}

static enum kotoba_code audit(struct kotoba_client *c, const char *op, uint64_t max,
			      enum msg_type want, struct kotoba_error *err)
{
	return audit_seq(c, op, max, 0, want, err);
}

enum kotoba_code kotoba_audit_tail(struct kotoba_client *c, struct kotoba_audit_row *rows,
				   size_t max, size_t *n, struct kotoba_error *err)
{
	const struct msg_audit_rows *l = &c->msg->u.audit_rows;
	enum kotoba_code rc;

	*n = 0;
	if (max < 1 || max > KOTOBA_AUDIT_MAX)
		return kc_fail(err, KOTOBA_ERR_INVALID, EINVAL, "ask for 1 to %d audit rows",
			       KOTOBA_AUDIT_MAX);
	if ((rc = check_rows(rows, max, KC_AUDIT_ROW_SIZE, err)) ||
	    (rc = audit(c, "tail", max, MSG_AUDIT_ROWS, err)))
		return rc;
	for (size_t i = 0; i < l->n && i < max; i++)
		take_row(row_at(rows, (*n)++), &l->rows[i]);
	return KOTOBA_OK;
}

enum kotoba_code kotoba_audit_verify(struct kotoba_client *c, char *message, size_t message_len,
				     struct kotoba_error *err)
{
	enum kotoba_code rc = audit(c, "verify", 20, MSG_OK, err);

	if (rc)
		return rc;
	copy_ok(&c->msg->u.ok, message, message_len);
	return KOTOBA_OK;
}

static void take_blocked(struct kotoba_blocked *k, const struct blocked_op *o)
{
	memset(k, 0, sizeof(*k));
	COPY_STR(k->kind, block_kind_name(o->kind));
	COPY_STR(k->target, o->target);
	k->count = o->count;
	COPY_STR(k->by, blocker_name(o->by));
	COPY_STR(k->seen_by, witness_name(o->seen_by));
	k->inferred = o->inferred;
}

enum kotoba_code kotoba_audit_show(struct kotoba_client *c, uint64_t seq,
				   struct kotoba_audit_row *row, bool *found,
				   struct kotoba_blocked *blocked, size_t max, size_t *n,
				   struct kotoba_error *err)
{
	const struct msg_audit_rows *l = &c->msg->u.audit_rows;
	enum kotoba_code rc;

	*found = false;
	*n = 0;
	if (!blocked)
		max = 0;
	if ((rc = check_rows(row, 1, KC_AUDIT_ROW_SIZE, err)) ||
	    (rc = audit_seq(c, "show", 1, seq, MSG_AUDIT_ROWS, err)))
		return rc;
	if (l->n != 1 || l->rows[0].seq != seq)
		return KOTOBA_OK;
	*found = true;
	take_row(row, &l->rows[0]);
	for (size_t i = 0; l->rows[0].has_blocked && i < l->blocked.n && i < max; i++)
		take_blocked(&blocked[(*n)++], &l->blocked.op[i]);
	return KOTOBA_OK;
}

enum kotoba_code kotoba_audit_network(struct kotoba_client *c, uint64_t seq,
				      struct kotoba_net_use *use, size_t max, size_t *n,
				      bool *found, struct kotoba_error *err)
{
	const struct msg_audit_rows *l = &c->msg->u.audit_rows;
	enum kotoba_code rc;

	*found = false;
	*n = 0;
	if (!use)
		max = 0;
	if ((rc = audit_seq(c, "show", 1, seq, MSG_AUDIT_ROWS, err)))
		return rc;
	if (l->n != 1 || l->rows[0].seq != seq)
		return KOTOBA_OK;
	*found = true;
	for (size_t i = 0; l->rows[0].has_network && i < l->network.n && i < max; i++) {
		const struct net_use *u = &l->network.use[i];
		struct kotoba_net_use *k = &use[(*n)++];

		memset(k, 0, sizeof(*k));
		COPY_STR(k->host, u->host);
		COPY_STR(k->methods, u->methods);
		k->requests = u->requests;
		k->bytes_out = u->bytes_out;
		k->bytes_in = u->bytes_in;
	}
	return KOTOBA_OK;
}
