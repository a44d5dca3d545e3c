// link: broker/store.c broker/seal.c
/* SPDX-License-Identifier: MIT
 * Unit tests of broker/store.c: grants, file modes, open failures, the
 * audit hash chain against hand edits, and SIGKILL during writes; the
 * seals of broker/seal.c against known answers and an old key file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "broker/seal.h"
#include "broker/store.h"
#include "tests/unit/child.h"

#define FAMILY "execute_code"
#define NOBODY 65534

struct fixture {
	char dir[64];
	char db[128];
};

/* ---- helpers ----------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/kotoba-store-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->db, sizeof(f->db), "%s/kotoba.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	chmod(f->dir, 0700);
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static struct store *must_open(const char *dir)
{
	char err[512] = "";
	struct store *s = NULL;
	int rc = store_open(dir, &s, err, sizeof(err));

	if (rc)
		print_error("store_open(%s): %d %s\n", dir, rc, err);
	assert_int_equal(rc, 0);
	assert_non_null(s);
	return s;
}

/* Runs SQL on the database behind the store's back, as an attacker with
 * write access to the file would. */
static int raw_exec(const char *db, const char *sql)
{
	sqlite3 *h;
	char *msg = NULL;
	int rc;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
	sqlite3_free(msg);
	sqlite3_close(h);
	return rc;
}

static void raw_text(const char *db, const char *sql, char *out, size_t len)
{
	sqlite3_stmt *st;
	sqlite3 *h;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
}

static void fill_row(struct audit_row *r, int i)
{
	static const char code[] = "import os\nprint(os.getcwd())\0tail";

	memset(r, 0, sizeof(*r));
	r->uid = i % 2 ? 1001 : 1000;
	r->pid = 4000 + i;
	r->run_id = 0x8000000000000000ull + (uint64_t)i;
	if (i % 3 == 2) {
		r->event = "exit";
		r->decision = "ran";
		r->has_exit = true;
		r->exit_code = i % 5 - 2;
		r->signal = i % 7 == 0 ? 9 : 0;
		r->timed_out = i % 7 == 0;
		r->duration_ms = 10 * i;
		/* Some with a receipt, which the store keeps as bytes. */
		if (i % 6 == 5) {
			r->blocked = "\x82\xa4type\xa7receipt";
			r->blocked_len = 14;
		}
	} else {
		r->event = "decision";
		r->code = code;
		r->code_len = sizeof(code) - (size_t)(i % 4); /* keeps the NUL inside */
		r->labels = i % 2 ? "fs-write,data-out" : "";
		r->decision = i % 4 ? "card" : "ran";
		r->approver = i % 4 ? "" : "grant";
		r->profile = i % 4 ? "" : "unattended";
		/* Some linked to an earlier exit row, as an escalation's are. */
		if (i % 8 == 7)
			r->after_seq = i - 1;
	}
	r->mode = "local";
}

static void append_rows(struct store *s, int n)
{
	struct audit_row r;
	char prev[65];
	int i;

	memset(prev, '0', 64);
	prev[64] = '\0';
	for (i = 0; i < n; i++) {
		fill_row(&r, i);
		assert_int_equal(store_audit_append(s, &r), 0);
		assert_int_equal(r.seq, i + 1);
		assert_string_equal(r.prev_hash, prev);
		assert_int_equal(strlen(r.hash), 64);
		memcpy(prev, r.hash, sizeof(prev));
	}
}

static void make_chain(struct fixture *f, int n)
{
	struct store *s = must_open(f->dir);

	append_rows(s, n);
	store_close(s);
}

static void expect_broken(struct fixture *f, int64_t want)
{
	struct store *s = must_open(f->dir);
	uint64_t rows = 99;
	int64_t bad = 0;

	assert_int_equal(store_audit_verify(s, &rows, &bad), -EBADMSG);
	print_message("  verify: %s\n", store_last_error(s));
	assert_int_equal(bad, want);
	store_close(s);
}

static void expect_intact(struct fixture *f, uint64_t want)
{
	struct store *s = must_open(f->dir);
	uint64_t rows = 0;
	int64_t bad = -1;

	assert_int_equal(store_audit_verify(s, &rows, &bad), 0);
	assert_int_equal(rows, want);
	assert_int_equal(bad, 0);
	store_close(s);
}

/* ---- grants ------------------------------------------------------------ */

static void test_grants(void **state)
{
	struct fixture *f = *state;
	struct grant_row g[4];
	struct store *s = must_open(f->dir);
	int64_t saved;
	size_t n = 9;
	bool has = true, existed = true;

	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, NULL), 0);
	assert_false(has);
	assert_int_equal(store_grant_list(s, 1000, g, 4, &n), 0);
	assert_int_equal(n, 0);

	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-1", NULL), 0);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, NULL), 0);
	assert_true(has);
	assert_int_equal(store_grant_list(s, 1000, g, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(g[0].family, FAMILY);
	assert_string_equal(g[0].card_id, "card-1");
	assert_int_equal(g[0].use_count, 0);
	assert_int_equal(g[0].last_used_ms, 0);
	assert_true(g[0].saved_at_ms > 1600000000000LL);
	saved = g[0].saved_at_ms;

	/* uid 1000's grant is invisible to 1001. */
	assert_int_equal(store_grant_get(s, 1001, FAMILY, &has, NULL), 0);
	assert_false(has);
	assert_int_equal(store_grant_list(s, 1001, g, 4, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_grant_touch(s, 1001, FAMILY), -ENOENT);
	assert_int_equal(store_grant_revoke(s, 1001, FAMILY, &existed), 0);
	assert_false(existed);

	/* Re-saving keeps the first saved_at and card. */
	usleep(5000);
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-2", NULL), 0);
	assert_int_equal(store_grant_touch(s, 1000, FAMILY), 0);
	assert_int_equal(store_grant_touch(s, 1000, FAMILY), 0);
	assert_int_equal(store_grant_list(s, 1000, g, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(g[0].saved_at_ms, saved);
	assert_string_equal(g[0].card_id, "card-1");
	assert_int_equal(g[0].use_count, 2);
	assert_true(g[0].last_used_ms >= saved);

	/* max bounds the rows written. */
	assert_int_equal(store_grant_list(s, 1000, g, 0, &n), 0);
	assert_int_equal(n, 0);

	/* Bad arguments are refused with a sentence. */
	assert_int_equal(store_grant_save(s, 1000, "Execute Code", "c", NULL), -EINVAL);
	assert_true(strlen(store_last_error(s)) > 10);
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "a b", NULL), -EINVAL);
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "", NULL), -EINVAL);
	assert_int_equal(store_grant_get(s, 1000, "", &has, NULL), -EINVAL);
	store_close(s);

	/* Survives a restart. */
	s = must_open(f->dir);
	assert_int_equal(store_grant_list(s, 1000, g, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(g[0].use_count, 2);
	assert_int_equal(store_grant_revoke(s, 1000, FAMILY, &existed), 0);
	assert_true(existed);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, NULL), 0);
	assert_false(has);
	store_close(s);

	s = must_open(f->dir);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, NULL), 0);
	assert_false(has);
	store_close(s);
}

/* The clock a grant's expiry is stamped with. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A grant's terms: an expiry by the wall clock and a directory scope.  The
 * brief grant must outlive a save and three reads on a loaded machine
 * under the sanitizers; its end is waited for, not slept past. */
static void test_grant_terms(void **state)
{
	struct fixture *f = *state;
	struct store *s = must_open(f->dir);
	struct grant_terms brief = { .life_ms = 2000, .scope = "/srv/project" };
	struct grant_terms day = { .life_ms = 86400000, .scope = NULL };
	struct grant_row g, rows[2];
	bool has = false;
	size_t n = 0;

	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-1", &brief), 0);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_true(has);
	assert_string_equal(g.scope, "/srv/project");
	assert_true(g.expires_ms >= g.saved_at_ms + 2000 && g.expires_ms <= g.saved_at_ms + 3000);
	assert_false(g.expired);
	assert_false(g.expiry_recorded);
	assert_int_equal(store_grant_touch(s, 1000, FAMILY), 0);

	/* Past its expiry it is still there, and says so. */
	while (wall_ms() < g.expires_ms)
		usleep(10000);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_true(has && g.expired);
	assert_int_equal(store_grant_list(s, 1000, rows, 2, &n), 0);
	assert_int_equal(n, 1);
	assert_true(rows[0].expired);
	assert_int_equal(store_grant_expiry_recorded(s, 1000, FAMILY), 0);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_true(g.expiry_recorded);

	/* Saving over an expired grant replaces it whole. */
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-2", &day), 0);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_string_equal(g.card_id, "card-2");
	assert_string_equal(g.scope, "");
	assert_int_equal(g.use_count, 0);
	assert_false(g.expired);
	assert_false(g.expiry_recorded);

	/* Over one in force, the new terms apply and the rest stays. */
	assert_int_equal(store_grant_touch(s, 1000, FAMILY), 0);
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-3", NULL), 0);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_string_equal(g.card_id, "card-2");
	assert_int_equal(g.use_count, 1);
	assert_int_equal(g.expires_ms, 0);
	assert_false(g.expired);

	/* A scope is an absolute directory. */
	brief.scope = "relative/dir";
	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-4", &brief), -EINVAL);
	store_close(s);
}

/* A store from before grant terms: its grant reads as until revoked,
 * everywhere, and the schema moves on. */
static void test_grant_migration(void **state)
{
	struct fixture *f = *state;
	struct store *s = must_open(f->dir);
	struct grant_row g;
	bool has = false;

	assert_int_equal(store_grant_save(s, 1000, FAMILY, "card-old", NULL), 0);
	store_close(s);
	assert_int_equal(raw_exec(f->db, "ALTER TABLE audit DROP COLUMN after_seq;"
				  "ALTER TABLE audit DROP COLUMN blocked;"
				  "ALTER TABLE grants DROP COLUMN expiry_recorded;"
				  "ALTER TABLE grants DROP COLUMN scope;"
				  "ALTER TABLE grants DROP COLUMN expires_ms;"
				  "PRAGMA user_version=3"), SQLITE_OK);
	s = must_open(f->dir);
	assert_int_equal(store_grant_get(s, 1000, FAMILY, &has, &g), 0);
	assert_true(has);
	assert_string_equal(g.card_id, "card-old");
	assert_int_equal(g.expires_ms, 0);
	assert_string_equal(g.scope, "");
	assert_false(g.expired);
	store_close(s);
}

/* ---- files and open failures ------------------------------------------ */

static void expect_mode(const char *db, const char *suffix, bool must_exist)
{
	char p[160];
	struct stat st;

	snprintf(p, sizeof(p), "%s%s", db, suffix);
	if (stat(p, &st)) {
		assert_false(must_exist);
		return;
	}
	print_message("  %s mode %o\n", p, (unsigned)(st.st_mode & 07777));
	assert_int_equal(st.st_mode & 07777, 0600);
}

static void test_file_modes(void **state)
{
	struct fixture *f = *state;
	struct audit_row r;
	struct store *s;
	mode_t old = umask(0);  /* prove the modes do not come from the umask */

	s = must_open(f->dir);
	fill_row(&r, 0);
	assert_int_equal(store_audit_append(s, &r), 0);
	expect_mode(f->db, "", true);
	expect_mode(f->db, "-wal", true);  /* open connection: WAL exists */
	expect_mode(f->db, "-shm", true);
	store_close(s);

	/* A looser leftover is tightened. */
	assert_int_equal(chmod(f->db, 0644), 0);
	s = must_open(f->dir);
	expect_mode(f->db, "", true);
	expect_mode(f->db, "-wal", false);
	expect_mode(f->db, "-shm", false);
	store_close(s);
	umask(old);
}

static void expect_open_fails(const char *dir, int want, const char *must_name)
{
	char err[512] = "";
	struct store *s = (struct store *)1;
	int rc = store_open(dir, &s, err, sizeof(err));

	print_message("  store_open(%s) = %d: %s\n", dir, rc, err);
	if (want)
		assert_int_equal(rc, want);
	else
		assert_true(rc < 0);
	assert_null(s);
	assert_non_null(strstr(err, must_name));
}

static void test_open_errors(void **state)
{
	struct fixture *f = *state;
	char p[160], q[192];
	struct store *s;
	int fd;

	snprintf(p, sizeof(p), "%s/missing", f->dir);
	expect_open_fails(p, -ENOENT, p);

	/* A file where the directory should be: unwritable even for root. */
	snprintf(p, sizeof(p), "%s/file", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	expect_open_fails(p, -ENOTDIR, p);

	/* A directory where the database should be. */
	snprintf(p, sizeof(p), "%s/d", f->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(q, sizeof(q), "%s/kotoba.db", p);
	assert_int_equal(mkdir(q, 0700), 0);
	expect_open_fails(p, -EISDIR, q);
	assert_int_equal(rmdir(q), 0);

	/* A symlink where the database should be. */
	assert_int_equal(symlink("/etc/passwd", q), 0);
	expect_open_fails(p, -ELOOP, q);
	assert_int_equal(unlink(q), 0);

	/* Garbage in the database file. */
	fd = open(q, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	for (int i = 0; i < 512; i++)
		assert_int_equal(write(fd, "not a database, ", 16), 16);
	close(fd);
	expect_open_fails(p, -EUCLEAN, q);
	assert_int_equal(unlink(q), 0);

	/* A schema from a newer broker is not touched. */
	store_close(must_open(p));
	assert_int_equal(raw_exec(q, "PRAGMA user_version=99"), SQLITE_OK);
	expect_open_fails(p, -EPROTO, q);

	/* A world-writable directory without the sticky bit. */
	assert_int_equal(chmod(p, 0777), 0);
	expect_open_fails(p, -EPERM, p);
	assert_int_equal(chmod(p, 0700), 0);

	/* A good store still opens next to all that. */
	s = must_open(f->dir);
	store_close(s);
}

/* Child side of the read-only test: exits 0 if store_open failed closed
 * with a sentence naming the directory. */
static int ro_child(const char *dir, bool expect_ok)
{
	char err[512] = "";
	struct store *s = NULL;
	int rc = store_open(dir, &s, err, sizeof(err));

	fprintf(stderr, "  [uid %u] store_open(%s) = %d: %s\n", (unsigned)geteuid(), dir, rc, err);
	if (expect_ok) {
		store_close(s);
		return rc == 0 ? 0 : 1;
	}
	return rc < 0 && !s && strstr(err, dir) ? 0 : 1;
}

static int run_ro(const char *dir, bool as_nobody, bool expect_ok)
{
	int status;
	pid_t pid = fork_child();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (as_nobody && (setresgid(NOBODY, NOBODY, NOBODY) || setgroups(0, NULL) ||
				  setresuid(NOBODY, NOBODY, NOBODY)))
			_exit(2);
		_exit(ro_child(dir, expect_ok));
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void test_readonly_dir(void **state)
{
	struct fixture *f = *state;
	bool root = geteuid() == 0;
	int rc;

	if (root) {
		/* chmod 0500 does not stop root (CAP_DAC_OVERRIDE): run the
		 * store in a child that has dropped to nobody instead. */
		print_message("  NOTE: running as root; the read-only sub-cases run in a child as uid %d\n", NOBODY);
		assert_int_equal(chown(f->dir, NOBODY, NOBODY), 0);
	}
	assert_int_equal(chmod(f->dir, 0500), 0);
	/* Empty read-only directory: cannot create the database. */
	rc = run_ro(f->dir, root, false);
	if (rc == 2) {
		print_message("  SKIPPED read-only directory sub-cases: running as root, cannot drop "
			      "to uid %d here, and chmod 0500 does not stop root's writes\n", NOBODY);
		skip();
	}
	assert_int_equal(rc, 0);
	/* Existing database, directory made read-only afterwards: cannot
	 * create -wal/-shm, so it must not limp along read-only. */
	assert_int_equal(chmod(f->dir, 0700), 0);
	assert_int_equal(run_ro(f->dir, root, true), 0);
	assert_int_equal(chmod(f->dir, 0500), 0);
	assert_int_equal(run_ro(f->dir, root, false), 0);
	assert_int_equal(chmod(f->dir, 0700), 0);
}

/* ---- audit ------------------------------------------------------------- */

struct tail_seen {
	uint32_t uid;
	int n;
	int64_t last_seq;
	bool ok;
};

static int tail_cb(const struct audit_row *r, void *arg)
{
	struct tail_seen *t = arg;

	if (r->uid != t->uid || r->seq <= t->last_seq || strlen(r->hash) != 64 ||
	    (strcmp(r->event, "decision") && strcmp(r->event, "exit")))
		t->ok = false;
	if (!strcmp(r->event, "decision") && (!r->code || strlen(r->sha256) != 64 ||
					      memcmp(r->code, "import os\n", 10)))
		t->ok = false;
	if (!strcmp(r->event, "exit") && r->code)
		t->ok = false;
	t->last_seq = r->seq;
	t->n++;
	return 0;
}

static int stop_cb(const struct audit_row *r, void *arg)
{
	return 42;
}

static void test_audit_append_tail(void **state)
{
	struct fixture *f = *state;
	struct tail_seen t = { .uid = 1000, .ok = true };
	struct store *s = must_open(f->dir);
	struct audit_row r;

	append_rows(s, 50);

	/* Known vector: SHA-256("abc"). */
	memset(&r, 0, sizeof(r));
	r.uid = 7;
	r.event = "decision";
	r.decision = "denied";
	r.code = "abc";
	r.code_len = 3;
	assert_int_equal(store_audit_append(s, &r), 0);
	assert_string_equal(r.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_true(r.time_ms > 0);
	assert_int_equal(r.seq, 51);
	/* A hash that contradicts the code, and a missing decision. */
	r.sha256[0] = 'c';
	assert_int_equal(store_audit_append(s, &r), -EINVAL);
	r.sha256[0] = '\0';
	r.decision = NULL;
	assert_int_equal(store_audit_append(s, &r), -EINVAL);
	r.decision = "Ran; DROP TABLE";
	assert_int_equal(store_audit_append(s, &r), -EINVAL);

	/* Newest 10 of uid 1000, oldest first. */
	assert_int_equal(store_audit_tail(s, 1000, 10, tail_cb, &t), 0);
	assert_true(t.ok);
	assert_int_equal(t.n, 10);
	assert_int_equal(t.last_seq, 49); /* rows 1,3,...,49 are uid 1000 */
	t = (struct tail_seen){ .uid = 1001, .ok = true };
	assert_int_equal(store_audit_tail(s, 1001, 1000, tail_cb, &t), 0);
	assert_true(t.ok);
	assert_int_equal(t.n, 25);
	assert_int_equal(t.last_seq, 50);
	t = (struct tail_seen){ .uid = 4242, .ok = true };
	assert_int_equal(store_audit_tail(s, 4242, 10, tail_cb, &t), 0);
	assert_int_equal(t.n, 0);
	assert_int_equal(store_audit_tail(s, 1000, 10, stop_cb, NULL), 42);
	store_close(s);

	expect_intact(f, 51);
	/* Append-only: the triggers refuse edits through SQL. */
	assert_int_not_equal(raw_exec(f->db, "UPDATE audit SET labels = '' WHERE seq = 2"), SQLITE_OK);
	assert_int_not_equal(raw_exec(f->db, "DELETE FROM audit WHERE seq = 51"), SQLITE_OK);
	expect_intact(f, 51);
}

/* Two connections in one process (e.g. a reload that opens the new store
 * before closing the old) share the chain without breaking it. */
static void test_two_connections(void **state)
{
	struct fixture *f = *state;
	struct store *a = must_open(f->dir);
	struct store *b = must_open(f->dir);
	struct audit_row r;
	char res[64];
	int i;

	for (i = 0; i < 40; i++) {
		fill_row(&r, i);
		assert_int_equal(store_audit_append(i % 2 ? b : a, &r), 0);
		assert_int_equal(r.seq, i + 1);
	}
	store_close(a);
	store_close(b);
	raw_text(f->db, "PRAGMA integrity_check", res, sizeof(res));
	assert_string_equal(res, "ok");
	expect_intact(f, 40);
}

/* Each tamper runs on a fresh 50-row chain. */
static void tamper(struct fixture *f, const char *sql, int64_t want)
{
	char path[160];

	snprintf(path, sizeof(path), "%s-wal", f->db);
	unlink(path);
	snprintf(path, sizeof(path), "%s-shm", f->db);
	unlink(path);
	assert_int_equal(unlink(f->db), 0);
	make_chain(f, 50);
	expect_intact(f, 50);
	print_message("  tamper: %s\n", sql);
	assert_int_equal(raw_exec(f->db, "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;"
				  " DROP TRIGGER audit_code_no_update;"
				  " DROP TRIGGER audit_code_no_delete"), SQLITE_OK);
	assert_int_equal(raw_exec(f->db, sql), SQLITE_OK);
	expect_broken(f, want);
}

static void test_audit_tamper(void **state)
{
	struct fixture *f = *state;
	char before[80], after[80];

	make_chain(f, 1);
	/* Edited fields of every kind. */
	tamper(f, "UPDATE audit SET labels = 'fs-write' WHERE seq = 17", 17);
	tamper(f, "UPDATE audit SET exit_code = 7 WHERE seq = 3", 3);
	/* A receipt taken away, or given to a row that had none. */
	tamper(f, "UPDATE audit SET blocked = X'' WHERE seq = 6", 6);
	tamper(f, "UPDATE audit SET blocked = X'00' WHERE seq = 3", 3);
	/* A link moved, taken away, or given to a row that had none. */
	tamper(f, "UPDATE audit SET after_seq = 3 WHERE seq = 8", 8);
	tamper(f, "UPDATE audit SET after_seq = 0 WHERE seq = 16", 16);
	tamper(f, "UPDATE audit SET after_seq = 5 WHERE seq = 9", 9);
	tamper(f, "UPDATE audit SET code = CAST('print(1)' AS BLOB) WHERE seq = 29", 29);
	/* The text, stored once for every row that names it: the first of
	 * them breaks. */
	tamper(f, "UPDATE audit_code SET code = CAST('print(1)' AS BLOB) WHERE sha256 ="
		  " (SELECT sha256 FROM audit WHERE seq = 29)", 1);
	tamper(f, "DELETE FROM audit_code WHERE sha256 = (SELECT sha256 FROM audit WHERE seq = 29)",
	       1);
	tamper(f, "UPDATE audit SET code_ref = 0 WHERE seq = 29", 29);
	tamper(f, "UPDATE audit SET decision = 'denied' WHERE seq = 1", 1);
	tamper(f, "UPDATE audit SET uid = 1002 WHERE seq = 50", 50);
	tamper(f, "UPDATE audit SET time_ms = time_ms + 1 WHERE seq = 33", 33);
	/* Deleted rows: middle, first, last; a gap is named by its first
	 * missing row. */
	tamper(f, "DELETE FROM audit WHERE seq = 25", 25);
	tamper(f, "DELETE FROM audit WHERE seq = 1", 1);
	tamper(f, "DELETE FROM audit WHERE seq = 50", 50);
	tamper(f, "DELETE FROM audit WHERE seq >= 40", 40);
	/* Reordered rows (10 and 11 swap places). */
	tamper(f, "UPDATE audit SET seq = -1 WHERE seq = 10;"
		  "UPDATE audit SET seq = 10 WHERE seq = 11;"
		  "UPDATE audit SET seq = 11 WHERE seq = -1", 10);
	/* An inserted row copied from another, at the end and in a gap. */
	tamper(f, "INSERT INTO audit SELECT 51, time_ms, uid, pid, run_id, event, code, sha256,"
		  " labels, mode, decision, approver, profile, has_exit, exit_code, signal,"
		  " timed_out, duration_ms, prev_hash, hash, code_ref, blocked, after_seq FROM audit"
		  " WHERE seq = 50",
	       51);
	tamper(f, "DELETE FROM audit WHERE seq = 20; INSERT INTO audit SELECT 20, time_ms,"
		  " uid, pid, run_id, event, code, sha256, labels, mode, decision, approver,"
		  " profile, has_exit, exit_code, signal, timed_out, duration_ms, prev_hash,"
		  " hash, code_ref, blocked, after_seq FROM audit WHERE seq = 22", 20);
	/* The head itself. */
	tamper(f, "UPDATE audit_head SET hash = (SELECT hash FROM audit WHERE seq = 49)", 50);
	tamper(f, "DELETE FROM audit_head", 51);

	/* Appending after a break keeps the break visible. */
	tamper(f, "DELETE FROM audit WHERE seq = 50", 50);
	raw_text(f->db, "SELECT hash FROM audit_head", before, sizeof(before));
	{
		struct store *s = must_open(f->dir);
		struct audit_row r;

		fill_row(&r, 1);
		assert_int_equal(store_audit_append(s, &r), 0);
		assert_int_equal(r.seq, 51);
		assert_string_equal(r.prev_hash, before);
		store_close(s);
	}
	raw_text(f->db, "SELECT hash FROM audit_head", after, sizeof(after));
	assert_string_not_equal(before, after);
	expect_broken(f, 50);
}

/* ---- seals ---------------------------------------------------------------- */

/* Known answers, from openssl (AUDIT.md): HMAC pads a short key with
 * zeros, so hexkey:00 is key[0] = 32 zero bytes.
 *   printf 'kotoba-audit-evolve-v1\001' | openssl dgst -sha256 -mac HMAC -macopt hexkey:00
 *   { printf 'kotoba-audit-seal-v1\0\0\0\0\0\0\0\0\0'; printf '%064d' 0; } |
 *     openssl dgst -sha256 -mac HMAC -macopt hexkey:00   (seal of key 0 over 64 '0') */
static void test_seal_known_answers(void **state)
{
	struct seal_key k = { 0 };
	char hex[65], mac[65], zero[65];

	memset(zero, '0', 64);
	zero[64] = '\0';
	seal_mac(&k, zero, mac);
	assert_string_equal(mac, "5df076e72e4709b0307fea9c0315aae36cfc60a9c5965ac57aa2ceadac7d4faa");
	seal_key_evolve(&k);
	assert_int_equal(k.index, 1);
	seal_key_hex(&k, hex);
	assert_string_equal(hex, "4db5fb603526bb16488c605d27cbe8f1da7b7f3a9bfb2f834c901de26c7c0491");
	assert_int_equal(seal_key_parse(hex, 1, &k), 0);
	assert_int_equal(seal_key_parse("4db5", 1, &k), -EINVAL);
}

static void append_more(struct store *s, int n)
{
	struct audit_row r;

	for (int i = 0; i < n; i++) {
		fill_row(&r, i);
		assert_int_equal(store_audit_append(s, &r), 0);
	}
}

static int count_row(const struct audit_row *row, void *arg)
{
	(*(size_t *)arg)++;
	return 0;
}

static void check_with_key(struct store *s, const char *key_hex, uint64_t *seal_problems)
{
	struct audit_check opt = { 0 };
	struct audit_report rep;
	struct seal_key k;

	assert_int_equal(seal_key_parse(key_hex, 0, &k), 0);
	opt.key = &k;
	assert_int_equal(store_audit_check(s, &opt, &rep), 0);
	assert_int_equal(rep.chain_problems, 0);
	*seal_problems = rep.seal_problems;
	if (rep.seal_problems)
		print_message("  seal: %s\n", rep.problems[0].why);
}

static void test_seal_lifecycle(void **state)
{
	struct fixture *f = *state;
	char key[65], again[65], keyfile[128], old[200];
	struct store *s = must_open(f->dir);
	uint64_t bad;
	size_t n = 0;
	FILE *kf;

	append_rows(s, 3); /* unsealed rows before sealing began are fine */
	assert_int_equal(store_audit_seal_init(s, key), 0);
	assert_int_equal(store_audit_seal_init(s, again), -EEXIST);
	/* The epoch row is the broker's (its uid), and no client's tail. */
	assert_int_equal(store_audit_tail(s, (uint32_t)geteuid(), 10, count_row, &n), 0);
	assert_int_equal(n, 0);
	append_more(s, 5);
	check_with_key(s, key, &bad);
	assert_int_equal(bad, 0);

	/* A crash after the key moved on but before the row committed: one
	 * key index is never used, and every seal still verifies. */
	snprintf(keyfile, sizeof(keyfile), "%s/%s", f->dir, SEAL_KEY_FILE);
	kf = fopen(keyfile, "r");
	assert_non_null(kf);
	assert_non_null(fgets(old, sizeof(old), kf));
	fclose(kf);
	{
		struct seal_key k;
		char err[200];

		assert_int_equal(seal_key_load(f->dir, &k, err, sizeof(err)), 0);
		assert_int_equal(k.index, 6);
		seal_key_evolve(&k);
		assert_int_equal(seal_key_save(f->dir, &k, err, sizeof(err)), 0);
		seal_key_wipe(&k);
	}
	append_more(s, 2);
	check_with_key(s, key, &bad);
	assert_int_equal(bad, 0);

	/* The old key file put back: that key sealed a row already. */
	kf = fopen(keyfile, "w");
	assert_non_null(kf);
	fputs(old, kf);
	fclose(kf);
	{
		struct audit_row r;

		fill_row(&r, 1);
		assert_int_equal(store_audit_append(s, &r), -EKEYREJECTED);
		unlink(keyfile);
		assert_int_equal(store_audit_append(s, &r), -EKEYREJECTED);
		print_message("  %s\n", store_last_error(s));
	}
	/* The wrong key: every seal fails. */
	key[0] = key[0] == '0' ? '1' : '0';
	check_with_key(s, key, &bad);
	assert_int_equal(bad, 8);
	store_close(s);
}

/* ---- crash safety ------------------------------------------------------ */

struct commit_msg {
	uint32_t kind; /* 1 grant saved, 2 audit row appended */
	uint32_t uid;
	int64_t seq;
};

/* Writes until killed; reports each change only after its COMMIT
 * returned.  16-byte pipe writes are atomic, so a kill never leaves half
 * a message. */
static void crash_child(const char *dir, int round, int wfd)
{
	struct commit_msg m;
	struct audit_row r;
	struct store *s;
	char err[256];
	uint32_t i;

	if (store_open(dir, &s, err, sizeof(err)))
		_exit(2);
	for (i = 0;; i++) {
		m = (struct commit_msg){ .kind = 1, .uid = 1000000u * (uint32_t)(round + 1) + i };
		if (store_grant_save(s, m.uid, FAMILY, "card-crash", NULL))
			_exit(3);
		if (write(wfd, &m, sizeof(m)) != sizeof(m))
			_exit(4);
		fill_row(&r, (int)i);
		r.uid = m.uid;
		/* Half the rows wait for no sync: a killed broker loses none. */
		if ((i % 2 ? store_audit_append_unsynced : store_audit_append)(s, &r))
			_exit(5);
		m = (struct commit_msg){ .kind = 2, .uid = m.uid, .seq = r.seq };
		if (write(wfd, &m, sizeof(m)) != sizeof(m))
			_exit(4);
		if (store_grant_touch(s, m.uid, FAMILY))
			_exit(6);
	}
}

struct committed {
	uint32_t *uids;
	size_t n, cap;
	int64_t max_seq;
};

static void collect(int rfd, struct committed *c)
{
	struct commit_msg m;
	ssize_t got;

	while ((got = read(rfd, &m, sizeof(m))) == (ssize_t)sizeof(m)) {
		if (m.kind == 2) {
			if (m.seq > c->max_seq)
				c->max_seq = m.seq;
			continue;
		}
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 1024;
			c->uids = realloc(c->uids, c->cap * sizeof(*c->uids));
			assert_non_null(c->uids);
		}
		c->uids[c->n++] = m.uid;
	}
	assert_int_equal(got, 0);
}

static void check_after_crash(struct fixture *f, const struct committed *c)
{
	char res[64];
	uint64_t rows = 0;
	int64_t bad = -1;
	struct store *s = must_open(f->dir);
	size_t i;
	bool has;

	raw_text(f->db, "PRAGMA integrity_check", res, sizeof(res));
	assert_string_equal(res, "ok");
	if (store_audit_verify(s, &rows, &bad))
		print_error("verify: %s\n", store_last_error(s));
	assert_int_equal(bad, 0);
	assert_true((int64_t)rows >= c->max_seq);
	for (i = 0; i < c->n; i++) {
		assert_int_equal(store_grant_get(s, c->uids[i], FAMILY, &has, NULL), 0);
		if (!has)
			print_error("grant for uid %u reported committed but missing\n", c->uids[i]);
		assert_true(has);
	}
	store_close(s);
}

static void test_crash_safety(void **state)
{
	struct fixture *f = *state;
	struct committed c = { 0 };
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	int round, p[2], status;
	pid_t pid;

	print_message("  crash seed %u\n", seed);
	srand(seed);
	for (round = 0; round < 20; round++) {
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		pid = fork_child();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			crash_child(f->dir, round, p[1]);
		}
		close(p[1]);
		/* 0-40 ms: early rounds may land inside store_open itself. */
		usleep((useconds_t)(rand() % 40000));
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			print_error("crash child exited with %d instead of being killed\n",
				    WEXITSTATUS(status));
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		collect(p[0], &c);
		close(p[0]);
		check_after_crash(f, &c);
	}
	print_message("  %zu grants and %lld audit rows committed across 20 kills, all intact\n",
		      c.n, (long long)c.max_seq);
	assert_true(c.n > 0);
	free(c.uids);
}

static int64_t raw_int(const char *db, const char *sql);

/* A row committed without waiting for the disk is every reader's at
 * once; store_sync, or the next commit at FULL, makes it durable. */
static void test_audit_unsynced(void **state)
{
	struct fixture *f = *state;
	struct store *s = must_open(f->dir);
	struct audit_row r;

	assert_false(store_unsynced(s));
	fill_row(&r, 0);
	assert_int_equal(store_audit_append_unsynced(s, &r), 0);
	assert_true(store_unsynced(s));
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM audit"), 1);
	assert_int_equal(store_sync(s), 0);
	assert_false(store_unsynced(s));
	assert_int_equal(store_sync(s), 0); /* nothing to do */
	fill_row(&r, 1);
	assert_int_equal(store_audit_append_unsynced(s, &r), 0);
	assert_true(store_unsynced(s));
	fill_row(&r, 2);
	assert_int_equal(store_audit_append(s, &r), 0); /* FULL: the WAL synced, all of it */
	assert_false(store_unsynced(s));
	store_close(s);
	expect_intact(f, 3);
}

/* One row of uid with code (a decision) or without (an exit). */
static int append_one(struct store *s, uint32_t uid, const char *code, size_t len, bool follows)
{
	struct audit_row r = { .uid = uid, .pid = 1, .run_id = 1, .mode = "local",
			       .event = code ? "decision" : "exit", .decision = code ? "refused" : "ran",
			       .code = code, .code_len = len, .follows = follows };

	if (!code)
		memset(r.sha256, 'a', 64);
	return store_audit_append(s, &r);
}

static int64_t raw_int(const char *db, const char *sql)
{
	char buf[32];

	raw_text(db, sql, buf, sizeof(buf));
	return strtoll(buf, NULL, 10);
}

static int tail_code(const struct audit_row *row, void *arg)
{
	size_t *total = arg;

	if (row->code)
		*total += row->code_len;
	return 0;
}

/* The same text in many rows is stored once, reads back whole, and the
 * chain verifies over it. */
static void test_audit_text_once(void **state)
{
	struct fixture *f = *state;
	struct store *s = must_open(f->dir);
	size_t len = 200000, total = 0;
	char *code = malloc(len);
	uint64_t rows = 0;
	int64_t bad = 0;

	assert_non_null(code);
	memset(code, '#', len);
	for (int i = 0; i < 20; i++)
		assert_int_equal(append_one(s, 1000, code, len, i > 0), 0);
	assert_int_equal(store_audit_tail(s, 1000, 50, tail_code, &total), 0);
	assert_int_equal(total, 20 * len);
	assert_int_equal(store_audit_verify(s, &rows, &bad), 0);
	assert_int_equal(rows, 20);
	store_close(s);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM audit_code"), 1);
	assert_int_equal(raw_int(f->db, "SELECT sum(length(code)) FROM audit_code"), (int64_t)len);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM audit WHERE code IS NOT NULL"), 0);
	free(code);
}

/* Over its quota a uid's new rows fail with EDQUOT and write nothing;
 * rows that follow, and other uids, go on; the count survives a reopen. */
static void test_audit_quota(void **state)
{
	struct fixture *f = *state;
	struct store *s = must_open(f->dir);
	size_t len = 30000;
	char *code = malloc(len);
	int ok = 0, rc = 0;
	uint64_t rows = 0;
	int64_t bad = 0;

	assert_non_null(code);
	store_set_quota(s, 100000, 3600000);
	for (int i = 0; i < 10 && rc == 0; i++) {
		memset(code, 'a' + i, len); /* a new text each time */
		rc = append_one(s, 1000, code, len, false);
		ok += rc == 0;
	}
	assert_int_equal(rc, -EDQUOT);
	assert_int_equal(ok, 3); /* 3 x (30000 + 512) fit in 100000, a fourth does not */
	assert_non_null(strstr(store_last_error(s), "[quota] audit_bytes"));
	/* The same text again costs only its row; still over, still refused. */
	assert_int_equal(append_one(s, 1000, code, len, false), -EDQUOT);
	/* What follows a recorded decision is never refused. */
	assert_int_equal(append_one(s, 1000, NULL, 0, true), 0);
	/* Another uid has its own quota. */
	assert_int_equal(append_one(s, 1001, code, len, false), 0);
	store_close(s);
	s = must_open(f->dir);
	store_set_quota(s, 100000, 3600000);
	memset(code, 'z', len);
	assert_int_equal(append_one(s, 1000, code, len, false), -EDQUOT);
	/* A new period starts the count again. */
	store_set_quota(s, 100000, 1);
	usleep(5000);
	assert_int_equal(append_one(s, 1000, code, len, false), 0);
	assert_int_equal(store_audit_verify(s, &rows, &bad), 0);
	assert_int_equal(rows, 6);
	store_close(s);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM audit_code"), 5);
	free(code);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_terms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_migration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readonly_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_append_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_connections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_tamper, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_safety, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_text_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_unsynced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_quota, setup, teardown),
		cmocka_unit_test(test_seal_known_answers),
		cmocka_unit_test_setup_teardown(test_seal_lifecycle, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
