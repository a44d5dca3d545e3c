/* SPDX-License-Identifier: MIT
 * sandbox = docker: warm containers and engine command lines (container.h).
 *
 * The command lines work with docker and with podman --remote alike; the
 * only differences are how the engine's address is given and that podman
 * chooses the OCI runtime in its service, not per container.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/container.h"
#include "broker/log.h"

/* Idle warm containers one user may keep; past it the oldest goes. */
#define IDLE_PER_USER_MAX 4
/* A container whose broker vanished (SIGKILL, a crash) ends itself this
 * long after the broker would have stopped it for being idle. */
#define SELF_STOP_SLACK_S 60

static TAILQ_HEAD(, container) containers = TAILQ_HEAD_INITIALIZER(containers);
static engine_runner *runner;

void container_set_runner(engine_runner *fn)
{
	runner = fn;
}

/* ops, if not NULL, hear how it ended with b as their ctx. */
static int run_engine(struct broker *b, uid_t peer, const struct engine_job *j,
		      const struct run_ops *ops, char *err, size_t errlen)
{
	if (!runner) {
		snprintf(err, errlen, "no engine runner is set");
		return -ENOSYS;
	}
	return runner(b, peer, j, ops, b, err, errlen);
}

/* The container's first process: it reaps what exec'd processes leave
 * behind (it is pid 1 there) and exits once no other process has been
 * seen for the given number of seconds, so that a container outlives a
 * broker that died by no more than that. */
static const char keepalive_py[] =
	"import os, signal, sys, time\n"
	"signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
	"quiet, limit = 0, int(sys.argv[1])\n"
	"while quiet < limit:\n"
	"    time.sleep(5)\n"
	"    busy = sum(p.isdigit() for p in os.listdir('/proc')) > 1\n"
	"    quiet = 0 if busy else quiet + 5\n";

/* Prints how often the OOM killer struck in this container's cgroup
 * (v2 memory.events, else v1 memory.oom_control); 0 when unknown. */
static const char oom_probe_py[] =
	"n = 0\n"
	"for path in ('/sys/fs/cgroup/memory.events',\n"
	"             '/sys/fs/cgroup/memory/memory.oom_control'):\n"
	"    try:\n"
	"        for line in open(path):\n"
	"            f = line.split()\n"
	"            if len(f) == 2 and f[0] == 'oom_kill':\n"
	"                n = max(n, int(f[1]))\n"
	"    except OSError:\n"
	"        pass\n"
	"print(n)\n";

/* ---- command lines ---------------------------------------------------------- */

static bool is_podman(const char *cli)
{
	const char *base = strrchr(cli, '/');

	return strstr(base ? base + 1 : cli, "podman") != NULL;
}

/* The CLI's absolute path ("" when not found), for `cli`. */
static int find_in_path(const char *cli, char *out, size_t len)
{
	static const char *const dirs[] = { "/usr/local/bin", "/usr/bin", "/bin" };

	out[0] = '\0';
	if (cli[0] == '/') {
		snprintf(out, len, "%s", cli);
		return access(out, X_OK) == 0 ? 0 : -errno;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(out, len, "%s/%s", dirs[i], cli);
		if (access(out, X_OK) == 0)
			return 0;
	}
	out[0] = '\0';
	return -ENOENT;
}

/* Formats into the job's text; overflow is noted, not fatal here. */
__attribute__((format(printf, 2, 0))) static struct pstr vput(struct engine_job *j, const char *fmt, va_list ap)
{
	size_t room = sizeof(j->text) - j->used;
	struct pstr p = { "", 0 };
	int n;

	if (room == 0) {
		j->overflow = true;
		return p;
	}
	n = vsnprintf(j->text + j->used, room, fmt, ap);
	if (n < 0 || (size_t)n >= room) {
		j->overflow = true;
		return p;
	}
	p = (struct pstr){ j->text + j->used, (size_t)n };
	j->used += (size_t)n + 1;
	return p;
}

__attribute__((format(printf, 3, 4))) static void arg(struct engine_job *j, struct job_argv *a,
						      const char *fmt, ...)
{
	va_list ap;

	if (a->n >= PROTO_ARGV_MAX) {
		j->overflow = true;
		return;
	}
	va_start(ap, fmt);
	a->v[a->n++] = vput(j, fmt, ap);
	va_end(ap);
}

/* The engine's address with %u as the user's uid. */
static void engine_url(const struct config *c, uid_t uid, char *out, size_t len)
{
	const char *t = c->container_url[0] ? c->container_url
		      : is_podman(c->container_cli) ? "unix:///run/user/%u/podman/podman.sock"
						     : "";
	size_t o = 0;

	for (; *t && o + 12 < len; t++) {
		if (t[0] == '%' && t[1] == 'u') {
			o += (size_t)snprintf(out + o, len - o, "%u", (unsigned)uid);
			t++;
		} else {
			out[o++] = *t;
		}
	}
	out[o] = '\0';
}

/* CLI and global options: where the engine is. */
static void prefix(const struct broker *b, const struct container *ct, const char *cli,
		   struct engine_job *j, struct job_argv *a)
{
	char url[300];

	engine_url(&b->cfg, ct->uid, url, sizeof(url));
	arg(j, a, "%s", cli);
	if (is_podman(cli)) {
		arg(j, a, "--remote");
		arg(j, a, "--url=%s", url);
	} else if (url[0]) {
		arg(j, a, "--host=%s", url);
	}
}

static struct job_argv *step(struct engine_job *j, const char *name)
{
	struct job_step *s = &j->e.steps[j->e.n_steps++];

	s->name = pstr_c(name); /* a literal: outlives the job */
	return &s->argv;
}

/* Fails, in the engine's words, when the client cannot reach a server. */
static void version_cmd(const struct broker *b, const struct container *ct, const char *cli,
			struct engine_job *j, struct job_argv *a)
{
	prefix(b, ct, cli, j, a);
	arg(j, a, "version");
	arg(j, a, "--format={{.Server.Version}}");
}

static void image_cmd(const struct broker *b, const struct container *ct, const char *cli,
		      struct engine_job *j, struct job_argv *a)
{
	prefix(b, ct, cli, j, a);
	arg(j, a, "image");
	arg(j, a, "inspect");
	arg(j, a, "--format={{.Id}}");
	arg(j, a, "%s", ct->image);
}

/* Cold start: is the engine there, is the image, then the container. */
static void start_steps(const struct broker *b, const struct container *ct, const char *cli,
			struct engine_job *j)
{
	const struct config *c = &b->cfg;
	struct job_argv *a;

	version_cmd(b, ct, cli, j, step(j, step_name(STEP_ENGINE)));
	image_cmd(b, ct, cli, j, step(j, step_name(STEP_IMAGE)));

	a = step(j, step_name(STEP_CONTAINER));
	prefix(b, ct, cli, j, a);
	arg(j, a, "run");
	arg(j, a, "--detach");
	arg(j, a, "--rm");
	arg(j, a, "--name=%s", ct->name);
	arg(j, a, "--label=org.kotoba.uid=%u", (unsigned)ct->uid);
	arg(j, a, "--network=none");
	arg(j, a, "--read-only");
	/* podman's --read-only otherwise mounts writable tmpfs on /run and
	 * /var/tmp; docker has no such flag and adds none. */
	if (is_podman(cli))
		arg(j, a, "--read-only-tmpfs=false");
	arg(j, a, "--cap-drop=all");
	arg(j, a, "--security-opt=no-new-privileges");
	arg(j, a, "--memory=%" PRIu64, c->container_memory);
	arg(j, a, "--memory-swap=%" PRIu64, c->container_memory);
	arg(j, a, "--pids-limit=%" PRIu64, c->container_pids);
	arg(j, a, "--ulimit=nofile=%" PRIu64 ":%" PRIu64, c->container_nofile, c->container_nofile);
	arg(j, a, "--ulimit=nproc=%" PRIu64 ":%" PRIu64, c->container_nproc, c->container_nproc);
	arg(j, a, "--tmpfs=/tmp:rw,nosuid,nodev,size=%" PRIu64 ",mode=1777", c->container_tmpfs);
	/* The runs' output directory: a mount point, which the snippet cannot
	 * swap for a symlink the engine's cp would follow (CONTAINER_OUT_DIR),
	 * its root the container user's (podman: U; docker: uid=, gid=). */
	if (is_podman(cli))
		arg(j, a, "--tmpfs=%s:rw,nosuid,nodev,noexec,size=%" PRIu64 ",mode=0700,U",
		    CONTAINER_OUT_DIR, c->container_tmpfs);
	else
		arg(j, a, "--tmpfs=%s:rw,nosuid,nodev,noexec,size=%" PRIu64 ",mode=0700,uid=%u,gid=%u",
		    CONTAINER_OUT_DIR, c->container_tmpfs, (unsigned)ct->uid, (unsigned)ct->gid);
	arg(j, a, "--user=%u:%u", (unsigned)ct->uid, (unsigned)ct->gid);
	arg(j, a, "--volume=%s:%s:rw", ct->cwd, ct->cwd);
	/* The working directory's .env files, masked in the container; the
	 * worker, as the user, finds them and puts a mount for each here. */
	if (c->secrets)
		arg(j, a, "%s", PROTO_SECRET_MASKS_ARG);
	arg(j, a, "--workdir=%s", ct->cwd);
	/* SIGTERM means nothing to the keep-alive: stop is kill at once. */
	arg(j, a, "--stop-timeout=0");
	if (c->container_runtime[0])
		arg(j, a, "--runtime=%s", c->container_runtime);
	arg(j, a, "--entrypoint=%s", c->container_python);
	arg(j, a, "%s", ct->image);
	/* Isolated like a snippet: the working directory is mounted and
	 * snippets may write there, and a signal.py left in it must not
	 * become the next container's first process. */
	arg(j, a, "-I");
	arg(j, a, "-c");
	arg(j, a, "%s", keepalive_py);
	arg(j, a, "%" PRIu64, c->container_idle_ms / 1000 + SELF_STOP_SLACK_S);
}

/* Names the snippet's environment keeps inside: the host's paths and
 * home mean nothing there, and the output directory is the run's own. */
static bool env_passes(const char *kv)
{
	static const char *const host_only[] = { "PATH=", "HOME=", "TMPDIR=", "PWD=", "XDG_",
						  "KOTOBA_OUTPUT_DIR=" };

	for (size_t i = 0; i < sizeof(host_only) / sizeof(host_only[0]); i++)
		if (!strncmp(kv, host_only[i], strlen(host_only[i])))
			return false;
	return true;
}

static void snippet_exec(const struct broker *b, const struct container *ct, const char *cli,
			 char *const *env, size_t n_env, struct engine_job *j)
{
	/* The same isolated start as on the host: an image's ENV PYTHONPATH
	 * or a .pth in the mounted working directory runs nothing either;
	 * first the output directory is emptied (PYTHON_CONTAINER_PRELUDE). */
	static const char *const python_args[] = { PYTHON_CONTAINER_ARGV };
	struct job_argv *a = &j->e.run;

	prefix(b, ct, cli, j, a);
	arg(j, a, "exec");
	arg(j, a, "--interactive");
	arg(j, a, "--workdir=%s", ct->cwd);
	arg(j, a, "--env=HOME=/tmp");
	arg(j, a, "--env=TMPDIR=/tmp");
	arg(j, a, "--env=KOTOBA_OUTPUT_DIR=%s", CONTAINER_OUT_DIR);
	for (size_t i = 0; i < n_env; i++)
		if (env_passes(env[i]))
			arg(j, a, "--env=%s", env[i]);
	arg(j, a, "%s", ct->name);
	arg(j, a, "%s", b->cfg.container_python);
	for (size_t i = 0; i < sizeof(python_args) / sizeof(python_args[0]); i++)
		arg(j, a, "%s", python_args[i]);
}

static void remove_cmd(const struct broker *b, const struct container *ct, const char *cli,
		       struct engine_job *j, struct job_argv *a)
{
	prefix(b, ct, cli, j, a);
	arg(j, a, "rm");
	arg(j, a, "--force");
	arg(j, a, "%s", ct->name);
}

static void oom_cmd(const struct broker *b, const struct container *ct, const char *cli,
		    struct engine_job *j)
{
	struct job_argv *a = &j->e.oom;

	prefix(b, ct, cli, j, a);
	arg(j, a, "exec");
	arg(j, a, "%s", ct->name);
	arg(j, a, "%s", b->cfg.container_python);
	arg(j, a, "-I");
	arg(j, a, "-c");
	arg(j, a, "%s", oom_probe_py);
}

/* What the snippet left in its output directory, copied by the engine
 * into the run's on the host (the worker names it): "DIR/." copies the
 * directory's entries, as they are (a symlink stays a symlink). */
static void outputs_cmd(const struct broker *b, const struct container *ct, const char *cli,
			struct engine_job *j)
{
	struct job_argv *a = &j->e.outputs;

	prefix(b, ct, cli, j, a);
	arg(j, a, "cp");
	arg(j, a, "%s:%s/.", ct->name, CONTAINER_OUT_DIR);
	arg(j, a, "%s", PROTO_OUTPUT_DIR_ARG);
}

static int find_cli(const struct broker *b, char *cli, size_t len, char *err, size_t errlen)
{
	int rc = find_in_path(b->cfg.container_cli, cli, len);

	if (rc < 0) {
		snprintf(err, errlen, "the container engine's client '%s' is not installed (%s%s)",
			 b->cfg.container_cli,
			 b->cfg.container_cli[0] == '/' ? "" : "looked in /usr/local/bin, /usr/bin "
							      "and /bin: ",
			 strerror(-rc));
		return -ENOEXEC;
	}
	return 0;
}

int container_snippet_job(const struct broker *b, const struct container *ct, char *const *env,
			  size_t n_env, struct engine_job *j, char *err, size_t errlen)
{
	char cli[256];
	int rc;

	memset(j, 0, sizeof(*j));
	if ((rc = find_cli(b, cli, sizeof(cli), err, errlen)) < 0)
		return rc;
	if (!ct->started)
		start_steps(b, ct, cli, j);
	snippet_exec(b, ct, cli, env, n_env, j);
	remove_cmd(b, ct, cli, j, &j->e.kill);
	oom_cmd(b, ct, cli, j);
	outputs_cmd(b, ct, cli, j);
	if (j->overflow) {
		snprintf(err, errlen, "the engine command line is too long (the snippet's "
				      "environment, the working directory or the image name)");
		return -ENOEXEC;
	}
	return 0;
}

/* ---- the table ---------------------------------------------------------------- */

static int new_name(uid_t uid, char *out, size_t len)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	snprintf(out, len, "kotoba-%u-%016" PRIx64, (unsigned)uid, r);
	return 0;
}

/* The engine's volume syntax splits on ':' and ','. */
static bool cwd_mountable(const char *cwd)
{
	return !strpbrk(cwd, ":,\n");
}

/* Where the broker listens: the listening socket's own name (a socket
 * systemd made has no configured path here), else the configured path. */
static void socket_dir(const struct broker *b, char *out, size_t len)
{
	struct sockaddr_un sa;
	socklen_t sl = sizeof(sa);
	char *slash;

	memset(&sa, 0, sizeof(sa));
	if (getsockname(b->listen.fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sun_family == AF_UNIX &&
	    sa.sun_path[0] == '/')
		snprintf(out, len, "%.*s", (int)sizeof(sa.sun_path), sa.sun_path);
	else
		snprintf(out, len, "%s", b->socket_path);
	slash = strrchr(out, '/');
	if (slash)
		*(slash == out ? slash + 1 : slash) = '\0';
}

static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/' || n == 1);
}

/* The working directory is mounted into the container: if the broker's
 * socket is under it, a process there could connect to the broker, and
 * its pid, below the engine's daemon and not below the broker, would not
 * show that it comes from a run (broker/peer.c).  Compared as written and
 * resolved; a hard link or a bind mount of the socket elsewhere is not seen. */
static bool cwd_holds_socket(const struct broker *b, const char *cwd)
{
	char sock[PATH_MAX], real_sock[PATH_MAX], real_cwd[PATH_MAX];

	socket_dir(b, sock, sizeof(sock));
	if (!sock[0])
		return false;
	if (path_within(sock, cwd))
		return true;
	if (!realpath(sock, real_sock))
		snprintf(real_sock, sizeof(real_sock), "%s", sock);
	if (!realpath(cwd, real_cwd))
		snprintf(real_cwd, sizeof(real_cwd), "%s", cwd);
	return path_within(real_sock, real_cwd);
}

static struct container *find_idle(const struct config *c, uid_t uid, const char *cwd)
{
	struct container *ct;

	TAILQ_FOREACH(ct, &containers, link)
		if (ct->state == CT_IDLE && ct->uid == uid && !strcmp(ct->cwd, cwd) &&
		    !strcmp(ct->image, c->container_image))
			return ct;
	return NULL;
}

int container_claim(struct broker *b, uid_t peer, const struct identity *id, const char *cwd,
		    struct container **out, char *err, size_t errlen)
{
	struct container *ct = find_idle(&b->cfg, id->uid, cwd);

	if (ct) {
		ct->state = CT_BUSY;
		*out = ct;
		return 0;
	}
	if (!cwd_mountable(cwd)) {
		snprintf(err, errlen, "working directory %s cannot be mounted into a container: "
				      "its path has ':' or ','", cwd);
		return -EINVAL;
	}
	if (cwd_holds_socket(b, cwd)) {
		snprintf(err, errlen, "working directory %s cannot be mounted into a container: "
				      "the broker's socket is inside it", cwd);
		return -EINVAL;
	}
	ct = calloc(1, sizeof(*ct));
	if (!ct)
		return -ENOMEM;
	ct->peer = peer;
	ct->uid = id->uid;
	ct->gid = id->gid;
	snprintf(ct->cwd, sizeof(ct->cwd), "%s", cwd);
	snprintf(ct->image, sizeof(ct->image), "%s", b->cfg.container_image);
	if (new_name(ct->uid, ct->name, sizeof(ct->name)) < 0) {
		free(ct);
		snprintf(err, errlen, "cannot name a container: getrandom failed");
		return -EIO;
	}
	ct->state = CT_BUSY;
	TAILQ_INSERT_TAIL(&containers, ct, link);
	*out = ct;
	return 0;
}

/* Removes it from the table and has the engine remove it, as its user. */
static void stop(struct broker *b, struct container *ct, const char *why)
{
	static struct engine_job j;
	char cli[256], err[300] = "";

	TAILQ_REMOVE(&containers, ct, link);
	log_info("uid=%u container %s: %s, stopping it", (unsigned)ct->uid, ct->name, why);
	memset(&j, 0, sizeof(j));
	if (find_cli(b, cli, sizeof(cli), err, sizeof(err)) == 0) {
		remove_cmd(b, ct, cli, &j, &j.e.run);
		if (run_engine(b, ct->peer, &j, NULL, err, sizeof(err)) == 0)
			err[0] = '\0';
	}
	if (err[0])
		log_err("uid=%u container %s not stopped: %s", (unsigned)ct->uid, ct->name, err);
	free(ct);
}

static void drop(struct container *ct)
{
	TAILQ_REMOVE(&containers, ct, link);
	free(ct);
}

/* A snippet that ended by itself leaves a container fit for the next.
 * 125-127 are the engine's own failures (no such container, python
 * missing), 137 a SIGKILL inside (the OOM killer, say). */
static bool ended_cleanly(const struct run_info *ri)
{
	const struct run_result *x = &ri->result;

	if (ri->end != END_FINISHED || ri->cancelled || x->timed_out || !x->exited)
		return false;
	return x->code < 125 || (x->code > 127 && x->code != 137);
}

/* Nothing was created when the engine or the image was missing, or when
 * the worker never got the job (run_start() failed: step "worker"). */
static bool never_created(const struct run_info *ri)
{
	return ri->end == END_SETUP && (!strcmp(ri->setup_step, step_name(STEP_ENGINE)) ||
					!strcmp(ri->setup_step, step_name(STEP_IMAGE)) ||
					!strcmp(ri->setup_step, step_name(STEP_WORKER)));
}

static void trim_idle(struct broker *b, uid_t uid)
{
	struct container *ct, *oldest = NULL;
	unsigned n = 0;

	TAILQ_FOREACH(ct, &containers, link) {
		if (ct->state != CT_IDLE || ct->uid != uid)
			continue;
		n++;
		if (!oldest || ct->idle_since_ms < oldest->idle_since_ms)
			oldest = ct;
	}
	if (n > IDLE_PER_USER_MAX)
		stop(b, oldest, "more idle containers than a user keeps");
}

void container_release(struct broker *b, struct container *ct, const struct run_info *ri)
{
	if (ended_cleanly(ri) && !b->stopping) {
		ct->state = CT_IDLE;
		ct->started = true;
		ct->idle_since_ms = now_ms();
		trim_idle(b, ct->uid);
		return;
	}
	if (never_created(ri) && !ct->started) {
		drop(ct);
		return;
	}
	stop(b, ct, "its snippet did not end cleanly");
}

int containers_tick(struct broker *b, uint64_t now)
{
	uint64_t idle = b->cfg.container_idle_ms, next = UINT64_MAX;
	struct container *ct, *tmp;

	TAILQ_FOREACH_SAFE(ct, &containers, link, tmp) {
		if (ct->state != CT_IDLE)
			continue;
		if (now >= ct->idle_since_ms + idle)
			stop(b, ct, "idle");
		else if (ct->idle_since_ms + idle < next)
			next = ct->idle_since_ms + idle;
	}
	if (next == UINT64_MAX)
		return -1;
	return next - now > 60000 ? 60000 : (int)(next - now);
}

void containers_stop_all(struct broker *b)
{
	struct container *ct, *tmp;

	TAILQ_FOREACH_SAFE(ct, &containers, link, tmp)
		if (ct->state == CT_IDLE)
			stop(b, ct, "the broker is stopping");
}

/* ---- the check at start ------------------------------------------------------- */

static char check_user[96];

static void image_checked(const struct run_info *ri, void *ctx)
{
	const struct broker *b = ctx;
	const struct run_result *x = &ri->result;

	if (ri->end == END_SETUP)
		log_warn("sandbox=docker: checked as %s: step '%s' failed: %s; snippets that reach "
			 "the engine the same way will fail at that step", check_user,
			 ri->setup_step, ri->setup_msg);
	else if (ri->end != END_FINISHED)
		log_warn("sandbox=docker: checked as %s: the check did not finish", check_user);
	else if (x->exited && x->code == 0)
		log_info("sandbox=docker: checked as %s: image %s is there", check_user,
			 b->cfg.container_image);
	else
		log_err("sandbox=docker: checked as %s: image %s is missing (`image inspect` %s "
			"%" PRId64 "); snippets will fail at step 'image' until it is pulled or "
			"imported", check_user, b->cfg.container_image,
			x->exited ? "exited with" : "got signal", x->exited ? x->code : x->signal);
}

static const struct run_ops image_check_ops = { .ended = image_checked };

void container_check_image(struct broker *b)
{
	static struct engine_job j;
	struct container probe = { .peer = privsep_system_mode() ? 0 : getuid() };
	struct identity id;
	char cli[256], err[300] = "";

	if (find_cli(b, cli, sizeof(cli), err, sizeof(err)) < 0) {
		log_warn("sandbox=docker: %s; every snippet will fail until it is", err);
		return;
	}
	log_info("sandbox=docker: engine client %s, image %s%s%s", cli, b->cfg.container_image,
		 b->cfg.container_url[0] ? ", url " : "", b->cfg.container_url);
	if (privsep_identity(probe.peer, &id, err, sizeof(err)) == 0) {
		probe.uid = id.uid;
		snprintf(probe.image, sizeof(probe.image), "%s", b->cfg.container_image);
		snprintf(check_user, sizeof(check_user), "%s%s", id.name,
			 probe.peer == 0 ? " (root_user)" : "");
		memset(&j, 0, sizeof(j));
		version_cmd(b, &probe, cli, &j, step(&j, step_name(STEP_ENGINE)));
		image_cmd(b, &probe, cli, &j, &j.e.run);
		if (j.overflow)
			snprintf(err, sizeof(err), "the image name is too long");
		else if (run_engine(b, probe.peer, &j, &image_check_ops, err, sizeof(err)) == 0)
			return;
	}
	log_warn("sandbox=docker: the image was not checked at start: %s", err);
}
