/* SPDX-License-Identifier: MIT
 * Persistent state of the broker: saved grants and the audit trail, in one
 * SQLite database <state_dir>/kotoba.db (WAL, synchronous=FULL).
 *
 * Every call is one transaction: after a crash (SIGKILL, power loss) the
 * database holds either all of a change or none of it.  Every function
 * returns 0 or a negative errno-style code and, on failure, leaves a
 * sentence for store_last_error():
 *   -EINVAL   bad argument (e.g. a family or card id with odd characters)
 *   -ENOENT   store_grant_touch on a grant that does not exist
 *   -EBUSY    another process held the database past the busy timeout
 *   -ENOSPC   disk full;  -EROFS / -EACCES  cannot write
 *   -EUCLEAN  the database is corrupt or was edited by hand
 *   -EBADMSG  store_audit_verify: the hash chain is broken
 *   -EDQUOT   store_audit_append: the uid's audit quota for the period is spent
 *   -ENOMEM, -EIO  as usual
 * A struct store is used by one thread at a time.
 */
#ifndef KOTOBA_STORE_H
#define KOTOBA_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* Opens (creating) <state_dir>/kotoba.db with mode 0600 (also its -wal and
 * -shm files; an existing wider mode is tightened).  state_dir must exist,
 * be a directory and not be world-writable.  Migrates the schema and runs
 * PRAGMA quick_check: a corrupt, read-only or newer-schema database fails
 * closed.  On failure *out is NULL and err holds a sentence naming the path. */
int store_open(const char *state_dir, struct store **out, char *err, size_t errlen);
void store_close(struct store *s);

/* Grants, per peer uid and family ("execute_code" is the only family today).
 * A family is 1-31 characters of [a-z0-9_]; a card id 1-39 printable ASCII
 * characters without spaces. */
struct grant_row {
	char family[32];
	int64_t saved_at_ms;
	char card_id[40];
	uint64_t use_count;
	int64_t last_used_ms; /* 0 = never */
	int64_t expires_ms;   /* wall clock; 0 = until revoked */
	char scope[4096];     /* covers runs whose cwd is this directory or below; "" = any */
	bool expired;         /* expires_ms has passed, by the store's wall clock */
	bool expiry_recorded; /* the audit trail says so already */
};
/* has: whether the uid saved one; g (may be NULL) gets it, expired or not. */
int store_grant_get(struct store *s, uint32_t uid, const char *family, bool *has,
		    struct grant_row *g);
/* What an answer chose; NULL or zeros: until revoked, everywhere. */
struct grant_terms {
	uint64_t life_ms;     /* it expires this long after it is saved; 0: never */
	const char *scope;    /* an absolute directory, or NULL/"" */
};
/* Saving over a grant still in force keeps its saved_at, card and use
 * count and takes the new terms; over an expired one, replaces it whole. */
int store_grant_save(struct store *s, uint32_t uid, const char *family, const char *card_id,
		     const struct grant_terms *terms);
/* use_count++, last_used = now; -ENOENT if there is no such grant. */
int store_grant_touch(struct store *s, uint32_t uid, const char *family);
/* The audit trail now records that the grant expired: once is enough. */
int store_grant_expiry_recorded(struct store *s, uint32_t uid, const char *family);
int store_grant_revoke(struct store *s, uint32_t uid, const char *family, bool *existed);
/* The uid's grants ordered by family; fills at most max rows, *n = filled. */
int store_grant_list(struct store *s, uint32_t uid, struct grant_row *rows, size_t max, size_t *n);

/* Audit trail: append-only (triggers refuse UPDATE and DELETE); each row
 * carries the SHA-256 of the previous row (hash chain), and the table
 * audit_head holds the newest row's seq and hash so a deleted last row
 * shows too.  The chain needs no key: it proves that rows were not edited,
 * deleted, inserted or reordered by anyone who did not also recompute every
 * later hash and the head; anchor the head elsewhere (log it) for more. */
struct audit_row {
	int64_t time_ms;        /* filled by store if 0 */
	uint32_t uid;
	int32_t pid;
	uint64_t run_id;        /* broker's run/request id */
	const char *event;      /* "decision" | "exit" */
	const char *code;       /* snippet bytes (may be NULL, e.g. for exit rows) */
	size_t code_len;
	char sha256[65];        /* hex of the snippet; computed from code if empty */
	const char *labels;     /* comma-separated, "" or NULL if none */
	const char *mode;       /* "local" | "docker" | "none" */
	const char *decision;   /* "ran" | "card" | "denied" | "expired" | "refused" | "not-offered" | "failed" */
	const char *approver;   /* "user" | "grant" | "container" | "unattended" | "" */
	const char *profile;    /* "approved" | "unattended" | "" */
	bool has_exit;
	int64_t exit_code;
	int64_t signal;
	bool timed_out;
	int64_t duration_ms;
	/* An exit row's receipt, as proto's enc_receipt() writes it; len 0:
	 * none (every other row).  Read back, it points into the statement. */
	const void *blocked;
	size_t blocked_len;
	/* An escalation's row: the seq of the exit row of the run the sandbox
	 * stopped; 0: none (every other row). */
	int64_t after_seq;
	/* Closes something already recorded (how a card or a queued exec
	 * ended, a run's exit): counted against the quota, never refused. */
	bool follows;
	/* filled by store_audit_append and when read back: */
	int64_t seq;
	char prev_hash[65];
	char hash[65];
};
/* Each snippet's text is stored once per SHA-256 (table audit_code), however
 * many rows name it; the row hash is over the text all the same.
 *
 * Quota: every append charges the row's uid a fixed cost per row plus the
 * bytes of a snippet text not stored before, per period of period_ms (kept
 * in the database, so a restart does not reset it).  A row that does not
 * follow one already recorded and would take the uid over max_bytes fails
 * with -EDQUOT and writes nothing.  max_bytes 0: no quota (the default). */
void store_set_quota(struct store *s, uint64_t max_bytes, uint64_t period_ms);

/* event and decision are required; the word fields (event, mode, decision,
 * approver, profile) are at most 31 characters of [a-z0-9_-], labels at
 * most 255 of [a-z0-9_,-]; NULL counts as "".  If both code and sha256 are
 * given they must agree.  Fills time_ms (if 0), sha256, seq, prev_hash and
 * hash; one transaction. */
int store_audit_append(struct store *s, struct audit_row *row);

/* store_audit_append without waiting for the disk: the row is committed
 * (every reader sees it, and a killed broker cannot lose it) but a power
 * cut or a kernel crash can until store_sync() or the next other commit. */
int store_audit_append_unsynced(struct store *s, struct audit_row *row);
/* Whether a row of store_audit_append_unsynced is not yet known durable. */
bool store_unsynced(const struct store *s);
/* Makes every committed row durable; -EIO (store_last_error says why),
 * and then no row is appended until a later call succeeds. */
int store_sync(struct store *s);

/* Calls cb for the newest max rows of this uid, oldest first (newest last).
 * The row and every string it points at (event, code, labels, ...) belong
 * to the store and are valid only until cb returns: copy what you keep.
 * cb must not call other store functions.  cb returns 0 to go on; any other
 * value stops the walk and store_audit_tail returns it. */
typedef int (*audit_cb)(const struct audit_row *row, void *arg);
int store_audit_tail(struct store *s, uint32_t uid, size_t max, audit_cb cb, void *arg);
/* Row seq when it is uid's (and no epoch row): cb once, or not at all. */
int store_audit_row(struct store *s, uint32_t uid, int64_t seq, audit_cb cb, void *arg);

/* Epoch rows: written by the broker itself, uid = its own, event "epoch".
 * decision "sealed": sealing began here (this row is sealed under key 0);
 * decision "broken": at start the chain was found broken at row run_id. */
#define AUDIT_EPOCH "epoch"
#define AUDIT_EPOCH_SEALED "sealed"
#define AUDIT_EPOCH_BROKEN "broken"
/* [sandbox] secrets turned off (at start or by a reload), and on again by
 * a reload: every run between is unmasked. */
#define AUDIT_EPOCH_SECRETS_OFF "secrets-off"
#define AUDIT_EPOCH_SECRETS_ON "secrets-on"

/* Starts sealing (broker/seal.h): draws key[0], writes the key file of the
 * state directory, appends the "sealed" epoch row sealed under key[0] and
 * leaves key[1] in the file, in one transaction.  key_hex gets key[0], for
 * the administrator; the store keeps no copy.  -EEXIST when the trail is
 * sealed already or a key file exists. */
int store_audit_seal_init(struct store *s, char key_hex[65]);
/* Appends the "broken" epoch row for a break at bad_seq; row is filled. */
int store_audit_mark_break(struct store *s, int64_t bad_seq, struct audit_row *row);
/* An epoch row that records a setting of the broker's (AUDIT_EPOCH_SECRETS_*). */
int store_audit_mark_setting(struct store *s, const char *decision, struct audit_row *row);
/* The head: the newest row's seq and hash (0 and 64 '0' when empty). */
int store_audit_head(struct store *s, int64_t *seq, char hash[65]);

/* Logs the chain head: fn is called after every append whose seq is a
 * multiple of every_rows (0: never).  For the whole process. */
typedef void (*store_anchor_fn)(int64_t seq, const char *hash);
void store_set_anchor_hook(uint64_t every_rows, store_anchor_fn fn);

/* Opens a copy of a database read only, for an auditor: no migration, no
 * key, nothing written.  The schema must be this version's. */
int store_open_copy(const char *path, struct store **out, char *err, size_t errlen);

/* A head logged elsewhere (the broker's log): row seq had this hash. */
struct audit_anchor {
	int64_t seq;
	char hash[65];
};
struct seal_key;
struct audit_check {
	int64_t from_seq;             /* 0 or 1: all; else from here, its link on trust */
	const struct seal_key *key;   /* key[0] to check the seals, or NULL */
	struct audit_anchor *anchors; /* sorted here by seq, duplicates moved out */
	size_t n_anchors;
};
enum audit_problem_kind { AUDIT_CHAIN, AUDIT_SEAL, AUDIT_ANCHOR };
#define AUDIT_PROBLEMS_MAX 32
struct audit_problem {
	enum audit_problem_kind kind;
	int64_t seq;       /* the first row concerned (the first missing, for a gap) */
	int64_t acked_by;  /* a chain break a later "broken" epoch row records */
	char why[200];
};
struct audit_report {
	uint64_t rows;
	int64_t first_seq, last_seq, head_seq;
	char head_hash[65];
	uint64_t sealed;           /* rows with a seal (checked or not) */
	int64_t first_sealed, last_key_index;
	bool seals_checked;
	uint64_t anchors_ok;
	uint64_t chain_problems, seal_problems, anchor_problems;
	size_t n, dropped;         /* problems[] kept, and those past the array */
	struct audit_problem problems[AUDIT_PROBLEMS_MAX];
};
/* Walks the chain from opt->from_seq to the head in one read snapshot and
 * lists every problem (it goes on from each row's stored hash, so a break
 * does not hide the next).  0 when the walk could be made, whatever it
 * found; a negative errno when the database could not be read. */
int store_audit_check(struct store *s, const struct audit_check *opt, struct audit_report *rep);

/* Walks the whole chain in one read snapshot.  Returns 0 with *rows = the
 * number of rows when intact.  Otherwise -EBADMSG, *rows = rows intact
 * before the break and *bad_seq = the first row whose link or hash is
 * wrong, or the first missing row of a gap (deleted in the middle, or at
 * the end below the head). */
int store_audit_verify(struct store *s, uint64_t *rows, int64_t *bad_seq);

/* The sentence describing the last failure ("" if none). */
const char *store_last_error(struct store *s);
#endif
