/* SPDX-License-Identifier: MIT
 * The name tables of proto/names.h, built from its lists. */
#include <string.h>

#include "proto/names.h"

#define NAME_STR(id, s) [id] = s,
#define ERROR_STR(id, s) [PE_##id] = s,
static const char *const profile_v[] = { PROTO_PROFILES(NAME_STR) };
static const char *const approver_v[] = { PROTO_APPROVERS(NAME_STR) };
static const char *const decision_v[] = { PROTO_DECISIONS(NAME_STR) };
static const char *const event_v[] = { PROTO_EVENTS(NAME_STR) };
static const char *const step_v[] = { PROTO_STEPS(NAME_STR) };
static const char *const block_kind_v[] = { PROTO_BLOCK_KINDS(NAME_STR) };
static const char *const blocker_v[] = { PROTO_BLOCKERS(NAME_STR) };
static const char *const witness_v[] = { PROTO_WITNESSES(NAME_STR) };
static const char *const errcode_v[] = { PROTO_ERRORS(ERROR_STR) };

const struct proto_names proto_profiles = { "profile", profile_v, PROFILE_COUNT };
const struct proto_names proto_approvers = { "approver", approver_v, APPROVER_COUNT };
const struct proto_names proto_decisions = { "decision", decision_v, DECISION_COUNT };
const struct proto_names proto_events = { "event", event_v, EVENT_COUNT };
const struct proto_names proto_steps = { "setup step", step_v, STEP_COUNT };
const struct proto_names proto_block_kinds = { "blocked kind", block_kind_v, BLOCK_KIND_COUNT };
const struct proto_names proto_blockers = { "blocker", blocker_v, BLOCKER_COUNT };
const struct proto_names proto_witnesses = { "witness", witness_v, WITNESS_COUNT };
const struct proto_names proto_errcodes = { "error code", errcode_v, PE_COUNT };

const char *names_get(const struct proto_names *t, unsigned v)
{
	return v < t->n ? t->name[v] : "?";
}

int names_find(const struct proto_names *t, const char *s, size_t len)
{
	for (unsigned i = 0; i < t->n; i++)
		if (strlen(t->name[i]) == len && (len == 0 || memcmp(t->name[i], s, len) == 0))
			return (int)i;
	return -1;
}

static bool ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool proto_module_name_ok(const char *s, size_t n)
{
	bool start = true;

	if (n == 0 || n > PROTO_MODULE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.' && !start) {
			start = true;
			continue;
		}
		if (!ident_start(c) && (start || c < '0' || c > '9'))
			return false;
		start = false;
	}
	return !start;
}
