/* SPDX-License-Identifier: MIT
 * The broker's configuration: one INI file (dist/broker.conf documents every
 * key), KOTOBA_SANDBOX from the environment, then command-line overrides.
 *
 * The caller applies the layers lowest first, so a later layer wins:
 *
 *	config_defaults(&c);
 *	config_load(&c, path, &err);		the file
 *	config_apply_env(&c, envp, &err);	KOTOBA_SANDBOX
 *	config_set(&c, "broker", "sandbox", "docker", &err);	command line
 *	config_validate(&c, &err);		cross-field checks, once, last
 *
 * Every function that can fail returns 0 or -1 and leaves the struct as it
 * was on failure; err says where and why (file and line where there is one).
 */
#ifndef KOTOBA_BROKER_CONFIG_H
#define KOTOBA_BROKER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "broker/egress/policy.h"

enum sandbox_mode { SANDBOX_LOCAL, SANDBOX_DOCKER, SANDBOX_NONE };

/* Entries [sandbox] secret_paths may hold, besides the built-in set. */
#define CONFIG_SECRET_PATHS_MAX 32
#define CONFIG_SECRET_PATHS_MAX_TEXT "32"
enum unattended_policy { UNATTENDED_DOCUMENTED, UNATTENDED_REFUSE };
enum escalate_policy { ESCALATE_ASK, ESCALATE_NEVER };

struct config {
	enum sandbox_mode sandbox;     /* [broker] sandbox = local|docker|none */
	char socket_path[108];         /* [broker] socket; "" = default discovery */
	char socket_group[64];         /* [broker] socket_group, default "kotoba" */
	unsigned socket_mode;          /* [broker] socket_mode, octal, default 0660 */
	char state_dir[256];           /* [broker] state_dir; "" = default */
	char user[64];                 /* [broker] user, default "kotoba" */
	char root_user[64];            /* [broker] root_user, default "nobody" */
	char allow_users[512];         /* [broker] allow_users: comma/space list, "" = anyone who can connect */
	char allow_groups[512];        /* [broker] allow_groups */
	char worker_path[256];         /* [broker] worker; "" = next to the broker binary */
	unsigned max_connections;      /* [broker] default 1024 */
	unsigned max_runs;             /* [broker] max_runs total, default 64 */
	unsigned max_runs_per_uid;     /* default 16 */
	unsigned max_cards_per_conn;   /* default 4 */
	char python[256];              /* [python] path, default /usr/bin/python3 */
	char scratch_dir[256];         /* [python] scratch_dir, default /tmp */
	uint64_t timeout_ms;           /* [limits] timeout, default 60s */
	uint64_t timeout_max_ms;       /* [limits] timeout_max, default 600s; timeout <= timeout_max */
	uint64_t grace_ms;             /* [limits] kill_grace, default 2s */
	uint64_t output_cap;           /* [limits] output, bytes per stream, default 200000 */
	uint64_t memory;               /* [limits] memory (RLIMIT_AS, memory cgroup), default 4G */
	uint64_t processes;            /* [limits] processes (pids cgroup, RLIMIT_NPROC), default 512 */
	uint64_t file_size;            /* [limits] file_size (RLIMIT_FSIZE), default 1G */
	uint64_t open_files;           /* [limits] open_files (RLIMIT_NOFILE), default 256 */
	uint64_t cpu_s;                /* [limits] cpu seconds (RLIMIT_CPU), default 600 */
	uint64_t snippet_max;          /* [limits] snippet, default 1M (1048576) */
	uint64_t frame_max;            /* [limits] frame, default 4M; must be > snippet + 64K */
	uint64_t card_timeout_ms;      /* [gate] card_timeout, default 300s */
	uint64_t grant_ttl_ms;         /* [gate] grant_ttl, default 0: until revoked */
	enum unattended_policy unattended; /* [gate] unattended = documented|refuse */
	enum escalate_policy escalate;     /* [gate] escalate = ask|never */
	bool mcp_elicitation;              /* [mcp] elicitation = yes|no */
	uint64_t audit_anchor_rows;    /* [audit] anchor_rows, default 100; 0 = none by count */
	uint64_t audit_anchor_ms;      /* [audit] anchor_interval, default 10m */
	uint64_t audit_sync_window_ms; /* [audit] sync_window, default 5ms */
	uint64_t audit_verify_rows;    /* [audit] verify_rows at start, default 100000 */
	bool landlock;                 /* [sandbox] landlock = yes|no, default yes */
	enum egress_mode egress;       /* [egress] unattended = get|allowlist|none|any */
	char egress_allow[4096];       /* [egress] allow_hosts, comma/space list */
	char egress_deny[4096];        /* [egress] deny_hosts */
	unsigned egress_approved;      /* [egress] approved = direct|proxy */
	char egress_upstream_ca[256];  /* [egress] upstream_ca_file; "" = system trust only */
	unsigned egress_conns;         /* [egress] connections, all runs together; default 512 */
	unsigned egress_conns_per_uid; /* [egress] connections_per_user; default 128 */
	bool secrets;                  /* [sandbox] secrets = yes|no: mask the secret set, default yes */
	char secret_paths[2048];       /* [sandbox] secret_paths: more secrets, comma/space list */
	bool warm;                     /* [sandbox] warm = yes|no: spare interpreters */
	char preload[1024];            /* [sandbox] preload: modules a spare imports, comma/space list */
	uint64_t warm_idle_ms;         /* [sandbox] warm_idle, default 60s */
	unsigned warm_max;             /* [sandbox] warm_max, spares in all, default 16 */
	unsigned warm_per_user;        /* [sandbox] warm_per_user, default 2 */
	char container_cli[64];        /* [docker] cli, default "docker" */
	char container_image[128];     /* [docker] image, default "" */
	char container_url[256];       /* [docker] url, engine API; "" = the CLI's own default */
	char container_runtime[64];    /* [docker] runtime (docker run --runtime); "" = engine's */
	char container_python[64];     /* [docker] python, in the image, default "python3" */
	uint64_t container_memory;     /* [docker] memory (--memory), default 512M */
	uint64_t container_pids;       /* [docker] processes (--pids-limit), default 256 */
	uint64_t container_nproc;      /* [docker] nproc (--ulimit nproc), default 4096 */
	uint64_t container_nofile;     /* [docker] open_files (--ulimit nofile), default 1024 */
	uint64_t container_tmpfs;      /* [docker] tmpfs, size of /tmp, default 64M */
	uint64_t container_idle_ms;    /* [docker] idle, default 300s */
	/* [quota]: what one user may hold, so no user takes what others need */
	unsigned conns_per_uid;        /* [quota] connections, default 32 */
	uint64_t hello_timeout_ms;     /* [quota] hello_timeout, default 5s */
	uint64_t frame_timeout_ms;     /* [quota] frame_timeout, default 10s */
	unsigned cards_per_uid;        /* [quota] cards, default 16 */
	uint64_t card_bytes_per_uid;   /* [quota] card_bytes, default 8M */
	uint64_t audit_bytes;          /* [quota] audit_bytes per audit_period, default 64M */
	uint64_t audit_period_ms;      /* [quota] audit_period, default 60m */
	unsigned queue;                /* [quota] queue, execs waiting per user, default 64 */
	uint64_t queue_timeout_ms;     /* [quota] queue_timeout, default 60s */
};

/* file is "" and line 0 when the error is not tied to a file or a line
 * (environment, command line, cross-field checks). */
struct config_error {
	char file[256];
	unsigned line;
	char message[200];
};

void config_defaults(struct config *c);
/* Applies the file's keys over what c already holds; a missing file is an
 * error naming it.  Nothing is applied unless the whole file is valid. */
int config_load(struct config *c, const char *path, struct config_error *err);
/* KOTOBA_SANDBOX; a bad or empty value is an error naming the variable. */
int config_apply_env(struct config *c, const char *const *envp,
		     struct config_error *err);
/* One key, as if from the file; also for command-line overrides, e.g.
 * ("broker", "sandbox", "docker"). */
int config_set(struct config *c, const char *section, const char *key,
	       const char *value, struct config_error *err);
int config_validate(const struct config *c, struct config_error *err);
/* The effective configuration as a valid INI file (for --check-config):
 * every key with its help text; config_load reads it back unchanged. */
void config_print(FILE *out, const struct config *c);
/* "FILE:LINE: message", "FILE: message" or "message", and a newline. */
void config_error_print(FILE *out, const struct config_error *err);

/* The entries of a list value (allow_users, secret_paths, preload: commas
 * or blanks between them), one a call: *word is the next and *s moves past
 * it; the length is returned, 0 when none is left.  Inline: the modules
 * that read these lists are in config.c's layer (ARCHITECTURE.md). */
static inline size_t config_list_next(const char **s, const char **word)
{
	static const char sep[] = ", \t";
	size_t n;

	*s += strspn(*s, sep);
	*word = *s;
	n = strcspn(*s, sep);
	*s += n;
	return n;
}
const char *sandbox_mode_name(enum sandbox_mode m);

#endif
