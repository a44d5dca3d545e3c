/* SPDX-License-Identifier: MIT
 * One run = one snippet = one kotoba-worker process.  The broker hands the
 * worker its job over a SOCK_SEQPACKET socketpair on fd 3, the code as a
 * sealed memfd on fd 0, and the write ends of two pipes on fds 1 and 2 that
 * it reads itself, so output never passes through the worker.  A run ends
 * when the worker has spoken its last (or died) and both pipes are at EOF.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/container.h"
#include "broker/egress/wire.h"
#include "broker/egresslink.h"
#include "broker/log.h"
#include "broker/monlink.h"
#include "broker/privsep.h"
#include "proto/status.h"
#include "broker/secrets.h"
#include "proto/limits.h"

/* A worker that has not finished this long after its own deadline is
 * killed, and this long after that the run is given up on. */
#define BACKSTOP_MS 5000
#define ABANDON_MS 2000
/* An engine command the broker runs on its own (stopping a container). */
#define ENGINE_CMD_TIMEOUT_MS 30000
/* The worker's bounds on its OOM probe and its kill command (10 s each),
 * or on its copy of the files (15 s). */
#define ENGINE_AFTER_MS 20000
/* The most output read from a pipe at once: one `output` frame. */
#define OUTPUT_CHUNK 65536

/* Other modules hold a run by pointer only, and read it through
 * run_describe(). */
struct run {
	TAILQ_ENTRY(run) slink;   /* in s->runs while the client waits */
	TAILQ_ENTRY(run) blink;   /* in broker->runs until the worker is reaped */
	struct broker *b;
	struct client_link *s;    /* the client's; NULL once it has gone */
	uint64_t id;              /* the client's id */
	uint64_t run_id;          /* broker-wide, for logs and audit */
	uid_t uid;
	pid_t worker;
	bool reaped, ready, done, reported;
	struct watch sock;
	struct watch out[2];
	int report;               /* the monitor's start-report pipe, -1 without */
	uint64_t out_bytes[2];
	bool truncated;
	bool paused;
	bool cancelled;
	uint64_t kill_at_ms, abandon_at_ms;
	uint64_t start_us;
	/* how it ended */
	enum run_end end;
	struct run_result result;
	struct receipt blocked;     /* what the sandbox refused (finished) */
	uint64_t files_left_out;    /* $KOTOBA_OUTPUT_DIR: not sent (finished, and here) */
	uint64_t files_sent, file_bytes;
	char setup_step[32];
	int64_t setup_errno;
	char setup_msg[384];
	enum proto_profile profile;
	enum proto_approver approver;
	size_t n_labels;
	const char *labels[PROTO_LABELS_MAX];
	char sha256[65];
	pid_t peer_pid;
	/* monotonic us: exec frame read, worker ready, worker finished */
	uint64_t t_arrived, t_ready, t_finished;
	uint64_t t_gated;         /* the gate let it run: scan, grant, decision, row */
	uint64_t t_sent;          /* its code went to the worker (`go`, or the job) */
	struct container *ct;     /* sandbox = docker: where the snippet runs */
	char container[64];       /* its name, for the exit frame */
	bool engine_only;         /* an engine command (stop a container): no client */
	struct cgroup_run cg;     /* its memory and process limits, all processes together */
	bool egress;              /* the proxy holds its listening socket (egresslink) */
	bool proxied;             /* approved, its network the proxy ([egress] approved = proxy) */
	struct receipt net_refused; /* the proxy's refusals, added to `blocked` at the end */
	struct network net_use;   /* the proxy's traffic, per host:port (its exit row) */
	unsigned peer_refusals;   /* connections from inside this run refused (peer.c) */
	const struct run_ops *ops;
	void *ctx;
	int64_t after_seq;        /* run_request's */
	bool escalating;          /* its exit said an escalation card follows */
	/* A spare: a warm job no snippet has taken yet ("spares" below). */
	bool spare;
	bool warm;                /* its interpreter waits for `go` */
	bool lean;                /* a spare started without the preload (spare_luck) */
	bool early;               /* a run took it while it started: its `warm` is late */
	uint64_t warm_at_ms;      /* when it said `warm` */
	char *key;                /* what a run must share with it to take it */
	size_t key_len;
	uint64_t idle_at_ms;      /* stopped then, unless a run takes it */
	uint64_t mounts_gen;      /* the mount table its masks were made under */
	struct spare_spec *next;  /* a run's: the spare made when it ends */
};

/* What a spare is made of: a run's request without its code, copied. */
struct spare_spec {
	struct run_request rq;    /* cwd and env point into text */
	struct env_pair env[PROTO_ENV_MAX];
	char text[];
};

static void on_sock(struct watch *w, uint32_t events);
static void on_output(struct watch *w, uint32_t events);
static void maybe_complete(struct run *r);

void run_describe(const struct run *r, struct run_info *out)
{
	*out = (struct run_info){ .id = r->id, .run_id = r->run_id, .uid = r->uid,
				  .peer_pid = r->peer_pid, .profile = r->profile,
				  .approver = r->approver, .n_labels = r->n_labels,
				  .labels = r->labels, .sha256 = r->sha256, .end = r->end,
				  .cancelled = r->cancelled, .result = r->result,
				  .blocked = &r->blocked, .network = &r->net_use,
				  .setup_step = r->setup_step, .setup_msg = r->setup_msg,
				  .after_seq = r->after_seq, .cl = r->s, .escalating = r->escalating };
}

static int seal_code(const char *code, size_t len)
{
	int fd = memfd_create("kotoba-snippet", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t off = 0;

	if (fd < 0)
		return -errno;
	/* pwrite keeps the file offset at 0, where python starts reading. */
	while (off < len) {
		ssize_t n = pwrite(fd, code + off, len - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		off += (size_t)n;
	}
	/* Sealed: the code python reads is exactly the code that was scanned
	 * and approved, whatever else holds the fd. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* The worker starts with an empty environment, default signal handling,
 * an empty signal mask, and exactly fds 0-3. */
static int spawn_same_user(struct broker *b, const int *fd, pid_t *pid)
{
	char *const argv[] = { (char *)"kotoba-worker", NULL };
	char *const envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	for (int i = 0; i < 4; i++)
		posix_spawn_file_actions_adddup2(&fa, fd[i], i);
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(pid, b->worker_path, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return -rc;
}

/* In the child: a failure is reported on the worker link as the worker
 * itself would, so the client hears which step failed. */
static __attribute__((noreturn)) void child_fail(const char *step, int err, const char *what)
{
	struct msg_setup_error m = { pstr_c(step), err, pstr_c(what) };
	struct frame f;

	if (enc_setup_error(&f, &m) == 0)
		(void)!write(3, f.data, f.len);
	_exit(WORKER_CHILD_DIED);
}

/* child_fail(), the errno said in words, naming the limit when one was
 * reached. */
static __attribute__((noreturn)) void child_fail_named(const char *step, int err, const char *what)
{
	char why[200], msg[300];

	limit_named(err, "the broker's fork of the worker", why, sizeof(why));
	snprintf(msg, sizeof(msg), "%s: %s", what, why);
	child_fail(step, err, msg);
}

/* The privilege transition of a worker for another user, top to bottom.
 * The child starts as the broker: the service user, holding CAP_SETUID,
 * CAP_SETGID and CAP_KILL (privsep_drop).  It ends in execve as the peer,
 * with no capability.  A failure is told to the client as a setup_error
 * naming the step, and nothing is exec'd. */
static __attribute__((noreturn)) void become_peer_and_exec(struct broker *b, const int *fd,
							   const struct identity *id,
							   const struct cgroup_run *cg)
{
	char *const argv[] = { (char *)"kotoba-worker", NULL };
	char *const envp[] = { NULL };
	char why[400];
	const char *what;
	sigset_t none;
	int rc, cg_rc;

	/* 1. Into the run's cgroup while still the service user (v1 moves a
	 * task only for root or its own uid); the worker and the snippet
	 * inherit it.  Before the dup2s, which could reuse its fds. */
	cg_rc = cgroup_run_join(cg);
	/* 2. Exactly fds 0-3: code, stdout, stderr, the worker link. */
	for (int i = 0; i < 4; i++)
		if (dup2(fd[i], i) < 0)
			_exit(WORKER_CHILD_DIED);
	close_range(4, ~0U, 0);
	/* 3. The broker installs no handlers (signals come through a
	 * signalfd), so only what it ignores or blocks would survive the
	 * exec. */
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Reported only now that fd 3 is the worker link. */
	if (cg_rc < 0)
		child_fail(step_name(STEP_CGROUP), -cg_rc, "cannot join the run's cgroup");
	/* 4. The peer's identity, read back, and no capability left.  A
	 * per-user broker forks only to join the cgroup: the worker runs as
	 * the broker's own user, which holds no capability. */
	if (id->switch_ids) {
		/* 4a. The peer's groups, gid, then uid: CAP_SETGID is needed
		 * for the first two, so the uid goes last. */
		rc = privsep_take_ids(id, &what);
		if (rc < 0)
			child_fail(step_name(STEP_IDENTITY), -rc, what);
		/* 4b. Read back: all three uids and gids, and the groups. */
		if (!privsep_ids_are(id))
			child_fail(step_name(STEP_IDENTITY), EPERM,
				   "the uids, gids or groups read back are not the peer's");
		/* 4c. No capability left: between two non-zero uids the
		 * kernel keeps the sets, so until the exec the child would
		 * hold CAP_SETUID as the peer.  The exec would clear them (no
		 * file capabilities, no ambient set); the child clears them
		 * itself and reads them back. */
		rc = privsep_drop_all_caps(why, sizeof(why));
		if (rc < 0)
			child_fail(step_name(STEP_CAPS), -rc, why);
	}
	/* 5. The worker, exec'd as the peer; it confines the snippet itself
	 * (worker/enter.c). */
	execve(b->worker_path, argv, envp);
	/* EAGAIN: the peer's user is over its process limit (the kernel
	 * checks it at the exec after the change of user). */
	child_fail_named(step_name(STEP_WORKER), errno, "cannot exec kotoba-worker");
}

/* posix_spawn cannot change identity, so a worker for another user is
 * forked; the child is become_peer_and_exec(). */
static int spawn_as_peer(struct broker *b, const int *fd, const struct identity *id,
			 const struct cgroup_run *cg, pid_t *pid)
{
	*pid = fork();
	if (*pid < 0)
		return -errno;
	if (*pid == 0)
		become_peer_and_exec(b, fd, id, cg);
	return 0;
}

/* The engine CLI's own environment; the snippet's goes into its argv. */
static char *const engine_env[] = { (char *)"PATH=/usr/local/bin:/usr/bin:/bin",
				    (char *)"LANG=C.UTF-8" };

/* sandbox = docker: the worker drives the engine, as the snippet's user. */
static int engine_section(struct run *r, const struct run_request *rq, char *const *env,
			  size_t n_env, struct msg_job *job, char *err, size_t errlen)
{
	static struct engine_job ej;
	const struct engine_job *j = rq->engine;
	int rc;

	if (r->ct) {
		rc = container_snippet_job(r->b, r->ct, env, n_env, &ej, err, errlen);
		if (rc < 0)
			return rc;
		j = &ej;
	}
	job->profile = PROFILE_ENGINE;
	job->has_engine = true;
	job->engine = j->e;
	for (size_t i = 0; i < sizeof(engine_env) / sizeof(engine_env[0]); i++)
		job->env[i] = pstr_c(engine_env[i]);
	job->n_env = sizeof(engine_env) / sizeof(engine_env[0]);
	return 0;
}

/* [sandbox] preload's names into the job; the config holds them checked. */
static void job_preload(const struct config *c, struct msg_job *job)
{
	const char *s = c->preload, *w;
	size_t n;

	job->warm = true;
	job->n_preload = 0;
	while (job->n_preload < PROTO_PRELOAD_MAX && (n = config_list_next(&s, &w)))
		job->preload[job->n_preload++] = (struct pstr){ w, n };
}

/* Unattended: the egress proxy's CA bundle (system CAs and its own):
 * urllib and httpx read SSL_CERT_FILE, requests and pip
 * REQUESTS_CA_BUNDLE (Debian 12's pip ignores SSL_CERT_FILE).  Not for
 * an approved run through the proxy: its HTTPS is tunnelled, and it
 * verifies the server's own certificate as it would directly. */
static void add_egress_env(struct msg_job *job)
{
	static char ssl[600], req[600];
	const char *bundle = egresslink_bundle();

	if (job->profile != PROFILE_UNATTENDED || !bundle[0] || job->n_env + 2 > PROTO_ENV_MAX)
		return;
	snprintf(ssl, sizeof(ssl), "SSL_CERT_FILE=%s", bundle);
	snprintf(req, sizeof(req), "REQUESTS_CA_BUNDLE=%s", bundle);
	job->env[job->n_env++] = pstr_c(ssl);
	job->env[job->n_env++] = pstr_c(req);
}

static int send_job(struct run *r, const struct run_request *rq, const struct identity *id,
		    char *err, size_t errlen)
{
	const struct config *c = &r->b->cfg;
	static struct msg_job job;
	char *env[ENV_OUT_MAX];
	struct frame f;
	size_t n_env = 0;
	int rc, masks_fd = -1;

	rc = env_build(id, rq->env, rq->n_env, env, &n_env, err, errlen);
	if (rc < 0)
		return rc;
	memset(&job, 0, sizeof(job));
	job.profile = rq->profile;
	job.python = pstr_c(c->python);
	job.cwd = pstr_c(rq->cwd);
	job.scratch_base = pstr_c(c->scratch_dir);
	job.timeout_ms = rq->timeout_ms;
	job.grace_ms = c->grace_ms;
	job.landlock = c->landlock;
	job.lim = (struct job_limits){ c->cpu_s, c->memory, c->processes, c->file_size,
				       c->open_files };
	/* With pids.max holding the run to `processes`, RLIMIT_NPROC (per
	 * uid, the user's other processes counted) is the ceiling for all
	 * the runs a user may have at once. */
	if (cgroup_run_limits_pids(&r->cg))
		job.lim.nproc = c->processes * c->max_runs_per_uid;
	for (size_t i = 0; i < n_env; i++)
		job.env[i] = pstr_c(env[i]);
	job.n_env = n_env;
	add_egress_env(&job);
	rc = 0;
	if (r->ct || rq->engine)
		rc = engine_section(r, rq, env, n_env, &job, err, errlen);
	/* Decided here, from the run's profile and the configuration, and
	 * told to the proxy with the run's listener (take_egress). */
	job.proxy = job.profile == PROFILE_APPROVED &&
		    c->egress_approved == EGRESS_APPROVED_PROXY;
	r->proxied = job.proxy;
	if (rc == 0)
		rc = secrets_fill_job(r->b, id, &job, err, errlen);
	if (r->spare) {
		job_preload(c, &job);
		if (r->lean)
			job.n_preload = 0;
	}
	if (rc == 0 && job.has_secrets && job.profile == PROFILE_UNATTENDED) {
		r->mounts_gen = secrets_mount_generation();
		job.mounts = secrets_mount_table();
		masks_fd = secrets_kept(id->uid, now_ms(), job.masks_key);
		job.has_masks_key = masks_fd >= 0;
	}
	if (rc == 0 && (rc = enc_job(&f, &job)) < 0)
		snprintf(err, errlen, "could not encode the job: %s", strerror(-rc));
	env_free(env, n_env);
	if (rc < 0)
		return rc;
	rc = frame_send_fd(r->sock.fd, &f, masks_fd);
	frame_free(&f);
	if (rc < 0)
		snprintf(err, errlen, "could not hand the job to the worker: %s", strerror(-rc));
	return rc;
}

static unsigned runs_of_uid(struct broker *b, uid_t uid)
{
	unsigned n = 0;
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		n += r->uid == uid && !r->done && !r->engine_only && !r->spare;
	return n;
}

/* What a run takes from its request, and its clock: at its start, or
 * when it takes a spare. */
static void take_request(struct run *r, const struct run_request *rq)
{
	struct broker *b = r->b;

	r->id = rq->id;
	r->ops = rq->ops;
	r->ctx = rq->ctx;
	r->after_seq = rq->after_seq;
	r->approver = rq->approver;
	r->n_labels = rq->n_labels;
	memcpy(r->labels, rq->labels, sizeof(r->labels));
	memcpy(r->sha256, rq->sha256, sizeof(r->sha256));
	r->peer_pid = rq->peer_pid;
	r->start_us = now_us();
	r->t_arrived = rq->arrived_us ? rq->arrived_us : r->start_us;
	r->kill_at_ms = now_ms() + rq->timeout_ms + b->cfg.grace_ms + BACKSTOP_MS;
	/* In a container, the engine steps before the snippet get as long
	 * again as the snippet, and the worker's OOM probe and container
	 * removal (or its copy of the run's files) after it up to
	 * ENGINE_AFTER_MS: killed during those, the worker would leave the
	 * container running. */
	if (b->cfg.sandbox == SANDBOX_DOCKER || rq->engine)
		r->kill_at_ms += rq->timeout_ms + ENGINE_AFTER_MS;
	r->abandon_at_ms = r->kill_at_ms + ABANDON_MS;
}

static struct run *run_new(struct broker *b, struct client_link *s, const struct run_request *rq)
{
	struct run *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->b = b;
	r->s = s;
	r->run_id = ++b->next_run_id;
	r->uid = rq->peer_uid;
	r->engine_only = rq->engine != NULL;
	r->sock.fd = r->out[0].fd = r->out[1].fd = -1;
	r->report = -1;
	r->profile = rq->profile;
	take_request(r, rq);
	return r;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* fds: code, out_r, out_w, err_r, err_w, sock_broker, sock_worker, and
 * with a monitor its start-report pipe */
enum { F_CODE, F_OUT_R, F_OUT_W, F_ERR_R, F_ERR_W, F_SOCK_B, F_SOCK_W, F_REPORT_R, F_REPORT_W,
       F_COUNT };

static int make_fds(int *fd, const struct run_request *rq)
{
	int p[2], sp[2];

	for (int i = 0; i < F_COUNT; i++)
		fd[i] = -1;
	fd[F_CODE] = seal_code(rq->code, rq->code_len);
	if (fd[F_CODE] < 0)
		return fd[F_CODE];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fd[F_OUT_R] = p[0], fd[F_OUT_W] = p[1];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fd[F_ERR_R] = p[0], fd[F_ERR_W] = p[1];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	fd[F_SOCK_B] = sp[0], fd[F_SOCK_W] = sp[1];
	if (monlink_active()) {
		if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
			return -errno;
		fd[F_REPORT_R] = p[0], fd[F_REPORT_W] = p[1];
	}
	if (fcntl(fd[F_OUT_R], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(fd[F_ERR_R], F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int watch_run(struct run *r, int *fd)
{
	int rc;

	if ((rc = loop_add(&r->sock, fd[F_SOCK_B], EPOLLIN, on_sock, r)) < 0)
		return rc;
	fd[F_SOCK_B] = -1;
	if ((rc = loop_add(&r->out[0], fd[F_OUT_R], EPOLLIN, on_output, r)) < 0)
		return rc;
	fd[F_OUT_R] = -1;
	if ((rc = loop_add(&r->out[1], fd[F_ERR_R], EPOLLIN, on_output, r)) < 0)
		return rc;
	fd[F_ERR_R] = -1;
	r->report = fd[F_REPORT_R];
	fd[F_REPORT_R] = -1;
	return 0;
}

static void close_report(struct run *r)
{
	if (r->report >= 0)
		close(r->report);
	r->report = -1;
}

static void run_free(void *p)
{
	struct run *r = p;

	free(r->key);
	free(r->next);
	free(r);
}

static void run_release(struct run *r)
{
	loop_close(&r->sock);
	loop_close(&r->out[0]);
	loop_close(&r->out[1]);
	close_report(r);
	if (r->ct) {
		struct run_info ri;

		run_describe(r, &ri);
		container_release(r->b, r->ct, &ri);
		r->ct = NULL;
	}
	if (r->s) {
		struct client_link *s = r->s;

		TAILQ_REMOVE(&s->runs, r, slink);
		s->nruns--;
		r->s = NULL;
		client_run_gone(s);
	}
	if (!r->reaped) {
		/* not spawned, or not reaped yet: runs_reap frees it later */
		if (r->worker > 0)
			return;
	}
	TAILQ_REMOVE(&r->b->runs, r, blink);
	if (r->spare)
		r->b->nspares--;
	else
		r->b->nruns--;
	/* The worker is reaped: its snippet's processes are gone or going. */
	cgroup_run_remove(&r->cg);
	loop_defer_free(run_free, r);
}

/* Over the limits?  Engine commands are not: stopping a container must
 * not wait for the user's snippets to end. */
static int check_limits(struct broker *b, const struct run_request *rq, char *err, size_t errlen)
{
	if (rq->engine)
		return 0;
	if (b->nruns >= b->cfg.max_runs ||
	    runs_of_uid(b, rq->peer_uid) >= b->cfg.max_runs_per_uid) {
		snprintf(err, errlen, "too many snippets running (%u in all, at most %u per user)",
			 b->nruns, b->cfg.max_runs_per_uid);
		return -EBUSY;
	}
	return 0;
}

static enum proto_step step_of_monitor(unsigned step)
{
	switch (step) {
	case MON_STEP_CGROUP: return STEP_CGROUP;
	case MON_STEP_IDENTITY: return STEP_IDENTITY;
	case MON_STEP_CAPS: return STEP_CAPS;
	default: return STEP_WORKER;
	}
}

/* The monitor starts it (a system broker holds no capability) and
 * answers once the child exists; a start that fails in that child later
 * is read from the report pipe when the worker link ends (worker_ended). */
static int spawn_by_monitor(const int *fd, const struct identity *id,
			    const struct cgroup_run *cg, pid_t *pid)
{
	int all[MON_FDS_MAX], rc;
	size_t n = MON_SPAWN_FDS;
	char what[240];

	memcpy(all, fd, MON_SPAWN_FDS * sizeof(int));
	for (size_t i = 0; cg->active && i < CGROUP_HIER_MAX; i++)
		if (cg->procs[i] >= 0)
			all[n++] = cg->procs[i];
	rc = monlink_spawn(id->uid, all, n, pid, what, sizeof(what));
	if (rc < 0)
		log_warn("uid=%u the monitor started no worker: %s", (unsigned)id->uid, what);
	return rc;
}

static int start_worker(struct broker *b, const int *fd, const struct identity *id,
			struct cgroup_run *cg, pid_t *pid)
{
	if (monlink_active())
		return spawn_by_monitor(fd, id, cg, pid);
	/* posix_spawn cannot join a cgroup: with one, fork. */
	return id->switch_ids || cg->active ? spawn_as_peer(b, fd, id, cg, pid)
					    : spawn_same_user(b, fd, pid);
}

static worker_starter *starter = start_worker;

void run_set_worker_starter(worker_starter *fn)
{
	starter = fn ? fn : start_worker;
}

static int spawn_worker(struct broker *b, struct run *r, const struct run_request *rq,
			const struct identity *id, int *fd, char *err, size_t errlen)
{
	int rc = make_fds(fd, rq);

	if (rc == 0) {
		int child_fds[5] = { fd[F_CODE], fd[F_OUT_W], fd[F_ERR_W], fd[F_SOCK_W],
				     fd[F_REPORT_W] };

		rc = starter(b, child_fds, id, &r->cg, &r->worker);
	}
	cgroup_run_close(&r->cg);
	if (rc < 0) {
		char why[200];

		limit_named(-rc, "the broker", why, sizeof(why));
		snprintf(err, errlen, "could not start the worker %s: %s", b->worker_path, why);
	}
	close_all((int[]){ fd[F_CODE], fd[F_OUT_W], fd[F_ERR_W], fd[F_SOCK_W], fd[F_REPORT_W] },
		  5);
	fd[F_CODE] = fd[F_OUT_W] = fd[F_ERR_W] = fd[F_SOCK_W] = fd[F_REPORT_W] = -1;
	return rc;
}

/* Starts r's worker (a container claimed first in docker mode). */
static int launch(struct broker *b, struct run *r, const struct run_request *rq,
		  const struct identity *id, char *err, size_t errlen)
{
	int fd[F_COUNT], rc = 0;

	for (int i = 0; i < F_COUNT; i++)
		fd[i] = -1;
	if (b->cfg.sandbox == SANDBOX_DOCKER && !rq->engine) {
		rc = container_claim(b, rq->peer_uid, id, rq->cwd, &r->ct, err, errlen);
		if (rc == 0)
			snprintf(r->container, sizeof(r->container), "%s", r->ct->name);
	}
	/* Fails closed: a run that was to have a cgroup does not start
	 * without it. */
	if (rc == 0 && cgroup_enabled() && !rq->engine &&
	    cgroup_run_create(&r->cg, r->run_id, b->cfg.memory, b->cfg.processes, err,
			      errlen) < 0)
		rc = -EIO;
	if (rc == 0)
		rc = spawn_worker(b, r, rq, id, fd, err, errlen);
	if (rc == 0)
		rc = watch_run(r, fd);
	if (rc == 0)
		rc = send_job(r, rq, id, err, errlen);
	/* A worker that is already gone (its fork child could not take the
	 * peer's identity, or exec failed) has said why on the socket, or
	 * the monitor's child on the start-report pipe: the run goes on, so
	 * that reason, not EPIPE, reaches the client. */
	if (rc == -EPIPE)
		rc = 0;
	close_all(fd, F_COUNT);
	if (rc < 0) {
		if (r->worker > 0)
			monlink_kill(r->worker);
		r->done = true;
		r->end = END_SETUP;
		snprintf(r->setup_step, sizeof(r->setup_step), "%s", step_name(STEP_WORKER));
		run_release(r);
	}
	return rc;
}

/* ---- spares ---------------------------------------------------------------
 *
 * [sandbox] warm: when a run ends, the next run with the same user,
 * profile, working directory and environment is started ahead as a warm
 * job (PROTOCOL.md, "go"): a worker like any other builds its sandbox and
 * starts python3, which imports the preload list and waits.  The run that
 * matches it takes it, `go` hands its code over, and when that run ends a
 * new spare is made for the one after.  A spare runs one snippet and is never reused; what
 * could change between its start and `go` is checked again: the mount
 * table here, the secret set, the working directory and the interpreter
 * by the worker (warm.c), which starts cold when they no longer hold. */

/* Everything a run's job is made of besides the code and the clock, each
 * part length-prefixed; the configuration is not in it: a reload stops
 * every spare. */
static char *spare_key(const struct run_request *rq, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	fprintf(f, "%u:%s:%zu:%s", (unsigned)rq->peer_uid, profile_name(rq->profile),
		strlen(rq->cwd), rq->cwd);
	for (size_t i = 0; i < rq->n_env; i++)
		fprintf(f, "%zu:%.*s%zu:%.*s", rq->env[i].name.len, (int)rq->env[i].name.len,
			rq->env[i].name.ptr, rq->env[i].value.len, (int)rq->env[i].value.len,
			rq->env[i].value.ptr);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static bool warm_applies(const struct broker *b, const struct run_request *rq)
{
	return b->cfg.warm && b->cfg.warm_max > 0 && b->cfg.sandbox == SANDBOX_LOCAL &&
	       !rq->engine && (rq->profile == PROFILE_UNATTENDED || rq->profile == PROFILE_APPROVED);
}

static bool spare_waiting(const struct run *r)
{
	return r->spare && !r->done && r->end == END_NONE;
}

static bool spare_fits(const struct run *r, uid_t uid, const char *key, size_t len)
{
	return spare_waiting(r) && r->uid == uid && r->key_len == len && !memcmp(r->key, key, len);
}

static struct run *spare_find(struct broker *b, uid_t uid, const char *key, size_t len,
			      bool only_warm)
{
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		if (spare_fits(r, uid, key, len) && (r->warm || !only_warm))
			return r;
	return NULL;
}

/* Spares of one key, starting or waiting. */
static unsigned spares_of(struct broker *b, uid_t uid, const char *key, size_t len)
{
	unsigned n = 0;
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		n += spare_fits(r, uid, key, len);
	return n;
}

/* Users whose spares go unused: two in a row stopped unused (their runs
 * change directory or environment each time) and that user gets none for
 * warm_idle, so that spares cost a bounded share of CPU nobody uses. */
#define SPARE_MISSES_MAX 2
/* Users whose runs come faster than spares start (a run found its spare
 * still starting) get lean spares, without the preload's imports, which
 * cost more CPU than the interpreter's own start: two lean ones starting
 * side by side keep up with runs back to back, where full ones took CPU
 * from those runs.  A run that takes a spare which has waited
 * LEAN_WAITED_MS has time to spare again: full ones from then on. */
#define LEAN_WAITED_MS 250
static struct spare_luck {
	uid_t uid;
	unsigned misses;
	uint64_t none_until_ms;
	bool lean;
} luck[64];

static struct spare_luck *luck_of(uid_t uid)
{
	struct spare_luck *oldest = &luck[0];

	for (size_t i = 0; i < sizeof(luck) / sizeof(luck[0]); i++) {
		if (luck[i].uid == uid && (luck[i].misses || luck[i].none_until_ms || luck[i].lean))
			return &luck[i];
		if (luck[i].none_until_ms < oldest->none_until_ms)
			oldest = &luck[i];
	}
	*oldest = (struct spare_luck){ .uid = uid };
	return oldest;
}

static void spare_missed(const struct run *r)
{
	struct spare_luck *l = luck_of(r->uid);

	if (++l->misses >= SPARE_MISSES_MAX) {
		l->none_until_ms = now_ms() + r->b->cfg.warm_idle_ms;
		l->misses = 0;
		log_info("uid=%u spares went unused %d times in a row: none for %" PRIu64 " ms",
			 (unsigned)r->uid, SPARE_MISSES_MAX, r->b->cfg.warm_idle_ms);
	}
}

static void spare_lean(uid_t uid, bool lean)
{
	struct spare_luck *l = luck_of(uid);

	if (l->lean != lean)
		log_info("uid=%u spares start %s the preload: %s", (unsigned)uid,
			 lean ? "without" : "with", lean ? "its runs come faster than spares start"
							 : "a spare waited for its run");
	l->lean = lean;
}

static bool spare_unlucky(uid_t uid)
{
	struct spare_luck *l = luck_of(uid);

	return l->none_until_ms > now_ms();
}

/* Stopped: the worker sees EOF and ends what it started. */
static void spare_stop(struct run *r, const char *why)
{
	log_info("uid=%u run=%" PRIu64 " spare stopped: %s", (unsigned)r->uid, r->run_id, why);
	r->end = END_LOST;
	r->kill_at_ms = now_ms() + BACKSTOP_MS;
	r->abandon_at_ms = r->kill_at_ms + ABANDON_MS;
	loop_close(&r->sock);
	maybe_complete(r);
}

/* Room for one more spare of uid: none while the machine's CPUs are all
 * taken by runs (a spare's start would take CPU from them), at most
 * warm_max in all; at its warm_per_user, the user's oldest spare goes,
 * so that a user who moved on to another directory gets one there. */
static bool spare_room(struct broker *b, uid_t uid)
{
	static long cpus;
	unsigned mine = 0, all = 0;
	struct run *r, *oldest = NULL;

	if (!cpus)
		cpus = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
	if (b->nruns >= (unsigned long)cpus)
		return false;
	if (spare_unlucky(uid)) {
		log_debug("uid=%u no spare: its spares went unused", (unsigned)uid);
		return false;
	}
	TAILQ_FOREACH(r, &b->runs, blink) {
		if (!spare_waiting(r))
			continue;
		all++;
		if (r->uid == uid && mine++ == 0)
			oldest = r;
	}
	if (mine >= b->cfg.warm_per_user && oldest) {
		spare_missed(oldest);
		spare_stop(oldest, "its user's newer run wants a spare ([sandbox] warm_per_user)");
		return !spare_unlucky(uid);
	}
	return all < b->cfg.warm_max;
}

static char *copy_text(char *to, const char *from, size_t len, struct pstr *out)
{
	memcpy(to, from, len);
	to[len] = '\0';
	*out = (struct pstr){ to, len };
	return to + len + 1;
}

static struct spare_spec *spare_spec(const struct run_request *rq)
{
	size_t need = strlen(rq->cwd) + 1;
	struct spare_spec *sp;
	struct pstr cwd;
	char *t;

	for (size_t i = 0; i < rq->n_env; i++)
		need += rq->env[i].name.len + rq->env[i].value.len + 2;
	if (!(sp = calloc(1, sizeof(*sp) + need)))
		return NULL;
	t = copy_text(sp->text, rq->cwd, strlen(rq->cwd), &cwd);
	for (size_t i = 0; i < rq->n_env; i++) {
		t = copy_text(t, rq->env[i].name.ptr, rq->env[i].name.len, &sp->env[i].name);
		t = copy_text(t, rq->env[i].value.ptr, rq->env[i].value.len, &sp->env[i].value);
	}
	sp->rq = (struct run_request){ .code = "", .cwd = cwd.ptr, .env = sp->env,
				       .n_env = rq->n_env, .profile = rq->profile,
				       .approver = APPROVER_NONE, .peer_uid = rq->peer_uid,
				       .peer_pid = rq->peer_pid };
	return sp;
}

/* Made when the run that asked for it ends, not while it runs: its start
 * (python3 and the preload's imports) would take CPU from that run; but
 * a run that took a spare still starting waits for it anyway, and its
 * successor's start begins with it.  One of a key; for a user whose runs
 * come faster than spares start, SPARES_PER_KEY (lean ones), so that a
 * run finds one further on, and the two start on two CPUs at once. */
#define SPARES_PER_KEY 2

static unsigned spares_per_key(const struct broker *b, uid_t uid)
{
	if (!luck_of(uid)->lean)
		return 1;
	return b->cfg.warm_per_user < SPARES_PER_KEY ? b->cfg.warm_per_user : SPARES_PER_KEY;
}

static bool spare_make_one(struct broker *b, const struct run_request *srq)
{
	char err[256] = "";
	struct identity id_buf, *id = &id_buf;
	struct run *r;
	size_t len;
	char *key;

	if (!warm_applies(b, srq) || !(key = spare_key(srq, &len)))
		return false;
	if (spares_of(b, srq->peer_uid, key, len) >= spares_per_key(b, srq->peer_uid) ||
	    !spare_room(b, srq->peer_uid) ||
	    privsep_identity(srq->peer_uid, id, err, sizeof(err)) < 0 ||
	    !(r = run_new(b, NULL, srq))) {
		free(key);
		return false;
	}
	r->spare = true;
	r->lean = luck_of(srq->peer_uid)->lean;
	r->key = key;
	r->key_len = len;
	r->kill_at_ms = r->abandon_at_ms = UINT64_MAX;
	r->idle_at_ms = now_ms() + b->cfg.warm_idle_ms;
	TAILQ_INSERT_TAIL(&b->runs, r, blink);
	b->nspares++;
	if (launch(b, r, srq, id, err, sizeof(err)) < 0) {
		log_warn("uid=%u could not start a spare: %s", (unsigned)srq->peer_uid, err);
		return false;
	}
	log_info("uid=%u run=%" PRIu64 " started spare worker pid=%d as %s, profile=%s%s",
		 (unsigned)r->uid, r->run_id, (int)r->worker, id->name, profile_name(r->profile),
		 r->lean ? ", lean" : "");
	return true;
}

static void spare_make(struct broker *b, const struct run_request *srq)
{
	for (unsigned i = 0; i < SPARES_PER_KEY && spare_make_one(b, srq); i++)
		;
}

/* The spare becomes the run of rq, as run_new() would have made it. */
static void spare_adopt(struct run *r, struct client_link *s, const struct run_request *rq)
{
	struct broker *b = r->b;

	r->spare = false;
	b->nspares--;
	b->nruns++;
	r->s = s;
	if (s) {
		TAILQ_INSERT_TAIL(&s->runs, r, slink);
		s->nruns++;
	}
	take_request(r, rq);
	/* What the interpreter printed while it waited is not the run's. */
	r->out_bytes[0] = r->out_bytes[1] = 0;
	r->truncated = false;
}

/* The timing line's phases (tests/bench/README.md): a mark missing (an
 * engine step has no exec frame) counts as no time. */
static uint64_t span_us(uint64_t from, uint64_t to)
{
	return from && to > from ? to - from : 0;
}

static void mark_sent(struct run *r, uint64_t gated)
{
	r->t_gated = gated;
	r->t_sent = now_us();
}

/* `go`: the code's sealed memfd and the clock. */
static int spare_go(struct run *r, const struct run_request *rq)
{
	struct msg_go go = { .timeout_ms = rq->timeout_ms };
	struct frame f;
	int code = seal_code(rq->code, rq->code_len), rc;

	if (code < 0)
		return code;
	rc = enc_go(&f, &go);
	if (rc == 0) {
		rc = frame_send_fd(r->sock.fd, &f, code);
		frame_free(&f);
	}
	close(code);
	return rc;
}

/* rq runs in a spare of its key, when one waits and its mount table is
 * still this one.  false: it starts cold. */
static struct run *spare_take(struct broker *b, struct client_link *s,
			      const struct run_request *rq)
{
	struct run *r;
	size_t len;
	char *key;
	int rc;

	if (!warm_applies(b, rq) || !(key = spare_key(rq, &len)))
		return NULL;
	/* One still starting is taken too: its python3 gets the code when it
	 * is ready (the worker keeps `go` until then), sooner than a cold
	 * start beside it would, which would also slow it down. */
	r = spare_find(b, rq->peer_uid, key, len, true);
	if (!r && (r = spare_find(b, rq->peer_uid, key, len, false)))
		spare_lean(rq->peer_uid, true);
	free(key);
	if (!r)
		return NULL;
	if (r->profile == PROFILE_UNATTENDED && r->mounts_gen != secrets_mount_generation()) {
		spare_stop(r, "the mount table changed since it started");
		return NULL;
	}
	if ((rc = spare_go(r, rq)) < 0) {
		log_warn("uid=%u run=%" PRIu64 " could not hand the code to the spare: %s",
			 (unsigned)r->uid, r->run_id, strerror(-rc));
		spare_stop(r, "go failed");
		return NULL;
	}
	if (r->warm && now_ms() >= r->warm_at_ms + LEAN_WAITED_MS)
		spare_lean(r->uid, false);
	r->early = !r->warm;
	spare_adopt(r, s, rq);
	luck_of(r->uid)->misses = 0;
	log_info("uid=%u run=%" PRIu64 " took spare worker pid=%d, profile=%s%s", (unsigned)r->uid,
		 r->run_id, (int)r->worker, profile_name(r->profile),
		 r->early ? ", still starting" : "");
	return r;
}

/* The run asks for a spare like itself, made when it ends. */
static void spare_ask(struct broker *b, struct run *r, const struct run_request *rq)
{
	if (warm_applies(b, rq))
		r->next = spare_spec(rq);
}

void runs_stop_spares(struct broker *b, const char *why)
{
	struct run *r, *tmp;

	TAILQ_FOREACH_SAFE(r, &b->runs, blink, tmp)
		if (spare_waiting(r))
			spare_stop(r, why);
}

int run_start(struct broker *b, struct client_link *s, const struct run_request *rq,
	      char *err, size_t errlen)
{
	struct identity id;
	struct run *r;
	int rc;

	uint64_t gated = now_us();

	if ((rc = check_limits(b, rq, err, errlen)) < 0)
		return rc;
	/* A spare was made as the peer's identity: no lookup on this path. */
	if ((r = spare_take(b, s, rq))) {
		mark_sent(r, gated);
		spare_ask(b, r, rq);
		/* This run waits for its interpreter anyway: the next one's
		 * starts now, not when this run ends. */
		if (r->early && r->next)
			spare_make(b, &r->next->rq);
		return 0;
	}
	if (privsep_identity(rq->peer_uid, &id, err, errlen) < 0)
		return -EPERM;
	r = run_new(b, s, rq);
	if (!r)
		return -ENOMEM;
	TAILQ_INSERT_TAIL(&b->runs, r, blink);
	b->nruns++;
	if (s) {
		TAILQ_INSERT_TAIL(&s->runs, r, slink);
		s->nruns++;
	}
	if ((rc = launch(b, r, rq, &id, err, errlen)) < 0)
		return rc;
	mark_sent(r, gated);
	log_info("uid=%u run=%" PRIu64 " started worker pid=%d as %s, profile=%s%s%s",
		 (unsigned)r->uid, r->run_id, (int)r->worker, id.name,
		 profile_name(r->engine_only ? PROFILE_ENGINE : r->profile), r->ct ? ", container " : "",
		 r->ct ? r->ct->name : "");
	spare_ask(b, r, rq);
	return 0;
}

int run_start_engine(struct broker *b, uid_t peer, const struct engine_job *j,
		     const struct run_ops *ops, void *ctx, char *err, size_t errlen)
{
	struct run_request rq = { .code = "", .cwd = "/", .timeout_ms = ENGINE_CMD_TIMEOUT_MS,
				  .profile = PROFILE_ENGINE, .approver = APPROVER_NONE, .peer_uid = peer,
				  .engine = j, .ops = ops, .ctx = ctx };

	return run_start(b, NULL, &rq, err, errlen);
}

/* ---- while it runs -------------------------------------------------------- */

void run_send_setup_error(struct client_link *s, uint64_t id, const char *step,
			  int64_t err_no, const char *why, bool in_container)
{
	const char *code = !strcmp(step, step_name(STEP_CWD)) ? PERR_BAD_CWD : PERR_SETUP_FAILED;
	struct msg_error m = { .has_id = true, .id = id, .code = pstr_c(code),
			       .step = pstr_c(step), .err_no = err_no };
	char text[768];
	struct frame f;

	snprintf(text, sizeof(text), "the snippet did not run: sandbox step '%s' failed: %s%s",
		 step, why, in_container ? "; in docker mode nothing ever runs on the host instead"
					 : "");
	m.message = pstr_c(text);
	if (enc_error(&f, &m) == 0)
		client_send(s, &f);
}

static void relay_setup_error(struct run *r)
{
	run_send_setup_error(r->s, r->id, r->setup_step, r->setup_errno, r->setup_msg,
			     r->container[0] != '\0');
}

static void report_exit(struct run *r)
{
	struct msg_exit m = { .id = r->id, .r = r->result, .truncated = r->truncated,
			      .output_limit = r->b->cfg.output_cap,
			      .profile = r->profile, .decision = DECISION_RAN, .approver = r->approver,
			      .n_labels = r->n_labels, .where = "host",
			      .secrets = secrets_state(r->b, r->profile),
			      .blocked = r->blocked, .files_left_out = r->files_left_out };
	struct frame f;

	memcpy(m.labels, r->labels, sizeof(m.labels));
	if (r->container[0]) {
		m.where = "container";
		m.container = pstr_c(r->container);
	}
	if (r->ops && r->ops->escalates) {
		struct run_info ri;

		run_describe(r, &ri);
		r->escalating = m.escalate = r->ops->escalates(r->s, &ri, r->ctx);
	}
	if (enc_exit(&f, &m) == 0)
		client_send(r->s, &f);
}

/* The client's last frame for this run. */
static void report_end(struct run *r)
{
	switch (r->end) {
	case END_FINISHED:
		report_exit(r);
		break;
	case END_SETUP:
		relay_setup_error(r);
		break;
	case END_LOST:
	case END_NONE:
	default:
		client_send_error(r->s, true, r->id, r->cancelled ? PERR_CANCELLED : PERR_WORKER_LOST,
				  "%s", r->cancelled ? "the run was cancelled"
						     : "the worker ended without a result; the "
						       "snippet was stopped");
		break;
	}
}

/* The kernel's OOM kill for the run's memory limit is the run's `memory`
 * limit, not a bare SIGKILL; the wall clock still wins when both came. */
static void account_cgroup(struct run *r)
{
	if (cgroup_run_report(&r->cg, r->uid, r->run_id) && r->end == END_FINISHED &&
	    (!r->result.limit || !r->result.limit[0]))
		r->result.limit = "memory";
}

static bool method_listed(const char *list, const char *m)
{
	size_t len = strlen(m);

	while (*list) {
		size_t n = strcspn(list, ",");

		if (n == len && !strncmp(list, m, len))
			return true;
		list += n + (list[n] == ',');
	}
	return false;
}

static void net_count(struct net_use *u, const struct egress_event *ev)
{
	size_t have = strlen(u->methods), len = strlen(ev->method);

	if (!method_listed(u->methods, ev->method) && have + len + 2 <= sizeof(u->methods))
		snprintf(u->methods + have, sizeof(u->methods) - have, "%s%s", have ? "," : "",
			 ev->method);
	u->requests += ev->requests;
	u->bytes_out += ev->bytes_out;
	u->bytes_in += ev->bytes_in;
}

/* A connection's traffic, under its host and port; past
 * PROTO_NETWORK_MAX - 1 of them, under the last entry, `*`: a run's table
 * never grows. */
static void net_traffic(struct run *r, const struct egress_event *ev)
{
	struct network *net = &r->net_use;
	struct net_use *u = NULL;

	for (size_t i = 0; i < net->n && !u; i++)
		if (!strcmp(net->use[i].host, ev->text))
			u = &net->use[i];
	if (!u && net->n < PROTO_NETWORK_MAX) {
		u = &net->use[net->n++];
		receipt_copy_target(u->host, ev->text, strlen(ev->text));
		if (net->n == PROTO_NETWORK_MAX)
			snprintf(u->host, sizeof(u->host), "*");
	}
	net_count(u ? u : &net->use[PROTO_NETWORK_MAX - 1], ev);
}

bool run_take_egress_event(struct broker *b, const struct egress_event *ev)
{
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink) {
		if (r->run_id != ev->run_id || !r->egress || r->done)
			continue;
		if (ev->kind == EGRESS_EV_REFUSED)
			receipt_add(&r->net_refused, BLOCK_REQUEST, ev->text, BY_EGRESS_PROXY,
				    SEEN_BY_PROXY, false);
		else
			net_traffic(r, ev);
		return true;
	}
	return false;
}

/* The proxy's refusals after the worker's entries; its traffic in the
 * log, one line per host and port (and in the exit row: gate.c). */
static void net_conclude(struct run *r)
{
	if (r->end == END_FINISHED && r->net_refused.total)
		receipt_merge(&r->blocked, &r->net_refused);
	for (size_t i = 0; i < r->net_use.n; i++) {
		const struct net_use *u = &r->net_use.use[i];

		log_info("uid=%u run=%" PRIu64 " network: %s %s, %" PRIu64 " request%s, %" PRIu64
			 " bytes out, %" PRIu64 " bytes in", (unsigned)r->uid, r->run_id, u->host,
			 u->methods, u->requests, u->requests == 1 ? "" : "s", u->bytes_out,
			 u->bytes_in);
	}
	if (r->net_refused.total)
		log_info("uid=%u run=%" PRIu64 " network: %" PRIu64 " request%s refused by the "
			 "egress proxy", (unsigned)r->uid, r->run_id, r->net_refused.total,
			 r->net_refused.total == 1 ? "" : "s");
}

/* Called whenever a source closes; the run is over once all three are. */
static void maybe_complete(struct run *r)
{
	uint64_t sent;

	if (r->done || r->sock.fd >= 0 || r->out[0].fd >= 0 || r->out[1].fd >= 0)
		return;
	account_cgroup(r);
	if (r->egress) {
		/* What the proxy refused before the snippet ended is queued
		 * here already (it sends before it answers): on the receipt. */
		egresslink_drain(r->b);
		egresslink_detach(r->run_id);
		net_conclude(r);
	}
	r->done = true;
	if (r->s)
		report_end(r);
	sent = now_us();
	/* Whoever started it hears of the end first (the gate's audit row),
	 * then the log says it. */
	if (r->ops && r->ops->ended) {
		struct run_info ri;

		run_describe(r, &ri);
		r->ops->ended(&ri, r->ctx);
	}
	if (r->end == END_FINISHED)
		log_debug("uid=%u run=%" PRIu64 " t_exec_to_ready_us=%" PRIu64
			  " t_exit_to_frame_us=%" PRIu64 " t_gate_us=%" PRIu64
			  " t_handover_us=%" PRIu64 " t_worker_us=%" PRIu64, (unsigned)r->uid,
			  r->run_id, r->t_ready - r->t_arrived, sent - r->t_finished,
			  span_us(r->t_arrived, r->t_gated), span_us(r->t_gated, r->t_sent),
			  span_us(r->t_sent, r->t_ready));
	log_info("uid=%u run=%" PRIu64 " ended: %s", (unsigned)r->uid, r->run_id,
		 r->end == END_FINISHED ? "finished" : r->end == END_SETUP ? r->setup_step : "lost");
	if (r->next && r->end == END_FINISHED && !r->b->stopping)
		spare_make(r->b, &r->next->rq);
	run_release(r);
}

static void take_worker_msg(struct run *r, const struct msg *m)
{
	struct frame f;

	if (m->type == MSG_WARM && r->spare && !r->warm && r->end == END_NONE) {
		r->warm = true;
		r->warm_at_ms = now_ms();
		log_debug("uid=%u run=%" PRIu64 " spare pid=%" PRIu64 " waits for a snippet",
			  (unsigned)r->uid, r->run_id, m->u.warm.pid);
	} else if (m->type == MSG_WARM && r->early && !r->warm && r->end == END_NONE) {
		r->warm = true;
		log_debug("uid=%u run=%" PRIu64 " spare pid=%" PRIu64 " is ready: it takes its code",
			  (unsigned)r->uid, r->run_id, m->u.warm.pid);
	} else if (m->type == MSG_SETUP_ERROR && r->spare && r->end == END_NONE) {
		const struct msg_setup_error *e = &m->u.setup_error;

		r->end = END_SETUP;
		log_warn("uid=%u run=%" PRIu64 " spare failed at step %.*s: %.*s", (unsigned)r->uid,
			 r->run_id, (int)e->step.len, e->step.ptr, (int)e->message.len,
			 e->message.ptr);
	} else if (m->type == MSG_READY && !r->ready && r->end == END_NONE && !r->spare) {
		struct msg_started st = { r->id, r->profile, r->approver };

		r->ready = true;
		r->t_ready = now_us();
		log_info("uid=%u run=%" PRIu64 " snippet pid=%" PRIu64 " running, profile=%s, "
			 "landlock ABI %" PRIu64 "%s, secrets %s", (unsigned)r->uid, r->run_id,
			 m->u.ready.pid, profile_name(r->profile), m->u.ready.landlock_abi,
			 m->u.ready.landlock_abi ? "" : " (not in force)",
			 secrets_state(r->b, r->profile));
		if (r->s && enc_started(&f, &st) == 0)
			client_send(r->s, &f);
	} else if (m->type == MSG_SETUP_ERROR && !r->ready && r->end == END_NONE) {
		const struct msg_setup_error *e = &m->u.setup_error;

		r->end = END_SETUP;
		snprintf(r->setup_step, sizeof(r->setup_step), "%.*s", (int)e->step.len, e->step.ptr);
		snprintf(r->setup_msg, sizeof(r->setup_msg), "%.*s", (int)e->message.len,
			 e->message.ptr);
		r->setup_errno = e->err_no;
	} else if (m->type == MSG_FINISHED && r->ready && r->end == END_NONE) {
		r->end = END_FINISHED;
		r->t_finished = now_us();
		r->result = m->u.finished.r;
		r->blocked = m->u.finished.blocked;
		r->files_left_out = m->u.finished.files_left_out;
	} else if (m->type == MSG_SETUP_ERROR && r->end != END_NONE &&
		   pstr_eq(m->u.setup_error.step, step_name(STEP_CLEANUP))) {
		/* After the result: the run's scratch directory could not be
		 * removed.  The result stands; the log says where it is. */
		log_err("uid=%u run=%" PRIu64 " %.*s", (unsigned)r->uid, r->run_id,
			(int)m->u.setup_error.message.len, m->u.setup_error.message.ptr);
	} else {
		/* The worker link allows ready, then finished; or setup_error;
		 * then a setup_error of step cleanup.  Anything else means
		 * the worker is not the program we started. */
		log_warn("uid=%u run=%" PRIu64 " worker sent %s out of order; killing it",
			 (unsigned)r->uid, r->run_id, msg_type_name(m->type));
		monlink_kill(r->worker);
	}
}

/* The uid that owns a mount namespace's user namespace, as the kernel
 * says: the user the snippet ran as, whose runs alone can join it. */
static bool masks_owner(int fd, uid_t *owner)
{
	int user;
	bool ok;

	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS || (user = ioctl(fd, NS_GET_USERNS)) < 0)
		return false;
	ok = ioctl(user, NS_GET_OWNER_UID, owner) == 0;
	close(user);
	return ok;
}

/* After `finished`: the masks' namespace this run made, kept for its
 * owner's next unattended run.  false (the descriptor closed) for
 * anything else that carries a descriptor, or one that is not a mount
 * namespace: not our worker. */
static bool take_masks(struct run *r, const struct msg *m, int fd)
{
	uid_t owner;

	if (m->type == MSG_MASKS && fd >= 0 && r->end == END_FINISHED &&
	    r->profile == PROFILE_UNATTENDED && masks_owner(fd, &owner)) {
		secrets_keep(owner, fd, m->u.masks.key, now_ms());
		return true;
	}
	if (fd >= 0)
		close(fd);
	return false;
}

/* Reads what the descriptor holds, at most size bytes: a file that
 * shrank goes as it is now, one that grew goes cut at size. */
static ssize_t read_output_file(int fd, uint8_t *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size) {
		n = pread(fd, buf + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* After `finished`: one file of $KOTOBA_OUTPUT_DIR, as the worker opened
 * it, passed on as `file`.  false (the descriptor closed) when it breaks
 * the link's rules: out of order, not a regular file, over the caps. */
static bool take_output_file(struct run *r, const struct msg_output_file *m, int fd)
{
	/* Room for the frame's own fields beside the data. */
	uint64_t room = r->b->cfg.frame_max > 512 ? r->b->cfg.frame_max - 512 : 0;
	struct msg_file out = { .id = r->id, .name = m->name };
	struct stat st;
	uint8_t *buf = NULL;
	ssize_t n = 0;
	struct frame f;
	bool ok = fd >= 0 && r->end == END_FINISHED && fstat(fd, &st) == 0 &&
		  S_ISREG(st.st_mode) && r->files_sent < PROTO_FILES_MAX &&
		  m->size <= PROTO_FILES_TOTAL - r->file_bytes;

	/* A client that does not read what it is sent gets no more files
	 * past PROTO_FILES_TOTAL unwritten: what the broker holds for one
	 * connection stays bounded, however many of its runs end. */
	if (ok && r->s && m->size <= room &&
	    client_queued(r->s) + m->size <= PROTO_FILES_TOTAL &&
	    (buf = malloc(m->size ? m->size : 1)) && (n = read_output_file(fd, buf, m->size)) >= 0) {
		out.data = buf;
		out.len = (size_t)n;
		if (enc_file(&f, &out) == 0)
			client_send(r->s, &f);
	} else if (ok) {
		/* The client's frames are smaller ([limits] frame), it is not
		 * reading, or it has gone. */
		r->files_left_out++;
	}
	if (ok) {
		r->files_sent++;
		r->file_bytes += m->size;
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* With `ready`, unattended (or approved with [egress] approved = proxy):
 * the listening socket in the run's own network namespace, for the
 * egress proxy, with the rule the run's profile decides.  false (closed) for anything
 * else: not our worker. */
static bool take_egress(struct run *r, int fd)
{
	int acc = 0;
	socklen_t len = sizeof(acc);

	if ((r->profile != PROFILE_UNATTENDED && !r->proxied) || r->ready || r->end != END_NONE ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc) {
		close(fd);
		return false;
	}
	egresslink_attach(r->run_id, r->uid, r->profile != PROFILE_UNATTENDED, fd);
	r->egress = true;
	return true;
}

/* The worker broke its link's rules: it is not the program we started,
 * or something else holds its end.  It is killed and the link is read no
 * more, so that whatever holds it can neither keep the run nor send the
 * broker anything else. */
static void drop_worker_link(struct run *r, struct watch *w, const char *what)
{
	log_warn("uid=%u run=%" PRIu64 " worker sent %s; killing it", (unsigned)r->uid, r->run_id,
		 what);
	monlink_kill(r->worker);
	if (r->end == END_NONE)
		r->end = END_LOST;
	loop_close(w);
	maybe_complete(r);
}

/* The worker link ended without a result: a start that failed in the
 * monitor's child is that run's setup error, named as the worker would
 * name it; anything else, the worker was lost. */
static void worker_ended(struct run *r)
{
	unsigned step;
	int err_no;

	if (r->end != END_NONE)
		return;
	if (!monlink_start_failed(r->report, &step, &err_no, r->setup_msg,
				  sizeof(r->setup_msg))) {
		r->end = END_LOST;
		return;
	}
	r->end = END_SETUP;
	r->setup_errno = err_no;
	snprintf(r->setup_step, sizeof(r->setup_step), "%s", step_name(step_of_monitor(step)));
}

static void on_sock(struct watch *w, uint32_t events)
{
	struct run *r = w->ctx;
	uint8_t buf[8192];
	int passed;
	const uint8_t *payload;
	struct proto_error err;
	struct msg m;
	size_t len;
	ssize_t n;

	n = frame_recv_fd(w->fd, buf, sizeof(buf), MSG_DONTWAIT, &passed);
	/* ECONNRESET: the worker ended with our job frame unread (its exec
	 * failed, say); the kernel reports that before the frames it sent,
	 * which are still queued and say why.  The error is reported once. */
	if (n == -ECONNRESET)
		n = frame_recv_fd(w->fd, buf, sizeof(buf), MSG_DONTWAIT, &passed);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0) {
		worker_ended(r);
		loop_close(w);
		maybe_complete(r);
		return;
	}
	/* A frame: the exec happened, and the child of the monitor that
	 * could have failed before it is the worker now. */
	close_report(r);
	/* A worker message is one small frame per datagram, with at most the
	 * one descriptor of `masks`. */
	if (passed == -EPROTO ||
	    frame_parse_datagram(buf, (size_t)n, sizeof(buf) - PROTO_HEADER_LEN, &payload,
				 &len) < 0 ||
	    proto_decode(payload, len, 0, &m, &err) == MSG_UNKNOWN) {
		if (passed >= 0)
			close(passed);
		drop_worker_link(r, w, "a bad frame");
		return;
	}
	if (m.type == MSG_OUTPUT_FILE) {
		if (!take_output_file(r, &m.u.output_file, passed))
			drop_worker_link(r, w, "an output file out of order or over the caps");
	} else if (m.type == MSG_READY && passed >= 0) {
		if (take_egress(r, passed))
			take_worker_msg(r, &m);
		else
			drop_worker_link(r, w, "a descriptor with ready that is not the egress listener");
	} else if ((m.type == MSG_MASKS || passed >= 0) && !take_masks(r, &m, passed))
		drop_worker_link(r, w, "a descriptor or masks out of order");
	else if (m.type != MSG_MASKS && passed < 0)
		take_worker_msg(r, &m);
}

static void forward(struct run *r, int stream, const uint8_t *data, size_t len)
{
	uint64_t cap = r->b->cfg.output_cap;
	uint64_t room = r->out_bytes[stream] < cap ? cap - r->out_bytes[stream] : 0;
	struct msg_output m = { r->id, stream ? "stderr" : "stdout", data, len };
	struct frame f;

	/* Past the cap the pipe is still drained, so a runaway writer never
	 * blocks, but the bytes are dropped. */
	r->out_bytes[stream] += len;
	if (len > room) {
		r->truncated = true;
		m.len = (size_t)room;
	}
	if (!r->s || m.len == 0)
		return;
	if (enc_output(&f, &m) == 0)
		client_send(r->s, &f);
}

static void on_output(struct watch *w, uint32_t events)
{
	struct run *r = w->ctx;
	int stream = w == &r->out[1];
	uint8_t buf[OUTPUT_CHUNK];
	ssize_t n = read(w->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		loop_close(w);
		maybe_complete(r);
		return;
	}
	forward(r, stream, buf, (size_t)n);
	/* A client that does not read its output stops this run's pipes, not
	 * the broker: the snippet blocks on write until its timeout. */
	if (r->s && client_backlogged(r->s)) {
		r->paused = true;
		loop_mod(&r->out[0], 0);
		loop_mod(&r->out[1], 0);
	}
}

static void run_resume(struct run *r)
{
	if (!r->paused)
		return;
	r->paused = false;
	loop_mod(&r->out[0], EPOLLIN);
	loop_mod(&r->out[1], EPOLLIN);
}

/* Closing the worker's socket is the cancel signal: the worker sees EOF
 * and kills every process of the snippet. */
void run_cancel(struct run *r)
{
	if (r->done)
		return;
	r->cancelled = true;
	if (r->end == END_NONE)
		r->end = END_LOST;
	loop_close(&r->sock);
	run_resume(r);
	maybe_complete(r);
}

struct run *run_of_client(struct client_link *cl, uint64_t id)
{
	struct run *r;

	TAILQ_FOREACH(r, &cl->runs, slink)
		if (r->id == id)
			return r;
	return NULL;
}

void runs_resume(struct client_link *cl)
{
	struct run *r;

	TAILQ_FOREACH(r, &cl->runs, slink)
		run_resume(r);
}

static void run_detach(struct run *r)
{
	TAILQ_REMOVE(&r->s->runs, r, slink);
	r->s->nruns--;
	r->s = NULL;
	/* Still drain the pipes so the snippet is not blocked while dying. */
	run_resume(r);
	run_cancel(r);
}

void runs_detach(struct client_link *cl)
{
	struct run *r, *tmp;

	TAILQ_FOREACH_SAFE(r, &cl->runs, slink, tmp)
		run_detach(r);
}

struct run *run_of_worker(struct broker *b, pid_t pid)
{
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		if (r->worker == pid && !r->reaped)
			return r;
	return NULL;
}

unsigned run_note_refusal(struct run *r)
{
	return r->peer_refusals++;
}

static bool is_worker(struct broker *b, pid_t pid)
{
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		if (r->worker == pid)
			return true;
	return false;
}

/* The broker is the child subreaper of its workers' trees: when a worker
 * dies before it could kill its snippet (SIGKILL, a crash), the snippet's
 * processes are reparented here, and every child that is not a worker is
 * killed.  Their own children land here in turn and go the same way. */
static void kill_orphans(struct broker *b)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (char *p = buf, *end; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0 && pid != monlink_pid() && pid != egresslink_pid() &&
		    !is_worker(b, (pid_t)pid)) {
			log_warn("killing pid %ld, left behind by a worker that died", pid);
			monlink_kill((pid_t)pid);
		}
	}
}

/* Without its monitor a system broker can start no worker and hears of
 * no connection: it stops, and says why. */
static void monitor_gone(struct broker *b, int status)
{
	log_err("the monitor (pid %d) ended (%s %d); stopping", (int)monlink_pid(),
		WIFSIGNALED(status) ? "signal" : "status",
		WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	b->stopping = true;
	b->failed = true;
}

void runs_reap(struct broker *b)
{
	struct run *r, *tmp;
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == monlink_pid()) {
			monitor_gone(b, status);
			continue;
		}
		if (pid == egresslink_pid()) {
			egresslink_gone(status);
			continue;
		}
		TAILQ_FOREACH_SAFE(r, &b->runs, blink, tmp) {
			if (r->worker != pid)
				continue;
			r->reaped = true;
			if (WIFSIGNALED(status))
				log_warn("uid=%u run=%" PRIu64 " worker killed by signal %d",
					 (unsigned)r->uid, r->run_id, WTERMSIG(status));
			if (r->done)
				run_release(r);
			break;
		}
	}
	kill_orphans(b);
}

void runs_kill(struct broker *b)
{
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink)
		monlink_kill(r->worker);
}

/* The worker enforces the snippet's timeout; this is the backstop for a
 * worker that itself stops answering. */
void runs_tick(struct broker *b, uint64_t now)
{
	struct run *r, *tmp;

	if (cgroup_pending())
		cgroup_tick();
	TAILQ_FOREACH_SAFE(r, &b->runs, blink, tmp) {
		if (r->done || r->reaped)
			continue;
		if (r->spare && r->end == END_NONE && now >= r->idle_at_ms) {
			spare_missed(r);
			spare_stop(r, "no snippet took it in [sandbox] warm_idle");
			continue;
		}
		if (now >= r->abandon_at_ms) {
			log_err("uid=%u run=%" PRIu64 " worker pid=%d gave no result; abandoning",
				(unsigned)r->uid, r->run_id, (int)r->worker);
			loop_close(&r->sock);
			loop_close(&r->out[0]);
			loop_close(&r->out[1]);
			if (r->end == END_NONE)
				r->end = END_LOST;
			maybe_complete(r);
		} else if (now >= r->kill_at_ms) {
			monlink_kill(r->worker);
		}
	}
}

int runs_next_deadline(struct broker *b, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct run *r;

	TAILQ_FOREACH(r, &b->runs, blink) {
		if (r->done || r->reaped)
			continue;
		if (r->kill_at_ms < next)
			next = r->kill_at_ms;
		if (r->abandon_at_ms < next)
			next = r->abandon_at_ms;
		if (r->spare && r->end == END_NONE && r->idle_at_ms < next)
			next = r->idle_at_ms;
	}
	/* A cgroup whose removal waits: tried again each second. */
	if (cgroup_pending() && now + 1000 < next)
		next = now + 1000;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}
