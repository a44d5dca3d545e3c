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
	assert_false(has_name(env, n, "PYTHONPATH")); /* refused, and never passed */
	assert_true(has(env, n, "PATH=/usr/local/bin:/usr/bin:/bin"));
	assert_true(has(env, n, "LANG=C.UTF-8"));
	assert_false(has_name(env, n, "PYTHONUNBUFFERED")); /* python3 -u instead */
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

/* What decides which code runs is refused by name before any card, and
 * never passed even if a later allowlist entry matched it. */
static void test_interpreter_and_loader_names_are_refused(void **state)
{
	static const char *const bad[] = {
		"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE",
		"PYTHONWARNINGS", "PYTHONBREAKPOINT", "PYTHONSAFEPATH", "PYTHON",
		"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES",
		"MALLOC_CHECK_", "LOCPATH", "NLSPATH", "OPENSSL_CONF", "BASH_ENV", "ENV",
		"NODE_OPTIONS",
	};
	static const char *const fine[] = { "LANG", "TZ", "MPLBACKEND", "VIRTUAL_ENV",
					    "ENVIRONMENT", "XPYTHONPATH", "python_path" };
	char err[300] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct env_pair req[] = {
			PAIR("TZ", "UTC"),
			{ { bad[i], strlen(bad[i]) }, { "/tmp/x", 6 } },
		};

		assert_true(env_name_refused(bad[i], strlen(bad[i])));
		assert_false(env_name_allowed(bad[i], strlen(bad[i])));
		err[0] = '\0';
		assert_int_equal(env_check_request(req, 2, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, bad[i]));
	}
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		assert_false(env_name_refused(fine[i], strlen(fine[i])));
}

static void test_mplbackend_names_a_backend_not_a_module(void **state)
{
	const struct env_pair agg[] = { PAIR("MPLBACKEND", "Agg") };
	const struct env_pair mod[] = { PAIR("MPLBACKEND", "module://evil") };
	const struct env_pair upper[] = { PAIR("MPLBACKEND", "MODULE://evil") };
	char err[300];

	assert_int_equal(env_check_request(agg, 1, err, sizeof(err)), 0);
	assert_int_equal(env_check_request(mod, 1, err, sizeof(err)), -EPERM);
	assert_int_equal(env_check_request(upper, 1, err, sizeof(err)), -EPERM);
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
		cmocka_unit_test(test_interpreter_and_loader_names_are_refused),
		cmocka_unit_test(test_mplbackend_names_a_backend_not_a_module),
		cmocka_unit_test(test_unknown_uid_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
