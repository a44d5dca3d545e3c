/* SPDX-License-Identifier: MIT
 * The known probes (probes.h).  What each does under the unattended
 * sandbox, checked against python3 and the libraries:
 *   platform.uname().processor (pandas' show_versions, platform.processor()):
 *       `uname -p` through subprocess, which tries every directory of PATH:
 *       one exec refused by the exec gate each
 *   matplotlib.font_manager (building its font cache, every run, since the
 *       cache lives in scratch): `fc-list`, likewise
 *   urllib3.util.connection (requests): socket(AF_INET6) then bind to
 *       ("::1", 0) to learn whether IPv6 works: bind refused by seccomp
 */
#include <stdbool.h>
#include <string.h>

#include "proto/probes.h"

struct probe {
	const char *kind;
	const char *program; /* exec: the program's file name (and argv[0]) */
	const char *target;  /* other kinds: the whole target */
	const char *name;
};

static const struct probe probes[] = {
	{ "exec", "uname", NULL, "platform.uname's processor probe" },
	{ "exec", "fc-list", NULL, "matplotlib's font list probe" },
	{ "bind", NULL, "::1:0", "urllib3's IPv6 probe" },
};

/* An exec target: "PATH" or "PATH (argv[0] NAME)"; whether PATH's file
 * name, and NAME when given, are program. */
static bool runs(const char *target, const char *program)
{
	static const char argv0[] = " (argv[0] ";
	const char *end = strstr(target, argv0), *base;
	size_t n = strlen(program);

	if (!end)
		end = target + strlen(target);
	else if (strncmp(end + sizeof(argv0) - 1, program, n) ||
		 strcmp(end + sizeof(argv0) - 1 + n, ")"))
		return false;
	base = end;
	while (base > target && base[-1] != '/')
		base--;
	return (size_t)(end - base) == n && !strncmp(base, program, n);
}

const char *probe_name(const char *kind, const char *target)
{
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		const struct probe *p = &probes[i];

		if (strcmp(kind, p->kind))
			continue;
		if (p->program ? runs(target, p->program) : !strcmp(target, p->target))
			return p->name;
	}
	return NULL;
}
