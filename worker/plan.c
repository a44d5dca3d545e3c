/* SPDX-License-Identifier: MIT
 * Turning the decoded job into a plan: NUL-terminated paths, the
 * environment, and the per-run scratch directory.  Runs in S before the
 * fork; everything here may allocate and may fail, and says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/worker.h"

/* Variables the worker sets itself; a job entry of the same name is
 * dropped so the snippet sees exactly one, ours. */
static const char *const owned_env[] = { "TMPDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME" };
#define N_OWNED (sizeof(owned_env) / sizeof(owned_env[0]))

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

	if ((rc = copy_path(p->python, sizeof(p->python), job->python, "python", err, errlen)) ||
	    (rc = copy_path(p->cwd, sizeof(p->cwd), job->cwd, "cwd", err, errlen)))
		return rc;
	if (job->profile.len >= sizeof(p->profile) ||
	    memchr(job->profile.ptr, '\0', job->profile.len)) {
		snprintf(err, errlen, "unknown profile");
		return -EINVAL;
	}
	memcpy(p->profile, job->profile.ptr, job->profile.len);
	p->profile[job->profile.len] = '\0';
	if (strcmp(p->profile, "approved") && strcmp(p->profile, "unattended")) {
		snprintf(err, errlen, "unknown profile '%s'", p->profile);
		return -EINVAL;
	}
	/* Defence in depth: the broker never asks for root, and a worker
	 * that switches identity must not be talked into it. */
	if (job->set_ids && job->uid == 0) {
		snprintf(err, errlen, "refusing to run a snippet as uid 0");
		return -EPERM;
	}
	for (size_t i = 0; i < job->n_groups; i++)
		p->groups[i] = (gid_t)job->groups[i];
	return 0;
}

/* The snippet's user gets the directory (when S switches identity): by
 * descriptor, opened without following a symlink, so only the directory
 * mkdtemp made can be handed over. */
static int hand_over_scratch(struct plan *p, char *err, size_t errlen)
{
	int fd, rc;

	if (!p->job->set_ids)
		return 0;
	fd = open(p->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open scratch directory %s: %s", p->scratch,
			 strerror(-rc));
		return rc;
	}
	rc = fchown(fd, (uid_t)p->job->uid, (gid_t)p->job->gid) < 0 ? -errno : 0;
	if (rc < 0)
		snprintf(err, errlen, "cannot hand %s to uid %llu: %s", p->scratch,
			 (unsigned long long)p->job->uid, strerror(-rc));
	close(fd);
	return rc;
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
	/* mkdtemp: a fresh name, created 0700, never an existing path.  Only
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
	return hand_over_scratch(p, err, errlen);
}

static bool is_owned(struct pstr e)
{
	const char *eq = memchr(e.ptr, '=', e.len);
	size_t n = eq ? (size_t)(eq - e.ptr) : e.len;

	for (size_t i = 0; i < N_OWNED; i++)
		if (strlen(owned_env[i]) == n && !memcmp(e.ptr, owned_env[i], n))
			return true;
	return false;
}

static int add_owned(char **envp, size_t *k, const struct plan *p)
{
	char *s;

	if (asprintf(&s, "TMPDIR=%s", p->scratch) < 0)
		return -ENOMEM;
	envp[(*k)++] = s;
	/* matplotlib creates its directory when it is missing. */
	if (asprintf(&s, "MPLCONFIGDIR=%s/matplotlib", p->scratch) < 0)
		return -ENOMEM;
	envp[(*k)++] = s;
	/* The scratch directory itself: it exists, so a cache that makes
	 * only its own directory in XDG_CACHE_HOME (mkdir, not makedirs)
	 * works too. */
	if (asprintf(&s, "XDG_CACHE_HOME=%s", p->scratch) < 0)
		return -ENOMEM;
	envp[(*k)++] = s;
	return 0;
}

int plan_env(struct plan *p, char *err, size_t errlen)
{
	const struct msg_job *job = p->job;
	size_t k = 0;

	p->envp = calloc(job->n_env + N_OWNED + 1, sizeof(*p->envp));
	if (!p->envp)
		goto nomem;
	for (size_t i = 0; i < job->n_env; i++) {
		if (memchr(job->env[i].ptr, '\0', job->env[i].len) ||
		    !memchr(job->env[i].ptr, '=', job->env[i].len)) {
			snprintf(err, errlen, "env entry %zu is not NAME=value", i);
			return -EINVAL;
		}
		if (is_owned(job->env[i]))
			continue;
		p->envp[k] = pstr_dup(job->env[i]);
		if (!p->envp[k++])
			goto nomem;
	}
	if (add_owned(p->envp, &k, p) == 0)
		return 0;
nomem:
	snprintf(err, errlen, "out of memory building the environment");
	return -ENOMEM;
}

static bool scratch_stuck;

/* Snippet-made directories may deny us entry (chmod 000): give them back
 * to their owner before removing.  nftw opens a directory before it
 * reports it, so each round unlocks one more level. */
static int unlock_dir(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if ((type == FTW_D || type == FTW_DNR) && (st->st_mode & 0700) != 0700)
		(void)chmod(path, 0700);
	if (type == FTW_DNR)
		scratch_stuck = true;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	int rc;

	rc = type == FTW_DP ? rmdir(path) : unlink(path);
	if (rc < 0 && errno != ENOENT)
		scratch_stuck = true;
	return 0;
}

/* Called when no process of the snippet is left, so nothing races us.
 * Most snippets leave the directory empty: one rmdir.  Otherwise the walk:
 * FTW_PHYS: never follow a symlink the snippet left; FTW_MOUNT: never
 * cross into another file system.  Entries nested deeper than PATH_MAX
 * stay behind (nftw works on whole paths). */
void plan_remove_scratch(struct plan *p)
{
	const int flags = FTW_PHYS | FTW_MOUNT;

	if (!p->scratch[0])
		return;
	if (rmdir(p->scratch) == 0) {
		p->scratch[0] = '\0';
		return;
	}
	for (int round = 0; round < 32; round++) {
		scratch_stuck = false;
		if (round > 0)
			nftw(p->scratch, unlock_dir, 16, flags);
		nftw(p->scratch, remove_entry, 16, flags | FTW_DEPTH);
		if (!scratch_stuck)
			break;
	}
	p->scratch[0] = '\0';
}

void plan_free(struct plan *p)
{
	if (p->envp) {
		for (char **e = p->envp; *e; e++)
			free(*e);
		free(p->envp);
		p->envp = NULL;
	}
}
