/* SPDX-License-Identifier: MIT
 * `kotoba approvals ls|rm FAMILY` and `kotoba audit tail|verify`: the
 * caller's own grants and audit rows (the broker answers per peer uid).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/cli.h"

struct admin_opts {
	const char *socket;
	uint64_t max;
	const char *words[3];
	size_t n_words;
};

/* Options may come before or after the operands. */
static int parse_admin(int argc, char **argv, struct admin_opts *o)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "max", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	bool seen[256] = { false };
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "n:", lo, NULL)) != -1) {
		if (!cli_option_once(c, lo, seen))
			return -1;
		if (c == 'S' && !cli_socket_fits(optarg))
			return -1;
		if (c == 'S') {
			o->socket = optarg;
		} else if (c == 'n') {
			errno = 0;
			o->max = strtoull(optarg, &end, 10);
			if (errno || *end || *optarg < '0' || *optarg > '9')
				return cli_error("--max takes a number of rows"), -1;
		} else {
			return -1;
		}
	}
	while (optind < argc && o->n_words < 3)
		o->words[o->n_words++] = argv[optind++];
	return optind < argc ? -1 : 0;
}

/* A string from the broker in a column of @width: shown safely, padded. */
static void cell(const char *s, int width)
{
	size_t cols = kotoba_show(stdout, s, strlen(s), 0);

	if ((size_t)width > cols)
		printf("%*s", width - (int)cols, "");
}

static void print_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	char buf[32];

	if (ms <= 0) {
		printf("%-20s", "never");
		return;
	}
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime(&t));
	printf("%-20s", buf);
}

/* "until revoked", the time it ends, or "expired" and the time it ended:
 * an expired grant covers nothing, and the column says so first. */
static void print_expiry(const struct kotoba_grant *g)
{
	time_t t = (time_t)(g->expires_ms / 1000);
	char buf[32];

	if (g->expires_ms <= 0) {
		printf("%-28s", "until revoked");
		return;
	}
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime(&t));
	printf("%s%-*s", g->expired ? "expired " : "", g->expired ? 20 : 28, buf);
}

/* The status of a failed request, after printing why: the broker's own
 * refusals are 1, a lost or unreachable broker is 125. */
static int failed(const struct kotoba_error *err)
{
	cli_error("%s", err->message);
	return err->from_broker ? 1 : KOTOBA_EXIT_UNREACHABLE;
}

static int approvals_ls(struct kotoba_client *c)
{
	struct kotoba_grant rows[KOTOBA_GRANTS_MAX] = { { .size = sizeof(rows[0]) } };
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	size_t n;

	if (kotoba_grants(c, rows, KOTOBA_GRANTS_MAX, &n, &err))
		return failed(&err);
	if (n == 0) {
		printf("no saved grants\n");
		return 0;
	}
	printf("%-14s %-20s %-6s %-20s %-28s %-20s %s\n", "FAMILY", "SAVED", "USES", "LAST USED",
	       "EXPIRES", "CARD", "COVERS RUNS IN");
	for (size_t i = 0; i < n; i++) {
		cell(rows[i].family, 14);
		putchar(' ');
		print_time(rows[i].saved_at_ms);
		printf(" %-6" PRIu64 " ", rows[i].use_count);
		print_time(rows[i].last_used_ms);
		putchar(' ');
		print_expiry(&rows[i]);
		putchar(' ');
		cell(rows[i].card, 20);
		putchar(' ');
		cell(rows[i].scope[0] ? rows[i].scope : "any directory", 0);
		putchar('\n');
	}
	return 0;
}

static int approvals_rm(struct kotoba_client *c, const char *family)
{
	char message[KOTOBA_MESSAGE_MAX + 1];
	struct kotoba_error err = KOTOBA_ERROR_INIT;

	if (kotoba_revoke(c, family, message, sizeof(message), &err))
		return failed(&err);
	cell(message, 0);
	putchar('\n');
	return 0;
}

int cmd_approvals(int argc, char **argv)
{
	struct admin_opts o = { 0 };
	struct kotoba_client *c;
	int rc;

	if (parse_admin(argc, argv, &o) < 0 || o.n_words < 1 ||
	    (strcmp(o.words[0], "ls") && strcmp(o.words[0], "rm")) ||
	    o.n_words != (strcmp(o.words[0], "rm") ? 1u : 2u)) {
		fputs("usage: kotoba approvals ls [--socket PATH]\n"
		      "       kotoba approvals rm execute_code [--socket PATH]\n", stderr);
		return KOTOBA_EXIT_USAGE;
	}
	if ((rc = cli_open(&c, o.socket, 0)) != 0)
		return rc;
	rc = !strcmp(o.words[0], "ls") ? approvals_ls(c) : approvals_rm(c, o.words[1]);
	kotoba_close(c);
	return rc;
}

static void print_row(const struct kotoba_audit_row *a)
{
	print_time(a->time_ms);
	printf(" #%-5" PRIu64 " run %-4" PRIu64 " ", a->seq, a->run);
	cell(a->event, 8);
	putchar(' ');
	cell(a->decision, 11);
	putchar(' ');
	cell(a->approver[0] ? a->approver : "-", 10);
	putchar(' ');
	cell(a->profile[0] ? a->profile : "-", 10);
	putchar(' ');
	kotoba_show(stdout, a->sha256, strnlen(a->sha256, 12), 0);
	putchar(' ');
	cell(a->labels, 0);
	if (a->has_exit) {
		if (a->signal)
			printf(" signal %" PRId64, a->signal);
		else
			printf(" exit %" PRId64, a->exit_code);
		printf(" %" PRId64 " ms%s", a->duration_ms, a->timed_out ? " timed out" : "");
		if (a->blocked_total)
			printf(" blocked %" PRIu64, a->blocked_total);
		if (a->net_hosts)
			printf(" network %" PRIu64 " host%s %" PRIu64 " B out %" PRIu64 " B in",
			       a->net_hosts, a->net_hosts == 1 ? "" : "s", a->net_bytes_out,
			       a->net_bytes_in);
	}
	if (a->after)
		printf(" after #%" PRIu64, a->after);
	putchar('\n');
}

static int audit_tail(struct kotoba_client *c, uint64_t max)
{
	struct kotoba_audit_row *rows;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	size_t n;
	int rc = 0;

	/* The broker answers at most KOTOBA_AUDIT_MAX rows whatever is asked. */
	max = !max ? 20 : max > KOTOBA_AUDIT_MAX ? KOTOBA_AUDIT_MAX : max;
	rows = calloc(max, sizeof(*rows));
	if (!rows) {
		cli_error("out of memory");
		return 1;
	}
	rows[0].size = sizeof(rows[0]);
	if (kotoba_audit_tail(c, rows, max, &n, &err))
		rc = failed(&err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		print_row(&rows[i]);
	free(rows);
	return rc;
}

/* An exit row's traffic through the egress proxy: one line per host. */
static int show_network(struct kotoba_client *c, uint64_t seq)
{
	struct kotoba_net_use use[KOTOBA_NETWORK_MAX];
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	bool found;
	size_t n;

	if (kotoba_audit_network(c, seq, use, KOTOBA_NETWORK_MAX, &n, &found, &err))
		return failed(&err);
	for (size_t i = 0; i < n; i++) {
		printf("  %-12s ", "network");
		kotoba_show(stdout, use[i].host, strnlen(use[i].host, sizeof(use[i].host)), 0);
		putchar(' ');
		kotoba_show(stdout, use[i].methods, strnlen(use[i].methods, sizeof(use[i].methods)),
			    0);
		printf("  %" PRIu64 " request%s, %" PRIu64 " bytes out, %" PRIu64 " bytes in\n",
		       use[i].requests, use[i].requests == 1 ? "" : "s", use[i].bytes_out,
		       use[i].bytes_in);
	}
	return 0;
}

/* One row and, for a run's exit, what the sandbox refused in it: one line
 * per entry, every string the broker's or the snippet's shown safely. */
static int audit_show(struct kotoba_client *c, const char *word)
{
	struct kotoba_audit_row row = { .size = sizeof(row) };
	struct kotoba_blocked blocked[KOTOBA_BLOCKED_MAX];
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	uint64_t listed = 0;
	bool found;
	size_t n;
	char *end;
	uint64_t seq = strtoull(word, &end, 10);

	if (!*word || *end || word[0] == '-') {
		cli_error("audit show: give a row number, as audit tail shows it (#N)");
		return KOTOBA_EXIT_USAGE;
	}
	if (kotoba_audit_show(c, seq, &row, &found, blocked, KOTOBA_BLOCKED_MAX, &n, &err))
		return failed(&err);
	if (!found) {
		cli_error("audit show: you have no row %" PRIu64, seq);
		return 1;
	}
	print_row(&row);
	for (size_t i = 0; i < n; i++) {
		printf("  %-12s ", blocked[i].kind);
		kotoba_show(stdout, blocked[i].target, strnlen(blocked[i].target,
								sizeof(blocked[i].target)), 0);
		printf("  x%" PRIu64 "  by %s, seen by %s%s\n", blocked[i].count, blocked[i].by,
		       blocked[i].seen_by, blocked[i].inferred ? " (inferred)" : "");
		listed += blocked[i].count;
	}
	if (listed < row.blocked_total)
		printf("  and %" PRIu64 " more refusals past the receipt's %d entries\n",
		       row.blocked_total - listed, KOTOBA_BLOCKED_MAX);
	return row.net_hosts ? show_network(c, seq) : 0;
}

static int audit_verify(struct kotoba_client *c)
{
	char message[KOTOBA_MESSAGE_MAX + 1];
	struct kotoba_error err = KOTOBA_ERROR_INIT;

	if (kotoba_audit_verify(c, message, sizeof(message), &err))
		return failed(&err);
	cell(message, 0);
	printf("\nseals: not checked (the broker checks the chain; check a copy with --db "
	       "and --key, see AUDIT.md)\n");
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	struct admin_opts o = { 0 };
	struct kotoba_client *c;
	int rc;

	/* A copy of the database, offline: its own options, no broker. */
	if (audit_verify_offline(argc, argv))
		return cmd_audit_verify_copy(argc, argv);
	if (parse_admin(argc, argv, &o) < 0 || o.n_words < 1 ||
	    o.n_words != (strcmp(o.words[0], "show") ? 1u : 2u) ||
	    (strcmp(o.words[0], "tail") && strcmp(o.words[0], "verify") &&
	     strcmp(o.words[0], "show"))) {
		fputs("usage: kotoba audit tail [-n N] [--socket PATH]\n"
		      "       kotoba audit show N [--socket PATH]\n"
		      "       kotoba audit verify [--socket PATH]\n"
		      "       kotoba audit verify --db FILE [--key KEY | --key-file FILE|-]"
		      " [--anchors FILE]\n", stderr);
		return KOTOBA_EXIT_USAGE;
	}
	if ((rc = cli_open(&c, o.socket, 0)) != 0)
		return rc;
	if (!strcmp(o.words[0], "show"))
		rc = audit_show(c, o.words[1]);
	else
		rc = !strcmp(o.words[0], "tail") ? audit_tail(c, o.max) : audit_verify(c);
	kotoba_close(c);
	return rc;
}
