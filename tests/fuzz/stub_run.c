/* SPDX-License-Identifier: MIT
 * Stands in for broker/run.c in the gate fuzz target: a "run" is a struct
 * run on the broker's and the session's lists, with no worker behind it.
 * It keeps run.c's contract with session.c and gate.c (the limits, the
 * `started` frame, exactly one `exit` or `error` per run, its ops told
 * once, and that a session may close inside any send), and the harness
 * ends runs when its input says so through stub_run_end().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "tests/fuzz/stub_run.h"

static void release(struct run *r)
{
	if (r->s) {
		struct session *s = r->s;

		TAILQ_REMOVE(&s->runs, r, slink);
		s->nruns--;
		r->s = NULL;
		session_run_gone(s);
	}
	TAILQ_REMOVE(&r->b->runs, r, blink);
	r->b->nruns--;
	loop_defer_free(free, r);
}

static void report(struct run *r)
{
	struct msg_exit m = { .id = r->id, .r = r->result, .profile = r->profile,
			      .decision = DECISION_RAN, .approver = r->approver,
			      .n_labels = r->n_labels };
	struct frame f;

	memcpy(m.labels, r->labels, sizeof(m.labels));
	if (r->end == END_FINISHED && enc_exit(&f, &m) == 0)
		session_send(r->s, &f);
	else if (r->end == END_SETUP)
		session_send_error(r->s, true, r->id, PERR_SETUP_FAILED, "stub: setup failed");
	else if (r->end != END_FINISHED)
		session_send_error(r->s, true, r->id,
				   r->cancelled ? PERR_CANCELLED : PERR_WORKER_LOST, "stub: ended");
}

/* As run.c's maybe_complete(): done first, so a session that closes while
 * we report finds nothing more to cancel. */
static void complete(struct run *r)
{
	if (r->done)
		return;
	r->done = true;
	if (r->s)
		report(r);
	if (r->ops && r->ops->ended)
		r->ops->ended(r, r->ctx);
	release(r);
}

int run_start(struct broker *b, struct session *s, const struct run_request *rq, char *err,
	      size_t errlen)
{
	struct msg_started st;
	struct run *r;
	struct frame f;
	unsigned mine = 0;

	TAILQ_FOREACH(r, &b->runs, blink)
		mine += r->uid == s->peer.uid;
	if (b->nruns >= b->cfg.max_runs || mine >= b->cfg.max_runs_per_uid) {
		snprintf(err, errlen, "stub: too many runs");
		return -EBUSY;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->b = b;
	r->s = s;
	r->id = rq->id;
	r->run_id = ++b->next_run_id;
	r->uid = s->peer.uid;
	r->profile = rq->profile;
	r->approver = rq->approver;
	r->n_labels = rq->n_labels;
	memcpy(r->labels, rq->labels, sizeof(r->labels));
	memcpy(r->sha256, rq->sha256, sizeof(r->sha256));
	r->ops = rq->ops;
	r->ctx = rq->ctx;
	r->sock.fd = r->out[0].fd = r->out[1].fd = -1;
	TAILQ_INSERT_TAIL(&b->runs, r, blink);
	TAILQ_INSERT_TAIL(&s->runs, r, slink);
	b->nruns++;
	s->nruns++;
	st = (struct msg_started){ r->id, r->profile, r->approver };
	r->ready = true;
	if (enc_started(&f, &st) == 0)
		session_send(s, &f);
	return 0;
}

void run_send_setup_error(struct session *s, uint64_t id, const char *step, int64_t err_no,
			  const char *why, bool in_container)
{
	session_send_error(s, true, id, PERR_SETUP_FAILED, "stub: step %s failed: %s", step, why);
}

/* broker/container.c stops containers through this; the harness runs
 * the gate in local mode, so nothing calls it. */
int run_start_engine(struct broker *b, uid_t peer, const struct engine_job *j,
		     const struct run_ops *ops, void *ctx, char *err, size_t errlen)
{
	snprintf(err, errlen, "stub: no engine commands here");
	return -ENOSYS;
}

void stub_run_end(struct run *r, int how)
{
	static const struct run_result ok = { .exited = true, .limit = "" };

	switch (how % 3) {
	case 0:
		r->end = END_FINISHED;
		r->result = ok;
		break;
	case 1:
		r->end = END_SETUP;
		break;
	default:
		r->end = END_LOST;
		break;
	}
	complete(r);
}

void run_cancel(struct run *r)
{
	if (r->done)
		return;
	r->cancelled = true;
	if (r->end == END_NONE)
		r->end = END_LOST;
	complete(r);
}

void run_detach(struct run *r)
{
	TAILQ_REMOVE(&r->s->runs, r, slink);
	r->s->nruns--;
	r->s = NULL;
	run_cancel(r);
}

void run_resume(struct run *r)
{
}

void runs_reap(struct broker *b)
{
}

void runs_tick(struct broker *b, uint64_t now)
{
}

int runs_next_deadline(struct broker *b, uint64_t now)
{
	return -1;
}
