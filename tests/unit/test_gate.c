// link: broker/gate.c broker/session.c broker/run.c broker/peer.c broker/store.c broker/seal.c broker/scan.c broker/privsep.c broker/env.c broker/secrets.c broker/cgroup.c broker/monlink.c broker/container.c broker/auditlog.c broker/config.c broker/loop.c broker/log.c proto/frame.c proto/check.c proto/decode_util.c proto/encode_util.c proto/names.c proto/messages.c proto/limits.c proto/paths.c broker/egress/policy.c broker/egresslink.c proto/receipt.c
/* The gate and the run it starts (broker/gate.c, session.c, run.c), the
 * real code with only the worker start replaced: a client on a real socket
 * sends exec; the worker's stand-in is a child that waits to be killed,
 * and this file speaks its worker link.  What the run tells the gate when
 * it ends (struct run_ops) is the `exit` row of the audit trail; what
 * session.c's dispatch refuses is answered on the same connection. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "broker/gate.h"
#include "broker/log.h"
#include "tests/unit/child.h"

#define UNUSED __attribute__((unused))

static struct broker b;
static char state_dir[] = "/tmp/kotoba-test-gate-XXXXXX";
static int client = -1;
static struct frame_reader rd;
static struct msg got;

static pid_t worker;
static int link_fd = -1, out_fd = -1, err_fd = -1;

static int fake_start(struct broker *bb UNUSED, const int *fd, const struct identity *id UNUSED,
		      struct cgroup_run *cg UNUSED, pid_t *pid)
{
	fflush(NULL);
	worker = fork_child();
	if (worker == 0) {
		close_range(1, ~0u, 0);
		pause();
		_exit(0);
	}
	link_fd = dup(fd[3]);
	out_fd = dup(fd[1]);
	err_fd = dup(fd[2]);
	*pid = worker;
	return worker < 0 ? -errno : 0;
}

static void pump(void)
{
	for (int i = 0; i < 4; i++) {
		assert_int_equal(loop_run_once(10), 0);
		runs_reap(&b);
	}
}

/* The broker's next frame to the client. */
static enum msg_type next_frame(void)
{
	struct proto_error err;
	const uint8_t *p;
	size_t n;

	/* A backstop of 30 s (750 rounds of at most 40 ms). */
	for (int i = 0; i < 750; i++) {
		frame_reader_fill(&rd, client);
		if (frame_reader_next(&rd, &p, &n) == 1)
			return proto_decode(p, n, b.cfg.snippet_max, &got, &err);
		pump();
	}
	fail_msg("no frame from the broker");
	return MSG_UNKNOWN;
}

static void client_sends(struct frame *f, int rc)
{
	assert_int_equal(rc, 0);
	assert_int_equal(send(client, f->data, f->len, 0), (ssize_t)f->len);
	frame_free(f);
	pump();
}

static void worker_sends(struct frame *f, int rc)
{
	assert_int_equal(rc, 0);
	assert_int_equal(send(link_fd, f->data, f->len, 0), (ssize_t)f->len);
	frame_free(f);
	pump();
}

static void worker_ends(void)
{
	close(link_fd);
	close(out_fd);
	close(err_fd);
	kill(worker, SIGKILL);
	for (int i = 0; i < 600 && b.nruns; i++) { /* a backstop of 30 s */
		pump();
		usleep(10000);
	}
	assert_int_equal(b.nruns, 0);
}

static int setup(void **state UNUSED)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct msg_hello h = { .version = 1, .client = pstr_c("test") };
	char err[300] = "";
	struct frame f;
	int fd;

	log_threshold = LOG_LVL_ERR;
	signal(SIGPIPE, SIG_IGN);
	memset(&b, 0, sizeof(b));
	TAILQ_INIT(&b.sessions);
	TAILQ_INIT(&b.runs);
	config_defaults(&b.cfg);
	/* The fake worker takes no warm job: spares are test_warm.py's. */
	b.cfg.warm = false;
	if (!mkdtemp(state_dir))
		return -1;
	snprintf(b.state_dir, sizeof(b.state_dir), "%s", state_dir);
	if (loop_init() < 0 || gate_init(&b, err, sizeof(err)) < 0)
		return -1;
	run_set_worker_starter(fake_start);
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "kotoba-test-gate-%d", (int)getpid());
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 4) < 0 ||
	    loop_add(&b.listen, fd, EPOLLIN, session_accept, &b) < 0)
		return -1;
	client = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (client < 0 || connect(client, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return -1;
	frame_reader_init(&rd, PROTO_FRAME_MAX_DEFAULT);
	pump();
	client_sends(&f, enc_hello(&f, &h));
	return next_frame() == MSG_WELCOME ? 0 : -1;
}

static int teardown(void **state UNUSED)
{
	char p[128];

	close(client);
	frame_reader_free(&rd);
	pump();
	gate_fini();
	loop_close(&b.listen);
	loop_fini();
	for (const char *const *s = (const char *const[]){ "", "-wal", "-shm", NULL }; *s; s++) {
		snprintf(p, sizeof(p), "%s/kotoba.db%s", state_dir, *s);
		unlink(p);
	}
	rmdir(state_dir);
	strcpy(state_dir, "/tmp/kotoba-test-gate-XXXXXX");
	return 0;
}

static void exec(uint64_t id)
{
	struct msg_exec e = { .id = id, .code = pstr_c("print(sum(range(10)))"),
			      .cwd = pstr_c("/tmp") };
	struct frame f;

	worker = 0;
	client_sends(&f, enc_exec(&f, &e));
	assert_true(worker > 0);
}

/* The audit trail's `exit` row of the client's request id. */
static const struct audit_info *exit_row(uint64_t id)
{
	struct msg_audit a = { .id = 99, .op = "tail", .max = 10 };
	struct frame f;

	client_sends(&f, enc_audit(&f, &a));
	assert_int_equal(next_frame(), MSG_AUDIT_ROWS);
	for (size_t i = 0; i < got.u.audit_rows.n; i++)
		if (got.u.audit_rows.rows[i].run == id &&
		    !strcmp(got.u.audit_rows.rows[i].event, "exit"))
			return &got.u.audit_rows.rows[i];
	fail_msg("no exit row for id %llu", (unsigned long long)id);
	return NULL;
}

/* A snippet that runs and exits 3: `started`, the `exit` frame, and the
 * gate's `exit` row with the code, written when the run told it. */
static void test_run_end_is_the_exit_row(void **state UNUSED)
{
	struct msg_ready r = { .pid = 1, .landlock_abi = 7 };
	struct msg_finished fin = { .r = { .exited = true, .code = 3, .limit = "" } };
	const struct audit_info *row;
	struct frame f;

	exec(7);
	worker_sends(&f, enc_ready(&f, &r));
	assert_int_equal(next_frame(), MSG_STARTED);
	worker_sends(&f, enc_finished(&f, &fin));
	worker_ends();
	assert_int_equal(next_frame(), MSG_EXIT);
	assert_int_equal(got.u.exit.r.code, 3);
	row = exit_row(7);
	assert_int_equal(row->decision, DECISION_RAN);
	assert_true(row->has_exit);
	assert_int_equal(row->exit_code, 3);
}

/* A worker that ends without a result: the client hears worker-lost, the
 * trail says the run failed, with no exit code. */
static void test_lost_run_is_failed_in_the_trail(void **state UNUSED)
{
	const struct audit_info *row;

	exec(8);
	worker_ends();
	assert_int_equal(next_frame(), MSG_ERROR);
	assert_true(pstr_eq(got.u.error.code, PERR_WORKER_LOST));
	row = exit_row(8);
	assert_int_equal(row->decision, DECISION_FAILED);
	assert_false(row->has_exit);
}

/* session.c's dispatch: a second hello and a message only the broker
 * sends are bad-state; an exec whose id is in flight is id-in-use, and
 * the run with that id goes on to its own end. */
static void test_dispatch_refuses_by_state_and_id(void **state UNUSED)
{
	struct msg_hello h = { .version = 1, .client = pstr_c("test") };
	struct msg_started st = { .id = 5, .profile = PROFILE_UNATTENDED };
	struct msg_exec e = { .id = 9, .code = pstr_c("print(1)"), .cwd = pstr_c("/tmp") };
	struct frame f;

	client_sends(&f, enc_hello(&f, &h));
	assert_int_equal(next_frame(), MSG_ERROR);
	assert_true(pstr_eq(got.u.error.code, PERR_BAD_STATE));
	client_sends(&f, enc_started(&f, &st));
	assert_int_equal(next_frame(), MSG_ERROR);
	assert_true(pstr_eq(got.u.error.code, PERR_BAD_STATE));
	exec(9);
	client_sends(&f, enc_exec(&f, &e));
	assert_int_equal(next_frame(), MSG_ERROR);
	assert_true(pstr_eq(got.u.error.code, PERR_ID_IN_USE));
	assert_true(got.u.error.has_dup_id && got.u.error.dup_id == 9);
	assert_int_equal(b.nruns, 1);
	worker_ends();
	assert_int_equal(next_frame(), MSG_ERROR);
	assert_true(pstr_eq(got.u.error.code, PERR_WORKER_LOST));
	assert_int_equal(got.u.error.id, 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_end_is_the_exit_row, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_run_is_failed_in_the_trail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dispatch_refuses_by_state_and_id, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
