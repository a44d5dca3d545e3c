// link: worker/engine.c worker/enter.c worker/supervise.c worker/warm.c worker/util.c worker/tree.c worker/plan.c worker/secrets.c worker/rmtree.c worker/landlock.c worker/seccomp_load.c worker/seccomp_programs.c worker/execgate.c worker/fileattr.c worker/receipt.c worker/report.c worker/outputs.c proto/frame.c proto/check.c proto/decode_util.c proto/names.c proto/encode_util.c proto/messages.c proto/limits.c worker/netns.c proto/receipt.c
/* sandbox = docker on the worker's side: the engine's commands, each run
 * as a confined child through enter_sandbox() under the "engine" profile,
 * with plans built directly (no broker, no codec).  Ordinary programs
 * stand in for the engine's CLI: /bin/sh says what a failing podman would
 * say, /bin/echo answers the OOM query.
 *
 * Each test runs in a forked child set up the way S is (subreaper,
 * SIGCHLD through a signalfd), so that whatever a command leaves behind
 * is ours to find, and a failure names what went wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/landlock.h"
#include "worker/secrets.h"
#include "worker/worker.h"

#include "tests/unit/child.h"

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond))                                                               \
			child_fail(__VA_ARGS__);                                           \
	} while (0)

/* ---- a plan, as S builds it ------------------------------------------------ */

static struct msg_job job;
static struct plan plan;
static int sigfd = -1;

#define ARGV(...) argv_of((const char *const[]){ __VA_ARGS__, NULL })

static struct job_argv argv_of(const char *const *v)
{
	struct job_argv a = { 0 };

	while (v[a.n]) {
		a.v[a.n] = pstr_c(v[a.n]);
		a.n++;
	}
	return a;
}

static void base_job(void)
{
	static const char *const env[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
					   "HOME=/root", "XDG_RUNTIME_DIR=/run/user/0" };

	memset(&job, 0, sizeof(job));
	job.profile = PROFILE_ENGINE;
	job.cwd = pstr_c("/");
	job.scratch_base = pstr_c("/tmp");
	job.timeout_ms = 10000;
	job.grace_ms = 200;
	job.landlock = true;
	job.n_env = sizeof(env) / sizeof(env[0]);
	for (size_t i = 0; i < job.n_env; i++)
		job.env[i] = pstr_c(env[i]);
	job.has_engine = true;
	job.engine.run = ARGV("/bin/cat");
}

static void add_step(const char *name, struct job_argv argv)
{
	job.engine.steps[job.engine.n_steps].name = pstr_c(name);
	job.engine.steps[job.engine.n_steps].argv = argv;
	job.engine.n_steps++;
}

/* plan_paths, plan_scratch, plan_env, plan_engine and the ABI, as
 * main.c's prepare() calls them; then S's signal set-up. */
static void make_plan(void)
{
	char err[200] = "";
	sigset_t set;
	int rc;

	memset(&plan, 0, sizeof(plan));
	plan.err_r = plan.err_w = -1;
	plan.job = &job;
	if ((rc = plan_paths(&plan, err, sizeof(err))) < 0 ||
	    (rc = plan_scratch(&plan, err, sizeof(err))) < 0 ||
	    (rc = plan_env(&plan, err, sizeof(err))) < 0 ||
	    (rc = plan_engine(&plan, err, sizeof(err))) < 0)
		child_fail("building the plan: %s (%s)", err, strerror(-rc));
	plan.landlock_abi = landlock_plan_abi(&job, plan.profile);
	plan.supervisor = getpid();
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		child_fail("signalfd: %s", strerror(errno));
}

static void drop_plan(void)
{
	plan_remove_scratch(&plan);
	plan_free(&plan);
	close(sigfd);
	sigfd = -1;
}

/* The child stands in for S: a subreaper, with a link to "the broker" on
 * fd 3 whose other end stays open (the broker's end is the child's too). */
static void as_supervisor(void)
{
	int sv[2];

	/* The kept end goes above fd 3 first: socketpair may have put it on
	 * fd 3, and dup3 onto fd 3 would close it, which reads as a cancel. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    fcntl(sv[0], F_DUPFD_CLOEXEC, 10) < 0 || dup3(sv[1], FD_BROKER, O_CLOEXEC) < 0 ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		child_fail("setting up as S: %s", strerror(errno));
}

static void run_in_child(void (*body)(void))
{
	run_in_child_after(as_supervisor, body);
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void run_cmd(struct confined *c, const char *name, struct job_argv a, uint64_t timeout_ms)
{
	static char *argv[PROTO_ARGV_MAX + 1];

	for (size_t i = 0; i < a.n; i++)
		argv[i] = (char *)(uintptr_t)a.v[i].ptr;
	argv[a.n] = NULL;
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->argv = argv;
	c->timeout_ms = timeout_ms;
	run_confined(&plan, sigfd, c);
}

static const char *output(struct confined *c)
{
	static char buf[CONFINED_OUT_MAX + 1];

	memcpy(buf, c->out, c->out_len);
	buf[c->out_len] = '\0';
	return buf;
}

static bool nothing_left_below_us(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* ---- a command is confined like the snippet ------------------------------ */

static void confined_like_c(void)
{
	static struct confined c;
	char want[PATH_MAX * 3 + 8];
	const char *out;

	base_job();
	make_plan();
	run_cmd(&c, "probe",
		ARGV("/bin/sh", "-c",
		     "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status; "
		     "echo \"env $HOME|$TMPDIR|$XDG_RUNTIME_DIR\"; env | grep -c '^HOME='; "
		     "echo \"stdin $(readlink /proc/self/fd/0)\"; "
		     "echo x > \"$HOME/config.json\" && echo scratch-ok; "
		     "(echo x > /tmp/kotoba-engine-outside) 2>/dev/null || echo outside-denied; "
		     "echo to-stderr >&2"),
		0);
	out = output(&c);
	CHECK(c.end == CONFINED_EXITED && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
	      "probe: end %d status %#x rep %s: %s; output:\n%s", c.end, c.status, c.rep.step,
	      c.rep.msg, out);
	CHECK(strstr(out, "NoNewPrivs:\t1\n"), "no NoNewPrivs in:\n%s", out);
	CHECK(strstr(out, "Seccomp:\t2\n"), "no seccomp filter in:\n%s", out);
	CHECK(strstr(out, "CapEff:\t0000000000000000\n"), "capabilities kept:\n%s", out);
	snprintf(want, sizeof(want), "env %s|%s|%s\n1\n", plan.scratch, plan.scratch,
		 plan.scratch);
	CHECK(strstr(out, want), "want '%s' (HOME, TMPDIR, XDG_RUNTIME_DIR: scratch, once) in:\n%s",
	      want, out);
	CHECK(strstr(out, "stdin /dev/null\n"), "stdin is not /dev/null:\n%s", out);
	CHECK(strstr(out, "scratch-ok\n"), "cannot write in scratch:\n%s", out);
	if (plan.landlock_abi)
		CHECK(strstr(out, "outside-denied\n"), "wrote outside scratch under Landlock:\n%s",
		      out);
	CHECK(strstr(out, "to-stderr\n"), "stderr not captured:\n%s", out);
	CHECK(nothing_left_below_us(), "a process was left behind");
	unlink("/tmp/kotoba-engine-outside");
	drop_plan();
}

static void test_engine_command_is_confined_like_the_snippet(void **state)
{
	(void)state;
	if (landlock_probe_abi() == 0)
		fprintf(stderr, "# SKIP part: no Landlock, writes outside scratch not checked\n");
	run_in_child(confined_like_c);
}

/* The CLI is a Go program: no RLIMIT_AS, no RLIMIT_NPROC; the rest stays. */
static void engine_rlimits(void)
{
	static struct confined c;
	struct rlimit as;
	char want[64];
	const char *out;

	base_job();
	job.lim.as_bytes = 64u << 20;
	job.lim.nproc = 1;
	job.lim.cpu_s = 7;
	job.lim.nofile = 50;
	make_plan();
	getrlimit(RLIMIT_AS, &as);
	run_cmd(&c, "limits", ARGV("/bin/sh", "-c", "ulimit -v; ulimit -t; ulimit -n; ulimit -c"),
		0);
	out = output(&c);
	if (as.rlim_cur == RLIM_INFINITY)
		snprintf(want, sizeof(want), "unlimited\n7\n50\n0\n");
	else
		snprintf(want, sizeof(want), "%llu\n7\n50\n0\n",
			 (unsigned long long)as.rlim_cur / 1024);
	CHECK(c.end == CONFINED_EXITED && !strcmp(out, want), "want limits\n%s got\n%s", want, out);
	drop_plan();
}

static void test_engine_skips_address_space_and_process_limits(void **state)
{
	(void)state;
	run_in_child(engine_rlimits);
}

/* ---- setup steps ----------------------------------------------------------- */

static void steps_report_the_engines_words(void)
{
	struct setup_report rep;
	char ran[PATH_MAX + 8];

	base_job();
	add_step("check", ARGV("/bin/true"));
	add_step("image", ARGV("/bin/sh", "-c",
			       "echo 'Trying to pull docker.io/library/nope...'; "
			       "echo 'Error: docker.io/library/nope: image not known' >&2; exit 125"));
	add_step("never", ARGV("/bin/sh", "-c", "touch \"$HOME/ran\""));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1, "the failing step did not fail the setup");
	CHECK(!strcmp(rep.step, "image") && rep.err == 0 &&
		      !strcmp(rep.msg, "Error: docker.io/library/nope: image not known"),
	      "got step '%s' errno %d message '%s'", rep.step, rep.err, rep.msg);
	snprintf(ran, sizeof(ran), "%s/ran", plan.scratch);
	CHECK(access(ran, F_OK) < 0, "a step after the failed one ran");
	CHECK(nothing_left_below_us(), "a process was left behind");
	drop_plan();
}

static void test_failed_step_is_a_setup_error_in_the_engines_words(void **state)
{
	(void)state;
	run_in_child(steps_report_the_engines_words);
}

static void steps_all_succeed(void)
{
	struct setup_report rep;
	char ran[PATH_MAX + 8];

	base_job();
	add_step("one", ARGV("/bin/sh", "-c", "echo 1 > \"$HOME/order\""));
	add_step("two", ARGV("/bin/sh", "-c", "echo 2 >> \"$HOME/order\"; echo chatter"));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 0, "steps failed: %s: %s", rep.step, rep.msg);
	snprintf(ran, sizeof(ran), "%s/order", plan.scratch);
	CHECK(access(ran, F_OK) == 0, "the steps did not run");
	drop_plan();
}

static void test_steps_run_in_order(void **state)
{
	(void)state;
	run_in_child(steps_all_succeed);
}

/* Control bytes and broken UTF-8 never reach the broker; a long line is
 * clipped, never inside a character. */
static void messages_are_cleaned(void)
{
	struct setup_report rep;
	size_t n;

	base_job();
	add_step("ctl", ARGV("/bin/sh", "-c",
			     "printf 'bad\\001\\033[31mred\\377 tab\\there\\n\\n   \\n'; exit 1"));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1 && !strcmp(rep.step, "ctl") &&
		      !strcmp(rep.msg, "bad??[31mred? tab here"),
	      "control bytes: got '%s'", rep.msg);
	drop_plan();

	base_job();
	add_step("long", ARGV("/bin/sh", "-c",
			      "i=0; while [ $i -lt 120 ]; do printf '\\303\\251'; i=$((i+1)); done; "
			      "echo; exit 1"));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1, "the long step did not fail");
	n = strlen(rep.msg);
	CHECK(n > 0 && n < sizeof(rep.msg) && n % 2 == 0 &&
		      utf8_valid((const uint8_t *)rep.msg, n),
	      "clipped to %zu bytes, inside a character or not UTF-8", n);
	drop_plan();
}

static void test_engine_messages_are_cleaned_and_clipped(void **state)
{
	(void)state;
	run_in_child(messages_are_cleaned);
}

static void silent_failures(void)
{
	struct setup_report rep;

	base_job();
	add_step("quiet", ARGV("/bin/sh", "-c", "exit 3"));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1 && !strcmp(rep.step, "quiet") &&
		      !strcmp(rep.msg, "sh exited with status 3 and said nothing"),
	      "got '%s': '%s'", rep.step, rep.msg);
	drop_plan();

	base_job();
	add_step("killed", ARGV("/bin/sh", "-c", "echo partial; kill -9 $$"));
	make_plan();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1 && !strcmp(rep.step, "killed") &&
		      !strcmp(rep.msg, "sh was killed by signal 9 (SIGKILL)"),
	      "got '%s': '%s'", rep.step, rep.msg);
	drop_plan();
}

static void test_a_silent_failure_says_how_it_ended(void **state)
{
	(void)state;
	run_in_child(silent_failures);
}

static void step_times_out(void)
{
	struct setup_report rep;
	uint64_t t0;

	base_job();
	job.timeout_ms = 2000;
	/* One deadline for all steps: the first takes half of it, with a
	 * second to spare on a loaded machine, and the second step has only
	 * the rest (its own deadline would end past 3 s). */
	add_step("slow", ARGV("/bin/sleep", "1"));
	add_step("pull", ARGV("/bin/sh", "-c", "sleep 30 & sleep 30"));
	make_plan();
	t0 = ms_now();
	CHECK(engine_steps(&plan, sigfd, &rep) == 1, "the hanging step did not fail");
	CHECK(ms_now() - t0 >= 1990 && ms_now() - t0 < 3000, "the deadline took %llu ms",
	      (unsigned long long)(ms_now() - t0));
	CHECK(!strcmp(rep.step, "pull") && rep.err == ETIMEDOUT &&
		      !strcmp(rep.msg, "sh did not finish within the time limit (2000 ms for all "
				       "steps)"),
	      "got '%s' errno %d: '%s'", rep.step, rep.err, rep.msg);
	CHECK(nothing_left_below_us(), "the step's background sleep survived");
	drop_plan();
}

static void test_step_timeout_kills_its_whole_tree(void **state)
{
	(void)state;
	run_in_child(step_times_out);
}

/* A runaway writer is drained to the end (it never blocks on a full
 * pipe), and a background process holding the pipe does not keep S. */
static void output_drained(void)
{
	static struct confined c;
	const char *line;
	uint64_t t0;

	base_job();
	make_plan();
	run_cmd(&c, "flood",
		ARGV("/bin/sh", "-c",
		     "head -c 300000 /dev/zero | tr '\\0' x; echo; echo 'last words'"),
		5000);
	CHECK(c.end == CONFINED_EXITED && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
	      "flood: end %d status %#x", c.end, c.status);
	CHECK(c.out_len == CONFINED_OUT_MAX, "kept %zu bytes", c.out_len);
	line = output(&c) + c.out_len - strlen("x\nlast words\n");
	CHECK(!strcmp(line, "x\nlast words\n"), "the tail is not the end of the output");
	t0 = ms_now();
	run_cmd(&c, "bg", ARGV("/bin/sh", "-c", "sleep 30 & echo done"), 5000);
	CHECK(c.end == CONFINED_EXITED && !strcmp(output(&c), "done\n"),
	      "bg: end %d output '%s'", c.end, output(&c));
	/* 20 s: far from the 30 s of the background sleep it must not wait for. */
	CHECK(ms_now() - t0 < 20000, "waited %llu ms for a background process",
	      (unsigned long long)(ms_now() - t0));
	CHECK(nothing_left_below_us(), "the background sleep survived");
	drop_plan();
}

static void test_output_is_drained_and_its_tail_kept(void **state)
{
	(void)state;
	run_in_child(output_drained);
}

/* A command that cannot even start reports the step of enter_sandbox()
 * that failed, as C does. */
static void exec_fails(void)
{
	static struct confined c;
	struct setup_report rep;

	base_job();
	add_step("image", ARGV("/nonexistent/podman", "image", "exists", "x"));
	make_plan();
	run_cmd(&c, "image", ARGV("/nonexistent/podman"), 0);
	CHECK(c.end == CONFINED_FAILED && !strcmp(c.rep.step, "exec") && c.rep.err == ENOENT &&
		      strstr(c.rep.msg, "/nonexistent/podman"),
	      "got end %d step '%s' errno %d '%s'", c.end, c.rep.step, c.rep.err, c.rep.msg);
	CHECK(engine_steps(&plan, sigfd, &rep) == 1 && !strcmp(rep.step, "exec") &&
		      rep.err == ENOENT,
	      "engine_steps: got step '%s' errno %d", rep.step, rep.err);
	drop_plan();
}

static void test_a_step_that_cannot_start_reports_its_own_step(void **state)
{
	(void)state;
	run_in_child(exec_fails);
}

/* The broker's EOF on fd 3 stops a step at once; nothing is reported. */
static void cancelled(void)
{
	struct setup_report rep;
	uint64_t t0;
	int sv[2];

	base_job();
	add_step("pull", ARGV("/bin/sleep", "30"));
	make_plan();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    dup3(sv[0], FD_BROKER, O_CLOEXEC) < 0)
		child_fail("socketpair: %s", strerror(errno));
	close(sv[0]);
	close(sv[1]); /* the broker is gone */
	t0 = ms_now();
	CHECK(engine_steps(&plan, sigfd, &rep) == -1, "a cancelled step was not cancelled");
	CHECK(ms_now() - t0 < 20000, "the cancel took %llu ms (the step sleeps 30 s)",
	      (unsigned long long)(ms_now() - t0));
	CHECK(nothing_left_below_us(), "the step survived the cancel");
	drop_plan();
}

static void test_cancel_stops_a_step(void **state)
{
	(void)state;
	run_in_child(cancelled);
}

/* ---- after the CLI: the OOM query and the kill ----------------------------- */

static bool oom_says(struct job_argv argv)
{
	bool cancel = false, killed;

	base_job();
	job.engine.oom = argv;
	make_plan();
	killed = engine_oom_killed(&plan, sigfd, &cancel);
	CHECK(!cancel, "the OOM query was cancelled");
	drop_plan();
	return killed;
}

static void oom_query(void)
{
	CHECK(oom_says(ARGV("/bin/echo", "1")), "'1' is an OOM kill");
	CHECK(oom_says(ARGV("/bin/sh", "-c", "echo header; echo ' 12 '")), "'12' is an OOM kill");
	CHECK(!oom_says(ARGV("/bin/echo", "0")), "'0' is no OOM kill");
	CHECK(!oom_says(ARGV("/bin/echo", "true")), "'true' is not an integer");
	CHECK(!oom_says(ARGV("/bin/echo", "-3")), "'-3' is not above zero");
	CHECK(!oom_says(ARGV("/bin/sh", "-c", "echo 2; exit 1")), "a failed query says nothing");
	base_job();
	make_plan();
	CHECK(!engine_oom_killed(&plan, sigfd, &(bool){ false }), "no query, no OOM kill");
	drop_plan();
}

static void test_oom_query_reads_a_positive_count(void **state)
{
	(void)state;
	run_in_child(oom_query);
}

static void kill_runs(void)
{
	char mark[PATH_MAX + 8];

	base_job();
	job.engine.kill = ARGV("/bin/sh", "-c", "touch \"$HOME/killed\"");
	make_plan();
	engine_kill(&plan, sigfd);
	snprintf(mark, sizeof(mark), "%s/killed", plan.scratch);
	CHECK(access(mark, F_OK) == 0, "the kill command did not run");
	CHECK(nothing_left_below_us(), "the kill command was left behind");
	drop_plan();
	base_job();
	make_plan();
	engine_kill(&plan, sigfd); /* none: nothing to do */
	drop_plan();
}

static void test_kill_command_runs_confined(void **state)
{
	(void)state;
	run_in_child(kill_runs);
}

/* The copy of the container's output directory: the worker's directory in
 * place of the argument, written by a confined command, then collected as
 * on the host.  Landlock (where the kernel has it) keeps its writes in
 * scratch: the same command aimed at the working directory writes nothing. */
static void outputs_copied(void)
{
	struct output_files o;
	bool cancel = false;
	char outside[PATH_MAX];

	base_job();
	job.engine.outputs = ARGV("/bin/sh", "-c", "printf png > \"$0/plot.png\"; "
				  "ln -s /etc/passwd \"$0/link\"", PROTO_OUTPUT_DIR_ARG);
	make_plan();
	CHECK(engine_copy_outputs(&plan, sigfd, &cancel), "a copy that exited 0 failed");
	CHECK(!cancel, "the copy was cancelled");
	outputs_collect(&plan, &o);
	CHECK(o.n == 1 && !strcmp(o.name[0], "plot.png") && o.size[0] == 3,
	      "the copy's regular file was not collected (%zu files)", o.n);
	CHECK(o.left_out == 1, "the symlink was not left out (%llu)",
	      (unsigned long long)o.left_out);
	for (size_t i = 0; i < o.n; i++)
		close(o.fd[i]);
	drop_plan();

	/* A copy that wrote and then failed (stopped halfway, say) is one
	 * the supervisor collects nothing from. */
	base_job();
	job.engine.outputs = ARGV("/bin/sh", "-c", "printf pn > \"$0/plot.png\"; exit 1",
				  PROTO_OUTPUT_DIR_ARG);
	make_plan();
	CHECK(!engine_copy_outputs(&plan, sigfd, &cancel), "a copy that exited 1 succeeded");
	drop_plan();

	if (!landlock_probe_abi())
		return;
	snprintf(outside, sizeof(outside), "/tmp/kotoba-test-outputs-%d", (int)getpid());
	for (int landlock = 0; landlock < 2; landlock++) {
		base_job();
		job.landlock = landlock;
		job.engine.outputs = ARGV("/bin/sh", "-c", "touch \"$0\"; true \"$1\"", outside,
					  PROTO_OUTPUT_DIR_ARG);
		make_plan();
		engine_copy_outputs(&plan, sigfd, &cancel);
		/* Without Landlock (the control) the same command writes there. */
		CHECK((access(outside, F_OK) == 0) == !landlock,
		      "with landlock %d the copy %s outside scratch: %s", landlock,
		      landlock ? "wrote" : "could not write", outside);
		unlink(outside);
		drop_plan();
	}
}

static void test_outputs_are_copied_into_the_runs_directory(void **state)
{
	(void)state;
	run_in_child(outputs_copied);
}

/* ---- the plan -------------------------------------------------------------- */

static int plan_error(char *err, size_t errlen)
{
	int rc;

	memset(&plan, 0, sizeof(plan));
	plan.job = &job;
	rc = plan_paths(&plan, err, errlen);
	if (rc == 0)
		rc = plan_engine(&plan, err, errlen);
	plan_free(&plan);
	return rc;
}

static void test_plan_checks_the_engine_section(void **state)
{
	char err[200] = "", long_name[SETUP_STEP_MAX + 1];

	(void)state;
	base_job();
	assert_int_equal(plan_error(err, sizeof(err)), 0);
	/* No python path needed: none runs on this host. */
	assert_int_equal(job.python.len, 0);

	base_job();
	job.has_engine = false;
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "without engine commands"));

	base_job();
	job.profile = PROFILE_APPROVED;
	job.python = pstr_c("/usr/bin/python3");
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "engine commands with profile 'approved'"));

	base_job();
	job.engine.run = ARGV("podman", "run");
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "absolute path: 'podman'"));

	base_job();
	job.engine.run.n = 0;
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "run command is empty"));

	base_job();
	memset(long_name, 'a', SETUP_STEP_MAX);
	long_name[SETUP_STEP_MAX] = '\0';
	add_step(long_name, ARGV("/bin/true"));
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "engine step 0"));

	base_job();
	add_step("bad name", ARGV("/bin/true"));
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);

	base_job();
	add_step("image", ARGV("/bin/true"));
	job.engine.steps[0].argv.n = 0;
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'image' has no command"));

	base_job();
	job.engine.kill = ARGV("/usr/bin/podman", "kill", "x");
	job.engine.kill.v[1] = (struct pstr){ "ki\0ll", 5 };
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "kill command: argument 1 holds a NUL"));

	/* The copy must name the run's output directory, once. */
	base_job();
	job.engine.outputs = ARGV("/usr/bin/podman", "cp", "c:/tmp/o/.", "/tmp/elsewhere");
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "does not name " PROTO_OUTPUT_DIR_ARG));
	base_job();
	job.engine.outputs = ARGV("/usr/bin/podman", "cp", PROTO_OUTPUT_DIR_ARG,
				  PROTO_OUTPUT_DIR_ARG);
	assert_int_equal(plan_error(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "twice"));
}

/* The engine's environment: the job's, with HOME, TMPDIR and
 * XDG_RUNTIME_DIR ours, and none of Python's. */
static void test_engine_environment(void **state)
{
	char err[200] = "", want[PATH_MAX + 32];
	size_t n = 0;
	int home = 0;

	(void)state;
	base_job();
	memset(&plan, 0, sizeof(plan));
	plan.job = &job;
	assert_int_equal(plan_paths(&plan, err, sizeof(err)), 0);
	snprintf(plan.scratch, sizeof(plan.scratch), "/tmp/kotoba-run-test");
	assert_int_equal(plan_env(&plan, err, sizeof(err)), 0);
	for (char **e = plan.envp; *e; e++, n++) {
		assert_null(strstr(*e, "MPLCONFIGDIR"));
		assert_string_not_equal(*e, "HOME=/root");
		assert_string_not_equal(*e, "XDG_RUNTIME_DIR=/run/user/0");
		home += !strncmp(*e, "HOME=", 5);
	}
	assert_int_equal(home, 1);
	assert_int_equal(n, 2 + 3); /* PATH, LANG; HOME, TMPDIR, XDG_RUNTIME_DIR */
	for (size_t i = 0; i < 3; i++) {
		static const char *const names[] = { "HOME", "TMPDIR", "XDG_RUNTIME_DIR" };
		bool found = false;

		snprintf(want, sizeof(want), "%s=/tmp/kotoba-run-test", names[i]);
		for (char **e = plan.envp; *e; e++)
			found |= !strcmp(*e, want);
		assert_true(found);
	}
	plan_free(&plan);
}

/* The container's masks: the engine step's PROTO_SECRET_MASKS_ARG becomes
 * one mount per secret the working directory holds now (a file: /dev/null;
 * a directory: an empty mode-000 tmpfs), and nothing when it holds none. */
static void test_container_masks_the_working_directorys_secrets(void **state)
{
	char dir[] = "/tmp/kotoba-test-masks-XXXXXX", path[PATH_MAX], err[200] = "";
	char want[3][PATH_MAX + 64];
	char **v;
	size_t n = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/.env", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	snprintf(path, sizeof(path), "%s/.env.local", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	snprintf(path, sizeof(path), "%s/.env.d", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.envrc-not", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	base_job();
	job.cwd = pstr_c(dir);
	job.has_secrets = true;
	job.n_secrets = 3;
	job.secrets[0] = pstr_c(".env");
	job.secrets[1] = pstr_c(".env.*");
	job.secrets[2] = pstr_c("/etc/shadow"); /* not in a container */
	add_step("container", ARGV("/usr/bin/podman", "run", "--volume=X", PROTO_SECRET_MASKS_ARG,
				   "--workdir=X", "image"));
	memset(&plan, 0, sizeof(plan));
	plan.job = &job;
	assert_int_equal(plan_paths(&plan, err, sizeof(err)), 0);
	/* The run's scratch holds the directory mask; here, the test's own. */
	snprintf(plan.scratch, sizeof(plan.scratch), "%s", dir);
	assert_int_equal(plan_secrets(&plan, err, sizeof(err)), 0);
	assert_int_equal(plan_engine(&plan, err, sizeof(err)), 0);
	v = plan.engine.steps[0];
	snprintf(want[0], sizeof(want[0]), "--volume=/dev/null:%s/.env:ro", dir);
	snprintf(want[1], sizeof(want[1]), "--volume=/dev/null:%s/.env.local:ro", dir);
	snprintf(want[2], sizeof(want[2]), "--volume=%s/secret-mask:%s/.env.d:ro", plan.scratch,
		 dir);
	for (; v[n]; n++)
		assert_string_not_equal(v[n], PROTO_SECRET_MASKS_ARG);
	assert_int_equal(n, 5 + 3);
	assert_string_equal(v[2], "--volume=X");
	assert_string_equal(v[n - 2], "--workdir=X");
	for (size_t i = 0; i < 3; i++) {
		bool found = false;

		for (size_t k = 3; k < 6; k++)
			found |= !strcmp(v[k], want[i]);
		if (!found)
			fail_msg("no %s", want[i]);
	}
	plan_free(&plan);

	/* Nothing to mask: the placeholder goes, nothing takes its place. */
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	memset(&plan, 0, sizeof(plan));
	plan.job = &job;
	assert_int_equal(plan_paths(&plan, err, sizeof(err)), 0);
	assert_int_equal(plan_secrets(&plan, err, sizeof(err)), 0);
	assert_int_equal(plan_engine(&plan, err, sizeof(err)), 0);
	for (n = 0; plan.engine.steps[0][n]; n++)
		assert_string_not_equal(plan.engine.steps[0][n], PROTO_SECRET_MASKS_ARG);
	assert_int_equal(n, 5);
	plan_free(&plan);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_container_masks_the_working_directorys_secrets),
		cmocka_unit_test(test_engine_command_is_confined_like_the_snippet),
		cmocka_unit_test(test_engine_skips_address_space_and_process_limits),
		cmocka_unit_test(test_failed_step_is_a_setup_error_in_the_engines_words),
		cmocka_unit_test(test_steps_run_in_order),
		cmocka_unit_test(test_engine_messages_are_cleaned_and_clipped),
		cmocka_unit_test(test_a_silent_failure_says_how_it_ended),
		cmocka_unit_test(test_step_timeout_kills_its_whole_tree),
		cmocka_unit_test(test_output_is_drained_and_its_tail_kept),
		cmocka_unit_test(test_a_step_that_cannot_start_reports_its_own_step),
		cmocka_unit_test(test_cancel_stops_a_step),
		cmocka_unit_test(test_oom_query_reads_a_positive_count),
		cmocka_unit_test(test_kill_command_runs_confined),
		cmocka_unit_test(test_outputs_are_copied_into_the_runs_directory),
		cmocka_unit_test(test_plan_checks_the_engine_section),
		cmocka_unit_test(test_engine_environment),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
