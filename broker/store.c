/* SPDX-License-Identifier: MIT
 * Grants and audit trail in SQLite.
 *
 * Durability comes from SQLite alone: WAL with synchronous=FULL makes every
 * COMMIT durable and a process killed mid-write leaves the database before
 * or after the transaction.  One kind of commit may wait for its sync
 * (store_audit_append_unsynced: a decision row whose snippet starts at
 * once): it is written to the WAL at synchronous=NORMAL, which a killed
 * broker cannot lose, and made durable by store_sync(), by the next
 * commit at FULL (a WAL sync covers every frame before it), or by the
 * checkpoint SQLite runs on close (AUDIT.md, "Durability").  Statements are prepared per call: nothing is
 * left half-stepped between calls, so no read snapshot outlives a call and
 * blocks checkpoints.
 *
 * Audit row hash (hex SHA-256) over, in order:
 *   prev_hash                64 ASCII hex bytes (64 '0' for seq 1)
 *   "kotoba-audit-v1"        15 bytes, then one 0x00
 *   18 fields, in the order of AUDIT_COLS below, each one of
 *     'i' + 8-byte big-endian two's-complement integer
 *     's' + 8-byte big-endian byte length + the bytes
 *     'n'                    (NULL, only code can be NULL)
 *   and a 19th, `blocked` as 's', only when it is not empty (a run's
 *   receipt, schema version 5), and a 20th, `after_seq` as 'i', only when
 *   it is not 0 (an escalation's link, version 6), so that every other
 *   row hashes as before
 * Fixed order, type tags and length prefixes make the encoding injective.
 * AUDIT.md gives it byte by byte, with the seals (broker/seal.h) and a
 * procedure that checks a copy with sqlite3 and openssl alone.
 */
/* O_PATH */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <sqlite3.h>

#include "broker/seal.h"
#include "broker/store.h"

#define DB_NAME "kotoba.db"
#define BUSY_TIMEOUT_MS 5000
#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define HASH_DOMAIN "kotoba-audit-v1"

#define STMT_CACHE_MAX 48

struct store {
	sqlite3 *db;
	uint64_t quota_bytes, quota_period_ms;
	char path[PATH_MAX];
	char err[768];
	char dir[PATH_MAX]; /* the state directory: the sealing key's */
	bool copy;          /* store_open_copy: read only, never sealed */
	bool has_blocked;   /* the audit table has `blocked` (version 5 on) */
	bool has_after;     /* ... and `after_seq` (version 6 on) */
	bool unsynced;      /* a commit is in the WAL but maybe not on the disk */
	bool deferring;     /* the commit under way is one of those */
	bool sync_failed;   /* store_sync failed: no row is written until one works */
	/* Statements prepared once and reset after each use: a run's gate
	 * reads a grant and writes its row with the same few statements,
	 * whose preparing cost more than their running. */
	struct {
		sqlite3_stmt *st;
		bool busy; /* handed out by prep(), not yet given back by done() */
	} cache[STMT_CACHE_MAX];
	size_t n_cache;
};

/* The two columns a read adds after the seal: the receipt and the link of
 * an escalation's row.  A copy from before version 5 has no receipt, read
 * as the empty one it hashes as; one from before 6 no link, read as 0. */
#define AUDIT_TAIL_COLS(s) ((s)->has_after ? "a.blocked, a.after_seq" \
			    : (s)->has_blocked ? "a.blocked, 0" : "X'', 0")

/* ---- schema ------------------------------------------------------------ */

/* migrations[v] takes the schema from user_version v to v + 1.  Append
 * only; never edit a released step. */
static const char *const migrations[] = {
	"CREATE TABLE grants ("
	"  uid INTEGER NOT NULL,"
	"  family TEXT NOT NULL,"
	"  card_id TEXT NOT NULL,"
	"  saved_at_ms INTEGER NOT NULL,"
	"  use_count INTEGER NOT NULL DEFAULT 0,"
	"  last_used_ms INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (uid, family)"
	") STRICT;"
	"CREATE TABLE audit ("
	"  seq INTEGER PRIMARY KEY,"
	"  time_ms INTEGER NOT NULL, uid INTEGER NOT NULL, pid INTEGER NOT NULL,"
	"  run_id INTEGER NOT NULL, event TEXT NOT NULL, code BLOB,"
	"  sha256 TEXT NOT NULL, labels TEXT NOT NULL, mode TEXT NOT NULL,"
	"  decision TEXT NOT NULL, approver TEXT NOT NULL, profile TEXT NOT NULL,"
	"  has_exit INTEGER NOT NULL, exit_code INTEGER NOT NULL,"
	"  signal INTEGER NOT NULL, timed_out INTEGER NOT NULL,"
	"  duration_ms INTEGER NOT NULL,"
	"  prev_hash TEXT NOT NULL, hash TEXT NOT NULL"
	") STRICT;"
	"CREATE INDEX audit_by_uid ON audit (uid, seq);"
	/* Catches our own bugs and casual edits; the chain catches the rest. */
	"CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;"
	"CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;"
	"CREATE TABLE audit_head ("
	"  one INTEGER PRIMARY KEY CHECK (one = 1),"
	"  seq INTEGER NOT NULL, hash TEXT NOT NULL"
	") STRICT;"
	"INSERT INTO audit_head VALUES (1, 0, '" ZERO_HASH "');",

	/* Snippet text once per content hash: a row with code_ref = 1 holds
	 * NULL in code and its text is audit_code's under its sha256.  The
	 * row hash is over the text either way, so editing or deleting it
	 * here breaks the chain like editing the row. */
	"CREATE TABLE audit_code ("
	"  sha256 TEXT PRIMARY KEY, code BLOB NOT NULL"
	") STRICT;"
	"CREATE TRIGGER audit_code_no_update BEFORE UPDATE ON audit_code"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;"
	"CREATE TRIGGER audit_code_no_delete BEFORE DELETE ON audit_code"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;"
	"ALTER TABLE audit ADD COLUMN code_ref INTEGER NOT NULL DEFAULT 0;"
	/* What each uid added in its current quota period. */
	"CREATE TABLE audit_usage ("
	"  uid INTEGER PRIMARY KEY, period_start_ms INTEGER NOT NULL,"
	"  bytes INTEGER NOT NULL"
	") STRICT;",

	/* The seal of each sealed row (broker/seal.h): beside the row, so the
	 * row and its hash are what they were, and in the transaction that
	 * writes the row. */
	"CREATE TABLE audit_seal ("
	"  seq INTEGER PRIMARY KEY, key_index INTEGER NOT NULL, mac TEXT NOT NULL"
	") STRICT;"
	"CREATE TRIGGER audit_seal_no_update BEFORE UPDATE ON audit_seal"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;"
	"CREATE TRIGGER audit_seal_no_delete BEFORE DELETE ON audit_seal"
	"  BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;",

	/* A grant's terms: when it ends (wall clock, 0: until revoked), the
	 * directory tree it covers ('': everywhere), and whether its expiry
	 * is in the audit trail yet.  A grant saved before has none. */
	"ALTER TABLE grants ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE grants ADD COLUMN scope TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE grants ADD COLUMN expiry_recorded INTEGER NOT NULL DEFAULT 0;",

	/* An exit row's receipt: what the sandbox refused in the run, the
	 * `blocked` and `blocked_total` of PROTOCOL.md's exit as one msgpack
	 * map (proto: enc_receipt); empty for every other row.  Hashed only
	 * when not empty: the rows before it, and those without one, keep
	 * their hashes. */
	"ALTER TABLE audit ADD COLUMN blocked BLOB NOT NULL DEFAULT X'';",

	/* An escalation's rows (the card, how it ended, the re-run's exit):
	 * the seq of the exit row of the run the sandbox stopped; 0 for every
	 * other row.  Hashed only when not 0, as `blocked` is when empty. */
	"ALTER TABLE audit ADD COLUMN after_seq INTEGER NOT NULL DEFAULT 0;",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))
/* The first version whose audit tables hash as today's (version 4 changed
 * grants only; 5 added `blocked`, which a copy of 3 or 4 reads as empty):
 * a copy from it can be verified as it is. */
#define AUDIT_SCHEMA_SINCE 3
#define AUDIT_BLOCKED_SINCE 5
#define AUDIT_AFTER_SINCE 6

/* The 18 hashed fields, in hash order, then the two stored hashes. */
#define AUDIT_COLS "seq, time_ms, uid, pid, run_id, event, code, sha256, " \
	"labels, mode, decision, approver, profile, has_exit, exit_code, " \
	"signal, timed_out, duration_ms, prev_hash, hash"
/* The same columns read back from `audit a`, the text from audit_code
 * where the row refers to it.  A referring row whose own code is not NULL
 * was edited: it reads as NULL, which its hash does not match. */
#define AUDIT_READ_COLS "a.seq, a.time_ms, a.uid, a.pid, a.run_id, a.event, " \
	"CASE WHEN NOT a.code_ref THEN a.code WHEN a.code IS NULL THEN (SELECT c.code " \
	"FROM audit_code c WHERE c.sha256 = a.sha256) END, a.sha256, a.labels, a.mode, " \
	"a.decision, a.approver, a.profile, a.has_exit, a.exit_code, a.signal, " \
	"a.timed_out, a.duration_ms, a.prev_hash, a.hash"
/* What a row costs the quota besides new snippet text: its fields, its
 * index entry and page overhead, rounded up. */
#define ROW_COST 512
enum {
	C_SEQ, C_TIME, C_UID, C_PID, C_RUN, C_EVENT, C_CODE, C_SHA, C_LABELS,
	C_MODE, C_DECISION, C_APPROVER, C_PROFILE, C_HAS_EXIT, C_EXIT_CODE,
	C_SIGNAL, C_TIMED_OUT, C_DURATION, C_NFIELDS, C_PREV = C_NFIELDS, C_HASH,
	/* What a read adds after AUDIT_READ_COLS: the seal (or NULLs), then
	 * the receipt and the link (AUDIT_TAIL_COLS). */
	C_KEY_INDEX, C_MAC, C_BLOCKED, C_AFTER
};

/* ---- errors ------------------------------------------------------------ */

static int set_err(struct store *s, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_err(struct store *s, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return rc;
}

static int sql_errno(struct store *s, int rc)
{
	int sys = s->db ? sqlite3_system_errno(s->db) : 0;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
		return -EINVAL;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR:
		/* The OS said why; pass that on (ENOSPC, EACCES, EIO...). */
		return sys > 0 ? -sys : -EIO;
	default:
		return -EIO;
	}
}

/* Records "<what>: <sqlite message> (<db path>)"; call it before anything
 * else touches the connection, which would replace the message. */
static int sql_fail(struct store *s, int rc, const char *what)
{
	const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);

	return set_err(s, sql_errno(s, rc), "%s: %s (%s)", what, msg, s->path);
}

const char *store_last_error(struct store *s)
{
	return s ? s->err : "no store";
}

/* ---- small helpers ----------------------------------------------------- */

/* The wall clock, for the times stored in rows (grants, audit); the
 * event loop's now_ms() (loop.h) is monotonic. */
static int64_t wall_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A statement for sql: a cached one that is free (the same text: some
 * are built at run time), else a new one, kept while the cache has room.
 * Every one goes back through done(). */
static int prep(struct store *s, const char *sql, sqlite3_stmt **st, const char *what)
{
	bool keep = s->n_cache < STMT_CACHE_MAX;
	int rc;

	for (size_t i = 0; i < s->n_cache; i++) {
		if (s->cache[i].busy || strcmp(sqlite3_sql(s->cache[i].st), sql))
			continue;
		s->cache[i].busy = true;
		*st = s->cache[i].st;
		return 0;
	}
	rc = sqlite3_prepare_v3(s->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, st, NULL);
	if (rc != SQLITE_OK) {
		*st = NULL;
		return sql_fail(s, rc, what);
	}
	if (keep)
		s->cache[s->n_cache++] = (typeof(s->cache[0])){ *st, true };
	return 0;
}

/* Gives a statement back: a cached one reset (which ends its read, as
 * finalizing would) with its bindings cleared, any other finalized. */
static void done(struct store *s, sqlite3_stmt *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < s->n_cache; i++) {
		if (s->cache[i].st != st)
			continue;
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		s->cache[i].busy = false;
		return;
	}
	sqlite3_finalize(st);
}

static int exec(struct store *s, const char *sql, const char *what)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : sql_fail(s, rc, what);
}

static void rollback(struct store *s)
{
	/* A failed COMMIT or statement may already have ended the
	 * transaction; only roll back one that is still open. */
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* IMMEDIATE takes the write lock up front, so the busy timeout covers it;
 * a deferred read-then-write transaction could fail with SQLITE_BUSY
 * without waiting. */
static int begin_write(struct store *s, const char *what)
{
	return exec(s, "BEGIN IMMEDIATE", what);
}

static int commit(struct store *s, const char *what)
{
	int rc = exec(s, "COMMIT", what);

	if (rc)
		rollback(s);
	else if (s->deferring)
		s->unsynced = true;
	else
		s->unsynced = false; /* synchronous=FULL synced the WAL, all of it */
	return rc;
}

/* w is at most max characters of [a-z0-9] and the characters in extra. */
static bool word_ok(const char *w, size_t max, const char *extra)
{
	size_t i;

	for (i = 0; w[i]; i++) {
		char c = w[i];

		if (i >= max)
			return false;
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(extra, c))
			continue;
		return false;
	}
	return true;
}

static int check_family(struct store *s, const char *family)
{
	if (!family || !family[0] || !word_ok(family, 31, "_"))
		return set_err(s, -EINVAL, "grant family must be 1-31 characters of a-z, 0-9 and _");
	return 0;
}

static int check_card_id(struct store *s, const char *card_id)
{
	size_t i;

	if (!card_id || !card_id[0] || strlen(card_id) > 39)
		return set_err(s, -EINVAL, "card id must be 1-39 characters");
	for (i = 0; card_id[i]; i++) {
		if (card_id[i] <= ' ' || card_id[i] > '~')
			return set_err(s, -EINVAL, "card id must be printable ASCII without spaces");
	}
	return 0;
}

/* Copies a TEXT column into a fixed field; longer means a hand edit. */
static int copy_col(struct store *s, sqlite3_stmt *st, int col, char *dst, size_t size)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	int len = sqlite3_column_bytes(st, col);

	if (!t || len < 0 || (size_t)len >= size || memchr(t, 0, (size_t)len))
		return set_err(s, -EUCLEAN, "column %s holds a malformed value; the database was edited (%s)",
			       sqlite3_column_name(st, col), s->path);
	memcpy(dst, t, (size_t)len + 1);
	return 0;
}

/* ---- open -------------------------------------------------------------- */

static int check_dir(struct store *s, const char *dir)
{
	struct stat st;

	if (!dir || !dir[0])
		return set_err(s, -EINVAL, "no state directory given");
	if (stat(dir, &st)) {
		int e = errno;

		if (e == ENOENT)
			return set_err(s, -ENOENT, "state directory %s does not exist; create it (mode 0700, owned by the broker's user)", dir);
		return set_err(s, -e, "cannot use state directory %s: %s", dir, strerror(e));
	}
	if (!S_ISDIR(st.st_mode))
		return set_err(s, -ENOTDIR, "state directory %s is not a directory", dir);
	/* Anyone could swap the database under us there. */
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		return set_err(s, -EPERM, "state directory %s is writable by every user; use a private directory (mode 0700)", dir);
	if ((size_t)snprintf(s->path, sizeof(s->path), "%s/%s", dir, DB_NAME) >= sizeof(s->path))
		return set_err(s, -ENAMETOOLONG, "state directory path %s is too long", dir);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	return 0;
}

/* Creates path with mode 0600.  SQLite creates -wal and -shm with the
 * database file's mode, so this covers them too, whatever the umask. */
static int create_file(struct store *s, const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int e = 0;

	if (fd < 0)
		return set_err(s, -errno, "cannot create %s: %s", path, strerror(errno));
	/* The umask may have taken bits away; 0400 would lock us out. */
	if (fchmod(fd, 0600))
		e = set_err(s, -errno, "cannot set mode 0600 on %s: %s", path, strerror(errno));
	close(fd);
	return e;
}

/* Tightens a leftover from a looser setup.  Only reached when the mode is
 * wrong, i.e. before any connection of ours has the file open (see below). */
static int fix_mode(struct store *s, const char *path, const struct stat *seen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	int e = 0;

	if (fd < 0)
		return set_err(s, -errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) || st.st_dev != seen->st_dev || st.st_ino != seen->st_ino)
		e = set_err(s, -EAGAIN, "%s changed while it was being checked", path);
	else if (fchmod(fd, 0600))
		e = set_err(s, -errno, "cannot set mode 0600 on %s: %s", path, strerror(errno));
	close(fd);
	return e;
}

/* Makes sure path is our regular file with mode 0600, creating it if
 * asked.  It looks through an O_PATH descriptor because closing an
 * ordinary one would drop every POSIX lock this process holds on the file
 * (fcntl semantics), silently unlocking another open connection to it;
 * O_PATH descriptors take no part in locking. */
static int tighten(struct store *s, const char *path, bool create)
{
	struct stat st;
	int fd, e;

	fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			return create ? create_file(s, path) : 0;
		return set_err(s, -e, "cannot open %s: %s", path, strerror(e));
	}
	e = fstat(fd, &st) ? -errno : 0;
	close(fd);
	if (e)
		return set_err(s, e, "cannot stat %s: %s", path, strerror(-e));
	if (S_ISLNK(st.st_mode))
		return set_err(s, -ELOOP, "%s is a symbolic link; refusing to follow it", path);
	if (S_ISDIR(st.st_mode))
		return set_err(s, -EISDIR, "%s is a directory, not a database file", path);
	if (!S_ISREG(st.st_mode))
		return set_err(s, -EINVAL, "%s is not a regular file", path);
	if (st.st_uid != geteuid())
		return set_err(s, -EPERM, "%s is owned by uid %u, not by this process's uid %u",
			       path, (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & 07777) != 0600)
		return fix_mode(s, path, &st);
	return 0;
}

static int prepare_files(struct store *s)
{
	static const char *const side[] = { "-wal", "-shm", "-journal" };
	char p[PATH_MAX + 16];
	size_t i;
	int rc;

	rc = tighten(s, s->path, true);
	for (i = 0; !rc && i < sizeof(side) / sizeof(side[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", s->path, side[i]);
		rc = tighten(s, p, false);
	}
	return rc;
}

static int open_db(struct store *s)
{
	/* No SQLITE_OPEN_CREATE: prepare_files made the file; if it vanished
	 * since, something is wrong. */
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
	int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);

	if (rc != SQLITE_OK)
		return sql_fail(s, rc, "cannot open the database");
	/* READWRITE silently falls back to read-only on a write-protected
	 * file; a broker that cannot record grants or audit must not run. */
	if (sqlite3_db_readonly(s->db, "main") != 0)
		return set_err(s, -EROFS, "database %s could only be opened read-only", s->path);
	return 0;
}

/* Runs a PRAGMA that answers one row of text and copies the answer. */
static int pragma_text(struct store *s, const char *sql, const char *what, char *got,
		       size_t len)
{
	const unsigned char *t;
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, sql, &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = sql_fail(s, rc, what);
	} else {
		t = sqlite3_column_text(st, 0);
		snprintf(got, len, "%s", t ? (const char *)t : "");
		rc = 0;
	}
	done(s, st);
	return rc;
}

static int set_journal_wal(struct store *s)
{
	char mode[32];
	int rc = pragma_text(s, "PRAGMA journal_mode=WAL", "cannot read the database (corrupt, "
			     "not a database, or unwritable directory?)", mode, sizeof(mode));

	if (rc)
		return rc;
	if (strcmp(mode, "wal"))
		return set_err(s, -EIO, "database %s cannot use WAL journaling (journal_mode is "
			       "%s); is it on a network file system?", s->path,
			       mode[0] ? mode : "unknown");
	return 0;
}

static int configure(struct store *s)
{
	int rc;

	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	/* The file is data, not code: no schema-defined functions with side
	 * effects, no writable_schema tricks, no double-quoted strings. */
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_DQS_DML, 0, NULL);
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_DQS_DDL, 0, NULL);
	rc = set_journal_wal(s);
	/* journal_size_limit: the WAL is cut back to 4 MiB after a
	 * checkpoint, so a burst of large rows does not leave it large.
	 * temp_store: no temporary file outside the state directory, where
	 * a system broker may not write (broker/confine.c). */
	if (!rc)
		rc = exec(s, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
			  " PRAGMA temp_store=MEMORY; PRAGMA journal_size_limit=4194304",
			  "cannot configure the database");
	return rc;
}

static int read_int(struct store *s, const char *sql, int64_t *v, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, sql, &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = sql_fail(s, rc, what);
	}
	done(s, st);
	return rc;
}

static int migrate_locked(struct store *s)
{
	const char *what = "cannot migrate the database schema";
	char sql[64];
	int64_t v = 0;
	int rc;

	rc = read_int(s, "PRAGMA user_version", &v, what);
	if (rc)
		return rc;
	if (v < 0 || v > SCHEMA_VERSION)
		return set_err(s, -EPROTO, "database %s has schema version %lld but this kotoba-brokerd knows up to %d; run a newer broker or restore a backup",
			       s->path, (long long)v, SCHEMA_VERSION);
	for (; v < SCHEMA_VERSION; v++) {
		rc = exec(s, migrations[v], what);
		if (rc)
			return rc;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", SCHEMA_VERSION);
	s->has_blocked = s->has_after = true;
	return exec(s, sql, what);
}

/* DDL and user_version are transactional in SQLite: a crash mid-migration
 * leaves the old schema. */
static int migrate(struct store *s)
{
	int rc = begin_write(s, "cannot start the schema migration");

	if (rc)
		return rc;
	rc = migrate_locked(s);
	if (rc) {
		rollback(s);
		return rc;
	}
	return commit(s, "cannot commit the schema migration");
}

static int quick_check(struct store *s)
{
	char res[256];
	int rc = pragma_text(s, "PRAGMA quick_check(1)", "cannot check the database", res,
			     sizeof(res));

	if (rc)
		return rc;
	if (strcmp(res, "ok"))
		return set_err(s, -EUCLEAN, "database %s is corrupt (%s); move it aside and restore "
			       "a backup", s->path, res[0] ? res : "no result");
	return 0;
}

int store_open(const char *state_dir, struct store **out, char *err, size_t errlen)
{
	struct store *s;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory opening the state store");
		return -ENOMEM;
	}
	rc = check_dir(s, state_dir);
	if (!rc)
		rc = prepare_files(s);
	if (!rc)
		rc = open_db(s);
	if (!rc)
		rc = configure(s);
	if (!rc)
		rc = migrate(s);
	if (!rc)
		rc = quick_check(s);
	if (rc) {
		if (err && errlen)
			snprintf(err, errlen, "%s", s->err);
		store_close(s);
		return rc;
	}
	s->err[0] = '\0';
	*out = s;
	return 0;
}

/* A copy for an auditor: read only, no migration, no key.  Its audit
 * tables must be this version's: an older copy has no seal table to read. */
static int open_copy(struct store *s, const char *path)
{
	int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
	int64_t v = 0;
	int rc;

	if ((size_t)snprintf(s->path, sizeof(s->path), "%s", path) >= sizeof(s->path))
		return set_err(s, -ENAMETOOLONG, "database path %s is too long", path);
	if (access(path, R_OK) < 0)
		return set_err(s, -errno, "cannot read %s: %s", path, strerror(errno));
	rc = sqlite3_open_v2(path, &s->db, flags, NULL);
	if (rc != SQLITE_OK)
		return sql_fail(s, rc, "cannot open the database");
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	rc = read_int(s, "PRAGMA user_version", &v, "cannot read the database (not a database?)");
	s->has_blocked = v >= AUDIT_BLOCKED_SINCE;
	s->has_after = v >= AUDIT_AFTER_SINCE;
	if (!rc && (v < AUDIT_SCHEMA_SINCE || v > SCHEMA_VERSION))
		rc = set_err(s, -EPROTO, "%s has schema version %lld, not %d to %d: verify it "
			     "with the kotoba that wrote it, or let this broker open the original "
			     "once", path, (long long)v, AUDIT_SCHEMA_SINCE, SCHEMA_VERSION);
	if (!rc)
		rc = quick_check(s);
	return rc;
}

int store_open_copy(const char *path, struct store **out, char *err, size_t errlen)
{
	struct store *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory opening %s", path);
		return -ENOMEM;
	}
	s->copy = true;
	rc = open_copy(s, path);
	if (rc) {
		snprintf(err, errlen, "%s", s->err);
		store_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_cache; i++)
		sqlite3_finalize(s->cache[i].st);
	/* _v2 so a statement leaked by a bug cannot keep the handle alive. */
	sqlite3_close_v2(s->db);
	free(s);
}

/* ---- grants ------------------------------------------------------------ */

/* Prepares sql and binds ?1 = uid, ?2 = family. */
static int prep_grant(struct store *s, const char *sql, uint32_t uid, const char *family,
		      sqlite3_stmt **st, const char *what)
{
	int rc = check_family(s, family);

	if (!rc)
		rc = prep(s, sql, st, what);
	if (rc)
		return rc;
	rc = sqlite3_bind_int64(*st, 1, uid);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(*st, 2, family, -1, SQLITE_STATIC);
	if (rc != SQLITE_OK) {
		rc = sql_fail(s, rc, what);
		done(s, *st);
		*st = NULL;
	}
	return rc;
}

/* Steps a statement that returns no rows (one autocommit transaction). */
static int step_done(struct store *s, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	rc = rc == SQLITE_DONE ? 0 : sql_fail(s, rc, what);
	done(s, st);
	if (rc == 0)
		s->unsynced = false;
	return rc;
}

#define GRANT_COLS "family, saved_at_ms, card_id, use_count, last_used_ms, expires_ms, " \
	"scope, expiry_recorded"

static int read_grant(struct store *s, sqlite3_stmt *st, struct grant_row *r)
{
	int rc = copy_col(s, st, 0, r->family, sizeof(r->family));

	if (!rc)
		rc = copy_col(s, st, 2, r->card_id, sizeof(r->card_id));
	if (!rc)
		rc = copy_col(s, st, 6, r->scope, sizeof(r->scope));
	r->saved_at_ms = sqlite3_column_int64(st, 1);
	r->use_count = (uint64_t)sqlite3_column_int64(st, 3);
	r->last_used_ms = sqlite3_column_int64(st, 4);
	r->expires_ms = sqlite3_column_int64(st, 5);
	r->expiry_recorded = sqlite3_column_int64(st, 7) != 0;
	r->expired = r->expires_ms != 0 && wall_clock_ms() >= r->expires_ms;
	return rc;
}

int store_grant_get(struct store *s, uint32_t uid, const char *family, bool *has,
		    struct grant_row *g)
{
	const char *what = "cannot read grant";
	sqlite3_stmt *st;
	int rc;

	*has = false;
	rc = prep_grant(s, "SELECT " GRANT_COLS " FROM grants WHERE uid = ?1 AND family = ?2",
			uid, family, &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		*has = rc == SQLITE_ROW;
		rc = *has && g ? read_grant(s, st, g) : 0;
	} else {
		rc = sql_fail(s, rc, what);
	}
	done(s, st);
	return rc;
}

static int check_terms(struct store *s, const struct grant_terms *t)
{
	if (t->life_ms > (uint64_t)INT64_MAX / 2)
		return set_err(s, -EINVAL, "a grant's life must be a duration, or 0 for none");
	if (t->scope && t->scope[0] &&
	    (t->scope[0] != '/' || strlen(t->scope) >= sizeof(((struct grant_row *)0)->scope)))
		return set_err(s, -EINVAL, "a grant's scope must be an absolute directory of at most "
			       "%zu bytes", sizeof(((struct grant_row *)0)->scope) - 1);
	return 0;
}

/* The saved grant had expired by ?4, now (SET reads the row as it was). */
#define LAPSED "(expires_ms != 0 AND expires_ms <= ?4)"

/* Over a grant still in force, the first saved_at, card and use count
 * stay (it is the same standing permission) and the newest answer's terms
 * apply; an expired one is replaced whole. */
int store_grant_save(struct store *s, uint32_t uid, const char *family, const char *card_id,
		     const struct grant_terms *terms)
{
	static const struct grant_terms forever = { 0, "" };
	const struct grant_terms *t = terms ? terms : &forever;
	const char *what = "cannot save grant";
	int64_t now = wall_clock_ms();
	sqlite3_stmt *st;
	int rc;

	rc = check_card_id(s, card_id);
	if (!rc)
		rc = check_terms(s, t);
	if (!rc)
		rc = prep_grant(s, "INSERT INTO grants (uid, family, card_id, saved_at_ms, expires_ms,"
				" scope) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
				" ON CONFLICT (uid, family) DO UPDATE SET"
				"  card_id = iif(" LAPSED ", excluded.card_id, card_id),"
				"  saved_at_ms = iif(" LAPSED ", excluded.saved_at_ms, saved_at_ms),"
				"  use_count = iif(" LAPSED ", 0, use_count),"
				"  last_used_ms = iif(" LAPSED ", 0, last_used_ms),"
				"  expires_ms = excluded.expires_ms, scope = excluded.scope,"
				"  expiry_recorded = 0",
				uid, family, &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_text(st, 3, card_id, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, now) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 5, t->life_ms ? now + (int64_t)t->life_ms : 0) != SQLITE_OK ||
	    sqlite3_bind_text(st, 6, t->scope ? t->scope : "", -1, SQLITE_STATIC) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	return step_done(s, st, what);
}

int store_grant_expiry_recorded(struct store *s, uint32_t uid, const char *family)
{
	const char *what = "cannot mark a grant's expiry recorded";
	sqlite3_stmt *st;
	int rc;

	rc = prep_grant(s, "UPDATE grants SET expiry_recorded = 1 WHERE uid = ?1 AND family = ?2",
			uid, family, &st, what);
	if (rc)
		return rc;
	return step_done(s, st, what);
}

int store_grant_touch(struct store *s, uint32_t uid, const char *family)
{
	const char *what = "cannot record grant use";
	sqlite3_stmt *st;
	int rc;

	rc = prep_grant(s, "UPDATE grants SET use_count = use_count + 1, last_used_ms = ?3"
			" WHERE uid = ?1 AND family = ?2", uid, family, &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 3, wall_clock_ms()) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	rc = step_done(s, st, what);
	if (!rc && sqlite3_changes(s->db) == 0)
		rc = set_err(s, -ENOENT, "uid %u has no saved %s grant", (unsigned)uid, family);
	return rc;
}

int store_grant_revoke(struct store *s, uint32_t uid, const char *family, bool *existed)
{
	sqlite3_stmt *st;
	int rc;

	*existed = false;
	rc = prep_grant(s, "DELETE FROM grants WHERE uid = ?1 AND family = ?2",
			uid, family, &st, "cannot revoke grant");
	if (rc)
		return rc;
	rc = step_done(s, st, "cannot revoke grant");
	if (!rc)
		*existed = sqlite3_changes(s->db) > 0;
	return rc;
}

int store_grant_list(struct store *s, uint32_t uid, struct grant_row *rows, size_t max, size_t *n)
{
	const char *what = "cannot list grants";
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	rc = prep(s, "SELECT " GRANT_COLS " FROM grants WHERE uid = ?1 ORDER BY family", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, uid) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	for (rc = 0; !rc && *n < max; (*n)++) {
		int step = sqlite3_step(st);

		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW)
			rc = sql_fail(s, step, what);
		else
			rc = read_grant(s, st, &rows[*n]);
		if (rc)
			break;
	}
	done(s, st);
	return rc;
}

/* ---- audit: hashing ---------------------------------------------------- */

/* One hashed field: type 'i' (v), 's' (p, len) or 'n'. */
struct field {
	char type;
	int64_t v;
	const void *p;
	size_t len;
};

static void hex(const unsigned char *md, char out[65])
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[64] = '\0';
}

static void be64(uint64_t v, unsigned char b[8])
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
}

static void update_field(struct sha256_ctx *ctx, const struct field *f)
{
	unsigned char b[9];

	b[0] = (unsigned char)f->type;
	if (f->type == 'n') {
		sha256_update(ctx, 1, b);
		return;
	}
	be64(f->type == 'i' ? (uint64_t)f->v : (uint64_t)f->len, b + 1);
	sha256_update(ctx, 9, b);
	if (f->type != 'i' && f->len)
		sha256_update(ctx, f->len, f->p);
}

/* Nettle's SHA-256: small, and it cannot fail, so neither can this. */
static int row_hash(struct store *s, const char *prev, const struct field *f,
		    const struct field tail[2], char out[65])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	int i;

	sha256_init(&ctx);
	sha256_update(&ctx, 64, (const uint8_t *)prev);
	sha256_update(&ctx, sizeof(HASH_DOMAIN), (const uint8_t *)HASH_DOMAIN);
	for (i = 0; i < C_NFIELDS; i++)
		update_field(&ctx, &f[i]);
	/* Only a receipt that is there, only a link that is: see the top of
	 * this file. */
	if (tail[0].len)
		update_field(&ctx, &tail[0]);
	if (tail[1].v)
		update_field(&ctx, &tail[1]);
	sha256_digest(&ctx, sizeof(md), md);
	hex(md, out);
	return 0;
}

static int sha256_hex(struct store *s, const void *p, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, len, p);
	sha256_digest(&ctx, sizeof(md), md);
	hex(md, out);
	return 0;
}

static bool is_hex64(const char *h)
{
	size_t i;

	for (i = 0; i < 64; i++) {
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return false;
	}
	return h[64] == '\0';
}

/* ---- audit: append ----------------------------------------------------- */

static const char *nz(const char *p)
{
	return p ? p : "";
}

static int check_words(struct store *s, const struct audit_row *r)
{
	const char *w[] = { r->event, r->mode, r->decision, r->approver, r->profile };
	static const char *const name[] = { "event", "mode", "decision", "approver", "profile" };
	size_t i;

	if (!r->event || !r->event[0] || !r->decision || !r->decision[0])
		return set_err(s, -EINVAL, "audit row needs an event and a decision");
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		if (!word_ok(nz(w[i]), 31, "_-"))
			return set_err(s, -EINVAL, "audit %s must be at most 31 characters of a-z, 0-9, _ and -", name[i]);
	}
	if (!word_ok(nz(r->labels), 255, "_-,"))
		return set_err(s, -EINVAL, "audit labels must be at most 255 characters of a-z, 0-9, _, - and ,");
	return 0;
}

/* Fills row->time_ms and row->sha256 and checks the rest. */
static int normalise(struct store *s, struct audit_row *r)
{
	char h[65];
	int rc = check_words(s, r);

	if (rc)
		return rc;
	if (!r->code && r->code_len)
		return set_err(s, -EINVAL, "audit row has a code length but no code");
	if (r->time_ms == 0)
		r->time_ms = wall_clock_ms();
	if (r->sha256[0] && !is_hex64(r->sha256))
		return set_err(s, -EINVAL, "audit sha256 must be 64 lowercase hex digits");
	if (!r->code)
		return 0;
	rc = sha256_hex(s, r->code, r->code_len, h);
	if (rc)
		return rc;
	if (r->sha256[0] && strcmp(r->sha256, h))
		return set_err(s, -EINVAL, "audit sha256 does not match the snippet");
	memcpy(r->sha256, h, sizeof(h));
	return 0;
}

static void str_field(struct field *f, const char *p)
{
	f->type = 's';
	f->p = nz(p);
	f->len = strlen(nz(p));
}

static void row_fields(const struct audit_row *r, int64_t seq, struct field f[C_NFIELDS])
{
	static const int ints[] = { C_SEQ, C_TIME, C_UID, C_PID, C_RUN, C_HAS_EXIT,
				    C_EXIT_CODE, C_SIGNAL, C_TIMED_OUT, C_DURATION };
	const int64_t vals[] = { seq, r->time_ms, r->uid, r->pid, (int64_t)r->run_id,
				 r->has_exit, r->exit_code, r->signal, r->timed_out,
				 r->duration_ms };
	size_t i;

	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		f[ints[i]] = (struct field){ .type = 'i', .v = vals[i] };
	str_field(&f[C_EVENT], r->event);
	str_field(&f[C_SHA], r->sha256);
	str_field(&f[C_LABELS], r->labels);
	str_field(&f[C_MODE], r->mode);
	str_field(&f[C_DECISION], r->decision);
	str_field(&f[C_APPROVER], r->approver);
	str_field(&f[C_PROFILE], r->profile);
	f[C_CODE] = (struct field){ .type = r->code ? 's' : 'n', .p = r->code, .len = r->code_len };
}

/* Binds fields as ?1..?18, prev as ?19, hash as ?20, code_ref as ?21, the
 * receipt as ?22 and the link as ?23; by reference, the code itself is NULL
 * here (it is in audit_code). */
static int bind_row(sqlite3_stmt *st, const struct field *f, const char *prev, const char *hash,
		    bool code_ref, const struct field tail[2])
{
	int i, rc = SQLITE_OK;

	for (i = 0; rc == SQLITE_OK && i < C_NFIELDS; i++) {
		if (i == C_CODE && code_ref)
			rc = sqlite3_bind_null(st, i + 1);
		else if (f[i].type == 'i')
			rc = sqlite3_bind_int64(st, i + 1, f[i].v);
		else if (f[i].type == 'n')
			rc = sqlite3_bind_null(st, i + 1);
		else if (i == C_CODE)
			rc = f[i].len ? sqlite3_bind_blob64(st, i + 1, f[i].p, f[i].len, SQLITE_STATIC)
				      : sqlite3_bind_zeroblob(st, i + 1, 0);
		else
			rc = sqlite3_bind_text64(st, i + 1, f[i].p, f[i].len, SQLITE_STATIC, SQLITE_UTF8);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, C_PREV + 1, prev, 64, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, C_HASH + 1, hash, 64, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, C_HASH + 2, code_ref);
	if (rc == SQLITE_OK)
		rc = tail[0].len ? sqlite3_bind_blob64(st, C_HASH + 3, tail[0].p, tail[0].len,
						       SQLITE_STATIC)
				 : sqlite3_bind_zeroblob(st, C_HASH + 3, 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, C_HASH + 4, tail[1].v);
	return rc;
}

static int read_head(struct store *s, int64_t *seq, char hash[65], const char *what)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, "SELECT seq, hash FROM audit_head WHERE one = 1", &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*seq = sqlite3_column_int64(st, 0);
		rc = copy_col(s, st, 1, hash, 65);
		if (!rc && !is_hex64(hash))
			rc = set_err(s, -EUCLEAN, "audit head hash is malformed; the database was edited (%s)", s->path);
	} else if (rc == SQLITE_DONE) {
		rc = set_err(s, -EUCLEAN, "audit head row is missing; the database was edited (%s)", s->path);
	} else {
		rc = sql_fail(s, rc, what);
	}
	done(s, st);
	return rc;
}

static int insert_row(struct store *s, const struct field *f, int64_t seq, const char *prev,
		      const char *hash, bool code_ref, const struct field tail[2],
		      const char *what)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, "INSERT INTO audit (" AUDIT_COLS ", code_ref, blocked, after_seq) VALUES (?1,"
		  " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,"
		  " ?20, ?21, ?22, ?23)", &st, what);
	if (rc)
		return rc;
	if (bind_row(st, f, prev, hash, code_ref, tail) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	rc = step_done(s, st, what);
	if (rc)
		return rc;
	rc = prep(s, "UPDATE audit_head SET seq = ?1, hash = ?2 WHERE one = 1", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, seq) != SQLITE_OK ||
	    sqlite3_bind_text(st, 2, hash, 64, SQLITE_STATIC) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	return step_done(s, st, what);
}

/* ---- audit: snippet text once, and the quota ---------------------------- */

void store_set_quota(struct store *s, uint64_t max_bytes, uint64_t period_ms)
{
	s->quota_bytes = max_bytes;
	s->quota_period_ms = period_ms ? period_ms : 1;
}

/* Stores the row's text under its hash unless it is there; *added is the
 * number of bytes that took (0 when it was already stored). */
static int store_code(struct store *s, const struct audit_row *r, uint64_t *added,
		      const char *what)
{
	sqlite3_stmt *st;
	int rc;

	*added = 0;
	rc = prep(s, "INSERT INTO audit_code (sha256, code) VALUES (?1, ?2)"
		  " ON CONFLICT (sha256) DO NOTHING", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_text(st, 1, r->sha256, 64, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_blob64(st, 2, r->code, r->code_len, SQLITE_STATIC) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	rc = step_done(s, st, what);
	if (!rc && sqlite3_changes(s->db) > 0)
		*added = r->code_len;
	return rc;
}

/* The uid's use in its current period, which starts again once
 * period_ms has passed since it began. */
static int read_usage(struct store *s, uint32_t uid, int64_t now, int64_t *start,
		      uint64_t *bytes, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	*start = now;
	*bytes = 0;
	rc = prep(s, "SELECT period_start_ms, bytes FROM audit_usage WHERE uid = ?1", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, uid) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int64_t began = sqlite3_column_int64(st, 0);

		if (began <= now && (uint64_t)(now - began) < s->quota_period_ms) {
			*start = began;
			*bytes = (uint64_t)sqlite3_column_int64(st, 1);
		}
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? 0 : sql_fail(s, rc, what);
	}
	done(s, st);
	return rc;
}

static void size_text(uint64_t n, char *out, size_t len)
{
	if (n >= (1u << 20))
		snprintf(out, len, "%.1f MiB", (double)n / (1u << 20));
	else
		snprintf(out, len, "%.1f KiB", (double)n / (1u << 10));
}

/* Charges cost to the row's uid, or -EDQUOT for a row that may be refused
 * and would go over. */
static int charge(struct store *s, const struct audit_row *r, uint64_t cost, const char *what)
{
	char used[32], max[32];
	sqlite3_stmt *st;
	int64_t start;
	uint64_t bytes;
	int rc;

	if (!s->quota_bytes)
		return 0;
	rc = read_usage(s, r->uid, r->time_ms, &start, &bytes, what);
	if (rc)
		return rc;
	if (!r->follows && bytes + cost > s->quota_bytes) {
		size_text(bytes, used, sizeof(used));
		size_text(s->quota_bytes, max, sizeof(max));
		return set_err(s, -EDQUOT, "uid %u has added %s to the audit trail in this period, "
			       "and %s is the most one user may ([quota] audit_bytes); new "
			       "snippets are refused for up to %lld more minutes",
			       (unsigned)r->uid, used, max,
			       (long long)((start + (int64_t)s->quota_period_ms - r->time_ms) /
					   60000 + 1));
	}
	rc = prep(s, "INSERT INTO audit_usage (uid, period_start_ms, bytes) VALUES (?1, ?2, ?3)"
		  " ON CONFLICT (uid) DO UPDATE SET period_start_ms = ?2, bytes = ?3", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, r->uid) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, start) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, (int64_t)(bytes + cost)) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	return step_done(s, st, what);
}

/* Text first, then the charge: in one transaction, so a refused row
 * leaves neither. */
static int store_text_and_charge(struct store *s, const struct audit_row *r, bool *code_ref,
				 const char *what)
{
	uint64_t added = 0;
	int rc = 0;

	*code_ref = r->code && r->code_len > 0;
	if (*code_ref)
		rc = store_code(s, r, &added, what);
	if (!rc)
		rc = charge(s, r, ROW_COST + added + r->blocked_len, what);
	return rc;
}

static int append_locked(struct store *s, struct audit_row *row, const char *what)
{
	struct field f[C_NFIELDS];
	struct field tail[2] = { { .type = 's', .p = row->blocked, .len = row->blocked_len },
				 { .type = 'i', .v = row->after_seq } };
	char prev[65], hash[65];
	bool code_ref;
	int64_t seq;
	int rc;

	rc = read_head(s, &seq, prev, what);
	if (!rc)
		rc = store_text_and_charge(s, row, &code_ref, what);
	if (rc)
		return rc;
	seq++;
	row_fields(row, seq, f);
	rc = row_hash(s, prev, f, tail, hash);
	if (!rc)
		rc = insert_row(s, f, seq, prev, hash, code_ref, tail, what);
	if (rc)
		return rc;
	row->seq = seq;
	memcpy(row->prev_hash, prev, sizeof(prev));
	memcpy(row->hash, hash, sizeof(hash));
	return 0;
}

static int seal_locked(struct store *s, const struct audit_row *row, const char *what);
static void anchor_after(const struct audit_row *row);

int store_audit_append(struct store *s, struct audit_row *row)
{
	const char *what = "cannot append to the audit trail";
	int64_t seq = row->seq;
	int rc;

	/* A row whose sync failed may be gone after a power cut: none
	 * follows it until a sync works (fail closed). */
	if (s->sync_failed && (rc = store_sync(s)) < 0)
		return rc;
	rc = normalise(s, row);
	if (!rc)
		rc = begin_write(s, what);
	if (rc)
		return rc;
	rc = append_locked(s, row, what);
	if (!rc)
		rc = seal_locked(s, row, what);
	if (!rc)
		rc = commit(s, what);
	else
		rollback(s);
	if (rc) {
		/* Nothing was written; do not hand back a seq that isn't. */
		row->seq = seq;
		row->prev_hash[0] = row->hash[0] = '\0';
	}
	if (!rc)
		anchor_after(row);
	return rc;
}

static int set_synchronous(struct store *s, bool full)
{
	return exec(s, full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
		    "cannot set the audit trail's sync mode");
}

int store_audit_append_unsynced(struct store *s, struct audit_row *row)
{
	int rc = set_synchronous(s, false);

	if (rc)
		return rc;
	s->deferring = true;
	rc = store_audit_append(s, row);
	s->deferring = false;
	/* Not back at FULL, every later commit would wait for no sync:
	 * nothing more is written until store_sync puts it back. */
	if (set_synchronous(s, true) < 0) {
		s->sync_failed = true;
		return rc ? rc : -EIO;
	}
	return rc;
}

bool store_unsynced(const struct store *s)
{
	return s->unsynced || s->sync_failed;
}

/* SQLite's own file object for the WAL, synced as a FULL commit syncs it. */
int store_sync(struct store *s)
{
	sqlite3_file *wal = NULL;
	int rc;

	if (!s->unsynced && !s->sync_failed)
		return 0;
	if (s->sync_failed && set_synchronous(s, true) < 0)
		return -EIO;
	rc = sqlite3_file_control(s->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
	if (rc == SQLITE_OK && wal && wal->pMethods)
		rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
	else if (rc == SQLITE_OK)
		rc = SQLITE_IOERR_FSYNC; /* committed, and no WAL to sync: never so */
	if (rc != SQLITE_OK) {
		s->sync_failed = true;
		snprintf(s->err, sizeof(s->err), "cannot sync the audit trail's log (%s)",
			 sqlite3_errstr(rc));
		return -EIO;
	}
	s->unsynced = s->sync_failed = false;
	return 0;
}

/* ---- audit: anchors ------------------------------------------------------ */

static struct {
	uint64_t every;
	store_anchor_fn fn;
} anchor;

void store_set_anchor_hook(uint64_t every_rows, store_anchor_fn fn)
{
	anchor.every = every_rows;
	anchor.fn = fn;
}

static void anchor_after(const struct audit_row *row)
{
	if (anchor.fn && anchor.every && row->seq > 0 && (uint64_t)row->seq % anchor.every == 0)
		anchor.fn(row->seq, row->hash);
}

int store_audit_head(struct store *s, int64_t *seq, char hash[65])
{
	return read_head(s, seq, hash, "cannot read the audit head");
}

/* ---- audit: sealing ------------------------------------------------------ */

/* The key index of the newest seal; -1 when no row is sealed. */
static int last_key_index(struct store *s, int64_t *index, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	*index = -1;
	rc = prep(s, "SELECT key_index FROM audit_seal ORDER BY seq DESC LIMIT 1", &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*index = sqlite3_column_int64(st, 0);
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_fail(s, rc, what);
	done(s, st);
	return rc;
}

static int insert_seal(struct store *s, int64_t seq, const struct seal_key *k, const char *hash,
		       const char *what)
{
	sqlite3_stmt *st;
	char mac[65];
	int rc;

	seal_mac(k, hash, mac);
	rc = prep(s, "INSERT INTO audit_seal (seq, key_index, mac) VALUES (?1, ?2, ?3)", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, seq) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, (int64_t)k->index) != SQLITE_OK ||
	    sqlite3_bind_text(st, 3, mac, 64, SQLITE_TRANSIENT) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	return step_done(s, st, what);
}

/* Loads the current key, or *have = false when sealing was never set up.
 * Once a row is sealed every later one must be: without the key file, or
 * with one older than the newest seal, nothing is written. */
static int current_key(struct store *s, struct seal_key *k, bool *have, const char *what)
{
	char err[400];
	int64_t last;
	int rc = last_key_index(s, &last, what);

	*have = false;
	if (rc)
		return rc;
	rc = seal_key_load(s->dir, k, err, sizeof(err));
	if (rc == -ENOENT && last < 0)
		return 0;
	if (rc == -ENOENT)
		return set_err(s, -EKEYREJECTED, "the audit trail is sealed (key %lld) but %s/%s "
			       "is gone: no unsealed row is written after sealed ones",
			       (long long)last, s->dir, SEAL_KEY_FILE);
	if (rc)
		return set_err(s, rc, "%s", err);
	if ((int64_t)k->index <= last) {
		seal_key_wipe(k);
		return set_err(s, -EKEYREJECTED, "the sealing key in %s/%s is at index %llu but "
			       "row seals reach %lld: an old key file was put back",
			       s->dir, SEAL_KEY_FILE, (unsigned long long)k->index, (long long)last);
	}
	*have = true;
	return 0;
}

/* Seals the row just inserted, in its transaction, and evolves the key
 * before the COMMIT: once the row is durable its key is gone from the
 * file.  A crash between the two leaves an unused key index, never a
 * row sealed under a key that is still on disk. */
static int seal_locked(struct store *s, const struct audit_row *row, const char *what)
{
	struct seal_key k;
	char err[400];
	bool have;
	int rc;

	if (s->copy)
		return set_err(s, -EROFS, "a copy opened for verification is read only");
	rc = current_key(s, &k, &have, what);
	if (rc || !have)
		return rc;
	rc = insert_seal(s, row->seq, &k, row->hash, what);
	seal_key_evolve(&k);
	if (!rc && seal_key_save(s->dir, &k, err, sizeof(err)) < 0)
		rc = set_err(s, -EIO, "%s", err);
	seal_key_wipe(&k);
	return rc;
}

static int seal_init_locked(struct store *s, char key_hex[65], const char *what)
{
	struct audit_row row = { .uid = (uint32_t)geteuid(), .pid = (int32_t)getpid(),
				 .event = AUDIT_EPOCH, .decision = AUDIT_EPOCH_SEALED,
				 .follows = true };
	struct seal_key k;
	char err[400];
	int64_t last;
	int rc = last_key_index(s, &last, what);

	if (rc)
		return rc;
	if (last >= 0)
		return set_err(s, -EEXIST, "the audit trail in %s is sealed already; its key "
			       "cannot be replaced", s->path);
	rc = seal_key_load(s->dir, &k, err, sizeof(err));
	seal_key_wipe(&k);
	if (rc != -ENOENT)
		return set_err(s, rc ? rc : -EEXIST, "%s", rc ? err :
			       "a sealing key exists already; remove it only if no row was sealed");
	rc = seal_key_new(&k);
	if (rc)
		return set_err(s, rc, "cannot draw a key: %s", strerror(-rc));
	seal_key_hex(&k, key_hex);
	rc = seal_key_save(s->dir, &k, err, sizeof(err));
	seal_key_wipe(&k);
	if (rc)
		return set_err(s, rc, "%s", err);
	rc = normalise(s, &row);
	if (!rc)
		rc = append_locked(s, &row, what);
	if (!rc)
		rc = seal_locked(s, &row, what);
	if (rc) {
		/* Rolled back: no row is sealed, so no key may stay behind. */
		char path[PATH_MAX + sizeof(SEAL_KEY_FILE) + 1];

		snprintf(path, sizeof(path), "%s/%s", s->dir, SEAL_KEY_FILE);
		unlink(path);
	}
	return rc;
}

int store_audit_seal_init(struct store *s, char key_hex[65])
{
	const char *what = "cannot start sealing the audit trail";
	int rc;

	key_hex[0] = '\0';
	if (s->copy)
		return set_err(s, -EROFS, "a copy opened for verification is read only");
	rc = begin_write(s, what);
	if (rc)
		return rc;
	rc = seal_init_locked(s, key_hex, what);
	if (!rc)
		rc = commit(s, what);
	else
		rollback(s);
	if (rc)
		explicit_bzero(key_hex, 65);
	return rc;
}

int store_audit_mark_break(struct store *s, int64_t bad_seq, struct audit_row *row)
{
	*row = (struct audit_row){ .uid = (uint32_t)geteuid(), .pid = (int32_t)getpid(),
				   .run_id = (uint64_t)bad_seq, .event = AUDIT_EPOCH,
				   .decision = AUDIT_EPOCH_BROKEN, .follows = true };
	return store_audit_append(s, row);
}

int store_audit_mark_setting(struct store *s, const char *decision, struct audit_row *row)
{
	*row = (struct audit_row){ .uid = (uint32_t)geteuid(), .pid = (int32_t)getpid(),
				   .event = AUDIT_EPOCH, .decision = decision, .follows = true };
	return store_audit_append(s, row);
}

/* ---- audit: read back -------------------------------------------------- */

/* The hashed fields of the current row, exactly as stored. */
static void col_fields(sqlite3_stmt *st, struct field f[C_NFIELDS])
{
	int i;

	for (i = 0; i < C_NFIELDS; i++) {
		switch (sqlite3_column_type(st, i)) {
		case SQLITE_INTEGER:
			f[i] = (struct field){ .type = 'i', .v = sqlite3_column_int64(st, i) };
			break;
		case SQLITE_NULL:
			f[i] = (struct field){ .type = 'n' };
			break;
		default:
			/* Blob first, then bytes: the documented safe order. */
			f[i].type = 's';
			f[i].p = sqlite3_column_blob(st, i);
			f[i].len = (size_t)sqlite3_column_bytes(st, i);
			break;
		}
	}
}

static int col_hash(struct store *s, sqlite3_stmt *st, int col, char out[65])
{
	int rc = copy_col(s, st, col, out, 65);

	if (!rc && !is_hex64(out))
		rc = set_err(s, -EUCLEAN, "audit %s is malformed (%s)", sqlite3_column_name(st, col), s->path);
	return rc;
}

static const char *col_str(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	return t ? (const char *)t : "";
}

static int col_row(struct store *s, sqlite3_stmt *st, struct audit_row *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->seq = sqlite3_column_int64(st, C_SEQ);
	r->time_ms = sqlite3_column_int64(st, C_TIME);
	r->uid = (uint32_t)sqlite3_column_int64(st, C_UID);
	r->pid = (int32_t)sqlite3_column_int64(st, C_PID);
	r->run_id = (uint64_t)sqlite3_column_int64(st, C_RUN);
	r->event = col_str(st, C_EVENT);
	if (sqlite3_column_type(st, C_CODE) != SQLITE_NULL) {
		r->code = sqlite3_column_blob(st, C_CODE);
		r->code_len = (size_t)sqlite3_column_bytes(st, C_CODE);
		if (!r->code)
			r->code = "";
	}
	r->labels = col_str(st, C_LABELS);
	r->mode = col_str(st, C_MODE);
	r->decision = col_str(st, C_DECISION);
	r->approver = col_str(st, C_APPROVER);
	r->profile = col_str(st, C_PROFILE);
	r->has_exit = sqlite3_column_int64(st, C_HAS_EXIT) != 0;
	r->exit_code = sqlite3_column_int64(st, C_EXIT_CODE);
	r->signal = sqlite3_column_int64(st, C_SIGNAL);
	r->timed_out = sqlite3_column_int64(st, C_TIMED_OUT) != 0;
	r->duration_ms = sqlite3_column_int64(st, C_DURATION);
	r->blocked = sqlite3_column_blob(st, C_BLOCKED);
	r->blocked_len = (size_t)sqlite3_column_bytes(st, C_BLOCKED);
	r->after_seq = sqlite3_column_int64(st, C_AFTER);
	rc = copy_col(s, st, C_SHA, r->sha256, sizeof(r->sha256));
	if (!rc)
		rc = copy_col(s, st, C_PREV, r->prev_hash, sizeof(r->prev_hash));
	if (!rc)
		rc = copy_col(s, st, C_HASH, r->hash, sizeof(r->hash));
	return rc;
}

/* Steps a read of audit rows bound to ?1 and ?2, handing each to cb. */
static int read_rows(struct store *s, const char *sql, int64_t a1, int64_t a2, audit_cb cb,
		     void *arg)
{
	const char *what = "cannot read the audit trail";
	struct audit_row r;
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, sql, &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, a1) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, a2) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	for (rc = 0; !rc;) {
		int step = sqlite3_step(st);

		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW) {
			rc = sql_fail(s, step, what);
			break;
		}
		rc = col_row(s, st, &r);
		if (!rc)
			rc = cb(&r, arg);
	}
	done(s, st);
	return rc;
}

int store_audit_tail(struct store *s, uint32_t uid, size_t max, audit_cb cb, void *arg)
{
	char sql[1024];

	/* The broker's own epoch rows are no client's decisions. */
	snprintf(sql, sizeof(sql), "SELECT " AUDIT_READ_COLS ", NULL, NULL, %s FROM (SELECT * "
		 "FROM audit WHERE uid = ?1 AND event != '" AUDIT_EPOCH "' ORDER BY seq DESC "
		 "LIMIT ?2) a ORDER BY a.seq", AUDIT_TAIL_COLS(s));
	return read_rows(s, sql, uid, max > INT64_MAX ? INT64_MAX : (int64_t)max, cb, arg);
}

int store_audit_row(struct store *s, uint32_t uid, int64_t seq, audit_cb cb, void *arg)
{
	char sql[1024];

	snprintf(sql, sizeof(sql), "SELECT " AUDIT_READ_COLS ", NULL, NULL, %s FROM audit a "
		 "WHERE a.uid = ?1 AND a.seq = ?2 AND a.event != '" AUDIT_EPOCH "'",
		 AUDIT_TAIL_COLS(s));
	return read_rows(s, sql, uid, seq, cb, arg);
}

/* ---- audit: verify ----------------------------------------------------- */

struct walk {
	struct store *s;
	struct audit_report *rep;
	const struct audit_anchor *anchors;
	size_t n_anchors, next_anchor;
	struct seal_key key;   /* the key of the last seal checked */
	bool have_key;
	int64_t seal_start;    /* seq of the row that began sealing, 0 none */
	char prev[65];
	int64_t seq;           /* the row before, 0 none yet */
	bool partial;          /* from a row past the first: its link is taken on trust */
};

static void add_problem(struct audit_report *rep, enum audit_problem_kind kind, int64_t seq,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void add_problem(struct audit_report *rep, enum audit_problem_kind kind, int64_t seq,
			const char *fmt, ...)
{
	struct audit_problem *p;
	va_list ap;

	if (kind == AUDIT_SEAL)
		rep->seal_problems++;
	else if (kind == AUDIT_ANCHOR)
		rep->anchor_problems++;
	else
		rep->chain_problems++;
	if (rep->n >= AUDIT_PROBLEMS_MAX) {
		rep->dropped++;
		return;
	}
	p = &rep->problems[rep->n++];
	p->kind = kind;
	p->seq = seq;
	p->acked_by = 0;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
}

/* An epoch row that records the break at seq, if one was written. */
static void ack_break(struct audit_report *rep, int64_t bad, int64_t epoch_seq)
{
	for (size_t i = 0; i < rep->n; i++)
		if (rep->problems[i].kind == AUDIT_CHAIN && rep->problems[i].seq == bad &&
		    !rep->problems[i].acked_by)
			rep->problems[i].acked_by = epoch_seq;
}

static void check_link(struct walk *w, int64_t seq, const char *prev)
{
	struct audit_report *rep = w->rep;

	if (w->partial && !rep->rows)
		return; /* the first row read: the walk starts here */
	if (seq != w->seq + 1)
		add_problem(rep, AUDIT_CHAIN, w->seq + 1, "rows %lld to %lld are missing (row %lld "
			    "follows row %lld)", (long long)w->seq + 1, (long long)seq - 1,
			    (long long)seq, (long long)w->seq);
	else if (strcmp(prev, w->prev))
		add_problem(rep, AUDIT_CHAIN, seq, "row %lld does not link to row %lld (a row was "
			    "replaced, inserted or reordered)", (long long)seq, (long long)w->seq);
}

/* The seal of a row, with key[0] given: keys only move forward. */
static void check_seal(struct walk *w, sqlite3_stmt *st, int64_t seq, const char *calc,
		       bool is_start)
{
	struct audit_report *rep = w->rep;
	int64_t index = sqlite3_column_int64(st, C_KEY_INDEX);
	const unsigned char *mac = sqlite3_column_text(st, C_MAC);
	char want[65];

	if (!w->seal_start && !(is_start && index == 0)) {
		add_problem(rep, AUDIT_SEAL, seq, "row %lld is sealed under key %lld, but the row "
			    "that began sealing (key 0) is not before it", (long long)seq,
			    (long long)index);
		return;
	}
	if (is_start && index == 0 && w->seal_start) {
		add_problem(rep, AUDIT_SEAL, seq, "row %lld begins sealing again, after row %lld",
			    (long long)seq, (long long)w->seal_start);
		return;
	}
	if (index < 0 || (uint64_t)index < w->key.index) {
		add_problem(rep, AUDIT_SEAL, seq, "row %lld is sealed under key %lld, older than "
			    "key %llu of a row before it", (long long)seq, (long long)index,
			    (unsigned long long)w->key.index);
		return;
	}
	if (!w->seal_start)
		w->seal_start = seq;
	while (w->key.index < (uint64_t)index)
		seal_key_evolve(&w->key);
	seal_mac(&w->key, calc, want);
	if (!mac || sqlite3_column_bytes(st, C_MAC) != 64 ||
	    !memeql_sec(mac, want, 64))
		add_problem(rep, AUDIT_SEAL, seq, "its seal does not verify under key %lld (the "
			    "row or its seal was written without that key)", (long long)index);
}

static void check_sealing(struct walk *w, sqlite3_stmt *st, int64_t seq, const char *calc,
			  bool is_start)
{
	struct audit_report *rep = w->rep;
	bool sealed = sqlite3_column_type(st, C_KEY_INDEX) != SQLITE_NULL;

	if (sealed) {
		rep->sealed++;
		if (!rep->first_sealed)
			rep->first_sealed = seq;
		rep->last_key_index = sqlite3_column_int64(st, C_KEY_INDEX);
	}
	if (!w->have_key)
		return;
	if (sealed)
		check_seal(w, st, seq, calc, is_start);
	else if (w->seal_start)
		add_problem(rep, AUDIT_SEAL, seq, "row %lld is not sealed, though sealing began at "
			    "row %lld", (long long)seq, (long long)w->seal_start);
}

static void check_anchors_at(struct walk *w, int64_t seq, const char *stored)
{
	for (; w->next_anchor < w->n_anchors && w->anchors[w->next_anchor].seq <= seq;
	     w->next_anchor++) {
		const struct audit_anchor *a = &w->anchors[w->next_anchor];

		if (a->seq <= 0)
			w->rep->anchors_ok++; /* an empty trail's head says nothing */
		else if (a->seq < seq)
			add_problem(w->rep, AUDIT_ANCHOR, a->seq, "row %lld of an anchor is missing",
				    (long long)a->seq);
		else if (strcmp(a->hash, stored))
			add_problem(w->rep, AUDIT_ANCHOR, a->seq, "row %lld's hash differs from its "
				    "anchor (rows rewritten since the anchor was logged)",
				    (long long)a->seq);
		else
			w->rep->anchors_ok++;
	}
}

static int check_row(struct walk *w, sqlite3_stmt *st)
{
	struct field f[C_NFIELDS], tail[2] = { { .type = 's' }, { .type = 'i' } };
	char prev[65] = "", stored[65] = "", calc[65];
	int64_t seq = sqlite3_column_int64(st, C_SEQ);
	bool epoch = !strcmp(col_str(st, C_EVENT), AUDIT_EPOCH);
	bool ok = true;

	if (col_hash(w->s, st, C_PREV, prev) || col_hash(w->s, st, C_HASH, stored)) {
		add_problem(w->rep, AUDIT_CHAIN, seq, "its stored hashes are malformed");
		ok = false;
	}
	if (ok)
		check_link(w, seq, prev);
	col_fields(st, f);
	tail[0].p = sqlite3_column_blob(st, C_BLOCKED);
	tail[0].len = (size_t)sqlite3_column_bytes(st, C_BLOCKED);
	tail[1].v = sqlite3_column_int64(st, C_AFTER);
	row_hash(w->s, prev[0] ? prev : ZERO_HASH, f, tail, calc);
	if (ok && strcmp(calc, stored)) {
		add_problem(w->rep, AUDIT_CHAIN, seq, "its contents do not match its hash (the row "
			    "was edited)");
	}
	if (epoch && !strcmp(col_str(st, C_DECISION), AUDIT_EPOCH_BROKEN))
		ack_break(w->rep, sqlite3_column_int64(st, C_RUN), seq);
	check_sealing(w, st, seq, calc, epoch && !strcmp(col_str(st, C_DECISION),
							   AUDIT_EPOCH_SEALED));
	check_anchors_at(w, seq, stored);
	/* Go on from what is stored, so every later break shows too. */
	memcpy(w->prev, stored, sizeof(stored));
	w->seq = seq;
	if (!w->rep->first_seq)
		w->rep->first_seq = seq;
	w->rep->rows++;
	return 0;
}

static int walk_rows(struct walk *w, int64_t from, const char *what)
{
	struct store *s = w->s;
	sqlite3_stmt *st;
	char sql[1024];
	int rc;

	snprintf(sql, sizeof(sql), "SELECT " AUDIT_READ_COLS ", x.key_index, x.mac, %s FROM "
		 "audit a LEFT JOIN audit_seal x ON x.seq = a.seq WHERE a.seq >= ?1 ORDER BY "
		 "a.seq", AUDIT_TAIL_COLS(s));
	rc = prep(s, sql, &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, from) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		done(s, st);
		return rc;
	}
	for (rc = 0; !rc;) {
		int step = sqlite3_step(st);

		if (step == SQLITE_DONE)
			break;
		rc = step == SQLITE_ROW ? check_row(w, st) : sql_fail(s, step, what);
	}
	done(s, st);
	return rc;
}

/* The head against the last row, then anchors past the last row. */
static void check_end(struct walk *w, int64_t head, const char *head_hash)
{
	struct audit_report *rep = w->rep;

	rep->head_seq = head;
	memcpy(rep->head_hash, head_hash, 65);
	if (head > w->seq)
		add_problem(rep, AUDIT_CHAIN, w->seq + 1, "the head names row %lld but the last "
			    "row is %lld: rows %lld to %lld were deleted at the end", (long long)head,
			    (long long)w->seq, (long long)w->seq + 1, (long long)head);
	else if (head < w->seq)
		add_problem(rep, AUDIT_CHAIN, head + 1, "rows %lld to %lld come after the head "
			    "(row %lld)", (long long)head + 1, (long long)w->seq, (long long)head);
	else if (strcmp(head_hash, w->seq ? w->prev : ZERO_HASH))
		add_problem(rep, AUDIT_CHAIN, head, "the head's hash does not match row %lld",
			    (long long)head);
	for (; w->next_anchor < w->n_anchors; w->next_anchor++) {
		const struct audit_anchor *a = &w->anchors[w->next_anchor];

		add_problem(rep, AUDIT_ANCHOR, w->seq + 1, "an anchor names row %lld but the trail "
			    "ends at row %lld: rows %lld to %lld were removed (truncated or rolled "
			    "back)", (long long)a->seq, (long long)w->seq, (long long)w->seq + 1,
			    (long long)a->seq);
	}
	if (w->have_key && !w->seal_start)
		add_problem(rep, AUDIT_SEAL, w->seq + 1, "no row begins sealing: with a key, the "
			    "trail must hold the row sealed under key 0 (rows were removed, or "
			    "this key is not this trail's)");
}

static int cmp_anchor(const void *a, const void *b)
{
	const struct audit_anchor *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

/* The same anchor logged twice (at a row count and at stop) is one. */
static size_t unique_anchors(struct audit_anchor *a, size_t n)
{
	size_t out = 1;

	for (size_t i = 1; i < n; i++)
		if (a[i].seq != a[out - 1].seq || strcmp(a[i].hash, a[out - 1].hash))
			a[out++] = a[i];
	return out;
}

int store_audit_check(struct store *s, const struct audit_check *opt, struct audit_report *rep)
{
	const char *what = "cannot read the audit trail";
	struct walk w = { .s = s, .rep = rep, .prev = ZERO_HASH };
	char head_hash[65];
	int64_t head;
	int rc;

	memset(rep, 0, sizeof(*rep));
	w.partial = opt->from_seq > 1;
	if (opt->key) {
		w.key = *opt->key;
		w.have_key = true;
		rep->seals_checked = true;
	}
	if (opt->n_anchors) {
		qsort(opt->anchors, opt->n_anchors, sizeof(*opt->anchors), cmp_anchor);
		w.anchors = opt->anchors;
		w.n_anchors = unique_anchors(opt->anchors, opt->n_anchors);
	}
	/* One read transaction: the rows and the head are one snapshot even
	 * while another connection appends. */
	rc = exec(s, "BEGIN", what);
	if (rc)
		goto out;
	rc = walk_rows(&w, opt->from_seq, what);
	if (!rc) {
		rc = read_head(s, &head, head_hash, what);
		if (rc == -EUCLEAN) {
			add_problem(rep, AUDIT_CHAIN, w.seq + 1, "the head row is missing or malformed");
			rc = 0;
		} else if (!rc) {
			check_end(&w, head, head_hash);
		}
	}
	rollback(s);
	rep->last_seq = w.seq;
out:
	seal_key_wipe(&w.key);
	return rc;
}

/* The broker's own check (the `audit verify` request): the chain alone. */
int store_audit_verify(struct store *s, uint64_t *rows, int64_t *bad_seq)
{
	struct audit_check opt = { 0 };
	struct audit_report rep;
	int rc = store_audit_check(s, &opt, &rep);

	*rows = rep.rows;
	*bad_seq = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < rep.n; i++) {
		if (rep.problems[i].kind == AUDIT_CHAIN) {
			*bad_seq = rep.problems[i].seq;
			*rows = (uint64_t)(*bad_seq > 1 ? *bad_seq - 1 : 0);
			return set_err(s, -EBADMSG, "audit chain broken at row %lld: %s",
				       (long long)*bad_seq, rep.problems[i].why);
		}
	}
	return 0;
}
