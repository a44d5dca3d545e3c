// link: broker/env.c broker/privsep.c broker/log.c proto/decode_util.c proto/names.c
/* The snippet's environment: built from the allowlist, never from the
 * broker's own environment, and never carrying a secret-looking name. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "broker/privsep.h"

static bool has(char **env, size_t n, const char *entry)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(env[i], entry))
			return true;
	return false;
}

static bool has_name(char **env, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return true;
	return false;
}

#define PAIR(n, v) { { n, sizeof(n) - 1 }, { v, sizeof(v) - 1 } }

static void test_allowlist_and_secrets(void **state)
{
	const struct env_pair req[] = {
		PAIR("TZ", "UTC"),		  PAIR("PYTHONPATH", "/opt/lib"),
		PAIR("LD_PRELOAD", "/tmp/x.so"), PAIR("AWS_SECRET_ACCESS_KEY", "k"),
		PAIR("GITHUB_TOKEN", "t"),	  PAIR("PATH", "/evil"),
		PAIR("HOME", "/evil"),		  PAIR("MY_PASSWORD", "p"),
		PAIR("PYTHONSTARTUP", "/tmp/x"),
	};
	char *env[ENV_OUT_MAX], err[200] = "";
	size_t n = 0;

	struct identity id;
	char home[300];

	setenv("KOTOBA_TEST_BROKER_SECRET", "hunter2", 1);
	assert_int_equal(privsep_identity(getuid(), &id, err, sizeof(err)), 0);
	assert_int_equal(env_build(&id, req, sizeof(req) / sizeof(req[0]), env, &n, err,
				   sizeof(err)), 0);
	assert_true(has(env, n, "TZ=UTC"));
	assert_true(has(env, n, "PYTHONPATH=/opt/lib"));
	assert_true(has(env, n, "PATH=/usr/local/bin:/usr/bin:/bin"));
	assert_true(has(env, n, "LANG=C.UTF-8"));
	assert_true(has(env, n, "PYTHONUNBUFFERED=1"));
	assert_true(has_name(env, n, "HOME") && !has(env, n, "HOME=/evil"));
	snprintf(home, sizeof(home), "HOME=%s", id.home);
	assert_true(id.home[0] == '/' && has(env, n, home));
	assert_true(has_name(env, n, "USER") && has_name(env, n, "SHELL"));
	assert_false(has_name(env, n, "LD_PRELOAD"));
	assert_false(has_name(env, n, "AWS_SECRET_ACCESS_KEY"));
	assert_false(has_name(env, n, "GITHUB_TOKEN"));
	assert_false(has_name(env, n, "MY_PASSWORD"));
	assert_false(has_name(env, n, "PYTHONSTARTUP"));
	assert_false(has_name(env, n, "KOTOBA_TEST_BROKER_SECRET"));
	env_free(env, n);
}

static void test_secret_words_beat_the_allowlist(void **state)
{
	assert_true(env_name_allowed("LANG", 4));
	assert_false(env_name_allowed("LANG_TOKEN", 10));
	assert_false(env_name_allowed("lang_auth", 9));
	assert_false(env_name_allowed("CREDENTIALS", 11));
	assert_false(env_name_allowed("LD_LIBRARY_PATH", 15));
}

static void test_client_locale_wins(void **state)
{
	const struct env_pair req[] = { PAIR("LANG", "fr_FR.UTF-8") };
	char *env[ENV_OUT_MAX], err[200] = "";
	struct identity id;
	size_t n = 0;

	assert_int_equal(privsep_identity(getuid(), &id, err, sizeof(err)), 0);
	assert_int_equal(env_build(&id, req, 1, env, &n, err, sizeof(err)), 0);
	assert_true(has(env, n, "LANG=fr_FR.UTF-8"));
	assert_false(has(env, n, "LANG=C.UTF-8"));
	env_free(env, n);
}

/* The user database is read once per run, by privsep_identity(): a uid
 * without an entry stops the run there, before any environment. */
static void test_unknown_uid_is_an_error(void **state)
{
	struct identity id;
	char err[200] = "";

	assert_int_equal(privsep_identity(4000000000u, &id, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "4000000000"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowlist_and_secrets),
		cmocka_unit_test(test_secret_words_beat_the_allowlist),
		cmocka_unit_test(test_client_locale_wins),
		cmocka_unit_test(test_unknown_uid_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
