/* SPDX-License-Identifier: MIT
 * `kotoba scan FILE|-`: the broker's pre-screen, run here, offline, so
 * anyone can check what the patterns catch.  Exit 0 when no label matches,
 * 1 when some do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/scan.h"
#include "client/cli.h"
#include "proto/proto.h" /* PROTO_SNIPPET_MAX_DEFAULT */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 65536, n;
	char *buf;

	if (!f)
		return NULL;
	buf = malloc(cap);
	*len = 0;
	while (buf && (n = fread(buf + *len, 1, cap - *len, f)) > 0) {
		*len += n;
		if (*len == cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
	}
	if (f != stdin)
		fclose(f);
	return buf;
}

/* The pre-screen's report, passed through kotoba_show() on its way to the
 * terminal like every other text the CLI shows: whatever the report quotes
 * from the snippet reaches the terminal only as visible characters. */
static void print_report(const char *code, size_t len, const struct scan_result *r)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f) {
		cli_error("out of memory");
		return;
	}
	scan_print(f, code, len, r);
	if (fclose(f) == 0)
		kotoba_show(stdout, text, n, KOTOBA_SHOW_LINES);
	free(text);
}

int cmd_scan(int argc, char **argv)
{
	struct scan_result r;
	char err[200];
	size_t len;
	char *code;
	int rc;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs("usage: kotoba scan FILE|-\n", stdout);
		return 0;
	}
	if (argc != 2) {
		fputs("usage: kotoba scan FILE|-\n", stderr);
		return KOTOBA_EXIT_USAGE;
	}
	code = slurp(argv[1], &len);
	if (!code) {
		cli_error("cannot read %s: %s", argv[1], strerror(errno));
		return KOTOBA_EXIT_USAGE;
	}
	if (scan_init(err, sizeof(err)) < 0) {
		cli_error("%s", err);
		free(code);
		return KOTOBA_EXIT_USAGE;
	}
	rc = scan_snippet(code, len, PROTO_SNIPPET_MAX_DEFAULT, &r);
	if (rc == -E2BIG)
		cli_error("%s is %zu bytes; the snippet limit is %u bytes", argv[1], len,
			  PROTO_SNIPPET_MAX_DEFAULT);
	else
		print_report(code, len, &r);
	scan_fini();
	free(code);
	return rc < 0 ? KOTOBA_EXIT_USAGE : r.n > 0;
}
