/* SPDX-License-Identifier: MIT
 * kotoba-admin: the `kotoba` subcommands that need the pre-screen or the
 * audit trail's code (client/cli.h).  `kotoba` execs it with its own argv,
 * so argv[1] is the subcommand and every message reads as kotoba's.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "client/cli.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
#define ADMIN_ENTRY(name) { #name, cmd_##name },
		KOTOBA_ADMIN_COMMANDS(ADMIN_ENTRY)
#undef ADMIN_ENTRY
	};

	/* As in kotoba: a closed connection is an error, not SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		cli_usage(stderr);
		return KOTOBA_EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cli_error("unknown command '%s'", argv[1]);
	cli_usage(stderr);
	return KOTOBA_EXIT_USAGE;
}
