/* SPDX-License-Identifier: MIT
 * Fuzz target: the frame reader (proto/frame.c) against a reference model.
 *
 * The input is a byte stream a client might send.  It is written to a real
 * socketpair in chunks of fuzzer-chosen sizes, so frame_reader_fill() sees
 * the same short reads the broker does, and every frame that
 * frame_reader_next() returns is compared with what a ten-line reference
 * parser finds in the whole stream: same frames, same bytes, the same point
 * where framing is lost (-EMSGSIZE), and a partial frame left over exactly
 * when the model has one.  Each payload then goes through proto_decode(),
 * as the broker would.  The same bytes are also read by
 * frame_read_blocking() as one SOCK_SEQPACKET datagram (the worker link).
 *
 * Input: byte 0 picks the payload limit, byte 1 seeds the chunk sizes, the
 * rest is the stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/proto.h"
#include "tests/fuzz/fuzz.h"

static const size_t limits[] = { 0, 1, 5, 64, 300, 4096, 70000, PROTO_FRAME_MAX_DEFAULT };

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The reference: walks headers over the whole stream. */
struct model {
	const uint8_t *s;
	size_t len, pos;
	size_t max;
};

/* 1 and the next frame, 0 when only a partial frame (or nothing) is left,
 * -EMSGSIZE when a header is over the limit. */
static int model_next(struct model *m, const uint8_t **p, size_t *n)
{
	uint32_t want;

	if (m->len - m->pos < PROTO_HEADER_LEN)
		return 0;
	want = be32(m->s + m->pos);
	if (want > m->max)
		return -EMSGSIZE;
	if (m->len - m->pos - PROTO_HEADER_LEN < want)
		return 0;
	*p = m->s + m->pos + PROTO_HEADER_LEN;
	*n = want;
	m->pos += PROTO_HEADER_LEN + want;
	return 1;
}

static void decode(const uint8_t *p, size_t n)
{
	static struct msg m;
	struct proto_error err = { 0 };

	if (proto_decode(p, n, PROTO_SNIPPET_MAX_DEFAULT, &m, &err) == MSG_UNKNOWN)
		FUZZ_ASSERT(err.code && err.message[0]);
}

/* Takes every complete frame; returns -EMSGSIZE once framing is lost. */
static int take_frames(struct frame_reader *r, struct model *m)
{
	const uint8_t *p, *mp;
	size_t n, mn;
	int rc, mrc;

	for (;;) {
		rc = frame_reader_next(r, &p, &n);
		if (rc == 0)
			return 0;
		mrc = model_next(m, &mp, &mn);
		FUZZ_ASSERT(rc == mrc);
		if (rc < 0)
			return rc;
		FUZZ_ASSERT(n == mn && n <= r->max && !memcmp(p, mp, n));
		decode(p, n);
	}
}

static size_t next_chunk(uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return 1 + (*seed >> 16) % 700;
}

static void stream(size_t max, uint32_t seed, const uint8_t *s, size_t len)
{
	struct model m = { s, len, 0, max };
	struct frame_reader r;
	size_t off = 0;
	int sv[2], rc = 0;

	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	frame_reader_init(&r, max);
	while (off < len && rc == 0) {
		size_t n = next_chunk(&seed);
		ssize_t got;

		if (n > len - off)
			n = len - off;
		FUZZ_ASSERT(write(sv[1], s + off, n) == (ssize_t)n);
		off += n;
		/* Drain what is there, as the broker does on each EPOLLIN. */
		do {
			got = frame_reader_fill(&r, sv[0]);
			FUZZ_ASSERT(got > 0 || got == -EAGAIN || got == -EMSGSIZE);
			rc = take_frames(&r, &m);
			FUZZ_ASSERT(got != -EMSGSIZE || rc == -EMSGSIZE);
		} while (got > 0 && rc == 0);
	}
	if (rc == 0) {
		/* Everything was fed and taken: the reader holds a partial
		 * frame exactly when the model has bytes left over. */
		const uint8_t *p;
		size_t n;

		FUZZ_ASSERT(model_next(&m, &p, &n) == 0);
		FUZZ_ASSERT(frame_reader_partial(&r) == (m.pos < len));
	}
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

/* The worker link: one datagram, read whole or refused. */
static void seqpacket(size_t max, const uint8_t *s, size_t len)
{
	uint8_t *buf = NULL;
	ssize_t n;
	int sv[2];

	if (len == 0 || len > 65536)
		return;
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_ASSERT(send(sv[1], s, len, 0) == (ssize_t)len);
	n = frame_read_blocking(sv[0], max, &buf);
	if (len < PROTO_HEADER_LEN) {
		FUZZ_ASSERT(n == -EPROTO);
	} else if (len > max + PROTO_HEADER_LEN || be32(s) > max) {
		FUZZ_ASSERT(n == -EMSGSIZE);
	} else if (be32(s) != len - PROTO_HEADER_LEN) {
		FUZZ_ASSERT(n == -EPROTO);
	} else {
		FUZZ_ASSERT(n == (ssize_t)(len - PROTO_HEADER_LEN));
		FUZZ_ASSERT(!memcmp(buf, s + PROTO_HEADER_LEN, (size_t)n));
		decode(buf, (size_t)n);
		free(buf);
	}
	close(sv[0]);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t max;

	if (size < 2)
		return 0;
	max = limits[data[0] % (sizeof(limits) / sizeof(limits[0]))];
	stream(max, data[1], data + 2, size - 2);
	seqpacket(max, data + 2, size - 2);
	return 0;
}
