/* SPDX-License-Identifier: MIT
 * Fuzz target: the egress proxy's reading of a request head
 * (broker/egress/request.c), fed as http.c feeds it: up to the first
 * blank line, NUL-terminated, with no NUL inside (read_head refuses
 * those).  Checked: an accepted head has a token method, a target, a host
 * and a port of digits (or an origin-form path for inside TLS), and every
 * header pointer lies inside the buffer, and no value or target holds a
 * CR, an LF or another control; the `get` rule never lets a
 * head with Transfer-Encoding or a non-zero Content-Length through.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "broker/egress/request.h"
#include "tests/fuzz/fuzz.h"

#define HEAD_MAX 16384

static bool inside(const char *p, const char *buf, size_t len)
{
	return p >= buf && p <= buf + len;
}

static void check_accepted(const struct egress_request *q, const char *buf, size_t len)
{
	const char *rule = egress_get_rule(q), *host_refusal = egress_host_header_refusal(q);
	size_t hosts = 0;

	FUZZ_ASSERT(q->method[0] && inside(q->target, buf, len));
	for (const char *m = q->method; *m; m++)
		FUZZ_ASSERT(*m > ' ' && *m < 127);
	if (q->target[0] == '/') {
		FUZZ_ASSERT(q->path == q->target);
	} else {
		FUZZ_ASSERT(q->host[0] && q->port[0]);
		for (const char *p = q->port; *p; p++)
			FUZZ_ASSERT(isdigit((unsigned char)*p));
	}
	FUZZ_ASSERT(q->n_headers <= EGRESS_HEADERS_MAX);
	for (const char *t = q->target; *t; t++)
		FUZZ_ASSERT((unsigned char)*t >= ' ' && *t != 127);
	for (size_t i = 0; i < q->n_headers; i++) {
		FUZZ_ASSERT(inside(q->name[i], buf, len) && inside(q->value[i], buf, len));
		FUZZ_ASSERT(!strpbrk(q->value[i], "\r\n"));
		(void)egress_hop_by_hop(q->name[i]);
		if (!strcasecmp(q->name[i], "Transfer-Encoding"))
			FUZZ_ASSERT(rule);
		hosts += !strcasecmp(q->name[i], "Host");
	}
	if (hosts > 1)
		FUZZ_ASSERT(host_refusal);
	if (q->has_body || q->chunked_or_te)
		FUZZ_ASSERT(rule);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[HEAD_MAX + 1];
	struct egress_request q;
	const uint8_t *end;
	size_t head_len;

	if (size > HEAD_MAX || memchr(data, '\0', size))
		return 0;
	end = memmem(data, size, "\r\n\r\n", 4);
	if (!end)
		return 0;
	head_len = (size_t)(end - data) + 4;
	memcpy(buf, data, size);
	buf[size] = '\0';
	if (!egress_parse_head(buf, head_len, &q))
		check_accepted(&q, buf, size);
	return 0;
}
