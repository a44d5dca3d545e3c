/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/egress/policy.h"

#define EGRESS_NAME(e, s) [e] = s,
const char *const egress_mode_names[EGRESS_MODE_COUNT + 1] = { EGRESS_MODES(EGRESS_NAME) };
#undef EGRESS_NAME

int egress_mode_parse(const char *s)
{
	for (int i = 0; i < EGRESS_MODE_COUNT; i++)
		if (!strcmp(s, egress_mode_names[i]))
			return i;
	return -1;
}

const char *egress_mode_name(enum egress_mode m)
{
	return (unsigned)m < EGRESS_MODE_COUNT ? egress_mode_names[m] : "?";
}

const char *egress_host_problem(const char *s, size_t n)
{
	if (n >= 2 && !strncmp(s, "*.", 2)) {
		s += 2;
		n -= 2;
	}
	if (n == 0 || n > 253)
		return "is not a host name, *.name pattern or address";
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr(".-_:", s[i]))
			return "is not a host name, *.name pattern or address";
	return NULL;
}

bool egress_hosts_add(struct egress_hosts *h, const char *entry)
{
	if (h->n >= EGRESS_HOSTS_MAX || egress_host_problem(entry, strlen(entry)))
		return false;
	h->pattern[h->n] = strdup(entry);
	return h->pattern[h->n] && ++h->n;
}

void egress_hosts_free(struct egress_hosts *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->pattern[i]);
	h->n = 0;
}

/* host equals name, or is below it for a "*.name" pattern. */
static bool host_matches(const char *pattern, const char *host)
{
	size_t hl = strlen(host), sl;

	if (strncmp(pattern, "*.", 2))
		return !strcasecmp(pattern, host);
	sl = strlen(pattern + 1); /* ".name" */
	return hl > sl && !strcasecmp(host + hl - sl, pattern + 1);
}

bool egress_hosts_match(const struct egress_hosts *h, const char *host)
{
	for (size_t i = 0; i < h->n; i++)
		if (host_matches(h->pattern[i], host))
			return true;
	return false;
}

bool egress_hosts_match_addr(const struct egress_hosts *h, const struct sockaddr *sa)
{
	char text[INET6_ADDRSTRLEN];
	const void *a = sa->sa_family == AF_INET
				? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
				: (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;

	if (!inet_ntop(sa->sa_family, a, text, sizeof(text)))
		return false;
	return egress_hosts_match(h, text);
}

static bool v4_internal(uint32_t a)
{
	static const struct {
		uint32_t net, mask;
	} nets[] = {
		{ 0x00000000, 0xff000000 }, /* 0/8, "this network" */
		{ 0x0a000000, 0xff000000 }, /* 10/8 */
		{ 0x64400000, 0xffc00000 }, /* 100.64/10, carrier-grade NAT */
		{ 0x7f000000, 0xff000000 }, /* 127/8, loopback */
		{ 0xa9fe0000, 0xffff0000 }, /* 169.254/16, link-local: cloud metadata */
		{ 0xac100000, 0xfff00000 }, /* 172.16/12 */
		{ 0xc0000000, 0xffffff00 }, /* 192.0.0/24, protocol assignments */
		{ 0xc0a80000, 0xffff0000 }, /* 192.168/16 */
		{ 0xc6120000, 0xfffe0000 }, /* 198.18/15, benchmarking */
		{ 0xe0000000, 0xe0000000 }, /* 224/3: multicast, reserved, broadcast */
	};

	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		if ((a & nets[i].mask) == nets[i].net)
			return true;
	return false;
}

bool egress_addr_is_internal(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return v4_internal(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family != AF_INET6)
		return true;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6) || IN6_IS_ADDR_V4COMPAT(a6)) {
		uint32_t v4;

		memcpy(&v4, &a6->s6_addr[12], 4);
		return v4_internal(ntohl(v4));
	}
	return IN6_IS_ADDR_UNSPECIFIED(a6) || IN6_IS_ADDR_LOOPBACK(a6) ||
	       IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_SITELOCAL(a6) ||
	       IN6_IS_ADDR_MULTICAST(a6) || (a6->s6_addr[0] & 0xfe) == 0xfc || /* fc00::/7 */
	       (a6->s6_addr[0] == 0x20 && a6->s6_addr[1] == 0x02) ||         /* 6to4 */
	       (a6->s6_addr[0] == 0x00 && a6->s6_addr[1] == 0x64 &&          /* NAT64 */
		a6->s6_addr[2] == 0xff && a6->s6_addr[3] == 0x9b);
}

const char *egress_host_refusal(const struct egress_policy *p, const char *host)
{
	if (p->mode == EGRESS_NONE)
		return "runs nobody read have no network ([egress] unattended = none)";
	if (egress_hosts_match(&p->deny, host))
		return "the host is on [egress] deny_hosts";
	if (p->mode == EGRESS_ALLOWLIST && !egress_hosts_match(&p->allow, host))
		return "the host is not on [egress] allow_hosts";
	return NULL;
}

const char *egress_addr_refusal(const struct egress_policy *p, const char *host,
				const struct sockaddr *sa)
{
	if (egress_hosts_match_addr(&p->deny, sa))
		return "the address is on [egress] deny_hosts";
	if (egress_addr_is_internal(sa) && !egress_hosts_match(&p->allow, host) &&
	    !egress_hosts_match_addr(&p->allow, sa))
		return "the host resolves to a loopback, private or link-local address, which "
		       "only [egress] allow_hosts opens";
	return NULL;
}
