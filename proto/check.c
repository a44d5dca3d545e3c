/* SPDX-License-Identifier: MIT
 * Structural check of a payload before msgpack-c sees it.
 *
 * msgpack-c allocates a container's declared element count before it reads
 * the elements, so a 5-byte frame announcing 2^32 array entries would ask
 * for ~96 GiB.  This walk bounds every declared count by the bytes left in
 * the frame (each element takes at least one byte), bounds nesting depth,
 * and validates every str as UTF-8 on the way, in one linear pass.  It does
 * not build anything: decoding stays msgpack-c's job.
 */
#include <errno.h>
#include <stdio.h>

#include "proto/check.h"

bool utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += n + 1;
	}
	return true;
}

struct walk {
	const uint8_t *p;
	size_t len, pos;
	struct proto_error *err;
	size_t bad_utf8; /* 1 + where the first str that is not UTF-8 starts; 0: none */
};

static int fail(struct walk *w, const char *code, const char *what)
{
	w->err->code = code;
	snprintf(w->err->message, sizeof(w->err->message), "%s at byte %zu", what, w->pos);
	return -EPROTO;
}

/* Reads an n-byte big-endian unsigned integer at the cursor. */
static int take(struct walk *w, size_t n, uint64_t *v)
{
	if (w->len - w->pos < n)
		return fail(w, PERR_BAD_MSGPACK, "truncated msgpack");
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v << 8 | w->p[w->pos + i];
	w->pos += n;
	return 0;
}

static int skip_bytes(struct walk *w, uint64_t n, bool is_str)
{
	if (w->len - w->pos < n)
		return fail(w, PERR_BAD_MSGPACK, "truncated msgpack");
	/* Noted, and the walk goes on: a frame whose structure holds can
	 * still be read for the id its answer should carry. */
	if (is_str && !w->bad_utf8 && !utf8_valid(w->p + w->pos, (size_t)n))
		w->bad_utf8 = w->pos + 1;
	w->pos += (size_t)n;
	return 0;
}

static int walk_value(struct walk *w, unsigned depth);

static int walk_container(struct walk *w, uint64_t count, bool is_map, unsigned depth)
{
	uint64_t items = is_map ? count * 2 : count;

	if (depth >= PROTO_DEPTH_MAX)
		return fail(w, PERR_BAD_MSGPACK, "nesting deeper than allowed");
	if (items > w->len - w->pos)
		return fail(w, PERR_BAD_MSGPACK, "container announces more items than the frame holds");
	for (uint64_t i = 0; i < items; i++) {
		int rc = walk_value(w, depth + 1);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Everything from 0xc0 to 0xdf: nil/bool, bin, ext, numbers, str8+,
 * array16+, map16+. */
static int walk_typed(struct walk *w, uint8_t b, unsigned depth)
{
	uint64_t n;
	int rc;

	switch (b) {
	case 0xc0: case 0xc2: case 0xc3:	/* nil, false, true */
		return 0;
	case 0xc4: case 0xc5: case 0xc6:	/* bin 8/16/32 */
		rc = take(w, (size_t)1 << (b - 0xc4), &n);
		return rc < 0 ? rc : skip_bytes(w, n, false);
	case 0xc7: case 0xc8: case 0xc9:	/* ext 8/16/32: length, type byte */
		rc = take(w, (size_t)1 << (b - 0xc7), &n);
		return rc < 0 ? rc : skip_bytes(w, n + 1, false);
	case 0xca: return skip_bytes(w, 4, false);	/* float 32 */
	case 0xcb: return skip_bytes(w, 8, false);	/* float 64 */
	case 0xcc: case 0xd0: return skip_bytes(w, 1, false);
	case 0xcd: case 0xd1: return skip_bytes(w, 2, false);
	case 0xce: case 0xd2: return skip_bytes(w, 4, false);
	case 0xcf: case 0xd3: return skip_bytes(w, 8, false);
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:	/* fixext */
		return skip_bytes(w, 1 + ((size_t)1 << (b - 0xd4)), false);
	case 0xd9: case 0xda: case 0xdb:	/* str 8/16/32 */
		rc = take(w, (size_t)1 << (b - 0xd9), &n);
		return rc < 0 ? rc : skip_bytes(w, n, true);
	case 0xdc: case 0xdd:			/* array 16/32 */
		rc = take(w, b == 0xdc ? 2 : 4, &n);
		return rc < 0 ? rc : walk_container(w, n, false, depth);
	case 0xde: case 0xdf:			/* map 16/32 */
		rc = take(w, b == 0xde ? 2 : 4, &n);
		return rc < 0 ? rc : walk_container(w, n, true, depth);
	default:				/* 0xc1: never used */
		return fail(w, PERR_BAD_MSGPACK, "invalid msgpack type byte");
	}
}

static int walk_value(struct walk *w, unsigned depth)
{
	uint8_t b;

	if (w->pos >= w->len)
		return fail(w, PERR_BAD_MSGPACK, "truncated msgpack");
	b = w->p[w->pos++];
	if (b <= 0x7f || b >= 0xe0)		/* fixint */
		return 0;
	if (b <= 0x8f)
		return walk_container(w, b & 0x0f, true, depth);
	if (b <= 0x9f)
		return walk_container(w, b & 0x0f, false, depth);
	if (b <= 0xbf)
		return skip_bytes(w, b & 0x1f, true);
	return walk_typed(w, b, depth);
}

int proto_check(const uint8_t *p, size_t len, struct proto_error *err)
{
	struct walk w = { p, len, 0, err, 0 };
	int rc;

	if (len == 0 || (p[0] & 0xf0) != 0x80) {
		if (!len || (p[0] != 0xde && p[0] != 0xdf))
			return fail(&w, PERR_BAD_MSGPACK, "a frame must hold one msgpack map");
	}
	rc = walk_value(&w, 0);
	if (rc < 0)
		return rc;
	if (w.pos != len)
		return fail(&w, PERR_BAD_MSGPACK, "trailing bytes after the map");
	if (w.bad_utf8) {
		w.pos = w.bad_utf8 - 1;
		return fail(&w, PERR_BAD_UTF8, "a string is not valid UTF-8");
	}
	return 0;
}
