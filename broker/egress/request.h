/* SPDX-License-Identifier: MIT
 * A request head as the egress proxy reads it (request.c).
 */
#ifndef KOTOBA_EGRESS_REQUEST_H
#define KOTOBA_EGRESS_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#define EGRESS_HEADERS_MAX 100

struct egress_request {
	char method[16];
	char *target;  /* as sent: absolute-form, authority-form, or origin-form in TLS */
	char host[256];
	char port[8];
	char *path;    /* origin-form, for upstream */
	size_t n_headers;
	char *name[EGRESS_HEADERS_MAX], *value[EGRESS_HEADERS_MAX];
	bool has_body, chunked_or_te;
};

/* The head in place (buf[0..head_len), ending in the blank line, NUL at
 * head_len): request line, then headers, each NUL-terminated.  NULL, or
 * why it is refused (400). */
const char *egress_parse_head(char *buf, size_t head_len, struct egress_request *q);
/* Why the request's Host header does not match its target, or NULL. */
const char *egress_host_header_refusal(const struct egress_request *q);
/* Hop-by-hop headers and the proxy's own: never forwarded. */
bool egress_hop_by_hop(const char *name);
/* Why the `get` rule refuses the request, or NULL. */
const char *egress_get_rule(const struct egress_request *q);

#endif
