// link: worker/receipt.c proto/check.c proto/names.c proto/receipt.c
/* SPDX-License-Identifier: MIT
 * The receipt as the worker builds it (worker/receipt.c): entries counted
 * and capped, targets cut to whole UTF-8 characters, and the interpreter's
 * reports judged against the profile and the user's own permissions, so
 * that garbage, claims the profile does not back and refusals that were
 * the file modes' never reach it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/worker.h"

static void test_entries_are_counted_and_capped(void **state)
{
	static struct receipt b;
	char name[32];

	memset(&b, 0, sizeof(b));
	receipt_add(&b, BLOCK_EXEC, "/bin/sh", BY_EXEC_GATE, SEEN_BY_WORKER, false);
	receipt_add(&b, BLOCK_EXEC, "/bin/sh", BY_EXEC_GATE, SEEN_BY_WORKER, false);
	assert_int_equal(b.n, 1);
	assert_int_equal(b.op[0].count, 2);
	for (int i = 0; i < PROTO_BLOCKED_MAX + 4; i++) {
		snprintf(name, sizeof(name), "/bin/p%d", i);
		receipt_add(&b, BLOCK_EXEC, name, BY_EXEC_GATE, SEEN_BY_WORKER, false);
	}
	assert_int_equal(b.n, PROTO_BLOCKED_MAX);
	assert_int_equal(b.total, 2 + PROTO_BLOCKED_MAX + 4);
}

static void test_targets_stay_utf8_and_short(void **state)
{
	static struct receipt b;
	char long_name[400];

	memset(&b, 0, sizeof(b));
	/* 254 ASCII bytes, then a 3-byte character that does not fit */
	memset(long_name, 'a', 254);
	strcpy(long_name + 254, "\xe2\x82\xac tail");
	receipt_add(&b, BLOCK_WRITE, long_name, BY_LANDLOCK, SEEN_BY_PYTHON, true);
	assert_int_equal(strlen(b.op[0].target), 254);
	receipt_add(&b, BLOCK_WRITE, "/a\xff\xfe/\xc3\xa9", BY_LANDLOCK, SEEN_BY_PYTHON, true);
	assert_string_equal(b.op[1].target, "/a?" "?/\xc3\xa9");
	assert_true(utf8_valid((const uint8_t *)b.op[1].target, strlen(b.op[1].target)));
}

static char dir[64];

static void feed(struct receipt_log *l, const char *text)
{
	int fds[2];

	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	assert_int_equal(write(fds[1], text, strlen(text)), (ssize_t)strlen(text));
	close(fds[1]);
	memset(l, 0, sizeof(*l));
	l->fd = fds[0];
	receipt_read(l);
}

static void test_reports_are_judged(void **state)
{
	static struct receipt_log l;
	static struct secret_mask mask;
	struct plan p = { .profile = PROFILE_UNATTENDED, .landlock_abi = 0 };
	char text[1024], secret[96], mine[96], theirs[96];

	snprintf(dir, sizeof(dir), "/tmp/kotoba-receipt-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(secret, sizeof(secret), "%s/vault", dir);
	assert_int_equal(mkdir(secret, 0700), 0);
	snprintf(mine, sizeof(mine), "%s/notes.md", dir);
	snprintf(theirs, sizeof(theirs), "%s/locked", dir);
	assert_int_equal(mkdir(theirs, 0500), 0);
	mask = (struct secret_mask){ .path = secret, .dir = true };
	p.masks = &mask;
	p.n_masks = 1;
	snprintf(text, sizeof(text),
		 "read\t%s/key\n"           /* below a mask: secret-read */
		 "read\t/etc/hostname\n"    /* no secret: the file modes' */
		 "write\t%s\n"              /* may create it: seccomp, no Landlock */
		 "write\t%s\n"
		 "delete\t%s/x\n"           /* a directory the user may not write */
		 "exec\t/bin/sh\n"          /* only the gate says exec */
		 "bind\t0.0.0.0:80\n"
		 "signal\t1\n"              /* init: never the snippet's to signal */
		 "nonsense\t/x\n\xff\xfe\tgarbage\nno tab here\n"
		 "write\tpartial",          /* no newline: never a report */
		 secret, mine, mine, theirs);
	feed(&l, text);
	receipt_conclude(&l, &p);
	assert_int_equal(l.fd, -1);
	/* Root's own permissions allow the delete (access() says yes to
	 * root): then the profile decides, and it counts; for anyone else it
	 * was the file modes' refusal.  Pid 1 is never taken. */
	assert_int_equal(l.blocked.n, geteuid() ? 3 : 4);
	assert_int_equal(l.blocked.op[0].kind, BLOCK_SECRET_READ);
	assert_int_equal(l.blocked.op[0].by, BY_MOUNT_MASK);
	assert_int_equal(l.blocked.op[1].kind, BLOCK_CREATE);
	assert_int_equal(l.blocked.op[1].by, BY_SECCOMP);
	assert_int_equal(l.blocked.op[1].count, 2);
	assert_string_equal(l.blocked.op[1].target, mine);
	assert_true(l.blocked.op[1].inferred && l.blocked.op[1].seen_by == SEEN_BY_PYTHON);
	assert_int_equal(l.blocked.op[geteuid() ? 2 : 3].kind, BLOCK_BIND);
	assert_int_equal(l.blocked.total, geteuid() ? 4 : 5);
	if (geteuid() != 0) {
		feed(&l, "write\t/etc/hostname\n");
		receipt_conclude(&l, &p);
		assert_int_equal(l.blocked.total, 0);
	}
	/* approved: nothing of this is the sandbox's */
	p.profile = PROFILE_APPROVED;
	feed(&l, text);
	receipt_conclude(&l, &p);
	assert_int_equal(l.blocked.total, 0);
	rmdir(theirs);
	rmdir(secret);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries_are_counted_and_capped),
		cmocka_unit_test(test_targets_stay_utf8_and_short),
		cmocka_unit_test(test_reports_are_judged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
