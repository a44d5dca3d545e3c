/* SPDX-License-Identifier: MIT
 * JSON for `kotoba run --json` and `kotoba mcp`, built with jansson.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "proto/probes.h"
#include "proto/proto.h" /* utf8_valid() */

/* jansson takes only UTF-8; a snippet may print anything.  Bytes that are
 * not UTF-8 become U+FFFD, so the output is always valid JSON. */
json_t *json_text(const char *s, size_t len)
{
	static const char fffd[] = "\xef\xbf\xbd";
	const uint8_t *p = (const uint8_t *)s;
	char *clean = malloc(len * 3 + 1);
	size_t i = 0, n = 0;
	json_t *v;

	if (!clean)
		return NULL;
	while (i < len) {
		uint8_t c = p[i];
		size_t w = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
					  (c & 0xf8) == 0xf0 ? 4 : 0;

		if (w == 1 || (w && i + w <= len && utf8_valid(p + i, w))) {
			memcpy(clean + n, p + i, w);
			n += w;
			i += w;
		} else {
			memcpy(clean + n, fffd, 3);
			n += 3;
			i++;
		}
	}
	v = json_stringn(clean, n);
	free(clean);
	return v;
}

/* A fixed-size field of the library's (NUL-terminated within its size). */
static json_t *json_field(const char *s, size_t size)
{
	return json_text(s, strnlen(s, size));
}

#define FIELD(s) json_field((s), sizeof(s))

/* Always present, empty when nothing was refused.  Targets are the
 * snippet's: made valid like output. */
static void add_receipt(json_t *o, const struct kotoba_result *x)
{
	json_t *list = json_array();

	json_object_set_new(o, "blocked_total", json_integer((json_int_t)x->blocked_total));
	for (size_t i = 0; i < x->n_blocked && i < KOTOBA_BLOCKED_MAX; i++) {
		const struct kotoba_blocked *b = &x->blocked[i];
		char kind[sizeof(b->kind)], target[sizeof(b->target)];
		json_t *e = json_pack("{s:o,s:o,s:I,s:o,s:o,s:b}", "kind", FIELD(b->kind),
				      "target", FIELD(b->target), "count", (json_int_t)b->count,
				      "by", FIELD(b->by), "seen_by", FIELD(b->seen_by),
				      "inferred", b->inferred);
		const char *probe;

		snprintf(kind, sizeof(kind), "%.*s", (int)strnlen(b->kind, sizeof(b->kind)),
			 b->kind);
		snprintf(target, sizeof(target), "%.*s",
			 (int)strnlen(b->target, sizeof(b->target)), b->target);
		probe = probe_name(kind, target);
		if (probe)
			json_object_set_new(e, "probe", json_string(probe));
		json_array_append_new(list, e);
	}
	json_object_set_new(o, "blocked", list);
	/* A run that exited 0 handled what was refused. */
	json_object_set_new(o, "blocked_handled",
			    json_boolean(x->blocked_total && x->exited && x->exit_code == 0));
}

void json_add_result(json_t *o, const struct kotoba_result *x)
{
	json_t *labels = json_array();

	json_object_set_new(o, "exit", x->exited ? json_integer(x->exit_code) : json_null());
	json_object_set_new(o, "signal", x->exited ? json_null() : json_integer(x->signal));
	json_object_set_new(o, "timed_out", json_boolean(x->timed_out));
	json_object_set_new(o, "truncated", json_boolean(x->truncated));
	json_object_set_new(o, "output_limit", x->output_limit ?
			    json_integer((json_int_t)x->output_limit) : json_null());
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)(x->duration_us / 1000)));
	json_object_set_new(o, "limit", FIELD(x->limit));
	json_object_set_new(o, "profile", FIELD(x->profile));
	json_object_set_new(o, "decision", FIELD(x->decision));
	json_object_set_new(o, "approver", FIELD(x->approver));
	for (size_t i = 0; i < x->n_labels && i < KOTOBA_LABELS_MAX; i++)
		json_array_append_new(labels, FIELD(x->labels[i]));
	json_object_set_new(o, "labels", labels);
	json_object_set_new(o, "where", FIELD(x->where));
	/* The name is the engine's, not ours: made valid like any foreign text. */
	if (x->container[0])
		json_object_set_new(o, "container", FIELD(x->container));
	add_receipt(o, x);
	json_object_set_new(o, "files_left_out", json_integer((json_int_t)x->files_left_out));
}

void json_add_error(json_t *o, const struct kotoba_error *e)
{
	json_t *err = json_object();

	json_object_set_new(o, "exit", json_null());
	json_object_set_new(o, "signal", json_null());
	json_object_set_new(err, "code", FIELD(e->name));
	json_object_set_new(err, "message", FIELD(e->message));
	if (e->step[0]) {
		json_object_set_new(err, "step", FIELD(e->step));
		json_object_set_new(err, "errno", json_integer(e->sys_errno));
	}
	json_object_set_new(o, "error", err);
}

const char *json_escalation_name(enum kotoba_escalation e)
{
	switch (e) {
	case KOTOBA_ESCALATION_RERUN:
		return "rerun";
	case KOTOBA_ESCALATION_LEFT:
		return "left";
	case KOTOBA_ESCALATION_EXPIRED:
		return "expired";
	case KOTOBA_ESCALATION_CANCELLED:
		return "cancelled";
	case KOTOBA_ESCALATION_NONE:
	default:
		return NULL;
	}
}
