/* SPDX-License-Identifier: MIT
 * kotoba-broker wire protocol v1: framing, limits and every message of both
 * links (client <-> broker, broker <-> worker).  proto/PROTOCOL.md is the
 * normative description; this header mirrors it.  Nothing outside proto/
 * reads or writes msgpack.
 *
 * Strings and byte strings in decoded messages point into the frame buffer
 * they were decoded from: they stay valid until that buffer is reused.
 */
#ifndef KOTOBA_PROTO_H
#define KOTOBA_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/names.h"

#define PROTO_VERSION 1
#define PROTO_HEADER_LEN 4
#define PROTO_FRAME_MAX_DEFAULT (4u << 20)   /* 4 MiB, header excluded */
#define PROTO_SNIPPET_MAX_DEFAULT (1u << 20) /* 1 MiB of UTF-8 source */
#define PROTO_DEPTH_MAX 8                    /* nesting of maps/arrays */
#define PROTO_ENV_MAX 64                     /* env entries in exec/job */
#define PROTO_GROUPS_MAX 64                  /* supplementary groups */
#define PROTO_LABELS_MAX 16
#define PROTO_CARD_LIMITS_MAX 8              /* limits named on a card */
#define PROTO_ROWS_MAX 256                   /* rows in a list answer */
#define PROTO_ARGV_MAX 96                    /* arguments of one engine command */
#define PROTO_ARG_MAX 8192                   /* bytes of one of them (python3's -c) */
/* Files a run leaves in $KOTOBA_OUTPUT_DIR that go back to the client
 * (PROTOCOL.md, "file"): at most this many, each at most FILE_MAX bytes
 * (a frame's room under the default max_frame), FILES_TOTAL in all; a
 * name of 1-FILE_NAME_MAX bytes. */
#define PROTO_FILES_MAX 16
#define PROTO_FILE_MAX (2u << 20)
#define PROTO_FILES_TOTAL (8u << 20)
#define PROTO_FILE_NAME_MAX 255
#define PROTO_STEPS_MAX 4                    /* engine commands before the snippet */
#define PROTO_SECRETS_MAX 64                 /* entries of job.secrets */
#define PROTO_MASKS_KEY_LEN 32               /* job.masks, masks.key: a SHA-256 */
#define PROTO_MOUNTS_MAX (1u << 20)          /* job.mounts: the mount table's text */
#define PROTO_BLOCKED_MAX 16                 /* entries of a receipt (exit.blocked) */
#define PROTO_BLOCKED_TARGET_MAX 255         /* bytes of one entry's target */
/* An engine step's argument the worker replaces with one mask argument
 * per secret of the working directory (PROTOCOL.md, "job"). */
#define PROTO_SECRET_MASKS_ARG "{secret-masks}"
/* The engine's `outputs` argument the worker replaces with the path of
 * the run's output directory on the host (PROTOCOL.md, "job"). */
#define PROTO_OUTPUT_DIR_ARG "{output-dir}"

/* Error codes carried by `error` frames (PROTOCOL.md, "Error codes"), by
 * the name they have in the table of proto/names.h. */
#define PERR_TOO_LARGE perr_name(PE_TOO_LARGE)
#define PERR_BAD_MSGPACK perr_name(PE_BAD_MSGPACK)
#define PERR_BAD_UTF8 perr_name(PE_BAD_UTF8)
#define PERR_BAD_FIELD perr_name(PE_BAD_FIELD)
#define PERR_UNKNOWN_TYPE perr_name(PE_UNKNOWN_TYPE)
#define PERR_BAD_STATE perr_name(PE_BAD_STATE)
#define PERR_ID_IN_USE perr_name(PE_ID_IN_USE)
#define PERR_VERSION perr_name(PE_VERSION)
#define PERR_SNIPPET_TOO_LARGE perr_name(PE_SNIPPET_TOO_LARGE)
#define PERR_BAD_CWD perr_name(PE_BAD_CWD)
#define PERR_BUSY perr_name(PE_BUSY)
#define PERR_NOT_OFFERED perr_name(PE_NOT_OFFERED)
#define PERR_REFUSED perr_name(PE_REFUSED)
#define PERR_FROM_A_RUN perr_name(PE_FROM_A_RUN)
#define PERR_NO_SUCH_RUN perr_name(PE_NO_SUCH_RUN)
#define PERR_NO_SUCH_CARD perr_name(PE_NO_SUCH_CARD)
#define PERR_SETUP_FAILED perr_name(PE_SETUP_FAILED)
#define PERR_CANCELLED perr_name(PE_CANCELLED)
#define PERR_DENIED perr_name(PE_DENIED)
#define PERR_EXPIRED perr_name(PE_EXPIRED)
#define PERR_AUDIT perr_name(PE_AUDIT)
#define PERR_AUDIT_BROKEN perr_name(PE_AUDIT_BROKEN)
#define PERR_WORKER_LOST perr_name(PE_WORKER_LOST)
#define PERR_TOO_SLOW perr_name(PE_TOO_SLOW)
#define PERR_QUOTA perr_name(PE_QUOTA)
#define PERR_INTERNAL perr_name(PE_INTERNAL)

/* A length-counted byte string; for msgpack str it is valid UTF-8 but not
 * NUL-terminated. */
struct pstr {
	const char *ptr;
	size_t len;
};


/* ---- framing (proto/frame.c) -------------------------------------------- */

/* Incremental reader for a stream socket.  The 4-byte length is checked
 * against `max` before any payload memory is allocated. */
struct frame_reader {
	uint8_t *buf;
	size_t len;  /* bytes held */
	size_t cap;
	size_t max;  /* payload limit */
	size_t used; /* bytes of the last frame returned, dropped on next call */
};

void frame_reader_init(struct frame_reader *r, size_t max);
void frame_reader_free(struct frame_reader *r);
/* Reads what is available from a non-blocking fd.  Returns bytes read,
 * 0 at EOF, -EAGAIN when nothing was there, or another -errno. */
ssize_t frame_reader_fill(struct frame_reader *r, int fd);
/* Returns 1 with the next complete payload, 0 when more bytes are needed,
 * -EMSGSIZE when the header announces more than r->max (framing is lost). */
int frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *len);
/* True when the reader holds a partial frame (used to report truncation). */
bool frame_reader_partial(const struct frame_reader *r);

/* One frame that arrived as one datagram of n bytes (SOCK_SEQPACKET;
 * n as recv(MSG_TRUNC) reports it, so it may exceed what was read): 0 with
 * the payload, -EMSGSIZE when over max, -EPROTO when shorter than a
 * header or when the header's length is not the datagram's. */
int frame_parse_datagram(const uint8_t *buf, size_t n, size_t max, const uint8_t **payload,
			 size_t *len);
/* Reads exactly one frame from a blocking fd (stream or seqpacket).
 * Returns payload length, 0 at clean EOF, -errno on error (-EMSGSIZE when
 * over max, -EPROTO when truncated).  *buf is malloc'd; caller frees. */
ssize_t frame_read_blocking(int fd, size_t max, uint8_t **buf);
/* The same, and on a seqpacket socket the one descriptor that came with
 * the frame (SCM_RIGHTS) into *passed, -1 when none; a frame with more
 * than one is -EPROTO. */
ssize_t frame_read_blocking_fd(int fd, size_t max, uint8_t **buf, int *passed);
/* Writes a whole buffer to a blocking fd, retrying on EINTR. */
int write_all(int fd, const void *buf, size_t len);
/* The same on a socket with MSG_NOSIGNAL: a peer that went away is an
 * EPIPE to handle, not a SIGPIPE that kills the caller (a library's host). */
int send_all(int fd, const void *buf, size_t len);

/* ---- encoding (proto/messages.c, proto/encode_util.c) -------------------- */

/* An encoded frame, header included, ready to write. */
struct frame {
	uint8_t *data;
	size_t len;
};
void frame_free(struct frame *f);
/* One message on a socket (MSG_NOSIGNAL) carrying fds[0..n) as
 * SCM_RIGHTS (n at most SEND_FDS_MAX; 0: none): bytes sent or -errno. */
#define SEND_FDS_MAX 5
ssize_t send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n);
/* One frame so, with fd unless it is -1: 0 or -errno. */
int frame_send_fd(int sock, const struct frame *f, int fd);
/* One datagram into buf (recvmsg with flags | MSG_TRUNC: the result is
 * its whole length) and the one descriptor that came with it into *passed:
 * -1 when none, -EPROTO when more than one came (all of them closed).
 * -errno when nothing could be read. */
ssize_t frame_recv_fd(int sock, uint8_t *buf, size_t len, int flags, int *passed);

/* ---- messages (proto/messages.c) ---------------------------------------- */

enum msg_type {
	MSG_UNKNOWN = 0,
	/* client -> broker */
	MSG_HELLO,
	MSG_EXEC,
	MSG_ANSWER,
	MSG_CANCEL,
	MSG_GRANTS,
	MSG_REVOKE,
	MSG_AUDIT,
	/* broker -> client */
	MSG_WELCOME,
	MSG_STARTED,
	MSG_OUTPUT,
	MSG_EXIT,
	MSG_CARD,
	MSG_GRANT_LIST,
	MSG_AUDIT_ROWS,
	MSG_OK,
	MSG_ERROR,
	MSG_QUEUED,
	MSG_FILE,
	/* broker -> worker */
	MSG_JOB,
	MSG_GO,
	/* worker -> broker */
	MSG_READY,
	MSG_SETUP_ERROR,
	MSG_FINISHED,
	MSG_MASKS,
	MSG_WARM,
	MSG_OUTPUT_FILE,
	MSG_TYPE_COUNT
};

const char *msg_type_name(enum msg_type t);

/* Where a decode or encode failed: a code from the list above and a
 * sentence for the peer, and what of the frame could be read: its type
 * (MSG_UNKNOWN when not) and its `id`, so that the answer can carry it. */
struct proto_error {
	const char *code;
	char message[200];
	enum msg_type type;
	bool has_id;
	uint64_t id;
};

/* The seven pre-screen labels, in their canonical order, NULL-terminated. */
extern const char *const proto_labels[];

struct msg_hello {
	uint64_t version; /* highest version the client speaks */
	bool channel;     /* the client can show approval cards */
	bool escalate;    /* ... and escalation cards (optional; sent only when true) */
	bool mcp;         /* the client is the MCP front, whose cards an agent host
			   * relays (optional; sent only when true) */
	struct pstr client; /* free-form client name, may be empty */
};

struct msg_welcome {
	uint64_t version;
	char broker[48];        /* "kotoba-brokerd/x.y" */
	const char *mode;       /* "local" | "docker" | "none" */
	bool execute_code;      /* the tool is offered */
	uint64_t max_frame, max_snippet, max_timeout_ms;
};

struct env_pair {
	struct pstr name, value;
};

struct msg_exec {
	uint64_t id;
	struct pstr code;
	struct pstr cwd;          /* absolute path; len 0 = not given */
	uint64_t timeout_ms;      /* 0 = broker default */
	size_t n_env;
	struct env_pair env[PROTO_ENV_MAX];
};

struct msg_started {
	uint64_t id;
	enum proto_profile profile; /* one of PROFILES_RAN */
	enum proto_approver approver;
};

struct msg_output {
	uint64_t id;
	const char *stream; /* "stdout" | "stderr" */
	const uint8_t *data;
	size_t len;
};

/* One file the snippet left in its output directory; name checked by
 * proto_file_name_ok. */
struct msg_file {
	uint64_t id;
	struct pstr name;
	const uint8_t *data;
	size_t len;
};

/* A name a file may be saved under in any directory: 1-PROTO_FILE_NAME_MAX
 * bytes of UTF-8 (the decoder checked), no '/', no control character, not
 * "." or "..".  The one check, for the worker, the decoder and clients. */
bool proto_file_name_ok(const char *name, size_t len);

/* How a snippet ended, shared by `finished` (worker) and `exit` (client). */
struct run_result {
	bool exited;          /* true: code is valid; false: signal is */
	int64_t code;
	int64_t signal;
	bool timed_out;
	const char *limit;    /* "", "cpu", "wall", "file-size"... */
	uint64_t duration_us;
	uint64_t cpu_us;
	uint64_t max_rss_kb;
};

/* One kind of refused operation on one target (PROTOCOL.md, "exit").
 * The target is owned here, so a receipt is copied as a whole. */
struct blocked_op {
	enum proto_block_kind kind;
	enum proto_blocker by;
	enum proto_witness seen_by;
	bool inferred;  /* `by` follows from the profile, not from the kernel's word */
	uint64_t count; /* >= 1 */
	char target[PROTO_BLOCKED_TARGET_MAX + 1]; /* UTF-8, no NUL, NUL-terminated */
};

/* What the sandbox refused in one run: the first PROTO_BLOCKED_MAX
 * operations in the order first seen, and how many refusals in all. */
struct receipt {
	uint64_t total; /* every refusal counted, past the cap too; 0: none */
	size_t n;
	struct blocked_op op[PROTO_BLOCKED_MAX];
};

/* What a run sent through the egress proxy, per host and port (the
 * audit trail's exit row; AUDIT.md, `blocked`): at most PROTO_NETWORK_MAX
 * entries, the last `*` for every host past the others. */
#define PROTO_NETWORK_MAX 16
#define PROTO_NETWORK_METHODS_MAX 63
struct net_use {
	char host[PROTO_BLOCKED_TARGET_MAX + 1];       /* "host:port", "[v6]:port", "*" */
	char methods[PROTO_NETWORK_METHODS_MAX + 1];  /* "GET,HEAD": each once */
	uint64_t requests;  /* requests sent upstream (a tunnel's: not seen, 0) */
	uint64_t bytes_out; /* to the host */
	uint64_t bytes_in;  /* from it, to the run */
};
struct network {
	size_t n;
	struct net_use use[PROTO_NETWORK_MAX];
};

struct msg_exit {
	uint64_t id;
	struct run_result r;
	struct receipt blocked;
	bool truncated;          /* either stream was capped */
	uint64_t output_limit;   /* the cap, bytes per stream ([limits] output); sent
				  * with truncated only; 0: not given */
	enum proto_profile profile;   /* one of PROFILES_RAN */
	enum proto_decision decision; /* DECISION_RAN */
	enum proto_approver approver;
	size_t n_labels;
	const char *labels[PROTO_LABELS_MAX];
	const char *where;       /* "host" | "container" */
	struct pstr container;   /* with "container": the container's name */
	const char *secrets;     /* "masked" | "off" | "unmasked"; NULL: not said */
	bool escalate;           /* an escalation card follows: the exec goes on */
	uint64_t files_left_out; /* output files not sent (caps, type, name); 0: none */
};

struct msg_error {
	bool has_id;
	uint64_t id;
	struct pstr code;
	struct pstr message;
	bool has_dup_id;    /* id-in-use: the id the refused request reused */
	uint64_t dup_id;
	struct pstr step;   /* setup step, for setup-failed */
	int64_t err_no;     /* errno, for setup-failed; 0 if none */
};

struct msg_cancel {
	uint64_t id;
};

/* broker -> client: the exec waits for a free slot ([quota] queue). */
struct msg_queued {
	uint64_t id;
	uint64_t position;    /* 1 = next of this user's to start */
	uint64_t timeout_ms;  /* how long it may wait before it is not run */
};

/* The family option's wording, exactly as the spec gives it. */
#define CARD_FAMILY "execute_code"
#define CARD_FAMILY_BUTTON "Always allow her to run Python"
#define CARD_FAMILY_DETAIL \
	"Any code she writes then runs on this computer without asking, until you revoke it in " \
	"Settings."

/* What a card says of the working directory's modules (PYTHON_SNIPPET_MAIN
 * appends the directory to the end of sys.path). */
#define CARD_IMPORTS \
	"the working directory's modules can be imported, after the standard library and " \
	"installed packages"

/* The detail under the family option when [gate] grant_ttl bounds a
 * grant: the spec's sentence, saying how long "until" can be at most. */
#define CARD_FAMILY_DETAIL_TTL \
	"Any code she writes then runs on this computer without asking, for %s at most, or " \
	"until you revoke it in Settings."
/* What each kind of card offers, NULL-terminated, in the card's order:
 * once, always, deny on a run card; rerun, leave on an escalation card. */
extern const char *const card_run_choices[];
extern const char *const card_escalation_choices[];
/* Whether an answer's choice is one a card of that kind offers. */
bool card_choice_fits(const char *choice, bool escalate);
/* The detail a card shows: CARD_FAMILY_DETAIL, or with a grant_ttl_ms the
 * sentence above.  Returns out. */
const char *card_family_detail(uint64_t grant_ttl_ms, char *out, size_t len);

struct card_label {
	const char *label;  /* one of proto_labels */
	uint64_t start, end; /* byte span of the first match */
	uint64_t line;       /* 1-based */
};

/* broker -> client: a person must decide.  The snippet is the label. */
struct card_limit {
	struct pstr name;   /* ends in _bytes, _s, or counts things */
	uint64_t value;
};

struct msg_card {
	uint64_t id;          /* the exec it belongs to */
	struct pstr card;     /* card id, answered by `answer` */
	struct pstr snippet;  /* the whole code */
	size_t n_labels;
	struct card_label labels[PROTO_LABELS_MAX];
	uint64_t expires_ms;  /* how long the broker waits for an answer */
	struct pstr reason;   /* why a card: "no saved grant", "labels" ... */
	/* What else decides what runs, as the run will get it (all optional
	 * for a receiver: a broker before them sent none). */
	struct pstr cwd;      /* the working directory */
	uint64_t timeout_ms;  /* the wall-clock limit in force */
	size_t n_env;         /* the client's env entries the run keeps */
	struct env_pair env[PROTO_ENV_MAX];
	size_t n_limits;      /* the other limits: name ("memory_bytes"...) and value */
	struct card_limit limits[PROTO_CARD_LIMITS_MAX];
	uint64_t grant_ttl_ms; /* the longest an `always` grant lasts; 0: until revoked */
	/* kind `escalate`: after a run under a grant that the sandbox stopped;
	 * options rerun|leave, no family, and the first run's receipt. */
	bool escalate;
	struct receipt blocked;
	uint64_t after_seq;    /* the first run's exit row in the audit trail */
};

struct msg_answer {
	bool has_id;        /* optional: then the answer itself is answered */
	uint64_t id;
	struct pstr card;
	const char *choice; /* "once" | "always" | "deny"; "rerun" | "leave" (escalation) */
	/* With "always" only: the grant's terms. */
	uint64_t for_ms;    /* it lasts this long (clamped to [gate] grant_ttl); 0: not given */
	struct pstr scope;  /* it covers runs in this directory tree; len 0: not given */
};

struct msg_grants {
	uint64_t id;
};

struct grant_info {
	struct pstr family;
	int64_t saved_at_ms;
	struct pstr card;
	uint64_t use_count;
	int64_t last_used_ms;
	int64_t expires_ms;  /* 0: until revoked (then `expired` is not sent) */
	bool expired;
	struct pstr scope;   /* len 0: everywhere (not sent) */
};

struct msg_grant_list {
	uint64_t id;
	size_t n;
	struct grant_info rows[16];
};

struct msg_revoke {
	uint64_t id;
	struct pstr family;
};

struct msg_audit {
	uint64_t id;
	const char *op; /* "tail" | "verify" | "show" */
	uint64_t max;   /* rows for tail */
	uint64_t seq;   /* the row for show */
};

struct audit_info {
	uint64_t seq;
	int64_t time_ms;
	uint64_t run;
	int64_t pid;
	const char *event;    /* "decision" | "exit" */
	struct pstr sha256;
	struct pstr labels;   /* comma-separated */
	const char *mode;
	enum proto_decision decision;
	enum proto_approver approver;
	enum proto_profile profile; /* one of PROFILES_AUDIT */
	bool has_exit;
	int64_t exit_code, signal, duration_ms;
	bool timed_out;
	uint64_t blocked_total;  /* an exit row's receipt: refusals in all; 0: none */
	bool has_blocked;        /* this row carries the list: msg_audit_rows.blocked */
	/* An exit row's traffic through the egress proxy: hosts (0: none),
	 * and the bytes out and in over all of them. */
	uint64_t net_hosts, net_bytes_out, net_bytes_in;
	bool has_network;        /* this row carries the list: msg_audit_rows.network */
	uint64_t after;          /* an escalation's row: the first run's exit row; 0: none */
};

struct msg_audit_rows {
	uint64_t id;
	size_t n;
	struct audit_info rows[PROTO_ROWS_MAX];
	/* The receipt's list, on at most one row (the answer to `show`). */
	struct receipt blocked;
	/* The same row's traffic, host by host. */
	struct network network;
};

struct msg_ok {
	uint64_t id;
	struct pstr message;
};

/* broker -> worker: everything the worker needs; it reads nothing else. */
struct job_limits {
	uint64_t cpu_s, as_bytes, nproc, fsize_bytes, nofile;
};

/* sandbox = docker: a command line of the container engine's CLI; v[0]
 * is its absolute path. */
struct job_argv {
	size_t n;
	struct pstr v[PROTO_ARGV_MAX];
};

struct job_step {
	struct pstr name;        /* the setup step a failure reports as */
	struct job_argv argv;
};

/* What the worker runs instead of python3 when the snippet runs in a
 * container (PROTOCOL.md, "job"): each command in its own confined child,
 * as the snippet's user, under the "engine" profile. */
struct job_engine {
	size_t n_steps;
	struct job_step steps[PROTO_STEPS_MAX]; /* in order, before the snippet */
	struct job_argv run;     /* exec'd instead of python3; the memfd is its stdin */
	struct job_argv kill;    /* after a timeout, a cancel or an exit of 137 */
	struct job_argv oom;     /* after an exit of 137: prints the OOM-kill count */
	struct job_argv outputs; /* after a snippet that ended by itself: copies the
				  * container's output directory (0 arguments: none) */
};

/* How a snippet ends (PYTHON_SNIPPET_MAIN's r): as python3 would end it,
 * without the interpreter's teardown of every module, which costs
 * milliseconds the client would wait for.  r runs the code in __main__'s
 * namespace; a normal end, a SystemExit with an int or None, and an
 * uncaught Exception (sys.excepthook prints it, status 1) then take
 * Py_FinalizeEx's observable steps in its order: non-daemon threads are
 * joined (threading._shutdown), atexit handlers run, sys.stdout and
 * sys.stderr are flushed; __main__'s names are cleared as the interpreter
 * clears a module (single-underscore names first), so what only the
 * snippet's names held is finalized (an unclosed file closed, a ZipFile's
 * directory written); a collection finalizes the cycles; every open
 * TextIOWrapper, then every BufferedWriter and BufferedRandom still alive
 * is flushed; then os._exit with the status.  gc.freeze() before the code
 * keeps that collection and scan to the objects the snippet made.  Any
 * other end (SystemExit with a message, KeyboardInterrupt), or a failure
 * of those steps, goes back to the interpreter's own end: the same
 * SystemExit re-raised.  r has globals of its own: the names the snippet
 * defines shadow none of the builtins it calls.  README, "How a run
 * ends", says what differs. */
#define PYTHON_SNIPPET_END                                                               \
	"def r(c, g, os=os, sys=sys):\n"                                                \
	"    try:\n"                                                                     \
	"        exec(c, g)\n"                                                           \
	"        s = 0\n"                                                                \
	"    except SystemExit as e:\n"                                                  \
	"        s = 0 if e.code is None else e.code\n"                                  \
	"        if not isinstance(s, int) or not -2**31 <= s < 2**31:\n"                \
	"            raise\n"                                                            \
	"    except Exception:\n"                                                        \
	"        t, v, tb = sys.exc_info()\n"                                             \
	"        sys.last_type, sys.last_value, sys.last_traceback = t, v, tb\n"         \
	"        sys.excepthook(t, v, tb)\n"                                              \
	"        del t, v, tb\n"                                                         \
	"        s = 1\n"                                                                \
	"    del c\n"                                                                    \
	"    try:\n"                                                                     \
	"        t = sys.modules.get('threading')\n"                                     \
	"        t and t._shutdown()\n"                                                  \
	"        __import__('atexit')._run_exitfuncs()\n"                                \
	"        for f in (sys.stdout, sys.stderr):\n"                                    \
	"            f is None or f.closed or f.flush()\n"                               \
	"        for p in (lambda k: k[:1] == '_' and k[1:2] != '_',\n"                   \
	"                  lambda k: k != '__builtins__'):\n"                             \
	"            for k in [k for k, v in g.items() if v is not None and\n"           \
	"                      type(k) is str and p(k)]:\n"                              \
	"                g[k] = None\n"                                                  \
	"        gc, io = __import__('gc'), __import__('io')\n"                          \
	"        gc.collect()\n"                                                         \
	"        w = [f for f in gc.get_objects() if issubclass(type(f), (io.TextIOWrapper,\n" \
	"             io.BufferedWriter, io.BufferedRandom))]\n"                          \
	"        for f in [f for f in w if issubclass(type(f), io.TextIOWrapper)] + w:\n"  \
	"            try:\n"                                                             \
	"                f.closed or f.flush()\n"                                        \
	"            except Exception:\n"                                                \
	"                pass\n"                                                         \
	"        for f in (sys.stdout, sys.stderr):\n"                                    \
	"            f is None or f.closed or f.flush()\n"                               \
	"    except BaseException:\n"                                                    \
	"        raise SystemExit(s)\n"                                                  \
	"    os._exit(s)\n"                                                              \
	"r = type(r)(r.__code__, {'__builtins__': __builtins__}, 'r', r.__defaults__)\n"

/* python3's arguments after its name, for every snippet, on the host and
 * in a container.  -I (isolated): no PYTHON* variable is read, no user
 * site directory is processed, and neither the working directory nor a
 * script's is on sys.path, so nothing the card does not show (a
 * sitecustomize.py, a .pth file, a json.py in the working directory)
 * runs before or around the code.  -B: no .pyc written.  -u: output
 * streams as it is written (the flag, since -I ignores PYTHONUNBUFFERED).
 *
 * The code comes on stdin; PYTHON_SNIPPET_MAIN, a constant, reads and
 * runs it as `python3 -` would (in __main__, named "<stdin>", argv ['-'],
 * the same uncaught tracebacks: its own frames are dropped; only a stack
 * the snippet prints itself, traceback.print_stack(), shows the frames
 * `File "<string>"` of this constant), after one step -I leaves out: the
 * user's site-packages directory (~/.local/lib/python3.X/site-packages),
 * where the person's own `pip install --user` packages are, goes at the
 * END of sys.path, as a plain directory.  So those packages import, while
 * nothing there runs unasked: its .pth files and usercustomize.py are not
 * processed (site never sees it as a site directory), sitecustomize was
 * looked for before it was on the path, and being last it can shadow
 * neither the standard library nor the system's packages.  Last of all,
 * just before the code runs (a warm job: after its preload list, so no
 * module there is found by a preloaded package's optional import), the
 * working directory joins the END of sys.path too, as its absolute path:
 * the modules an agent wrote there import (`from helpers import f`), and a
 * json.py there is still not `json`; nothing there runs before the code.
 * With the receipt's arguments (below) it first runs the receipt's
 * wrappers.  First of all, when the run has an output directory and the
 * client's env sets no MPLBACKEND, matplotlib's plt.show() saves each open
 * figure there as figure-N.png (the first free N: never over a name) and
 * closes them: MPLBACKEND names a backend module made here in sys.modules
 * (-I keeps any module on disk off the path), which imports matplotlib
 * only when matplotlib asks it for its canvas, so a run that does not use
 * matplotlib does not import it.  The name is in os.environ only, not in
 * the process's environment (os.unsetenv): a program the snippet starts,
 * a python3 that has no such module, inherits no MPLBACKEND.  The code
 * runs in r (PYTHON_SNIPPET_END), which ends the run. */
#define PYTHON_SNIPPET_MAIN                                                              \
	"import os, site, sys\n"                                                         \
	"if 'MPLBACKEND' not in os.environ and 'KOTOBA_OUTPUT_DIR' in os.environ:\n"     \
	"    os.environ['MPLBACKEND'] = 'module://_kotoba_figures'\n"                    \
	"    os.unsetenv('MPLBACKEND')\n"                                                \
	"    sys.modules['_kotoba_figures'] = type(sys)('_kotoba_figures')\n"            \
	"    exec('''def show(*a, **k):\n"                                               \
	"    import os\n"                                                                \
	"    from matplotlib._pylab_helpers import Gcf\n"                                \
	"    d, i = os.environ['KOTOBA_OUTPUT_DIR'], 1\n"                                \
	"    for f in sorted(Gcf.get_all_fig_managers(), key=lambda f: f.num):\n"        \
	"        while True:\n"                                                          \
	"            try:\n"                                                             \
	"                o = open(os.path.join(d, 'figure-%d.png' % i), 'xb')\n"         \
	"            except FileExistsError:\n"                                          \
	"                i += 1\n"                                                       \
	"                continue\n"                                                     \
	"            with o:\n"                                                          \
	"                f.canvas.figure.savefig(o, format='png')\n"                     \
	"            break\n"                                                            \
	"    Gcf.destroy_all()\n"                                                        \
	"def __getattr__(n):\n"                                                          \
	"    if n != 'FigureCanvas':\n"                                                  \
	"        raise AttributeError(n)\n"                                              \
	"    from matplotlib.backends.backend_agg import FigureCanvasAgg\n"              \
	"    globals()[n] = FigureCanvasAgg\n"                                           \
	"    return FigureCanvasAgg\n"                                                   \
	"''', vars(sys.modules['_kotoba_figures']))\n"                                   \
	"a = sys.argv[1:]\n"                                                             \
	"if a[1:] and a[1]:\n"                                                           \
	"    try:\n"                                                                     \
	"        exec(sys.modules['_frozen_importlib_external'].SourceFileLoader(\n"      \
	"            'kotoba_receipt', a[1]).get_code('kotoba_receipt'),\n"              \
	"            {'fd': int(a[0])})\n"                                               \
	"    except Exception:\n"                                                        \
	"        pass\n"                                                                 \
	"for m in ','.join(a[2:]).split(','):\n"                                        \
	"    try:\n"                                                                     \
	"        m and __import__(m)\n"                                                  \
	"    except Exception:\n"                                                        \
	"        pass\n"                                                                 \
	"if a[2:]:\n"                                                                    \
	"    import _socket\n"                                                           \
	"d = site.getusersitepackages()\n"                                               \
	"if os.path.isdir(d):\n"                                                         \
	"    sys.path.append(d)\n"                                                       \
	"def h(t, v, tb, hook=sys.excepthook):\n"                                        \
	"    while tb is not None and tb.tb_frame.f_code.co_filename == '<string>':\n"  \
	"        tb = tb.tb_next\n"                                                     \
	"    hook(t, v.with_traceback(tb), tb)\n"                                        \
	"sys.excepthook = h\n"                                                           \
	PYTHON_SNIPPET_END                                                               \
	"if a[2:]:\n"                                                                    \
	"    m = _socket.socket(fileno=0)\n"                                             \
	"    m.send(b'w')\n"                                                             \
	"    c = [int.from_bytes(x[2][:4], sys.byteorder) for x in\n"                    \
	"         m.recvmsg(1, _socket.CMSG_LEN(4))[1]\n"                                 \
	"         if x[:2] == (_socket.SOL_SOCKET, _socket.SCM_RIGHTS) and len(x[2]) >= 4]\n" \
	"    m.detach()\n"                                                               \
	"    if not c:\n"                                                                \
	"        os._exit(0)\n"                                                          \
	"    os.dup2(c[0], 0)\n"                                                         \
	"    os.close(c[0])\n"                                                           \
	"    import io\n"                                                                \
	"    c = io.FileIO(0, 'rb', closefd=False)\n"                                    \
	"    c.name = '<stdin>'\n"                                                       \
	"    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(c),\n"       \
	"        sys.stdin.encoding, sys.stdin.errors, '\\n')\n"                          \
	"    sys.stdin.mode = 'r'\n"                                                     \
	"    del _socket, io\n"                                                           \
	"try:\n"                                                                         \
	"    sys.path.append(os.getcwd())\n"                                              \
	"except OSError:\n"                                                              \
	"    pass\n"                                                                     \
	"sys.argv[:] = ['-']\n"                                                          \
	"__file__, __cached__ = '<stdin>', None\n"                                       \
	"c = compile(sys.stdin.buffer.read(), '<stdin>', 'exec', dont_inherit=True)\n"   \
	"__import__('gc').freeze()\n"                                                    \
	"del os, site, sys, d, h, a, m\n"                                                \
	"globals().pop('r')(globals().pop('c'), globals())\n"
#define PYTHON_SNIPPET_FLAGS "-I", "-B", "-u", "-c"
#define PYTHON_SNIPPET_ARGV PYTHON_SNIPPET_FLAGS, PYTHON_SNIPPET_MAIN

/* A container's output directory: a tmpfs of its own mounted there when
 * the container starts (broker/container.c), owned by the container's
 * user.  A mount point cannot be removed or renamed, so the snippet cannot
 * put a symlink in its place: the engine's `cp`, which reads as the
 * engine (root for a rootful one) and follows a symlink there, copies
 * this directory and nothing it names (PROTO_OUTPUT_DIR_ARG on the host). */
#define CONTAINER_OUT_DIR "/tmp/.kotoba-out"
/* What a container's python3 runs before PYTHON_SNIPPET_MAIN: it empties
 * the output directory of what earlier runs in the same container left
 * there (a container serves one run at a time: no other run uses it),
 * first giving its owner rwx back.  Every removal goes by directory
 * descriptors and never follows a symlink (os.fwalk), so a symlink an
 * earlier snippet put there leads nowhere.  What cannot go (a directory
 * an earlier snippet made unreadable) is never sent: only regular files
 * directly in the directory are.  Its names are deleted before MAIN runs. */
#define PYTHON_CONTAINER_PRELUDE                                                         \
	"import os\n"                                                                    \
	"def o(d=os.environ.get('KOTOBA_OUTPUT_DIR', '')):\n"                            \
	"    if d != '" CONTAINER_OUT_DIR "':\n"                                          \
	"        return\n"                                                               \
	"    try:\n"                                                                     \
	"        os.chmod(d, 0o700)\n"                                                   \
	"    except OSError:\n"                                                          \
	"        return\n"                                                               \
	"    for e in os.scandir(d):\n"                                                  \
	"        try:\n"                                                                 \
	"            if e.is_dir(follow_symlinks=False):\n"                              \
	"                for _, ds, fs, fd in os.fwalk(e.path, topdown=False):\n"        \
	"                    for f in fs:\n"                                             \
	"                        os.unlink(f, dir_fd=fd)\n"                              \
	"                    for f in ds:\n"                                             \
	"                        try:\n"                                                 \
	"                            os.rmdir(f, dir_fd=fd)\n"                           \
	"                        except NotADirectoryError:\n"                           \
	"                            os.unlink(f, dir_fd=fd)\n"                          \
	"                os.rmdir(e.path)\n"                                             \
	"            else:\n"                                                            \
	"                os.unlink(e.path)\n"                                            \
	"        except OSError:\n"                                                      \
	"            pass\n"                                                             \
	"o()\n"                                                                          \
	"del os, o\n"
#define PYTHON_CONTAINER_ARGV PYTHON_SNIPPET_FLAGS, PYTHON_CONTAINER_PRELUDE PYTHON_SNIPPET_MAIN
/* In an unattended run the worker adds two arguments, the receipt pipe's fd and
 * the path of kotoba_receipt.py beside the worker (worker/receipt.c):
 * MAIN runs that file (its cached bytecode, made at build time: compiling
 * it at every start would cost more than the receipt may) before the
 * snippet.  A container's python3 gets neither, and runs no receipt.
 * A warm job adds a third, the preload list joined by ',' (empty strings
 * stand for a receipt it has not): after the receipt's wrappers (so that
 * what a module binds at import, tokenize's open, is the wrapped one),
 * MAIN imports each (one that fails to import is skipped) before the
 * user's site-packages joins sys.path, so that only the standard library
 * and the system's packages, trusted as the interpreter is, run before the
 * code; then it says so with one byte on its
 * stdin, a socket, then takes the code's memfd from it (PROTOCOL.md, "go")
 * and makes that its stdin (a new sys.stdin over it, as python3 makes one
 * at start): from there on it runs the code exactly as a cold start does. */
#define PYTHON_RECEIPT_FD 4
/* The egress proxy's address inside an unattended run's own network
 * namespace (worker/netns.c): 127.0.0.1 and this port. */
#define EGRESS_PORT 3128
#define EGRESS_PORT_STR "3128"
#define PYTHON_RECEIPT_FD_ARG "4"
#define PYTHON_RECEIPT_FILE "kotoba_receipt.py"

struct msg_job {
	enum proto_profile profile; /* one of PROFILES_JOB */
	struct pstr python;      /* absolute path of the interpreter */
	struct pstr cwd;         /* absolute */
	struct pstr scratch_base;/* directory the per-run scratch dir goes in */
	uint64_t timeout_ms, grace_ms;
	struct job_limits lim;
	bool landlock;           /* use Landlock where the kernel has it */
	/* Profile "approved" only: a network namespace of its own whose one
	 * way out is the egress proxy, as an unattended run always has
	 * ([egress] approved = proxy). */
	bool proxy;
	size_t n_env;            /* "NAME=value" strings, already scrubbed */
	struct pstr env[PROTO_ENV_MAX];
	bool has_engine;         /* profile "engine" */
	struct job_engine engine;
	/* Profile "unattended" only: the secret set to mask (PROTOCOL.md,
	 * "job"); absent when the administrator turned masking off. */
	bool has_secrets;
	size_t n_secrets;
	struct pstr secrets[PROTO_SECRETS_MAX];
	/* With secrets: the key of the masks' namespace that rides with
	 * this frame as SCM_RIGHTS (PROTOCOL.md, "masks"). */
	bool has_masks_key;
	uint8_t masks_key[PROTO_MASKS_KEY_LEN];
	/* With secrets: /proc/self/mountinfo as the broker last read it;
	 * len 0: absent (the worker reads its own). */
	struct pstr mounts;
	/* A warm job (PROTOCOL.md, "go"): python3 starts, imports these
	 * modules and waits for the code, which `go` brings. */
	bool warm;
	size_t n_preload;
	struct pstr preload[PROTO_PRELOAD_MAX];
};

/* A warm job's snippet: the code's sealed memfd rides with the frame as
 * SCM_RIGHTS; the wall clock starts now. */
struct msg_go {
	uint64_t timeout_ms;
};

/* A warm job's interpreter was exec'd as pid and waits for `go`. */
struct msg_warm {
	uint64_t pid;
};

struct msg_ready {
	uint64_t pid;
	uint64_t landlock_abi; /* 0 when not in force */
};

struct msg_setup_error {
	struct pstr step;
	int64_t err_no;
	struct pstr message;
};

struct msg_finished {
	struct run_result r;
	struct receipt blocked;
	uint64_t files_left_out; /* as in exit */
};

/* One output file, its descriptor as SCM_RIGHTS (PROTOCOL.md). */
struct msg_output_file {
	struct pstr name;
	uint64_t size;
};

/* The masks' mount namespace, as SCM_RIGHTS with the frame, and its key. */
struct msg_masks {
	uint8_t key[PROTO_MASKS_KEY_LEN];
};

/* Decodes a payload (header excluded).  Checks: exactly one msgpack map,
 * nesting <= PROTO_DEPTH_MAX, every str valid UTF-8, a known `type`, each
 * field's type and limits.  Returns the type or MSG_UNKNOWN with *err set. */
struct msg;
enum msg_type proto_decode(const uint8_t *payload, size_t len, size_t max_snippet,
			   struct msg *out, struct proto_error *err);

/* All decoded forms, one at a time. */
struct msg {
	enum msg_type type;
	bool has_id;  /* the frame's `id`, for an answer that is not the handler's */
	uint64_t id;
	union {
		struct msg_hello hello;
		struct msg_exec exec;
		struct msg_cancel cancel;
		struct msg_card card;
		struct msg_answer answer;
		struct msg_grants grants;
		struct msg_grant_list grant_list;
		struct msg_revoke revoke;
		struct msg_audit audit;
		struct msg_audit_rows audit_rows;
		struct msg_ok ok;
		struct msg_error error;
		struct msg_queued queued;
		struct msg_welcome welcome;
		struct msg_started started;
		struct msg_output output;
		struct msg_exit exit;
		struct msg_job job;
		struct msg_ready ready;
		struct msg_setup_error setup_error;
		struct msg_finished finished;
		struct msg_masks masks;
		struct msg_go go;
		struct msg_warm warm;
		struct msg_file file;
		struct msg_output_file output_file;
	} u;
};

/* Encoders: each returns 0 and a complete frame, or -errno. */
int enc_hello(struct frame *f, const struct msg_hello *m);
int enc_welcome(struct frame *f, const struct msg_welcome *m);
int enc_exec(struct frame *f, const struct msg_exec *m);
int enc_cancel(struct frame *f, const struct msg_cancel *m);
int enc_started(struct frame *f, const struct msg_started *m);
int enc_card(struct frame *f, const struct msg_card *m);
int enc_answer(struct frame *f, const struct msg_answer *m);
int enc_grants(struct frame *f, const struct msg_grants *m);
int enc_grant_list(struct frame *f, const struct msg_grant_list *m);
int enc_revoke(struct frame *f, const struct msg_revoke *m);
int enc_audit(struct frame *f, const struct msg_audit *m);
int enc_audit_rows(struct frame *f, const struct msg_audit_rows *m);
int enc_ok(struct frame *f, const struct msg_ok *m);
int enc_output(struct frame *f, const struct msg_output *m);
int enc_file(struct frame *f, const struct msg_file *m);
int enc_output_file(struct frame *f, const struct msg_output_file *m);
int enc_exit(struct frame *f, const struct msg_exit *m);
int enc_error(struct frame *f, const struct msg_error *m);
int enc_queued(struct frame *f, const struct msg_queued *m);
int enc_job(struct frame *f, const struct msg_job *m);
int enc_ready(struct frame *f, const struct msg_ready *m);
int enc_setup_error(struct frame *f, const struct msg_setup_error *m);
int enc_masks(struct frame *f, const struct msg_masks *m);
int enc_go(struct frame *f, const struct msg_go *m);
/* Any decoded message again, by its type's encoder; -EINVAL: no type. */
int proto_encode(struct frame *f, const struct msg *m);
int enc_warm(struct frame *f, const struct msg_warm *m);
int enc_finished(struct frame *f, const struct msg_finished *m);
/* A receipt alone, as the audit trail keeps it: one msgpack map
 * {type: "receipt", blocked, blocked_total, network} (the frame's payload,
 * after its 4-byte header), and back; len 0 is the empty receipt.  net
 * may be NULL (none). */
int enc_receipt(struct frame *f, const struct receipt *b, const struct network *net);
int dec_receipt_map(const uint8_t *p, size_t len, struct receipt *out, struct network *net);

/* Convenience for the many places that answer with an error frame. */
int enc_error_simple(struct frame *f, bool has_id, uint64_t id, const char *code,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static inline struct pstr pstr_c(const char *s);
/* receipt.c: one refusal into a receipt (target cut to
 * PROTO_BLOCKED_TARGET_MAX bytes of whole UTF-8 characters, any other byte
 * '?'), counted with an entry of the same kind, target, layer and witness;
 * past PROTO_BLOCKED_MAX entries counted in the total only. */
void receipt_add(struct receipt *b, enum proto_block_kind kind, const char *target,
		 enum proto_blocker by, enum proto_witness seen_by, bool inferred);
/* The same with a whole entry (its count ignored) counted count times. */
void receipt_add_n(struct receipt *b, const struct blocked_op *what, uint64_t count);
/* At most PROTO_BLOCKED_TARGET_MAX bytes of s[0..len) into out, as above. */
void receipt_copy_target(char *out, const char *s, size_t len);
/* Every entry and refusal of from, after into's own. */
void receipt_merge(struct receipt *into, const struct receipt *from);
/* True when s is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool utf8_valid(const uint8_t *s, size_t len);
/* pstr equals a C string */
bool pstr_eq(struct pstr a, const char *s);
/* malloc'd NUL-terminated copy, NULL on ENOMEM */
char *pstr_dup(struct pstr a);

#include <string.h>
static inline struct pstr pstr_c(const char *s)
{
	struct pstr p = { s, s ? strlen(s) : 0 };
	return p;
}

#endif
