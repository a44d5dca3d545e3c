/* SPDX-License-Identifier: MIT
 * kotoba-load: load and hostile clients against a running kotoba-brokerd,
 * bounded in count and time, over its Unix socket only.  Each mode prints
 * one JSON object on stdout; tests/load/test_load.py starts the broker,
 * runs the modes and judges the figures.
 *
 *   conns     --total N --running R --cards C --hold-ms T
 *             N connections at once: R run a snippet that sleeps, C hold an
 *             open card, the rest are idle.  The broker's fds, RSS and
 *             descendants are sampled before, at the peak, and after every
 *             connection has gone (abruptly, mid-run and mid-card).
 *   slow      --rounds K
 *             a normal client's round trip alone, then again while slow
 *             clients (one byte per second; a header promising 4 MiB, then
 *             silence; clients that never read their output) are connected.
 *   malformed --count N
 *             N malformed frames; each must be answered with an error or a
 *             closed connection while a normal client is served throughout.
 *   runs      --count N --at-once C
 *             N short snippets (`pass`, unattended), C in flight at any
 *             time, each connection running one after the other: every one
 *             must exit 0.  Each failure is counted by its message.
 *
 * Common options: --socket PATH (required), --pid PID (the broker, for
 * sampling), --seed S.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto/proto.h"

#define IO_TIMEOUT_MS 30000

static struct {
	const char *socket;
	pid_t pid;
	unsigned total, running, cards, hold_ms, rounds, count, seed, at_once;
} opt = { .total = 1000, .running = 200, .cards = 100, .hold_ms = 1000, .rounds = 20,
	  .count = 10000, .seed = 1, .at_once = 16 };

static void die(const char *what)
{
	fprintf(stderr, "kotoba-load: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- sampling the broker -------------------------------------------------- */

struct sample {
	long fds, rss_kb, descendants, zombies;
};

static long count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* pid -> (ppid, state) for every process, to walk the broker's tree; the
 * broker's helpers are below it too, and no run's: a system broker's
 * monitor, and the egress proxy with its serving process (same name). */
struct proc {
	pid_t pid, ppid;
	char state;
	bool helper;
};

static size_t read_procs(struct proc *p, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	if (!d)
		die("/proc");
	while ((e = readdir(d)) && n < max) {
		char path[300], buf[512], *rp;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		/* comm may hold spaces and parentheses: parse after the last ')'. */
		if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) &&
		    sscanf(rp + 1, " %c %d", &p[n].state, &p[n].ppid) == 2) {
			p[n].pid = atoi(e->d_name);
			p[n].helper = !strncmp(strchr(buf, '(') + 1, "kotoba-monitor)", 15) ||
				      !strncmp(strchr(buf, '(') + 1, "kotoba-egress)", 14);
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

static bool below(const struct proc *p, size_t n, size_t i, pid_t root)
{
	for (int depth = 0; depth < 64; depth++) {
		pid_t pp = p[i].ppid;
		size_t k;

		if (pp == root)
			return true;
		for (k = 0; k < n && p[k].pid != pp; k++)
			;
		if (k == n)
			return false;
		i = k;
	}
	return false;
}

static struct sample take_sample(void)
{
	static struct proc procs[65536];
	struct sample s = { -1, -1, -1, -1 };
	size_t n;

	if (!opt.pid)
		return s;
	s.fds = count_fds(opt.pid);
	s.rss_kb = rss_kb(opt.pid);
	n = read_procs(procs, sizeof(procs) / sizeof(procs[0]));
	s.descendants = s.zombies = 0;
	for (size_t i = 0; i < n; i++) {
		if (procs[i].helper || !below(procs, n, i, opt.pid))
			continue;
		s.descendants++;
		s.zombies += procs[i].state == 'Z';
	}
	return s;
}

static void print_sample(const char *name, struct sample s, bool comma)
{
	printf("\"%s\": {\"fds\": %ld, \"rss_kb\": %ld, \"descendants\": %ld, \"zombies\": %ld}%s",
	       name, s.fds, s.rss_kb, s.descendants, s.zombies, comma ? ", " : "");
}

/* ---- one client connection ------------------------------------------------ */

struct conn {
	int fd;
	struct frame_reader rd;
	bool closed;          /* the broker closed it (EOF or error) */
	unsigned frames, errors;
	char last_error[32];
	bool started, carded, ended;
	bool ok;              /* the request ended in an exit with status 0 */
	char why[256];        /* otherwise: how it ended */
	struct msg m;         /* the last frame received */
};

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int conn_open(struct conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(c, 0, sizeof(*c));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", opt.socket);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die("socket");
	/* Blocking connect: a full backlog waits instead of failing. */
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(c->fd);
		c->fd = -1;
		return -errno;
	}
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	frame_reader_init(&c->rd, PROTO_FRAME_MAX_DEFAULT);
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	frame_reader_free(&c->rd);
}

/* Sends all of it, waiting while the socket is full. */
static int conn_send_all(struct conn *c, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(c->fd, b, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EAGAIN) {
			struct pollfd pfd = { c->fd, POLLOUT, 0 };

			if (poll(&pfd, 1, IO_TIMEOUT_MS) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (k < 0)
			return -errno;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int send_frame(struct conn *c, struct frame *f, int rc)
{
	if (rc == 0)
		rc = conn_send_all(c, f->data, f->len);
	frame_free(f);
	return rc;
}

static int send_hello(struct conn *c, bool channel)
{
	struct msg_hello h = { .version = 1, .channel = channel, .client = pstr_c("kotoba-load") };
	struct frame f;

	return send_frame(c, &f, enc_hello(&f, &h));
}

static int send_exec(struct conn *c, uint64_t id, const char *code)
{
	struct msg_exec e = { .id = id, .code = pstr_c(code), .cwd = pstr_c("/tmp") };
	struct frame f;

	return send_frame(c, &f, enc_exec(&f, &e));
}

static void note_frame(struct conn *c)
{
	c->frames++;
	if (c->m.type == MSG_STARTED) {
		c->started = true;
	} else if (c->m.type == MSG_CARD) {
		c->carded = true;
	} else if (c->m.type == MSG_EXIT) {
		const struct run_result *r = &c->m.u.exit.r;

		c->ended = true;
		c->ok = r->exited && r->code == 0;
		snprintf(c->why, sizeof(c->why), "exit: %s %" PRId64 "%s%s",
			 r->exited ? "status" : "signal", r->exited ? r->code : r->signal,
			 *r->limit ? ", limit " : "", r->limit);
	} else if (c->m.type == MSG_ERROR) {
		c->errors++;
		c->ended = c->m.u.error.has_id;
		snprintf(c->last_error, sizeof(c->last_error), "%.*s",
			 (int)c->m.u.error.code.len, c->m.u.error.code.ptr);
		snprintf(c->why, sizeof(c->why), "error %.*s: %.*s", (int)c->m.u.error.code.len,
			 c->m.u.error.code.ptr, (int)c->m.u.error.message.len,
			 c->m.u.error.message.ptr);
	}
}

/* Reads what is there; returns frames taken, marks EOF as closed. */
static int conn_read(struct conn *c)
{
	struct proto_error err;
	const uint8_t *p;
	size_t n;
	ssize_t got;
	int frames = 0;

	do {
		got = frame_reader_fill(&c->rd, c->fd);
		if (got == 0 || (got < 0 && got != -EAGAIN)) {
			c->closed = true;
			return frames;
		}
		while (frame_reader_next(&c->rd, &p, &n) == 1) {
			if (proto_decode(p, n, PROTO_SNIPPET_MAX_DEFAULT, &c->m, &err) ==
			    MSG_UNKNOWN) {
				fprintf(stderr, "kotoba-load: the broker sent a bad frame: %s\n",
					err.message);
				exit(3);
			}
			note_frame(c);
			frames++;
		}
	} while (got > 0);
	return frames;
}

/* Waits for one frame (or the close) on one connection. */
static int conn_wait(struct conn *c, int timeout_ms)
{
	uint64_t end = now_us() + (uint64_t)timeout_ms * 1000u;

	while (!c->closed) {
		struct pollfd pfd = { c->fd, POLLIN, 0 };
		int left = (int)((end - now_us()) / 1000u);

		if (now_us() >= end)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left) < 0 && errno != EINTR)
			return -errno;
		if (conn_read(c) > 0)
			return 0;
	}
	return 0;
}

/* Waits until the connection's request has ended (exit or error). */
static int conn_wait_end(struct conn *c, int timeout_ms)
{
	while (!c->ended && !c->closed)
		if (conn_wait(c, timeout_ms) < 0)
			return -ETIMEDOUT;
	return c->ended ? 0 : -EPIPE;
}

/* ---- many connections at once ---------------------------------------------- */

/* Reads from every connection until `done` holds or the time is up. */
static void pump_all(struct conn *cs, size_t n, int ep, bool (*done)(struct conn *, size_t),
		     int timeout_ms)
{
	struct epoll_event evs[256];
	uint64_t end = now_us() + (uint64_t)timeout_ms * 1000u;

	while (!done(cs, n) && now_us() < end) {
		int k = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < k; i++)
			conn_read(&cs[evs[i].data.u32]);
	}
}

static unsigned want_started, want_cards;

static bool all_there(struct conn *cs, size_t n)
{
	unsigned started = 0, cards = 0;

	for (size_t i = 0; i < n; i++) {
		started += cs[i].started || (cs[i].ended && i < want_started);
		cards += cs[i].carded;
	}
	return started >= want_started && cards >= want_cards;
}

static bool all_welcomed(struct conn *cs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!cs[i].frames && !cs[i].closed)
			return false;
	return true;
}

static struct sample settle(struct sample base, int timeout_ms)
{
	uint64_t end = now_us() + (uint64_t)timeout_ms * 1000u;
	struct sample s;

	do {
		usleep(100000);
		s = take_sample();
	} while ((s.descendants > 0 || s.fds > base.fds) && now_us() < end);
	return s;
}

/* The broker at rest: no run left over from what came before. */
static struct sample quiet(void)
{
	struct sample s = take_sample();

	for (int i = 0; i < 100 && s.descendants > 0; i++) {
		usleep(100000);
		s = take_sample();
	}
	usleep(200000);
	return take_sample();
}

static int mode_conns(void)
{
	struct conn *cs = calloc(opt.total, sizeof(*cs));
	struct sample before, peak, after;
	unsigned busy = 0, refused = 0, started = 0, cards = 0;
	uint64_t t0;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	char code[128];

	if (!cs || ep < 0)
		die("setup");
	before = quiet();
	t0 = now_us();
	for (unsigned i = 0; i < opt.total; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		/* Runners first, then card holders (they need a channel). */
		bool channel = i >= opt.running && i < opt.running + opt.cards;

		if (conn_open(&cs[i]) < 0 || send_hello(&cs[i], channel) < 0) {
			refused++;
			cs[i].closed = true;
			continue;
		}
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
	}
	pump_all(cs, opt.total, ep, all_welcomed, IO_TIMEOUT_MS);
	snprintf(code, sizeof(code), "import time\ntime.sleep(%u)\n", opt.hold_ms / 1000 + 30);
	for (unsigned i = 0; i < opt.running + opt.cards && i < opt.total; i++)
		if (!cs[i].closed)
			send_exec(&cs[i], 1, i < opt.running ? code : "print(6*7)");
	want_started = opt.running;
	want_cards = opt.cards;
	pump_all(cs, opt.total, ep, all_there, 120000);
	usleep(opt.hold_ms * 1000u);
	pump_all(cs, opt.total, ep, all_there, 0);
	peak = take_sample();
	for (unsigned i = 0; i < opt.total; i++) {
		started += cs[i].started;
		cards += cs[i].carded;
		busy += !strcmp(cs[i].last_error, PERR_BUSY);
		conn_close(&cs[i]);
	}
	after = settle(before, 30000);
	printf("{\"mode\": \"conns\", \"total\": %u, \"refused\": %u, \"started\": %u, "
	       "\"cards\": %u, \"busy\": %u, \"seconds\": %.1f, ", opt.total, refused, started,
	       cards, busy, (double)(now_us() - t0) / 1e6);
	print_sample("before", before, true);
	print_sample("peak", peak, true);
	print_sample("after", after, false);
	printf("}\n");
	close(ep);
	free(cs);
	return 0;
}

/* ---- slow and hostile clients ---------------------------------------------- */

/* One normal request: hello, exec print(1) unattended, wait for its exit.
 * Returns microseconds, or 0 on failure. */
static uint64_t round_trip(void)
{
	struct conn c;
	uint64_t t0 = now_us();
	bool ok;

	if (conn_open(&c) < 0)
		return 0;
	ok = send_hello(&c, false) == 0 && conn_wait(&c, IO_TIMEOUT_MS) == 0 &&
	     c.m.type == MSG_WELCOME && send_exec(&c, 1, "print(1)") == 0 &&
	     conn_wait_end(&c, IO_TIMEOUT_MS) == 0 && c.m.type == MSG_EXIT;
	conn_close(&c);
	return ok ? now_us() - t0 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median of `rounds` round trips, feeding `tick` between them. */
static uint64_t median_rtt(unsigned rounds, void (*tick)(void), unsigned *failed)
{
	uint64_t *t = calloc(rounds, sizeof(*t)), med;
	unsigned n = 0;

	for (unsigned i = 0; i < rounds; i++) {
		uint64_t us = round_trip();

		if (us)
			t[n++] = us;
		else
			(*failed)++;
		if (tick)
			tick();
	}
	qsort(t, n, sizeof(*t), cmp_u64);
	med = n ? t[n / 2] : 0;
	free(t);
	return med;
}

/* A request the broker answers itself (grants), on one open connection:
 * the broker's own latency, without a python3 start in it. */
static uint64_t median_request(unsigned rounds, void (*tick)(void), unsigned *failed)
{
	uint64_t *t = calloc(rounds, sizeof(*t)), med;
	struct msg_grants g = { .id = 1 };
	struct frame f;
	struct conn c;
	unsigned n = 0;

	if (conn_open(&c) < 0 || send_hello(&c, false) < 0 || conn_wait(&c, IO_TIMEOUT_MS) < 0)
		die("connect");
	for (unsigned i = 0; i < rounds; i++) {
		uint64_t t0 = now_us();

		if (send_frame(&c, &f, enc_grants(&f, &g)) == 0 &&
		    conn_wait(&c, IO_TIMEOUT_MS) == 0 && c.m.type == MSG_GRANT_LIST)
			t[n++] = now_us() - t0;
		else
			(*failed)++;
		if (tick)
			tick();
	}
	conn_close(&c);
	qsort(t, n, sizeof(*t), cmp_u64);
	med = n ? t[n / 2] : 0;
	free(t);
	return med;
}

#define N_TRICKLE 20
#define N_SILENT 20
#define N_DEAF 5

static struct conn trickle[N_TRICKLE], silent[N_SILENT], deaf[N_DEAF];
static struct frame hello_frame;
static size_t trickle_pos;
static uint64_t next_trickle;

/* One more byte of a hello from every trickling client, once a second. */
static void trickle_tick(void)
{
	if (now_us() < next_trickle || trickle_pos >= hello_frame.len)
		return;
	for (int i = 0; i < N_TRICKLE; i++)
		if (trickle[i].fd >= 0)
			send(trickle[i].fd, hello_frame.data + trickle_pos, 1, MSG_NOSIGNAL);
	trickle_pos++;
	next_trickle = now_us() + 1000000u;
}

static void start_hostile(void)
{
	static const uint8_t promise[4] = { 0x00, 0x40, 0x00, 0x00 }; /* 4 MiB */
	/* Writes until its pipe is full, then blocks: the client never reads. */
	static const char flood[] = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n";
	struct msg_hello h = { .version = 1, .client = pstr_c("trickle") };

	if (enc_hello(&hello_frame, &h) < 0)
		die("enc_hello");
	for (int i = 0; i < N_TRICKLE; i++)
		if (conn_open(&trickle[i]) < 0)
			die("connect");
	for (int i = 0; i < N_SILENT; i++) {
		if (conn_open(&silent[i]) < 0 || send_hello(&silent[i], false) < 0)
			die("connect");
		conn_send_all(&silent[i], promise, sizeof(promise));
	}
	for (int i = 0; i < N_DEAF; i++) {
		if (conn_open(&deaf[i]) < 0 || send_hello(&deaf[i], false) < 0 ||
		    send_exec(&deaf[i], 1, flood) < 0)
			die("connect");
		/* A small receive buffer fills at once. */
		setsockopt(deaf[i].fd, SOL_SOCKET, SO_RCVBUF, &(int){ 4096 }, sizeof(int));
	}
	next_trickle = 0;
	trickle_tick();
}

static void stop_hostile(void)
{
	for (int i = 0; i < N_TRICKLE; i++)
		conn_close(&trickle[i]);
	for (int i = 0; i < N_SILENT; i++)
		conn_close(&silent[i]);
	for (int i = 0; i < N_DEAF; i++)
		conn_close(&deaf[i]);
	frame_free(&hello_frame);
}

static int mode_slow(void)
{
	unsigned failed_idle = 0, failed_load = 0;
	struct sample before, during, after;
	uint64_t idle, load, idle_req, load_req;

	median_rtt(3, NULL, &failed_idle); /* warm up: page cache, store */
	before = quiet();
	idle = median_rtt(opt.rounds, NULL, &failed_idle);
	idle_req = median_request(opt.rounds * 10, NULL, &failed_idle);
	start_hostile();
	sleep(1); /* let the deaf clients' snippets fill their pipes */
	load = median_rtt(opt.rounds, trickle_tick, &failed_load);
	load_req = median_request(opt.rounds * 10, trickle_tick, &failed_load);
	during = take_sample();
	stop_hostile();
	after = settle(before, 30000);
	printf("{\"mode\": \"slow\", \"rounds\": %u, \"idle_rtt_us\": %" PRIu64
	       ", \"load_rtt_us\": %" PRIu64 ", \"factor\": %.2f, \"failed_idle\": %u, "
	       "\"failed_load\": %u, \"trickled_bytes\": %zu, \"idle_request_us\": %" PRIu64
	       ", \"load_request_us\": %" PRIu64 ", \"request_factor\": %.2f, ", opt.rounds,
	       idle, load, idle ? (double)load / (double)idle : 0.0, failed_idle, failed_load,
	       trickle_pos, idle_req, load_req,
	       idle_req ? (double)load_req / (double)idle_req : 0.0);
	print_sample("before", before, true);
	print_sample("during", during, true);
	print_sample("after", after, false);
	printf("}\n");
	return 0;
}

/* ---- malformed frames ------------------------------------------------------ */

enum bad {
	BAD_RANDOM,     /* random payload bytes */
	BAD_TRUNCATED,  /* header promises more than is sent, then close */
	BAD_WRONG_TYPE, /* fields of the wrong msgpack type */
	BAD_OVERSIZE,   /* header over the limit: too-large, closed */
	BAD_UTF8,       /* invalid UTF-8 in a str */
	BAD_UNKNOWN,    /* unknown message type */
	BAD_NO_CARD,    /* answer for a card that does not exist */
	BAD_NOT_MAP,    /* valid msgpack, not a map */
	BAD_DEEP,       /* nesting over the limit */
	BAD_COUNT,      /* a container announcing 2^32-1 items */
	BAD_BEFORE_HELLO, /* exec before hello */
	BAD_KINDS
};

static const char *const bad_names[BAD_KINDS] = {
	"random", "truncated", "wrong-type", "oversize", "bad-utf8", "unknown-type",
	"no-such-card", "not-a-map", "too-deep", "huge-count", "before-hello",
};

static unsigned rnd(void)
{
	opt.seed = opt.seed * 1103515245u + 12345u;
	return opt.seed >> 8;
}

/* A payload for kind k into buf; returns its length. */
static size_t make_bad(enum bad k, uint8_t *buf, size_t cap)
{
	/* Spelled as msgpack: 0xa0 | n starts a str of n bytes. */
	static const uint8_t wrong[] = "\x83\xa4" "type\xa4" "exec\xa2" "id\xa3" "one\xa4"
				       "code\xc3";
	static const uint8_t utf8[] = "\x82\xa4" "type\xa5" "hello\xa6" "client\xa4\xed\xa0\x80x";
	static const uint8_t unknown[] = "\x82\xa4" "type\xa7" "destroy\xa2" "id\x01";
	static const uint8_t answer[] = "\x83\xa4" "type\xa6" "answer\xa4" "card\xa9"
					"c-nothing\xa6" "choice\xa4" "once";
	static const uint8_t notmap[] = "\x93\x01\x02\x03";
	static const uint8_t count[] = "\x81\xa4" "type\xdd\xff\xff\xff\xff";
	size_t n = 0;

	switch (k) {
	case BAD_RANDOM:
		n = 1 + rnd() % (cap - 1);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rnd();
		return n;
	case BAD_WRONG_TYPE: n = sizeof(wrong) - 1; memcpy(buf, wrong, n); return n;
	case BAD_UTF8: n = sizeof(utf8) - 1; memcpy(buf, utf8, n); return n;
	case BAD_UNKNOWN: n = sizeof(unknown) - 1; memcpy(buf, unknown, n); return n;
	case BAD_NO_CARD: n = sizeof(answer) - 1; memcpy(buf, answer, n); return n;
	case BAD_NOT_MAP: n = sizeof(notmap) - 1; memcpy(buf, notmap, n); return n;
	case BAD_COUNT: n = sizeof(count) - 1; memcpy(buf, count, n); return n;
	case BAD_DEEP:
		buf[n++] = 0x81;
		for (int i = 0; i < 12; i++) {
			buf[n++] = 0xa1;
			buf[n++] = 'a';
			buf[n++] = 0x81;
		}
		buf[n++] = 0xa1;
		buf[n++] = 'a';
		buf[n++] = 0x01;
		return n;
	case BAD_TRUNCATED:
	case BAD_OVERSIZE:
	case BAD_BEFORE_HELLO:
	case BAD_KINDS:
	default:
		return 0;
	}
}

struct tally {
	unsigned sent[BAD_KINDS], errors[BAD_KINDS], closed[BAD_KINDS], silent[BAD_KINDS];
};

/* Kinds that lose the framing or the connection get a fresh one each. */
static void one_closing(enum bad k, struct tally *t)
{
	static const uint8_t big[4] = { 0x7f, 0xff, 0xff, 0xff };
	static const uint8_t part[12] = { 0x00, 0x00, 0x01, 0x00, 0x81, 0xa4, 't', 'y', 'p' };
	struct conn c;

	if (conn_open(&c) < 0) {
		t->silent[k]++;
		return;
	}
	t->sent[k]++;
	if (k == BAD_OVERSIZE) {
		send_hello(&c, false);
		conn_wait(&c, IO_TIMEOUT_MS);
		conn_send_all(&c, big, sizeof(big));
	} else if (k == BAD_TRUNCATED) {
		/* The broker cannot answer a frame it never gets: it must
		 * drop the connection and nothing else. */
		conn_send_all(&c, part, sizeof(part));
		conn_close(&c);
		t->closed[k]++;
		return;
	} else {
		send_exec(&c, 1, "print(1)");
	}
	c.frames = 0;
	conn_wait(&c, IO_TIMEOUT_MS);
	if (c.frames && c.m.type == MSG_ERROR)
		t->errors[k]++;
	if (k == BAD_OVERSIZE) {
		while (!c.closed && conn_wait(&c, IO_TIMEOUT_MS) == 0)
			;
		if (c.closed)
			t->closed[k]++;
	}
	if (!c.frames && !c.closed)
		t->silent[k]++;
	conn_close(&c);
}

/* Kinds answered with an error on a connection that stays open. */
static void one_kept(struct conn *c, enum bad k, struct tally *t)
{
	uint8_t payload[512], hdr[4];
	size_t n = make_bad(k, payload, sizeof(payload));

	hdr[0] = 0, hdr[1] = 0, hdr[2] = (uint8_t)(n >> 8), hdr[3] = (uint8_t)n;
	t->sent[k]++;
	c->frames = 0;
	if (conn_send_all(c, hdr, 4) < 0 || conn_send_all(c, payload, n) < 0 ||
	    conn_wait(c, IO_TIMEOUT_MS) < 0) {
		t->silent[k]++;
		return;
	}
	if (c->closed)
		t->closed[k]++;
	else if (c->m.type == MSG_ERROR)
		t->errors[k]++;
	else
		t->silent[k]++; /* random bytes that happened to be a request */
}

static int mode_malformed(void)
{
	struct sample before, after;
	struct tally t = { 0 };
	struct conn c;
	unsigned served = 0, failed = 0, reopened = 0;
	uint64_t t0 = now_us();

	before = quiet();
	if (conn_open(&c) < 0 || send_hello(&c, false) < 0 || conn_wait(&c, IO_TIMEOUT_MS) < 0)
		die("first connection");
	for (unsigned i = 0; i < opt.count; i++) {
		enum bad k = (enum bad)(rnd() % BAD_KINDS);

		if (k == BAD_TRUNCATED || k == BAD_OVERSIZE || k == BAD_BEFORE_HELLO) {
			one_closing(k, &t);
		} else {
			one_kept(&c, k, &t);
			if (c.closed) {
				conn_close(&c);
				reopened++;
				if (conn_open(&c) < 0 || send_hello(&c, false) < 0 ||
				    conn_wait(&c, IO_TIMEOUT_MS) < 0)
					die("reconnect");
			}
		}
		/* A normal client, served throughout. */
		if (i % 500 == 0) {
			if (round_trip())
				served++;
			else
				failed++;
		}
	}
	conn_close(&c);
	after = settle(before, 30000);
	printf("{\"mode\": \"malformed\", \"count\": %u, \"seconds\": %.1f, \"served\": %u, "
	       "\"failed\": %u, \"reopened\": %u, \"kinds\": {", opt.count,
	       (double)(now_us() - t0) / 1e6, served, failed, reopened);
	for (int k = 0; k < BAD_KINDS; k++)
		printf("%s\"%s\": {\"sent\": %u, \"errors\": %u, \"closed\": %u, \"silent\": %u}",
		       k ? ", " : "", bad_names[k], t.sent[k], t.errors[k], t.closed[k],
		       t.silent[k]);
	printf("}, ");
	print_sample("before", before, true);
	print_sample("after", after, false);
	printf("}\n");
	return 0;
}

/* ---- many short runs ------------------------------------------------------------ */

#define WHY_KINDS 8

/* Distinct ways runs failed, with how often: the first WHY_KINDS kept. */
static struct {
	char why[256];
	unsigned n;
} whys[WHY_KINDS];

static void count_failure(const char *why)
{
	for (int i = 0; i < WHY_KINDS; i++) {
		if (!whys[i].n)
			snprintf(whys[i].why, sizeof(whys[i].why), "%s", why);
		if (!strcmp(whys[i].why, why)) {
			whys[i].n++;
			return;
		}
	}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* Sends connection i its next run; false when it cannot. */
static bool next_run(struct conn *c, uint64_t id)
{
	c->started = c->ended = c->ok = false;
	c->why[0] = '\0';
	return send_exec(c, id, "pass") == 0;
}

static int mode_runs(void)
{
	unsigned n = opt.at_once ? opt.at_once : 1, sent = 0, done = 0, ok = 0;
	struct conn *cs = calloc(n, sizeof(*cs));
	uint64_t *t_sent = calloc(n, sizeof(*t_sent)), *lat = calloc(opt.count + 1, sizeof(*lat));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	uint64_t t0 = now_us();

	if (!cs || !t_sent || !lat || ep < 0)
		die("setup");
	for (unsigned i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };

		if (conn_open(&cs[i]) < 0 || send_hello(&cs[i], false) < 0 ||
		    conn_wait(&cs[i], IO_TIMEOUT_MS) < 0 || cs[i].m.type != MSG_WELCOME)
			die("connecting and saying hello");
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
	}
	for (unsigned i = 0; i < n && sent < opt.count; i++, sent++) {
		t_sent[i] = now_us();
		if (!next_run(&cs[i], sent + 1))
			die("exec");
	}
	while (done < sent) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, IO_TIMEOUT_MS);

		if (k == 0) {
			fprintf(stderr, "kotoba-load: no answer for %d s\n", IO_TIMEOUT_MS / 1000);
			exit(3);
		}
		for (int j = 0; j < k; j++) {
			unsigned i = evs[j].data.u32;
			struct conn *c = &cs[i];

			conn_read(c);
			if (!c->ended && !c->closed)
				continue;
			if (!c->ended) {
				fprintf(stderr, "kotoba-load: the broker closed a connection\n");
				exit(3);
			}
			lat[done++] = now_us() - t_sent[i];
			if (c->ok)
				ok++;
			else
				count_failure(c->why);
			if (sent < opt.count) {
				t_sent[i] = now_us();
				if (!next_run(c, ++sent))
					die("exec");
			}
		}
	}
	qsort(lat, done, sizeof(*lat), cmp_u64);
	printf("{\"mode\": \"runs\", \"count\": %u, \"at_once\": %u, \"ok\": %u, "
	       "\"failed\": %u, \"seconds\": %.1f, \"p50_ms\": %.1f, \"p99_ms\": %.1f, "
	       "\"max_ms\": %.1f, \"failures\": {", sent, n, ok, done - ok,
	       (double)(now_us() - t0) / 1e6, done ? lat[done / 2] / 1e3 : 0.0,
	       done ? lat[done * 99 / 100] / 1e3 : 0.0, done ? lat[done - 1] / 1e3 : 0.0);
	for (int i = 0; i < WHY_KINDS && whys[i].n; i++) {
		printf("%s", i ? ", " : "");
		json_str(whys[i].why);
		printf(": %u", whys[i].n);
	}
	printf("}}\n");
	for (unsigned i = 0; i < n; i++)
		conn_close(&cs[i]);
	close(ep);
	free(cs);
	free(t_sent);
	free(lat);
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: kotoba-load conns|slow|malformed|runs --socket PATH [--pid PID]\n"
			"       [--total N] [--running R] [--cards C] [--hold-ms T]\n"
			"       [--rounds K] [--count N] [--at-once C] [--seed S]\n");
	exit(64);
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", 1, NULL, 's' }, { "pid", 1, NULL, 'p' },  { "total", 1, NULL, 'n' },
		{ "running", 1, NULL, 'r' }, { "cards", 1, NULL, 'c' }, { "hold-ms", 1, NULL, 'h' },
		{ "rounds", 1, NULL, 'k' },  { "count", 1, NULL, 'm' }, { "seed", 1, NULL, 'S' },
		{ "at-once", 1, NULL, 'a' }, { NULL, 0, NULL, 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		unsigned v = optarg ? (unsigned)strtoul(optarg, NULL, 10) : 0;

		switch (ch) {
		case 's': opt.socket = optarg; break;
		case 'p': opt.pid = (pid_t)v; break;
		case 'n': opt.total = v; break;
		case 'r': opt.running = v; break;
		case 'c': opt.cards = v; break;
		case 'h': opt.hold_ms = v; break;
		case 'k': opt.rounds = v ? v : 1; break;
		case 'm': opt.count = v; break;
		case 'S': opt.seed = v; break;
		case 'a': opt.at_once = v; break;
		default: usage();
		}
	}
	if (!opt.socket || optind + 1 != argc)
		usage();
}

int main(int argc, char **argv)
{
	const char *mode;

	parse(argc, argv);
	mode = argv[optind];
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "conns"))
		return mode_conns();
	if (!strcmp(mode, "slow"))
		return mode_slow();
	if (!strcmp(mode, "malformed"))
		return mode_malformed();
	if (!strcmp(mode, "runs"))
		return mode_runs();
	usage();
	return 64;
}
