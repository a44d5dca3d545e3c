/* SPDX-License-Identifier: MIT
 * libkotoba-client: talk to kotoba-brokerd from a C program.
 *
 * An agent program uses it to run Python snippets under the broker's
 * approval gate: it connects to the broker's Unix socket, says whether it
 * can show an approval card to a person, then runs snippets and receives
 * their output, cards and results.  The `kotoba` command is built on it.
 *
 * A minimal program:
 *
 *	struct kotoba_client *c;
 *	struct kotoba_exec_opts run = { .size = sizeof(run), .code = "print(6*7)",
 *					.on_output = show };
 *	struct kotoba_result res = KOTOBA_RESULT_INIT;
 *	struct kotoba_error err = KOTOBA_ERROR_INIT;
 *
 *	if (kotoba_open(&c, NULL, false, &err) ||
 *	    kotoba_exec(c, &run, &res, &err))
 *		fprintf(stderr, "%s: %s\n", kotoba_code_name(err.code), err.message);
 *	kotoba_close(c);
 *
 * Errors: every function that can fail returns an enum kotoba_code, 0
 * (KOTOBA_OK) on success, and fills the struct kotoba_error it is given
 * (which may be NULL) with the code and a sentence for a person.  The
 * library never aborts, never prints and never exits.  It does not raise
 * SIGPIPE either: a broker that goes away is KOTOBA_ERR_DISCONNECTED.
 *
 * Threads: a struct kotoba_client is used by one thread at a time, with one
 * exception: while kotoba_exec() waits on one thread, kotoba_answer() and
 * kotoba_cancel() may be called from any other thread (or from inside the
 * exec's own callbacks).  One snippet runs at a time per connection; open
 * several connections to run several at once.  While a run is in flight
 * (kotoba_exec(), or kotoba_exec_start() until kotoba_conn_process() says
 * done) the connection's other requests are refused: their answers would
 * be read among the run's frames.
 *
 * Structs that grow: the structs a caller allocates and the library reads
 * or fills (kotoba_exec_opts, kotoba_result, kotoba_error, and the rows of
 * kotoba_grants() and kotoba_audit_tail()) start with `size`, which the
 * caller sets to sizeof the struct as its header declares it (the _INIT
 * macros do).  The library reads and writes only that many bytes, so a
 * program built against this header keeps working with a later library
 * that appends fields.  A size smaller than this version's is
 * KOTOBA_ERR_INVALID (and an error struct so marked is left unwritten); so
 * are exec options from a newer header that set a field this library does
 * not know (sys_errno E2BIG), rather than run the snippet without it.
 * The structs the library owns and hands out (kotoba_welcome, kotoba_card)
 * only ever grow at their end.
 *
 * Event loops: kotoba_conn_fd() is the descriptor to watch for input, and
 * kotoba_exec_start() with kotoba_conn_process() run a snippet without
 * blocking (the pair sd_bus_get_fd() and sd_bus_process() play for D-Bus).
 *
 * The wire protocol is proto/PROTOCOL.md; this library is one of its
 * clients and adds nothing to it.
 */
#ifndef KOTOBA_CLIENT_H
#define KOTOBA_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version; the build and the .pc file read it from here. */
#define KOTOBA_CLIENT_VERSION "0.3.0"

/* kotoba_version: the version of the library running, which may be newer
 * than the KOTOBA_CLIENT_VERSION a program was compiled with. */
const char *kotoba_version(void);

/* A connection to the broker.  Opaque. */
struct kotoba_client;

/*
 * What went wrong.  The first group happens on this side of the socket;
 * the second is the broker's own `error` codes (PROTOCOL.md, "Error
 * codes"), one value each.
 */
enum kotoba_code {
	KOTOBA_OK = 0,
	/* local */
	KOTOBA_ERR_UNREACHABLE,   /* no broker at the socket path (connect failed) */
	KOTOBA_ERR_DISCONNECTED,  /* the broker closed the connection or a read/write failed */
	KOTOBA_ERR_PROTOCOL,      /* the broker sent a frame this library cannot read */
	KOTOBA_ERR_NOMEM,         /* out of memory */
	KOTOBA_ERR_INVALID,       /* bad argument, or a call out of order (exec before hello) */
	/* from the broker */
	KOTOBA_ERR_TOO_LARGE,     /* too-large */
	KOTOBA_ERR_BAD_MSGPACK,   /* bad-msgpack */
	KOTOBA_ERR_BAD_UTF8,      /* bad-utf8: the code or cwd is not UTF-8 */
	KOTOBA_ERR_BAD_FIELD,     /* bad-field: e.g. timeout over max_timeout_ms */
	KOTOBA_ERR_UNKNOWN_TYPE,  /* unknown-type */
	KOTOBA_ERR_BAD_STATE,     /* bad-state */
	KOTOBA_ERR_VERSION,       /* version: no common protocol version */
	KOTOBA_ERR_SNIPPET_TOO_LARGE, /* snippet-too-large: over max_snippet */
	KOTOBA_ERR_BAD_CWD,       /* bad-cwd: missing or not a directory; step, sys_errno set */
	KOTOBA_ERR_BUSY,          /* busy: a configured limit is reached */
	KOTOBA_ERR_NOT_OFFERED,   /* not-offered: sandbox mode none */
	KOTOBA_ERR_REFUSED,       /* refused: no channel and the snippet matches the pre-screen */
	KOTOBA_ERR_DENIED,        /* denied: the person answered deny */
	KOTOBA_ERR_EXPIRED,       /* expired: nobody answered the card in time */
	KOTOBA_ERR_CANCELLED,     /* cancelled: kotoba_cancel() */
	KOTOBA_ERR_NO_SUCH_RUN,   /* no-such-run */
	KOTOBA_ERR_NO_SUCH_CARD,  /* no-such-card */
	KOTOBA_ERR_SETUP_FAILED,  /* setup-failed: the sandbox failed; step, sys_errno set */
	KOTOBA_ERR_WORKER_LOST,   /* worker-lost */
	KOTOBA_ERR_AUDIT_UNAVAILABLE, /* audit-unavailable: the broker runs nothing */
	KOTOBA_ERR_AUDIT_BROKEN,  /* audit-broken: kotoba_audit_verify() found an edited row */
	KOTOBA_ERR_INTERNAL,      /* internal */
	KOTOBA_ERR_OTHER,         /* a broker code this version does not know: see name */
};

/*
 * An error as a value.  @name is the protocol's code string ("denied",
 * "setup-failed"...) for broker errors and a fixed word for local ones
 * ("unreachable", "disconnected", "protocol", "nomem", "invalid").
 */
#define KOTOBA_MESSAGE_MAX 4096 /* the protocol's limit on a message's bytes */

struct kotoba_error {
	size_t size;        /* set by the caller: sizeof(struct kotoba_error) */
	enum kotoba_code code;
	bool from_broker;   /* the broker sent this error (else it is local) */
	char name[32];
	char message[KOTOBA_MESSAGE_MAX + 1]; /* a sentence for a person, never empty on error */
	char step[32];      /* setup-failed, bad-cwd: the sandbox step that failed */
	int sys_errno;      /* errno of that step, or of the failing local call; 0 if none */
};

#define KOTOBA_ERROR_INIT { .size = sizeof(struct kotoba_error) }

/* What the broker said in `welcome`: valid from kotoba_hello() to close. */
struct kotoba_welcome {
	unsigned version;       /* protocol version in use (1) */
	char broker[48];        /* e.g. "kotoba-brokerd/0.1" */
	char mode[8];           /* "local", "docker" or "none" */
	bool execute_code;      /* the tool is offered (false in mode none) */
	uint64_t max_frame;     /* payload limit in bytes */
	uint64_t max_snippet;   /* source limit in bytes */
	uint64_t max_timeout_ms;/* the largest timeout_ms an exec may ask for */
};

/* ---- connecting ----------------------------------------------------------- */

/*
 * kotoba_default_socket: the socket path used when none is given, by the
 * same rule as the broker: $KOTOBA_SOCKET; /run/kotoba/broker.sock as root;
 * $XDG_RUNTIME_DIR/kotoba/broker.sock; else /tmp/kotoba-UID/broker.sock.
 * @buf, @len: where to write it (108 bytes always suffice).
 * Returns KOTOBA_OK, or KOTOBA_ERR_INVALID when it does not fit.
 */
enum kotoba_code kotoba_default_socket(char *buf, size_t len, struct kotoba_error *err);

/*
 * kotoba_connect: opens a connection to the broker.  Nothing is sent: call
 * kotoba_hello() next.
 * @out: receives the new client; set to NULL on failure.
 * @socket_path: the broker's socket, or NULL for kotoba_default_socket().
 * Returns KOTOBA_OK, KOTOBA_ERR_UNREACHABLE (the message names the path and
 * the reason), KOTOBA_ERR_INVALID (path too long) or KOTOBA_ERR_NOMEM.
 */
enum kotoba_code kotoba_connect(struct kotoba_client **out, const char *socket_path,
				struct kotoba_error *err);

/*
 * kotoba_hello: says hello and reads the welcome.  Must be the first
 * request, once.
 * @channel: true when this program can show an approval card to a person
 *	and send back the answer (kotoba_exec()'s on_card).  Without a channel
 *	the broker never sends a card: plain snippets run unattended, and
 *	snippets that match the pre-screen are refused.
 * @client_name: free-form "name/version" for the broker's log, or NULL.
 * Returns KOTOBA_OK, or the broker's refusal (KOTOBA_ERR_REFUSED: this user
 * may not use the broker; KOTOBA_ERR_BUSY: too many connections;
 * KOTOBA_ERR_VERSION), or a local error.
 */
enum kotoba_code kotoba_hello(struct kotoba_client *c, bool channel, const char *client_name,
			      struct kotoba_error *err);

/* What a program can do, for kotoba_hello_flags(). */
#define KOTOBA_HELLO_CHANNEL 1u  /* as kotoba_hello()'s @channel */
#define KOTOBA_HELLO_ESCALATE 2u /* with CHANNEL: on_card can also show an escalation
				  * card (struct kotoba_card's escalate) to a person */
#define KOTOBA_HELLO_MCP 4u      /* the program is an MCP front: its cards are answered by
				  * an MCP client (an agent host) relaying a person, so
				  * the operator's [mcp] elicitation applies to it */

/*
 * kotoba_hello_flags: kotoba_hello() with what the program can do as
 * flags.  KOTOBA_HELLO_ESCALATE says that this program's on_card handles
 * escalation cards (PROTOCOL.md, "The escalation card"): after a run under
 * a saved grant that the sandbox stopped, the broker may then offer the
 * person to run the same snippet again under the approved profile.
 * Without it (and with kotoba_hello()) the broker never offers one, and
 * every run ends as before.  Declare it only when a person answers the
 * cards: nothing should run again that nobody decided to run.
 * KOTOBA_HELLO_MCP says who answers: with the operator's [mcp] elicitation
 * = no, the broker serves such a connection as one without a channel.
 * Returns as kotoba_hello(); KOTOBA_ERR_INVALID for ESCALATE without
 * CHANNEL or a flag this library does not know.
 */
enum kotoba_code kotoba_hello_flags(struct kotoba_client *c, unsigned flags,
				    const char *client_name, struct kotoba_error *err);

/* kotoba_open: kotoba_connect() then kotoba_hello(); on failure *out is NULL
 * and nothing needs closing. */
enum kotoba_code kotoba_open(struct kotoba_client **out, const char *socket_path, bool channel,
			     struct kotoba_error *err);

/* kotoba_welcome: the broker's welcome, or NULL before kotoba_hello(). */
const struct kotoba_welcome *kotoba_welcome(const struct kotoba_client *c);

/* kotoba_socket_path: the path this client connected to. */
const char *kotoba_socket_path(const struct kotoba_client *c);

/* kotoba_conn_fd: the connection's socket, for poll() or an event loop:
 * when it is readable, call kotoba_conn_process().  Owned by @c: do not
 * read, write or close it. */
int kotoba_conn_fd(const struct kotoba_client *c);

/* kotoba_close: closes the connection (cancelling any run in flight, as the
 * broker does for a closed connection) and frees @c.  NULL is allowed. */
void kotoba_close(struct kotoba_client *c);

/* ---- running a snippet ---------------------------------------------------- */

enum kotoba_stream {
	KOTOBA_STDOUT = 1,
	KOTOBA_STDERR = 2,
};

/* The answer to a card.  KOTOBA_CARD_DEFER is not an answer: it tells
 * kotoba_exec() that the caller will answer later with kotoba_answer().
 * A run card takes ONCE, ALWAYS or DENY; an escalation card RERUN or
 * LEAVE.  An on_card that returns an answer of the other kind is taken as
 * the safe one of the card's own (DENY, LEAVE). */
enum kotoba_choice {
	KOTOBA_CARD_DEFER = 0,
	KOTOBA_CARD_ONCE,   /* run this snippet, this time */
	KOTOBA_CARD_ALWAYS, /* save the execute_code grant for this user, then run it */
	KOTOBA_CARD_DENY,   /* do not run it */
	KOTOBA_CARD_RERUN,  /* escalation card: run it again under the approved profile */
	KOTOBA_CARD_LEAVE,  /* escalation card: do not run it again */
};

#define KOTOBA_LABELS_MAX 16

/* A pre-screen label on a card: where its first match is. */
struct kotoba_card_label {
	const char *label;    /* "fs-destroy", "shell-spawn", "raw-socket", "dynamic-eval",
			       * "fs-write", "data-out" or "secret-read" */
	uint64_t start, end;  /* byte span in the snippet */
	uint64_t line;        /* 1-based line */
};

/* An environment entry the run keeps, and a limit it gets (its name ends
 * in _bytes or _s when it has a unit). */
struct kotoba_card_env {
	const char *name, *value;
};

struct kotoba_card_limit {
	const char *name;
	uint64_t value;
};

/* One operation the sandbox refused in a run (the `exit` message's
 * `blocked`; PROTOCOL.md says what each field may hold).  Every string is
 * the broker's, and the target is the snippet's choice: show them with
 * kotoba_show(), never raw. */
#define KOTOBA_BLOCKED_MAX 16
struct kotoba_blocked {
	char kind[16];        /* "write", "create", "delete", "rename", "exec", "secret-read",
			       * "connect-unix", "bind", "listen", "signal", "syscall",
			       * "request" (a network request the egress proxy refused) */
	char target[256];     /* a path, a program, an address, a pid, a call's name;
			       * a request's: the proxy's sentence ("POST URL refused: WHY") */
	uint64_t count;       /* how many times, >= 1 */
	char by[16];          /* "landlock", "seccomp", "exec gate", "mount mask", "egress proxy" */
	char seen_by[16];     /* "worker" (a fact), "proxy" (the broker's egress proxy: a
			       * fact), "python" (the snippet's own report) */
	bool inferred;        /* `by` follows from the profile, not the kernel's word */
};

/*
 * An approval card: a person must decide before the snippet runs.  Show
 * the whole snippet (it is the card's label: nothing is approved unseen),
 * the labels at their lines, and the three options in the spec's words.
 * Every pointer is valid only during the on_card callback: copy @id to
 * answer later.
 */
struct kotoba_card {
	const char *id;           /* the card id, for kotoba_answer() */
	const char *snippet;      /* the whole snippet, NUL-terminated */
	size_t snippet_len;
	const struct kotoba_card_label *labels; /* empty when asked only for want of a grant */
	size_t n_labels;
	const char *const *options; /* "once", "always", "deny", then NULL ("rerun", "leave"
				     * on an escalation card) */
	const char *family;       /* "execute_code": what an `always` grant is saved under */
	const char *family_button;/* "Always allow her to run Python" */
	const char *family_detail;/* "Any code she writes then runs on this computer ..." */
	uint64_t expires_ms;      /* the broker waits this long, then the exec is EXPIRED */
	const char *reason;       /* one sentence: why a card is asked */
	/* What else decides what runs, as the run gets it: show it too.  From a
	 * broker that predates these fields, cwd is NULL and the counts 0. */
	const char *cwd;          /* the working directory */
	uint64_t timeout_ms;      /* the wall-clock limit in force */
	const struct kotoba_card_env *env; /* the client's env entries the run keeps */
	size_t n_env;
	const struct kotoba_card_limit *limits; /* the other limits, e.g. "memory_bytes" */
	size_t n_limits;
	/* The longest an `always` grant lasts on this broker ([gate] grant_ttl);
	 * 0: until revoked (or a broker that predates it). */
	uint64_t grant_ttl_ms;
	/* Added after grant_ttl_ms: an escalation card (PROTOCOL.md, "The
	 * escalation card"), sent only to a program whose hello said
	 * KOTOBA_HELLO_ESCALATE.  The snippet already ran once under the
	 * user's grant and the sandbox stopped what @blocked lists; what that
	 * run did stays done.  Options "rerun", "leave"; family, family_button
	 * and family_detail are NULL; cwd, timeout_ms, env and limits are what
	 * the re-run would get.  Show the receipt with the card (an entry
	 * seen_by "python" is the snippet's own report, which it can forge);
	 * kotoba_card_text() does.  Answer KOTOBA_CARD_RERUN or _LEAVE. */
	bool escalate;
	const struct kotoba_blocked *blocked; /* the first run's receipt */
	size_t n_blocked;
	uint64_t blocked_total;   /* refusals in all, counting those past the list */
	uint64_t after_seq;       /* the first run's exit row in the audit trail */
};

/* Receives output as the snippet writes it, in order, in chunks of at most
 * 64 KiB.  @data is not NUL-terminated and may be any bytes. */
typedef void (*kotoba_output_fn)(void *arg, enum kotoba_stream stream, const void *data,
				 size_t len);
/* Receives a card; returns the answer, or KOTOBA_CARD_DEFER to answer later
 * with kotoba_answer() (from another thread: kotoba_exec() keeps waiting). */
typedef enum kotoba_choice (*kotoba_card_fn)(void *arg, const struct kotoba_card *card);
/* Receives a broker error that belongs to no request, e.g. no-such-card for
 * an answer that arrived after its card expired.  The run goes on. */
typedef void (*kotoba_notice_fn)(void *arg, const struct kotoba_error *notice);

/* Receives one file the snippet left in $KOTOBA_OUTPUT_DIR, after its
 * output and before kotoba_exec() returns, in name order.  @name is
 * NUL-terminated and a plain file name (1-255 bytes, no '/', no control
 * character, not "." or ".."; the library refuses a frame whose name is
 * not), @data its @len bytes (at most 2 MiB), valid during the call. */
typedef void (*kotoba_file_fn)(void *arg, const char *name, const void *data, size_t len);

struct kotoba_exec_opts {
	size_t size;                /* sizeof(struct kotoba_exec_opts) */
	const char *code;           /* Python source: UTF-8, no NUL */
	size_t code_len;            /* 0: strlen(code) */
	const char *cwd;            /* absolute directory; NULL: the broker's default (home) */
	uint64_t timeout_ms;        /* wall-clock limit; 0: the broker's default */
	const char *const *env;     /* "NAME=value" strings, NULL-terminated, at most 64;
				     * the broker keeps only its allowlist; NULL: none */
	kotoba_output_fn on_output; /* NULL: output is discarded */
	kotoba_card_fn on_card;     /* NULL: every card is answered deny */
	kotoba_notice_fn on_notice; /* NULL: notices are ignored */
	void *arg;                  /* passed to the callbacks */
	/* Added after arg: a caller built against an older header, whose size
	 * ends there, gets no files. */
	kotoba_file_fn on_file;     /* NULL: files are discarded */
};

/* How a snippet that ran ended (the `exit` message). */
struct kotoba_result {
	size_t size;          /* set by the caller: sizeof(struct kotoba_result) */
	bool exited;          /* true: exit_code is valid; false: it was killed by signal */
	int exit_code;
	int signal;
	bool timed_out;       /* the wall-clock timeout fired */
	bool truncated;       /* a stream passed the broker's output cap */
	char limit[16];       /* the limit that ended it: "wall", "cpu", "file-size",
			       * "memory", or "" */
	uint64_t duration_us; /* wall time, fork to exit */
	uint64_t cpu_us;
	uint64_t max_rss_kb;
	char profile[16];     /* "approved" (a person answered its card) or "unattended" */
	char decision[16];    /* "ran" */
	char approver[16];    /* "user", "grant", "container" or "unattended" */
	size_t n_labels;      /* pre-screen labels the snippet matched */
	char labels[KOTOBA_LABELS_MAX][16];
	char where[16];       /* "host", or "container" (sandbox mode docker) */
	char container[256];  /* with "container": the container's name; else "" */
	/* The receipt: what the sandbox refused, the first KOTOBA_BLOCKED_MAX
	 * kinds and targets, and how many refusals in all (0: none).  Added
	 * after `container`: a caller built against an older header, whose
	 * size ends there, gets the rest of the result without it. */
	size_t n_blocked;
	uint64_t blocked_total;
	struct kotoba_blocked blocked[KOTOBA_BLOCKED_MAX];
	/* With truncated: where the broker cut each stream, in bytes; the
	 * broker's `[limits] output` raises it.  0: the broker did not say (a
	 * broker before it).  Added after the receipt, as above. */
	uint64_t output_limit;
	/* Entries of $KOTOBA_OUTPUT_DIR not passed to on_file: over a cap (16
	 * files, 2 MiB each, 8 MiB in all), not a regular file, or a name
	 * refused.  Added after output_limit, as above. */
	uint64_t files_left_out;
};

#define KOTOBA_RESULT_INIT { .size = sizeof(struct kotoba_result) }

/*
 * kotoba_exec: runs one snippet and waits for its end, calling back with
 * its card (at most one, before anything runs; and an escalation card,
 * see below) and its output.
 * @opts: the snippet and the callbacks.
 * @res: filled when the snippet ran, whatever its own exit status (may be NULL).
 * Returns KOTOBA_OK when the snippet ran (see @res), or why it did not:
 * KOTOBA_ERR_DENIED, _EXPIRED, _REFUSED, _NOT_OFFERED, _CANCELLED,
 * _SNIPPET_TOO_LARGE, _BAD_CWD, _SETUP_FAILED (with err->step), _BUSY,
 * _WORKER_LOST, _AUDIT_UNAVAILABLE, or a local error.
 */
enum kotoba_code kotoba_exec(struct kotoba_client *c, const struct kotoba_exec_opts *opts,
			     struct kotoba_result *res, struct kotoba_error *err);

/* How an escalated run ended (kotoba_escalation()). */
enum kotoba_escalation {
	KOTOBA_ESCALATION_NONE = 0,  /* no escalation card: the run ended as any other */
	KOTOBA_ESCALATION_RERUN,     /* answered rerun: @res is the re-run's, or the
				      * error is why it did not run or end */
	KOTOBA_ESCALATION_LEFT,      /* answered leave: nothing ran again */
	KOTOBA_ESCALATION_EXPIRED,   /* nobody answered the card in time */
	KOTOBA_ESCALATION_CANCELLED, /* kotoba_cancel() withdrew the card */
};

/*
 * kotoba_exec() and kotoba_conn_process() with an escalation (only on a
 * connection whose hello said KOTOBA_HELLO_ESCALATE): the first run's
 * `exit` does not end the run; on_card receives the escalation card, and
 * then:
 *  - rerun: the snippet runs again (on_output gets its output too); the
 *    call returns as for any run, @res the re-run's result;
 *  - leave, expiry, or a cancel while the card waits: KOTOBA_OK, @res the
 *    first run's result (the snippet ran, once).
 * kotoba_escalation() says which, with the first run's result.
 */

/*
 * kotoba_escalation: whether the connection's last run (the one in flight,
 * from its escalation card's on_card on) was escalated and how it ended.
 * @outcome: receives it (KOTOBA_ESCALATION_NONE: not escalated).
 * @after_seq: receives the first run's exit row in the audit trail, or 0
 *	(may be NULL).
 * @first: receives the first run's result, with its receipt (may be NULL;
 *	size set by the caller); left untouched when not escalated.
 * Returns KOTOBA_OK, or KOTOBA_ERR_INVALID (a short @first).
 */
enum kotoba_code kotoba_escalation(const struct kotoba_client *c,
				   enum kotoba_escalation *outcome, uint64_t *after_seq,
				   struct kotoba_result *first, struct kotoba_error *err);

/*
 * kotoba_exec_start: sends the exec and returns at once; the run goes on
 * through kotoba_conn_process().  The callbacks in @opts are kept (the
 * struct itself need not outlive the call; what @opts->arg points to must).
 * Returns KOTOBA_OK, KOTOBA_ERR_INVALID (a run is already in flight), or a
 * local error.
 */
enum kotoba_code kotoba_exec_start(struct kotoba_client *c, const struct kotoba_exec_opts *opts,
				   struct kotoba_error *err);

/*
 * kotoba_conn_process: one step without blocking: reads what the socket
 * holds, calls the run's callbacks for each whole frame, and returns.
 * Call it whenever kotoba_conn_fd() is readable (poll's POLLIN: the fd is
 * level-triggered, one read per call).
 * @done: set true when the run is over (then it returns as kotoba_exec()
 *	would, @res filled on KOTOBA_OK), false when more is to come.
 * Returns KOTOBA_OK, or the error that ended the run (with *done true).
 */
enum kotoba_code kotoba_conn_process(struct kotoba_client *c, bool *done,
				     struct kotoba_result *res, struct kotoba_error *err);

/*
 * kotoba_answer: answers a card whose callback returned KOTOBA_CARD_DEFER.
 * Only sends: if the card has expired meanwhile, kotoba_exec() returns
 * KOTOBA_ERR_EXPIRED and the broker's no-such-card reaches on_notice.
 * Thread-safe against a kotoba_exec() in progress.
 * @choice: ONCE, ALWAYS or DENY for a run card; RERUN or LEAVE for an
 *	escalation card (the broker refuses the other kind: bad-field, through
 *	on_notice, and the card stays open).
 * Returns KOTOBA_OK, KOTOBA_ERR_INVALID (DEFER is not an answer) or
 * KOTOBA_ERR_DISCONNECTED.
 */
enum kotoba_code kotoba_answer(struct kotoba_client *c, const char *card_id,
			       enum kotoba_choice choice, struct kotoba_error *err);

/* What an `always` answer saves besides the grant itself. */
struct kotoba_grant_terms {
	size_t size;        /* set by the caller: sizeof(struct kotoba_grant_terms) */
	uint64_t for_ms;    /* the grant expires this long after the answer (wall clock); the
			     * broker cuts it to its [gate] grant_ttl; 0: as long as that allows */
	const char *scope;  /* an absolute directory: the grant covers only runs whose working
			     * directory is in it or below, by real path; NULL: any */
};

#define KOTOBA_GRANT_TERMS_INIT { .size = sizeof(struct kotoba_grant_terms) }

/*
 * kotoba_answer_always: answers a card `always` with @terms (NULL: none),
 * as kotoba_answer() does otherwise: from any thread while kotoba_exec()
 * waits, or from inside its on_card callback, which then returns
 * KOTOBA_CARD_DEFER.  A scope the broker cannot resolve to a directory is
 * refused (bad-field, through on_notice) and the card stays open.
 * Returns KOTOBA_OK, KOTOBA_ERR_INVALID or KOTOBA_ERR_DISCONNECTED.
 */
enum kotoba_code kotoba_answer_always(struct kotoba_client *c, const char *card_id,
				      const struct kotoba_grant_terms *terms,
				      struct kotoba_error *err);

/*
 * kotoba_cancel: cancels the run in flight on this connection: a waiting
 * card is withdrawn, a running snippet killed, and kotoba_exec() returns
 * KOTOBA_ERR_CANCELLED.  Thread-safe against a kotoba_exec() in progress.
 * Returns KOTOBA_OK, KOTOBA_ERR_NO_SUCH_RUN when nothing is running, or
 * KOTOBA_ERR_DISCONNECTED.
 */
enum kotoba_code kotoba_cancel(struct kotoba_client *c, struct kotoba_error *err);

/* ---- showing text to a person --------------------------------------------- */

/*
 * Text from a snippet, a client or the broker is input to the terminal
 * that shows it.  These show it as what it is: C0 controls (except newline
 * and tab), DEL, C1 controls and bytes that are not UTF-8 as `\xNN`;
 * bidirectional controls, zero-width and other invisible or format code
 * points (U+200B, U+202E, U+2066, U+FEFF, variation selectors, tags...) as
 * `<U+XXXX>`; tabs as spaces.  Nothing is dropped.
 */
#define KOTOBA_SHOW_COLOUR 1u /* ANSI attributes: escapes in reverse video, labels marked;
			       * a card's text then starts with KOTOBA_TERMINAL_RESET */
#define KOTOBA_SHOW_LINES 2u  /* kotoba_show: a newline ends the row (else it is `\x0a`) */

/*
 * KOTOBA_TERMINAL_RESET: what puts a terminal back into a state in which
 * text drawn next is seen as written, whatever a snippet printed before:
 *   ESC[?1049l ESC[?1047l ESC[?47l   the main screen (every alternate one left)
 *   ESC[!p                           soft reset (DECSTR): SGR, insert and
 *                                    origin modes, cursor, margins
 *   ESC[0m ESC[4l ESC[?6l ESC[?7h    attributes off, replace mode, absolute
 *   ESC[?5l ESC[?25h ESC[r           origin, autowrap on; normal video, the
 *                                    cursor shown, the whole screen scrolls
 *   ESC(B ESC)B ESC*B ESC+B SI        every character set ASCII, G0 in use
 *   ESC[?1000l ... ESC[?1015l        mouse reporting off (1000 1002 1003
 *                                    1005 1006 1015), ESC[?2004l bracketed
 *                                    paste off, ESC[?1l ESC> normal keys,
 *   ESC[<u x4 ESC[>4m                kitty's keyboard modes popped, xterm's
 *                                    modifyOtherKeys off: typed answers
 *                                    arrive as the letters they are
 *   OSC 8 ;;                         an open hyperlink closed
 *   OSC 104, 110, 111, 112, 117, 119 the palette, foreground, background,
 *                                    cursor and highlight colours reset
 *   ESC[J                            what was left from the cursor to the end
 *                                    of the screen erased: the card's rows
 *                                    are drawn there, and nothing a snippet
 *                                    wrote beside them reads as part of them
 * Each OSC ends with ST (ESC \).  A terminal ignores what it does not
 * know.  kotoba_card_text() starts with it when given KOTOBA_SHOW_COLOUR;
 * a client that draws cards its own way writes it first, and again when
 * it is done with the terminal.  kotoba_broker.render.TERMINAL_RESET is
 * the same string.
 */
#define KOTOBA_TERMINAL_RESET                                                            \
	"\033[?1049l\033[?1047l\033[?47l\033[!p\033[0m\033[4l\033[?6l\033[?7h\033[?5l"    \
	"\033[?25h\033[r\033(B\033)B\033*B\033+B\017\033[?1000l\033[?1002l\033[?1003l"  \
	"\033[?1005l\033[?1006l\033[?1015l\033[?2004l\033[?1l\033>\033[<u\033[<u\033[<u"   \
	"\033[<u\033[>4m\033]8;;\033\\"                                                       \
	"\033]104\033\\\033]110\033\\\033]111\033\\\033]112\033\\\033]117\033\\"  \
	"\033]119\033\\\033[J"

/*
 * kotoba_show: writes @len bytes of @s to @out made safe as above.
 * Returns the columns written on the last row (for padding a table).
 */
size_t kotoba_show(FILE *out, const char *s, size_t len, unsigned flags);

/*
 * kotoba_show_receipt: writes what the sandbox refused, e.g. `kotoba: the
 * sandbox stopped 2 operations: exec /bin/sh (exec gate), read
 * /home/ada/.ssh/id_ed25519 (secret)`, every string made safe by
 * kotoba_show(); after a run that exited 0, quietly: `kotoba: note: the
 * run succeeded; the sandbox refused 1 operation, which the program
 * handled: exec /usr/bin/uname (argv[0] uname) (exec gate:
 * platform.uname's processor probe)`, a known probe of a common library
 * named after its witness (proto/probes.h).  Entries only
 * the snippet's own interpreter reported (seen_by "python") are not the
 * sandbox's record, and go on a line of their own: `kotoba: the snippet
 * itself claims 1 operation was refused (its own report, which no
 * witness outside it saw): bind 127.0.0.1:8080 (seccomp)`; then, when the
 * receipt was capped, `kotoba: and N more refusals, past what a receipt
 * lists`.  Nothing when
 * nothing was refused.  Returns the number of refusals (blocked_total).
 */
uint64_t kotoba_show_receipt(FILE *out, const struct kotoba_result *res, unsigned flags);

/*
 * kotoba_mime_type: a file's type read from its first bytes, never from its
 * name: "image/png", "image/jpeg", "image/gif", "image/webp",
 * "image/svg+xml" (text that starts, after an XML declaration, comments
 * or a doctype, with an <svg element), else "application/octet-stream".
 */
const char *kotoba_mime_type(const void *data, size_t len);

/*
 * kotoba_card_text: the whole card as text for a terminal @width columns
 * wide (0: never wrap): why it is asked, the labels, the working directory,
 * time limit, limits and kept environment, a note counting the characters
 * shown escaped, then every line of the snippet with its number (a line
 * wider than the screen continues on rows marked `+`, never cut), then the
 * three options in the spec's words.  No row is wider than @width (from
 * 20 columns, and as wide characters are counted: two for East Asian wide
 * ones and emoji, none for combining marks), so a caller that pages the
 * text by rows shows all of it.
 * @flags: KOTOBA_SHOW_COLOUR or 0.
 * Returns a NUL-terminated string to free(), or NULL when out of memory.
 */
char *kotoba_card_text(const struct kotoba_card *card, unsigned width, unsigned flags);

/*
 * kotoba_duration_text: a duration as a person and the broker's config
 * write it, in the largest unit that divides @ms: "8h", "90m", "45s",
 * "250ms", "2d".  Writes at most @len bytes, NUL-terminated.
 */
void kotoba_duration_text(uint64_t ms, char *out, size_t len);

/* ---- grants and audit ------------------------------------------------------ */

#define KOTOBA_GRANTS_MAX 16
#define KOTOBA_AUDIT_MAX 256

/* A saved grant of the calling user (the broker shows nobody else's). */
struct kotoba_grant {
	size_t size;          /* set by the caller: sizeof(struct kotoba_grant) */
	char family[256];     /* "execute_code" */
	int64_t saved_at_ms;  /* Unix epoch milliseconds */
	char card[256];       /* the card whose `always` saved it */
	uint64_t use_count;
	int64_t last_used_ms; /* 0 when never used */
	int64_t expires_ms;   /* Unix epoch milliseconds, by the broker's clock; 0: until revoked */
	bool expired;         /* past expires_ms: it covers nothing, cards come back */
	char scope[4096];     /* covers runs in this directory or below; "": any */
};

/*
 * kotoba_grants: lists the caller's saved grants.
 * @rows, @max: where to put them (KOTOBA_GRANTS_MAX rows always suffice);
 *	rows[0].size says the size of each row.
 * @n: receives the number of rows written.
 */
enum kotoba_code kotoba_grants(struct kotoba_client *c, struct kotoba_grant *rows, size_t max,
			       size_t *n, struct kotoba_error *err);

/*
 * kotoba_revoke: revokes the caller's grant of @family ("execute_code").
 * The next snippet is decided without it.  Succeeds also when there was
 * none; @message (may be NULL) receives the broker's sentence saying which.
 */
enum kotoba_code kotoba_revoke(struct kotoba_client *c, const char *family, char *message,
			       size_t message_len, struct kotoba_error *err);

/* One row of the caller's audit trail (PROTOCOL.md, `audit_rows`). */
struct kotoba_audit_row {
	size_t size;          /* set by the caller: sizeof(struct kotoba_audit_row) */
	uint64_t seq;
	int64_t time_ms;
	uint64_t run;
	int64_t pid;          /* the client's */
	char event[16];       /* "decision", "exit", "connect" or "grant" (it expired) */
	char sha256[65];      /* hex of the snippet */
	char labels[256];     /* comma-separated */
	char mode[8];
	char decision[16];    /* "ran", "card", "denied", "expired", "refused", ... */
	char approver[16];
	char profile[16];     /* "" when nothing ran */
	bool has_exit;        /* the fields below are valid */
	int64_t exit_code, signal, duration_ms;
	bool timed_out;
	/* Added after timed_out: an exit row's receipt, how many refusals
	 * (0: none); kotoba_audit_show() gives the list. */
	uint64_t blocked_total;
	/* Added after blocked_total: on the rows of an escalation (its card,
	 * how it ended, the re-run's exit), the seq of the first run's exit
	 * row; 0: none. */
	uint64_t after;
	/* Added after after: an exit row's traffic through the egress proxy,
	 * how many hosts and ports (0: none) and the bytes out and in over
	 * all of them; kotoba_audit_network() gives each host's. */
	uint64_t net_hosts, net_bytes_out, net_bytes_in;
};

/*
 * kotoba_audit_tail: the caller's newest audit rows, oldest first.
 * @rows, @max: asks for @max rows (1 to KOTOBA_AUDIT_MAX) and has room for
 *	them; rows[0].size says the size of each row.
 * @n: receives the number of rows written.
 */
enum kotoba_code kotoba_audit_tail(struct kotoba_client *c, struct kotoba_audit_row *rows,
				   size_t max, size_t *n, struct kotoba_error *err);

/*
 * kotoba_audit_show: the caller's audit row number @seq (as kotoba_audit_tail
 * shows it) and, for an exit row, its receipt: what the sandbox refused.
 * @row: filled when the row is the caller's (row->size set by the caller).
 * @found: false when there is no such row of the caller's.
 * @blocked, @max: room for the receipt's entries (at most KOTOBA_BLOCKED_MAX
 *	are kept); @n receives how many were written.  row->blocked_total
 *	says how many refusals in all.
 */
enum kotoba_code kotoba_audit_show(struct kotoba_client *c, uint64_t seq,
				   struct kotoba_audit_row *row, bool *found,
				   struct kotoba_blocked *blocked, size_t max, size_t *n,
				   struct kotoba_error *err);

/* One host and port an unattended run reached through the egress proxy
 * (AUDIT.md, `network`).  The host is the snippet's choice: show it with
 * kotoba_show(). */
#define KOTOBA_NETWORK_MAX 16
struct kotoba_net_use {
	char host[256];       /* "host:port", "[v6]:port"; "*": every host past the first 15 */
	char methods[64];     /* "GET,HEAD": each once; "CONNECT" for a tunnel */
	uint64_t requests;    /* requests sent upstream */
	uint64_t bytes_out;   /* to the host */
	uint64_t bytes_in;    /* from it, to the run */
};

/*
 * kotoba_audit_network: the traffic of the caller's exit row @seq through
 * the egress proxy, host by host.
 * @found: false when there is no such row of the caller's.
 * @use, @max: room for the entries (at most KOTOBA_NETWORK_MAX); @n
 *	receives how many were written (0: the run sent nothing through it).
 */
enum kotoba_code kotoba_audit_network(struct kotoba_client *c, uint64_t seq,
				      struct kotoba_net_use *use, size_t max, size_t *n,
				      bool *found, struct kotoba_error *err);

/*
 * kotoba_audit_verify: walks the whole hash chain of the audit trail.
 * Returns KOTOBA_OK with the broker's sentence in @message (may be NULL),
 * or KOTOBA_ERR_AUDIT_BROKEN with err->message naming the first bad row.
 */
enum kotoba_code kotoba_audit_verify(struct kotoba_client *c, char *message, size_t message_len,
				     struct kotoba_error *err);

/* ---- names -------------------------------------------------------------------- */

/* kotoba_code_name: "ok", the protocol's code ("denied"...), or a local word. */
const char *kotoba_code_name(enum kotoba_code code);
/* kotoba_choice_name: "once", "always", "deny", "rerun", "leave", or "defer". */
const char *kotoba_choice_name(enum kotoba_choice choice);

#ifdef __cplusplus
}
#endif
#endif
