// link: broker/secrets.c broker/log.c
/* The broker's table of masks' namespaces kept between a user's runs
 * (broker/secrets.c): one per uid, replaced by the newer, closed after a
 * minute unused or when the table is full.  The table holds descriptors
 * and never looks into them, so pipes stand in for namespaces here; the
 * integration suite (test_secrets.py) joins real ones. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/secrets.h"

static int open_fd(void)
{
	int p[2];

	assert_int_equal(pipe(p), 0);
	close(p[1]);
	return p[0];
}

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void key_of(uint8_t key[PROTO_MASKS_KEY_LEN], int n)
{
	memset(key, n, PROTO_MASKS_KEY_LEN);
}

static void test_a_uid_gets_its_own_back_and_the_newer_replaces_it(void **state)
{
	uint8_t k1[PROTO_MASKS_KEY_LEN], k2[PROTO_MASKS_KEY_LEN], got[PROTO_MASKS_KEY_LEN];
	int a = open_fd(), b = open_fd();

	(void)state;
	key_of(k1, 1);
	key_of(k2, 2);
	assert_int_equal(secrets_kept(1000, 0, got), -1);
	secrets_keep(1000, a, k1, 0);
	assert_int_equal(secrets_kept(1001, 0, got), -1);
	assert_int_equal(secrets_kept(1000, 10, got), a);
	assert_memory_equal(got, k1, sizeof(got));
	secrets_keep(1000, b, k2, 20);
	assert_false(is_open(a));
	assert_int_equal(secrets_kept(1000, 30, got), b);
	assert_memory_equal(got, k2, sizeof(got));
}

static void test_unused_for_a_minute_it_is_closed(void **state)
{
	uint8_t k[PROTO_MASKS_KEY_LEN], got[PROTO_MASKS_KEY_LEN];
	int fd = open_fd();

	(void)state;
	key_of(k, 3);
	secrets_keep(2000, fd, k, 100000);
	assert_int_equal(secrets_kept(2000, 130000, got), fd); /* used: a minute from here */
	assert_int_equal(secrets_kept_tick(150000), 40000);
	assert_true(is_open(fd));
	secrets_kept_tick(190000);
	assert_false(is_open(fd));
	assert_int_equal(secrets_kept(2000, 190000, got), -1);
}

static void test_a_full_table_closes_the_one_unused_longest(void **state)
{
	uint8_t k[PROTO_MASKS_KEY_LEN], got[PROTO_MASKS_KEY_LEN];
	int fds[65];

	(void)state;
	key_of(k, 4);
	secrets_kept_tick(UINT32_MAX); /* what the tests above left */
	for (int i = 0; i < 65; i++) {
		fds[i] = open_fd();
		secrets_keep(3000 + (uid_t)i, fds[i], k, 1000 + (uint64_t)i);
	}
	assert_false(is_open(fds[0]));
	assert_int_equal(secrets_kept(3000, 2000, got), -1);
	for (int i = 1; i < 65; i++)
		assert_int_equal(secrets_kept(3000 + (uid_t)i, 2000, got), fds[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_uid_gets_its_own_back_and_the_newer_replaces_it),
		cmocka_unit_test(test_unused_for_a_minute_it_is_closed),
		cmocka_unit_test(test_a_full_table_closes_the_one_unused_longest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
