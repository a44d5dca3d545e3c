// link: broker/run.c broker/container.c broker/cgroup.c broker/monlink.c broker/env.c broker/privsep.c broker/secrets.c broker/config.c broker/loop.c broker/log.c proto/frame.c proto/check.c proto/decode_util.c proto/encode_util.c proto/names.c proto/messages.c proto/limits.c proto/paths.c broker/egress/policy.c broker/egresslink.c proto/receipt.c
/* A run's life cycle (broker/run.c), the real code with only the worker
 * start replaced: the starter keeps the worker's ends of the link and the
 * output pipes here, and forks a child that waits to be killed as the
 * worker's stand-in, so the broker's kills and reaping are real.  The test
 * speaks the worker link as kotoba-worker would, or as a worker that is
 * not the program the broker started. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "tests/unit/child.h"

#define UNUSED __attribute__((unused))

/* The client's side: the frames the run sends through its client link. */
static enum msg_type sent[16];
static size_t n_sent;
static char sent_code[16][32];

static int client_takes(struct client_link *cl UNUSED, struct frame *f)
{
	struct proto_error err;
	struct msg m;

	assert_true(n_sent < 16);
	sent[n_sent] = proto_decode(f->data + PROTO_HEADER_LEN, f->len - PROTO_HEADER_LEN, 0, &m,
				    &err);
	if (sent[n_sent] == MSG_ERROR)
		snprintf(sent_code[n_sent], 32, "%.*s", (int)m.u.error.code.len,
			 m.u.error.code.ptr);
	n_sent++;
	frame_free(f);
	return 0;
}

static bool client_never(const struct client_link *cl UNUSED)
{
	return false;
}

static int n_gone;

static void client_run_left(struct client_link *cl UNUSED)
{
	n_gone++;
}

static const struct client_link_ops client_ops = {
	.send = client_takes,
	.backlogged = client_never,
	.closed = client_never,
	.run_gone = client_run_left,
};

/* The worker's stand-in and its ends of the run's fds. */
static pid_t worker;
static int link_fd = -1, out_fd = -1, err_fd = -1;

static int fake_start(struct broker *b UNUSED, const int *fd, const struct identity *id UNUSED,
		      struct cgroup_run *cg UNUSED, pid_t *pid)
{
	link_fd = dup(fd[3]);
	out_fd = dup(fd[1]);
	err_fd = dup(fd[2]);
	fflush(NULL);
	worker = fork_child();
	if (worker == 0) {
		/* Holds none of the run's fds: EOF is the test's to give. */
		close_range(1, ~0u, 0);
		pause();
		_exit(0);
	}
	*pid = worker;
	return worker < 0 ? -errno : 0;
}

/* The run's end, as its starter hears it. */
static int n_ended;
static int ended_how;
static struct run_result ended_result;

static void ended(const struct run_info *ri, void *ctx)
{
	n_ended++;
	ended_how = ri->end;
	ended_result = ri->result;
	assert_ptr_equal(ctx, &n_ended);
}

static const struct run_ops ops = { .ended = ended };
static struct broker b;
static struct client_link cl;

static int setup(void **state UNUSED)
{
	memset(&b, 0, sizeof(b));
	config_defaults(&b.cfg);
	/* The fake worker takes no warm job: spares are test_warm.py's. */
	b.cfg.warm = false;
	TAILQ_INIT(&b.runs);
	TAILQ_INIT(&b.sessions);
	memset(&cl, 0, sizeof(cl));
	cl.ops = &client_ops;
	TAILQ_INIT(&cl.runs);
	n_sent = 0;
	n_ended = 0;
	n_gone = 0;
	run_set_worker_starter(fake_start);
	return loop_init();
}

static int teardown(void **state UNUSED)
{
	loop_fini();
	return 0;
}

static int start(uint64_t id)
{
	struct run_request rq = { .id = id, .code = "print(1)", .code_len = 8, .cwd = "/",
				  .timeout_ms = 10000, .profile = PROFILE_UNATTENDED,
				  .approver = APPROVER_NONE, .peer_uid = getuid(),
				  .peer_pid = getpid(), .ops = &ops, .ctx = &n_ended };
	char err[300] = "";

	return run_start(&b, &cl, &rq, err, sizeof(err));
}

static void worker_says(int (*enc)(struct frame *, const void *), const void *m)
{
	struct frame f;

	assert_int_equal(enc(&f, m), 0);
	assert_int_equal(send(link_fd, f.data, f.len, 0), (ssize_t)f.len);
	frame_free(&f);
	assert_int_equal(loop_run_once(1000), 0);
}

static void worker_closes(void)
{
	close(link_fd);
	close(out_fd);
	close(err_fd);
	for (int i = 0; i < 300 && !n_ended; i++) /* a backstop of 30 s */
		assert_int_equal(loop_run_once(100), 0);
}

/* The worker's stand-in is reaped, and with it the run leaves the broker. */
static void reap(void)
{
	kill(worker, SIGKILL);
	for (int i = 0; i < 3000 && b.nruns; i++) { /* a backstop of 30 s */
		runs_reap(&b);
		usleep(10000);
	}
	assert_int_equal(b.nruns, 0);
	loop_run_once(0); /* the deferred frees */
}

static bool killed_by_broker(void)
{
	siginfo_t si = { 0 };

	/* Not reaped here (WNOWAIT): runs_reap() does that, as in the broker. */
	for (int i = 0; i < 3000 && si.si_pid == 0; i++) { /* a backstop of 30 s */
		assert_int_equal(waitid(P_PID, (id_t)worker, &si, WEXITED | WNOWAIT | WNOHANG), 0);
		if (si.si_pid == 0)
			usleep(10000);
	}
	return si.si_code == CLD_KILLED && si.si_status == SIGKILL;
}

static int enc_ready_v(struct frame *f, const void *m)
{
	return enc_ready(f, m);
}

static int enc_finished_v(struct frame *f, const void *m)
{
	return enc_finished(f, m);
}

/* The job reaches the worker; ready, then finished: `started`, then the
 * `exit` frame with the worker's result, and the starter told once. */
static void test_ready_then_finished(void **state UNUSED)
{
	struct msg_ready rd = { .pid = 42, .landlock_abi = 7 };
	struct msg_finished fin = { .r = { .exited = true, .code = 3, .limit = "" } };
	uint8_t *job = NULL;
	struct proto_error err;
	struct msg m;
	ssize_t n;

	assert_int_equal(start(1), 0);
	assert_int_equal(b.nruns, 1);
	assert_int_equal(cl.nruns, 1);
	n = frame_read_blocking(link_fd, PROTO_FRAME_MAX_DEFAULT, &job);
	assert_true(n > 0);
	assert_int_equal(proto_decode(job, (size_t)n, PROTO_SNIPPET_MAX_DEFAULT, &m, &err), MSG_JOB);
	free(job);
	worker_says(enc_ready_v, &rd);
	assert_int_equal(n_sent, 1);
	assert_int_equal(sent[0], MSG_STARTED);
	worker_says(enc_finished_v, &fin);
	worker_closes();
	assert_int_equal(n_ended, 1);
	assert_int_equal(ended_how, END_FINISHED);
	assert_true(ended_result.exited);
	assert_int_equal(ended_result.code, 3);
	assert_int_equal(n_sent, 2);
	assert_int_equal(sent[1], MSG_EXIT);
	assert_int_equal(cl.nruns, 0);
	assert_int_equal(n_gone, 1);
	reap();
}

/* A header whose length is not the datagram's: the worker is not the
 * program the broker started, and is killed; the client hears it lost. */
static void test_bad_frame_kills_the_worker(void **state UNUSED)
{
	const uint8_t bad[] = { 0, 0, 0, 9, 0x80 };

	assert_int_equal(start(2), 0);
	assert_int_equal(send(link_fd, bad, sizeof(bad), 0), (ssize_t)sizeof(bad));
	assert_int_equal(loop_run_once(1000), 0);
	assert_true(killed_by_broker());
	worker_closes();
	assert_int_equal(n_ended, 1);
	assert_int_equal(ended_how, END_LOST);
	assert_int_equal(sent[n_sent - 1], MSG_ERROR);
	assert_string_equal(sent_code[n_sent - 1], PERR_WORKER_LOST);
	reap();
}

/* finished before ready is out of order: killed, and no `exit` frame. */
static void test_finished_before_ready_kills_the_worker(void **state UNUSED)
{
	struct msg_finished fin = { .r = { .exited = true, .limit = "" } };

	assert_int_equal(start(3), 0);
	worker_says(enc_finished_v, &fin);
	assert_true(killed_by_broker());
	worker_closes();
	assert_int_equal(n_ended, 1);
	assert_int_equal(ended_how, END_LOST);
	for (size_t i = 0; i < n_sent; i++)
		assert_int_not_equal(sent[i], MSG_EXIT);
	reap();
}

/* At [quota] max_runs the next run is refused busy, and nothing starts. */
static void test_limit_is_busy(void **state UNUSED)
{
	b.cfg.max_runs = 1;
	assert_int_equal(start(4), 0);
	pid_t first = worker;
	assert_int_equal(start(5), -EBUSY);
	assert_int_equal(worker, first);
	assert_int_equal(b.nruns, 1);
	run_cancel(TAILQ_FIRST(&b.runs));
	worker_closes();
	assert_int_equal(n_ended, 1);
	assert_string_equal(sent_code[n_sent - 1], PERR_CANCELLED);
	reap();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_then_finished, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_frame_kills_the_worker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finished_before_ready_kills_the_worker, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_limit_is_busy, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
