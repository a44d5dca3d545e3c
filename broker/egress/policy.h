/* SPDX-License-Identifier: MIT
 * The egress proxy's host policy ([egress] in the broker's config): which
 * methods go out, to which hosts and addresses.
 */
#ifndef KOTOBA_EGRESS_POLICY_H
#define KOTOBA_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* [egress] unattended; the names are the config's. */
#define EGRESS_MODES(X)                                                                          \
	X(EGRESS_GET, "get")                                                                       \
	X(EGRESS_ALLOWLIST, "allowlist")                                                           \
	X(EGRESS_NONE, "none")                                                                     \
	X(EGRESS_ANY, "any")
#define EGRESS_ENUM(e, s) e,
enum egress_mode { EGRESS_MODES(EGRESS_ENUM) EGRESS_MODE_COUNT };
#undef EGRESS_ENUM

/* Their names, NULL-terminated (the config's choices). */
extern const char *const egress_mode_names[EGRESS_MODE_COUNT + 1];
/* [egress] approved: runs a person read keep the host's network, or
 * go through the proxy too (any method, recorded). */
#define EGRESS_APPROVED(X)                                                                       \
	X(EGRESS_APPROVED_DIRECT, "direct")                                                        \
	X(EGRESS_APPROVED_PROXY, "proxy")
#define EGRESS_ENUM(e, s) e,
enum egress_approved { EGRESS_APPROVED(EGRESS_ENUM) };
#undef EGRESS_ENUM
#define EGRESS_STRING(e, s) s,
#define EGRESS_APPROVED_NAMES { EGRESS_APPROVED(EGRESS_STRING) NULL }

/* What is wrong with one allow_hosts or deny_hosts entry (n bytes at
 * s): NULL when it is a name, a "*.name" pattern or an address. */
const char *egress_host_problem(const char *s, size_t n);

/* -1 when the name is none of them. */
int egress_mode_parse(const char *s);
const char *egress_mode_name(enum egress_mode m);

#define EGRESS_HOSTS_MAX 256

struct egress_hosts {
	size_t n;
	char *pattern[EGRESS_HOSTS_MAX]; /* "name", "*.suffix" or an address */
};

struct egress_policy {
	enum egress_mode mode;
	struct egress_hosts allow, deny;
};

/* Adds one entry; false when the list is full or the entry is not a
 * name, a "*.name" pattern or an address. */
bool egress_hosts_add(struct egress_hosts *h, const char *entry);
/* Frees the list's entries; it is empty after. */
void egress_hosts_free(struct egress_hosts *h);
/* A host (a name or an address literal) the list names. */
bool egress_hosts_match(const struct egress_hosts *h, const char *host);
/* An address the list names literally. */
bool egress_hosts_match_addr(const struct egress_hosts *h, const struct sockaddr *sa);

/* Loopback, private, link-local, ULA, CGNAT, unspecified, multicast or
 * reserved: a place on the host's side, not the public Internet. */
bool egress_addr_is_internal(const struct sockaddr *sa);

/* Whether a connection to host (as the request named it) at sa may be
 * made: NULL, or why not, in words for the refused request's answer. */
const char *egress_addr_refusal(const struct egress_policy *p, const char *host,
				const struct sockaddr *sa);
/* Whether the request's host may be asked at all (before resolving):
 * NULL or why not. */
const char *egress_host_refusal(const struct egress_policy *p, const char *host);

#endif
