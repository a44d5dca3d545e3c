// link: broker/container.c broker/privsep.c broker/config.c broker/log.c broker/loop.c proto/decode_util.c proto/names.c broker/egress/policy.c
/* The warm-container table and the engine command lines (broker/container.c).
 * The engines themselves are exercised for real in tests/container/; here,
 * what the broker asks of them, flag by flag, and when it keeps, reuses or
 * replaces a container.  The engine runner is the broker's way to start a
 * worker: this file records the stop commands it is handed instead. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "broker/container.h"

#define UNUSED __attribute__((unused))

static char stopped[8][64];
static size_t n_stopped;

static const struct engine_job *last_job;
static const struct run_ops *last_ops;

static int record_engine(struct broker *b, uid_t peer, const struct engine_job *j,
			 const struct run_ops *ops, void *ctx, char *err, size_t errlen)
{
	const struct job_argv *a = &j->e.run;

	last_job = j;
	last_ops = ops;
	if (a->n >= 3 && pstr_eq(a->v[a->n - 3], "rm") && pstr_eq(a->v[a->n - 2], "--force"))
		snprintf(stopped[n_stopped++ % 8], 64, "%.*s", (int)a->v[a->n - 1].len,
			 a->v[a->n - 1].ptr);
	return 0;
}

static char dir[] = "/tmp/kotoba-test-container-XXXXXX";
static char podman[128], docker[128];
static struct broker b;
static const struct identity ada = { .uid = 1000, .gid = 1000, .name = "ada" };

static void fake_cli(char *path, size_t len, const char *name)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\nexit 0\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

static int setup(void **state UNUSED)
{
	if (!mkdtemp(dir))
		return -1;
	fake_cli(podman, sizeof(podman), "podman");
	fake_cli(docker, sizeof(docker), "docker");
	return 0;
}

static int teardown(void **state UNUSED)
{
	unlink(podman);
	unlink(docker);
	rmdir(dir);
	return 0;
}

static void configure(const char *cli, const char *url, const char *runtime)
{
	struct config_error err;

	memset(&b, 0, sizeof(b));
	config_defaults(&b.cfg);
	b.cfg.sandbox = SANDBOX_DOCKER;
	snprintf(b.cfg.container_cli, sizeof(b.cfg.container_cli), "%s", cli);
	snprintf(b.cfg.container_image, sizeof(b.cfg.container_image), "localhost/py:1");
	snprintf(b.cfg.container_url, sizeof(b.cfg.container_url), "%s", url);
	snprintf(b.cfg.container_runtime, sizeof(b.cfg.container_runtime), "%s", runtime);
	assert_int_equal(config_set(&b.cfg, "docker", "memory", "256M", &err), 0);
	n_stopped = 0;
	last_job = NULL;
	last_ops = NULL;
	container_set_runner(record_engine);
}

static bool has(const struct job_argv *a, const char *want)
{
	for (size_t i = 0; i < a->n; i++)
		if (pstr_eq(a->v[i], want))
			return true;
	return false;
}

static bool has_prefix(const struct job_argv *a, const char *want)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].len >= strlen(want) && !memcmp(a->v[i].ptr, want, strlen(want)))
			return true;
	return false;
}

static struct run_info ended(bool clean)
{
	struct run_info r = { .end = END_FINISHED };

	r.result.exited = true;
	r.result.code = 0;
	r.result.timed_out = !clean;
	return r;
}

/* Ends ct's run with a timeout: the table drops it, and frees it. */
static void finish(struct container *ct)
{
	struct run_info r = ended(false);

	container_release(&b, ct, &r);
}

/* The output directory: a tmpfs mounted at the container's start, which the
 * snippet cannot swap for a symlink, named by the broker alone (a client's
 * own is dropped), and copied out by the engine into the directory the
 * worker puts in place of the argument. */
static void check_output_dir(const struct engine_job *j, const struct container *ct)
{
	const struct job_argv *run = &j->e.run, *out = &j->e.outputs;
	const struct job_argv *start = &j->e.steps[2].argv;
	char src[160], mount[160];
	size_t n = 0;

	for (size_t i = 0; i < run->n; i++)
		n += run->v[i].len > 18 && !memcmp(run->v[i].ptr, "--env=KOTOBA_OUTPUT", 19);
	assert_int_equal(n, 1);
	assert_true(has(run, "--env=KOTOBA_OUTPUT_DIR=" CONTAINER_OUT_DIR));
	snprintf(mount, sizeof(mount), "--tmpfs=%s:rw,nosuid,nodev,noexec,size=%" PRIu64
		 ",mode=0700,U", CONTAINER_OUT_DIR, b.cfg.container_tmpfs);
	assert_true(has(start, mount));
	assert_true(has(out, "cp"));
	assert_true(pstr_eq(out->v[out->n - 1], PROTO_OUTPUT_DIR_ARG));
	snprintf(src, sizeof(src), "%s:%s/.", ct->name, CONTAINER_OUT_DIR);
	assert_true(pstr_eq(out->v[out->n - 2], src));
}

static void test_cold_start_flags(void **state UNUSED)
{
	static struct engine_job j;
	char *env[] = { "PATH=/usr/bin", "HOME=/home/ada", "LANG=C.UTF-8", "XDG_X=1",
			"KOTOBA_OUTPUT_DIR=/home/ada/w" };
	const struct job_argv *run;
	struct container *ct;
	char err[200];

	configure(podman, "", "");
	assert_int_equal(container_claim(&b, 1000, &ada, "/home/ada/w", &ct, err, sizeof(err)), 0);
	assert_false(ct->started);
	assert_int_equal(strncmp(ct->name, "kotoba-1000-", 12), 0);
	assert_int_equal(container_snippet_job(&b, ct, env, 5, &j, err, sizeof(err)), 0);
	assert_int_equal(j.e.n_steps, 3);
	assert_true(pstr_eq(j.e.steps[0].name, "engine"));
	assert_true(pstr_eq(j.e.steps[1].name, "image"));
	assert_true(pstr_eq(j.e.steps[2].name, "container"));
	for (size_t i = 0; i < 3; i++) {
		assert_true(pstr_eq(j.e.steps[i].argv.v[0], podman));
		assert_true(has(&j.e.steps[i].argv, "--remote"));
		/* podman's default: the user's own rootless service */
		assert_true(has(&j.e.steps[i].argv,
				"--url=unix:///run/user/1000/podman/podman.sock"));
	}
	const struct job_argv *start = &j.e.steps[2].argv;
	static const char *const flags[] = {
		"--network=none", "--read-only", "--cap-drop=all",
		"--security-opt=no-new-privileges", "--memory=268435456",
		"--memory-swap=268435456", "--pids-limit=256", "--ulimit=nofile=1024:1024",
		"--ulimit=nproc=4096:4096", "--user=1000:1000",
		"--volume=/home/ada/w:/home/ada/w:rw", "--workdir=/home/ada/w", "--rm",
		"--stop-timeout=0", "--entrypoint=python3", "localhost/py:1",
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!has(start, flags[i]))
			fail_msg("the container is started without %s", flags[i]);
	assert_true(has_prefix(start, "--tmpfs=/tmp:rw,nosuid,nodev,size=67108864"));
	assert_false(has_prefix(start, "--runtime"));
	assert_true(has(start, "--read-only-tmpfs=false"));
	/* The worker puts the working directory's secret masks here. */
	for (size_t i = 0; i + 1 < start->n; i++)
		if (pstr_eq(start->v[i], "--volume=/home/ada/w:/home/ada/w:rw"))
			assert_true(pstr_eq(start->v[i + 1], PROTO_SECRET_MASKS_ARG));
	/* Only the working directory is mounted. */
	for (size_t i = 0; i < start->n; i++)
		if (start->v[i].len > 8 && !memcmp(start->v[i].ptr, "--volume", 8))
			assert_true(pstr_eq(start->v[i], "--volume=/home/ada/w:/home/ada/w:rw"));

	run = &j.e.run;
	/* python3 starts isolated, as on the host: -I ignores PYTHON*
	 * variables, the user site and the working directory on sys.path;
	 * the constant after -c reads the code from stdin. */
	assert_true(pstr_eq(run->v[run->n - 1], PYTHON_CONTAINER_PRELUDE PYTHON_SNIPPET_MAIN));
	assert_true(pstr_eq(run->v[run->n - 2], "-c"));
	assert_true(pstr_eq(run->v[run->n - 3], "-u"));
	assert_true(pstr_eq(run->v[run->n - 4], "-B"));
	assert_true(pstr_eq(run->v[run->n - 5], "-I"));
	assert_true(pstr_eq(run->v[run->n - 6], "python3"));
	assert_true(pstr_eq(run->v[run->n - 7], ct->name));
	assert_true(has(run, "--interactive") && has(run, "--env=LANG=C.UTF-8"));
	assert_true(has(run, "--env=HOME=/tmp") && has(run, "--env=TMPDIR=/tmp"));
	assert_false(has(run, "--env=PATH=/usr/bin") || has(run, "--env=HOME=/home/ada"));
	assert_false(has(run, "--env=XDG_X=1"));
	check_output_dir(&j, ct);
	assert_true(has(&j.e.kill, "rm") && has(&j.e.kill, ct->name));
	assert_true(has(&j.e.oom, "exec") && has(&j.e.oom, ct->name));
	/* The keep-alive and the OOM probe start isolated too: a signal.py
	 * a snippet left in the mounted working directory is never imported. */
	assert_true(has(start, "-I") && has(&j.e.oom, "-I"));
	finish(ct);
}

static void test_docker_host_and_runtime(void **state UNUSED)
{
	static struct engine_job j;
	struct container *ct;
	char err[200], mount[160];

	configure(docker, "unix:///run/docker-%u.sock", "runc");
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &ct, err, sizeof(err)), 0);
	assert_int_equal(container_snippet_job(&b, ct, NULL, 0, &j, err, sizeof(err)), 0);
	assert_true(has(&j.e.steps[2].argv, "--host=unix:///run/docker-1000.sock"));
	assert_false(has(&j.e.steps[2].argv, "--remote"));
	assert_false(has(&j.e.steps[2].argv, "--read-only-tmpfs=false")); /* podman only */
	assert_true(has(&j.e.steps[2].argv, "--runtime=runc"));
	assert_true(has(&j.e.steps[2].argv, PROTO_SECRET_MASKS_ARG));
	/* docker's tmpfs has no U: the owner is given as the mount's options. */
	snprintf(mount, sizeof(mount), "--tmpfs=%s:rw,nosuid,nodev,noexec,size=%" PRIu64
		 ",mode=0700,uid=1000,gid=%u", CONTAINER_OUT_DIR, b.cfg.container_tmpfs,
		 (unsigned)ct->gid);
	assert_true(has(&j.e.steps[2].argv, mount));
	finish(ct);

	/* secrets = off: no masks asked for. */
	b.cfg.secrets = false;
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &ct, err, sizeof(err)), 0);
	assert_int_equal(container_snippet_job(&b, ct, NULL, 0, &j, err, sizeof(err)), 0);
	assert_false(has(&j.e.steps[2].argv, PROTO_SECRET_MASKS_ARG));
	b.cfg.secrets = true;
	finish(ct);
}

/* A process in the container could reach a socket in the mounted
 * directory, and would not look like a run to the broker. */
static void test_a_cwd_holding_the_socket_is_not_mounted(void **state UNUSED)
{
	static const char *const holds[] = { "/home/ada", "/home/ada/", "/home", "/" };
	struct container *ct;
	char err[200];

	configure(podman, "", "");
	b.listen.fd = -1;
	snprintf(b.socket_path, sizeof(b.socket_path), "/home/ada/.kotoba/broker.sock");
	for (size_t i = 0; i < sizeof(holds) / sizeof(holds[0]); i++) {
		assert_int_equal(container_claim(&b, 1000, &ada, holds[i], &ct, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "socket"));
	}
	assert_int_equal(container_claim(&b, 1000, &ada, "/home/ada/w", &ct, err, sizeof(err)), 0);
	finish(ct);
	assert_int_equal(container_claim(&b, 1000, &ada, "/home/ad", &ct, err, sizeof(err)), 0);
	finish(ct);
}

static void test_warm_reuse_and_replacement(void **state UNUSED)
{
	static struct engine_job j;
	struct container *a, *a2, *other, *a3;
	struct run_info clean = ended(true), late = ended(false);
	char err[200], name[64];

	configure(podman, "unix:///e.sock", "");
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &a, err, sizeof(err)), 0);
	snprintf(name, sizeof(name), "%s", a->name);
	container_release(&b, a, &clean);
	assert_int_equal(n_stopped, 0);
	/* Same user and directory: the warm one, with no start steps. */
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &a2, err, sizeof(err)), 0);
	assert_ptr_equal(a2, a);
	assert_int_equal(container_snippet_job(&b, a2, NULL, 0, &j, err, sizeof(err)), 0);
	assert_int_equal(j.e.n_steps, 0);
	/* Busy: a second snippet of the same key gets a container of its own. */
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &other, err, sizeof(err)), 0);
	assert_ptr_not_equal(other, a2);
	container_release(&b, other, &late);
	/* A timeout replaces the container: stopped, and the next is new. */
	container_release(&b, a2, &late);
	assert_int_equal(n_stopped, 2);
	assert_string_equal(stopped[1], name);
	assert_int_equal(container_claim(&b, 1000, &ada, "/w", &a3, err, sizeof(err)), 0);
	assert_false(a3->started);
	assert_string_not_equal(a3->name, name);
	finish(a3);
}

static void test_exit_statuses_that_replace(void **state UNUSED)
{
	static const struct {
		bool exited;
		int64_t code;
		bool keep;
	} cases[] = { { true, 0, true },    { true, 1, true },   { true, 124, true },
		      { true, 125, false }, { true, 126, false }, { true, 127, false },
		      { true, 137, false }, { true, 143, true },  { false, 9, false } };
	struct container *ct;
	char err[200];

	configure(podman, "unix:///e.sock", "");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run_info r = ended(true);

		r.result.exited = cases[i].exited;
		r.result.code = cases[i].code;
		n_stopped = 0;
		assert_int_equal(container_claim(&b, 1000, &ada, "/x", &ct, err, sizeof(err)), 0);
		container_release(&b, ct, &r);
		if ((n_stopped == 0) != cases[i].keep)
			fail_msg("exit %lld (%s): container %s", (long long)cases[i].code,
				 cases[i].exited ? "exited" : "signal",
				 cases[i].keep ? "should stay warm" : "should be replaced");
		containers_stop_all(&b);
	}
}

static void test_setup_failures(void **state UNUSED)
{
	struct container *ct;
	struct run_info r = { .end = END_SETUP };
	char err[200];

	configure(podman, "unix:///e.sock", "");
	/* No engine or no image: nothing was created, nothing to stop. */
	assert_int_equal(container_claim(&b, 1000, &ada, "/y", &ct, err, sizeof(err)), 0);
	r.setup_step = "image";
	container_release(&b, ct, &r);
	assert_int_equal(n_stopped, 0);
	/* The worker never got the job: nothing was started either. */
	assert_int_equal(container_claim(&b, 1000, &ada, "/y", &ct, err, sizeof(err)), 0);
	r.setup_step = "worker";
	container_release(&b, ct, &r);
	assert_int_equal(n_stopped, 0);
	/* A failed start may leave a created container: remove it. */
	assert_int_equal(container_claim(&b, 1000, &ada, "/y", &ct, err, sizeof(err)), 0);
	r.setup_step = "container";
	container_release(&b, ct, &r);
	assert_int_equal(n_stopped, 1);
}

static void test_refusals(void **state UNUSED)
{
	static struct engine_job j;
	static char *env[64];
	static char big[64][620];
	struct container *ct;
	char err[200];

	configure(podman, "unix:///e.sock", "");
	assert_int_equal(container_claim(&b, 1000, &ada, "/a:b", &ct, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cannot be mounted"));
	assert_int_equal(container_claim(&b, 1000, &ada, "/a,b", &ct, err, sizeof(err)), -EINVAL);

	assert_int_equal(container_claim(&b, 1000, &ada, "/z", &ct, err, sizeof(err)), 0);
	for (size_t i = 0; i < 64; i++) {
		snprintf(big[i], sizeof(big[i]), "V%zu=%0600d", i, 0);
		env[i] = big[i];
	}
	assert_int_equal(container_snippet_job(&b, ct, env, 64, &j, err, sizeof(err)), -ENOEXEC);
	assert_non_null(strstr(err, "too long"));

	snprintf(b.cfg.container_cli, sizeof(b.cfg.container_cli), "%s/nope", dir);
	assert_int_equal(container_snippet_job(&b, ct, NULL, 0, &j, err, sizeof(err)), -ENOEXEC);
	assert_non_null(strstr(err, "is not installed"));
	snprintf(b.cfg.container_cli, sizeof(b.cfg.container_cli), "kotoba-no-such-engine");
	assert_int_equal(container_snippet_job(&b, ct, NULL, 0, &j, err, sizeof(err)), -ENOEXEC);
	assert_non_null(strstr(err, "looked in /usr/local/bin"));
	finish(ct);
}

static void test_idle_stop(void **state UNUSED)
{
	struct container *ct;
	struct run_info clean = ended(true);
	char err[200];

	configure(podman, "unix:///e.sock", "");
	assert_int_equal(container_claim(&b, 1000, &ada, "/i", &ct, err, sizeof(err)), 0);
	container_release(&b, ct, &clean);
	assert_true(containers_tick(&b, ct->idle_since_ms + 1000) > 0);
	assert_int_equal(n_stopped, 0);
	assert_int_equal(containers_tick(&b, ct->idle_since_ms + b.cfg.container_idle_ms), -1);
	assert_int_equal(n_stopped, 1);
	/* At most four idle per user: the oldest goes. */
	for (int i = 0; i < 5; i++) {
		char cwd[16];
		struct container *c;

		snprintf(cwd, sizeof(cwd), "/d%d", i);
		assert_int_equal(container_claim(&b, 1000, &ada, cwd, &c, err, sizeof(err)), 0);
		container_release(&b, c, &clean);
	}
	assert_int_equal(n_stopped, 2);
	containers_stop_all(&b);
	assert_int_equal(n_stopped, 6);
}

/* At start, one engine job: can the client reach a server (a step, so a
 * failure comes back in the engine's words), then is the image there. */
static void test_image_check_at_start(void **state UNUSED)
{
	const struct job_argv *a;

	configure(podman, "unix:///run/e.sock", "");
	container_check_image(&b);
	assert_non_null(last_job);
	assert_true(last_ops && last_ops->ended);
	assert_int_equal(n_stopped, 0);
	assert_int_equal(last_job->e.n_steps, 1);
	assert_true(pstr_eq(last_job->e.steps[0].name, "engine"));
	a = &last_job->e.steps[0].argv;
	assert_true(pstr_eq(a->v[0], podman) && has(a, "--remote") &&
		    has(a, "--url=unix:///run/e.sock") && has(a, "version"));
	a = &last_job->e.run;
	assert_int_equal(a->n, 7);
	assert_true(pstr_eq(a->v[3], "image") && pstr_eq(a->v[4], "inspect") &&
		    pstr_eq(a->v[6], "localhost/py:1"));
	assert_int_equal(last_job->e.kill.n + last_job->e.oom.n, 0);

	/* no client, no job: the start logs that instead */
	configure("/nonexistent/podman", "", "");
	container_check_image(&b);
	assert_null(last_job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cold_start_flags),
		cmocka_unit_test(test_docker_host_and_runtime),
		cmocka_unit_test(test_a_cwd_holding_the_socket_is_not_mounted),
		cmocka_unit_test(test_warm_reuse_and_replacement),
		cmocka_unit_test(test_exit_statuses_that_replace),
		cmocka_unit_test(test_setup_failures),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_idle_stop),
		cmocka_unit_test(test_image_check_at_start),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
