/* SPDX-License-Identifier: MIT
 * Fuzz target: the card/answer state machine, broker/session.c and
 * broker/gate.c driven in-process through real sockets.
 *
 * The broker's own event loop, sessions, gate, pre-screen and SQLite store
 * (on /dev/shm) and the run module run unchanged in this process; only the
 * worker start is replaced (run_set_worker_starter()): each run's worker
 * is a child that waits to be killed, and this harness speaks its worker
 * link and holds its output pipes.  The input is a program of client operations on up
 * to four connections:
 *
 *   00          open a connection
 *   01 k        close connection k
 *   02 k c      hello, channel = c & 1
 *   03 k s i    exec id i with snippet s (s >= 8: next byte is a length,
 *               then that many bytes of code)
 *   04 k w c    answer the w-th card seen (on any connection) with choice
 *               c: once, always, deny, or a word the protocol does not know
 *   05 k i      cancel id i
 *   06 f        gate_tick() now, or (f & 1) past every card's expiry
 *   07 k h      end the k-th live run's worker: finished, setup failed, lost
 *   08 k w      grants, revoke, audit tail, audit verify
 *   09 k        shutdown(SHUT_RD) on the client side: the broker's sends fail
 *   0a k n ...  n bytes sent as one frame's payload
 *   0b k n ...  n raw bytes, header or not
 *
 * Checked on every step: every frame the broker sends decodes as a broker
 * message; an answer is accepted exactly when its card is open and was
 * sent on that connection (PROTOCOL.md: "accepted once, and only on the
 * connection the card was sent on"), and refused with no-such-card
 * otherwise.  After each input, with every connection closed: no session,
 * run or card is left, and nothing leaked (LeakSanitizer).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/gate.h"
#include "broker/log.h"
#include "tests/fuzz/fuzz.h"

#define MAX_CONNS 4
#define MAX_CARDS 64

struct conn {
	int fd;
	uint64_t serial;     /* this connection's own, never reused */
	bool closed;         /* the broker closed it: read EOF or a reset */
	bool shut_rd;        /* we no longer read: the broker's sends fail */
	bool said_hello;     /* before it, every answer is bad-state */
	bool unframed;       /* raw bytes went out: where a frame starts is unknown */
	struct frame_reader rd;
	bool got_no_such_card;
};

struct card_seen {
	char id[40];
	uint64_t serial, exec_id; /* the connection it was shown on */
	bool open;
};

static struct broker b;
static struct sockaddr_un addr;
static char state_dir[64];
static struct conn conns[MAX_CONNS];
static size_t nconns;
static uint64_t next_serial;
static struct card_seen cards[MAX_CARDS];
static size_t ncards;
static unsigned long inputs;

static const char *const snippets[] = {
	"",
	"print(sum(range(10)))",
	"import shutil\nshutil.rmtree('build')\n",
	"print('x')",
	"import os\nos.system('id')\n",
	"with open('f', 'w') as f: f.write('x')\n",
	"eval('1')",
	"print(open('/etc/shadow').read())",
};

static void die(const char *what)
{
	perror(what);
	abort();
}

static void remove_store(void)
{
	char p[128];

	for (const char *const *s = (const char *const[]){ "", "-wal", "-shm", NULL }; *s; s++) {
		snprintf(p, sizeof(p), "%s/kotoba.db%s", state_dir, *s);
		unlink(p);
	}
}

static void open_gate(void)
{
	char err[300] = "";

	remove_store();
	if (gate_init(&b, err, sizeof(err)) < 0) {
		fprintf(stderr, "gate_init: %s\n", err);
		abort();
	}
}

static void cleanup(void)
{
	gate_fini();
	remove_store();
	rmdir(state_dir);
}

static void listen_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	/* Abstract address: nothing to clean up in the file system. */
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "kotoba-fuzz-gate-%d",
		 (int)getpid());
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 16) < 0)
		die("listen");
	if (loop_add(&b.listen, fd, EPOLLIN, session_accept, &b) < 0)
		die("loop_add");
}

static worker_starter fake_start;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_threshold = LOG_LVL_ERR;
	signal(SIGPIPE, SIG_IGN);
	TAILQ_INIT(&b.sessions);
	TAILQ_INIT(&b.runs);
	config_defaults(&b.cfg);
	/* The fake worker takes no warm job: spares are test_warm.py's. */
	b.cfg.warm = false;
	b.cfg.max_runs = 3;
	b.cfg.max_runs_per_uid = 2;
	b.cfg.max_cards_per_conn = 2;
	/* tmpfs: the store's fsyncs cost nothing there. */
	snprintf(state_dir, sizeof(state_dir), "/dev/shm/kotoba-fuzz-gate-%d", (int)getpid());
	if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
		die(state_dir);
	snprintf(b.state_dir, sizeof(b.state_dir), "%s", state_dir);
	if (loop_init() < 0)
		die("loop_init");
	run_set_worker_starter(fake_start);
	listen_socket();
	open_gate();
	atexit(cleanup);
	return 0;
}

/* ---- the workers' side ------------------------------------------------------ */

/* A worker's stand-in: a child that waits to be killed, so the broker's
 * kills and reaping are real; its link and pipes are held here. */
struct fake_worker {
	pid_t pid;
	int link, out, err;
};
static struct fake_worker fakes[16];

static int fake_start(struct broker *bb, const int *fd, const struct identity *id,
		      struct cgroup_run *cg, pid_t *pid)
{
	struct fake_worker *w = NULL;

	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]) && !w; i++)
		if (!fakes[i].pid)
			w = &fakes[i];
	if (!w)
		return -EAGAIN;
	fflush(NULL);
	*pid = fork();
	if (*pid < 0)
		return -errno;
	if (*pid == 0) {
		close_range(1, ~0u, 0);
		pause();
		_exit(0);
	}
	w->pid = *pid;
	w->link = dup(fd[3]);
	w->out = dup(fd[1]);
	w->err = dup(fd[2]);
	return 0;
}

/* The worker is done: EOF on everything it held, and it dies. */
static void fake_end(struct fake_worker *w)
{
	close(w->link);
	close(w->out);
	close(w->err);
	kill(w->pid, SIGKILL);
	memset(w, 0, sizeof(*w));
}

/* The k-th live worker, k taken modulo their number; NULL: none. */
static struct fake_worker *fake_pick(uint8_t k)
{
	size_t live = 0;

	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		live += fakes[i].pid != 0;
	if (!live)
		return NULL;
	k %= live;
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		if (fakes[i].pid && k-- == 0)
			return &fakes[i];
	return NULL;
}

/* A worker whose link the broker closed (a cancel) ends, as the real one
 * does on EOF. */
static void fakes_follow(void)
{
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++) {
		struct pollfd p = { .fd = fakes[i].link, .events = 0 };

		if (fakes[i].pid && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
			fake_end(&fakes[i]);
	}
}

static void fake_says(struct fake_worker *w, struct frame *f, int rc)
{
	if (rc == 0)
		(void)!send(w->link, f->data, f->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	frame_free(f);
}

/* how % 3: 0 ready and finished, 1 a failed sandbox step, 2 lost.  A
 * worker says nothing before this, so ready comes first. */
static void fake_finish(struct fake_worker *w, int how)
{
	struct msg_ready rd = { .pid = 1, .landlock_abi = 7 };
	struct msg_finished fin = { .r = { .exited = true, .limit = "" } };
	struct msg_setup_error se = { .step = pstr_c("landlock"), .err_no = EPERM,
				      .message = pstr_c("fuzz") };
	struct frame f;

	if (how % 3 == 0) {
		fake_says(w, &f, enc_ready(&f, &rd));
		fake_says(w, &f, enc_finished(&f, &fin));
	} else if (how % 3 == 1) {
		fake_says(w, &f, enc_setup_error(&f, &se));
	}
	fake_end(w);
}

/* ---- the broker's side ---------------------------------------------------- */

static void take_frame(struct conn *c, const uint8_t *p, size_t n)
{
	static struct msg m;
	struct proto_error err = { 0 };
	enum msg_type t = proto_decode(p, n, b.cfg.snippet_max, &m, &err);

	if (t == MSG_UNKNOWN)
		fprintf(stderr, "broker sent a bad frame: %s: %s\n", err.code, err.message);
	FUZZ_ASSERT(t == MSG_WELCOME || t == MSG_CARD || t == MSG_STARTED || t == MSG_OUTPUT ||
		    t == MSG_EXIT || t == MSG_GRANT_LIST || t == MSG_AUDIT_ROWS || t == MSG_OK ||
		    t == MSG_ERROR || t == MSG_QUEUED);
	if (t == MSG_CARD && ncards < MAX_CARDS) {
		struct card_seen *cs = &cards[ncards++];

		FUZZ_ASSERT(m.u.card.card.len < sizeof(cs->id));
		memcpy(cs->id, m.u.card.card.ptr, m.u.card.card.len);
		cs->id[m.u.card.card.len] = '\0';
		cs->serial = c->serial;
		cs->exec_id = m.u.card.id;
		cs->open = true;
	}
	if (t == MSG_ERROR && pstr_eq(m.u.error.code, PERR_NO_SUCH_CARD))
		c->got_no_such_card = true;
	if (t == MSG_ERROR && m.u.error.has_id &&
	    (pstr_eq(m.u.error.code, PERR_DENIED) || pstr_eq(m.u.error.code, PERR_EXPIRED) ||
	     pstr_eq(m.u.error.code, PERR_CANCELLED)))
		for (size_t i = 0; i < ncards; i++)
			if (cards[i].serial == c->serial && cards[i].exec_id == m.u.error.id)
				cards[i].open = false;
}

static void drain(struct conn *c)
{
	const uint8_t *p;
	size_t n;
	ssize_t got;

	if (c->shut_rd)
		return;
	do {
		got = frame_reader_fill(&c->rd, c->fd);
		while (frame_reader_next(&c->rd, &p, &n) == 1)
			take_frame(c, p, n);
	} while (got > 0);
	if (got != -EAGAIN)
		c->closed = true;
}

/* Lets the broker handle everything sent so far, reading its answers. */
static void pump(void)
{
	for (int round = 0; round < 6; round++) {
		FUZZ_ASSERT(loop_run_once(0) == 0);
		fakes_follow();
		runs_reap(&b);
		for (size_t i = 0; i < nconns; i++)
			drain(&conns[i]);
	}
}

/* ---- the client's side ----------------------------------------------------- */

static void open_conn(void)
{
	struct conn *c;
	int fd;

	if (nconns == MAX_CONNS)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		die("connect");
	fcntl(fd, F_SETFL, O_NONBLOCK);
	c = &conns[nconns++];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->serial = ++next_serial;
	frame_reader_init(&c->rd, 8u << 20);
	pump();
}

static void close_conn(size_t k)
{
	close(conns[k].fd);
	frame_reader_free(&conns[k].rd);
	for (size_t i = 0; i < ncards; i++)
		if (cards[i].serial == conns[k].serial)
			cards[i].open = false;
	conns[k] = conns[--nconns];
	pump();
}

static void send_bytes(struct conn *c, const void *p, size_t n)
{
	/* A broker that stopped reading makes this fail: that is its right. */
	if (send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
	    errno != EPIPE && errno != ECONNRESET)
		die("send");
}

static void send_frame(struct conn *c, struct frame *f, int rc)
{
	FUZZ_ASSERT(rc == 0);
	send_bytes(c, f->data, f->len);
	frame_free(f);
}

/* ---- the program ------------------------------------------------------------ */

struct prog {
	const uint8_t *p;
	size_t len, pos;
};

static uint8_t next(struct prog *g)
{
	return g->pos < g->len ? g->p[g->pos++] : 0;
}

static struct conn *pick(struct prog *g)
{
	uint8_t k = next(g);

	return nconns ? &conns[k % nconns] : NULL;
}

static void op_exec(struct conn *c, struct prog *g)
{
	uint8_t sel = next(g), id = next(g);
	struct msg_exec e = { .id = id, .cwd = pstr_c("/tmp") };
	struct frame f;

	if (sel < 8) {
		e.code = pstr_c(snippets[sel]);
	} else {
		size_t n = next(g);

		if (n > g->len - g->pos)
			n = g->len - g->pos;
		e.code = (struct pstr){ (const char *)g->p + g->pos, n };
		g->pos += n;
	}
	send_frame(c, &f, enc_exec(&f, &e));
}

static void op_answer(struct conn *c, struct prog *g)
{
	static const char *const choices[] = { "once", "always", "deny", "maybe" };
	uint8_t which = next(g), choice = next(g);
	struct card_seen *cs = ncards ? &cards[which % ncards] : NULL;
	struct msg_answer a = { .card = pstr_c(cs ? cs->id : "c-0000000000000000"),
				.choice = choices[choice % 4] };
	bool alive = !c->closed, expect;
	struct frame f;

	/* The encoder writes any choice; the decoder refuses the fourth. */
	expect = cs && cs->open && cs->serial == c->serial && alive;
	if (!c->said_hello)
		alive = false; /* bad-state, not no-such-card */
	c->got_no_such_card = false;
	send_frame(c, &f, enc_answer(&f, &a));
	pump();
	/* After unframed bytes the answer may be read as part of some other
	 * frame (a header announcing more than was sent): no answer to check. */
	if (!alive || c->shut_rd || c->unframed || choice % 4 == 3 || c->closed)
		return;
	if (expect == c->got_no_such_card)
		fprintf(stderr, "answer %s on connection %llu: expected %s\n", a.card.ptr,
			(unsigned long long)c->serial, expect ? "accepted" : "no-such-card");
	FUZZ_ASSERT(expect != c->got_no_such_card);
	if (expect)
		cs->open = false;
}

static void op_admin(struct conn *c, struct prog *g)
{
	uint8_t what = next(g) % 4;
	struct frame f;

	if (what == 0) {
		struct msg_grants m = { .id = 200 };

		send_frame(c, &f, enc_grants(&f, &m));
	} else if (what == 1) {
		struct msg_revoke m = { .id = 201, .family = pstr_c(CARD_FAMILY) };

		send_frame(c, &f, enc_revoke(&f, &m));
	} else {
		struct msg_audit m = { .id = 202, .op = what == 2 ? "tail" : "verify", .max = 5 };

		send_frame(c, &f, enc_audit(&f, &m));
	}
}

static void op_tick(struct prog *g)
{
	bool far = next(g) & 1;

	gate_tick(&b, now_ms() + (far ? b.cfg.card_timeout_ms + 1000 : 0));
	if (far)
		for (size_t i = 0; i < ncards; i++)
			cards[i].open = false;
}

static void op_run_end(struct prog *g)
{
	struct fake_worker *w = fake_pick(next(g));
	uint8_t how = next(g);

	if (w)
		fake_finish(w, how);
}

static void op_raw(struct conn *c, struct prog *g, bool framed)
{
	size_t n = next(g);
	uint8_t hdr[4] = { 0, 0, 0, (uint8_t)n };

	if (n > g->len - g->pos)
		n = g->len - g->pos;
	hdr[3] = (uint8_t)n;
	if (framed)
		send_bytes(c, hdr, sizeof(hdr));
	else
		c->unframed = true;
	send_bytes(c, g->p + g->pos, n);
	g->pos += n;
}

static void step(struct prog *g)
{
	uint8_t op = next(g) % 12;
	bool on_a_conn = op != 0 && op != 6 && op != 7;
	struct conn *c = on_a_conn ? pick(g) : NULL;
	struct frame f;

	if (on_a_conn && !c)
		return;
	switch (op) {
	case 0: open_conn(); break;
	case 1: close_conn((size_t)(c - conns)); break;
	case 2: {
		struct msg_hello h = { .version = 1, .channel = next(g) & 1,
				       .client = pstr_c("fuzz") };

		send_frame(c, &f, enc_hello(&f, &h));
		c->said_hello = true;
		break;
	}
	case 3: op_exec(c, g); break;
	case 4: op_answer(c, g); break;
	case 5: {
		struct msg_cancel m = { .id = next(g) };

		send_frame(c, &f, enc_cancel(&f, &m));
		break;
	}
	case 6: op_tick(g); break;
	case 7: op_run_end(g); break;
	case 8: op_admin(c, g); break;
	case 9:
		shutdown(c->fd, SHUT_RD);
		c->shut_rd = true;
		break;
	case 10: op_raw(c, g, true); break;
	case 11: op_raw(c, g, false); break;
	default: break;
	}
	pump();
}

/* Forgets the grant an `always` may have saved, so every input starts
 * from the same state and a crash replays. */
static void reset_grant(void)
{
	struct msg_hello h = { .version = 1, .client = pstr_c("fuzz") };
	struct msg_revoke r = { .id = 1, .family = pstr_c(CARD_FAMILY) };
	struct frame f;

	open_conn();
	send_frame(&conns[0], &f, enc_hello(&f, &h));
	send_frame(&conns[0], &f, enc_revoke(&f, &r));
	pump();
	close_conn(0);
}

static void teardown(void)
{
	while (nconns)
		close_conn(nconns - 1);
	for (int i = 0; i < 10 && b.nsessions; i++)
		pump();
	/* The workers die and are reaped: only then does a run leave. */
	for (int i = 0; i < 2000 && b.nruns; i++) {
		pump();
		if (b.nruns)
			usleep(100);
	}
	FUZZ_ASSERT(b.nsessions == 0);
	FUZZ_ASSERT(b.nruns == 0 && TAILQ_EMPTY(&b.runs));
	/* The rows of runs that started are synced within the window. */
	gate_tick(&b, now_ms() + b.cfg.audit_sync_window_ms);
	/* No card outlives its connection, and no row waits for the disk. */
	FUZZ_ASSERT(gate_next_deadline(&b, now_ms()) == -1);
	reset_grant();
	ncards = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prog g = { data, size, 0 };

	/* A fresh store now and then keeps the audit chain short. */
	if (++inputs % 4096 == 0) {
		gate_fini();
		open_gate();
	}
	open_conn();
	for (int steps = 0; g.pos < g.len && steps < 64; steps++)
		step(&g);
	teardown();
	return 0;
}
