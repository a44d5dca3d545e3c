/* SPDX-License-Identifier: MIT
 * Turning the decoded job into a plan: NUL-terminated paths, the
 * environment, the engine's command lines, and the per-run scratch
 * directory.  Runs in S before the fork; everything here may allocate and
 * may fail, and says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/rmtree.h"
#include "worker/secrets.h"
#include "worker/worker.h"

/* Variables the worker sets itself; a job entry of the same name is
 * dropped so the snippet sees exactly one, ours.  Each points into the
 * scratch directory. */
struct owned {
	const char *name, *leaf; /* NAME=<scratch><leaf>; egress_env: NAME=<leaf> */
};

#define N_OWNED_MAX 4

static const struct owned host_env[N_OWNED_MAX + 1] = {
	{ "TMPDIR", "" },
	/* Made empty with scratch: what the snippet leaves directly in it
	 * goes back to the client as `file` frames (outputs.c). */
	{ "KOTOBA_OUTPUT_DIR", "/" OUTPUT_LEAF },
	/* matplotlib creates its directory when it is missing. */
	{ "MPLCONFIGDIR", "/matplotlib" },
	/* The scratch directory itself: it exists, so a cache that makes
	 * only its own directory in XDG_CACHE_HOME (mkdir, not makedirs)
	 * works too. */
	{ "XDG_CACHE_HOME", "" },
	{ NULL, NULL },
};

/* The engine CLI keeps its configuration, temporary and runtime files
 * (podman's libpod/tmp, docker's ~/.docker) in scratch, which Landlock
 * lets it write, and S removes afterwards; podman would otherwise use
 * /run/user/UID. */
static const struct owned engine_env[N_OWNED_MAX + 1] = {
	{ "HOME", "" },
	{ "TMPDIR", "" },
	{ "XDG_RUNTIME_DIR", "" },
	{ NULL, NULL },
};

/* Unattended (and approved with the job's `proxy`): the run's one way
 * out is the egress proxy in its own
 * network namespace (netns.c), and every library that reads these goes
 * there; NO_PROXY would send a host around it, into a namespace where
 * nothing else answers, so a job's is dropped (NULL: no value). */
#define EGRESS_URL "http://127.0.0.1:" EGRESS_PORT_STR
static const struct owned egress_env[] = {
	{ "HTTP_PROXY", EGRESS_URL },
	{ "HTTPS_PROXY", EGRESS_URL },
	{ "http_proxy", EGRESS_URL },
	{ "https_proxy", EGRESS_URL },
	{ "NO_PROXY", NULL },
	{ "no_proxy", NULL },
	{ NULL, NULL },
};
#define N_EGRESS_ENV (sizeof(egress_env) / sizeof(egress_env[0]) - 1)

static bool is_engine(const struct plan *p)
{
	return p->profile == PROFILE_ENGINE;
}

static int copy_path(char *dst, size_t cap, struct pstr s, const char *what, char *err,
		     size_t errlen)
{
	if (s.len == 0 || s.len >= cap || s.ptr[0] != '/' || memchr(s.ptr, '\0', s.len)) {
		snprintf(err, errlen, "%s must be an absolute path: '%.*s'", what,
			 (int)(s.len > 100 ? 100 : s.len), s.ptr ? s.ptr : "");
		return -EINVAL;
	}
	memcpy(dst, s.ptr, s.len);
	dst[s.len] = '\0';
	return 0;
}

int plan_paths(struct plan *p, char *err, size_t errlen)
{
	const struct msg_job *job = p->job;
	int rc;

	/* The decoder allows only PROFILES_JOB; a plan built by hand is
	 * held to the same. */
	p->profile = job->profile;
	if ((unsigned)p->profile >= PROFILE_COUNT || !(PROFILES_JOB & PROFILE_BIT(p->profile))) {
		snprintf(err, errlen, "unknown profile '%s'", profile_name(p->profile));
		return -EINVAL;
	}
	/* The engine section and its profile come together: the engine
	 * profile confines a CLI, not python3, and python3 must never run
	 * under it. */
	if (is_engine(p) != job->has_engine) {
		snprintf(err, errlen, is_engine(p) ? "profile 'engine' without engine commands"
						   : "engine commands with profile '%s'",
			 profile_name(p->profile));
		return -EINVAL;
	}
	/* The engine runs no python3 on this host: its path is not used. */
	if (!is_engine(p) &&
	    (rc = copy_path(p->python, sizeof(p->python), job->python, "python", err, errlen)))
		return rc;
	if ((rc = copy_path(p->cwd, sizeof(p->cwd), job->cwd, "cwd", err, errlen)))
		return rc;
	return 0;
}

/* The snippet's output directory, inside scratch so that it goes with
 * it; made here, by S as the snippet's user, so that it is there and
 * empty when the snippet starts. */
static int make_output_dir(struct plan *p, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int rc;

	if (snprintf(path, sizeof(path), "%s/" OUTPUT_LEAF, p->scratch) >= (int)sizeof(path)) {
		snprintf(err, errlen, "scratch_base is too long for the output directory");
		return -ENAMETOOLONG;
	}
	if (mkdir(path, 0700) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create the output directory %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	return 0;
}

int plan_scratch(struct plan *p, char *err, size_t errlen)
{
	char base[PATH_MAX];
	int rc, n;

	rc = copy_path(base, sizeof(base), p->job->scratch_base, "scratch_base", err, errlen);
	if (rc)
		return rc;
	n = snprintf(p->scratch, sizeof(p->scratch), "%s/kotoba-run-XXXXXX", base);
	if (n < 0 || (size_t)n >= sizeof(p->scratch)) {
		p->scratch[0] = '\0';
		snprintf(err, errlen, "scratch_base is too long");
		return -ENAMETOOLONG;
	}
	/* mkdtemp: a fresh name, created 0700, never an existing path, and
	 * owned by the snippet's user, which S already is.  Only
	 * this directory: what lives in it is made on demand (matplotlib
	 * makes MPLCONFIGDIR, caches make theirs in XDG_CACHE_HOME), and
	 * every directory made here would cost a mkdir and an rmdir per run. */
	if (!mkdtemp(p->scratch)) {
		rc = -errno;
		snprintf(err, errlen, "cannot create a scratch directory in %s: %s", base,
			 strerror(-rc));
		p->scratch[0] = '\0';
		return rc;
	}
	return make_output_dir(p, err, errlen);
}

static bool is_owned(const struct owned *owned, struct pstr e)
{
	const char *eq = memchr(e.ptr, '=', e.len);
	size_t n = eq ? (size_t)(eq - e.ptr) : e.len;

	for (size_t i = 0; owned[i].name; i++)
		if (strlen(owned[i].name) == n && !memcmp(e.ptr, owned[i].name, n))
			return true;
	return false;
}

static int add_owned(const struct owned *owned, char **envp, size_t *k, const struct plan *p)
{
	char *s;

	for (size_t i = 0; owned[i].name; i++) {
		if (asprintf(&s, "%s=%s%s", owned[i].name, p->scratch, owned[i].leaf) < 0)
			return -ENOMEM;
		envp[(*k)++] = s;
	}
	return 0;
}

bool plan_has_egress(const struct plan *p)
{
	return p->profile == PROFILE_UNATTENDED ||
	       (p->profile == PROFILE_APPROVED && p->job->proxy);
}

static int add_egress(char **envp, size_t *k, const struct plan *p)
{
	for (size_t i = 0; plan_has_egress(p) && egress_env[i].name; i++) {
		if (!egress_env[i].leaf)
			continue;
		if (asprintf(&envp[*k], "%s=%s", egress_env[i].name, egress_env[i].leaf) < 0)
			return -ENOMEM;
		(*k)++;
	}
	return 0;
}

int plan_env(struct plan *p, char *err, size_t errlen)
{
	const struct msg_job *job = p->job;
	const struct owned *owned = is_engine(p) ? engine_env : host_env;
	size_t k = 0;

	p->envp = calloc(job->n_env + N_OWNED_MAX + N_EGRESS_ENV + 1, sizeof(*p->envp));
	if (!p->envp)
		goto nomem;
	for (size_t i = 0; i < job->n_env; i++) {
		if (memchr(job->env[i].ptr, '\0', job->env[i].len) ||
		    !memchr(job->env[i].ptr, '=', job->env[i].len)) {
			snprintf(err, errlen, "env entry %zu is not NAME=value", i);
			return -EINVAL;
		}
		if (is_owned(owned, job->env[i]) ||
		    (plan_has_egress(p) && is_owned(egress_env, job->env[i])))
			continue;
		p->envp[k] = pstr_dup(job->env[i]);
		if (!p->envp[k++])
			goto nomem;
	}
	if (add_owned(owned, p->envp, &k, p) == 0 && add_egress(p->envp, &k, p) == 0)
		return 0;
nomem:
	snprintf(err, errlen, "out of memory building the environment");
	return -ENOMEM;
}

static void free_argv(char **v)
{
	if (!v)
		return;
	for (char **a = v; *a; a++)
		free(*a);
	free(v);
}

/* A NULL-terminated copy of one engine command line; none when the job
 * has none (n == 0).  Its program must be an absolute path: execve does
 * not search PATH, and the PATH there would be the job's. */
static int copy_argv(char ***out, const struct job_argv *a, const char *what, char *err,
		     size_t errlen)
{
	char **v;

	*out = NULL;
	if (a->n == 0)
		return 0;
	if (a->n > PROTO_ARGV_MAX || a->v[0].len == 0 || a->v[0].len >= PATH_MAX ||
	    a->v[0].ptr[0] != '/') {
		snprintf(err, errlen, "the engine's %s command must start with an absolute path: "
				      "'%.*s'",
			 what, (int)(a->v[0].len > 100 ? 100 : a->v[0].len),
			 a->v[0].ptr ? a->v[0].ptr : "");
		return -EINVAL;
	}
	for (size_t i = 0; i < a->n; i++) {
		if (memchr(a->v[i].ptr, '\0', a->v[i].len)) {
			snprintf(err, errlen, "the engine's %s command: argument %zu holds a NUL",
				 what, i);
			return -EINVAL;
		}
	}
	v = calloc(a->n + 1, sizeof(*v));
	if (!v)
		goto nomem;
	for (size_t i = 0; i < a->n; i++) {
		v[i] = pstr_dup(a->v[i]);
		if (!v[i]) {
			free_argv(v);
			goto nomem;
		}
	}
	*out = v;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory copying the engine's %s command", what);
	return -ENOMEM;
}

/* A step's name is what a failure reports as `step`: short, printable. */
static int copy_step_name(char *dst, struct pstr name, size_t i, char *err, size_t errlen)
{
	bool ok = name.len > 0 && name.len < SETUP_STEP_MAX;

	for (size_t k = 0; ok && k < name.len; k++)
		ok = name.ptr[k] > 0x20 && name.ptr[k] < 0x7f;
	if (!ok) {
		snprintf(err, errlen, "engine step %zu: its name must be 1-%d printable ASCII "
				      "characters",
			 i, SETUP_STEP_MAX - 1);
		return -EINVAL;
	}
	memcpy(dst, name.ptr, name.len);
	dst[name.len] = '\0';
	return 0;
}

/* The engine's copy of the container's output directory lands in the
 * run's (outputs.c reads it from there, as on the host): its one argument
 * PROTO_OUTPUT_DIR_ARG becomes that directory's path.  Anything else is
 * not a copy the worker can collect. */
static int place_output_dir(struct plan *p, char **v, char *err, size_t errlen)
{
	char **at = NULL, *path;

	for (size_t i = 0; v && v[i]; i++) {
		if (strcmp(v[i], PROTO_OUTPUT_DIR_ARG))
			continue;
		if (at) {
			snprintf(err, errlen, "the engine's outputs command names %s twice",
				 PROTO_OUTPUT_DIR_ARG);
			return -EINVAL;
		}
		at = &v[i];
	}
	if (v && !at) {
		snprintf(err, errlen, "the engine's outputs command does not name %s",
			 PROTO_OUTPUT_DIR_ARG);
		return -EINVAL;
	}
	if (!at)
		return 0;
	if (asprintf(&path, "%s/" OUTPUT_LEAF, p->scratch) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	free(*at);
	*at = path;
	return 0;
}

int plan_engine(struct plan *p, char *err, size_t errlen)
{
	const struct job_engine *e = &p->job->engine;
	struct engine_plan *ep = &p->engine;
	int rc;

	if (!is_engine(p))
		return 0;
	if (e->n_steps > PROTO_STEPS_MAX) {
		snprintf(err, errlen, "more than %d engine steps", PROTO_STEPS_MAX);
		return -EINVAL;
	}
	if (e->run.n == 0) {
		snprintf(err, errlen, "the engine's run command is empty");
		return -EINVAL;
	}
	for (size_t i = 0; i < e->n_steps; i++) {
		const struct job_step *s = &e->steps[i];

		if ((rc = copy_step_name(ep->step_names[i], s->name, i, err, errlen)))
			return rc;
		if (s->argv.n == 0) {
			snprintf(err, errlen, "engine step '%s' has no command", ep->step_names[i]);
			return -EINVAL;
		}
		if ((rc = copy_argv(&ep->steps[i], &s->argv, ep->step_names[i], err, errlen)) ||
		    (rc = secrets_engine_args(p, &ep->steps[i], err, errlen)))
			return rc;
		ep->n_steps = i + 1;
	}
	if ((rc = copy_argv(&ep->run, &e->run, "run", err, errlen)) ||
	    (rc = copy_argv(&ep->kill, &e->kill, "kill", err, errlen)) ||
	    (rc = copy_argv(&ep->oom, &e->oom, "oom", err, errlen)) ||
	    (rc = copy_argv(&ep->outputs, &e->outputs, "outputs", err, errlen)))
		return rc;
	return place_output_dir(p, ep->outputs, err, errlen);
}

/* Called when no process of the snippet is left.  Most snippets leave the
 * directory empty: one rmdir.  A tree that cannot go is reported to the
 * broker, which logs it as an error naming the directory. */
void plan_remove_scratch(struct plan *p)
{
	char err[PATH_MAX + 256];
	int rc;

	if (!p->scratch[0])
		return;
	if (rmdir(p->scratch) < 0) {
		rc = remove_tree(p->scratch, err, sizeof(err));
		if (rc < 0)
			report_setup_error(step_name(STEP_CLEANUP), -rc, err);
	}
	p->scratch[0] = '\0';
}

void plan_free(struct plan *p)
{
	plan_free_secrets(p);
	for (size_t i = 0; i < p->engine.n_steps; i++) {
		free_argv(p->engine.steps[i]);
		p->engine.steps[i] = NULL;
	}
	p->engine.n_steps = 0;
	free_argv(p->engine.run);
	free_argv(p->engine.kill);
	free_argv(p->engine.oom);
	free_argv(p->engine.outputs);
	p->engine.run = p->engine.kill = p->engine.oom = p->engine.outputs = NULL;
	if (p->envp) {
		for (char **e = p->envp; *e; e++)
			free(*e);
		free(p->envp);
		p->envp = NULL;
	}
}
