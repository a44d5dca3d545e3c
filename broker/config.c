/* SPDX-License-Identifier: MIT
 * Configuration: defaults, the INI file (parsed by libinih), KOTOBA_SANDBOX,
 * command-line overrides, cross-field checks and printing.
 *
 * Everything about a key (section, name, type, field, bounds, default, help)
 * lives in one row of keys[] below, so parsing, validation, printing and the
 * example file (dist/broker.conf is config_print() of the defaults) cannot
 * drift apart.
 *
 * Line numbers: Debian's libinih is built with INI_HANDLER_LINENO=1 but
 * installs an ini.h that says 0, and pkg-config does not pass the define, so
 * trusting either side would be a signature mismatch on some build.  Instead
 * the file goes through ini_parse_stream() with our own reader, which counts
 * lines; one reader call is one line, so the count is exactly inih's.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ini.h>

#include "broker/config.h"
#include "proto/names.h"

/*
 * Debian builds libinih with INI_RUNTIME_OPTIONS, which exports
 * ini_max_line; upstream builds keep it a static const.  Weak, so the broker
 * links against either and lifts the 200-byte line limit where it can (a
 * full allow_users line needs ~530).  The reader reports longer lines as
 * errors whatever the limit turns out to be.  config_load sets and restores
 * it around the parse, so it is for a single-threaded start-up, as now.
 */
#pragma weak ini_max_line
#define LINE_BYTES 4096

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define SEC UINT64_C(1000)
#define MINUTE (60 * SEC)
#define HOUR (60 * MINUTE)
#define DAY (24 * HOUR)

/* Enum fields are stored through an unsigned; keep that honest. */
_Static_assert(sizeof(enum sandbox_mode) == sizeof(unsigned), "enum size");
_Static_assert(sizeof(enum unattended_policy) == sizeof(unsigned), "enum size");

enum key_type {
	KEY_STRING,
	KEY_BOOL,
	KEY_SIZE,	/* bytes; K, M, G suffixes, 1024-based */
	KEY_DURATION,	/* stored in ms; plain seconds or ms, s, m, h, d suffixes */
	KEY_COUNT,	/* plain decimal */
	KEY_OCTAL,
	KEY_ENUM,
};

/* Extra checks on strings, beyond fitting the buffer. */
#define K_EMPTY_OK 0x1	/* "" means "the built-in choice" */
#define K_PATH 0x2	/* absolute, when not empty */
#define K_NAME 0x4	/* one user or group name */
#define K_NAMES 0x8	/* names separated by commas or spaces */
#define K_WORD 0x10	/* no whitespace (a command, an image) */
#define K_SECRETS 0x20	/* secret places, separated by commas or blanks */
#define K_MODULES 0x40	/* python module names, separated by commas or blanks */
#define K_HOSTS 0x80	/* host names, *.name patterns, addresses: commas or blanks */

struct key {
	const char *section;
	const char *name;
	enum key_type type;
	size_t offset;
	size_t size;
	uint64_t min, max;		/* numbers, inclusive */
	const char *const *choices;	/* KEY_ENUM: name of each value */
	unsigned flags;			/* KEY_STRING: K_* */
	const char *def;		/* default, in file syntax */
	const char *help;		/* lines of at most ~72 columns */
};

static const char *const sandbox_names[] = { "local", "docker", "none", NULL };
static const char *const unattended_names[] = { "documented", "refuse", NULL };
static const char *const escalate_names[] = { "ask", "never", NULL };
static const char *const egress_approved_names[] = EGRESS_APPROVED_NAMES;

#define FIELD(m) offsetof(struct config, m), sizeof(((struct config *)0)->m)
#define STR(s, k, m, fl, d, h) \
	{ s, k, KEY_STRING, FIELD(m), .flags = (fl), .def = d, .help = h }
#define NUM(s, k, t, m, lo, hi, d, h) \
	{ s, k, t, FIELD(m), .min = (lo), .max = (hi), .def = d, .help = h }
#define ENUM(s, k, m, names, d, h) \
	{ s, k, KEY_ENUM, FIELD(m), .choices = names, .def = d, .help = h }
#define BOOL(s, k, m, d, h) { s, k, KEY_BOOL, FIELD(m), .def = d, .help = h }

static const struct key keys[] = {
	ENUM("broker", "sandbox", sandbox, sandbox_names, "local",
	     "Where snippets run: local (this host, under the worker's kernel\n"
	     "profile), docker (a container, see [docker]) or none (execute_code\n"
	     "is not offered).  KOTOBA_SANDBOX in the environment overrides it."),
	STR("broker", "socket", socket_path, K_EMPTY_OK | K_PATH, "",
	    "Path of the listening Unix socket (at most 107 bytes).  Empty:\n"
	    "$XDG_RUNTIME_DIR/kotoba/broker.sock, or /run/kotoba/broker.sock\n"
	    "as root."),
	STR("broker", "socket_group", socket_group, K_NAME, "kotoba",
	    "Group that owns the socket when started as root; its members can\n"
	    "connect."),
	NUM("broker", "socket_mode", KEY_OCTAL, socket_mode, 0, 0777, "0660",
	    "Permission bits of the socket, in octal."),
	STR("broker", "state_dir", state_dir, K_EMPTY_OK | K_PATH, "",
	    "Where saved grants and the audit trail live.  Empty:\n"
	    "~/.local/state/kotoba, or /var/lib/kotoba as root."),
	STR("broker", "user", user, K_NAME, "kotoba",
	    "Service user a broker started as root switches to at once."),
	STR("broker", "root_user", root_user, K_NAME, "nobody",
	    "User that the snippets of root clients run as, since no snippet\n"
	    "runs as root.  Never the service user: it owns every user's grants."),
	STR("broker", "allow_users", allow_users, K_EMPTY_OK | K_NAMES, "",
	    "Only these users may connect: names or uids, separated by commas\n"
	    "or spaces.  Empty: anyone who can open the socket."),
	STR("broker", "allow_groups", allow_groups, K_EMPTY_OK | K_NAMES, "",
	    "Members of these groups may connect too (same syntax)."),
	STR("broker", "worker", worker_path, K_EMPTY_OK | K_PATH, "",
	    "Absolute path of kotoba-worker.  Empty: next to the broker binary."),
	NUM("broker", "max_connections", KEY_COUNT, max_connections, 1, 65536,
	    "1024", "Client connections open at once; more are turned away."),
	NUM("broker", "max_runs", KEY_COUNT, max_runs, 1, 4096, "64",
	    "Snippets running at once, all users together."),
	NUM("broker", "max_runs_per_uid", KEY_COUNT, max_runs_per_uid, 1, 4096,
	    "16", "Snippets running at once for one user (at most max_runs)."),
	NUM("broker", "max_cards_per_conn", KEY_COUNT, max_cards_per_conn, 1,
	    256, "4", "Approval cards one connection may have waiting at once."),

	STR("python", "path", python, K_PATH, "/usr/bin/python3",
	    "The interpreter that runs snippets; an absolute path, never looked\n"
	    "up in PATH."),
	STR("python", "scratch_dir", scratch_dir, K_PATH, "/tmp",
	    "Where each run's private scratch TMPDIR is made (and removed\n"
	    "after the run)."),

	BOOL("mcp", "elicitation", mcp_elicitation, "yes",
	    "Whether kotoba mcp may show cards through the MCP client's\n"
	    "elicitation.  The agent host relays each card to a person and\n"
	    "brings the answer back; no treats every MCP client as one without\n"
	    "an approval channel: plain snippets run unattended, labelled ones\n"
	    "are refused."),

	NUM("limits", "timeout", KEY_DURATION, timeout_ms, 100, 24 * HOUR,
	    "60s",
	    "Wall-clock time a snippet gets when its request names none.\n"
	    "Durations are seconds, or a number with ms, s, m, h or d after it."),
	NUM("limits", "timeout_max", KEY_DURATION, timeout_max_ms, 100,
	    24 * HOUR, "600s",
	    "The longest a request may ask for; timeout must not exceed it."),
	NUM("limits", "kill_grace", KEY_DURATION, grace_ms, 0, 60 * SEC, "2s",
	    "Time between TERM and KILL when a snippet's time is up."),
	NUM("limits", "output", KEY_SIZE, output_cap, 1, GIB, "200000",
	    "Bytes kept of each of stdout and stderr; the rest is drained and\n"
	    "dropped.  Sizes are bytes, or a number with K, M or G after it\n"
	    "(1024-based)."),
	NUM("limits", "memory", KEY_SIZE, memory, 16 * MIB, 1024 * GIB, "4G",
	    "Memory of each snippet: the address space of each process\n"
	    "(RLIMIT_AS) and, with a cgroup per run, all its processes together,\n"
	    "swap included (memory.max, or v1 memory.limit_in_bytes)."),
	NUM("limits", "processes", KEY_COUNT, processes, 1, 4194304, "512",
	    "Processes and threads of each snippet together (the run's cgroup\n"
	    "pids.max).  RLIMIT_NPROC is this times max_runs_per_uid, or this\n"
	    "without a cgroup; the kernel counts every process of the uid in it."),
	NUM("limits", "file_size", KEY_SIZE, file_size, 0, 1024 * GIB, "1G",
	    "Largest file a snippet may write (RLIMIT_FSIZE)."),
	NUM("limits", "open_files", KEY_COUNT, open_files, 16, 1048576, "256",
	    "Open file descriptors per snippet process (RLIMIT_NOFILE)."),
	NUM("limits", "cpu", KEY_COUNT, cpu_s, 1, 86400, "600",
	    "CPU seconds per snippet process (RLIMIT_CPU)."),
	NUM("limits", "snippet", KEY_SIZE, snippet_max, KIB, 64 * MIB, "1M",
	    "Largest snippet accepted; a longer one is refused with an error."),
	NUM("limits", "frame", KEY_SIZE, frame_max, 64 * KIB, 256 * MIB, "4M",
	    "Largest protocol frame; must exceed snippet by more than 64K."),

	NUM("gate", "card_timeout", KEY_DURATION, card_timeout_ms, SEC,
	    24 * HOUR, "300s",
	    "An approval card nobody answers expires after this; the snippet\n"
	    "does not run and is recorded as expired."),
	NUM("gate", "grant_ttl", KEY_DURATION, grant_ttl_ms, 0, 366 * DAY, "0",
	    "How long an execute_code grant lasts from the answer that saved\n"
	    "it, by the wall clock; a person may choose less on the card, never\n"
	    "more.  An expired grant covers nothing: the card comes back.\n"
	    "0: until revoked."),
	ENUM("gate", "unattended", unattended, unattended_names, "documented",
	     "An unlabelled snippet from a client with no approval channel:\n"
	     "documented runs it under the unattended kernel profile, as the\n"
	     "spec documents; refuse refuses it."),
	ENUM("gate", "escalate", escalate, escalate_names, "ask",
	     "A run under the execute_code grant that the sandbox stopped\n"
	     "(its receipt is not empty): ask offers the client an escalation\n"
	     "card, on which a person may run the snippet again under the\n"
	     "approved profile; never does not.  Nothing reruns unasked."),

	NUM("audit", "anchor_rows", KEY_COUNT, audit_anchor_rows, 0, 1000000, "100",
	    "The broker logs the audit chain's head (audit-anchor seq=N\n"
	    "hash=H) at start, at stop, every this many rows and every\n"
	    "anchor_interval; kotoba audit verify --anchors checks a copy of\n"
	    "the trail against those lines (AUDIT.md).  0: not by row count."),
	NUM("audit", "anchor_interval", KEY_DURATION, audit_anchor_ms, SEC, 24 * HOUR, "600s",
	    "The longest time between two anchors in the log."),
	NUM("audit", "sync_window", KEY_DURATION, audit_sync_window_ms, 0, SEC, "5ms",
	    "A snippet that runs does not wait for its decision row to reach\n"
	    "the disk: the row is committed (a killed broker loses nothing)\n"
	    "and synced within this long, or sooner by the next other row.\n"
	    "A power cut or kernel crash can lose the decision rows of the\n"
	    "runs that started this long before it (AUDIT.md, Durability).\n"
	    "0: every row is on the disk before its snippet starts."),
	NUM("audit", "verify_rows", KEY_COUNT, audit_verify_rows, 1, UINT32_MAX, "100000",
	    "At start the broker checks the chain's newest this many rows and\n"
	    "its head; a break is an error in the log and an epoch row."),

	ENUM("egress", "unattended", egress, egress_mode_names, "get",
	     "What a run nobody read (a grant, no approval channel) may send out.\n"
	     "Such a run has a network namespace of its own with only loopback;\n"
	     "its one way out is the egress proxy, which HTTP_PROXY and\n"
	     "HTTPS_PROXY name.  get: plain GET and HEAD requests without a body,\n"
	     "to any public host, checked inside HTTPS too (the proxy ends TLS\n"
	     "with a CA of its own, which the run's SSL_CERT_FILE trusts).\n"
	     "allowlist: only allow_hosts, any method, HTTPS tunnelled as is.\n"
	     "none: nothing.  any: any method to any public host, tunnelled."),
	STR("egress", "allow_hosts", egress_allow, K_EMPTY_OK | K_HOSTS, "",
	    "Hosts the proxy connects to even at a loopback, private,\n"
	    "link-local or ULA address (and, with unattended = allowlist, the\n"
	    "only hosts): names, *.example.org patterns, addresses, separated\n"
	    "by commas or blanks."),
	STR("egress", "deny_hosts", egress_deny, K_EMPTY_OK | K_HOSTS, "",
	    "Hosts never connected to, in any mode; same forms as allow_hosts."),
	ENUM("egress", "approved", egress_approved, egress_approved_names, "direct",
	     "Runs a person approved: direct keeps the host's network.  proxy:\n"
	     "they too get a network namespace with only loopback, whose one\n"
	     "way out is the egress proxy: any method to any public host,\n"
	     "HTTPS tunnelled as is, deny_hosts and internal addresses refused\n"
	     "as for unattended runs, each request recorded in the log."),
	STR("egress", "upstream_ca_file", egress_upstream_ca, K_EMPTY_OK | K_PATH, "",
	    "A PEM file of CAs the proxy trusts upstream besides the system's\n"
	    "(an operator's own CA, a test server's)."),
	NUM("egress", "connections", KEY_COUNT, egress_conns, 1, 16384, "512",
	    "Connections the egress proxy serves at once, for every run of every\n"
	    "user together (each is a thread); past it a new one is answered\n"
	    "503 with a body that names this setting.  One run has at most 32."),
	NUM("egress", "connections_per_user", KEY_COUNT, egress_conns_per_uid, 1, 16384, "128",
	    "Connections the runs of one user may have open through the proxy\n"
	    "at once, at most half of `connections`, so that no user takes\n"
	    "every other user's share; past it, 503 naming this setting."),

	BOOL("sandbox", "landlock", landlock, "yes",
	     "Enforce the unattended profile with Landlock where the kernel has\n"
	     "it; no: seccomp argument filters only, which cannot tell paths\n"
	     "apart, so TMPDIR and /dev/null become read-only too."),

	BOOL("sandbox", "secrets", secrets, "yes",
	     "Unattended snippets (a grant, no approval channel, docker mode)\n"
	     "cannot read the secret set: ~/.ssh, ~/.aws, ~/.gnupg, ~/.netrc,\n"
	     ".env files in the working directory and its parents, /etc/shadow,\n"
	     "the broker's state and more (kotoba-broker.conf(5) lists them).\n"
	     "The worker masks them in a user and mount namespace of the run's\n"
	     "own; where the kernel refuses user namespaces, unattended runs\n"
	     "fail at step 'secrets'.  no: nothing is masked, which every\n"
	     "unattended run's exit reports (secrets: off) and the log says."),
	STR("sandbox", "secret_paths", secret_paths, K_EMPTY_OK | K_SECRETS, "",
	    "More secret places, added to the set, separated by commas or\n"
	    "blanks: an absolute path (/srv/app/credentials), a path in the\n"
	    "snippet user's home (~/.vault-token), or a file name looked for\n"
	    "in the working directory and each of its parents (.secrets.toml;\n"
	    "a final * matches any rest of the name: .env.*)."),

	BOOL("sandbox", "warm", warm, "yes",
	     "Spare interpreters: when a run ends, the broker starts the next\n"
	     "one for the same user, profile, working directory and environment\n"
	     "ahead, through the same worker and sandbox steps as any run, and\n"
	     "hands it the next such snippet's code; a spare runs one snippet\n"
	     "and is never reused.  Made only while fewer snippets run than the\n"
	     "machine has CPUs.  no: every run starts its own interpreter."),
	STR("sandbox", "preload", preload, K_EMPTY_OK | K_MODULES,
	    "json,re,pathlib,urllib.request,csv,datetime,collections,itertools,functools,math,"
	    "random,statistics,dataclasses,typing",
	    "Modules a spare imports before it waits for code (each only if it\n"
	    "imports), separated by commas or blanks; numpy or pandas may be\n"
	    "added.  A spare costs their import's CPU whether or not its snippet\n"
	    "uses them."),
	NUM("sandbox", "warm_idle", KEY_DURATION, warm_idle_ms, SEC, HOUR, "60s",
	    "A spare that no snippet took for this long is stopped."),
	NUM("sandbox", "warm_max", KEY_COUNT, warm_max, 0, 4096, "16",
	    "Spares at once, all users together."),
	NUM("sandbox", "warm_per_user", KEY_COUNT, warm_per_user, 1, 64, "2",
	    "Spares at once for one user."),

	STR("docker", "cli", container_cli, K_WORD, "docker",
	    "The engine's command-line client, docker or podman: a name looked\n"
	    "up in /usr/local/bin, /usr/bin and /bin, or an absolute path.  It\n"
	    "runs as the snippet's user, so engine access is that user's own."),
	STR("docker", "image", container_image, K_EMPTY_OK | K_WORD, "",
	    "Image snippets run in when sandbox = docker; it needs python3.\n"
	    "Required in docker mode."),
	STR("docker", "url", container_url, K_EMPTY_OK | K_WORD, "",
	    "The engine's API socket, e.g. unix:///run/podman/podman.sock;\n"
	    "%u stands for the snippet user's uid.  Empty: docker's own default,\n"
	    "and for podman unix:///run/user/%u/podman/podman.sock (the user's\n"
	    "rootless service).  podman is always used with --remote."),
	STR("docker", "runtime", container_runtime, K_EMPTY_OK | K_WORD, "",
	    "OCI runtime for docker run --runtime, e.g. runc.  Empty: the\n"
	    "engine's default.  podman takes it from its service\n"
	    "(podman --runtime runc system service), so it must stay empty."),
	STR("docker", "python", container_python, K_WORD, "python3",
	    "The interpreter inside the image, as its PATH finds it."),
	NUM("docker", "memory", KEY_SIZE, container_memory, 16 * MIB, 1024 * GIB, "512M",
	    "Memory of each container, swap included (--memory, --memory-swap);\n"
	    "a snippet over it is killed and its exit says limit memory."),
	NUM("docker", "processes", KEY_COUNT, container_pids, 8, 4194304, "256",
	    "Processes and threads in each container (--pids-limit)."),
	NUM("docker", "nproc", KEY_COUNT, container_nproc, 8, 4194304, "4096",
	    "RLIMIT_NPROC inside (--ulimit nproc); always given, because an\n"
	    "engine without CAP_SYS_RESOURCE cannot raise its own."),
	NUM("docker", "open_files", KEY_COUNT, container_nofile, 16, 1048576, "1024",
	    "RLIMIT_NOFILE inside (--ulimit nofile); always given, as nproc."),
	NUM("docker", "tmpfs", KEY_SIZE, container_tmpfs, MIB, 64 * GIB, "64M",
	    "Size of the container's /tmp, and of its output directory\n"
	    "/tmp/.kotoba-out (a tmpfs of its own), the only writable paths\n"
	    "besides the working directory."),
	NUM("docker", "idle", KEY_DURATION, container_idle_ms, SEC, 24 * HOUR, "300s",
	    "A warm container unused this long is stopped; all are stopped when\n"
	    "the broker stops."),

	NUM("quota", "connections", KEY_COUNT, conns_per_uid, 1, 32768, "32",
	    "Client connections one user may hold open at once; at most half of\n"
	    "[broker] max_connections, so that one user can never take them all\n"
	    "(with the defaults, 32 users at their cap still fit)."),
	NUM("quota", "hello_timeout", KEY_DURATION, hello_timeout_ms, 100, 10 * MINUTE,
	    "5s",
	    "A connection that has not sent hello this long after connecting is\n"
	    "answered too-slow and closed."),
	NUM("quota", "frame_timeout", KEY_DURATION, frame_timeout_ms, 100, 10 * MINUTE,
	    "10s",
	    "A frame must arrive whole within this time of its first byte; a\n"
	    "client that trickles one is answered too-slow and closed."),
	NUM("quota", "cards", KEY_COUNT, cards_per_uid, 1, 65536, "16",
	    "Approval cards one user may have waiting at once, over all of that\n"
	    "user's connections."),
	NUM("quota", "card_bytes", KEY_SIZE, card_bytes_per_uid, KIB, 64 * GIB, "8M",
	    "Total size of the snippets one user has waiting on cards and in\n"
	    "the queue, which the broker holds in memory."),
	NUM("quota", "audit_bytes", KEY_SIZE, audit_bytes, 64 * KIB, 1024 * GIB, "64M",
	    "Audit trail one user may add per audit_period (snippet text, stored\n"
	    "once per content hash, and a fixed cost per row).  Over it, that\n"
	    "user's new snippets are refused with the error quota until the\n"
	    "period ends; other users are not affected."),
	NUM("quota", "audit_period", KEY_DURATION, audit_period_ms, SEC, 31 * 24 * HOUR,
	    "60m", "The period audit_bytes is counted over."),
	NUM("quota", "queue", KEY_COUNT, queue, 0, 4096, "64",
	    "Snippets of one user that wait for a free slot when max_runs or\n"
	    "max_runs_per_uid is reached (the client is sent queued); they run\n"
	    "in order.  Beyond it, busy.  0: no queue, busy at once."),
	NUM("quota", "queue_timeout", KEY_DURATION, queue_timeout_ms, 100, 24 * HOUR,
	    "60s",
	    "A queued snippet that has not started within this time is not run;\n"
	    "the client is answered busy."),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* ---- errors ------------------------------------------------------------ */

static void set_error(struct config_error *err, const char *file,
		      unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set_error(struct config_error *err, const char *file,
		      unsigned line, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	snprintf(err->file, sizeof(err->file), "%s", file ? file : "");
	err->line = line;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

/*
 * Untrusted text quoted in a message: cut to fit, control bytes made '?'
 * so a hostile file cannot forge log lines or terminal escapes.
 */
static const char *clip(const char *s, char *buf, size_t len)
{
	size_t i, n = strlen(s), room = len - 4;

	for (i = 0; i < n && i < room; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	if (i < n)
		memcpy(buf + i, "...", 4);
	else
		buf[i] = '\0';
	return buf;
}

/* ---- numbers ----------------------------------------------------------- */

enum parse_result { PARSE_OK, PARSE_BAD, PARSE_RANGE };

/*
 * Digits of base 8 or 10 only, into *v; returns the first byte after them.
 * No sign, space or base prefix: strtoull takes all three and turns "-1"
 * into 2^64-1.
 */
static const char *parse_digits(const char *s, unsigned base, uint64_t *v,
				enum parse_result *res)
{
	*v = 0;
	*res = PARSE_BAD;
	for (; *s >= '0' && *s < (char)('0' + base); s++) {
		if (*res == PARSE_RANGE)
			continue;
		*res = PARSE_OK;
		if (__builtin_mul_overflow(*v, base, v) ||
		    __builtin_add_overflow(*v, (uint64_t)(*s - '0'), v))
			*res = PARSE_RANGE;
	}
	return s;
}

/* The multiplier a suffix stands for; 0 when it is not one of them. */
static uint64_t size_unit(const char *suffix)
{
	if (!strcmp(suffix, ""))
		return 1;
	if (!strcasecmp(suffix, "k"))
		return KIB;
	if (!strcasecmp(suffix, "m"))
		return MIB;
	if (!strcasecmp(suffix, "g"))
		return GIB;
	return 0;
}

static uint64_t duration_unit(const char *suffix)
{
	if (!strcmp(suffix, "ms"))
		return 1;
	if (!strcmp(suffix, "") || !strcmp(suffix, "s"))
		return SEC;
	if (!strcmp(suffix, "m"))
		return MINUTE;
	if (!strcmp(suffix, "h"))
		return HOUR;
	if (!strcmp(suffix, "d"))
		return DAY;
	return 0;
}

/* Digits, then a suffix; a bad suffix is a bad value even if the digits
 * overflowed, and 99999999999G is out of range, never a wrapped number. */
static enum parse_result parse_scaled(const char *s, bool duration,
				      uint64_t *v)
{
	enum parse_result res;
	uint64_t n, unit;
	const char *end = parse_digits(s, 10, &n, &res);

	if (res == PARSE_BAD)
		return res;
	unit = duration ? duration_unit(end) : size_unit(end);
	if (!unit)
		return PARSE_BAD;
	if (res == PARSE_RANGE || __builtin_mul_overflow(n, unit, v))
		return PARSE_RANGE;
	return PARSE_OK;
}

static enum parse_result parse_plain(const char *s, unsigned base,
				     uint64_t *v)
{
	enum parse_result res;
	const char *end = parse_digits(s, base, v, &res);

	return *end != '\0' ? PARSE_BAD : res;
}

static enum parse_result parse_bool(const char *s, uint64_t *v)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i]))
			return *v = 1, PARSE_OK;
		if (!strcasecmp(s, no[i]))
			return *v = 0, PARSE_OK;
	}
	return PARSE_BAD;
}

static enum parse_result parse_enum(const char *const *choices,
				    const char *s, uint64_t *v)
{
	uint64_t i;

	for (i = 0; choices[i]; i++)
		if (!strcasecmp(s, choices[i]))
			return *v = i, PARSE_OK;
	return PARSE_BAD;
}

/* A number of a key's type, in the syntax the file accepts back. */
static void format_number(enum key_type type, uint64_t v, char *buf,
			  size_t len)
{
	switch (type) {
	case KEY_SIZE:
		if (v && v % GIB == 0)
			snprintf(buf, len, "%" PRIu64 "G", v / GIB);
		else if (v && v % MIB == 0)
			snprintf(buf, len, "%" PRIu64 "M", v / MIB);
		else if (v && v % KIB == 0)
			snprintf(buf, len, "%" PRIu64 "K", v / KIB);
		else
			snprintf(buf, len, "%" PRIu64, v);
		break;
	case KEY_DURATION:
		if (v % SEC == 0)
			snprintf(buf, len, "%" PRIu64 "s", v / SEC);
		else
			snprintf(buf, len, "%" PRIu64 "ms", v);
		break;
	case KEY_OCTAL:
		snprintf(buf, len, "0%03" PRIo64, v);
		break;
	case KEY_COUNT:
	case KEY_STRING:
	case KEY_BOOL:
	case KEY_ENUM:
	default:
		snprintf(buf, len, "%" PRIu64, v);
		break;
	}
}

/* What a key accepts, for messages. */
static void describe(const struct key *k, char *buf, size_t len)
{
	char lo[32], hi[32];
	size_t i, n = 0;

	format_number(k->type, k->min, lo, sizeof(lo));
	format_number(k->type, k->max, hi, sizeof(hi));
	switch (k->type) {
	case KEY_SIZE:
		snprintf(buf, len, "bytes, or a number with K, M or G after it, "
			 "from %s to %s", lo, hi);
		break;
	case KEY_DURATION:
		snprintf(buf, len, "seconds, or a number with ms, s, m, h or d "
			 "after it, from %s to %s", lo, hi);
		break;
	case KEY_COUNT:
		snprintf(buf, len, "a whole number from %s to %s", lo, hi);
		break;
	case KEY_OCTAL:
		snprintf(buf, len, "an octal mode from %s to %s", lo, hi);
		break;
	case KEY_BOOL:
		snprintf(buf, len, "yes, no, true, false, on, off, 1 or 0");
		break;
	case KEY_ENUM:
		buf[0] = '\0';
		for (i = 0; k->choices[i] && n < len; i++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      i ? ", " : "", k->choices[i]);
		break;
	case KEY_STRING:
	default:
		snprintf(buf, len, "text");
		break;
	}
}

/* ---- field access ------------------------------------------------------ */

static void *field(struct config *c, const struct key *k)
{
	return (char *)c + k->offset;
}

static const void *cfield(const struct config *c, const struct key *k)
{
	return (const char *)c + k->offset;
}

static void store_number(struct config *c, const struct key *k, uint64_t v)
{
	if (k->size == sizeof(uint64_t)) {
		memcpy(field(c, k), &v, sizeof(v));
	} else if (k->size == sizeof(unsigned)) {
		unsigned u = (unsigned)v;

		memcpy(field(c, k), &u, sizeof(u));
	} else {
		bool b = v != 0;

		memcpy(field(c, k), &b, sizeof(b));
	}
}

static uint64_t load_number(const struct config *c, const struct key *k)
{
	if (k->size == sizeof(uint64_t)) {
		uint64_t v;

		memcpy(&v, cfield(c, k), sizeof(v));
		return v;
	} else if (k->size == sizeof(unsigned)) {
		unsigned u;

		memcpy(&u, cfield(c, k), sizeof(u));
		return u;
	} else {
		/* Read the byte, not a bool: a caller-built struct may hold
		 * any value there, and config_validate must see it. */
		unsigned char b;

		memcpy(&b, cfield(c, k), sizeof(b));
		return b;
	}
}

/* ---- strings ----------------------------------------------------------- */

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
	       ch == '-';
}

/* A user or group name as shadow-utils allows, or a numeric id. */
static bool valid_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || s[0] == '-')
		return false;
	if (s[n - 1] == '$')	/* Samba machine accounts */
		n--;
	for (i = 0; i < n; i++)
		if (!name_char(s[i]))
			return false;
	return n > 0;
}

static const char *name_problem(const char *s, size_t n)
{
	return valid_name(s, n) ? NULL
				: "is not a user or group name or id (letters, digits, '.', '_', '-')";
}

/* One secret_paths entry: "/abs", "~/rel" or a bare file name, without
 * empty, "." or ".." components (the worker masks the place the text
 * names; a spelling with ".." would name another).  NULL when fine. */
static const char *secret_entry_problem(const char *s, size_t n)
{
	size_t i = 0;

	if (s[0] == '~') {
		if (n < 3 || s[1] != '/')
			return "must be an absolute path, ~/ and a path in the home "
			       "directory, or a file name";
		i = 2;
	} else if (s[0] == '/') {
		if (n == 1)
			return "would mask every file ('/')";
		i = 1;
	}
	if (s[0] != '/' && s[0] != '~' && memchr(s, '/', n))
		return "is a relative path; write /abs/path, ~/path or a file name";
	while (i < n) {
		size_t k = i;

		while (k < n && s[k] != '/')
			k++;
		if (k == i || (k - i == 1 && s[i] == '.') ||
		    (k - i == 2 && s[i] == '.' && s[i + 1] == '.'))
			return "has an empty, '.' or '..' component";
		i = k + 1;
	}
	if (s[n - 1] == '/')
		return "ends in '/'; name the directory without it";
	if (memchr(s, '*', n) && (s[n - 1] != '*' || memchr(s, '*', n - 1) || s[0] == '/' ||
				  s[0] == '~'))
		return "may hold '*' only at the end of a file name (.env.*)";
	return NULL;
}

static const char *module_problem(const char *s, size_t n)
{
	return proto_module_name_ok(s, n) ? NULL : "is not a module name (identifiers joined by '.')";
}

/* What a list key's entries must be, and how many there may be. */
struct list_rule {
	const char *(*problem)(const char *s, size_t n); /* NULL when fine */
	unsigned max;                                     /* 0: any number */
	const char *too_many;
};

static const struct list_rule names_rule = { name_problem, 0, NULL };
static const struct list_rule secrets_rule = {
	secret_entry_problem, CONFIG_SECRET_PATHS_MAX,
	"is one entry too many (at most " CONFIG_SECRET_PATHS_MAX_TEXT ")"
};
static const struct list_rule hosts_rule = { egress_host_problem, EGRESS_HOSTS_MAX,
					     "is one host too many" };
static const struct list_rule modules_rule = { module_problem, PROTO_PRELOAD_MAX,
					       "is one module too many" };

static int check_list(const struct key *k, const char *s, const struct list_rule *rule,
		      char *msg, size_t len)
{
	char q[48], word[300];
	unsigned count = 0;
	const char *w;
	size_t n;

	while ((n = config_list_next(&s, &w))) {
		const char *why = rule->problem(w, n);

		if (!why && rule->max && ++count > rule->max)
			why = rule->too_many;
		if (why) {
			snprintf(word, sizeof(word), "%.*s", (int)n, w);
			snprintf(msg, len, "[%s] %s: '%s' %s", k->section, k->name,
				 clip(word, q, sizeof(q)), why);
			return -1;
		}
	}
	return 0;
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t';
}

/*
 * Whatever reaches a string field must print back as "key = value" and read
 * back the same: inih strips outer whitespace and takes " ;" as a comment.
 * From the file these cannot occur; from the command line they can.
 */
static const char *format_problem(const char *s, size_t n)
{
	if (has_control(s))
		return "contains a control character";
	if (n && (is_space(s[0]) || is_space(s[n - 1])))
		return "starts or ends with whitespace";
	if (strstr(s, " ;") || strstr(s, "\t;"))
		return "contains ' ;', which the file format reads as a comment";
	return NULL;
}

static const char *string_problem(const struct key *k, const char *s,
				  size_t n)
{
	const char *why = format_problem(s, n);

	if (why)
		return why;
	if (n == 0)
		return k->flags & K_EMPTY_OK ? NULL : "must not be empty";
	if ((k->flags & K_PATH) && s[0] != '/')
		return "must be an absolute path (start with /)";
	if ((k->flags & (K_WORD | K_NAME)) && strpbrk(s, " \t"))
		return "must not contain spaces";
	if ((k->flags & K_NAME) && !valid_name(s, n))
		return "is not a user or group name or id "
		       "(letters, digits, '.', '_', '-')";
	return NULL;
}

static int set_string(struct config *c, const struct key *k, const char *s,
		      char *msg, size_t len)
{
	size_t n = strlen(s);
	const char *why;

	if (n >= k->size) {
		snprintf(msg, len, "[%s] %s: value is %zu bytes; at most %zu fit",
			 k->section, k->name, n, k->size - 1);
		return -1;
	}
	why = string_problem(k, s, n);
	if (why) {
		snprintf(msg, len, "[%s] %s: value %s", k->section, k->name,
			 why);
		return -1;
	}
	if ((k->flags & K_NAMES) && check_list(k, s, &names_rule, msg, len))
		return -1;
	if ((k->flags & K_SECRETS) && check_list(k, s, &secrets_rule, msg, len))
		return -1;
	if ((k->flags & K_MODULES) && check_list(k, s, &modules_rule, msg, len))
		return -1;
	if ((k->flags & K_HOSTS) && check_list(k, s, &hosts_rule, msg, len))
		return -1;
	/* Zero the tail too, so equal configs are equal bytes. */
	memset(field(c, k), 0, k->size);
	memcpy(field(c, k), s, n);
	return 0;
}

/* ---- one key ----------------------------------------------------------- */

static enum parse_result parse_number(const struct key *k, const char *s,
				      uint64_t *v)
{
	switch (k->type) {
	case KEY_SIZE:
		return parse_scaled(s, false, v);
	case KEY_DURATION:
		return parse_scaled(s, true, v);
	case KEY_COUNT:
		return parse_plain(s, 10, v);
	case KEY_OCTAL:
		return parse_plain(s, 8, v);
	case KEY_BOOL:
		return parse_bool(s, v);
	case KEY_ENUM:
		return parse_enum(k->choices, s, v);
	case KEY_STRING:
	default:
		return PARSE_BAD;
	}
}

static bool bounded(enum key_type type)
{
	return type == KEY_SIZE || type == KEY_DURATION ||
	       type == KEY_COUNT || type == KEY_OCTAL;
}

/* Parse s into k's field; on failure c is untouched and msg says why. */
static int set_value(struct config *c, const struct key *k, const char *s,
		     char *msg, size_t len)
{
	enum parse_result res;
	char want[160], q[48];
	uint64_t v = 0;

	if (k->type == KEY_STRING)
		return set_string(c, k, s, msg, len);
	res = parse_number(k, s, &v);
	if (res == PARSE_OK && bounded(k->type) && (v < k->min || v > k->max))
		res = PARSE_RANGE;
	if (res == PARSE_OK) {
		store_number(c, k, v);
		return 0;
	}
	describe(k, want, sizeof(want));
	snprintf(msg, len, "[%s] %s: '%s' is %s; accepted: %s", k->section,
		 k->name, clip(s, q, sizeof(q)),
		 res == PARSE_RANGE ? "out of range" : "not valid", want);
	return -1;
}

/* Room for a number, a boolean or a choice in file syntax; strings are
 * never copied, so no string field's size is coupled to it. */
#define NUMBER_TEXT 32

/*
 * k's value in file syntax; "?" for what no file could have set.  A string
 * is the field itself (buf unused), so a long one is never cut short.
 */
static const char *format_value(const struct config *c, const struct key *k,
				char buf[static NUMBER_TEXT])
{
	uint64_t v;

	if (k->type == KEY_STRING) {
		const char *s = cfield(c, k);

		return memchr(s, '\0', k->size) ? s : "?";
	}
	v = load_number(c, k);
	if (k->type == KEY_BOOL) {
		snprintf(buf, NUMBER_TEXT, "%s", v == 0 ? "no" : v == 1 ? "yes" : "?");
	} else if (k->type == KEY_ENUM) {
		uint64_t n = 0;

		while (k->choices[n])
			n++;
		snprintf(buf, NUMBER_TEXT, "%s", v < n ? k->choices[v] : "?");
	} else {
		format_number(k->type, v, buf, NUMBER_TEXT);
	}
	return buf;
}

/* ---- lookup ------------------------------------------------------------ */

static bool section_known(const char *section)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].section, section))
			return true;
	return false;
}

static const struct key *find_key(const char *section, const char *name)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].section, section) &&
		    !strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

static void list_sections(char *buf, size_t len)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < NKEYS && n < len; i++)
		if (i == 0 || strcmp(keys[i].section, keys[i - 1].section))
			n += (size_t)snprintf(buf + n, len - n, "%s[%s]",
					      i ? " " : "", keys[i].section);
}

static void unknown_section(const char *section, char *msg, size_t len)
{
	char q[48], known[120];

	list_sections(known, sizeof(known));
	snprintf(msg, len, "unknown section [%s]; sections are %s",
		 clip(section, q, sizeof(q)), known);
}

/* Names the key's real section when it was put under the wrong one. */
static void unknown_key(const char *section, const char *name, char *msg,
			size_t len)
{
	char q[48];
	size_t i, n;

	clip(name, q, sizeof(q));
	for (i = 0; i < NKEYS; i++) {
		if (!strcmp(keys[i].name, name)) {
			snprintf(msg, len, "unknown key '%s' in [%s]; it belongs "
				 "in [%s]", q, section, keys[i].section);
			return;
		}
	}
	n = (size_t)snprintf(msg, len, "unknown key '%s' in [%s]; known:", q,
			     section);
	for (i = 0; i < NKEYS && n < len; i++)
		if (!strcmp(keys[i].section, section))
			n += (size_t)snprintf(msg + n, len - n, " %s",
					      keys[i].name);
}

static const struct key *lookup(const char *section, const char *name,
				char *msg, size_t len)
{
	const struct key *k;
	char q[48];

	if (!section || !*section) {
		snprintf(msg, len, "key '%s' is outside any [section]",
			 clip(name ? name : "", q, sizeof(q)));
		return NULL;
	}
	if (!section_known(section)) {
		unknown_section(section, msg, len);
		return NULL;
	}
	k = name ? find_key(section, name) : NULL;
	if (!k)
		unknown_key(section, name ? name : "", msg, len);
	return k;
}

/* ---- public: defaults, set, env ---------------------------------------- */

void config_defaults(struct config *c)
{
	char msg[200];
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < NKEYS; i++) {
		/* A default the parser rejects is a bug in keys[]; the unit
		 * test loads every default, so this never fires in a build
		 * that passed its tests. */
		if (set_value(c, &keys[i], keys[i].def, msg, sizeof(msg)))
			abort();
	}
}

int config_set(struct config *c, const char *section, const char *key,
	       const char *value, struct config_error *err)
{
	const struct key *k;
	char msg[sizeof(err->message)];

	k = lookup(section, key, msg, sizeof(msg));
	if (k && !value)
		snprintf(msg, sizeof(msg), "[%s] %s: no value", section, key);
	if (!k || !value || set_value(c, k, value, msg, sizeof(msg))) {
		set_error(err, "", 0, "%s", msg);
		return -1;
	}
	return 0;
}

int config_apply_env(struct config *c, const char *const *envp,
		     struct config_error *err)
{
	static const char var[] = "KOTOBA_SANDBOX=";
	const struct key *k = find_key("broker", "sandbox");
	char want[64], q[48], msg[200];
	const char *v;
	uint64_t mode;

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, var, sizeof(var) - 1))
			break;
	/* The first entry wins, as with getenv(). */
	if (!envp || !*envp)
		return 0;
	v = *envp + sizeof(var) - 1;
	if (parse_enum(sandbox_names, v, &mode) == PARSE_OK)
		return set_value(c, k, v, msg, sizeof(msg));
	describe(k, want, sizeof(want));
	set_error(err, "", 0, "KOTOBA_SANDBOX='%s' is not a sandbox mode; "
		  "accepted: %s", clip(v, q, sizeof(q)), want);
	return -1;
}

const char *sandbox_mode_name(enum sandbox_mode m)
{
	switch (m) {
	case SANDBOX_LOCAL:
		return "local";
	case SANDBOX_DOCKER:
		return "docker";
	case SANDBOX_NONE:
		return "none";
	default:
		return "?";
	}
}

/* ---- loading a file ---------------------------------------------------- */

struct loader {
	FILE *file;
	const char *path;
	struct config cfg;		/* the file lands here, then is copied */
	unsigned lineno;		/* of the line inih is working on */
	unsigned section_line;		/* of the last [section] header */
	unsigned first_line[NKEYS];	/* where each key was set, 0 = not */
	bool failed;
	struct config_error err;
};

static void loader_fail(struct loader *ld, unsigned line, const char *msg)
{
	if (ld->failed)
		return;
	ld->failed = true;
	set_error(&ld->err, ld->path, line, "%s", msg);
}

/* Reads one raw line into str; false when it will not fit or on EOF. */
static bool read_raw(struct loader *ld, char *str, size_t room, size_t *len)
{
	int ch;

	*len = 0;
	while ((ch = getc(ld->file)) != EOF && ch != '\n') {
		if (ch == '\0') {
			loader_fail(ld, ld->lineno, "NUL byte in the line; "
				    "is this a text file?");
			return false;
		}
		if (*len == room) {
			char msg[64];

			snprintf(msg, sizeof(msg), "line longer than %zu bytes",
				 room);
			loader_fail(ld, ld->lineno, msg);
			return false;
		}
		str[(*len)++] = (char)ch;
	}
	str[*len] = '\0';
	return true;
}

/*
 * The ini_reader: one call, one line, so ld->lineno is inih's line number.
 * Leading blanks are dropped because inih would take an indented line as
 * the continuation of the previous value; an indented key is just a key
 * here, and a stray indented word is a syntax error rather than a silent
 * second value.  Returning NULL stops inih at our first error.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct loader *ld = stream;
	size_t len, skip = 0;
	int ch;

	if (ld->failed || num < 2)
		return NULL;
	ch = getc(ld->file);
	if (ch == EOF) {
		if (ferror(ld->file))
			loader_fail(ld, 0, strerror(errno));
		return NULL;
	}
	ungetc(ch, ld->file);
	ld->lineno++;
	if (!read_raw(ld, str, (size_t)num - 1, &len))
		return NULL;
	if (ferror(ld->file)) {
		loader_fail(ld, 0, strerror(errno));
		return NULL;
	}
	if (ld->lineno == 1 && !strncmp(str, "\xef\xbb\xbf", 3))
		skip = 3;	/* UTF-8 byte order mark */
	while (is_space(str[skip]))
		skip++;
	memmove(str, str + skip, len - skip + 1);
	if (str[0] == '[')
		ld->section_line = ld->lineno;
	return str;
}

static int on_key(void *user, const char *section, const char *name,
		  const char *value)
{
	struct loader *ld = user;
	char msg[sizeof(ld->err.message)];
	const struct key *k;
	size_t i;

	if (ld->failed)
		return 0;
	k = lookup(section, name, msg, sizeof(msg));
	if (!k) {
		bool bad_section = section && *section &&
				   !section_known(section);

		loader_fail(ld, bad_section ? ld->section_line : ld->lineno,
			    msg);
		return 0;
	}
	i = (size_t)(k - keys);
	if (ld->first_line[i]) {
		snprintf(msg, sizeof(msg), "duplicate key [%s] %s; first set "
			 "on line %u", k->section, k->name, ld->first_line[i]);
		loader_fail(ld, ld->lineno, msg);
		return 0;
	}
	ld->first_line[i] = ld->lineno;
	if (!value || set_value(&ld->cfg, k, value, msg, sizeof(msg))) {
		loader_fail(ld, ld->lineno, value ? msg : "missing value");
		return 0;
	}
	return 1;
}

static int parse_with_long_lines(struct loader *ld)
{
	bool tunable = &ini_max_line != NULL;
	int saved = 0, ret;

	if (tunable) {
		saved = ini_max_line;
		if (saved < LINE_BYTES)
			ini_max_line = LINE_BYTES;
	}
	ret = ini_parse_stream(read_line, ld, on_key, ld);
	if (tunable)
		ini_max_line = saved;
	return ret;
}

/*
 * A world-writable config would let any local user pick the sandbox mode
 * and the worker binary of a daemon that may run as root.
 */
static int check_file(struct loader *ld)
{
	struct stat st;

	if (fstat(fileno(ld->file), &st)) {
		loader_fail(ld, 0, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		loader_fail(ld, 0, "is a directory, not a config file");
		return -1;
	}
	if (S_ISREG(st.st_mode) && (st.st_mode & S_IWOTH)) {
		loader_fail(ld, 0, "is writable by every user; refusing it "
			    "(chmod o-w)");
		return -1;
	}
	return 0;
}

static void run_loader(struct loader *ld)
{
	int ret;

	if (check_file(ld))
		return;
	ret = parse_with_long_lines(ld);
	/* inih reports lines it cannot parse only through its return
	 * value; keep whichever error comes first in the file. */
	if (ret > 0 && (!ld->failed || (unsigned)ret < ld->err.line)) {
		ld->failed = true;
		set_error(&ld->err, ld->path, (unsigned)ret, "expected "
			  "'[section]' or 'key = value'");
	} else if (ret < 0) {
		loader_fail(ld, 0, "out of memory");
	}
}

int config_load(struct config *c, const char *path, struct config_error *err)
{
	struct loader *ld;
	int ret = -1;

	ld = calloc(1, sizeof(*ld));
	if (!ld) {
		set_error(err, path, 0, "out of memory");
		return -1;
	}
	ld->path = path;
	ld->cfg = *c;
	ld->file = fopen(path, "re");
	if (!ld->file) {
		set_error(err, path, 0, "cannot open: %s", strerror(errno));
		free(ld);
		return -1;
	}
	run_loader(ld);
	fclose(ld->file);
	if (ld->failed) {
		if (err)
			*err = ld->err;
	} else {
		*c = ld->cfg;
		ret = 0;
	}
	free(ld);
	return ret;
}

/* ---- validation -------------------------------------------------------- */

/* Each field, as if it came through the file: a caller may have built or
 * edited the struct by hand. */
static int validate_fields(const struct config *c, struct config_error *err)
{
	struct config scratch = *c;
	char buf[NUMBER_TEXT], msg[sizeof(err->message)];
	size_t i;

	for (i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];

		if (k->type == KEY_STRING &&
		    !memchr(cfield(c, k), '\0', k->size)) {
			set_error(err, "", 0, "[%s] %s: not terminated",
				  k->section, k->name);
			return -1;
		}
		if (set_value(&scratch, k, format_value(c, k, buf), msg, sizeof(msg))) {
			set_error(err, "", 0, "%s", msg);
			return -1;
		}
	}
	return 0;
}

/* The podman CLI cannot pick a runtime in --remote mode ("unknown flag"),
 * so a runtime set for it would be silently ignored by the engine. */
static int validate_docker(const struct config *c, struct config_error *err)
{
	const char *base = strrchr(c->container_cli, '/');

	base = base ? base + 1 : c->container_cli;
	if (c->sandbox == SANDBOX_DOCKER && !c->container_image[0]) {
		set_error(err, "", 0, "[broker] sandbox = docker needs [docker] image: "
			  "the image snippets run in (it needs python3)");
		return -1;
	}
	if (c->container_runtime[0] && strstr(base, "podman")) {
		set_error(err, "", 0, "[docker] runtime = %s cannot be used with podman: "
			  "podman takes the runtime from its service (podman --runtime %s "
			  "system service); leave runtime empty",
			  c->container_runtime, c->container_runtime);
		return -1;
	}
	return 0;
}

/* One user's connections may never fill the broker's table: at most half
 * of it, so at least one other user always gets in. */
static int validate_quota(const struct config *c, struct config_error *err)
{
	if (c->conns_per_uid > c->max_connections / 2) {
		set_error(err, "", 0, "[quota] connections = %u is over half of "
			  "[broker] max_connections = %u: one user could lock every "
			  "other out", c->conns_per_uid, c->max_connections);
		return -1;
	}
	/* The same for the egress proxy's connections (threads). */
	if (c->egress_conns_per_uid > c->egress_conns / 2) {
		set_error(err, "", 0, "[egress] connections_per_user = %u is over half of "
			  "[egress] connections = %u: one user's runs could take every "
			  "other user's network", c->egress_conns_per_uid, c->egress_conns);
		return -1;
	}
	return 0;
}

int config_validate(const struct config *c, struct config_error *err)
{
	char a[32], b[32];

	if (validate_fields(c, err))
		return -1;
	if (c->timeout_ms > c->timeout_max_ms) {
		format_number(KEY_DURATION, c->timeout_ms, a, sizeof(a));
		format_number(KEY_DURATION, c->timeout_max_ms, b, sizeof(b));
		set_error(err, "", 0, "[limits] timeout = %s exceeds "
			  "[limits] timeout_max = %s; lower one or raise the "
			  "other", a, b);
		return -1;
	}
	if (validate_docker(c, err) < 0)
		return -1;
	if (c->frame_max <= c->snippet_max + 64 * KIB) {
		format_number(KEY_SIZE, c->frame_max, a, sizeof(a));
		format_number(KEY_SIZE, c->snippet_max, b, sizeof(b));
		set_error(err, "", 0, "[limits] frame = %s must exceed "
			  "[limits] snippet = %s by more than 64K, the room "
			  "for the rest of a message", a, b);
		return -1;
	}
	if (validate_quota(c, err) < 0)
		return -1;
	if (c->max_runs_per_uid > c->max_runs) {
		set_error(err, "", 0, "[broker] max_runs_per_uid = %u exceeds "
			  "[broker] max_runs = %u", c->max_runs_per_uid,
			  c->max_runs);
		return -1;
	}
	return 0;
}

/* ---- printing ---------------------------------------------------------- */

static void print_help(FILE *out, const char *help)
{
	while (*help) {
		size_t n = strcspn(help, "\n");

		fprintf(out, "# %.*s\n", (int)n, help);
		help += n + (help[n] == '\n');
	}
}

void config_print(FILE *out, const struct config *c)
{
	struct config def;
	char nbuf[NUMBER_TEXT], dbuf[NUMBER_TEXT];
	size_t i;

	config_defaults(&def);
	for (i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		const char *val = format_value(c, k, nbuf);
		const char *dval = format_value(&def, k, dbuf);

		if (i == 0 || strcmp(k->section, keys[i - 1].section))
			fprintf(out, "%s[%s]\n", i ? "\n" : "", k->section);
		fputc('\n', out);
		print_help(out, k->help);
		if (strcmp(val, dval))
			fprintf(out, "# (default: %s)\n", dval);
		fprintf(out, "%s =%s%s\n", k->name, *val ? " " : "", val);
	}
}

void config_error_print(FILE *out, const struct config_error *err)
{
	if (err->file[0] && err->line)
		fprintf(out, "%s:%u: %s\n", err->file, err->line, err->message);
	else if (err->file[0])
		fprintf(out, "%s: %s\n", err->file, err->message);
	else
		fprintf(out, "%s\n", err->message);
}
