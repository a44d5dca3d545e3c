/* SPDX-License-Identifier: MIT
 * The approval gate (DESIGN.md, "The decision"): every `exec` is scanned,
 * checked against the caller's saved grant, and then run, put on a card for
 * a person, or refused.  Every decision and every run is written to the
 * audit trail first; when that write fails, nothing runs (fail closed).
 */
#include <errno.h>
#include <pwd.h>
#include <inttypes.h>
#include <limits.h>
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
#include "proto/limits.h"

#define FAMILY CARD_FAMILY

/* A snippet waiting for a person, or for a free slot ([quota] queue).  It
 * owns copies of everything the run will need, because the frame it came
 * in is gone by then. */
struct card {
	TAILQ_ENTRY(card) link;
	struct client_link *cl;
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
	/* in the queue: how the gate decided, and when the exec arrived */
	enum proto_profile profile;
	enum proto_approver approver;
	uint64_t arrived_us;
	/* An escalation card (PROTOCOL.md, "The escalation card"): the run
	 * whose exit row is after_seq was stopped by the sandbox, as its
	 * receipt says.  A run card has neither. */
	bool escalate;
	int64_t after_seq;
	struct receipt *blocked;
};

static struct broker *gb;
static struct store *store;
static TAILQ_HEAD(card_list, card) cards = TAILQ_HEAD_INITIALIZER(cards);
/* Execs that wait for a slot, oldest first; run in this order. */
static struct card_list waiting = TAILQ_HEAD_INITIALIZER(waiting);
/* A run ended or the run count moved since the queue last found no room. */
static bool queue_kick;
static unsigned queue_tried_nruns;

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
	store_set_quota(store, b->cfg.audit_bytes, b->cfg.audit_period_ms);
	log_info("grants and audit trail in %s/kotoba.db", b->state_dir);
	return 0;
}

static void card_free(struct card *c)
{
	if (c->code_len > 65536)
		loop_trim_later();
	free(c->code);
	free(c->cwd);
	free(c->env_buf);
	free(c->blocked);
	free(c);
}

void gate_fini(void)
{
	struct card *c;

	if (store && store_unsynced(store) && store_sync(store) < 0)
		log_err("audit: %s", store_last_error(store));

	while ((c = TAILQ_FIRST(&cards))) {
		TAILQ_REMOVE(&cards, c, link);
		card_free(c);
	}
	while ((c = TAILQ_FIRST(&waiting))) {
		TAILQ_REMOVE(&waiting, c, link);
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

/* ---- durability ----------------------------------------------------------- */

/* When the rows written without waiting for the disk are synced at the
 * latest ([audit] sync_window); 0: none waits. */
static uint64_t sync_due_ms;

static void sync_rows(uint64_t now)
{
	if (store_sync(store) == 0) {
		sync_due_ms = 0;
		return;
	}
	/* Every row from now on is refused until a sync works; try again. */
	log_err("audit: %s; no snippet starts until the trail is synced", store_last_error(store));
	sync_due_ms = now + 1000;
}

static void sync_rows_later(void)
{
	if (!sync_due_ms)
		sync_due_ms = now_ms() + gb->cfg.audit_sync_window_ms;
}

/* Appends a row for an exec; returns 0, or -1 after telling the client
 * that nothing runs because nothing could be recorded.  The row of a
 * snippet that starts now need not wait for the disk (AUDIT.md,
 * "Durability"). */
static int append_or_refuse(struct client_link *cl, uint64_t id, struct audit_row *row,
			    bool starts_now)
{
	/* An escalation's rows follow a run that did happen. */
	const char *not_run = row->after_seq ? "did not run again" : "did not run";
	bool unsynced = starts_now && gb->cfg.audit_sync_window_ms;
	int rc = unsynced ? store_audit_append_unsynced(store, row) : store_audit_append(store, row);

	if (rc == 0 && unsynced)
		sync_rows_later();

	if (rc == -EDQUOT) {
		log_warn("uid=%u refused: %s", (unsigned)cl->peer.uid, store_last_error(store));
		client_send_error(cl, true, id, PERR_QUOTA,
				  "the snippet %s: %s", not_run, store_last_error(store));
		return -1;
	}
	if (rc < 0) {
		log_err("uid=%u audit write failed: %s", (unsigned)cl->peer.uid,
			store_last_error(store));
		client_send_error(cl, true, id, PERR_AUDIT,
				  "the snippet %s: the broker cannot write its audit trail (%s)",
				  not_run, store_last_error(store));
		return -1;
	}
	return 0;
}

/* Records one decision; returns 0, or -1 after telling the client that
 * nothing runs because nothing could be recorded.  A row that follows one
 * already recorded (how a card or a queued exec ended) is never refused for
 * the user's audit quota; a new exec is, and then nothing runs. */
static int audit_decision(struct client_link *cl, uint64_t id, const char *code, size_t code_len,
			  const struct scan_result *sr, enum proto_decision decision,
			  const struct verdict *v, bool follows, int64_t after_seq,
			  char sha256_out[65])
{
	char labels[256];
	struct audit_row row = { .uid = cl->peer.uid, .pid = cl->peer.pid, .run_id = id,
				 .event = event_name(EVENT_DECISION), .code = code,
				 .code_len = code_len,
				 .labels = labels, .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .decision = decision_name(decision),
				 .approver = approver_name(v ? v->approver : APPROVER_NONE),
				 .profile = profile_name(v ? v->profile : PROFILE_NONE),
				 .follows = follows, .after_seq = after_seq };

	labels_csv(sr, labels, sizeof(labels));
	if (append_or_refuse(cl, id, &row, decision == DECISION_RAN) < 0)
		return -1;
	if (sha256_out)
		memcpy(sha256_out, row.sha256, 65);
	return 0;
}

/* The first exec that finds the caller's grant expired records it: a
 * `grant` row, decision `expired`, the family in labels, filed under that
 * exec (its id and snippet).  Once per grant: a new save starts again. */
static int audit_grant_expired(struct client_link *cl, const struct msg_exec *e)
{
	struct audit_row row = { .uid = cl->peer.uid, .pid = cl->peer.pid, .run_id = e->id,
				 .event = event_name(EVENT_GRANT), .code = e->code.ptr,
				 .code_len = e->code.len, .labels = FAMILY,
				 .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .decision = decision_name(DECISION_EXPIRED),
				 .approver = approver_name(APPROVER_GRANT),
				 .profile = profile_name(PROFILE_NONE) };

	if (append_or_refuse(cl, e->id, &row, false) < 0)
		return -1;
	log_info("uid=%u the %s grant has expired (found by request %" PRIu64 ")",
		 (unsigned)cl->peer.uid, FAMILY, e->id);
	/* Should this fail, the next exec records the expiry again: a second
	 * row, never none. */
	if (store_grant_expiry_recorded(store, cl->peer.uid, FAMILY) < 0)
		log_warn("uid=%u could not mark the grant's expiry recorded: %s",
			 (unsigned)cl->peer.uid, store_last_error(store));
	return 0;
}

/* The run's receipt for its exit row (AUDIT.md, `blocked`): the map
 * without the frame's header.  None when nothing was refused and nothing
 * went through the egress proxy; a receipt
 * that cannot be encoded (out of memory) is logged, and the row goes
 * without it rather than not at all. */
static void audit_receipt(const struct run_info *ri, struct frame *f, struct audit_row *row)
{
	static const struct receipt none;
	const struct receipt *b = ri->blocked ? ri->blocked : &none;

	if (!b->total && (!ri->network || !ri->network->n))
		return;
	if (enc_receipt(f, b, ri->network) < 0) {
		log_err("uid=%u run=%" PRIu64 " the receipt of %" PRIu64 " refusals is not in "
			"the audit trail: out of memory", (unsigned)ri->uid, ri->run_id,
			b->total);
		return;
	}
	row->blocked = f->data + PROTO_HEADER_LEN;
	row->blocked_len = f->len - PROTO_HEADER_LEN;
}

static void escalation_offer(struct card *c, const struct run_info *ri, int64_t exit_seq);
static void card_free(struct card *c);

/* A run the gate started has ended: its `exit` row, and its slot is free.
 * ctx is the copy of its request kept for an escalation card: offered
 * when its exit said so, freed otherwise. */
static void run_ended(const struct run_info *ri, void *ctx)
{
	struct audit_row row = { .uid = ri->uid, .pid = ri->peer_pid, .run_id = ri->id,
				 .event = event_name(EVENT_EXIT),
				 .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .approver = approver_name(ri->approver),
				 .profile = profile_name(ri->profile), .after_seq = ri->after_seq };
	struct frame receipt = { 0 };
	char labels[256] = "";
	size_t off = 0;

	memcpy(row.sha256, ri->sha256, sizeof(row.sha256));
	for (size_t i = 0; i < ri->n_labels; i++)
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, "%s%s", i ? "," : "",
					ri->labels[i]);
	row.labels = labels;
	if (ri->end == END_FINISHED) {
		row.decision = decision_name(DECISION_RAN);
		row.has_exit = true;
		row.exit_code = ri->result.exited ? ri->result.code : -1;
		row.signal = ri->result.exited ? 0 : ri->result.signal;
		row.timed_out = ri->result.timed_out;
		row.duration_ms = (int64_t)(ri->result.duration_us / 1000);
		audit_receipt(ri, &receipt, &row);
	} else {
		row.decision = decision_name(ri->cancelled ? DECISION_CANCELLED : DECISION_FAILED);
	}
	row.follows = true;
	queue_kick = true; /* its slot is free */
	if (store_audit_append(store, &row) < 0) {
		log_err("uid=%u run=%" PRIu64 " audit write of the exit failed: %s",
			(unsigned)ri->uid, ri->run_id, store_last_error(store));
		row.seq = 0;
	}
	frame_free(&receipt);
	if (ctx && ri->escalating)
		escalation_offer(ctx, ri, row.seq);
	else if (ctx)
		card_free(ctx);
}

/* The run's approver and profile say which snippet tried; labels say why
 * the connection was refused ("from-a-run" or "unseen"). */
void gate_audit_refused_connection(uid_t uid, pid_t pid, const struct run_info *ri,
				   const char *why)
{
	struct audit_row row = { .uid = uid, .pid = pid, .run_id = ri ? ri->id : 0,
				 .event = event_name(EVENT_CONNECT),
				 .decision = decision_name(DECISION_REFUSED),
				 .labels = why, .mode = sandbox_mode_name(gb->cfg.sandbox),
				 .approver = approver_name(ri ? ri->approver : APPROVER_NONE),
				 .profile = profile_name(ri ? ri->profile : PROFILE_NONE) };

	if (store_audit_append(store, &row) < 0)
		log_err("uid=%u pid=%d audit write of a refused connection failed: %s",
			(unsigned)uid, (int)pid, store_last_error(store));
}

/* ---- the decision ------------------------------------------------------------ */

static void default_cwd(uid_t peer, char *out, size_t len);

/* In a container the container is the boundary: the host-side kernel
 * profiles (approved, unattended) confine only the engine's client. */
static enum proto_profile profile_of(const struct config *c, enum proto_profile host_profile)
{
	return c->sandbox == SANDBOX_DOCKER ? PROFILE_CONTAINER : host_profile;
}

/* What the caller's saved grant says of one exec. */
enum grant_cover {
	GRANT_NONE,         /* none saved */
	GRANT_COVERS,       /* in force, and the run's directory is in its scope */
	GRANT_EXPIRED,      /* past its expiry: it covers nothing */
	GRANT_OUT_OF_SCOPE, /* in force, but the run's directory is outside its scope */
};

/* Why a card is asked of an unlabelled snippet, by what the grant said. */
static const char *no_grant_reason(enum grant_cover cover)
{
	switch (cover) {
	case GRANT_EXPIRED:
		return "arbitrary Python is never auto-safe on the host, and your execute_code "
		       "grant has expired";
	case GRANT_OUT_OF_SCOPE:
		return "arbitrary Python is never auto-safe on the host, and your execute_code "
		       "grant covers only runs inside its directory, which this one is not";
	case GRANT_NONE:
	case GRANT_COVERS:
	default:
		return "arbitrary Python is never auto-safe on the host, and no execute_code grant "
		       "is saved";
	}
}

/* DESIGN.md's table, row by row. */
static struct verdict decide(const struct client_link *cl, enum grant_cover cover, bool labelled)
{
	bool has_grant = cover == GRANT_COVERS;
	const struct config *c = &gb->cfg;

	if (c->sandbox == SANDBOX_NONE)
		return (struct verdict){ V_NOT_OFFERED, APPROVER_NONE, PROFILE_NONE, "" };
	if (!cl->channel) {
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
	return (struct verdict){ V_CARD, APPROVER_NONE, PROFILE_NONE, no_grant_reason(cover) };
}

/* dir is scope or below it, both absolute and free of `.`, `..` and
 * repeated slashes (real paths). */
static bool path_within(const char *dir, const char *scope)
{
	size_t n = strlen(scope);

	if (!strcmp(scope, "/"))
		return true;
	return !strncmp(dir, scope, n) && (dir[n] == '\0' || dir[n] == '/');
}

/* A scope is a real path: the run's directory counts by its real path too,
 * so neither `..` nor a symbolic link inside the scope leads out of it.
 * A directory the broker cannot resolve is not covered. */
static enum grant_cover grant_cover_of(const struct client_link *cl, const struct msg_exec *e,
				       const struct grant_row *g)
{
	char cwd[4096], real[PATH_MAX];

	if (!g)
		return GRANT_NONE;
	if (g->expired)
		return GRANT_EXPIRED;
	if (!g->scope[0])
		return GRANT_COVERS;
	if (e->cwd.len)
		snprintf(cwd, sizeof(cwd), "%.*s", (int)e->cwd.len, e->cwd.ptr);
	else
		default_cwd(cl->peer.uid, cwd, sizeof(cwd));
	if (!realpath(cwd, real))
		return GRANT_OUT_OF_SCOPE;
	return path_within(real, g->scope) ? GRANT_COVERS : GRANT_OUT_OF_SCOPE;
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

static void refuse(struct client_link *cl, uint64_t id, const struct scan_result *sr,
		   const struct verdict *v)
{
	char what[512], labels[256];

	if (v->reason[0]) {
		client_send_error(cl, true, id, PERR_REFUSED, "This snippet was not run: %s.",
				  v->reason);
		return;
	}
	describe(sr, what, sizeof(what));
	labels_csv(sr, labels, sizeof(labels));
	client_send_error(cl, true, id, PERR_REFUSED,
			  "This snippet was not run: nobody can be asked to approve it here%s, "
			  "and it %s (%s). Run it from a client with an approval channel, or "
			  "change it.",
			  cl->channel_withheld ? " (the operator set [mcp] elicitation = no, so "
						 "no card is shown through the MCP client)" : "",
			  what, labels);
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

static bool run_escalates(struct client_link *cl, const struct run_info *ri, void *ctx);
static struct card *escalation_copy(struct client_link *cl, const struct run_request *rq,
				    const struct scan_result *sr);

/* Starts the run, or tells the client why not; except at a limit
 * (-EBUSY, nothing sent, the sentence in busy), where the caller queues it. */
static int try_start(struct client_link *cl, struct run_request *rq, const struct scan_result *sr,
		     char *busy, size_t busylen)
{
	static const struct run_ops gate_run_ops = { .ended = run_ended,
						     .escalates = run_escalates };
	char err[300] = "";
	int rc;

	rq->ops = &gate_run_ops;
	rq->peer_uid = cl->peer.uid;
	rq->peer_pid = cl->peer.pid;
	rq->ctx = escalation_copy(cl, rq, sr);
	rc = run_start(gb, cl, rq, err, sizeof(err));
	if (rc < 0 && rq->ctx)
		card_free(rq->ctx);
	switch (rc) {
	case 0:
		break;
	case -EBUSY:
		snprintf(busy, busylen, "%s", err);
		break;
	case -EPERM:
		client_send_error(cl, true, rq->id, PERR_REFUSED, "%s", err);
		break;
	case -EINVAL:
		client_send_error(cl, true, rq->id, PERR_BAD_CWD, "%s", err);
		break;
	case -ENOEXEC:
		run_send_setup_error(cl, rq->id, step_name(STEP_ENGINE), ENOEXEC, err, true);
		break;
	default:
		client_send_error(cl, true, rq->id, PERR_INTERNAL, "%s", err);
		break;
	}
	return rc;
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

static struct card *card_new(struct client_link *cl, const struct msg_exec *e,
			     const struct scan_result *sr);
static int audit_card_end(struct card *c, enum proto_decision decision,
			  const struct verdict *v);
static void enqueue(struct card *c, const struct verdict *v, const char *why);
static unsigned waiting_of_uid(const struct card_list *l, uid_t uid, uint64_t *bytes);

/* Starts the run unless it must wait: at a limit, or behind older execs of
 * the same user already waiting (a slot that frees is theirs first).
 * -EBUSY with the reason in why: the caller queues it. */
static int start_or_wait(struct client_link *cl, struct run_request *rq,
			 const struct scan_result *sr, char *why, size_t len)
{
	if (waiting_of_uid(&waiting, cl->peer.uid, NULL) > 0) {
		snprintf(why, len, "older snippets of yours are waiting for a slot");
		return -EBUSY;
	}
	return try_start(cl, rq, sr, why, len);
}

static void run_now(struct client_link *cl, const struct msg_exec *e, const struct scan_result *sr,
		    const struct verdict *v, const char *sha256)
{
	struct run_request rq = { .id = e->id, .code = e->code.ptr, .code_len = e->code.len,
				  .timeout_ms = e->timeout_ms ? e->timeout_ms : gb->cfg.timeout_ms,
				  .env = e->env, .n_env = e->n_env };
	char cwd[4096];

	if (e->cwd.len)
		snprintf(cwd, sizeof(cwd), "%.*s", (int)e->cwd.len, e->cwd.ptr);
	else
		default_cwd(cl->peer.uid, cwd, sizeof(cwd));
	char busy[300];
	struct card *c;

	rq.cwd = cwd;
	rq.arrived_us = cl->frame_us;
	fill_request(&rq, sr, v, sha256);
	if (v->approver == APPROVER_GRANT && store_grant_touch(store, cl->peer.uid, FAMILY) < 0)
		log_warn("uid=%u could not count a grant use: %s", (unsigned)cl->peer.uid,
			 store_last_error(store));
	if (start_or_wait(cl, &rq, sr, busy, sizeof(busy)) != -EBUSY)
		return;
	c = card_new(cl, e, sr);
	if (!c) {
		client_send_error(cl, true, e->id, PERR_INTERNAL, "out of memory");
		return;
	}
	memcpy(c->sha256, sha256, 65);
	c->arrived_us = cl->frame_us;
	enqueue(c, v, busy);
}

static unsigned cards_of(const struct client_link *cl)
{
	unsigned n = 0;
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		n += c->cl == cl;
	return n;
}

/* How many snippets of this user wait on a list, and their total size. */
static unsigned waiting_of_uid(const struct card_list *l, uid_t uid, uint64_t *bytes)
{
	unsigned n = 0;
	struct card *c;

	TAILQ_FOREACH(c, l, link)
		if (c->cl->peer.uid == uid) {
			n++;
			if (bytes)
				*bytes += c->code_len;
		}
	return n;
}

/* [quota] card_bytes: snippets waiting on cards and in the queue are held
 * in the broker's memory, so one user's total is bounded. */
static bool over_card_bytes(struct client_link *cl, uint64_t id, size_t more)
{
	uint64_t bytes = 0;

	waiting_of_uid(&cards, cl->peer.uid, &bytes);
	waiting_of_uid(&waiting, cl->peer.uid, &bytes);
	if (bytes + more <= gb->cfg.card_bytes_per_uid)
		return false;
	client_send_error(cl, true, id, PERR_BUSY,
			  "your snippets waiting on cards and in the queue already hold %" PRIu64
			  " bytes; with this one that is over the %" PRIu64 " bytes one user may "
			  "have waiting ([quota] card_bytes); answer or cancel some first",
			  bytes, gb->cfg.card_bytes_per_uid);
	return true;
}

/* Copies the request so it outlives its frame. */
static struct card *card_new(struct client_link *cl, const struct msg_exec *e,
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
		default_cwd(cl->peer.uid, home, sizeof(home));
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
	c->cl = cl;
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

/* The limits the run will get, named with their unit, as the worker (or
 * the container engine, in mode docker) applies them. */
static void card_limits(struct msg_card *m)
{
	const struct config *c = &gb->cfg;
	struct card_limit *l = m->limits;

	if (c->sandbox == SANDBOX_DOCKER) {
		*l++ = (struct card_limit){ pstr_c("memory_bytes"), c->container_memory };
		*l++ = (struct card_limit){ pstr_c("processes"), c->container_pids };
		*l++ = (struct card_limit){ pstr_c("open_files"), c->container_nofile };
	} else {
		*l++ = (struct card_limit){ pstr_c("cpu_s"), c->cpu_s };
		*l++ = (struct card_limit){ pstr_c("memory_bytes"), c->memory };
		*l++ = (struct card_limit){ pstr_c("processes"), c->processes };
		*l++ = (struct card_limit){ pstr_c("file_size_bytes"), c->file_size };
		*l++ = (struct card_limit){ pstr_c("open_files"), c->open_files };
	}
	*l++ = (struct card_limit){ pstr_c("output_bytes"), c->output_cap };
	m->n_limits = (size_t)(l - m->limits);
}

/* The card shows everything the client chose that changes what runs: the
 * working directory, the timeout, and each env entry the run keeps (by the
 * same rule env_build() applies, so the card cannot show less than runs).
 * Returns false, having sent nothing, when it could not be built or would
 * be over the frame limit (an exec just under the limit, with many env
 * entries), which a client could not read: the card is then not asked.
 * Once sent, the session may be gone (a failed send closes it). */
static bool send_card(struct client_link *cl, const struct card *c, const char *reason)
{
	struct msg_card m = { .id = c->id, .card = pstr_c(c->card_id),
			      .snippet = { c->code, c->code_len }, .n_labels = c->scan.n,
			      .expires_ms = gb->cfg.card_timeout_ms, .reason = pstr_c(reason),
			      .cwd = pstr_c(c->cwd), .timeout_ms = c->timeout_ms,
			      .grant_ttl_ms = c->escalate ? 0 : gb->cfg.grant_ttl_ms,
			      .escalate = c->escalate, .after_seq = (uint64_t)c->after_seq };
	struct frame f;

	if (c->blocked)
		m.blocked = *c->blocked;

	for (size_t i = 0; i < c->scan.n; i++) {
		const struct scan_hit *h = &c->scan.hits[i];

		m.labels[i] = (struct card_label){ scan_label_name(h->label), h->start, h->end,
						   h->line };
	}
	for (size_t i = 0; i < c->n_env; i++)
		if (env_name_allowed(c->env[i].name.ptr, c->env[i].name.len))
			m.env[m.n_env++] = c->env[i];
	card_limits(&m);
	if (enc_card(&f, &m) < 0)
		return false;
	if (f.len - 4 > gb->cfg.frame_max) {
		frame_free(&f);
		return false;
	}
	client_send(cl, &f);
	return true;
}

/* Whether one more card may wait; if not, the client is told (busy)
 * before anything is recorded: no card was shown, nothing ran. */
static bool card_room(struct client_link *cl, const struct msg_exec *e)
{
	unsigned mine = waiting_of_uid(&cards, cl->peer.uid, NULL);

	if (cards_of(cl) >= gb->cfg.max_cards_per_conn) {
		client_send_error(cl, true, e->id, PERR_BUSY,
				  "%u cards are already waiting on this connection; answer them "
				  "first", cards_of(cl));
		return false;
	}
	if (mine >= gb->cfg.cards_per_uid) {
		client_send_error(cl, true, e->id, PERR_BUSY,
				  "%u of your cards are already waiting, the most one user may have "
				  "([quota] cards); answer them first", mine);
		return false;
	}
	return !over_card_bytes(cl, e->id, e->code.len);
}

static void ask(struct client_link *cl, const struct msg_exec *e, const struct scan_result *sr,
		const struct verdict *v, const char *sha256)
{
	struct card *c;

	c = card_new(cl, e, sr);
	if (!c) {
		client_send_error(cl, true, e->id, PERR_INTERNAL, "out of memory");
		return;
	}
	memcpy(c->sha256, sha256, 65);
	/* In the list before it is sent: a send that fails closes the session,
	 * which frees its cards, this one with them. */
	TAILQ_INSERT_TAIL(&cards, c, link);
	log_info("uid=%u card %s for request %" PRIu64 ": %s", (unsigned)cl->peer.uid, c->card_id,
		 e->id, v->reason);
	if (send_card(cl, c, v->reason))
		return;
	TAILQ_REMOVE(&cards, c, link);
	if (audit_decision(cl, c->id, c->code, c->code_len, &c->scan, DECISION_FAILED, NULL, true,
			   0, NULL) == 0)
		client_send_error(cl, true, e->id, PERR_BAD_FIELD,
				  "the approval card for this snippet, with its %zu env entries, "
				  "would be over the %" PRIu64 "-byte frame limit; send fewer or "
				  "shorter env entries", e->n_env, gb->cfg.frame_max);
	card_free(c);
}

/* ---- the queue ([quota] queue) ------------------------------------------------ */

/* Takes c: at a limit the exec waits for a slot, in order, and the client
 * hears `queued`; busy only when the user's queue is full. */
static void enqueue(struct card *c, const struct verdict *v, const char *why)
{
	struct client_link *cl = c->cl;
	unsigned ahead = waiting_of_uid(&waiting, cl->peer.uid, NULL);
	struct msg_queued q = { .id = c->id, .position = ahead + 1,
				.timeout_ms = gb->cfg.queue_timeout_ms };
	struct frame f;

	if (ahead >= gb->cfg.queue) {
		client_send_error(cl, true, c->id, PERR_BUSY,
				  "%s, and %u more of yours already wait ([quota] queue); try again "
				  "when one has ended", why, ahead);
		card_free(c);
		return;
	}
	if (over_card_bytes(cl, c->id, c->code_len)) {
		card_free(c);
		return;
	}
	c->profile = v->profile;
	c->approver = v->approver;
	c->expires_at = now_ms() + gb->cfg.queue_timeout_ms;
	TAILQ_INSERT_TAIL(&waiting, c, link);
	queue_kick = true;
	log_info("uid=%u request %" PRIu64 " queued at %" PRIu64 ": %s", (unsigned)cl->peer.uid,
		 c->id, q.position, why);
	if (enc_queued(&f, &q) == 0)
		client_send(cl, &f);
}

/* One queued exec, started; -EBUSY (nothing said, still queued) when its
 * user or the broker is still at a limit. */
static int start_queued(struct card *c)
{
	const struct verdict v = { V_RUN, c->approver, c->profile, "" };
	struct run_request rq = { .id = c->id, .code = c->code, .code_len = c->code_len,
				  .cwd = c->cwd, .timeout_ms = c->timeout_ms, .env = c->env,
				  .n_env = c->n_env, .arrived_us = c->arrived_us,
				  .after_seq = c->after_seq };
	struct card *prev = TAILQ_PREV(c, card_list, link);
	char busy[300];
	int rc;

	fill_request(&rq, &c->scan, &v, c->sha256);
	/* Off the queue while it is tried: an error sent to a client that has
	 * gone closes its session, which empties its part of the queue.  At a
	 * limit nothing is sent, so its neighbours are still there. */
	TAILQ_REMOVE(&waiting, c, link);
	rc = try_start(c->cl, &rq, &c->scan, busy, sizeof(busy));
	if (rc != -EBUSY) {
		card_free(c);
		return 0;
	}
	if (prev)
		TAILQ_INSERT_AFTER(&waiting, prev, c, link);
	else
		TAILQ_INSERT_HEAD(&waiting, c, link);
	return rc;
}

static bool uid_in(const uid_t *set, size_t n, uid_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == uid)
			return true;
	return false;
}

/* Oldest first; a user whose first waiting exec finds no room keeps the
 * rest waiting too, so each user's execs start in the order they came. */
static void queue_run(struct broker *b)
{
	uid_t full[64];
	size_t n_full = 0;
	struct card *c;
	bool again = true;

	if (TAILQ_EMPTY(&waiting) || (!queue_kick && b->nruns == queue_tried_nruns))
		return;
	queue_kick = false;
	/* A start may have closed sessions and freed what came after it:
	 * after each, look again from the start. */
	while (again && b->nruns < b->cfg.max_runs && n_full < sizeof(full) / sizeof(full[0])) {
		again = false;
		TAILQ_FOREACH(c, &waiting, link) {
			uid_t uid = c->cl->peer.uid;

			if (uid_in(full, n_full, uid))
				continue;
			if (b->nruns >= b->cfg.max_runs)
				break;
			if (start_queued(c) == 0) {
				again = true;
				break;
			}
			full[n_full++] = uid;
			if (n_full == sizeof(full) / sizeof(full[0]))
				break;
		}
	}
	queue_tried_nruns = b->nruns;
}

/* Takes c off the queue; records that it never ran and says why. */
static void unqueue(struct card *c, enum proto_decision decision, const char *code,
		    const char *why)
{
	TAILQ_REMOVE(&waiting, c, link);
	if (audit_card_end(c, decision, NULL) == 0 && code)
		client_send_error(c->cl, true, c->id, code, "%s", why);
	card_free(c);
}

static void queue_expire(uint64_t now)
{
	struct card *c;
	char why[200];

	do {
		TAILQ_FOREACH(c, &waiting, link)
			if (now >= c->expires_at)
				break;
		if (!c)
			return;
		log_info("uid=%u request %" PRIu64 " left the queue unrun", (unsigned)c->cl->peer.uid,
			 c->id);
		snprintf(why, sizeof(why), "the snippet waited %.1f s in the queue without a free "
			 "slot ([quota] queue_timeout); it did not run",
			 (double)gb->cfg.queue_timeout_ms / 1000);
		unqueue(c, DECISION_FAILED, PERR_BUSY, why);
	} while (c);
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

void gate_exec(struct client_link *cl, const struct msg_exec *e)
{
	struct scan_result sr = { 0 };
	struct verdict v;
	char sha256[65];
	struct grant_row g;
	enum grant_cover cover;
	bool has_grant = false;

	if (gb->cfg.sandbox != SANDBOX_NONE &&
	    scan_snippet_for(e->code.ptr, e->code.len, gb->cfg.snippet_max,
			     gb->cfg.sandbox == SANDBOX_DOCKER ? SCAN_IN_CONTAINER : SCAN_ON_HOST,
			     &sr) < 0) {
		client_send_error(cl, true, e->id, PERR_SNIPPET_TOO_LARGE,
				  "the snippet is over the limit of %" PRIu64 " bytes",
				  gb->cfg.snippet_max);
		return;
	}
	if (store_grant_get(store, cl->peer.uid, FAMILY, &has_grant, &g) < 0) {
		client_send_error(cl, true, e->id, PERR_AUDIT,
				  "the snippet did not run: the grant store cannot be read (%s)",
				  store_last_error(store));
		return;
	}
	cover = grant_cover_of(cl, e, has_grant ? &g : NULL);
	if (cover == GRANT_EXPIRED && !g.expiry_recorded && gb->cfg.sandbox != SANDBOX_NONE &&
	    audit_grant_expired(cl, e) < 0)
		return;
	v = decide(cl, cover, sr.n > 0);
	if (v.what == V_CARD && !card_room(cl, e))
		return;
	if (audit_decision(cl, e->id, e->code.ptr, e->code.len, &sr, decision_of(&v), &v,
			   false, 0, sha256) < 0)
		return;
	switch (v.what) {
	case V_NOT_OFFERED:
		client_send_error(cl, true, e->id, PERR_NOT_OFFERED,
				  "execute_code is not offered: the broker runs with sandbox = none");
		break;
	case V_REFUSE:
		refuse(cl, e->id, &sr, &v);
		break;
	case V_CARD:
		ask(cl, e, &sr, &v, sha256);
		break;
	case V_RUN:
	default:
		run_now(cl, e, &sr, &v, sha256);
		break;
	}
}

/* ---- answers ------------------------------------------------------------------ */

static struct card *card_find(const struct client_link *cl, struct pstr id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->cl == cl && pstr_eq(id, c->card_id))
			return c;
	return NULL;
}

/* Records how the card ended; a person's deny and an expiry are different
 * rows, never confused. */
static int audit_card_end(struct card *c, enum proto_decision decision,
			  const struct verdict *v)
{
	return audit_decision(c->cl, c->id, c->code, c->code_len, &c->scan, decision, v, true,
			      c->after_seq, NULL);
}

/* Takes c: runs it, queues it, or frees it. */
static void run_card(struct card *c)
{
	const struct verdict approved = { V_RUN, APPROVER_USER,
					  profile_of(&gb->cfg, PROFILE_APPROVED), "" };
	struct run_request rq = { .id = c->id, .code = c->code, .code_len = c->code_len,
				  .cwd = c->cwd, .timeout_ms = c->timeout_ms, .env = c->env,
				  .n_env = c->n_env, .after_seq = c->after_seq };
	char busy[300];

	if (audit_card_end(c, DECISION_RAN, &approved) < 0) {
		card_free(c);
		return;
	}
	fill_request(&rq, &c->scan, &approved, c->sha256);
	rq.arrived_us = c->cl->frame_us; /* the answer's frame: the person's time is not ours */
	if (start_or_wait(c->cl, &rq, &c->scan, busy, sizeof(busy)) != -EBUSY) {
		card_free(c);
		return;
	}
	c->arrived_us = rq.arrived_us;
	enqueue(c, &approved, busy);
}

/* What an `always` answer saves: its `for_ms`, never past [gate]
 * grant_ttl, and its `scope` as a real path (a directory the broker can
 * resolve).  -1, having said why, when the scope is not one: the card
 * stays open for another answer. */
struct terms {
	struct grant_terms t;
	bool clamped;          /* for_ms was cut to grant_ttl */
	char scope[PATH_MAX];
};

static int terms_of(struct client_link *cl, const struct msg_answer *a, struct terms *out)
{
	uint64_t ttl = gb->cfg.grant_ttl_ms;
	char given[PATH_MAX];
	struct stat st;

	*out = (struct terms){ .t = { .life_ms = a->for_ms ? a->for_ms : ttl } };
	if (ttl && out->t.life_ms > ttl) {
		out->t.life_ms = ttl;
		out->clamped = true;
	}
	if (!a->scope.len)
		return 0;
	snprintf(given, sizeof(given), "%.*s", (int)a->scope.len, a->scope.ptr);
	errno = 0;
	if (a->scope.len >= sizeof(given) || !realpath(given, out->scope) ||
	    stat(out->scope, &st) < 0 || !S_ISDIR(st.st_mode)) {
		client_send_error(cl, a->has_id, a->id, PERR_BAD_FIELD,
				  "answer: field 'scope' must be a directory the broker can resolve "
				  "(%s); the card is still open", a->scope.len >= sizeof(given)
				  ? "too long" : strerror(errno ? errno : ENOTDIR));
		return -1;
	}
	out->t.scope = out->scope;
	return 0;
}

/* "; the grant lasts 1h (cut to [gate] grant_ttl from the 8h asked) and covers /x" */
static void say_terms(const struct msg_answer *a, const struct terms *t, char *out, size_t len)
{
	char life[32] = "", asked[32] = "";
	size_t off;

	if (t->t.life_ms)
		duration_text(t->t.life_ms, life, sizeof(life));
	if (t->clamped)
		duration_text(a->for_ms, asked, sizeof(asked));
	off = (size_t)snprintf(out, len, "; the %s grant lasts %s%s%s%s", FAMILY,
			       life[0] ? life : "until revoked",
			       t->clamped ? " (cut to [gate] grant_ttl from the " : "",
			       asked, t->clamped ? " asked)" : "");
	/* A message is at most 4096 bytes on the wire: a very long scope is
	 * named where it is shown whole. */
	if (off < len && t->t.scope && strlen(t->t.scope) > 1024)
		snprintf(out + off, len - off, " and covers runs in its directory (kotoba "
			 "approvals ls shows it)");
	else if (off < len)
		snprintf(out + off, len - off, " and covers runs in %s",
			 t->t.scope ? t->t.scope : "any directory");
}

/* The log says what an `always` saved: the audit trail records the run it
 * approved, not the grant's terms. */
static void log_answer(const struct client_link *cl, const struct msg_answer *a,
		       const struct card *c, const struct terms *t)
{
	char said[1300] = "";

	if (!strcmp(a->choice, "always"))
		say_terms(a, t, said, sizeof(said));
	log_info("uid=%u card %s answered %s%s", (unsigned)cl->peer.uid, c->card_id, a->choice,
		 said);
}

static void answer_taken(struct client_link *cl, const struct msg_answer *a, const struct card *c,
			 const struct terms *t)
{
	struct msg_ok ok = { .id = a->id };
	char text[1400], said[1300] = "";
	struct frame f;

	if (!strcmp(a->choice, "always"))
		say_terms(a, t, said, sizeof(said));
	snprintf(text, sizeof(text), "card %s answered %s%s", c->card_id, a->choice, said);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) == 0)
		client_send(cl, &f);
}

/* The card leaves the list before anything runs: a second answer finds
 * nothing, so one approval runs the snippet once. */
int gate_on_answer(struct client_link *cl, const struct msg *m)
{
	const struct msg_answer *a = &m->u.answer;
	struct card *c = card_find(cl, a->card);
	struct terms t;

	if (!c) {
		client_send_error(cl, a->has_id, a->id, PERR_NO_SUCH_CARD,
				  "answer: no open card '%.*s' on this connection", (int)a->card.len,
				  a->card.ptr);
		return 0;
	}
	if (!card_choice_fits(a->choice, c->escalate)) {
		client_send_error(cl, a->has_id, a->id, PERR_BAD_FIELD,
				  "answer: field 'choice' must be %s on %s card; the card is still "
				  "open", c->escalate ? "rerun or leave" : "once, always or deny",
				  c->escalate ? "an escalation" : "a run");
		return 0;
	}
	if (terms_of(cl, a, &t) < 0)
		return 0;
	TAILQ_REMOVE(&cards, c, link);
	log_answer(cl, a, c, &t);
	/* The answer's own reply comes first: what follows (started, an
	 * error) belongs to the exec. */
	if (a->has_id) {
		answer_taken(cl, a, c, &t);
		if (client_closed(cl)) { /* the client went away meanwhile */
			card_free(c);
			return 0;
		}
	}
	if (!strcmp(a->choice, "deny") || !strcmp(a->choice, "leave")) {
		if (audit_card_end(c, DECISION_DENIED, NULL) == 0)
			client_send_error(cl, true, c->id, PERR_DENIED, "%s",
					  c->escalate ? "You left the first run as it was; the "
							"snippet did not run again."
						      : "You denied this snippet; it did not run.");
	} else if (!strcmp(a->choice, "always") &&
		   store_grant_save(store, cl->peer.uid, FAMILY, c->card_id, &t.t) < 0) {
		client_send_error(cl, true, c->id, PERR_AUDIT,
				  "the snippet did not run: the grant could not be saved (%s)",
				  store_last_error(store));
	} else {
		run_card(c);
		return 0;
	}
	card_free(c);
	return 0;
}

/* ---- escalation (PROTOCOL.md, "The escalation card") ---------------------- */

/* Whether a run may end in an escalation card, as far as its start can
 * tell: a run nobody read, on a connection that can show one.  Only then
 * does the gate keep a copy of its request until it ends. */
static bool may_escalate(const struct client_link *cl, const struct run_request *rq)
{
	return gb->cfg.escalate == ESCALATE_ASK && gb->cfg.sandbox == SANDBOX_LOCAL &&
	       cl->escalate && !rq->engine && rq->approver == APPROVER_GRANT &&
	       rq->profile == PROFILE_UNATTENDED;
}

static struct card *escalation_copy(struct client_link *cl, const struct run_request *rq,
				    const struct scan_result *sr)
{
	struct msg_exec e = { .id = rq->id, .code = { rq->code, rq->code_len },
			      .cwd = pstr_c(rq->cwd), .timeout_ms = rq->timeout_ms,
			      .n_env = rq->n_env };
	struct card *c;

	if (!may_escalate(cl, rq))
		return NULL;
	if (rq->n_env)
		memcpy(e.env, rq->env, rq->n_env * sizeof(e.env[0]));
	c = card_new(cl, &e, sr);
	if (!c) {
		log_warn("uid=%u request %" PRIu64 ": no escalation card can follow this run: out "
			 "of memory", (unsigned)cl->peer.uid, rq->id);
		return NULL;
	}
	memcpy(c->sha256, rq->sha256, 65);
	return c;
}

/* The first refusal of the run that a witness outside the snippet saw
 * (the worker's supervisor: the exec gate, the kernel's word), and how
 * many such refusals it lists; NULL when there is none.  What only the
 * snippet's own interpreter reported is the snippet's word, which any
 * snippet can make up: it never brings a card that asks for the person's
 * permissions. */
static const struct blocked_op *witnessed(const struct receipt *b, uint64_t *count)
{
	const struct blocked_op *first = NULL;

	*count = 0;
	for (size_t i = 0; b && i < b->n; i++) {
		if (b->op[i].seen_by == SEEN_BY_PYTHON)
			continue;
		if (!first)
			first = &b->op[i];
		*count += b->op[i].count;
	}
	return first;
}

/* Asked as a run's exit is sent: an escalation card follows when the run
 * failed (not exit status 0), the sandbox stopped something in it that a
 * witness outside the snippet saw, and a person can still answer one,
 * within the same bounds as any card. */
static bool run_escalates(struct client_link *cl, const struct run_info *ri, void *ctx)
{
	const struct card *c = ctx;
	const char *why = NULL;
	uint64_t bytes = 0, seen;

	/* A cancel that came after the snippet ended still ends the exec
	 * with this exit: nobody is asked again about what they stopped. */
	if (!c || ri->end != END_FINISHED || ri->cancelled || !ri->blocked ||
	    !ri->blocked->total)
		return false;
	/* A run that succeeded handled what was refused (a library's probe,
	 * a fallback): the receipt says it, and nobody is asked again. */
	if (ri->result.exited && ri->result.code == 0) {
		log_info("uid=%u request %" PRIu64 ": no escalation card: the run succeeded, so "
			 "its program handled the %" PRIu64 " refusals of its receipt",
			 (unsigned)ri->uid, ri->id, ri->blocked->total);
		return false;
	}
	if (!witnessed(ri->blocked, &seen)) {
		log_info("uid=%u request %" PRIu64 ": no escalation card: the %" PRIu64 " refusals "
			 "of its receipt are the snippet's own report, which no witness outside it "
			 "saw", (unsigned)ri->uid, ri->id, ri->blocked->total);
		return false;
	}
	waiting_of_uid(&waiting, ri->uid, &bytes);
	if (!cl || client_closed(cl) || cl->shut)
		why = "nobody can answer a card on its connection any more";
	else if (cards_of(cl) >= gb->cfg.max_cards_per_conn)
		why = "its connection has as many cards waiting as it may";
	else if (waiting_of_uid(&cards, ri->uid, &bytes) >= gb->cfg.cards_per_uid)
		why = "the user has as many cards waiting as one may ([quota] cards)";
	else if (bytes + c->code_len > gb->cfg.card_bytes_per_uid)
		why = "the user's waiting snippets would be over [quota] card_bytes";
	if (why)
		log_info("uid=%u request %" PRIu64 ": the sandbox stopped %" PRIu64 " operations; "
			 "no escalation card: %s", (unsigned)ri->uid, ri->id, ri->blocked->total,
			 why);
	return !why;
}

/* The exit said a card follows: recorded (decision `card`, linked to the
 * exit row) and sent; the exec goes on until it is answered.  When the
 * exit row or this one could not be written, the exec ends here. */
static void escalation_offer(struct card *c, const struct run_info *ri, int64_t exit_seq)
{
	struct client_link *cl = ri->cl;
	uint64_t n;
	const struct blocked_op *op = witnessed(ri->blocked, &n);
	char reason[700];

	if (!cl || client_closed(cl)) {
		card_free(c);
		return;
	}
	c->blocked = malloc(sizeof(*c->blocked));
	if (!exit_seq || !c->blocked) {
		client_send_error(cl, true, c->id, exit_seq ? PERR_INTERNAL : PERR_AUDIT,
				  "the snippet ran once; no escalation card can follow: %s",
				  exit_seq ? "out of memory"
					   : "its exit could not be written to the audit trail");
		card_free(c);
		return;
	}
	*c->blocked = *ri->blocked;
	c->escalate = true;
	c->after_seq = exit_seq;
	c->expires_at = now_ms() + gb->cfg.card_timeout_ms;
	if (audit_card_end(c, DECISION_CARD, NULL) < 0) {
		card_free(c);
		return;
	}
	/* The target stays out of this sentence: the snippet chose it (an
	 * exec's path need not exist), and prose would read it as the card's
	 * own words.  The receipt's rows below show it, escaped. */
	snprintf(reason, sizeof(reason), "This snippet already ran once under your %s grant, and "
		 "the sandbox stopped %" PRIu64 " operation%s in it, seen by the %s (the first: "
		 "%s, refused by the %s; the names below are the snippet's own); what that run "
		 "did stays done. Run it again with your permissions (the approved profile)?",
		 FAMILY, n, n == 1 ? "" : "s", witness_name(op->seen_by), block_kind_name(op->kind),
		 blocker_name(op->by));
	TAILQ_INSERT_TAIL(&cards, c, link);
	log_info("uid=%u escalation card %s for request %" PRIu64 " after row %" PRId64,
		 (unsigned)cl->peer.uid, c->card_id, c->id, exit_seq);
	if (send_card(cl, c, reason))
		return;
	TAILQ_REMOVE(&cards, c, link);
	if (audit_card_end(c, DECISION_FAILED, NULL) == 0)
		client_send_error(cl, true, c->id, PERR_BAD_FIELD,
				  "the escalation card for this snippet, with its %zu env entries, "
				  "would be over the %" PRIu64 "-byte frame limit; it did not run "
				  "again", c->n_env, gb->cfg.frame_max);
	card_free(c);
}

static void expire(struct card *c)
{
	TAILQ_REMOVE(&cards, c, link);
	log_info("uid=%u card %s expired", (unsigned)c->cl->peer.uid, c->card_id);
	if (audit_card_end(c, DECISION_EXPIRED, NULL) == 0)
		client_send_error(c->cl, true, c->id, PERR_EXPIRED,
				  "Nobody answered the %s card within %" PRIu64 " s; the snippet "
				  "did not run%s.", c->escalate ? "escalation" : "approval",
				  gb->cfg.card_timeout_ms / 1000, c->escalate ? " again" : "");
	card_free(c);
}

void gate_tick(struct broker *b, uint64_t now)
{
	struct card *c;

	if (sync_due_ms && now >= sync_due_ms)
		sync_rows(now);
	queue_expire(now);
	queue_run(b);
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
	/* A commit at FULL since may have synced the rows already. */
	uint64_t next = sync_due_ms && store_unsynced(store) ? sync_due_ms : UINT64_MAX;
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->expires_at < next)
			next = c->expires_at;
	TAILQ_FOREACH(c, &waiting, link)
		if (c->expires_at < next)
			next = c->expires_at;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

bool gate_card_for_id(struct client_link *cl, uint64_t id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link)
		if (c->cl == cl && c->id == id)
			return true;
	TAILQ_FOREACH(c, &waiting, link)
		if (c->cl == cl && c->id == id)
			return true;
	return false;
}

bool gate_has_queued(const struct client_link *cl)
{
	struct card *c;

	TAILQ_FOREACH(c, &waiting, link)
		if (c->cl == cl)
			return true;
	return false;
}

bool gate_cancel_card(struct client_link *cl, uint64_t id)
{
	struct card *c;

	TAILQ_FOREACH(c, &cards, link) {
		if (c->cl != cl || c->id != id)
			continue;
		TAILQ_REMOVE(&cards, c, link);
		if (audit_card_end(c, DECISION_CANCELLED, NULL) == 0)
			client_send_error(cl, true, id, PERR_CANCELLED,
					  "the card was withdrawn; the snippet did not run%s",
					  c->escalate ? " again" : "");
		card_free(c);
		return true;
	}
	TAILQ_FOREACH(c, &waiting, link)
		if (c->cl == cl && c->id == id) {
			unqueue(c, DECISION_CANCELLED, PERR_CANCELLED,
				"the queued snippet was withdrawn; it did not run");
			return true;
		}
	return false;
}

void gate_withdraw_cards(struct client_link *cl)
{
	struct card *c;

	/* Each withdrawal tells the client, which may close the session and
	 * free its other cards: look again from the start every time. */
	do {
		TAILQ_FOREACH(c, &cards, link)
			if (c->cl == cl)
				break;
		if (c)
			gate_cancel_card(cl, c->id);
	} while (c);
}

/* A client that goes away leaves its cards unanswered: they are recorded
 * as expired (nobody answered), not as a denial. */
void gate_session_closed(struct client_link *cl)
{
	struct card *c, *tmp;

	TAILQ_FOREACH_SAFE(c, &cards, link, tmp) {
		if (c->cl != cl)
			continue;
		TAILQ_REMOVE(&cards, c, link);
		audit_card_end(c, DECISION_EXPIRED, NULL);
		card_free(c);
	}
	TAILQ_FOREACH_SAFE(c, &waiting, link, tmp)
		if (c->cl == cl)
			unqueue(c, DECISION_CANCELLED, NULL, NULL);
}

/* ---- grants and audit, each caller's own ---------------------------------------- */

int gate_on_grants(struct client_link *cl, const struct msg *m)
{
	struct msg_grant_list gl = { .id = m->u.grants.id };
	static struct grant_row rows[16]; /* 64 KiB of scopes: not on the stack */
	struct frame f;
	size_t n = 0;

	if (store_grant_list(store, cl->peer.uid, rows, 16, &n) < 0) {
		client_send_error(cl, true, gl.id, PERR_AUDIT, "cannot read grants: %s",
				  store_last_error(store));
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		gl.rows[i] = (struct grant_info){ pstr_c(rows[i].family), rows[i].saved_at_ms,
						  pstr_c(rows[i].card_id), rows[i].use_count,
						  rows[i].last_used_ms, rows[i].expires_ms,
						  rows[i].expired, pstr_c(rows[i].scope) };
	gl.n = n;
	if (enc_grant_list(&f, &gl) < 0)
		return -ENOMEM;
	return client_send(cl, &f);
}

int gate_on_revoke(struct client_link *cl, const struct msg *m)
{
	const struct msg_revoke *r = &m->u.revoke;
	char family[32], text[128];
	struct msg_ok ok = { .id = r->id };
	struct frame f;
	bool existed = false;

	/* A family is a name: nothing a client sends here reaches the broker's
	 * log or the answer's sentence as a terminal control. */
	for (size_t i = 0; i < r->family.len; i++) {
		char ch = r->family.ptr[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) {
			client_send_error(cl, true, r->id, PERR_BAD_FIELD,
					  "revoke: a family is a name such as execute_code");
			return 0;
		}
	}
	snprintf(family, sizeof(family), "%.*s", (int)r->family.len, r->family.ptr);
	if (r->family.len >= sizeof(family) ||
	    store_grant_revoke(store, cl->peer.uid, family, &existed) < 0) {
		client_send_error(cl, true, r->id, PERR_BAD_FIELD, "revoke: %s",
				  r->family.len >= sizeof(family) ? "family name too long"
								  : store_last_error(store));
		return 0;
	}
	log_info("uid=%u revoked %s (%s)", (unsigned)cl->peer.uid, family,
		 existed ? "was saved" : "none saved");
	snprintf(text, sizeof(text), existed ? "revoked %s" : "there was no %s grant to revoke",
		 family);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) < 0)
		return -ENOMEM;
	return client_send(cl, &f);
}

struct tail_ctx {
	struct msg_audit_rows *out;
	char (*sha)[65];
	char (*labels)[256];
	bool list; /* show: the receipt's list too */
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

/* An exit row's receipt and traffic: counts for every row, lists for the
 * one row `show` asked for.  A receipt the broker cannot read back (a
 * database someone edited: verify says so) counts as none. */
static void take_receipt(const struct audit_row *row, struct audit_info *a, struct tail_ctx *t)
{
	static struct receipt b;
	static struct network net;

	if (!row->blocked_len || !row->has_exit ||
	    dec_receipt_map(row->blocked, row->blocked_len, &b, &net) < 0)
		return;
	a->blocked_total = b.total;
	if (t->list && b.total && !t->out->blocked.total) {
		t->out->blocked = b;
		a->has_blocked = true;
	}
	a->net_hosts = net.n;
	for (size_t i = 0; i < net.n; i++) {
		a->net_bytes_out += net.use[i].bytes_out;
		a->net_bytes_in += net.use[i].bytes_in;
	}
	if (t->list && net.n && !t->out->network.n) {
		t->out->network = net;
		a->has_network = true;
	}
}

static int take_row(const struct audit_row *row, void *arg)
{
	static const char *const modes[] = { "local", "docker", "none", NULL };
	struct tail_ctx *t = arg;
	size_t i = t->out->n++;
	struct audit_info *a = &t->out->rows[i];

	snprintf(t->sha[i], 65, "%s", row->sha256);
	snprintf(t->labels[i], 256, "%s", row->labels ? row->labels : "");
	*a = (struct audit_info){ .seq = (uint64_t)row->seq, .time_ms = row->time_ms,
				  .run = row->run_id, .pid = row->pid,
				  .after = row->after_seq > 0 ? (uint64_t)row->after_seq : 0,
				  .event = event_name((enum proto_event)named(&proto_events,
									      row->event,
									      EVENT_DECISION)),
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
	take_receipt(row, a, t);
	return 0;
}

/* tail: the newest `max` rows; show: row `seq` with its receipt's list,
 * when it is the caller's. */
static int audit_tail(struct client_link *cl, uint64_t id, uint64_t max, bool show, uint64_t seq)
{
	static struct msg_audit_rows out;
	static char sha[PROTO_ROWS_MAX][65], labels[PROTO_ROWS_MAX][256];
	struct tail_ctx t = { &out, sha, labels, show };
	struct frame f;
	int rc;

	memset(&out, 0, sizeof(out));
	out.id = id;
	if (!show)
		rc = store_audit_tail(store, cl->peer.uid,
				      max > PROTO_ROWS_MAX ? PROTO_ROWS_MAX : max, take_row, &t);
	else
		rc = store_audit_row(store, cl->peer.uid, seq > INT64_MAX ? INT64_MAX : (int64_t)seq,
				     take_row, &t);
	if (rc < 0) {
		client_send_error(cl, true, id, PERR_AUDIT, "cannot read the audit trail: %s",
				  store_last_error(store));
		return 0;
	}
	if (enc_audit_rows(&f, &out) < 0)
		return -ENOMEM;
	return client_send(cl, &f);
}

static int audit_verify(struct client_link *cl, uint64_t id)
{
	struct msg_ok ok = { .id = id };
	uint64_t rows = 0;
	int64_t bad = 0;
	char text[160];
	struct frame f;
	int rc = store_audit_verify(store, &rows, &bad);

	if (rc == -EBADMSG) {
		client_send_error(cl, true, id, PERR_AUDIT_BROKEN,
				  "the audit chain is broken at row %" PRId64
				  " (%" PRIu64 " rows before it verify)", bad, rows);
		return 0;
	}
	if (rc < 0) {
		client_send_error(cl, true, id, PERR_AUDIT, "cannot read the audit trail: %s",
				  store_last_error(store));
		return 0;
	}
	snprintf(text, sizeof(text), "%" PRIu64 " rows, hash chain intact", rows);
	ok.message = pstr_c(text);
	if (enc_ok(&f, &ok) < 0)
		return -ENOMEM;
	return client_send(cl, &f);
}

int gate_on_audit(struct client_link *cl, const struct msg *m)
{
	const struct msg_audit *a = &m->u.audit;

	if (!strcmp(a->op, "verify"))
		return audit_verify(cl, a->id);
	return audit_tail(cl, a->id, a->max, !strcmp(a->op, "show"), a->seq);
}
