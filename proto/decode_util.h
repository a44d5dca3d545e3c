/* SPDX-License-Identifier: MIT
 * Typed field access over a decoded msgpack map, shared by the decoders in
 * proto/messages.c.  Every getter names the message and the field in its
 * error sentence.
 */
#ifndef KOTOBA_PROTO_DECODE_UTIL_H
#define KOTOBA_PROTO_DECODE_UTIL_H
#include <msgpack.h>
#include "proto/proto.h"

#define MAP_FIELDS_MAX 32

struct dec {
	const msgpack_object_map *m;
	struct proto_error *err;
	const char *type;
};

int dec_map(struct dec *d, const msgpack_object *o, size_t max_entries);
const msgpack_object *dec_find(const struct dec *d, const char *key);
int dec_fail(struct dec *d, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int dec_uint(struct dec *d, const char *key, bool required, uint64_t *out);
int dec_int(struct dec *d, const char *key, bool required, int64_t *out);
int dec_bool(struct dec *d, const char *key, bool required, bool *out);
int dec_str(struct dec *d, const char *key, bool required, size_t max, struct pstr *out);
int dec_bin(struct dec *d, const char *key, bool required, size_t max, const uint8_t **p,
	    size_t *len);
/* A str that must be one of `set` (NULL-terminated); *out points at the
 * canonical static string, so decoded enums need no copy. */
int dec_enum(struct dec *d, const char *key, bool required, const char *const *set,
	     const char **out);
/* A str that must name a value of table t whose bit is set in `allowed`;
 * *out is that value (the table's enum). */
int dec_name(struct dec *d, const char *key, bool required, const struct proto_names *t,
	     unsigned allowed, int *out);
#endif
