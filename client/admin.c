/* SPDX-License-Identifier: MIT
 * `kotoba approvals ls|rm FAMILY` and `kotoba audit tail|verify`: the
 * caller's own grants and audit rows (the broker answers per peer uid).
 */
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
	int c;

	while ((c = getopt_long(argc, argv, "n:", lo, NULL)) != -1) {
		if (c == 'S')
			o->socket = optarg;
		else if (c == 'n')
			o->max = strtoull(optarg, NULL, 10);
		else
			return -1;
	}
	while (optind < argc && o->n_words < 3)
		o->words[o->n_words++] = argv[optind++];
	return optind < argc ? -1 : 0;
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

/* Sends one request and waits for its answer; prints errors. */
static int request(struct conn *c, struct frame *f, struct msg *m)
{
	if (conn_send(c, f) < 0 || conn_recv(c, m) < 0)
		return KOTOBA_EXIT_UNREACHABLE;
	if (m->type == MSG_ERROR) {
		cli_error("%.*s", (int)m->u.error.message.len, m->u.error.message.ptr);
		return 1;
	}
	return 0;
}

static int approvals_ls(struct conn *c)
{
	struct msg_grants g = { 1 };
	static struct msg m;
	struct frame f;
	int rc;

	if (enc_grants(&f, &g) < 0)
		return 1;
	if ((rc = request(c, &f, &m)) != 0)
		return rc;
	if (m.u.grant_list.n == 0) {
		printf("no saved grants\n");
		return 0;
	}
	printf("%-14s %-20s %-6s %-20s %s\n", "FAMILY", "SAVED", "USES", "LAST USED", "CARD");
	for (size_t i = 0; i < m.u.grant_list.n; i++) {
		const struct grant_info *gi = &m.u.grant_list.rows[i];

		printf("%-14.*s ", (int)gi->family.len, gi->family.ptr);
		print_time(gi->saved_at_ms);
		printf(" %-6" PRIu64 " ", gi->use_count);
		print_time(gi->last_used_ms);
		printf(" %.*s\n", (int)gi->card.len, gi->card.ptr);
	}
	return 0;
}

static int approvals_rm(struct conn *c, const char *family)
{
	struct msg_revoke r = { 1, pstr_c(family) };
	static struct msg m;
	struct frame f;
	int rc;

	if (enc_revoke(&f, &r) < 0)
		return 1;
	if ((rc = request(c, &f, &m)) != 0)
		return rc;
	printf("%.*s\n", (int)m.u.ok.message.len, m.u.ok.message.ptr);
	return 0;
}

int cmd_approvals(int argc, char **argv)
{
	struct admin_opts o = { 0 };
	struct conn c;
	int rc;

	if (parse_admin(argc, argv, &o) < 0 || o.n_words < 1 ||
	    (strcmp(o.words[0], "ls") && strcmp(o.words[0], "rm")) ||
	    (!strcmp(o.words[0], "rm") && o.n_words != 2)) {
		fputs("usage: kotoba approvals ls [--socket PATH]\n"
		      "       kotoba approvals rm execute_code [--socket PATH]\n", stderr);
		return KOTOBA_EXIT_USAGE;
	}
	if ((rc = conn_open(&c, o.socket, false)) != 0)
		return rc;
	rc = !strcmp(o.words[0], "ls") ? approvals_ls(&c) : approvals_rm(&c, o.words[1]);
	conn_close(&c);
	return rc;
}

static void print_row(const struct audit_info *a)
{
	print_time(a->time_ms);
	printf(" #%-5" PRIu64 " run %-4" PRIu64 " %-8s %-11s %-10s %-10s %.12s %.*s", a->seq, a->run,
	       a->event, a->decision, a->approver[0] ? a->approver : "-",
	       a->profile[0] ? a->profile : "-", a->sha256.ptr, (int)a->labels.len,
	       a->labels.ptr);
	if (a->has_exit) {
		if (a->signal)
			printf(" signal %" PRId64, a->signal);
		else
			printf(" exit %" PRId64, a->exit_code);
		printf(" %" PRId64 " ms%s", a->duration_ms, a->timed_out ? " timed out" : "");
	}
	putchar('\n');
}

static int audit_request(struct conn *c, const char *op, uint64_t max)
{
	struct msg_audit q = { 1, op, max ? max : 20 };
	static struct msg m;
	struct frame f;
	int rc;

	if (enc_audit(&f, &q) < 0)
		return 1;
	if ((rc = request(c, &f, &m)) != 0)
		return rc;
	if (m.type == MSG_OK) {
		printf("%.*s\n", (int)m.u.ok.message.len, m.u.ok.message.ptr);
		return 0;
	}
	for (size_t i = 0; i < m.u.audit_rows.n; i++)
		print_row(&m.u.audit_rows.rows[i]);
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	struct admin_opts o = { 0 };
	struct conn c;
	int rc;

	if (parse_admin(argc, argv, &o) < 0 || o.n_words != 1 ||
	    (strcmp(o.words[0], "tail") && strcmp(o.words[0], "verify"))) {
		fputs("usage: kotoba audit tail [-n N] [--socket PATH]\n"
		      "       kotoba audit verify [--socket PATH]\n", stderr);
		return KOTOBA_EXIT_USAGE;
	}
	if ((rc = conn_open(&c, o.socket, false)) != 0)
		return rc;
	rc = audit_request(&c, o.words[0], o.max);
	conn_close(&c);
	return rc;
}
