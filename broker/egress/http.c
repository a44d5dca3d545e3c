/* SPDX-License-Identifier: MIT
 * The egress proxy's HTTP: one request per connection, read whole up to
 * the end of its head (bounded in size and time), checked against the
 * policy, then sent upstream with "Connection: close" and its answer
 * relayed back.  In the `get` mode a request goes out only as GET or HEAD
 * without a body: no Content-Length above 0 and no Transfer-Encoding at
 * all (so no chunked body and no smuggling through both), and nothing the
 * client sends after the head is forwarded.  In `allowlist` and `any`,
 * and for a run a person approved (approved = proxy, served as `any`:
 * wire.h), the connection is relayed both ways once the head has gone,
 * and CONNECT is tunnelled as is.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "broker/egress/egress.h"
#include "broker/egress/request.h"

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

/* A client still sending the body of a refused request would get a reset
 * if the socket closed with its bytes unread, and a reset may drop the
 * answer before it is read: the proxy says it is done writing, and reads
 * (and drops) what still comes, for a bounded time and size. */
#define LINGER_BYTES (1 << 20)
#define LINGER_S 2

static double now_s(void);

static void linger(struct egress_io *c)
{
	struct timeval tv = { LINGER_S, 0 };
	double deadline = now_s() + LINGER_S;
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	if (c->tls)
		egress_tls_shut_wr(c);
	else
		shutdown(c->fd, SHUT_WR);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* The deadline is the whole wait's: a client that trickles a byte
	 * at a time does not keep the thread. */
	while (total < LINGER_BYTES && now_s() < deadline &&
	       (n = egress_io_read(c, buf, sizeof(buf))) > 0)
		total += (size_t)n;
}

/* The whole answer, head and body, in out: its length, or 0 when it
 * does not fit. */
static size_t format_refusal(char *out, size_t cap, int status, const char *body)
{
	int n = snprintf(out, cap,
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\nX-Kotoba-Egress: refused\r\n"
			 "\r\n%s\n",
			 status, status_text(status), strlen(body) + 1, body);

	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void egress_refuse(struct egress_io *client, int status, const char *body)
{
	char out[EGRESS_HEAD_MAX / 2 + 256];
	size_t n = format_refusal(out, sizeof(out), status, body);

	if (n && egress_io_write(client, out, n) == 0)
		linger(client);
}

void egress_refuse_now(int fd, int status, const char *body)
{
	char out[1024];
	size_t n = format_refusal(out, sizeof(out), status, body);

	if (n && send(fd, out, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n)
		shutdown(fd, SHUT_WR);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Up to the blank line that ends the head; 0 with *head_len set, or the
 * status to refuse with.  The socket's receive timeout bounds each read,
 * the deadline the whole head. */
static int read_head(struct egress_io *c, char *buf, size_t cap, size_t *got, size_t *head_len)
{
	double deadline = now_s() + EGRESS_HEAD_TIMEOUT_S;
	char *end;

	*got = 0;
	for (;;) {
		ssize_t n;

		if (*got == cap - 1)
			return 431;
		if (now_s() > deadline)
			return 408;
		n = egress_io_read(c, buf + *got, cap - 1 - *got);
		if (n == 0)
			return -1; /* gone before a whole request: nothing to answer */
		if (n < 0)
			return n == -EAGAIN ? 408 : -1;
		*got += (size_t)n;
		buf[*got] = '\0';
		if (memchr(buf, '\0', *got))
			return 400;
		if ((end = strstr(buf, "\r\n\r\n"))) {
			*head_len = (size_t)(end - buf) + 4;
			return 0;
		}
	}
}

static int connect_within(const struct addrinfo *ai)
{
	struct pollfd pfd;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
	socklen_t el = sizeof(err);
	struct timeval tv = { EGRESS_IDLE_TIMEOUT_S, 0 };
	int one = 1;

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return -err;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, EGRESS_CONNECT_TIMEOUT_S * 1000) != 1)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	/* Blocking from here, bounded by the timeouts; no Nagle delay on
	 * the small writes of a TLS handshake relayed through here. */
	if (fcntl(fd, F_SETFL, 0) < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

/* Resolved here, in the proxy, and each address checked as it is the
 * one connected to: a name that resolves to 127.0.0.1 (DNS rebinding
 * included) is refused unless allow_hosts lists it. */
static int open_upstream(const struct egress_policy *p, const char *host, const char *port,
			 int *status, char *why, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG }, *res;
	const char *refused = NULL;
	int rc, fd = -1, last = 0;

	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		*status = 502;
		snprintf(why, len, "cannot resolve %s: %s", host, gai_strerror(rc));
		return -1;
	}
	for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		const char *r = egress_addr_refusal(p, host, ai->ai_addr);

		if (r) {
			refused = r;
			continue;
		}
		fd = connect_within(ai);
		if (fd < 0)
			last = -fd;
	}
	freeaddrinfo(res);
	if (fd >= 0)
		return fd;
	*status = refused && !last ? 403 : last == ETIMEDOUT ? 504 : 502;
	snprintf(why, len, "%s", refused && !last ? refused : strerrordesc_np(last ? last : EHOSTUNREACH));
	return -1;
}

/* The bytes sent, or -errno. */
static ssize_t send_head(struct egress_io *up, const struct egress_request *q, bool passthrough)
{
	char *buf = malloc(EGRESS_HEAD_MAX + 512);
	size_t n = 0;
	ssize_t rc;

	if (!buf)
		return -ENOMEM;
	n += (size_t)snprintf(buf, EGRESS_HEAD_MAX, "%s %s HTTP/1.1\r\n", q->method, q->path);
	for (size_t i = 0; i < q->n_headers; i++) {
		if (egress_hop_by_hop(q->name[i]) && !(passthrough && !strcasecmp(q->name[i], "TE")))
			continue;
		n += (size_t)snprintf(buf + n, EGRESS_HEAD_MAX + 512 - n, "%s: %s\r\n", q->name[i],
				      q->value[i]);
	}
	n += (size_t)snprintf(buf + n, EGRESS_HEAD_MAX + 512 - n, "Connection: close\r\n\r\n");
	rc = egress_io_write(up, buf, n);
	free(buf);
	return rc < 0 ? rc : (ssize_t)n;
}

/* Copies what comes from one side to the other until EOF or silence;
 * both ways when `both`, else the answer only.  Returns bytes down, and
 * adds the bytes sent up to *sent. */
static uint64_t relay(struct egress_io *client, struct egress_io *up, bool both, uint64_t *sent)
{
	static _Thread_local char buf[65536];
	uint64_t down = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = up->fd, .events = POLLIN },
				       { .fd = client->fd, .events = POLLIN } };
		bool pending = up->tls && egress_tls_pending(up);
		ssize_t n;

		if (!pending && poll(p, both ? 2 : 1, EGRESS_IDLE_TIMEOUT_S * 1000) <= 0)
			return down;
		if (pending || p[0].revents) {
			n = egress_io_read(up, buf, sizeof(buf));
			if (n <= 0 || egress_io_write(client, buf, (size_t)n) < 0)
				return down;
			down += (uint64_t)n;
		}
		if (both && p[1].revents) {
			n = egress_io_read(client, buf, sizeof(buf));
			if (n <= 0 || egress_io_write(up, buf, (size_t)n) < 0)
				return down;
			*sent += (uint64_t)n;
		}
	}
}

static void describe(char *out, size_t len, const struct egress_request *q, bool tls)
{
	if (tls || q->target[0] == '/')
		snprintf(out, len, "%s https://%s%s%s%s", q->method, q->host,
			 strcmp(q->port, "443") ? ":" : "", strcmp(q->port, "443") ? q->port : "",
			 q->path);
	else
		snprintf(out, len, "%s %s", q->method, q->target);
}

static void refuse_logged(struct egress_run *r, struct egress_io *c, int status, const char *what,
			  const char *why)
{
	char body[EGRESS_HEAD_MAX / 2];

	snprintf(body, sizeof(body), "%s refused: %s", what, why);
	egress_log(r, "%s (%d)", body, status);
	/* Queued at the broker before the run can read the refusal. */
	egress_report_refusal(r, what, why);
	egress_refuse(c, status, body);
}

static void tunnel(struct egress_run *r, struct egress_io *c, struct egress_request *q)
{
	char why[256], what[600], rule[64];
	int status;
	int fd = open_upstream(r->policy, q->host, q->port, &status, why, sizeof(why));
	struct egress_io up = { fd, NULL };
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

	snprintf(what, sizeof(what), "CONNECT %s:%s", q->host, q->port);
	if (fd < 0) {
		refuse_logged(r, c, status, what, why);
		return;
	}
	egress_log(r, "%s tunnelled ([egress] %s)", what,
		   egress_rule_name(r, rule, sizeof(rule)));
	/* The host on the run's record before the run hears it may send. */
	egress_report_traffic(r, q->host, q->port, "CONNECT", 0, 0, 0);
	if (egress_io_write(c, ok, sizeof(ok) - 1) == 0) {
		uint64_t sent = 0, down = relay(c, &up, true, &sent);

		egress_log(r, "%s: %llu bytes up, %llu down", what, (unsigned long long)sent,
			   (unsigned long long)down);
		egress_report_traffic(r, q->host, q->port, "CONNECT", 0, sent, down);
	}
	close(fd);
}

void egress_serve_request(struct egress_run *r, struct egress_io *c, const char *host,
			  const char *port, egress_wrap_fn wrap)
{
	char *buf = malloc(EGRESS_HEAD_MAX + 1), what[EGRESS_HEAD_MAX / 4], why[256];
	size_t got = 0, head_len = 0;
	struct egress_request q;
	const char *bad, *refusal;
	int status, fd;
	struct egress_io up = { -1, NULL };
	uint64_t sent = 0, down;
	ssize_t head;

	if (!buf) {
		egress_refuse(c, 503, "the egress proxy is out of memory");
		return;
	}
	status = read_head(c, buf, EGRESS_HEAD_MAX + 1, &got, &head_len);
	if (status > 0) {
		refuse_logged(r, c, status, "a request",
			      status == 431 ? "its head is over 16 KiB"
			      : status == 408 ? "its head did not arrive within 15 s"
					      : "it is not HTTP/1.x");
		goto out;
	}
	if (status < 0)
		goto out;
	bad = egress_parse_head(buf, head_len, &q);
	if (!bad && host) {
		/* Inside TLS: the host is the CONNECT's, whatever Host says. */
		if (q.target[0] != '/')
			bad = "inside TLS a request names a path";
		snprintf(q.host, sizeof(q.host), "%s", host);
		snprintf(q.port, sizeof(q.port), "%s", port);
	} else if (!bad && q.target[0] == '/') {
		bad = "a proxy request names an absolute http:// URL";
	}
	if (!bad && strcasecmp(q.method, "CONNECT"))
		bad = egress_host_header_refusal(&q);
	if (bad) {
		refuse_logged(r, c, 400, "a request", bad);
		goto out;
	}
	if (!host && !strcasecmp(q.method, "CONNECT")) {
		refusal = egress_host_refusal(r->policy, q.host);
		snprintf(what, sizeof(what), "CONNECT %s:%s", q.host, q.port);
		if (refusal)
			refuse_logged(r, c, 403, what, refusal);
		else if (r->policy->mode == EGRESS_GET)
			egress_serve_tls(r, c->fd, q.host, q.port);
		else
			tunnel(r, c, &q);
		goto out;
	}
	describe(what, sizeof(what), &q, host != NULL);
	refusal = egress_host_refusal(r->policy, q.host);
	if (refusal) {
		refuse_logged(r, c, 403, what, refusal);
		goto out;
	}
	if (r->policy->mode == EGRESS_GET && (refusal = egress_get_rule(&q))) {
		refuse_logged(r, c, 405, what, refusal);
		goto out;
	}
	fd = open_upstream(r->policy, q.host, q.port, &status, why, sizeof(why));
	if (fd < 0) {
		refuse_logged(r, c, status, what, why);
		goto out;
	}
	up.fd = fd;
	if (wrap && wrap(&up, q.host, why, sizeof(why)) < 0) {
		refuse_logged(r, c, 502, what, why);
		goto close_up;
	}
	if ((head = send_head(&up, &q, r->policy->mode != EGRESS_GET)) < 0)
		goto close_up;
	/* The request on the run's record before any answer reaches the run;
	 * what follows, when the connection ends, before the run's side of
	 * it is closed. */
	egress_report_traffic(r, q.host, q.port, q.method, 1, (uint64_t)head, 0);
	/* Bytes of the body that came with the head (allowlist, any). */
	if (r->policy->mode != EGRESS_GET && got > head_len) {
		if (egress_io_write(&up, buf + head_len, got - head_len) < 0)
			goto close_up;
		sent += got - head_len;
	}
	down = relay(c, &up, r->policy->mode != EGRESS_GET, &sent);
	egress_log(r, "%s: %llu bytes up, %llu down", what,
		   (unsigned long long)(sent + (uint64_t)head), (unsigned long long)down);
	egress_report_traffic(r, q.host, q.port, q.method, 0, sent, down);
close_up:
	egress_tls_close(&up);
	close(fd);
out:
	free(buf);
}

void egress_serve(struct egress_run *r, int fd)
{
	struct egress_io c = { fd, NULL };

	egress_serve_request(r, &c, NULL, NULL, NULL);
}
