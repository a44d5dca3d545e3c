/* SPDX-License-Identifier: MIT
 * Every closed set of names that crosses a process boundary (client link,
 * worker link, audit trail), one table each.  Programs hold the enums; the
 * strings exist only on the wire and in the audit database, and only here.
 * A list of these names written anywhere else drifts from this one.
 */
#ifndef KOTOBA_PROTO_NAMES_H
#define KOTOBA_PROTO_NAMES_H
#include <stdbool.h>
#include <stddef.h>

/* Kernel profiles.  `started`, `exit` and audit rows say approved,
 * unattended or container; a job says approved, unattended or engine;
 * an audit row where nothing ran says "". */
#define PROTO_PROFILES(X)                                                                          \
	X(PROFILE_NONE, "")                                                                        \
	X(PROFILE_APPROVED, "approved")                                                            \
	X(PROFILE_UNATTENDED, "unattended")                                                        \
	X(PROFILE_CONTAINER, "container")                                                          \
	X(PROFILE_ENGINE, "engine")

/* Who let a snippet run ("" where nothing ran). */
#define PROTO_APPROVERS(X)                                                                         \
	X(APPROVER_NONE, "")                                                                       \
	X(APPROVER_USER, "user")                                                                   \
	X(APPROVER_GRANT, "grant")                                                                 \
	X(APPROVER_CONTAINER, "container")                                                         \
	X(APPROVER_UNATTENDED, "unattended")

/* What became of an exec, as the audit trail and `exit` record it. */
#define PROTO_DECISIONS(X)                                                                         \
	X(DECISION_RAN, "ran")                                                                     \
	X(DECISION_CARD, "card")                                                                   \
	X(DECISION_DENIED, "denied")                                                               \
	X(DECISION_EXPIRED, "expired")                                                             \
	X(DECISION_REFUSED, "refused")                                                             \
	X(DECISION_NOT_OFFERED, "not-offered")                                                     \
	X(DECISION_FAILED, "failed")                                                               \
	X(DECISION_CANCELLED, "cancelled")

/* What an audit row records: a decision, a run's exit, a refused
 * connection, or a saved grant found expired (decision `expired`). */
#define PROTO_EVENTS(X)                                                                            \
	X(EVENT_DECISION, "decision")                                                              \
	X(EVENT_EXIT, "exit")                                                                      \
	X(EVENT_CONNECT, "connect")                                                                \
	X(EVENT_GRANT, "grant")

/* A receipt's entries (PROTOCOL.md, "exit", `blocked`): what kind of
 * operation the sandbox refused, which layer refused it, and who saw it
 * refused: the worker itself (the exec gate it answers), the snippet's
 * own interpreter (a report the snippet can forge or suppress), or the
 * broker's egress proxy (a network request it refused). */
#define PROTO_BLOCK_KINDS(X)                                                                       \
	X(BLOCK_WRITE, "write")                                                                    \
	X(BLOCK_CREATE, "create")                                                                  \
	X(BLOCK_DELETE, "delete")                                                                  \
	X(BLOCK_RENAME, "rename")                                                                  \
	X(BLOCK_EXEC, "exec")                                                                      \
	X(BLOCK_SECRET_READ, "secret-read")                                                        \
	X(BLOCK_CONNECT_UNIX, "connect-unix")                                                      \
	X(BLOCK_BIND, "bind")                                                                      \
	X(BLOCK_LISTEN, "listen")                                                                  \
	X(BLOCK_SIGNAL, "signal")                                                                  \
	X(BLOCK_SYSCALL, "syscall")                                                                \
	X(BLOCK_REQUEST, "request")

#define PROTO_BLOCKERS(X)                                                                          \
	X(BY_LANDLOCK, "landlock")                                                                 \
	X(BY_SECCOMP, "seccomp")                                                                   \
	X(BY_EXEC_GATE, "exec gate")                                                               \
	X(BY_MOUNT_MASK, "mount mask")                                                             \
	X(BY_EGRESS_PROXY, "egress proxy")

#define PROTO_WITNESSES(X)                                                                         \
	X(SEEN_BY_WORKER, "worker")                                                                \
	X(SEEN_BY_PYTHON, "python")                                                                \
	X(SEEN_BY_PROXY, "proxy")

/* The setup steps a `setup_error` names (PROTOCOL.md, "setup_error"): the
 * broker's fork, the worker's and the snippet's steps in the order they
 * run, then the supervisor's, and last the names the broker gives the
 * container engine's commands in a job. */
#define PROTO_STEPS(X)                                                                             \
	X(STEP_CGROUP, "cgroup")                                                                   \
	X(STEP_IDENTITY, "identity")                                                               \
	X(STEP_WORKER, "worker")                                                                   \
	X(STEP_FDS, "fds")                                                                         \
	X(STEP_SUPERVISOR, "supervisor")                                                           \
	X(STEP_SUBREAPER, "subreaper")                                                             \
	X(STEP_JOB, "job")                                                                         \
	X(STEP_SCRATCH, "scratch")                                                                 \
	X(STEP_ENV, "env")                                                                         \
	X(STEP_SECRETS, "secrets")                                                                 \
	X(STEP_NETWORK, "network")                                                                 \
	X(STEP_PIPE, "pipe")                                                                       \
	X(STEP_SIGNALS, "signals")                                                                 \
	X(STEP_FORK, "fork")                                                                       \
	X(STEP_SETSID, "setsid")                                                                   \
	X(STEP_PDEATHSIG, "pdeathsig")                                                             \
	X(STEP_CAPS, "caps")                                                                       \
	X(STEP_CWD, "cwd")                                                                         \
	X(STEP_NO_NEW_PRIVS, "no-new-privs")                                                       \
	X(STEP_LANDLOCK, "landlock")                                                               \
	X(STEP_SECCOMP_BUILD, "seccomp-build")                                                     \
	X(STEP_RLIMITS, "rlimits")                                                                 \
	X(STEP_SECCOMP, "seccomp")                                                                 \
	X(STEP_EXEC_GATE, "exec-gate")                                                             \
	X(STEP_VERIFY, "verify")                                                                   \
	X(STEP_EXEC, "exec")                                                                       \
	X(STEP_TIMEOUT, "timeout")                                                                 \
	X(STEP_SUPERVISE, "supervise")                                                             \
	X(STEP_WARM, "warm")                                                                       \
	X(STEP_CLEANUP, "cleanup")                                                                 \
	X(STEP_ENGINE, "engine")                                                                   \
	X(STEP_IMAGE, "image")                                                                     \
	X(STEP_CONTAINER, "container")

/* The `code` of an `error` frame (PROTOCOL.md, "Error codes"). */
#define PROTO_ERRORS(X)                                                                            \
	X(TOO_LARGE, "too-large")                                                                  \
	X(BAD_MSGPACK, "bad-msgpack")                                                              \
	X(BAD_UTF8, "bad-utf8")                                                                    \
	X(BAD_FIELD, "bad-field")                                                                  \
	X(UNKNOWN_TYPE, "unknown-type")                                                            \
	X(BAD_STATE, "bad-state")                                                                  \
	X(ID_IN_USE, "id-in-use")                                                                  \
	X(VERSION, "version")                                                                      \
	X(SNIPPET_TOO_LARGE, "snippet-too-large")                                                  \
	X(BAD_CWD, "bad-cwd")                                                                      \
	X(BUSY, "busy")                                                                            \
	X(NOT_OFFERED, "not-offered")                                                              \
	X(REFUSED, "refused")                                                                      \
	X(FROM_A_RUN, "from-a-run")                                                                \
	X(DENIED, "denied")                                                                        \
	X(EXPIRED, "expired")                                                                      \
	X(CANCELLED, "cancelled")                                                                  \
	X(NO_SUCH_RUN, "no-such-run")                                                              \
	X(NO_SUCH_CARD, "no-such-card")                                                            \
	X(SETUP_FAILED, "setup-failed")                                                            \
	X(WORKER_LOST, "worker-lost")                                                              \
	X(AUDIT, "audit-unavailable")                                                              \
	X(AUDIT_BROKEN, "audit-broken")                                                            \
	X(TOO_SLOW, "too-slow")                                                                    \
	X(QUOTA, "quota")                                                                          \
	X(INTERNAL, "internal")

#define PROTO_NAME_ENUM(id, s) id,
#define PROTO_ERROR_ENUM(id, s) PE_##id,
enum proto_profile { PROTO_PROFILES(PROTO_NAME_ENUM) PROFILE_COUNT };
enum proto_approver { PROTO_APPROVERS(PROTO_NAME_ENUM) APPROVER_COUNT };
enum proto_decision { PROTO_DECISIONS(PROTO_NAME_ENUM) DECISION_COUNT };
enum proto_event { PROTO_EVENTS(PROTO_NAME_ENUM) EVENT_COUNT };
enum proto_step { PROTO_STEPS(PROTO_NAME_ENUM) STEP_COUNT };
enum proto_block_kind { PROTO_BLOCK_KINDS(PROTO_NAME_ENUM) BLOCK_KIND_COUNT };
enum proto_blocker { PROTO_BLOCKERS(PROTO_NAME_ENUM) BLOCKER_COUNT };
enum proto_witness { PROTO_WITNESSES(PROTO_NAME_ENUM) WITNESS_COUNT };
enum proto_errcode { PROTO_ERRORS(PROTO_ERROR_ENUM) PE_COUNT };
#undef PROTO_NAME_ENUM
#undef PROTO_ERROR_ENUM

/* One table: its names, indexed by the enum. */
struct proto_names {
	const char *what; /* "profile", for messages */
	const char *const *name;
	unsigned n;
};
extern const struct proto_names proto_profiles, proto_approvers, proto_decisions, proto_events,
    proto_steps, proto_errcodes, proto_block_kinds, proto_blockers, proto_witnesses;

/* The name of value v; "?" for a value outside the table (a bug). */
const char *names_get(const struct proto_names *t, unsigned v);
/* The value named s (len bytes, not NUL-terminated), or -1. */
int names_find(const struct proto_names *t, const char *s, size_t len);

#define PROTO_PRELOAD_MAX 64      /* entries of job.preload, [sandbox] preload */
#define PROTO_MODULE_NAME_MAX 128 /* bytes of one */
/* A module name python3 can import: identifiers joined by '.', at most
 * PROTO_MODULE_NAME_MAX bytes. */
bool proto_module_name_ok(const char *s, size_t n);

static inline const char *profile_name(enum proto_profile p)
{
	return names_get(&proto_profiles, p);
}
static inline const char *approver_name(enum proto_approver a)
{
	return names_get(&proto_approvers, a);
}
static inline const char *decision_name(enum proto_decision d)
{
	return names_get(&proto_decisions, d);
}
static inline const char *event_name(enum proto_event e)
{
	return names_get(&proto_events, e);
}
static inline const char *step_name(enum proto_step st) { return names_get(&proto_steps, st); }
static inline const char *block_kind_name(enum proto_block_kind k)
{
	return names_get(&proto_block_kinds, k);
}
static inline const char *blocker_name(enum proto_blocker b)
{
	return names_get(&proto_blockers, b);
}
static inline const char *witness_name(enum proto_witness w)
{
	return names_get(&proto_witnesses, w);
}
static inline const char *perr_name(enum proto_errcode e) { return names_get(&proto_errcodes, e); }

/* Bit masks of the profiles each message allows. */
#define PROFILE_BIT(p) (1u << (p))
#define PROFILES_RAN                                                                               \
	(PROFILE_BIT(PROFILE_APPROVED) | PROFILE_BIT(PROFILE_UNATTENDED) |                         \
	 PROFILE_BIT(PROFILE_CONTAINER))
#define PROFILES_AUDIT (PROFILES_RAN | PROFILE_BIT(PROFILE_NONE))
#define PROFILES_JOB                                                                               \
	(PROFILE_BIT(PROFILE_APPROVED) | PROFILE_BIT(PROFILE_UNATTENDED) |                         \
	 PROFILE_BIT(PROFILE_ENGINE))
#endif
