// link: proto/frame.c proto/check.c proto/decode_util.c proto/names.c proto/encode_util.c proto/messages.c proto/limits.c
/* The codec against the test vectors in proto/PROTOCOL.md, and the framing
 * and structural limits.  Each vector's bytes are decoded and re-encoded
 * byte for byte, and what was decoded is compared with the fields the
 * document writes beside it (a JSON block): a vector whose meaning the
 * prose does not match fails, not only one that does not parse. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <nettle/sha2.h>

#include "proto/check.h"
#include "proto/proto.h"
#include "proto/landlock_abi.h"

struct vector {
	char name[32];    /* the message type */
	char heading[64]; /* the type and its variant: "job (engine)" */
	uint8_t bytes[4096];
	size_t len;
	char json[8192];  /* the expected fields, whitespace outside strings removed */
	size_t json_len;
};

/* Appends a line of the JSON block, dropping whitespace outside strings,
 * so the document may lay it out for people. */
static void add_json(struct vector *v, const char *line, bool *in_str)
{
	bool esc = false;

	for (const char *c = line; *c; c++) {
		if (!*in_str && (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r'))
			continue;
		assert_true(v->json_len + 1 < sizeof(v->json));
		v->json[v->json_len++] = *c;
		if (esc)
			esc = false;
		else if (*in_str && *c == '\\')
			esc = true;
		else if (*c == '"')
			*in_str = !*in_str;
	}
	v->json[v->json_len] = '\0';
}

static size_t load_vectors(struct vector *v, size_t max)
{
	FILE *f = fopen("proto/PROTOCOL.md", "r");
	char line[4096];
	size_t n = 0;
	bool in_hex = false, in_json = false, in_str = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "### Vector: ", 12) && n < max) {
			memset(&v[n], 0, sizeof(v[n]));
			sscanf(line + 12, "%31s", v[n].name);
			sscanf(line + 12, "%63[^\n]", v[n].heading);
			n++;
		} else if (!strncmp(line, "```hex", 6)) {
			in_hex = true;
		} else if (!strncmp(line, "```json", 7)) {
			in_json = n > 0;
			in_str = false;
		} else if (!strncmp(line, "```", 3)) {
			in_hex = in_json = false;
		} else if (in_json) {
			add_json(&v[n - 1], line, &in_str);
		} else if (in_hex && n > 0) {
			unsigned b;
			int off = 0, k;

			while (sscanf(line + off, "%2x%n", &b, &k) == 1) {
				v[n - 1].bytes[v[n - 1].len++] = (uint8_t)b;
				off += k;
			}
		}
	}
	fclose(f);
	return n;
}

/* Decodes the vector under heading `h` into *m. */
static void vector_msg(const char *h, struct msg *m)
{
	static struct vector v[64];
	size_t n = load_vectors(v, 64);
	struct proto_error err = { 0 };

	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].heading, h)) {
			assert_int_not_equal(proto_decode(v[i].bytes + 4, v[i].len - 4,
							  PROTO_SNIPPET_MAX_DEFAULT, m, &err),
					     MSG_UNKNOWN);
			return;
		}
	fail_msg("no vector '%s' in PROTOCOL.md", h);
}

/* ---- what a frame says, as canonical JSON ---------------------------------
 * Keys in wire order, no whitespace, str escaped as Python's json.dumps
 * escapes them (ensure_ascii off), bin as {"bin":"<hex>"}. */
struct jbuf {
	char s[8192];
	size_t n;
};

static void jput(struct jbuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jput(struct jbuf *j, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(j->s + j->n, sizeof(j->s) - j->n, fmt, ap);
	va_end(ap);
	assert_true(k >= 0 && (size_t)k < sizeof(j->s) - j->n);
	j->n += (size_t)k;
}

static void jstr(struct jbuf *j, const char *p, size_t len)
{
	jput(j, "\"");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		switch (c) {
		case '"': jput(j, "\\\""); break;
		case '\\': jput(j, "\\\\"); break;
		case '\n': jput(j, "\\n"); break;
		case '\r': jput(j, "\\r"); break;
		case '\t': jput(j, "\\t"); break;
		case '\b': jput(j, "\\b"); break;
		case '\f': jput(j, "\\f"); break;
		default:
			if (c < 0x20)
				jput(j, "\\u%04x", c);
			else
				jput(j, "%c", c);
		}
	}
	jput(j, "\"");
}

static void jvalue(struct jbuf *j, const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: jput(j, "null"); break;
	case MSGPACK_OBJECT_BOOLEAN: jput(j, o->via.boolean ? "true" : "false"); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: jput(j, "%" PRIu64, o->via.u64); break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: jput(j, "%" PRId64, o->via.i64); break;
	case MSGPACK_OBJECT_STR: jstr(j, o->via.str.ptr, o->via.str.size); break;
	case MSGPACK_OBJECT_BIN:
		jput(j, "{\"bin\":\"");
		for (uint32_t i = 0; i < o->via.bin.size; i++)
			jput(j, "%02x", (unsigned char)o->via.bin.ptr[i]);
		jput(j, "\"}");
		break;
	case MSGPACK_OBJECT_ARRAY:
		jput(j, "[");
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			jput(j, i ? "," : "");
			jvalue(j, &o->via.array.ptr[i]);
		}
		jput(j, "]");
		break;
	case MSGPACK_OBJECT_MAP:
		jput(j, "{");
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			jput(j, i ? "," : "");
			jvalue(j, &o->via.map.ptr[i].key);
			jput(j, ":");
			jvalue(j, &o->via.map.ptr[i].val);
		}
		jput(j, "}");
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
	case MSGPACK_OBJECT_EXT:
	default:
		fail_msg("no float or ext is part of the protocol");
	}
}

/* The frame f (what the decoded message encodes to) as canonical JSON. */
static void frame_json(const struct frame *f, struct jbuf *j)
{
	msgpack_unpacked up;
	size_t off = 0;

	j->n = 0;
	msgpack_unpacked_init(&up);
	assert_int_equal(msgpack_unpack_next(&up, (const char *)f->data + 4, f->len - 4, &off),
			 MSGPACK_UNPACK_SUCCESS);
	jvalue(j, &up.data);
	msgpack_unpacked_destroy(&up);
}

/* What the prose says about the values in the vectors, beyond their form. */
static void check_meaning(const struct vector *v, const struct msg *m)
{
	switch (m->type) {
	case MSG_HELLO:
		assert_int_equal(m->u.hello.version, PROTO_VERSION);
		break;
	case MSG_WELCOME:
		assert_int_equal(m->u.welcome.version, PROTO_VERSION);
		assert_int_equal(m->u.welcome.max_frame, PROTO_FRAME_MAX_DEFAULT);
		assert_int_equal(m->u.welcome.max_snippet, PROTO_SNIPPET_MAX_DEFAULT);
		break;
	case MSG_READY:
		assert_in_range(m->u.ready.landlock_abi, 0, KL_ABI_KNOWN);
		break;
	case MSG_EXIT:
		/* in a container the profile is `container`, and only there */
		assert_int_equal(m->u.exit.profile == PROFILE_CONTAINER,
				 !strcmp(m->u.exit.where, "container"));
		break;
	case MSG_EXEC:
		assert_null(memchr(m->u.exec.code.ptr, '\0', m->u.exec.code.len));
		break;
	case MSG_UNKNOWN: case MSG_ANSWER: case MSG_CANCEL: case MSG_GRANTS: case MSG_REVOKE:
	case MSG_QUEUED:
	case MSG_AUDIT: case MSG_STARTED: case MSG_OUTPUT: case MSG_CARD: case MSG_GRANT_LIST:
	case MSG_AUDIT_ROWS: case MSG_OK: case MSG_ERROR: case MSG_JOB: case MSG_SETUP_ERROR:
	case MSG_FINISHED: case MSG_MASKS: case MSG_GO: case MSG_WARM: case MSG_FILE:
	case MSG_OUTPUT_FILE: case MSG_TYPE_COUNT:
	default:
		break;
	}
}

static void test_vectors_round_trip(void **state)
{
	static struct vector v[64];
	static struct msg m;
	static struct jbuf json;
	size_t n = load_vectors(v, 64);
	bool seen[MSG_TYPE_COUNT] = { 0 }, seen_engine = false, seen_container = false;

	assert_true(n >= 20);
	for (size_t i = 0; i < n; i++) {
		struct proto_error err = { 0 };
		struct frame f;
		uint32_t len = (uint32_t)v[i].bytes[0] << 24 | v[i].bytes[1] << 16 |
			       v[i].bytes[2] << 8 | v[i].bytes[3];

		assert_int_equal(len, v[i].len - 4);
		if (proto_decode(v[i].bytes + 4, len, PROTO_SNIPPET_MAX_DEFAULT, &m, &err) ==
		    MSG_UNKNOWN)
			fail_msg("vector %s: %s", v[i].name, err.message);
		assert_string_equal(msg_type_name(m.type), v[i].name);
		seen[m.type] = true;
		seen_engine |= m.type == MSG_JOB && m.u.job.has_engine;
		seen_container |= m.type == MSG_EXIT && !strcmp(m.u.exit.where, "container");
		assert_int_equal(proto_encode(&f, &m), 0);
		assert_int_equal(f.len, v[i].len);
		assert_memory_equal(f.data, v[i].bytes, f.len);
		/* What was decoded, as the document states it. */
		if (!v[i].json_len)
			fail_msg("vector %s has no JSON block of its fields", v[i].heading);
		frame_json(&f, &json);
		if (strcmp(json.s, v[i].json))
			fail_msg("vector %s decodes to\n%s\nbut PROTOCOL.md says\n%s", v[i].heading,
				 json.s, v[i].json);
		check_meaning(&v[i], &m);
		frame_free(&f);
	}
	/* PROTOCOL.md must have a vector for every message there is. */
	for (int t = MSG_UNKNOWN + 1; t < MSG_TYPE_COUNT; t++)
		if (!seen[t])
			fail_msg("no vector in PROTOCOL.md for '%s'", msg_type_name((enum msg_type)t));
	/* ...and for the optional parts that change a frame's shape. */
	if (!seen_engine || !seen_container)
		fail_msg("PROTOCOL.md lacks a job with 'engine' or an exit in a container");
}

/* The audit row's sha256 is the hash of a real snippet: the exec vector's. */
static void test_audit_rows_vector_hashes_the_exec_code(void **state)
{
	static struct msg exec, rows;
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];
	char hex[2 * SHA256_DIGEST_SIZE + 1];

	vector_msg("exec", &exec);
	vector_msg("audit_rows", &rows);
	sha256_init(&ctx);
	sha256_update(&ctx, exec.u.exec.code.len, (const uint8_t *)exec.u.exec.code.ptr);
	sha256_digest(&ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	assert_int_equal(rows.u.audit_rows.n, 1);
	assert_int_equal(rows.u.audit_rows.rows[0].sha256.len, 64);
	assert_memory_equal(rows.u.audit_rows.rows[0].sha256.ptr, hex, 64);
}

/* Every name in a table is unique, a table lookup finds each, and the
 * profile audit rows read back includes `container` (a list without it
 * once made docker-mode rows read back as ""). */
static void test_name_tables(void **state)
{
	const struct proto_names *t[] = { &proto_profiles, &proto_approvers, &proto_decisions,
					  &proto_events, &proto_steps, &proto_errcodes };

	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		for (unsigned i = 0; i < t[k]->n; i++) {
			const char *name = names_get(t[k], i);

			assert_non_null(name);
			assert_int_equal(names_find(t[k], name, strlen(name)), (int)i);
		}
	assert_string_equal(profile_name(PROFILE_CONTAINER), "container");
	assert_true(PROFILES_AUDIT & PROFILE_BIT(PROFILE_CONTAINER));
	assert_false(PROFILES_RAN & PROFILE_BIT(PROFILE_ENGINE));
	assert_false(PROFILES_JOB & PROFILE_BIT(PROFILE_CONTAINER));
	assert_string_equal(names_get(&proto_profiles, PROFILE_COUNT), "?");
	assert_int_equal(names_find(&proto_decisions, "ran\0x", 5), -1);
	assert_string_equal(PERR_ID_IN_USE, "id-in-use");
}

static int check(const char *bytes, size_t len)
{
	struct proto_error err;

	return proto_check((const uint8_t *)bytes, len, &err);
}

static void test_structural_limits(void **state)
{
	char deep[64];

	assert_int_equal(check("\x80", 1), 0);
	assert_int_equal(check("\x81\xa1k\xc0", 4), 0);
	assert_int_equal(check("\x90", 1), -EPROTO);                /* not a map */
	assert_int_equal(check("\xdf\xff\xff\xff\xff", 5), -EPROTO); /* 4G entries */
	assert_int_equal(check("\x81\xa1k\xdd\x00\x01\x00\x00", 8), -EPROTO);
	assert_int_equal(check("\x81\xa1k\xc1", 4), -EPROTO);        /* never-used byte */
	assert_int_equal(check("\x81\xa1k\xc0\xc0", 5), -EPROTO);    /* trailing */
	assert_int_equal(check("\x81\xa1k\xd9\x05" "ab", 7), -EPROTO);  /* str8 past end */
	memset(deep, 0x91, sizeof(deep));
	deep[0] = (char)0x81, deep[1] = (char)0xa1, deep[2] = 'k';
	deep[sizeof(deep) - 1] = (char)0xc0;
	assert_int_equal(check(deep, sizeof(deep)), -EPROTO);        /* too deep */
	deep[12] = (char)0xc0;                                      /* depth 9: still too deep */
	assert_int_equal(check(deep, 13), -EPROTO);
	deep[9] = (char)0xc0;                                       /* depth 7: fine */
	assert_int_equal(check(deep, 10), 0);
}

static void test_utf8(void **state)
{
	assert_true(utf8_valid((const uint8_t *)"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
	assert_false(utf8_valid((const uint8_t *)"\xc0\xaf", 2));         /* overlong */
	assert_false(utf8_valid((const uint8_t *)"\xe0\x80\xaf", 3));     /* overlong */
	assert_false(utf8_valid((const uint8_t *)"\xed\xa0\x80", 3));     /* surrogate */
	assert_false(utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	assert_false(utf8_valid((const uint8_t *)"\xe2\x82", 2));         /* truncated */
	assert_false(utf8_valid((const uint8_t *)"\x80", 1));
}

/* The reader refuses an oversize frame from its header alone. */
static void test_reader_limit_before_allocation(void **state)
{
	struct frame_reader r;
	const uint8_t *p;
	size_t len;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	frame_reader_init(&r, 1024);
	assert_int_equal(write(sv[1], "\x00\x00\x04\x01", 4), 4);
	assert_true(frame_reader_fill(&r, sv[0]) > 0);
	assert_int_equal(frame_reader_next(&r, &p, &len), -EMSGSIZE);
	assert_true(r.cap <= 65536 + 4);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

/* A datagram is one whole frame: its header says its own length, no more
 * and no less, within the limit; a short or truncated one is refused. */
static void test_datagram_header_is_the_datagram(void **state)
{
	const uint8_t ok[] = { 0, 0, 0, 2, 0x81, 0xa0 };
	const uint8_t *p = NULL;
	size_t len = 0;

	assert_int_equal(frame_parse_datagram(ok, sizeof(ok), 2, &p, &len), 0);
	assert_ptr_equal(p, ok + 4);
	assert_int_equal(len, 2);
	assert_int_equal(frame_parse_datagram(ok, 3, 2, &p, &len), -EPROTO);
	assert_int_equal(frame_parse_datagram(ok, 5, 2, &p, &len), -EPROTO);
	assert_int_equal(frame_parse_datagram(ok, sizeof(ok), 1, &p, &len), -EMSGSIZE);
	/* recv(MSG_TRUNC) says the datagram was longer than the buffer. */
	assert_int_equal(frame_parse_datagram(ok, 7, 2, &p, &len), -EMSGSIZE);
	assert_int_equal(frame_parse_datagram((const uint8_t *)"\x00\x00\x00\x03\x81\xa0", 6,
					      8, &p, &len), -EPROTO);
	assert_int_equal(frame_parse_datagram((const uint8_t *)"\x00\x00\x00\x00", 4, 8, &p,
					      &len), 0);
	assert_int_equal(len, 0);
}

static void test_reader_split_and_joined_frames(void **state)
{
	struct frame_reader r;
	const uint8_t *p;
	size_t len;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	frame_reader_init(&r, 1024);
	assert_int_equal(write(sv[1], "\x00\x00\x00\x01\x80\x00\x00", 7), 7);
	assert_true(frame_reader_fill(&r, sv[0]) > 0);
	assert_int_equal(frame_reader_next(&r, &p, &len), 1);
	assert_int_equal(len, 1);
	assert_int_equal(frame_reader_next(&r, &p, &len), 0);
	assert_true(frame_reader_partial(&r));
	assert_int_equal(write(sv[1], "\x00\x02\x81\xc0", 4), 4);
	assert_true(frame_reader_fill(&r, sv[0]) > 0);
	assert_int_equal(frame_reader_next(&r, &p, &len), 1);
	assert_int_equal(len, 2);
	assert_int_equal(frame_reader_fill(&r, sv[0]), -EAGAIN);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

static void test_decoder_errors_name_the_field(void **state)
{
	static struct msg m;
	struct proto_error err = { 0 };
	/* {"type":"exec","id":1,"code":5} */
	const uint8_t bad[] = { 0x83, 0xa4, 't', 'y', 'p', 'e', 0xa4, 'e', 'x', 'e', 'c',
				0xa2, 'i', 'd', 0x01, 0xa4, 'c', 'o', 'd', 'e', 0x05 };

	assert_int_equal(proto_decode(bad, sizeof(bad), 1024, &m, &err), MSG_UNKNOWN);
	assert_string_equal(err.code, PERR_BAD_FIELD);
	assert_non_null(strstr(err.message, "'code'"));
}

/* Encodes m (the encoders do not validate) and expects the decoder to
 * refuse it with bad-field, naming `what`. */
static void expect_bad_field(const struct msg *m, const char *what)
{
	static struct msg back;
	struct proto_error err = { 0 };
	struct frame f;

	assert_int_equal(proto_encode(&f, m), 0);
	assert_int_equal(proto_decode(f.data + 4, f.len - 4, PROTO_SNIPPET_MAX_DEFAULT, &back, &err),
			 MSG_UNKNOWN);
	frame_free(&f);
	assert_string_equal(err.code, PERR_BAD_FIELD);
	if (!strstr(err.message, what))
		fail_msg("expected an error naming %s, got: %s", what, err.message);
}

/* Encodes m, decodes that into *back, and checks *back encodes to the
 * same bytes.  *back points into *f, which the caller frees. */
static void round_trip(const struct msg *m, struct msg *back, struct frame *f)
{
	struct proto_error err = { 0 };
	struct frame again;

	assert_int_equal(proto_encode(f, m), 0);
	if (proto_decode(f->data + 4, f->len - 4, PROTO_SNIPPET_MAX_DEFAULT, back, &err) ==
	    MSG_UNKNOWN)
		fail_msg("%s", err.message);
	assert_int_equal(proto_encode(&again, back), 0);
	assert_int_equal(again.len, f->len);
	assert_memory_equal(again.data, f->data, f->len);
	frame_free(&again);
}

static void test_engine_is_checked(void **state)
{
	static struct msg m, back;
	static const char nul_arg[] = "a\0b";
	struct frame f;

	vector_msg("job (engine)", &m);
	assert_true(m.u.job.has_engine);
	assert_int_equal(m.u.job.engine.n_steps, 2);
	assert_true(pstr_eq(m.u.job.engine.steps[1].name, "image"));
	m.u.job.engine.run.n = 0;
	expect_bad_field(&m, "'run'");
	vector_msg("job (engine)", &m);
	m.u.job.engine.kill.v[0] = pstr_c("podman");
	expect_bad_field(&m, "absolute");
	vector_msg("job (engine)", &m);
	m.u.job.engine.steps[0].argv.v[1] = (struct pstr){ nul_arg, sizeof(nul_arg) - 1 };
	expect_bad_field(&m, "NUL");
	vector_msg("job (engine)", &m);
	m.u.job.engine.steps[1].name = pstr_c("");
	expect_bad_field(&m, "'step'");
	vector_msg("job (engine)", &m);
	m.u.job.has_engine = false;
	expect_bad_field(&m, "'engine'");
	vector_msg("job (engine)", &m);
	m.u.job.profile = PROFILE_APPROVED;
	expect_bad_field(&m, "'engine'");
	/* kill and oom may be empty: then there is nothing to run. */
	vector_msg("job (engine)", &m);
	m.u.job.engine.kill.n = m.u.job.engine.oom.n = 0;
	m.u.job.engine.n_steps = 0;
	round_trip(&m, &back, &f);
	assert_true(back.u.job.has_engine);
	assert_int_equal(back.u.job.engine.kill.n, 0);
	frame_free(&f);
	/* outputs: absent from the vector, so none; one round-trips, and
	 * must start with an absolute path as the others. */
	assert_int_equal(back.u.job.engine.outputs.n, 0);
	vector_msg("job (engine)", &m);
	m.u.job.engine.outputs = m.u.job.engine.kill;
	m.u.job.engine.outputs.v[m.u.job.engine.outputs.n - 1] = pstr_c(PROTO_OUTPUT_DIR_ARG);
	round_trip(&m, &back, &f);
	assert_int_equal(back.u.job.engine.outputs.n, m.u.job.engine.kill.n);
	assert_true(pstr_eq(back.u.job.engine.outputs.v[back.u.job.engine.outputs.n - 1],
			    PROTO_OUTPUT_DIR_ARG));
	frame_free(&f);
	m.u.job.engine.outputs.v[0] = pstr_c("podman");
	expect_bad_field(&m, "'outputs'");
	vector_msg("job (engine)", &m);
	/* An encoder never reads past the fixed arrays. */
	m.u.job.engine.n_steps = PROTO_STEPS_MAX + 1;
	assert_int_equal(enc_job(&f, &m.u.job), -E2BIG);
	m.u.job.engine.n_steps = 0;
	m.u.job.engine.run.n = PROTO_ARGV_MAX + 1;
	assert_int_equal(enc_job(&f, &m.u.job), -E2BIG);
}

/* `proxy` (the egress proxy as an approved run's network) is for the
 * approved profile only: the encoder refuses it elsewhere, and so does
 * the decoder, given the same job with its profile spelled "engine". */
static void test_job_proxy_is_for_approved_only(void **state)
{
	static struct msg m, back;
	static const uint8_t approved[] = { 0xa8, 'a', 'p', 'p', 'r', 'o', 'v', 'e', 'd' };
	static const uint8_t engine[] = { 0xa6, 'e', 'n', 'g', 'i', 'n', 'e' };
	struct proto_error err = { 0 };
	struct frame f;
	uint8_t *at, *buf;
	size_t len;

	vector_msg("job", &m);
	m.u.job.profile = PROFILE_APPROVED;
	m.u.job.proxy = true;
	round_trip(&m, &back, &f);
	assert_true(back.u.job.proxy);
	frame_free(&f);
	m.u.job.profile = PROFILE_UNATTENDED;
	assert_int_equal(enc_job(&f, &m.u.job), -EINVAL);
	m.u.job.profile = PROFILE_APPROVED;
	assert_int_equal(enc_job(&f, &m.u.job), 0);
	at = memmem(f.data + 4, f.len - 4, approved, sizeof(approved));
	assert_non_null(at);
	len = f.len - 4 - (sizeof(approved) - sizeof(engine));
	buf = malloc(len);
	assert_non_null(buf);
	memcpy(buf, f.data + 4, (size_t)(at - f.data - 4));
	memcpy(buf + (at - f.data - 4), engine, sizeof(engine));
	memcpy(buf + (at - f.data - 4) + sizeof(engine), at + sizeof(approved),
	       f.len - (size_t)(at - f.data) - sizeof(approved));
	assert_int_equal(proto_decode(buf, len, PROTO_SNIPPET_MAX_DEFAULT, &back, &err),
			 MSG_UNKNOWN);
	assert_string_equal(err.code, PERR_BAD_FIELD);
	assert_non_null(strstr(err.message, "'proxy'"));
	free(buf);
	frame_free(&f);
}

static void test_where_is_checked(void **state)
{
	static struct msg m, back;
	struct frame f;

	vector_msg("exit (container)", &m);
	assert_true(pstr_eq(m.u.exit.container, "kotoba-7"));
	m.u.exit.container = pstr_c("");
	expect_bad_field(&m, "'container'");
	/* An encoder that does not say where ran on the host. */
	vector_msg("exit", &m);
	m.u.exit.where = NULL;
	m.u.exit.container = pstr_c("ignored");
	round_trip(&m, &back, &f);
	assert_string_equal(back.u.exit.where, "host");
	assert_int_equal(back.u.exit.container.len, 0);
	frame_free(&f);
	m.u.exit.where = "moon";
	expect_bad_field(&m, "'where'");
}

static void test_exit_without_where_is_host(void **state)
{
	static const uint8_t where_host[] = { 0xa5, 'w', 'h', 'e', 'r', 'e', 0xa4, 'h', 'o', 's', 't' };
	static struct msg m, back;
	struct proto_error err = { 0 };
	struct frame f;

	/* The exit vector as a broker from before `where` sent it: a map of
	 * one field less that ends where "where" begins. */
	vector_msg("exit", &m);
	assert_int_equal(proto_encode(&f, &m), 0);
	assert_memory_equal(f.data + f.len - sizeof(where_host), where_host, sizeof(where_host));
	assert_int_equal(f.data[4], 0x8f);
	f.data[4] = 0x8e;
	assert_int_equal(proto_decode(f.data + 4, f.len - 4 - sizeof(where_host),
				      PROTO_SNIPPET_MAX_DEFAULT, &back, &err), MSG_EXIT);
	assert_string_equal(back.u.exit.where, "host");
	frame_free(&f);
}

static void test_receipt_is_checked(void **state)
{
	static struct msg m, back;
	static struct receipt r;
	struct frame f;

	vector_msg("exit (blocked)", &m);
	assert_int_equal(m.u.exit.blocked.n, 3);
	assert_int_equal(m.u.exit.blocked.total, 4);
	assert_string_equal(m.u.exit.blocked.op[1].target, "/bin/sh");
	assert_int_equal(m.u.exit.blocked.op[1].by, BY_EXEC_GATE);
	m.u.exit.blocked.op[0].count = 0;
	expect_bad_field(&m, "at least 1");
	/* a total short of the entries' counts */
	vector_msg("exit (blocked)", &m);
	m.u.exit.blocked.total = 3;
	expect_bad_field(&m, "'blocked_total'");
	vector_msg("exit (blocked)", &m);
	m.u.exit.blocked.n = PROTO_BLOCKED_MAX + 1;
	assert_int_equal(enc_exit(&f, &m.u.exit), -E2BIG);
	/* nothing refused: no fields, read back as the empty receipt */
	vector_msg("exit (blocked)", &m);
	m.u.exit.blocked.total = 0;
	round_trip(&m, &back, &f);
	assert_int_equal(back.u.exit.blocked.total, 0);
	assert_int_equal(back.u.exit.blocked.n, 0);
	frame_free(&f);
	/* the audit trail's form, and what is not one */
	vector_msg("exit (blocked)", &m);
	assert_int_equal(enc_receipt(&f, &m.u.exit.blocked, NULL), 0);
	assert_int_equal(dec_receipt_map(f.data + 4, f.len - 4, &r, NULL), 0);
	assert_int_equal(r.total, 4);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.op[2].target, "/home/ada/.ssh/id_ed25519");
	assert_true(r.op[2].inferred && r.op[2].seen_by == SEEN_BY_PYTHON);
	assert_int_equal(dec_receipt_map(f.data + 4, f.len - 5, &r, NULL), -EPROTO);
	assert_int_equal(dec_receipt_map(f.data + 4, 0, &r, NULL), 0);
	assert_int_equal(r.total, 0);
	frame_free(&f);
}

/* A request the egress proxy refused, and an exit row's traffic. */
static void test_request_and_network_in_the_receipt(void **state)
{
	static struct msg m, back;
	static struct receipt r;
	static struct network net, got;
	struct frame f;

	vector_msg("exit (request)", &m);
	assert_int_equal(m.u.exit.blocked.n, 1);
	assert_int_equal(m.u.exit.blocked.op[0].kind, BLOCK_REQUEST);
	assert_int_equal(m.u.exit.blocked.op[0].by, BY_EGRESS_PROXY);
	assert_int_equal(m.u.exit.blocked.op[0].seen_by, SEEN_BY_PROXY);
	round_trip(&m, &back, &f);
	frame_free(&f);
	net.n = 2;
	net.use[0] = (struct net_use){ "api.example.org:443", "GET,HEAD", 3, 700, 1048576 };
	net.use[1] = (struct net_use){ "*", "CONNECT", 0, 10, 20 };
	assert_int_equal(enc_receipt(&f, &m.u.exit.blocked, &net), 0);
	assert_int_equal(dec_receipt_map(f.data + 4, f.len - 4, &r, &got), 0);
	assert_int_equal(r.total, 1);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.use[0].host, "api.example.org:443");
	assert_string_equal(got.use[0].methods, "GET,HEAD");
	assert_true(got.use[0].requests == 3 && got.use[0].bytes_in == 1048576);
	assert_string_equal(got.use[1].host, "*");
	frame_free(&f);
	/* traffic alone, nothing refused */
	m.u.exit.blocked = (struct receipt){ 0 };
	assert_int_equal(enc_receipt(&f, &m.u.exit.blocked, &net), 0);
	assert_int_equal(dec_receipt_map(f.data + 4, f.len - 4, &r, &got), 0);
	assert_true(r.total == 0 && got.n == 2);
	frame_free(&f);
	net.n = PROTO_NETWORK_MAX + 1;
	assert_int_equal(enc_receipt(&f, &m.u.exit.blocked, &net), -E2BIG);
	/* audit_rows: the sums on the row, the list on show's row only */
	vector_msg("audit_rows (network)", &m);
	assert_int_equal(m.u.audit_rows.rows[0].net_hosts, 1);
	assert_int_equal(m.u.audit_rows.rows[0].net_bytes_in, 1048998);
	assert_true(m.u.audit_rows.rows[0].has_network);
	assert_string_equal(m.u.audit_rows.network.use[0].methods, "GET,HEAD");
	assert_int_equal(m.u.audit_rows.blocked.op[0].kind, BLOCK_REQUEST);
	round_trip(&m, &back, &f);
	frame_free(&f);
	m.u.audit_rows.network.n = PROTO_NETWORK_MAX + 1;
	assert_int_equal(enc_audit_rows(&f, &m.u.audit_rows), -E2BIG);
}

static void test_card_settings_are_checked(void **state)
{
	static const uint8_t cwd_key[] = { 0xa3, 'c', 'w', 'd' };
	static struct msg m, back;
	struct proto_error err = { 0 };
	struct frame f;
	uint8_t *at;

	vector_msg("card", &m);
	assert_true(pstr_eq(m.u.card.cwd, "/home/ada/project"));
	assert_int_equal(m.u.card.timeout_ms, 60000);
	assert_int_equal(m.u.card.n_env, 2);
	assert_true(pstr_eq(m.u.card.env[1].name, "TZ"));
	assert_int_equal(m.u.card.n_limits, 6);
	assert_true(pstr_eq(m.u.card.limits[1].name, "memory_bytes"));
	assert_true(m.u.card.limits[1].value == 4294967296u);
	m.u.card.limits[0].name = pstr_c("cpu s");
	expect_bad_field(&m, "'cpu s'");
	vector_msg("card", &m);
	m.u.card.env[0].name = pstr_c("1LANG");
	expect_bad_field(&m, "'1LANG'");
	vector_msg("card", &m);
	m.u.card.n_limits = PROTO_CARD_LIMITS_MAX + 1;
	assert_int_equal(enc_card(&f, &m.u.card), -E2BIG);
	m.u.card.n_limits = 0;
	m.u.card.n_env = PROTO_ENV_MAX + 1;
	assert_int_equal(enc_card(&f, &m.u.card), -E2BIG);
	/* A card from a broker before the settings: the same map without its
	 * last four fields, read as "not given". */
	vector_msg("card", &m);
	assert_int_equal(proto_encode(&f, &m), 0);
	at = memmem(f.data, f.len, cwd_key, sizeof(cwd_key));
	assert_non_null(at);
	assert_int_equal(f.data[4], 0x8e); /* type and 13 fields */
	f.data[4] = 0x8a;
	assert_int_equal(proto_decode(f.data + 4, (size_t)(at - f.data) - 4,
				      PROTO_SNIPPET_MAX_DEFAULT, &back, &err), MSG_CARD);
	assert_int_equal(back.u.card.cwd.len, 0);
	assert_int_equal(back.u.card.timeout_ms, 0);
	assert_int_equal(back.u.card.n_env, 0);
	assert_int_equal(back.u.card.n_limits, 0);
	frame_free(&f);
}

/* A datagram on the worker link carries at most one descriptor: one is
 * handed over, more are all closed (a process that stole the link once
 * filled the broker's table with pairs), none leaks either way. */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void send_fds(int sock, const int *fds, size_t n)
{
	assert_int_equal(send_with_fds(sock, "x", 1, fds, n), 1);
}

static void test_a_datagram_hands_over_one_descriptor_and_closes_more(void **state)
{
	int sv[2], p[2], passed, before;
	uint8_t buf[16];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	before = open_fds();
	send_fds(sv[1], (int[]){ p[0], p[1], p[0] }, 3);
	assert_int_equal(frame_recv_fd(sv[0], buf, sizeof(buf), MSG_DONTWAIT, &passed), 1);
	assert_int_equal(passed, -EPROTO);
	assert_int_equal(open_fds(), before);
	send_fds(sv[1], (int[]){ p[0] }, 1);
	assert_int_equal(frame_recv_fd(sv[0], buf, sizeof(buf), MSG_DONTWAIT, &passed), 1);
	assert_true(passed >= 0);
	assert_int_equal(open_fds(), before + 1);
	close(passed);
	assert_int_equal(frame_recv_fd(sv[0], buf, sizeof(buf), MSG_DONTWAIT, &passed), -EAGAIN);
	assert_int_equal(passed, -1);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors_round_trip),
		cmocka_unit_test(test_audit_rows_vector_hashes_the_exec_code),
		cmocka_unit_test(test_name_tables),
		cmocka_unit_test(test_structural_limits),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_reader_limit_before_allocation),
		cmocka_unit_test(test_reader_split_and_joined_frames),
		cmocka_unit_test(test_datagram_header_is_the_datagram),
		cmocka_unit_test(test_decoder_errors_name_the_field),
		cmocka_unit_test(test_engine_is_checked),
		cmocka_unit_test(test_job_proxy_is_for_approved_only),
		cmocka_unit_test(test_where_is_checked),
		cmocka_unit_test(test_exit_without_where_is_host),
		cmocka_unit_test(test_card_settings_are_checked),
		cmocka_unit_test(test_a_datagram_hands_over_one_descriptor_and_closes_more),
		cmocka_unit_test(test_receipt_is_checked),
		cmocka_unit_test(test_request_and_network_in_the_receipt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
