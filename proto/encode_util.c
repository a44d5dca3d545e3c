/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/encode_util.h"

static void track(struct enc *e, int rc)
{
	if (rc != 0)
		e->failed = -ENOMEM;
}

void enc_begin(struct enc *e, const char *type, size_t nfields)
{
	static const char zero[PROTO_HEADER_LEN];

	memset(e, 0, sizeof(*e));
	msgpack_sbuffer_init(&e->sb);
	msgpack_packer_init(&e->pk, &e->sb, msgpack_sbuffer_write);
	track(e, msgpack_sbuffer_write(&e->sb, zero, sizeof(zero)));
	e->declared = nfields + 1;
	track(e, msgpack_pack_map(&e->pk, e->declared));
	put_str(e, "type", type);
}

void put_key(struct enc *e, const char *key)
{
	e->written++;
	raw_str(e, key, strlen(key));
}

void put_pstr(struct enc *e, const char *key, struct pstr s)
{
	put_key(e, key);
	raw_str(e, s.ptr, s.len);
}

void put_str(struct enc *e, const char *key, const char *s)
{
	put_pstr(e, key, pstr_c(s ? s : ""));
}

void put_uint(struct enc *e, const char *key, uint64_t v)
{
	put_key(e, key);
	track(e, msgpack_pack_uint64(&e->pk, v));
}

void put_int(struct enc *e, const char *key, int64_t v)
{
	put_key(e, key);
	track(e, msgpack_pack_int64(&e->pk, v));
}

void put_bool(struct enc *e, const char *key, bool v)
{
	put_key(e, key);
	track(e, v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk));
}

void put_bin(struct enc *e, const char *key, const void *p, size_t len)
{
	put_key(e, key);
	track(e, msgpack_pack_bin(&e->pk, len));
	track(e, msgpack_pack_bin_body(&e->pk, p, len));
}

void raw_str(struct enc *e, const char *p, size_t len)
{
	track(e, msgpack_pack_str(&e->pk, len));
	track(e, msgpack_pack_str_body(&e->pk, p ? p : "", len));
}

void raw_uint(struct enc *e, uint64_t v)
{
	track(e, msgpack_pack_uint64(&e->pk, v));
}

void raw_int(struct enc *e, int64_t v)
{
	track(e, msgpack_pack_int64(&e->pk, v));
}

void raw_bool(struct enc *e, bool v)
{
	track(e, v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk));
}

void raw_map(struct enc *e, size_t n)
{
	track(e, msgpack_pack_map(&e->pk, n));
}

void raw_array(struct enc *e, size_t n)
{
	track(e, msgpack_pack_array(&e->pk, n));
}

int enc_end(struct enc *e, struct frame *f)
{
	size_t n = e->sb.size - PROTO_HEADER_LEN;
	uint8_t *p = (uint8_t *)e->sb.data;

	if (!e->failed && e->written != e->declared)
		e->failed = -EINVAL;
	if (!e->failed && n > UINT32_MAX)
		e->failed = -EMSGSIZE;
	if (e->failed) {
		msgpack_sbuffer_destroy(&e->sb);
		return e->failed;
	}
	p[0] = (uint8_t)(n >> 24);
	p[1] = (uint8_t)(n >> 16);
	p[2] = (uint8_t)(n >> 8);
	p[3] = (uint8_t)n;
	/* msgpack_sbuffer grows in 8 KiB steps; a queued frame should cost
	 * what it holds, or a broker's per-client bound would count bytes
	 * while holding pages. */
	f->data = realloc(p, e->sb.size);
	if (!f->data)
		f->data = p;
	f->len = e->sb.size;
	return 0;
}
