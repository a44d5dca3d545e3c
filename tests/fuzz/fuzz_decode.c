/* SPDX-License-Identifier: MIT
 * Fuzz target: proto_decode(), every message type of both links.
 *
 * The input is one frame payload.  Whatever it holds, the decoder must
 * either return a type or fail with a code and a sentence.  A payload that
 * decodes is re-encoded with that type's encoder, and the result must
 * decode again to the same type and re-encode to the same bytes: decoders
 * and encoders agree on every field, so nothing the broker forwards changes
 * meaning on the way (PROTOCOL.md: "decoded and re-encoded byte for byte").
 */
#include <string.h>

#include "proto/proto.h"
#include "tests/fuzz/fuzz.h"

#define MAX_SNIPPET (64u << 10)

/* The codes a decode may fail with (proto/names.h). */
static const enum proto_errcode codes[] = {
	PE_TOO_LARGE, PE_BAD_MSGPACK, PE_BAD_UTF8, PE_BAD_FIELD, PE_UNKNOWN_TYPE,
	PE_SNIPPET_TOO_LARGE, PE_BAD_CWD,
};

static bool known_code(const char *code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (code && !strcmp(code, perr_name(codes[i])))
			return true;
	return false;
}

/* The audit trail's receipt map (AUDIT.md, `blocked`), which the broker
 * reads back from a file its owner can edit: what decodes encodes, and
 * decodes again to the same counts. */
static void receipt_round_trip(const uint8_t *data, size_t size)
{
	static struct receipt r, r2;
	static struct network net, net2;
	struct frame f = { 0 };

	if (!size || dec_receipt_map(data, size, &r, &net) < 0)
		return;
	FUZZ_ASSERT(enc_receipt(&f, &r, &net) == 0);
	FUZZ_ASSERT(dec_receipt_map(f.data + PROTO_HEADER_LEN, f.len - PROTO_HEADER_LEN, &r2,
				    &net2) == 0);
	FUZZ_ASSERT(r2.total == r.total && r2.n == r.n && net2.n == net.n);
	frame_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Large (audit_rows holds 256 rows): static, one of each. */
	static struct msg a, b;
	struct proto_error err = { 0 };
	struct frame f1 = { 0 }, f2 = { 0 };
	enum msg_type t;

	receipt_round_trip(data, size);
	t = proto_decode(data, size, MAX_SNIPPET, &a, &err);
	if (t == MSG_UNKNOWN) {
		FUZZ_ASSERT(known_code(err.code));
		FUZZ_ASSERT(memchr(err.message, '\0', sizeof(err.message)) && err.message[0]);
		return 0;
	}
	FUZZ_ASSERT(t == a.type && t > MSG_UNKNOWN && t < MSG_TYPE_COUNT);
	FUZZ_ASSERT(proto_encode(&f1, &a) == 0);
	FUZZ_ASSERT(f1.len >= PROTO_HEADER_LEN);
	t = proto_decode(f1.data + PROTO_HEADER_LEN, f1.len - PROTO_HEADER_LEN, MAX_SNIPPET, &b,
			 &err);
	if (t != a.type)
		fprintf(stderr, "re-encoded %s does not decode: %s: %s\n", msg_type_name(a.type),
			err.code, err.message);
	FUZZ_ASSERT(t == a.type);
	FUZZ_ASSERT(proto_encode(&f2, &b) == 0);
	FUZZ_ASSERT(f1.len == f2.len && !memcmp(f1.data, f2.data, f1.len));
	frame_free(&f1);
	frame_free(&f2);
	return 0;
}
