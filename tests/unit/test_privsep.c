// link: broker/privsep.c broker/config.c broker/log.c proto/names.c broker/egress/policy.c
/* SPDX-License-Identifier: MIT
 * broker/privsep.c: the broker's drop to its service user and the fork
 * child's change to the peer, each read back from the kernel.  Real
 * setresuid and capset in a child process; as root only (skipped with the
 * reason otherwise), and with the service user `kotoba` the tests' broker
 * uses.
 */
#include <errno.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/capability.h>

#include "broker/privsep.h"
#include "tests/unit/child.h"

#define NOBODY 65534
#define KEPT ((UINT64_C(1) << CAP_SETUID) | (UINT64_C(1) << CAP_SETGID) | (UINT64_C(1) << CAP_KILL))

/* One capability set from /proc/self/status, as a mask. */
static uint64_t status_caps(const char *key)
{
	char line[256];
	size_t n = strlen(key);
	uint64_t v = UINT64_MAX;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		child_fail("cannot open /proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 16);
	fclose(f);
	return v;
}

static void expect_caps(const char *when, uint64_t eff_prm)
{
	uint64_t eff = status_caps("CapEff"), prm = status_caps("CapPrm");
	uint64_t inh = status_caps("CapInh"), amb = status_caps("CapAmb");

	if (eff != eff_prm || prm != eff_prm || inh || amb)
		child_fail("%s: CapEff %#llx CapPrm %#llx CapInh %#llx CapAmb %#llx, wanted "
			   "%#llx in the first two", when, (unsigned long long)eff,
			   (unsigned long long)prm, (unsigned long long)inh,
			   (unsigned long long)amb, (unsigned long long)eff_prm);
}

static const struct identity nobody = { .uid = NOBODY, .gid = NOBODY, .n_groups = 1,
					.groups = { NOBODY - 1 }, .name = "nobody",
					.switch_ids = true };

/* The whole path as production runs it: root, then the service user with
 * the monitor's three capabilities, then its child's change to the peer.
 * Between two non-zero uids the kernel keeps the capability sets: the
 * child's explicit drop is what empties them before the exec. */
static void broker_then_fork_child(void)
{
	struct config c;
	char err[600] = "";
	const char *what = "";
	struct identity other = nobody;

	config_defaults(&c);
	if (privsep_resolve(&c, err, sizeof(err)) < 0)
		child_fail("privsep_resolve: %s", err);
	if (status_caps("CapEff") == KEPT)
		child_fail("control: root already holds only the kept capabilities");
	if (privsep_drop(PRIVSEP_MONITOR_CAPS, err, sizeof(err)) < 0)
		child_fail("privsep_drop: %s", err);
	expect_caps("after privsep_drop", KEPT);
	if (status_caps("CapBnd") != 0)
		child_fail("after privsep_drop: the bounding set is not empty");
	if (privsep_ids_are(&nobody))
		child_fail("control: the service user reads back as nobody");
	if (privsep_take_ids(&nobody, &what) < 0)
		child_fail("privsep_take_ids: %s failed", what);
	if (!privsep_ids_are(&nobody))
		child_fail("the ids read back are not nobody's");
	other.groups[0] = NOBODY;
	if (privsep_ids_are(&other))
		child_fail("a different group list reads back as equal");
	other = nobody;
	other.uid = NOBODY - 1;
	if (privsep_ids_are(&other))
		child_fail("a different uid reads back as equal");
	expect_caps("after the uid change, before the drop (the kernel keeps them)", KEPT);
	if (privsep_drop_all_caps(err, sizeof(err)) < 0)
		child_fail("privsep_drop_all_caps: %s", err);
	expect_caps("after privsep_drop_all_caps", 0);
}

/* The broker's own drop: the service user with nothing kept, and the
 * kernel then refuses it the way back. */
static void broker_keeps_nothing(void)
{
	struct config c;
	char err[600] = "";

	config_defaults(&c);
	if (privsep_resolve(&c, err, sizeof(err)) < 0)
		child_fail("privsep_resolve: %s", err);
	if (setresuid(0, 0, 0) < 0)
		child_fail("control: root cannot setresuid(0)");
	if (privsep_drop(0, err, sizeof(err)) < 0)
		child_fail("privsep_drop(0): %s", err);
	expect_caps("after privsep_drop(0)", 0);
	if (status_caps("CapBnd") != 0)
		child_fail("after privsep_drop(0): the bounding set is not empty");
	if (setresuid(0, 0, 0) == 0 || errno != EPERM)
		child_fail("setresuid(0) after the drop: not EPERM");
}

static void test_broker_keeps_nothing(void **state)
{
	(void)state;
	need_root_and_service_user("changing uid and capabilities");
	run_in_child_after(NULL, broker_keeps_nothing);
}

static void test_broker_then_fork_child(void **state)
{
	(void)state;
	need_root_and_service_user("changing uid and capabilities");
	run_in_child_after(NULL, broker_then_fork_child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_broker_then_fork_child),
		cmocka_unit_test(test_broker_keeps_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
