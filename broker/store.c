/* SPDX-License-Identifier: MIT
 * Grants and audit trail in SQLite.
 *
 * Durability comes from SQLite alone: WAL with synchronous=FULL makes every
 * COMMIT durable and a process killed mid-write leaves the database before
 * or after the transaction.  Statements are prepared per call: nothing is
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
 * Fixed order, type tags and length prefixes make the encoding injective.
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

#include <nettle/sha2.h>
#include <sqlite3.h>

#include "broker/store.h"

#define DB_NAME "kotoba.db"
#define BUSY_TIMEOUT_MS 5000
#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define HASH_DOMAIN "kotoba-audit-v1"

struct store {
	sqlite3 *db;
	uint64_t quota_bytes, quota_period_ms;
	char path[PATH_MAX];
	char err[768];
};

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
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

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
	C_SIGNAL, C_TIMED_OUT, C_DURATION, C_NFIELDS, C_PREV = C_NFIELDS, C_HASH
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int prep(struct store *s, const char *sql, sqlite3_stmt **st, const char *what)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);

	if (rc != SQLITE_OK) {
		*st = NULL;
		return sql_fail(s, rc, what);
	}
	return 0;
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
	sqlite3_finalize(st);
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
	 * checkpoint, so a burst of large rows does not leave it large. */
	if (!rc)
		rc = exec(s, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
			  " PRAGMA journal_size_limit=4194304", "cannot configure the database");
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
	sqlite3_finalize(st);
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

void store_close(struct store *s)
{
	if (!s)
		return;
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
		sqlite3_finalize(*st);
		*st = NULL;
	}
	return rc;
}

/* Steps a statement that returns no rows (one autocommit transaction). */
static int step_done(struct store *s, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	rc = rc == SQLITE_DONE ? 0 : sql_fail(s, rc, what);
	sqlite3_finalize(st);
	return rc;
}

int store_grant_get(struct store *s, uint32_t uid, const char *family, bool *has)
{
	const char *what = "cannot read grant";
	sqlite3_stmt *st;
	int rc;

	*has = false;
	rc = prep_grant(s, "SELECT 1 FROM grants WHERE uid = ?1 AND family = ?2",
			uid, family, &st, what);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		*has = rc == SQLITE_ROW;
		rc = 0;
	} else {
		rc = sql_fail(s, rc, what);
	}
	sqlite3_finalize(st);
	return rc;
}

int store_grant_save(struct store *s, uint32_t uid, const char *family, const char *card_id)
{
	const char *what = "cannot save grant";
	sqlite3_stmt *st;
	int rc;

	rc = check_card_id(s, card_id);
	if (!rc)
		rc = prep_grant(s, "INSERT INTO grants (uid, family, card_id, saved_at_ms)"
				" VALUES (?1, ?2, ?3, ?4) ON CONFLICT (uid, family) DO NOTHING",
				uid, family, &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_text(st, 3, card_id, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, now_ms()) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		sqlite3_finalize(st);
		return rc;
	}
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
	if (sqlite3_bind_int64(st, 3, now_ms()) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		sqlite3_finalize(st);
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

static int read_grant(struct store *s, sqlite3_stmt *st, struct grant_row *r)
{
	int rc = copy_col(s, st, 0, r->family, sizeof(r->family));

	if (!rc)
		rc = copy_col(s, st, 2, r->card_id, sizeof(r->card_id));
	r->saved_at_ms = sqlite3_column_int64(st, 1);
	r->use_count = (uint64_t)sqlite3_column_int64(st, 3);
	r->last_used_ms = sqlite3_column_int64(st, 4);
	return rc;
}

int store_grant_list(struct store *s, uint32_t uid, struct grant_row *rows, size_t max, size_t *n)
{
	const char *what = "cannot list grants";
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	rc = prep(s, "SELECT family, saved_at_ms, card_id, use_count, last_used_ms"
		  " FROM grants WHERE uid = ?1 ORDER BY family", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, uid) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		sqlite3_finalize(st);
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
	sqlite3_finalize(st);
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
static int row_hash(struct store *s, const char *prev, const struct field *f, char out[65])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	int i;

	sha256_init(&ctx);
	sha256_update(&ctx, 64, (const uint8_t *)prev);
	sha256_update(&ctx, sizeof(HASH_DOMAIN), (const uint8_t *)HASH_DOMAIN);
	for (i = 0; i < C_NFIELDS; i++)
		update_field(&ctx, &f[i]);
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
		r->time_ms = now_ms();
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

/* Binds fields as ?1..?18, prev as ?19, hash as ?20 and code_ref as ?21;
 * by reference, the code itself is NULL here (it is in audit_code). */
static int bind_row(sqlite3_stmt *st, const struct field *f, const char *prev, const char *hash,
		    bool code_ref)
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
	sqlite3_finalize(st);
	return rc;
}

static int insert_row(struct store *s, const struct field *f, int64_t seq,
		      const char *prev, const char *hash, bool code_ref, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, "INSERT INTO audit (" AUDIT_COLS ", code_ref) VALUES (?1, ?2, ?3, ?4,"
		  " ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,"
		  " ?21)", &st, what);
	if (rc)
		return rc;
	if (bind_row(st, f, prev, hash, code_ref) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		sqlite3_finalize(st);
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
		sqlite3_finalize(st);
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
		sqlite3_finalize(st);
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
		sqlite3_finalize(st);
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
	sqlite3_finalize(st);
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
		sqlite3_finalize(st);
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
		rc = charge(s, r, ROW_COST + added, what);
	return rc;
}

static int append_locked(struct store *s, struct audit_row *row, const char *what)
{
	struct field f[C_NFIELDS];
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
	rc = row_hash(s, prev, f, hash);
	if (!rc)
		rc = insert_row(s, f, seq, prev, hash, code_ref, what);
	if (rc)
		return rc;
	row->seq = seq;
	memcpy(row->prev_hash, prev, sizeof(prev));
	memcpy(row->hash, hash, sizeof(hash));
	return 0;
}

int store_audit_append(struct store *s, struct audit_row *row)
{
	const char *what = "cannot append to the audit trail";
	int64_t seq = row->seq;
	int rc;

	rc = normalise(s, row);
	if (!rc)
		rc = begin_write(s, what);
	if (rc)
		return rc;
	rc = append_locked(s, row, what);
	if (!rc)
		rc = commit(s, what);
	else
		rollback(s);
	if (rc) {
		/* Nothing was written; do not hand back a seq that isn't. */
		row->seq = seq;
		row->prev_hash[0] = row->hash[0] = '\0';
	}
	return rc;
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
	rc = copy_col(s, st, C_SHA, r->sha256, sizeof(r->sha256));
	if (!rc)
		rc = copy_col(s, st, C_PREV, r->prev_hash, sizeof(r->prev_hash));
	if (!rc)
		rc = copy_col(s, st, C_HASH, r->hash, sizeof(r->hash));
	return rc;
}

int store_audit_tail(struct store *s, uint32_t uid, size_t max, audit_cb cb, void *arg)
{
	const char *what = "cannot read the audit trail";
	struct audit_row r;
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, "SELECT " AUDIT_READ_COLS " FROM (SELECT * FROM audit WHERE uid = ?1"
		  " ORDER BY seq DESC LIMIT ?2) a ORDER BY a.seq", &st, what);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(st, 1, uid) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, max > INT64_MAX ? INT64_MAX : (int64_t)max) != SQLITE_OK) {
		rc = sql_fail(s, sqlite3_errcode(s->db), what);
		sqlite3_finalize(st);
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
	sqlite3_finalize(st);
	return rc;
}

/* ---- audit: verify ----------------------------------------------------- */

struct walk {
	char prev[65];
	int64_t seq;    /* last intact row */
	uint64_t rows;
	int64_t bad;
};

/* Checks the current row against the chain so far. */
static int check_row(struct store *s, sqlite3_stmt *st, struct walk *w)
{
	struct field f[C_NFIELDS];
	char prev[65], stored[65], calc[65];
	int64_t seq = sqlite3_column_int64(st, C_SEQ);
	int rc;

	w->bad = seq;
	if (seq != w->seq + 1)
		return set_err(s, -EBADMSG, "audit chain broken: row %lld follows row %lld (rows deleted or renumbered)",
			       (long long)seq, (long long)w->seq);
	if (col_hash(s, st, C_PREV, prev) || col_hash(s, st, C_HASH, stored))
		return set_err(s, -EBADMSG, "audit chain broken at row %lld: its stored hashes are malformed",
			       (long long)seq);
	if (strcmp(prev, w->prev))
		return set_err(s, -EBADMSG, "audit chain broken at row %lld: it does not link to the row before it (a row was deleted, inserted or reordered)",
			       (long long)seq);
	col_fields(st, f);
	rc = row_hash(s, prev, f, calc);
	if (rc)
		return rc;
	if (strcmp(calc, stored))
		return set_err(s, -EBADMSG, "audit chain broken at row %lld: its contents do not match its hash (the row was edited)",
			       (long long)seq);
	memcpy(w->prev, stored, sizeof(stored));
	w->seq = seq;
	w->rows++;
	w->bad = 0;
	return 0;
}

static int check_head(struct store *s, struct walk *w, const char *what)
{
	char hash[65];
	int64_t seq;
	int rc = read_head(s, &seq, hash, what);

	if (rc) {
		w->bad = w->seq + 1;
		if (rc != -EUCLEAN)
			return rc;
		return set_err(s, -EBADMSG, "audit chain broken: the audit head row is missing or malformed");
	}
	if (seq != w->seq) {
		w->bad = (seq < w->seq ? seq : w->seq) + 1;
		return set_err(s, -EBADMSG, "audit chain broken: the head names row %lld but the last row is %lld (rows deleted at the end, or appended without the head)",
			       (long long)seq, (long long)w->seq);
	}
	if (strcmp(hash, w->prev)) {
		w->bad = seq;
		return set_err(s, -EBADMSG, "audit chain broken at row %lld: the head hash does not match the last row",
			       (long long)seq);
	}
	return 0;
}

static int walk_chain(struct store *s, struct walk *w, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(s, "SELECT " AUDIT_READ_COLS " FROM audit a ORDER BY a.seq", &st, what);
	if (rc)
		return rc;
	for (rc = 0; !rc;) {
		int step = sqlite3_step(st);

		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW)
			rc = sql_fail(s, step, what);
		else
			rc = check_row(s, st, w);
	}
	sqlite3_finalize(st);
	return rc;
}

int store_audit_verify(struct store *s, uint64_t *rows, int64_t *bad_seq)
{
	const char *what = "cannot read the audit trail";
	struct walk w = { .prev = ZERO_HASH };
	int rc;

	*rows = 0;
	*bad_seq = 0;
	/* One read transaction, so the rows and the head are one snapshot
	 * even while another connection appends. */
	rc = exec(s, "BEGIN", what);
	if (rc)
		return rc;
	rc = walk_chain(s, &w, what);
	if (!rc)
		rc = check_head(s, &w, what);
	rollback(s);
	*rows = w.rows;
	if (rc == -EBADMSG)
		*bad_seq = w.bad;
	return rc;
}
