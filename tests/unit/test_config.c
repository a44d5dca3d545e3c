// link: broker/config.c proto/names.c broker/egress/policy.c
/* SPDX-License-Identifier: MIT
 * broker/config.c: defaults, the file, every error with its file:line,
 * suffixes and overflow, KOTOBA_SANDBOX, precedence, print round trip,
 * dist/broker.conf, and random input that must fail cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/config.h"

/* cmocka's signature; most tests keep no state. */
#define UNUSED __attribute__((unused))

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static char tmpdir[] = "/tmp/kotoba-test-config-XXXXXX";
static char path[512];

static int make_tmpdir(void **state UNUSED)
{
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(path, sizeof(path), "%s/broker.conf", tmpdir);
	return 0;
}

static int remove_tmpdir(void **state UNUSED)
{
	unlink(path);
	return rmdir(tmpdir);
}

/* Writes len bytes to the test's config file and returns its path. */
static const char *write_bytes(const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return path;
}

static const char *write_file(const char *text)
{
	return write_bytes(text, strlen(text));
}

/* Loads text over the defaults; expects failure at line with msg in it. */
static void expect_error(const char *text, unsigned line, const char *msg)
{
	struct config c;
	struct config_error err;

	config_defaults(&c);
	memset(&err, 0, sizeof(err));
	assert_int_equal(config_load(&c, write_file(text), &err), -1);
	if (err.line != line || !strstr(err.message, msg))
		fail_msg("got %s:%u: %s; want line %u containing '%s'",
			 err.file, err.line, err.message, line, msg);
	assert_string_equal(err.file, path);
}

/* Field by field, so a failure names the field. */
static void assert_config_equal(const struct config *a, const struct config *b)
{
#define EQ_NUM(f) assert_true(a->f == b->f)
#define EQ_STR(f) assert_string_equal(a->f, b->f)
	EQ_NUM(sandbox);
	EQ_STR(socket_path);
	EQ_STR(socket_group);
	EQ_NUM(socket_mode);
	EQ_STR(state_dir);
	EQ_STR(user);
	EQ_STR(allow_users);
	EQ_NUM(secrets);
	EQ_STR(secret_paths);
	EQ_STR(allow_groups);
	EQ_STR(worker_path);
	EQ_NUM(max_connections);
	EQ_NUM(max_runs);
	EQ_NUM(max_runs_per_uid);
	EQ_NUM(max_cards_per_conn);
	EQ_STR(python);
	EQ_STR(scratch_dir);
	EQ_NUM(timeout_ms);
	EQ_NUM(timeout_max_ms);
	EQ_NUM(grace_ms);
	EQ_NUM(output_cap);
	EQ_NUM(memory);
	EQ_NUM(processes);
	EQ_NUM(file_size);
	EQ_NUM(open_files);
	EQ_NUM(cpu_s);
	EQ_NUM(snippet_max);
	EQ_NUM(frame_max);
	EQ_NUM(card_timeout_ms);
	EQ_NUM(grant_ttl_ms);
	EQ_NUM(unattended);
	EQ_NUM(escalate);
	EQ_NUM(landlock);
	EQ_STR(container_cli);
	EQ_STR(container_image);
#undef EQ_NUM
#undef EQ_STR
}

static void test_defaults(void **state UNUSED)
{
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(c.sandbox, SANDBOX_LOCAL);
	assert_string_equal(c.socket_path, "");
	assert_string_equal(c.socket_group, "kotoba");
	assert_int_equal(c.socket_mode, 0660);
	assert_string_equal(c.state_dir, "");
	assert_string_equal(c.user, "kotoba");
	assert_string_equal(c.allow_users, "");
	assert_string_equal(c.allow_groups, "");
	assert_string_equal(c.worker_path, "");
	assert_int_equal(c.max_connections, 1024);
	assert_int_equal(c.max_runs, 64);
	assert_int_equal(c.max_runs_per_uid, 16);
	assert_int_equal(c.max_cards_per_conn, 4);
	assert_string_equal(c.python, "/usr/bin/python3");
	assert_string_equal(c.scratch_dir, "/tmp");
	assert_true(c.timeout_ms == 60000);
	assert_true(c.timeout_max_ms == 600000);
	assert_true(c.grace_ms == 2000);
	assert_true(c.output_cap == 200000);
	assert_true(c.memory == 4 * GIB);
	assert_true(c.processes == 512);
	assert_true(c.file_size == GIB);
	assert_true(c.open_files == 256);
	assert_true(c.cpu_s == 600);
	assert_true(c.snippet_max == 1048576);
	assert_true(c.frame_max == 4 * MIB);
	assert_true(c.card_timeout_ms == 300000);
	assert_true(c.grant_ttl_ms == 0); /* until revoked, as the spec says */
	assert_int_equal(c.unattended, UNATTENDED_DOCUMENTED);
	assert_int_equal(c.escalate, ESCALATE_ASK);
	assert_true(c.landlock);
	assert_string_equal(c.container_cli, "docker");
	assert_string_equal(c.container_image, "");
	assert_int_equal(config_validate(&c, &err), 0);
	assert_string_equal(sandbox_mode_name(SANDBOX_LOCAL), "local");
	assert_string_equal(sandbox_mode_name(SANDBOX_DOCKER), "docker");
	assert_string_equal(sandbox_mode_name(SANDBOX_NONE), "none");
}

static const char full_file[] =
	"; every key, none at its default\n"
	"# comment\n"
	"[broker]\n"
	"sandbox = Docker\n"
	"socket = /run/kb/broker.sock\n"
	"socket_group = kb-users\n"
	"socket_mode = 0600\n"
	"state_dir = /var/lib/kb\n"
	"user = _kb\n"
	"allow_users = alice, bob 1001\n"
	"allow_groups = wheel\n"
	"  worker = /usr/libexec/kotoba-worker   ; indented, inline comment\n"
	"max_connections = 10\n"
	"max_runs = 8\n"
	"max_runs_per_uid = 2\n"
	"max_cards_per_conn = 1\n"
	"[python]\n"
	"path = /opt/py/bin/python3\n"
	"scratch_dir: /var/tmp\n"
	"[limits]\n"
	"timeout = 1500ms\n"
	"timeout_max = 5m\n"
	"kill_grace = 0\n"
	"output = 64K\n"
	"memory = 512m\n"
	"processes = 64\n"
	"file_size = 0\n"
	"open_files = 64\n"
	"cpu = 30\n"
	"snippet = 100000\n"
	"frame = 2M\n"
	"[gate]\n"
	"card_timeout = 90\n"
	"grant_ttl = 8h\n"
	"unattended = refuse\n"
	"escalate = never\n"
	"[sandbox]\n"
	"landlock = off\n"
	"[docker]\n"
	"cli = /usr/bin/podman\n"
	"image = docker.io/library/python:3.12-slim\n"
	"url = unix:///run/user/%u/podman/podman.sock\n"
	"python = /usr/local/bin/python3\n"
	"memory = 256M\n"
	"processes = 64\n"
	"nproc = 2048\n"
	"open_files = 512\n"
	"tmpfs = 16M\n"
	"idle = 2m\n"
	"[quota]\n"
	"connections = 5\n"
	"hello_timeout = 2s\n"
	"frame_timeout = 1500ms\n"
	"cards = 3\n"
	"card_bytes = 2M\n"
	"audit_bytes = 16M\n"
	"audit_period = 10m\n"
	"queue = 0\n"
	"queue_timeout = 30\n";

static void check_full(const struct config *c)
{
	assert_int_equal(c->sandbox, SANDBOX_DOCKER);
	assert_string_equal(c->socket_path, "/run/kb/broker.sock");
	assert_string_equal(c->socket_group, "kb-users");
	assert_int_equal(c->socket_mode, 0600);
	assert_string_equal(c->state_dir, "/var/lib/kb");
	assert_string_equal(c->user, "_kb");
	assert_string_equal(c->allow_users, "alice, bob 1001");
	assert_string_equal(c->allow_groups, "wheel");
	assert_string_equal(c->worker_path, "/usr/libexec/kotoba-worker");
	assert_int_equal(c->max_connections, 10);
	assert_int_equal(c->max_runs, 8);
	assert_int_equal(c->max_runs_per_uid, 2);
	assert_int_equal(c->max_cards_per_conn, 1);
	assert_string_equal(c->python, "/opt/py/bin/python3");
	assert_string_equal(c->scratch_dir, "/var/tmp");
	assert_true(c->timeout_ms == 1500);
	assert_true(c->timeout_max_ms == 300000);
	assert_true(c->grace_ms == 0);
	assert_true(c->output_cap == 64 * KIB);
	assert_true(c->memory == 512 * MIB);
	assert_true(c->processes == 64);
	assert_true(c->file_size == 0);
	assert_true(c->open_files == 64);
	assert_true(c->cpu_s == 30);
	assert_true(c->snippet_max == 100000);
	assert_true(c->frame_max == 2 * MIB);
	assert_true(c->card_timeout_ms == 90000);
	assert_true(c->grant_ttl_ms == 8 * 3600000);
	assert_int_equal(c->unattended, UNATTENDED_REFUSE);
	assert_int_equal(c->escalate, ESCALATE_NEVER);
	assert_false(c->landlock);
	assert_string_equal(c->container_cli, "/usr/bin/podman");
	assert_string_equal(c->container_image,
			    "docker.io/library/python:3.12-slim");
	assert_string_equal(c->container_url, "unix:///run/user/%u/podman/podman.sock");
	assert_string_equal(c->container_python, "/usr/local/bin/python3");
	assert_true(c->container_memory == 256 * MIB);
	assert_true(c->container_pids == 64);
	assert_true(c->container_nproc == 2048);
	assert_true(c->container_nofile == 512);
	assert_true(c->container_tmpfs == 16 * MIB);
	assert_true(c->container_idle_ms == 120000);
	assert_int_equal(c->conns_per_uid, 5);
	assert_true(c->hello_timeout_ms == 2000);
	assert_true(c->frame_timeout_ms == 1500);
	assert_int_equal(c->cards_per_uid, 3);
	assert_true(c->card_bytes_per_uid == 2 * MIB);
	assert_true(c->audit_bytes == 16 * MIB);
	assert_true(c->audit_period_ms == 600000);
	assert_int_equal(c->queue, 0);
	assert_true(c->queue_timeout_ms == 30000);
}

static void test_full_file(void **state UNUSED)
{
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(config_load(&c, write_file(full_file), &err), 0);
	check_full(&c);
	assert_int_equal(config_validate(&c, &err), 0);
}

static void test_bom_and_empty(void **state UNUSED)
{
	struct config c, d;
	struct config_error err;

	config_defaults(&c);
	config_defaults(&d);
	assert_int_equal(config_load(&c, write_file(""), &err), 0);
	assert_int_equal(config_load(&c, write_file("\n\n; x\n# y\n"), &err), 0);
	assert_config_equal(&c, &d);
	assert_int_equal(config_load(&c, write_file(
		"\xef\xbb\xbf[gate]\r\nunattended = refuse\r\n"), &err), 0);
	assert_int_equal(c.unattended, UNATTENDED_REFUSE);
}

static void test_errors(void **state UNUSED)
{
	expect_error("[broker]\nsandbox = local\n\n[brokr]\nuser = x\n", 4,
		     "unknown section [brokr]");
	expect_error("[limits]\ntimeout = 5\nmemroy = 1G\n", 3,
		     "unknown key 'memroy' in [limits]");
	expect_error("[broker]\ntimeout = 5\n", 2, "it belongs in [limits]");
	expect_error("[limits]\n\ntimeout = soon\n", 3,
		     "[limits] timeout: 'soon' is not valid; accepted: seconds");
	expect_error("[limits]\nopen_files = 4\n", 2,
		     "[limits] open_files: '4' is out of range; accepted: a "
		     "whole number from 16 to 1048576");
	expect_error("[gate]\ncard_timeout = 60\n; c\ncard_timeout = 61\n", 4,
		     "duplicate key [gate] card_timeout; first set on line 2");
	expect_error("[gate]\ncard_timeout = 60\n[gate]\ncard_timeout = 6\n",
		     4, "first set on line 2");
	expect_error("[gate]\n\ngrant_ttl = 8 hours\n", 3,
		     "[gate] grant_ttl: '8 hours' is not valid; accepted: seconds, or a number "
		     "with ms, s, m, h or d after it, from 0s to 31622400s");
	expect_error("[gate]\ngrant_ttl = 367d\n", 2,
		     "[gate] grant_ttl: '367d' is out of range");
	expect_error("[gate]\ngrant_ttl = -1h\n", 2, "[gate] grant_ttl: '-1h' is not valid");
	expect_error("[audit]\nsync_window = 2s\n", 2,
		     "[audit] sync_window: '2s' is out of range");
	expect_error("[audit]\n\nsync_window = soon\n", 3, "[audit] sync_window: 'soon' is not valid");
	expect_error("[broker]\nthis line has no equals sign\n", 2,
		     "expected '[section]' or 'key = value'");
	expect_error("[broker\nuser = x\n", 1, "expected '[section]'");
	expect_error("user = x\n", 1, "outside any [section]");
	expect_error("[sandbox]\nlandlock = maybe\n", 2,
		     "accepted: yes, no, true, false, on, off, 1 or 0");
	expect_error("[broker]\nsandbox = podman\n", 2,
		     "accepted: local, docker, none");
	expect_error("[broker]\nsocket_mode = 0999\n", 2, "not valid");
	expect_error("[broker]\nsocket_mode = 01777\n", 2, "out of range");
	expect_error("[python]\npath = python3\n", 2, "absolute path");
	expect_error("[python]\npath =\n", 2, "must not be empty");
	expect_error("[broker]\nuser = bad user\n", 2, "must not contain spaces");
	expect_error("[broker]\nallow_users = alice, b@d\n", 2,
		     "'b@d' is not a user or group name");
	/* Secret places: absolute, ~/, or a file name; no '..', no lone '/'. */
	expect_error("[sandbox]\n\nsecret_paths = ~/.vault-token, conf/x\n", 3,
		     "[sandbox] secret_paths: 'conf/x' is a relative path");
	expect_error("[sandbox]\nsecret_paths = /srv/../etc/x\n", 2,
		     "'/srv/../etc/x' has an empty, '.' or '..' component");
	expect_error("[sandbox]\nsecret_paths = /\n", 2, "would mask every file");
	expect_error("[sandbox]\nsecret_paths = ~x\n", 2, "'~x' must be an absolute path");
	expect_error("[sandbox]\nsecret_paths = /srv//x\n", 2, "empty, '.' or '..'");
	expect_error("[sandbox]\nsecret_paths = ~/.cfg/\n", 2, "ends in '/'");
	expect_error("[sandbox]\nsecret_paths = *.pem\n", 2, "'*' only at the end");
	expect_error("[sandbox]\nsecret_paths = /srv/*\n", 2, "'*' only at the end");
	expect_error("[sandbox]\nsecrets = maybe\n", 2, "accepted: yes, no");
	{
		struct config c;
		struct config_error err;

		config_defaults(&c);
		assert_true(c.secrets);
		assert_int_equal(config_load(&c, write_file("[sandbox]\nsecrets = off\n"
							    "secret_paths = ~/.vault-token, "
							    "/srv/app/creds .secrets.toml,"
							    ".env.*\n"), &err), 0);
		assert_false(c.secrets);
		assert_string_equal(c.secret_paths,
				    "~/.vault-token, /srv/app/creds .secrets.toml,.env.*");
	}
	/* An indented word is not a continuation of the value above. */
	expect_error("[broker]\nuser = x\n   y\n", 3, "expected '[section]'");
	/* The first error in the file wins, whichever side found it. */
	expect_error("[broker]\nno equals\nuser = bad user\n", 2, "expected");
	expect_error("[broker]\nuser = bad user\nno equals\n", 2, "spaces");
}

static void test_long_values(void **state UNUSED)
{
	char text[8192], big[600];
	struct config c;
	struct config_error err;

	/* 107 bytes is the most sun_path holds with its NUL. */
	memset(big, 'a', sizeof(big));
	big[0] = '/';
	snprintf(text, sizeof(text), "[broker]\nsocket = %.107s\n", big);
	config_defaults(&c);
	assert_int_equal(config_load(&c, write_file(text), &err), 0);
	assert_int_equal(strlen(c.socket_path), 107);
	snprintf(text, sizeof(text), "[broker]\n\nsocket = %.108s\n", big);
	expect_error(text, 3, "value is 108 bytes; at most 107 fit");

	/* A full allow_users line is longer than inih's stock 200 bytes. */
	memset(big, 'u', sizeof(big));
	snprintf(text, sizeof(text), "[broker]\nallow_users = %.511s\n", big);
	assert_int_equal(config_load(&c, write_file(text), &err), 0);
	assert_int_equal(strlen(c.allow_users), 511);
	snprintf(text, sizeof(text), "[broker]\nallow_users = %.512s\n", big);
	expect_error(text, 2, "at most 511 fit");

	memset(text, 'x', sizeof(text));
	memcpy(text, "[broker]\n; ", 11);
	text[sizeof(text) - 1] = '\0';
	expect_error(text, 2, "line longer than");
}

static void test_nul_and_missing(void **state UNUSED)
{
	static const char nul[] = "[broker]\nuser = a\0b\n";
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(config_load(&c, write_bytes(nul, sizeof(nul) - 1),
				     &err), -1);
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.message, "NUL"));

	assert_int_equal(config_load(&c, "/nonexistent/kotoba.conf", &err), -1);
	assert_string_equal(err.file, "/nonexistent/kotoba.conf");
	assert_int_equal(err.line, 0);
	assert_non_null(strstr(err.message, "No such file"));

	assert_int_equal(config_load(&c, tmpdir, &err), -1);
	assert_non_null(strstr(err.message, "directory"));

	write_file("[broker]\n");
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(config_load(&c, path, &err), -1);
	assert_non_null(strstr(err.message, "writable by every user"));
	assert_int_equal(chmod(path, 0644), 0);
}

/* Nothing from a failing file is applied, not even its valid lines. */
static void test_load_is_atomic(void **state UNUSED)
{
	struct config c, d;
	struct config_error err;

	config_defaults(&c);
	config_defaults(&d);
	assert_int_equal(config_load(&c, write_file(
		"[broker]\nuser = other\nsandbox = none\nmax_runs = x\n"),
		&err), -1);
	assert_config_equal(&c, &d);
}

static int set1(struct config *c, const char *sec, const char *key,
		const char *val)
{
	struct config_error err;

	return config_set(c, sec, key, val, &err);
}

static void test_suffixes(void **state UNUSED)
{
	struct config c;

	config_defaults(&c);
	assert_int_equal(set1(&c, "limits", "memory", "17179869184"), 0);
	assert_true(c.memory == 16 * GIB);
	assert_int_equal(set1(&c, "limits", "memory", "20000k"), 0);
	assert_true(c.memory == 20000 * KIB);
	assert_int_equal(set1(&c, "limits", "memory", "100M"), 0);
	assert_true(c.memory == 100 * MIB);
	assert_int_equal(set1(&c, "limits", "memory", "1024G"), 0);
	assert_true(c.memory == 1024 * GIB);
	assert_int_equal(set1(&c, "limits", "memory", "1025G"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "99999999999G"), -1);
	assert_int_equal(set1(&c, "limits", "memory",
			      "99999999999999999999999"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "18446744073709551615"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "-1"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "+1G"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "1 G"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "1GB"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "0x10M"), -1);
	assert_int_equal(set1(&c, "limits", "memory", "G"), -1);
	assert_int_equal(set1(&c, "limits", "memory", ""), -1);
	assert_true(c.memory == 1024 * GIB);	/* failures change nothing */

	assert_int_equal(set1(&c, "limits", "timeout", "90"), 0);
	assert_true(c.timeout_ms == 90000);
	assert_int_equal(set1(&c, "limits", "timeout", "90s"), 0);
	assert_true(c.timeout_ms == 90000);
	assert_int_equal(set1(&c, "limits", "timeout", "250ms"), 0);
	assert_true(c.timeout_ms == 250);
	assert_int_equal(set1(&c, "limits", "timeout", "3m"), 0);
	assert_true(c.timeout_ms == 180000);
	assert_int_equal(set1(&c, "limits", "timeout", "1440m"), 0);
	assert_int_equal(set1(&c, "limits", "timeout", "1441m"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "99ms"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "1h"), 0);
	assert_true(c.timeout_ms == 3600000);
	assert_int_equal(set1(&c, "limits", "timeout", "1d"), 0);
	assert_int_equal(set1(&c, "limits", "timeout", "2d"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "1w"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "1H"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "1.5s"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "307445734561825861m"), -1);
	assert_int_equal(set1(&c, "limits", "timeout", "18446744073709551615s"), -1);
	assert_true(c.timeout_ms == 1440 * 60000);

	assert_int_equal(set1(&c, "broker", "max_runs", "4096"), 0);
	assert_int_equal(set1(&c, "broker", "max_runs", "4097"), -1);
	assert_int_equal(set1(&c, "broker", "max_runs", "0"), -1);
	assert_int_equal(set1(&c, "broker", "max_runs", "4294967297"), -1);
	assert_int_equal(c.max_runs, 4096);
	assert_int_equal(set1(&c, "broker", "socket_mode", "600"), 0);
	assert_int_equal(c.socket_mode, 0600);
	assert_int_equal(set1(&c, "sandbox", "landlock", "TRUE"), 0);
	assert_true(c.landlock);
	assert_int_equal(set1(&c, "sandbox", "landlock", "0"), 0);
	assert_false(c.landlock);
}

static void test_config_set_errors(void **state UNUSED)
{
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(config_set(&c, "broker", "sandbox", "docker", &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_DOCKER);
	assert_int_equal(config_set(&c, "nope", "sandbox", "x", &err), -1);
	assert_string_equal(err.file, "");
	assert_int_equal(err.line, 0);
	assert_non_null(strstr(err.message, "unknown section [nope]"));
	assert_int_equal(config_set(&c, "broker", "nope", "x", &err), -1);
	assert_non_null(strstr(err.message, "unknown key 'nope'"));
	assert_int_equal(config_set(&c, "broker", "sandbox", NULL, &err), -1);
	assert_int_equal(config_set(&c, NULL, "sandbox", "x", &err), -1);
	assert_int_equal(config_set(&c, "broker", NULL, "x", &err), -1);
	assert_int_equal(config_set(&c, "broker", "sandbox", "x", NULL), -1);
	/* From the command line, values the file could not say back. */
	assert_int_equal(set1(&c, "python", "path", " /usr/bin/python3"), -1);
	assert_int_equal(set1(&c, "python", "path", "/a ;b"), -1);
	assert_int_equal(set1(&c, "python", "path", "/a\nb"), -1);
	assert_int_equal(set1(&c, "python", "path", "/a;b"), 0);
	assert_int_equal(c.sandbox, SANDBOX_DOCKER);
}

static void test_env(void **state UNUSED)
{
	const char *good[] = { "PATH=/bin", "KOTOBA_SANDBOX=none",
			       "KOTOBA_SANDBOX=local", NULL };
	const char *bad[] = { "KOTOBA_SANDBOX=chroot", NULL };
	const char *empty[] = { "KOTOBA_SANDBOX=", NULL };
	const char *other[] = { "KOTOBA_SANDBOXX=docker", "HOME=/", NULL };
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(config_apply_env(&c, good, &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_NONE);	/* first one, as getenv */
	assert_int_equal(config_apply_env(&c, bad, &err), -1);
	assert_non_null(strstr(err.message, "KOTOBA_SANDBOX='chroot'"));
	assert_non_null(strstr(err.message, "local, docker, none"));
	assert_int_equal(err.line, 0);
	assert_int_equal(c.sandbox, SANDBOX_NONE);
	assert_int_equal(config_apply_env(&c, empty, &err), -1);
	assert_non_null(strstr(err.message, "KOTOBA_SANDBOX"));
	assert_int_equal(config_apply_env(&c, other, &err), 0);
	assert_int_equal(config_apply_env(&c, NULL, &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_NONE);
}

/* defaults < file < KOTOBA_SANDBOX < command line, as the broker calls. */
static void test_precedence(void **state UNUSED)
{
	const char *env[] = { "KOTOBA_SANDBOX=docker", NULL };
	struct config c;
	struct config_error err;

	config_defaults(&c);
	assert_int_equal(config_load(&c, write_file(
		"[broker]\nsandbox = none\nmax_runs = 20\n"), &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_NONE);
	assert_int_equal(config_apply_env(&c, env, &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_DOCKER);
	assert_int_equal(config_set(&c, "broker", "sandbox", "local", &err), 0);
	assert_int_equal(c.sandbox, SANDBOX_LOCAL);
	assert_int_equal(c.max_runs, 20);

	/* A second file applies over the first; keys it lacks stay. */
	assert_int_equal(config_load(&c, write_file("[gate]\ncard_timeout = 5\n"),
				     &err), 0);
	assert_int_equal(c.max_runs, 20);
	assert_true(c.card_timeout_ms == 5000);
	assert_int_equal(config_validate(&c, &err), 0);
}

static void test_validate(void **state UNUSED)
{
	struct config c;
	struct config_error err;

	config_defaults(&c);
	c.timeout_ms = c.timeout_max_ms + 1;
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "timeout_max"));

	config_defaults(&c);
	assert_int_equal(set1(&c, "limits", "snippet", "4M"), 0);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "[limits] frame = 4M must exceed"));
	assert_int_equal(set1(&c, "limits", "frame", "4160K"), 0);
	assert_int_equal(config_validate(&c, &err), -1);	/* exactly +64K */
	assert_int_equal(set1(&c, "limits", "frame", "4161K"), 0);
	assert_int_equal(config_validate(&c, &err), 0);

	config_defaults(&c);
	c.max_runs_per_uid = c.max_runs + 1;
	assert_int_equal(config_validate(&c, &err), -1);

	/* One user's connections may never be more than half of them all. */
	config_defaults(&c);
	assert_int_equal(set1(&c, "broker", "max_connections", "64"), 0);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_int_equal(set1(&c, "quota", "connections", "33"), 0);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "[quota] connections = 33 is over half"));

	/* The same for the egress proxy's connections. */
	config_defaults(&c);
	assert_int_equal(set1(&c, "egress", "connections", "8"), 0);
	assert_int_equal(set1(&c, "egress", "connections_per_user", "4"), 0);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_int_equal(set1(&c, "egress", "connections_per_user", "5"), 0);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "[egress] connections_per_user = 5 is over half"));

	/* A struct built by hand gets the file's checks too. */
	config_defaults(&c);
	c.sandbox = (enum sandbox_mode)7;
	assert_int_equal(config_validate(&c, &err), -1);
	config_defaults(&c);
	c.memory = 1;
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "[limits] memory"));
	config_defaults(&c);
	memset(c.user, 'x', sizeof(c.user));
	assert_int_equal(config_validate(&c, &err), -1);

	/* Docker mode: an image is required; podman picks no runtime. */
	config_defaults(&c);
	assert_int_equal(set1(&c, "broker", "sandbox", "docker"), 0);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "needs [docker] image"));
	assert_int_equal(set1(&c, "docker", "image", "localhost/py:1"), 0);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_int_equal(set1(&c, "docker", "runtime", "runc"), 0);
	assert_int_equal(config_validate(&c, &err), 0);	/* docker run --runtime */
	assert_int_equal(set1(&c, "docker", "cli", "/usr/bin/podman"), 0);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err.message, "podman --runtime runc system service"));
	assert_int_equal(set1(&c, "docker", "memory", "1K"), -1);
	assert_int_equal(set1(&c, "docker", "url", "unix:///a b"), -1);
}

static char *print_to_string(const struct config *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	config_print(f, c);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* "/s/00aaa...a /s/01aaa...a ..." filling all len - 1 bytes. */
static void longest_secret_paths(char *buf, size_t len)
{
	size_t each = len / CONFIG_SECRET_PATHS_MAX, i;

	assert_int_equal(each * CONFIG_SECRET_PATHS_MAX, len);
	memset(buf, 'a', len);
	for (i = 0; i < CONFIG_SECRET_PATHS_MAX; i++) {
		char head[8];

		snprintf(head, sizeof(head), "/s/%02zu", i);
		memcpy(buf + i * each, head, strlen(head));
		buf[i * each + each - 1] = ' ';
	}
	buf[len - 1] = '\0';
	assert_int_equal(strlen(buf), len - 1);
}

static void test_print_round_trip(void **state UNUSED)
{
	struct config c, d;
	struct config_error err;
	char *text;

	config_defaults(&c);
	assert_int_equal(config_load(&c, write_file(full_file), &err), 0);
	assert_int_equal(set1(&c, "python", "path", "/x;y#z=w:v"), 0);
	text = print_to_string(&c);
	assert_non_null(strstr(text, "# (default: /usr/bin/python3)"));

	config_defaults(&d);
	assert_int_equal(config_load(&d, write_file(text), &err), 0);
	assert_config_equal(&c, &d);
	free(text);

	/* The longest field, full: 32 secret places of 63 bytes each. */
	config_defaults(&c);
	longest_secret_paths(c.secret_paths, sizeof(c.secret_paths));
	assert_int_equal(config_validate(&c, &err), 0);
	text = print_to_string(&c);
	config_defaults(&d);
	assert_int_equal(config_load(&d, write_file(text), &err), 0);
	assert_config_equal(&c, &d);
	free(text);

	/* And the defaults print to what the defaults parse from. */
	config_defaults(&c);
	text = print_to_string(&c);
	memset(&d, 0xa5, sizeof(d));
	config_defaults(&d);
	assert_int_equal(set1(&d, "limits", "timeout", "1"), 0);
	assert_int_equal(config_load(&d, write_file(text), &err), 0);
	assert_config_equal(&c, &d);
	free(text);
}

static char *read_all(const char *name)
{
	FILE *f = fopen(name, "r");
	char *buf;
	long len;

	if (!f)
		fail_msg("cannot open %s (tests run from the repo root)", name);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 0);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return buf;
}

/*
 * dist/broker.conf loads to exactly the defaults, and holds every section
 * and key line config_print writes, in the same order, uncommented.
 */
static void test_dist_example(void **state UNUSED)
{
	static const char dist[] = "dist/broker.conf";
	struct config c, d;
	struct config_error err;
	char *printed, *file, *line, *pos, *save = NULL;

	config_defaults(&c);
	config_defaults(&d);
	assert_int_equal(config_load(&c, dist, &err), 0);
	assert_config_equal(&c, &d);

	printed = print_to_string(&d);
	file = read_all(dist);
	pos = file;
	for (line = strtok_r(printed, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char want[700];
		char *hit;

		if (line[0] == '#')
			continue;
		snprintf(want, sizeof(want), "\n%s\n", line);
		hit = strstr(pos, want);
		if (!hit)
			fail_msg("%s lacks the line '%s' (or has it out of "
				 "order)", dist, line);
		pos = hit + 1;
	}
	free(printed);
	free(file);
}

/* Random bytes, and mutations of a valid file: an answer, never a crash. */
static void test_random_input(void **state UNUSED)
{
	size_t full_len = sizeof(full_file) - 1;
	char buf[4096];
	struct config c;
	struct config_error err;
	int i, ok = 0;

	srandom(12345);
	for (i = 0; i < 400; i++) {
		size_t j, len = 16 + (size_t)random() % (sizeof(buf) - 16);

		for (j = 0; j < len; j++)
			buf[j] = (char)random();
		config_defaults(&c);
		memset(&err, 0, sizeof(err));
		assert_int_equal(config_load(&c, write_bytes(buf, len), &err), -1);
		assert_true(err.message[0] != '\0');
		assert_non_null(memchr(err.message, '\0', sizeof(err.message)));
	}
	for (i = 0; i < 400; i++) {
		size_t j, lines = 1, flips = 1 + (size_t)random() % 4;

		memcpy(buf, full_file, full_len);
		for (j = 0; j < flips; j++)
			buf[(size_t)random() % full_len] = (char)random();
		config_defaults(&c);
		for (j = 0; j < full_len; j++)
			lines += buf[j] == '\n';
		if (config_load(&c, write_bytes(buf, full_len), &err) == 0)
			ok++;
		else
			assert_true(err.line <= lines);
		config_validate(&c, &err);
	}
	print_message("mutated files accepted: %d of 400\n", ok);
}

static void test_random_set(void **state UNUSED)
{
	static const char *const pairs[][2] = {
		{ "broker", "sandbox" }, { "broker", "socket" },
		{ "broker", "socket_mode" }, { "broker", "allow_users" },
		{ "limits", "memory" }, { "limits", "timeout" },
		{ "limits", "cpu" }, { "sandbox", "landlock" },
	};
	static const char alphabet[] = "0123456789kKmMgGsS ,;-+x\t/\x01\xff";
	char val[64];
	struct config c;
	struct config_error err;
	int i;

	config_defaults(&c);
	srandom(777);
	for (i = 0; i < 4000; i++) {
		size_t j, len = (size_t)random() % (sizeof(val) - 1);
		size_t p = (size_t)random() % (sizeof(pairs) / sizeof(pairs[0]));

		for (j = 0; j < len; j++)
			val[j] = alphabet[(size_t)random() %
					  (sizeof(alphabet) - 1)];
		val[len] = '\0';
		if (config_set(&c, pairs[p][0], pairs[p][1], val, &err) == -1)
			assert_true(err.message[0] != '\0');
	}
	assert_int_equal(config_validate(&c, &err) == 0 ||
			 err.message[0] != '\0', 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_bom_and_empty),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_long_values),
		cmocka_unit_test(test_nul_and_missing),
		cmocka_unit_test(test_load_is_atomic),
		cmocka_unit_test(test_suffixes),
		cmocka_unit_test(test_config_set_errors),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_print_round_trip),
		cmocka_unit_test(test_dist_example),
		cmocka_unit_test(test_random_input),
		cmocka_unit_test(test_random_set),
	};

	return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
