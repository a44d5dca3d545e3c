/* SPDX-License-Identifier: MIT */
#ifndef KOTOBA_PROTO_CHECK_H
#define KOTOBA_PROTO_CHECK_H
#include "proto/proto.h"
/* 0 when the payload is exactly one well-formed msgpack map within the
 * depth limit, every declared count fits the bytes left, and every str is
 * UTF-8; -EPROTO with *err set otherwise.  With code bad-utf8 the rest
 * holds: msgpack-c may read the frame (for its id). */
int proto_check(const uint8_t *p, size_t len, struct proto_error *err);
#endif
