/* SPDX-License-Identifier: MIT
 * One cgroup per run: the snippet's memory and process limits hold for all
 * its processes together, not for each one (RLIMIT_AS, RLIMIT_NPROC).
 * cgroup v2 where the broker's own cgroup is delegated to it (memory.max,
 * memory.swap.max, pids.max), else the v1 memory and pids controllers
 * (memory.limit_in_bytes, memory.memsw.limit_in_bytes, pids.max).  The
 * broker makes its own directory at start, while still root, and hands it
 * to the service user; per run it makes run-<id> inside, the run's fork
 * child joins it before it takes the peer's uid, and the broker reads what
 * happened and removes it once every process of the run is gone.
 */
#ifndef KOTOBA_CGROUP_H
#define KOTOBA_CGROUP_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_HIER_MAX 2 /* v1: memory and pids; v2: one */

struct cgroup_run {
	bool active;
	char name[32];                /* run-<id> */
	int procs[CGROUP_HIER_MAX];   /* cgroup.procs (v1: tasks), open until the fork */
	uint64_t memory;              /* the limits it was given */
	uint64_t pids;
};

/* At start, before root is given up: finds what this host offers, makes
 * the broker's directory (owned by owner:group when they are not -1) and
 * logs what holds.  Never fails: without cgroups the rlimits still hold,
 * and the log says so (loudly for a system daemon). */
void cgroup_setup(uid_t owner, gid_t group, bool system_mode);
bool cgroup_enabled(void);

/* Makes the run's cgroup with these limits and opens its cgroup.procs.
 * 0, or -errno with a sentence in err (the run must not start). */
int cgroup_run_create(struct cgroup_run *cg, uint64_t run_id, uint64_t memory, uint64_t pids,
		      char *err, size_t errlen);
/* Does pids.max hold this run? */
bool cgroup_run_limits_pids(const struct cgroup_run *cg);
/* In the fork child, before it changes uid (v1 lets a task be moved only
 * by root or by its own uid): moves the caller in.  Async-signal-safe;
 * 0 or -errno. */
int cgroup_run_join(const struct cgroup_run *cg);
/* In the broker after the fork: the cgroup.procs fds are not needed.
 * Nothing for a run without a cgroup (all zeroes). */
void cgroup_run_close(struct cgroup_run *cg);
/* Logs what the run's cgroup counted (memory peak, OOM kills, forks
 * refused); call when the snippet's processes are gone.  True when the
 * kernel OOM-killed a process of the run for its memory limit. */
bool cgroup_run_report(const struct cgroup_run *cg, uid_t uid, uint64_t run_id);
/* Removes the run's cgroup.  A process still in it is killed and the
 * removal retried by cgroup_tick(). */
void cgroup_run_remove(struct cgroup_run *cg);
/* Retries removals that found the cgroup still populated, while
 * cgroup_pending() says there are any. */
void cgroup_tick(void);
bool cgroup_pending(void);
/* The directories holding the broker's own in each hierarchy (it makes
 * and removes cgroups beneath them), opened O_PATH into fds; how many. */
size_t cgroup_tree_dirs(int *fds, size_t max);
/* At stop: removes the broker's own directory when it is empty. */
void cgroup_teardown(void);
#endif
