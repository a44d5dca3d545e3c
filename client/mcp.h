/* SPDX-License-Identifier: MIT
 * `kotoba mcp`: a Model Context Protocol server on stdio (newline-delimited
 * JSON-RPC 2.0) offering the execute_code tool, a broker client like
 * `kotoba run`.  client/mcp.c reads requests and answers the protocol;
 * client/mcp_run.c runs the tool's calls, one broker connection each.
 */
#ifndef KOTOBA_MCP_H
#define KOTOBA_MCP_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/cli.h"

#define MCP_RUNS_MAX 8                  /* calls in flight at once */
#define MCP_LINE_MAX (16u << 20)        /* a request line's bytes */
#define MCP_OUTPUT_MAX (1u << 20)       /* a stream's bytes kept for the result */

struct mcp_buf {
	char *p;
	size_t len;
	bool cut;                       /* more came than MCP_OUTPUT_MAX */
};

struct mcp_run {
	bool used;
	json_t *id;                     /* the tools/call request's id */
	json_t *progress;               /* its progressToken, or NULL */
	struct kotoba_client *c;
	struct mcp_buf out[2];
	struct kotoba_result res, first;
	struct kotoba_error err;
	struct mcp_buf first_out[2];
	char card_id[64];               /* a card waiting for its elicitation */
	bool card_escalate;
	json_int_t elicit_id;           /* the elicitation/create request's id, 0: none */
	json_t *images;                 /* image content, one per image file the run left */
	json_t *other_files;            /* the names of its other files */
	uint64_t started_ms, progress_ms;
	struct mcp *m;
};

struct mcp {
	const char *socket;
	char cwd[PATH_MAX];             /* --cwd, or the server's own working directory */
	bool no_elicitation;            /* --no-elicitation: no client is an approval channel */
	bool client_elicits;            /* the client's initialize declared elicitation */
	json_int_t next_id;             /* of the requests this server sends */
	struct mcp_run runs[MCP_RUNS_MAX];
};

/* One JSON-RPC message on stdout, as one line. */
void mcp_send(json_t *msg);
void mcp_error(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t mcp_now_ms(void);

/* client/mcp_run.c */
json_t *mcp_tool(void);
/* Starts a tools/call; answers it at once when it cannot start. */
void mcp_call(struct mcp *m, json_t *id, json_t *params);
/* A response to an elicitation/create this server sent. */
void mcp_elicit_reply(struct mcp *m, json_t *msg);
/* notifications/cancelled for @id; every run when @id is NULL. */
void mcp_cancel(struct mcp *m, json_t *id);
/* Reads what a run's connection holds; answers the call when it ends. */
void mcp_run_step(struct mcp_run *r);
void mcp_progress(struct mcp *m);
/* The mode the broker's welcome names ("none": the tool is not offered);
 * "" when the broker cannot be reached. */
void mcp_broker_mode(const struct mcp *m, char *mode, size_t len);
#endif
