/* SPDX-License-Identifier: MIT
 * A run's receipt (PROTOCOL.md, "exit", `blocked`), as its witnesses fill
 * it: the worker's (worker/receipt.c) and the egress proxy's, which the
 * broker adds (broker/run.c). */
#include <string.h>

#include "proto/proto.h"

/* Copies at most PROTO_BLOCKED_TARGET_MAX bytes of s, whole UTF-8
 * characters only; a NUL or a byte that starts no valid character
 * becomes '?', so the target is always a str the decoder takes. */
void receipt_copy_target(char *out, const char *s, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		size_t k = 1;

		while (k < 4 && i + k <= len && !utf8_valid((const uint8_t *)s + i, k))
			k++;
		if (i + k > len || !utf8_valid((const uint8_t *)s + i, k) || s[i] == '\0') {
			if (o + 1 > PROTO_BLOCKED_TARGET_MAX)
				break;
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + k > PROTO_BLOCKED_TARGET_MAX)
			break;
		memcpy(out + o, s + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
}

void receipt_add_n(struct receipt *b, const struct blocked_op *what, uint64_t count)
{
	struct blocked_op *o;

	b->total += count;
	for (size_t i = 0; i < b->n; i++) {
		o = &b->op[i];
		if (o->kind == what->kind && o->by == what->by && o->seen_by == what->seen_by &&
		    !strcmp(o->target, what->target)) {
			o->count += count;
			return;
		}
	}
	if (b->n == PROTO_BLOCKED_MAX)
		return; /* counted in the total only */
	o = &b->op[b->n++];
	*o = *what;
	o->count = count;
}

void receipt_add(struct receipt *b, enum proto_block_kind kind, const char *target,
		 enum proto_blocker by, enum proto_witness seen_by, bool inferred)
{
	struct blocked_op o = { .kind = kind, .by = by, .seen_by = seen_by, .inferred = inferred };

	receipt_copy_target(o.target, target, strlen(target));
	receipt_add_n(b, &o, 1);
}

void receipt_merge(struct receipt *into, const struct receipt *from)
{
	uint64_t listed = 0;

	for (size_t i = 0; i < from->n; i++) {
		receipt_add_n(into, &from->op[i], from->op[i].count);
		listed += from->op[i].count;
	}
	/* Refusals past from's own cap stay counted. */
	into->total += from->total > listed ? from->total - listed : 0;
}
