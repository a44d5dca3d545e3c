/* SPDX-License-Identifier: MIT
 * kotoba: the command-line client of kotoba-brokerd.  It runs `run` and
 * `mcp` itself and execs kotoba-admin for the rest (client/cli.h).
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"

/* kotoba-admin, found from this program's own path as the broker finds its
 * worker: beside it in a build tree, PREFIX/libexec/kotoba when installed
 * in PREFIX/bin.  False, after saying why, when it cannot be named. */
static bool find_admin(char *out, size_t len)
{
	char self[4000]; /* leaves room for the suffixes below */
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0) {
		cli_error("cannot find my own path (/proc/self/exe) to start %s: %s",
			  KOTOBA_ADMIN_PROGRAM, strerror(errno));
		return false;
	}
	self[n] = '\0';
	dirname(self);
	snprintf(out, len, "%s/%s", self, KOTOBA_ADMIN_PROGRAM);
	if (access(out, X_OK) < 0)
		snprintf(out, len, "%s/../libexec/kotoba/%s", self, KOTOBA_ADMIN_PROGRAM);
	return true;
}

/* Hands the whole command line to kotoba-admin; returns only on failure. */
static int exec_admin(char **argv)
{
	char path[4200];

	if (!find_admin(path, sizeof(path)))
		return KOTOBA_EXIT_UNREACHABLE;
	execv(path, argv);
	cli_error("cannot start %s: %s (the installation is incomplete)", path,
		  strerror(errno));
	return KOTOBA_EXIT_UNREACHABLE;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "run", cmd_run },
		{ "mcp", cmd_mcp },
	};
#define ADMIN_NAME(name) #name,
	static const char *const admin_cmds[] = { KOTOBA_ADMIN_COMMANDS(ADMIN_NAME) };
#undef ADMIN_NAME

	/* A broker that closes the connection must give an error, not a
	 * silent death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		cli_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? KOTOBA_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(admin_cmds) / sizeof(admin_cmds[0]); i++)
		if (!strcmp(argv[1], admin_cmds[i]))
			return exec_admin(argv);
	cli_error("unknown command '%s'", argv[1]);
	cli_usage(stderr);
	return KOTOBA_EXIT_USAGE;
}
