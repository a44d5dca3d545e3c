// link: broker/egress/policy.c
/* The egress proxy's host policy: which addresses are the host's side,
 * how allow_hosts and deny_hosts match, and what each mode refuses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "broker/egress/policy.h"

#define UNUSED __attribute__((unused))

static struct sockaddr_storage addr(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, text, &a->sin_addr), 1);
	}
	return ss;
}

static bool internal(const char *text)
{
	struct sockaddr_storage ss = addr(text);

	return egress_addr_is_internal((struct sockaddr *)&ss);
}

static void test_internal_addresses(void **state UNUSED)
{
	static const char *const inside[] = {
		"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
		"255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "ff02::1", "64:ff9b::a00:1",
		"2002:7f00:1::1",
	};
	static const char *const outside[] = {
		"1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "192.169.0.1",
		"2606:4700::1111", "::ffff:8.8.8.8",
	};

	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
		if (!internal(inside[i]))
			fail_msg("%s is the host's side", inside[i]);
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		if (internal(outside[i]))
			fail_msg("%s is public", outside[i]);
}

static void test_host_lists(void **state UNUSED)
{
	struct egress_hosts h = { 0 };

	assert_true(egress_hosts_add(&h, "api.example.org"));
	assert_true(egress_hosts_add(&h, "*.corp.example"));
	assert_true(egress_hosts_add(&h, "10.1.2.3"));
	assert_false(egress_hosts_add(&h, "bad/host"));
	assert_false(egress_hosts_add(&h, "*."));
	assert_false(egress_hosts_add(&h, ""));
	assert_true(egress_hosts_match(&h, "API.example.org"));
	assert_false(egress_hosts_match(&h, "xapi.example.org"));
	assert_true(egress_hosts_match(&h, "a.corp.example"));
	assert_true(egress_hosts_match(&h, "a.b.corp.example"));
	assert_false(egress_hosts_match(&h, "corp.example")); /* *. needs a label */
	assert_false(egress_hosts_match(&h, "evilcorp.example"));
	{
		struct sockaddr_storage a = addr("10.1.2.3"), b = addr("10.1.2.4");

		assert_true(egress_hosts_match_addr(&h, (struct sockaddr *)&a));
		assert_false(egress_hosts_match_addr(&h, (struct sockaddr *)&b));
	}
	egress_hosts_free(&h);
}

static void test_refusals(void **state UNUSED)
{
	struct egress_policy p = { .mode = EGRESS_GET };
	struct sockaddr_storage lo = addr("127.0.0.1"), pub = addr("93.184.216.34");

	assert_null(egress_host_refusal(&p, "example.org"));
	assert_null(egress_addr_refusal(&p, "example.org", (struct sockaddr *)&pub));
	/* Rebinding: a public name at a loopback address is refused. */
	assert_non_null(egress_addr_refusal(&p, "example.org", (struct sockaddr *)&lo));
	assert_true(egress_hosts_add(&p.allow, "dev.local"));
	assert_null(egress_addr_refusal(&p, "dev.local", (struct sockaddr *)&lo));
	assert_true(egress_hosts_add(&p.deny, "*.example.org"));
	assert_non_null(egress_host_refusal(&p, "www.example.org"));
	p.mode = EGRESS_ALLOWLIST;
	assert_non_null(egress_host_refusal(&p, "example.net"));
	assert_null(egress_host_refusal(&p, "dev.local"));
	p.mode = EGRESS_NONE;
	assert_non_null(egress_host_refusal(&p, "dev.local"));
	egress_hosts_free(&p.allow);
	egress_hosts_free(&p.deny);
}

static void test_mode_names(void **state UNUSED)
{
	assert_int_equal(egress_mode_parse("get"), EGRESS_GET);
	assert_int_equal(egress_mode_parse("any"), EGRESS_ANY);
	assert_int_equal(egress_mode_parse("post"), -1);
	assert_string_equal(egress_mode_name(EGRESS_ALLOWLIST), "allowlist");
	assert_null(egress_mode_names[EGRESS_MODE_COUNT]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_internal_addresses),
		cmocka_unit_test(test_host_lists),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_mode_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
