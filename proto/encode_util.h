/* SPDX-License-Identifier: MIT
 * Building one frame: header placeholder, a map with a declared number of
 * fields, then the length patched in.  A mismatch between declared and
 * written fields is a programming error reported as -EINVAL, so a test
 * catches it rather than a peer.
 */
#ifndef KOTOBA_PROTO_ENCODE_UTIL_H
#define KOTOBA_PROTO_ENCODE_UTIL_H
#include <msgpack.h>
#include "proto/proto.h"

struct enc {
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t declared, written;
	int failed;
};

void enc_begin(struct enc *e, const char *type, size_t nfields);
void put_key(struct enc *e, const char *key);
void put_str(struct enc *e, const char *key, const char *s);
void put_pstr(struct enc *e, const char *key, struct pstr s);
void put_uint(struct enc *e, const char *key, uint64_t v);
void put_int(struct enc *e, const char *key, int64_t v);
void put_bool(struct enc *e, const char *key, bool v);
void put_bin(struct enc *e, const char *key, const void *p, size_t len);
/* Values without a key, for arrays and nested maps. */
void raw_str(struct enc *e, const char *p, size_t len);
void raw_uint(struct enc *e, uint64_t v);
void raw_int(struct enc *e, int64_t v);
void raw_bool(struct enc *e, bool v);
void raw_map(struct enc *e, size_t n);
void raw_array(struct enc *e, size_t n);
int enc_end(struct enc *e, struct frame *f);
#endif
