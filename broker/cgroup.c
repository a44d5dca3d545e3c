/* SPDX-License-Identifier: MIT
 * Per-run cgroups (see cgroup.h).  The layout, under the broker's own
 * cgroup as /proc/self/cgroup names it:
 *   v1:  /sys/fs/cgroup/{memory,pids}/<own>/kotoba/<pid>/run-<id>
 *   v2:  <own>/kotoba/<pid>/{broker,run-<id>}, the broker itself moved
 *        into the leaf `broker` (no process may sit in a cgroup that
 *        hands controllers down)
 * <pid>: one directory per broker, so brokers started from the same
 * cgroup (tests, a per-user and a system broker) never touch each
 * other's runs; `kotoba` and <pid> belong to the service user, so the
 * broker removes its own at stop, and one that is gone is removed by the
 * next broker's start.  The run-<id> directories are made by the broker as
 * that user; snippets, which run as other users (or, per-user, under a
 * profile that writes nothing outside its scratch), cannot move
 * themselves out or raise a limit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "broker/cgroup.h"
#include "broker/log.h"
#include "broker/monlink.h"
#include "broker/loop.h"

enum cg_version { CG_NONE, CG_V1, CG_V2 };

struct hier {
	const char *controller; /* v1: "memory" or "pids"; v2: NULL (both) */
	char path[4096];        /* the broker's directory, kotoba/<pid> */
	int dirfd;
};

static enum cg_version version;
static struct hier hiers[CGROUP_HIER_MAX];
static size_t n_hiers;

/* A run whose cgroup still held a process when it ended. */
#define PENDING_MAX 64
#define PENDING_LOG_MS 10000
static struct pending {
	char name[32];
	uint64_t since_ms;
	bool logged;
} pending[PENDING_MAX];
static size_t n_pending;

static bool is_fs(const char *path, long magic)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == magic;
}

/* The path of this process's cgroup in the hierarchy with `controller`
 * (v1), or in the unified one (controller NULL: the "0::" line). */
static int own_cgroup(const char *controller, char *out, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char *ctrls = strchr(line, ':'), *path, *save = NULL;

		if (!ctrls || !(path = strchr(ctrls + 1, ':')))
			continue;
		*ctrls++ = '\0';
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (!controller) {
			if (!strcmp(line, "0") && !ctrls[0])
				rc = snprintf(out, len, "%s", path) < (int)len ? 0 : -ENAMETOOLONG;
			continue;
		}
		for (char *c = strtok_r(ctrls, ",", &save); c; c = strtok_r(NULL, ",", &save))
			if (!strcmp(c, controller))
				rc = snprintf(out, len, "%s", path) < (int)len ? 0 : -ENAMETOOLONG;
	}
	fclose(f);
	return rc;
}

static int write_at(int dirfd, const char *file, const char *text)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int e;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	e = errno;
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : n < 0 ? -e : -EIO;
}

static int write_num_at(int dirfd, const char *file, uint64_t v)
{
	char text[32];

	snprintf(text, sizeof(text), "%" PRIu64, v);
	return write_at(dirfd, file, text);
}

static ssize_t read_at(int dirfd, const char *file, char *buf, size_t len)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* A number on its own, or the value of `key` in "key value" lines. */
static uint64_t read_value_at(int dirfd, const char *file, const char *key)
{
	char buf[4096];
	size_t klen = key ? strlen(key) : 0;

	if (read_at(dirfd, file, buf, sizeof(buf)) <= 0)
		return 0;
	if (!key)
		return strtoull(buf, NULL, 10);
	for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, klen) && p[klen] == ' ')
			return strtoull(p + klen + 1, NULL, 10);
	return 0;
}

/* mkdir, then opened without following a link, and given to the owner. */
static int own_dir(const char *path, uid_t owner, gid_t group)
{
	int fd;

	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (owner != (uid_t)-1 && fchown(fd, owner, group) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* Directories of brokers that are gone: their runs' cgroups, then theirs.
 * Only empty cgroups can be removed, so nothing alive is touched. */
static void remove_stale(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;
		int fd;

		pid = strtol(e->d_name, &end, 10);
		if (*end || end == e->d_name || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			DIR *sub = fdopendir(fd);
			struct dirent *s;

			while (sub && (s = readdir(sub)))
				if (!strncmp(s->d_name, "run-", 4) || !strcmp(s->d_name, "broker"))
					unlinkat(dirfd(sub), s->d_name, AT_REMOVEDIR);
			if (sub)
				closedir(sub);
			else
				close(fd);
		}
		/* Not ours to remove (another user's broker): its own next
		 * start will. */
		if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0 && errno != EACCES &&
		    errno != EPERM)
			log_warn("cgroup %s/%s, left by a broker that is gone, cannot be removed: %s",
				 parent, e->d_name, strerror(errno));
	}
	closedir(d);
}

/* parent/kotoba/<pid>, both for the owner; opened as h->dirfd. */
static int make_broker_dir(struct hier *h, const char *parent, uid_t owner, gid_t group)
{
	char top[2300];
	int fd;

	snprintf(top, sizeof(top), "%s/kotoba", parent);
	fd = own_dir(top, owner, group);
	if (fd < 0) {
		snprintf(h->path, sizeof(h->path), "%s", top);
		return fd;
	}
	close(fd);
	remove_stale(top);
	snprintf(h->path, sizeof(h->path), "%s/%d", top, (int)getpid());
	h->dirfd = own_dir(h->path, owner, group);
	return h->dirfd < 0 ? h->dirfd : 0;
}

/* v1: /sys/fs/cgroup/<controller>/<own>/kotoba/<pid>. */
static int setup_v1(const char *controller, uid_t owner, gid_t group, char *why, size_t len)
{
	struct hier *h = &hiers[n_hiers];
	char mount[64], own[2048], parent[2200];
	int rc;

	snprintf(mount, sizeof(mount), "/sys/fs/cgroup/%s", controller);
	if (!is_fs(mount, CGROUP_SUPER_MAGIC)) {
		snprintf(why, len, "v1 %s: not mounted at %s", controller, mount);
		return -ENOENT;
	}
	if ((rc = own_cgroup(controller, own, sizeof(own))) < 0) {
		snprintf(why, len, "v1 %s: not in /proc/self/cgroup", controller);
		return rc;
	}
	snprintf(parent, sizeof(parent), "%s%s", mount, strcmp(own, "/") ? own : "");
	if ((rc = make_broker_dir(h, parent, owner, group)) < 0) {
		snprintf(why, len, "v1 %s: cannot make %.300s: %s", controller, h->path,
			 strerror(-rc));
		return rc;
	}
	h->controller = controller;
	n_hiers++;
	return 0;
}

/* Enables memory and pids for the children of parent, parent/kotoba and
 * parent/kotoba/<pid> (dirfd), top down, as v2 requires. */
static int hand_down(const char *parent, int dirfd, const char **step)
{
	static const char ctl[] = "cgroup.subtree_control", on[] = "+memory +pids";
	char top[2300];
	int fd, rc;

	*step = "cgroup.subtree_control of its own cgroup";
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? -errno : write_at(fd, ctl, on);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	*step = "kotoba/cgroup.subtree_control";
	snprintf(top, sizeof(top), "%s/kotoba", parent);
	fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? -errno : write_at(fd, ctl, on);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	*step = "cgroup.subtree_control";
	return write_at(dirfd, ctl, on);
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* v2, where the broker's cgroup is its own to divide (systemd Delegate=,
 * or the broker is root): kotoba/<pid>/broker takes the broker itself,
 * then memory and pids are handed down to kotoba/<pid>'s children. */
static int setup_v2(uid_t owner, gid_t group, char *why, size_t len)
{
	const char *mount = is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC) ? "/sys/fs/cgroup"
			    : is_fs("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC)
				    ? "/sys/fs/cgroup/unified" : NULL;
	struct hier *h = &hiers[0];
	char own[2048], parent[2200], ctrls[512];
	const char *step;
	int ownfd = -1, rc = 0, leaf = -1;

	if (!mount || own_cgroup(NULL, own, sizeof(own)) < 0) {
		snprintf(why, len, "v2: no cgroup2 mount");
		return -ENOENT;
	}
	snprintf(parent, sizeof(parent), "%s%s", mount, strcmp(own, "/") ? own : "");
	ownfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ownfd < 0 || read_at(ownfd, "cgroup.controllers", ctrls, sizeof(ctrls)) < 0 ||
	    !has_word(ctrls, "memory") || !has_word(ctrls, "pids")) {
		snprintf(why, len, "v2: %.300s does not offer the memory and pids controllers", parent);
		if (ownfd >= 0)
			close(ownfd);
		return -ENOENT;
	}
	step = "mkdir";
	h->dirfd = -1;
	rc = make_broker_dir(h, parent, owner, group);
	if (rc == 0 && (mkdirat(h->dirfd, "broker", 0755) < 0 && errno != EEXIST))
		rc = -errno;
	if (rc == 0 && (leaf = openat(h->dirfd, "broker", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = -errno;
	if (rc == 0 && (step = "broker/cgroup.procs", rc = write_at(leaf, "cgroup.procs", "0")) == 0)
		rc = hand_down(parent, h->dirfd, &step);
	/* Moving a run's first process from broker/ to run-<id>/ needs write
	 * access to their common parent's cgroup.procs. */
	if (rc == 0 && owner != (uid_t)-1 &&
	    (fchownat(h->dirfd, "cgroup.procs", owner, group, 0) < 0 ||
	     fchownat(h->dirfd, "cgroup.subtree_control", owner, group, 0) < 0))
		step = "chown", rc = -errno;
	if (leaf >= 0)
		close(leaf);
	if (rc < 0) {
		snprintf(why, len, "v2: %s in %.300s: %s", step, h->path, strerror(-rc));
		/* Back where it was; the directories go if they can. */
		write_at(ownfd, "cgroup.procs", "0");
		if (h->dirfd >= 0) {
			unlinkat(h->dirfd, "broker", AT_REMOVEDIR);
			close(h->dirfd);
			rmdir(h->path);
			h->dirfd = -1;
		}
		close(ownfd);
		return rc;
	}
	close(ownfd);
	n_hiers = 1;
	return 0;
}

void cgroup_setup(uid_t owner, gid_t group, bool system_mode)
{
	char why_v2[512] = "", why_mem[512] = "", why_pids[512] = "";
	const char *missing;

	if (setup_v2(owner, group, why_v2, sizeof(why_v2)) == 0) {
		version = CG_V2;
	} else {
		setup_v1("memory", owner, group, why_mem, sizeof(why_mem));
		setup_v1("pids", owner, group, why_pids, sizeof(why_pids));
		version = n_hiers ? CG_V1 : CG_NONE;
	}
	if (version == CG_V2) {
		log_info("per-run cgroups: v2 under %s (memory.max, memory.swap.max, pids.max)",
			 hiers[0].path);
		return;
	}
	for (size_t i = 0; i < n_hiers; i++)
		log_info("per-run cgroups: v1 %s under %s", hiers[i].controller, hiers[i].path);
	if (n_hiers == 2)
		return;
	missing = !n_hiers ? "memory and pids"
		  : !strcmp(hiers[0].controller, "memory") ? "pids" : "memory";
	/* A system daemon serves many users: without these, each snippet's
	 * memory and process limits hold per process only. */
	log_msg(system_mode ? LOG_LVL_ERR : LOG_LVL_WARN,
		"%sno per-run cgroup for %s (%s; %s%s%s): the [limits] memory and processes "
		"hold for each snippet process alone (RLIMIT_AS, RLIMIT_NPROC), so a snippet "
		"with many processes can use many times the memory limit; delegate cgroup v2 "
		"to the broker (systemd Delegate=yes) or run it as root with the v1 memory "
		"and pids controllers mounted",
		system_mode ? "WARNING: " : "", missing, why_v2,
		why_mem[0] ? why_mem : why_pids, why_mem[0] && why_pids[0] ? "; " : "",
		why_mem[0] && why_pids[0] ? why_pids : "");
}

bool cgroup_enabled(void)
{
	return version != CG_NONE;
}

static int set_limits(const struct hier *h, int fd, uint64_t memory, uint64_t pids,
		      const char **file)
{
	int rc = 0;

	if (!h->controller || !strcmp(h->controller, "memory")) {
		bool v2 = !h->controller;

		*file = v2 ? "memory.max" : "memory.limit_in_bytes";
		if ((rc = write_num_at(fd, *file, memory)) < 0)
			return rc;
		/* Swap must not extend the limit: v2 counts swap apart (none
		 * for a run), v1 memsw is memory plus swap.  Absent when the
		 * kernel does not account swap (swapaccount=0): then a run's
		 * pages may also go to swap, beyond the limit. */
		*file = v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
		rc = write_num_at(fd, *file, v2 ? 0 : memory);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	if (!h->controller || !strcmp(h->controller, "pids")) {
		*file = "pids.max";
		if ((rc = write_num_at(fd, *file, pids)) < 0)
			return rc;
	}
	return 0;
}

static void close_procs(struct cgroup_run *cg);

static int make_run_dir(const struct hier *h, const char *name)
{
	if (mkdirat(h->dirfd, name, 0755) == 0)
		return 0;
	/* Left by an earlier broker with this pid, and empty, or busy. */
	if (errno == EEXIST && unlinkat(h->dirfd, name, AT_REMOVEDIR) == 0 &&
	    mkdirat(h->dirfd, name, 0755) == 0)
		return 0;
	return -errno;
}

int cgroup_run_create(struct cgroup_run *cg, uint64_t run_id, uint64_t memory, uint64_t pids,
		      char *err, size_t errlen)
{
	const char *file = "mkdir";
	size_t made = 0;
	int rc = 0, fd;

	memset(cg, 0, sizeof(*cg));
	for (size_t i = 0; i < CGROUP_HIER_MAX; i++)
		cg->procs[i] = -1;
	snprintf(cg->name, sizeof(cg->name), "run-%" PRIu64, run_id);
	cg->memory = memory;
	cg->pids = pids;
	for (; made < n_hiers; made++) {
		const struct hier *h = &hiers[made];

		file = "mkdir";
		if ((rc = make_run_dir(h, cg->name)) < 0)
			break;
		fd = openat(h->dirfd, cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		rc = set_limits(h, fd, memory, pids, &file);
		if (rc == 0) {
			/* v1: `tasks`, which moves the writing thread alone.  The
			 * fork child has one thread, so that is the process; and
			 * unlike cgroup.procs it skips the kernel's global
			 * threadgroup lock, whose taking waits for an RCU grace
			 * period (8 to 11 ms measured, against 0.04 ms). */
			file = h->controller ? "tasks" : "cgroup.procs";
			cg->procs[made] = openat(fd, file, O_WRONLY | O_CLOEXEC);
			if (cg->procs[made] < 0)
				rc = -errno;
		}
		close(fd);
		if (rc < 0)
			break;
	}
	if (rc == 0) {
		cg->active = true;
		return 0;
	}
	snprintf(err, errlen, "cannot set up the run's cgroup %s/%s (%s): %s", hiers[made].path,
		 cg->name, file, strerror(-rc));
	close_procs(cg);
	for (size_t i = 0; i < n_hiers; i++)
		unlinkat(hiers[i].dirfd, cg->name, AT_REMOVEDIR);
	return rc;
}

bool cgroup_run_limits_pids(const struct cgroup_run *cg)
{
	for (size_t i = 0; cg->active && i < n_hiers; i++)
		if (!hiers[i].controller || !strcmp(hiers[i].controller, "pids"))
			return true;
	return false;
}

int cgroup_run_join(const struct cgroup_run *cg)
{
	for (size_t i = 0; cg->active && i < CGROUP_HIER_MAX; i++)
		if (cg->procs[i] >= 0 && write(cg->procs[i], "0", 1) != 1)
			return -errno;
	return 0;
}

static void close_procs(struct cgroup_run *cg)
{
	for (size_t i = 0; i < CGROUP_HIER_MAX; i++) {
		if (cg->procs[i] >= 0)
			close(cg->procs[i]);
		cg->procs[i] = -1;
	}
}

void cgroup_run_close(struct cgroup_run *cg)
{
	/* A run without a cgroup has all zeroes here: fd 0 is not its. */
	if (cg->active)
		close_procs(cg);
}

/* What the kernel counted for a run; fields a hierarchy lacks stay 0. */
struct cgroup_usage {
	uint64_t oom_kills;     /* processes the OOM killer took for the limit */
	uint64_t memory_peak;   /* bytes */
	uint64_t pids_refused;  /* forks refused at pids.max */
};

static void usage(const struct cgroup_run *cg, struct cgroup_usage *u)
{
	memset(u, 0, sizeof(*u));
	for (size_t i = 0; cg->active && i < n_hiers; i++) {
		const struct hier *h = &hiers[i];
		int fd = openat(h->dirfd, cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			continue;
		if (!h->controller) {
			u->oom_kills = read_value_at(fd, "memory.events", "oom_kill");
			u->memory_peak = read_value_at(fd, "memory.peak", NULL);
		} else if (!strcmp(h->controller, "memory")) {
			u->oom_kills = read_value_at(fd, "memory.oom_control", "oom_kill");
			u->memory_peak = read_value_at(fd, "memory.max_usage_in_bytes", NULL);
		}
		if (!h->controller || !strcmp(h->controller, "pids"))
			u->pids_refused = read_value_at(fd, "pids.events", "max");
		close(fd);
	}
}

static bool lists_pid(const char *buf, long pid)
{
	for (const char *p = buf; *p;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p)
			return false;
		if (v == pid)
			return true;
		p = end;
	}
	return false;
}

static void size_text(char *out, size_t len, uint64_t v)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;

	while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1024 && v % 1024 == 0)
		v /= 1024, u++;
	snprintf(out, len, "%" PRIu64 " %s", v, units[u]);
}

bool cgroup_run_report(const struct cgroup_run *cg, uid_t uid, uint64_t run_id)
{
	struct cgroup_usage u;
	char lim[32], peak[32];

	if (!cg->active)
		return false;
	usage(cg, &u);
	size_text(lim, sizeof(lim), cg->memory);
	size_text(peak, sizeof(peak), u.memory_peak);
	log_info("uid=%u run=%" PRIu64 " cgroup: memory peak %s of %s, %" PRIu64
		 " OOM kills, %" PRIu64 " forks refused at %" PRIu64 " processes",
		 (unsigned)uid, run_id, peak, lim, u.oom_kills, u.pids_refused, cg->pids);
	if (u.oom_kills)
		log_info("uid=%u run=%" PRIu64 " out of memory: %s limit for all the snippet's "
			 "processes together; the kernel killed %" PRIu64, (unsigned)uid, run_id,
			 lim, u.oom_kills);
	return u.oom_kills > 0;
}

/* A process still in the run's cgroup when its worker is gone (one that
 * was still exiting, or one the worker's tree walk missed) is killed.  The
 * pidfd is taken before membership is checked, so a pid reused by another
 * process in between is never signalled. */
static void kill_members(const struct hier *h, const char *name)
{
	char file[64], buf[8192], again[8192];

	snprintf(file, sizeof(file), "%s/cgroup.procs", name);
	if (read_at(h->dirfd, file, buf, sizeof(buf)) <= 0)
		return;
	for (char *p = buf, *end; *p; p = end) {
		long pid = strtol(p, &end, 10);
		int fd;

		if (end == p)
			break;
		fd = pid > 0 ? pidfd_open((pid_t)pid, 0) : -1;
		if (fd < 0)
			continue;
		if (read_at(h->dirfd, file, again, sizeof(again)) > 0 && lists_pid(again, pid)) {
			log_warn("killing pid %ld, still in the cgroup %s after its run", pid, name);
			/* another user's: only the monitor may signal it */
			if (monlink_active())
				monlink_kill((pid_t)pid);
			else
				pidfd_send_signal(fd, SIGKILL, NULL, 0);
		}
		close(fd);
	}
}

static bool remove_dirs(const char *name, bool kill_rest)
{
	bool gone = true;

	for (size_t i = 0; i < n_hiers; i++) {
		if (unlinkat(hiers[i].dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			continue;
		gone = false;
		if (errno == EBUSY && kill_rest)
			kill_members(&hiers[i], name);
	}
	return gone;
}

void cgroup_run_remove(struct cgroup_run *cg)
{
	if (!cg->active)
		return;
	cgroup_run_close(cg);
	cg->active = false;
	/* Killed processes take a moment to exit (freeing a large address
	 * space is not instant): a few short tries before it is queued. */
	for (int i = 0; i < 5; i++) {
		if (remove_dirs(cg->name, true))
			return;
		log_debug("the cgroup %s is still populated (try %d)", cg->name, i + 1);
		usleep(2000);
	}
	if (n_pending == PENDING_MAX) {
		log_err("the cgroup %s cannot be removed (processes remain in it)", cg->name);
		return;
	}
	snprintf(pending[n_pending].name, sizeof(pending[0].name), "%s", cg->name);
	pending[n_pending].since_ms = now_ms();
	pending[n_pending].logged = false;
	n_pending++;
}

bool cgroup_pending(void)
{
	return n_pending > 0;
}

void cgroup_tick(void)
{
	uint64_t now = now_ms();

	for (size_t i = 0; i < n_pending;) {
		struct pending *p = &pending[i];

		if (remove_dirs(p->name, true)) {
			if (p->logged)
				log_info("the cgroup %s is removed at last", p->name);
			pending[i] = pending[--n_pending];
			continue;
		}
		if (!p->logged && now - p->since_ms >= PENDING_LOG_MS) {
			log_err("the cgroup %s still holds processes %u s after its run ended",
				p->name, (unsigned)(PENDING_LOG_MS / 1000));
			p->logged = true;
		}
		i++;
	}
}

size_t cgroup_tree_dirs(int *fds, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < n_hiers && n < max; i++) {
		char up[sizeof(hiers[0].path) + 4];

		snprintf(up, sizeof(up), "%s/..", hiers[i].path);
		fds[n] = open(up, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fds[n] >= 0)
			n++;
	}
	return n;
}

void cgroup_teardown(void)
{
	cgroup_tick();
	for (size_t i = 0; i < n_hiers; i++) {
		close(hiers[i].dirfd);
		/* v2: the broker itself sits in kotoba/<pid>/broker until it
		 * exits; the next broker's start removes it, or systemd with
		 * the unit's tree. */
		if (version == CG_V1 && rmdir(hiers[i].path) < 0)
			log_warn("cannot remove the cgroup %s: %s", hiers[i].path, strerror(errno));
	}
	n_hiers = 0;
	version = CG_NONE;
}
