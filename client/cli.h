/* SPDX-License-Identifier: MIT
 * The `kotoba` command: one file per subcommand, this header between them.
 */
#ifndef KOTOBA_CLI_H
#define KOTOBA_CLI_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/proto.h"
#include "proto/status.h"

struct conn {
	int fd;
	char path[108];
	struct msg_welcome welcome;
	uint8_t *buf; /* payload of the last frame received */
};

/* Connects and says hello.  On failure prints why and returns the exit
 * status to use (KOTOBA_EXIT_UNREACHABLE). */
int conn_open(struct conn *c, const char *socket_path, bool channel);
void conn_close(struct conn *c);
int conn_send(struct conn *c, struct frame *f);
/* Receives and decodes the next frame; -1 after printing why. */
int conn_recv(struct conn *c, struct msg *m);

int cmd_run(int argc, char **argv);
int cmd_scan(int argc, char **argv);
int cmd_approvals(int argc, char **argv);
int cmd_audit(int argc, char **argv);

/* JSON output helpers (client/json.c). */
void json_string(FILE *out, const char *s, size_t len);

void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
