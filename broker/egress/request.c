/* SPDX-License-Identifier: MIT
 * The egress proxy's reading of a request head: no I/O, so the fuzz
 * harness drives it alone (tests/fuzz/fuzz_egress.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/egress/request.h"

/* A lone CR or LF, or another control, would end a line or a header
 * early for a server that reads leniently: a second header or request
 * the proxy never checked.  (A tab is a header value's whitespace.) */
static bool has_controls(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < ' ' && *s != '\t') || *s == 127)
			return true;
	return false;
}

static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 127 || strchr("()<>@,;:\\\"/[]?={}", *s))
			return false;
	return true;
}

/* "host[:port]" (a bracketed IPv6 literal too) into q. */
static bool split_authority(const char *a, size_t len, const char *dflt, struct egress_request *q)
{
	const char *colon, *host = a;
	size_t hl;

	if (len && a[0] == '[') {
		const char *close = memchr(a, ']', len);

		if (!close)
			return false;
		host = a + 1;
		hl = (size_t)(close - host);
		colon = close + 1 < a + len && close[1] == ':' ? close + 1 : NULL;
		if (!colon && close + 1 != a + len)
			return false;
	} else {
		colon = memchr(a, ':', len);
		hl = colon ? (size_t)(colon - a) : len;
	}
	if (hl == 0 || hl >= sizeof(q->host))
		return false;
	memcpy(q->host, host, hl);
	q->host[hl] = '\0';
	if (colon) {
		size_t pl = (size_t)(a + len - colon - 1);

		if (pl == 0 || pl >= sizeof(q->port) || strspn(colon + 1, "0123456789") < pl)
			return false;
		memcpy(q->port, colon + 1, pl);
		q->port[pl] = '\0';
		if (atoi(q->port) < 1 || atoi(q->port) > 65535)
			return false;
	} else {
		snprintf(q->port, sizeof(q->port), "%s", dflt);
	}
	for (const char *s = q->host; *s; s++)
		if (*s <= ' ' || *s >= 127 || strchr("/?#@\\", *s))
			return false;
	return true;
}

static const char *parse_target(struct egress_request *q)
{
	char *t = q->target, *slash;

	if (!strcasecmp(q->method, "CONNECT"))
		return split_authority(t, strlen(t), "443", q) ? NULL : "a CONNECT names host:port";
	if (t[0] == '/') {
		q->path = t;
		return NULL; /* inside TLS: the CONNECT named the host */
	}
	if (strncasecmp(t, "http://", 7))
		return "a proxy request names an absolute http:// URL";
	t += 7;
	slash = t + strcspn(t, "/?");
	if (!split_authority(t, (size_t)(slash - t), "80", q))
		return "the URL's host is not a host name or address";
	q->path = *slash == '/' ? slash : (char *)"/";
	if (*slash == '?') {
		/* "http://h?q": the path is "/" and the query stays. */
		q->path = slash - 1;
		*q->path = '/';
	}
	return NULL;
}

/* The head in place: request line, then headers, each NUL-terminated. */
const char *egress_parse_head(char *buf, size_t head_len, struct egress_request *q)
{
	char *line = buf, *end = buf + head_len - 2, *sp1, *sp2, *next;

	memset(q, 0, sizeof(*q));
	next = strstr(line, "\r\n");
	*next = '\0';
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || (size_t)(sp1 - line) >= sizeof(q->method))
		return "the request line is not METHOD TARGET HTTP/1.x";
	*sp1 = *sp2 = '\0';
	memcpy(q->method, line, (size_t)(sp1 - line) + 1);
	q->target = sp1 + 1;
	if (!token(q->method) || strncmp(sp2 + 1, "HTTP/1.", 7) || !*q->target ||
	    has_controls(q->target) || strchr(q->target, '\t'))
		return "the request line is not METHOD TARGET HTTP/1.x";
	for (line = next + 2; line < end; line = next + 2) {
		char *colon, *v;

		next = strstr(line, "\r\n");
		*next = '\0';
		if (has_controls(line))
			return "a header line holds a control character (a lone CR or LF included)";
		colon = strchr(line, ':');
		if (!colon || line[0] == ' ' || line[0] == '\t')
			return "a header line is not Name: value (folded lines are refused)";
		*colon = '\0';
		if (!token(line))
			return "a header's name is not a token";
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (q->n_headers == EGRESS_HEADERS_MAX)
			return "more than 100 headers";
		q->name[q->n_headers] = line;
		q->value[q->n_headers++] = v;
		if (!strcasecmp(line, "Transfer-Encoding"))
			q->chunked_or_te = true;
		if (!strcasecmp(line, "Content-Length") && strspn(v, "0 \t") != strlen(v))
			q->has_body = true;
	}
	return parse_target(q);
}

/* A Host header that names another host or port than the one connected
 * to would reach another site of a shared server (a CDN's, a virtual
 * host's) than the one the policy checked: the request says one thing to
 * the proxy and another to the server. */
const char *egress_host_header_refusal(const struct egress_request *q)
{
	struct egress_request h;
	size_t n = 0;

	for (size_t i = 0; i < q->n_headers; i++) {
		const char *v = q->value[i];
		size_t len = strlen(v);

		if (strcasecmp(q->name[i], "Host"))
			continue;
		if (++n > 1)
			return "a request has more than one Host header";
		while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
			len--;
		memset(&h, 0, sizeof(h));
		if (!split_authority(v, len, q->port, &h))
			return "the Host header is not a host name or address";
		if (strcasecmp(h.host, q->host) || strcmp(h.port, q->port))
			return "the Host header names another host than the request";
	}
	return NULL;
}

/* Hop-by-hop headers and the proxy's own: never forwarded. */
bool egress_hop_by_hop(const char *name)
{
	static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection",
					   "Proxy-Authorization", "Proxy-Authenticate", "TE",
					   "Trailer", "Upgrade" };

	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (!strcasecmp(name, hop[i]))
			return true;
	return false;
}

/* Why the `get` rule refuses the request, or NULL. */
const char *egress_get_rule(const struct egress_request *q)
{
	if (strcmp(q->method, "GET") && strcmp(q->method, "HEAD"))
		return "a grant covers plain GET requests";
	if (q->chunked_or_te)
		return "a grant covers plain GET requests, and this one has a body "
		       "(Transfer-Encoding)";
	if (q->has_body)
		return "a grant covers plain GET requests, and this one has a body (Content-Length)";
	return NULL;
}

