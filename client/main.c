/* SPDX-License-Identifier: MIT
 * kotoba: the command-line client of kotoba-brokerd.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "client/cli.h"

static void usage(FILE *f)
{
	fputs("usage: kotoba run [-c CODE | FILE | -] [--cwd DIR] [--timeout S] [--json]\n"
	      "                  [--no-channel] [--answer once|always|deny] [--socket PATH]\n"
	      "                  [--for DURATION] [--scope DIR]\n"
	      "       kotoba mcp [--socket PATH] [--cwd DIR] [--no-elicitation]\n"
	      "       kotoba scan FILE|-\n"
	      "       kotoba approvals ls|rm execute_code [--socket PATH]\n"
	      "       kotoba audit tail|verify|show N [--socket PATH]\n"
	      "       kotoba audit verify --db FILE [--key KEY|--key-file FILE] [--anchors FILE]\n"
	      "\n"
	      "Exit status: the snippet's own; 124 timed out; 125 broker unreachable;\n"
	      "126 did not run (denied, expired, refused, not offered); 127 sandbox setup\n"
	      "failed; 128+N killed by signal N; 64 usage error.\n", f);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "run", cmd_run },
		{ "mcp", cmd_mcp },
		{ "scan", cmd_scan },
		{ "approvals", cmd_approvals },
		{ "audit", cmd_audit },
	};

	/* A broker that closes the connection must give an error, not a
	 * silent death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? KOTOBA_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cli_error("unknown command '%s'", argv[1]);
	usage(stderr);
	return KOTOBA_EXIT_USAGE;
}
