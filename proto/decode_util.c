/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/decode_util.h"

int dec_fail(struct dec *d, const char *code, const char *fmt, ...)
{
	va_list ap;
	int n;

	d->err->code = code;
	n = snprintf(d->err->message, sizeof(d->err->message), "%s: ", d->type);
	if (n < 0 || (size_t)n >= sizeof(d->err->message))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(d->err->message + n, sizeof(d->err->message) - (size_t)n, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static bool key_is(const msgpack_object *k, const char *key, size_t klen)
{
	/* msgpack-c gives an empty str a NULL ptr, which memcmp may not see
	 * even with a zero length. */
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
	       (klen == 0 || memcmp(k->via.str.ptr, key, klen) == 0);
}

/* Keys must be str and unique: a duplicated key would let two readers of
 * the same frame see different values. */
int dec_map(struct dec *d, const msgpack_object *o, size_t max_entries)
{
	const msgpack_object_map *m;

	if (o->type != MSGPACK_OBJECT_MAP)
		return dec_fail(d, PERR_BAD_FIELD, "expected a map");
	m = &o->via.map;
	if (m->size > max_entries)
		return dec_fail(d, PERR_BAD_FIELD, "map has %u entries, at most %zu allowed",
				m->size, max_entries);
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key;

		if (k->type != MSGPACK_OBJECT_STR)
			return dec_fail(d, PERR_BAD_FIELD, "map keys must be str");
		if (k->via.str.size && memchr(k->via.str.ptr, '\0', k->via.str.size))
			return dec_fail(d, PERR_BAD_FIELD, "a map key contains a NUL byte");
		for (uint32_t j = 0; j < i; j++)
			if (key_is(&m->ptr[j].key, k->via.str.ptr, k->via.str.size))
				return dec_fail(d, PERR_BAD_FIELD, "duplicate key '%.*s'",
						(int)k->via.str.size, k->via.str.ptr);
	}
	d->m = m;
	return 0;
}

const msgpack_object *dec_find(const struct dec *d, const char *key)
{
	size_t klen = strlen(key);

	for (uint32_t i = 0; i < d->m->size; i++)
		if (key_is(&d->m->ptr[i].key, key, klen))
			return &d->m->ptr[i].val;
	return NULL;
}

/* Looks a field up; returns 1 when present, 0 when absent and optional. */
static int lookup(struct dec *d, const char *key, bool required, const msgpack_object **o)
{
	*o = dec_find(d, key);
	if (*o)
		return 1;
	if (required)
		return dec_fail(d, PERR_BAD_FIELD, "missing field '%s'", key);
	return 0;
}

int dec_uint(struct dec *d, const char *key, bool required, uint64_t *out)
{
	const msgpack_object *o;
	int rc = lookup(d, key, required, &o);

	if (rc <= 0)
		return rc;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be a non-negative int", key);
	*out = o->via.u64;
	return 1;
}

int dec_int(struct dec *d, const char *key, bool required, int64_t *out)
{
	const msgpack_object *o;
	int rc = lookup(d, key, required, &o);

	if (rc <= 0)
		return rc;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*out = o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*out = (int64_t)o->via.u64;
	else
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be an int", key);
	return 1;
}

int dec_bool(struct dec *d, const char *key, bool required, bool *out)
{
	const msgpack_object *o;
	int rc = lookup(d, key, required, &o);

	if (rc <= 0)
		return rc;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be a bool", key);
	*out = o->via.boolean;
	return 1;
}

int dec_str(struct dec *d, const char *key, bool required, size_t max, struct pstr *out)
{
	const msgpack_object *o;
	int rc = lookup(d, key, required, &o);

	if (rc <= 0)
		return rc;
	if (o->type != MSGPACK_OBJECT_STR)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be a str", key);
	if (o->via.str.size > max)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' is %u bytes, at most %zu allowed",
				key, o->via.str.size, max);
	/* Every reader past this one holds text as a C string: a NUL would
	 * end it early there ("execute_code\0x" revoking execute_code). */
	if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size))
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' contains a NUL byte", key);
	out->ptr = o->via.str.ptr;
	out->len = o->via.str.size;
	return 1;
}

int dec_bin(struct dec *d, const char *key, bool required, size_t max, const uint8_t **p,
	    size_t *len)
{
	const msgpack_object *o;
	int rc = lookup(d, key, required, &o);

	if (rc <= 0)
		return rc;
	if (o->type != MSGPACK_OBJECT_BIN)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' must be a bin", key);
	if (o->via.bin.size > max)
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' is too long", key);
	*p = (const uint8_t *)o->via.bin.ptr;
	*len = o->via.bin.size;
	return 1;
}

int dec_enum(struct dec *d, const char *key, bool required, const char *const *set,
	     const char **out)
{
	struct pstr s;
	int rc = dec_str(d, key, required, 64, &s);

	if (rc <= 0)
		return rc;
	for (size_t i = 0; set[i]; i++)
		if (pstr_eq(s, set[i])) {
			*out = set[i];
			return 1;
		}
	return dec_fail(d, PERR_BAD_FIELD, "field '%s' has an unknown value '%.*s'", key,
			(int)s.len, s.ptr);
}

int dec_name(struct dec *d, const char *key, bool required, const struct proto_names *t,
	     unsigned allowed, int *out)
{
	struct pstr s;
	int rc = dec_str(d, key, required, 64, &s), v;

	if (rc <= 0)
		return rc;
	v = names_find(t, s.ptr, s.len);
	if (v < 0 || !(allowed & (1u << v)))
		return dec_fail(d, PERR_BAD_FIELD, "field '%s' has an unknown %s '%.*s'", key,
				t->what, (int)s.len, s.ptr);
	*out = v;
	return 1;
}

bool pstr_eq(struct pstr a, const char *s)
{
	size_t n = strlen(s);

	return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

char *pstr_dup(struct pstr a)
{
	return strndup(a.ptr ? a.ptr : "", a.len);
}
