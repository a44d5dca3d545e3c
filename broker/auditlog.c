/* SPDX-License-Identifier: MIT
 * The audit trail seen from outside the gate: the check at start (a break
 * is an error in the log and an epoch row, never a silent append), the
 * anchors (the chain head in the log, where whoever later owns the
 * database file cannot take it back), and --audit-key-init.
 *
 * It keeps a connection of its own to the store; the gate appends through
 * its own, and store_set_anchor_hook() reports every anchor_rows-th row.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "broker/auditlog.h"
#include "broker/log.h"
#include "broker/seal.h"
#include "broker/store.h"

static struct store *watch;
static uint64_t interval_ms, next_anchor_ms;

/* One greppable line: `kotoba audit verify --anchors` reads it back. */
static void log_anchor(int64_t seq, const char *hash, const char *why)
{
	log_info("audit-anchor seq=%" PRId64 " hash=%s (%s)", seq, hash, why);
}

static void anchor_every_rows(int64_t seq, const char *hash)
{
	log_anchor(seq, hash, "rows");
}

static void anchor_now(const char *why)
{
	char hash[65];
	int64_t seq;

	if (!watch)
		return;
	if (store_audit_head(watch, &seq, hash) < 0)
		log_err("audit: cannot read the chain head for an anchor: %s",
			store_last_error(watch));
	else
		log_anchor(seq, hash, why);
}

static void record_break(const struct audit_problem *p)
{
	struct audit_row row;

	log_err("audit chain broken at row %" PRId64 ": %s; recording it as an epoch row",
		p->seq, p->why);
	if (store_audit_mark_break(watch, p->seq, &row) < 0)
		log_err("audit: cannot record the break: %s; snippets are refused until the "
			"trail can be written", store_last_error(watch));
	else
		log_err("audit: epoch row %" PRId64 " records the break at row %" PRId64,
			row.seq, p->seq);
}

static void report_problems(const struct audit_report *rep)
{
	int64_t recorded = 0;

	for (size_t i = 0; i < rep->n; i++) {
		const struct audit_problem *p = &rep->problems[i];

		if (p->kind != AUDIT_CHAIN)
			continue;
		if (p->acked_by)
			log_warn("audit chain broken at row %" PRId64 ": %s (recorded by epoch row %"
				 PRId64 ")", p->seq, p->why, p->acked_by);
		else if (p->seq != recorded)
			record_break(p);
		recorded = p->acked_by ? recorded : p->seq;
	}
	if (rep->dropped)
		log_err("audit: %zu more problems not listed; run kotoba audit verify --db on a "
			"copy", rep->dropped);
}

/* The key file against the newest seal, without keeping the key. */
static void report_sealing(const char *dir, const struct audit_report *rep)
{
	struct seal_key k;
	char err[400];
	int rc = seal_key_load(dir, &k, err, sizeof(err));
	uint64_t index = k.index;

	seal_key_wipe(&k);
	if (rc == -ENOENT && !rep->sealed) {
		log_info("audit: rows are not sealed (no key: run kotoba-brokerd --audit-key-init "
			 "once, see AUDIT.md)");
	} else if (rc == -ENOENT) {
		log_err("audit: sealed rows but %s/%s is gone: nothing can be recorded, so "
			"nothing runs", dir, SEAL_KEY_FILE);
	} else if (rc < 0) {
		log_err("audit: %s", err);
	} else if (rep->sealed && index > (uint64_t)rep->last_key_index + 1) {
		log_warn("audit: sealing key %" PRIu64 " follows the newest seal's key %" PRId64
			 ": rows sealed under the keys between are gone, or a write failed after "
			 "sealing", index, rep->last_key_index);
	} else {
		log_info("audit: rows are sealed, the key is at index %" PRIu64, index);
	}
}

static void check_at_start(const struct broker *b)
{
	static struct audit_report rep;
	struct audit_check opt = { 0 };
	char hash[65];
	int64_t head;

	if (store_audit_head(watch, &head, hash) == 0 &&
	    head > (int64_t)b->cfg.audit_verify_rows)
		opt.from_seq = head - (int64_t)b->cfg.audit_verify_rows + 1;
	if (store_audit_check(watch, &opt, &rep) < 0) {
		log_err("audit: cannot check the chain at start: %s", store_last_error(watch));
		return;
	}
	log_info("audit: checked rows %" PRId64 " to %" PRId64 " (%" PRIu64 " rows)%s",
		 rep.first_seq, rep.last_seq, rep.rows,
		 opt.from_seq ? ", the newest ones" : ", all of them");
	report_problems(&rep);
	report_sealing(b->state_dir, &rep);
}

int audit_watch_start(const struct broker *b, char *err, size_t errlen)
{
	if (store_open(b->state_dir, &watch, err, errlen) < 0)
		return -1;
	check_at_start(b);
	anchor_now("start");
	store_set_anchor_hook(b->cfg.audit_anchor_rows, anchor_every_rows);
	interval_ms = b->cfg.audit_anchor_ms;
	next_anchor_ms = now_ms() + interval_ms;
	return 0;
}

void audit_watch_secrets(bool was_on, bool on)
{
	struct audit_row row;

	if (!watch || was_on == on)
		return;
	if (store_audit_mark_setting(watch, on ? AUDIT_EPOCH_SECRETS_ON : AUDIT_EPOCH_SECRETS_OFF,
				     &row) < 0)
		log_err("audit: cannot record [sandbox] secrets = %s: %s", on ? "yes" : "off",
			store_last_error(watch));
	else
		log_info("audit: epoch row %" PRId64 " records [sandbox] secrets = %s", row.seq,
			 on ? "yes" : "off");
}

int audit_watch_next_deadline(uint64_t now)
{
	if (!watch)
		return -1;
	return next_anchor_ms <= now ? 0 : (int)(next_anchor_ms - now > INT32_MAX ?
						 INT32_MAX : next_anchor_ms - now);
}

void audit_watch_tick(uint64_t now)
{
	if (!watch || now < next_anchor_ms)
		return;
	anchor_now("interval");
	next_anchor_ms = now + interval_ms;
}

void audit_watch_stop(void)
{
	anchor_now("stop");
	store_set_anchor_hook(0, NULL);
	store_close(watch);
	watch = NULL;
}

int audit_key_init(const char *state_dir)
{
	char err[400], key[65];
	struct store *s;
	int rc;

	if (store_open(state_dir, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "kotoba-brokerd: %s\n", err);
		return 1;
	}
	rc = store_audit_seal_init(s, key);
	if (rc < 0)
		fprintf(stderr, "kotoba-brokerd: %s\n", store_last_error(s));
	store_close(s);
	if (rc < 0)
		return 1;
	/* stdout only: never the log, which the service user can read. */
	printf("%s\n", key);
	fflush(stdout);
	explicit_bzero(key, sizeof(key));
	fprintf(stderr, "kotoba-brokerd: audit sealing started in %s/kotoba.db.  The line above "
		"is the verification key: keep it away from this machine (kotoba audit verify "
		"--key); it is not stored anywhere.\n", state_dir);
	return 0;
}
