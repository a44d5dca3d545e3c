/* SPDX-License-Identifier: MIT
 * The `kotoba` command: one file per subcommand, this header between them.
 * Everything it says to the broker goes through libkotoba-client.
 */
#ifndef KOTOBA_CLI_H
#define KOTOBA_CLI_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "client/kotoba-client.h"
#include "proto/status.h"

/* Connects and says hello with @flags (KOTOBA_HELLO_CHANNEL, _ESCALATE).
 * On failure prints why and returns the exit status to use
 * (KOTOBA_EXIT_UNREACHABLE); *c is then NULL. */
int cli_open(struct kotoba_client **c, const char *socket_path, unsigned flags);

/* The CLI is two programs.  `kotoba` itself carries the subcommands an
 * agent calls over and over (run, mcp) and links only the client library,
 * msgpack-c, jansson and Nettle; the rarer ones, which need the pre-screen
 * and the audit trail's code (PCRE2, SQLite), are in kotoba-admin, which
 * `kotoba` execs with the same argv (client/main.c, client/admin_main.c).
 * When one program linked all six shared libraries, the loader's work
 * cost every `kotoba run` about as much again as /bin/true's whole start
 * (tests/bench/README.md, part 1). */
#define KOTOBA_ADMIN_COMMANDS(X) X(scan) X(approvals) X(audit)
#define KOTOBA_ADMIN_PROGRAM "kotoba-admin"
/* Prints `kotoba`'s usage (both programs say it the same way). */
void cli_usage(FILE *f);

int cmd_run(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
/* The exit status `kotoba run` gives a run's end (proto/status.h): the
 * snippet's, 124, 128+N, or why it did not run from @code. */
int run_status(bool have_exit, const struct kotoba_result *r, enum kotoba_code code);
int cmd_scan(int argc, char **argv);
int cmd_approvals(int argc, char **argv);
int cmd_audit(int argc, char **argv);
/* client/verify.c: `kotoba audit verify --db FILE ...`, offline. */
bool audit_verify_offline(int argc, char **argv);
int cmd_audit_verify_copy(int argc, char **argv);

/* JSON (client/json.c), for --json and `kotoba mcp`.  json_text: any
 * bytes as a JSON string, those that are not UTF-8 as U+FFFD (NULL only
 * when out of memory).  json_add_result, json_add_error: a run's end as
 * `kotoba run --json` gives it (README.md), added to @o. */
json_t *json_text(const char *s, size_t len);
void json_add_result(json_t *o, const struct kotoba_result *x);
void json_add_error(json_t *o, const struct kotoba_error *e);
/* "rerun", "left", "expired", "cancelled"; NULL when not escalated. */
const char *json_escalation_name(enum kotoba_escalation e);

void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Command-line checks shared by the subcommands (client/conn.c).  Given
 * getopt_long's return value, just after that call: false, after saying
 * why, when the option was given before (which of two values counts is
 * not left to guess) or its argument is empty.  seen: 256 entries, false
 * at first. */
struct option;
bool cli_option_once(int c, const struct option *lo, bool seen[256]);
/* False, after saying why, when --socket's path cannot fit a Unix socket
 * address. */
bool cli_socket_fits(const char *path);
#endif
