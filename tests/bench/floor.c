/* SPDX-License-Identifier: MIT
 * The floor for `make bench`: the least a sandboxed python3 can cost.
 *
 *   floor --export FILE            build the worker's own seccomp program
 *                                  (unattended profile, or approved when
 *                                  unattended needs the exec gate's
 *                                  listener) and write it to FILE
 *   floor FILE PROG ARGS...        fork; the child sets NO_NEW_PRIVS, loads
 *                                  the program from FILE and execs PROG; the
 *                                  parent waits and exits with its status
 *   floor --time-build N [PROFILE] time N calls of seccomp_build() in this
 *                                  process: what the worker paid per run
 *                                  while it built its program itself
 *   floor --time-pick N [PROFILE]  time N calls of seccomp_program_for():
 *                                  what it pays now that the programs are
 *                                  built at build time (pick, patch the pid)
 *
 * The filter is the worker's (worker/seccomp.c, linked, not copied), so
 * python3 runs under the same BPF program, and it is built ahead, not per
 * run: this is the fork + no_new_privs + seccomp + exec floor the broker
 * is measured against.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker/seccomp.h"

/* worker/seccomp.h has had two signatures of seccomp_build(); mk/bench.mk
 * says which one this tree has.  With options, the program depends on the
 * Landlock ABI in force and on the snippet's pid (signal rules): the floor
 * builds it for pid 1, which python3 -c pass never signals. */
#ifndef SECCOMP_OPTS_API
#define SECCOMP_OPTS_API 0
#endif

/* And, in trees that build the programs at build time, whether
 * seccomp_program_for() is there (mk/bench.mk says). */
#ifndef SECCOMP_PREBUILT_API
#define SECCOMP_PREBUILT_API 0
#endif

#if SECCOMP_OPTS_API
#include <linux/landlock.h>

static unsigned landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v > 0 ? (unsigned)v : 0;
}

static int build(const char *profile, struct sock_fprog *out, char *err, size_t errlen)
{
	struct seccomp_opts o = { .profile = profile, .landlock_abi = landlock_abi(), .self = 1 };

	return seccomp_build(&o, out, err, errlen);
}

/* A profile whose exec goes through the supervisor's exec gate (a user
 * notification) cannot exec without a listener; the floor then takes the
 * other profile, which has the same groups without the gate. */
static const char *floor_profile(void)
{
	return seccomp_has_exec_gate("unattended") ? "approved" : "unattended";
}
#else
static const char *floor_profile(void)
{
	return "unattended";
}

static int build(const char *profile, struct sock_fprog *out, char *err, size_t errlen)
{
	return seccomp_build(profile, out, err, errlen);
}
#endif

static int export_prog(const char *path)
{
	struct sock_fprog prog;
	char err[200] = "";
	size_t len;
	FILE *f;

	if (build(floor_profile(), &prog, err, sizeof(err)) < 0) {
		fprintf(stderr, "floor: %s\n", err);
		return 1;
	}
	printf("profile=%s insns=%u\n", floor_profile(), prog.len);
	len = (size_t)prog.len * sizeof(prog.filter[0]);
	f = fopen(path, "wb");
	if (!f || fwrite(prog.filter, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "floor: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	seccomp_prog_free(&prog);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Prints "build_us_p50=.. build_us_min=.. insns=..". */
static int time_build(int n, const char *profile)
{
	double *t = calloc((size_t)n, sizeof(*t));
	unsigned insns = 0;
	char err[200] = "";

	if (!t || n < 1)
		return 1;
	for (int i = 0; i < n; i++) {
		struct sock_fprog prog;
		double t0 = now_s();

		if (build(profile, &prog, err, sizeof(err)) < 0) {
			fprintf(stderr, "floor: %s\n", err);
			return 1;
		}
		t[i] = now_s() - t0;
		insns = prog.len;
		seccomp_prog_free(&prog);
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("build_us_p50=%.1f build_us_min=%.1f insns=%u\n", t[n / 2] * 1e6, t[0] * 1e6,
	       insns);
	free(t);
	return 0;
}

#if SECCOMP_PREBUILT_API
/* Prints "pick_us_p50=.. pick_us_min=.. insns=..": the snippet child's
 * whole seccomp preparation now (for pid 1, so a pid-dependent program is
 * patched as the worker patches it). */
static int time_pick(int n, const char *profile)
{
	struct seccomp_opts o = { .profile = profile, .landlock_abi = landlock_abi(), .self = 1 };
	double *t = calloc((size_t)n, sizeof(*t));
	unsigned insns = 0;
	char err[200] = "";

	if (!t || n < 1)
		return 1;
	for (int i = 0; i < n; i++) {
		struct sock_fprog prog;
		double t0 = now_s();

		if (seccomp_program_for(&o, &prog, err, sizeof(err)) < 0) {
			fprintf(stderr, "floor: %s\n", err);
			return 1;
		}
		t[i] = now_s() - t0;
		insns = prog.len;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("pick_us_p50=%.2f pick_us_min=%.2f insns=%u\n", t[n / 2] * 1e6, t[0] * 1e6, insns);
	free(t);
	return 0;
}
#endif

static int run(const char *path, char **argv)
{
	static struct sock_filter insns[4096];
	struct sock_fprog prog;
	ssize_t n;
	int fd, status;
	pid_t pid;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, insns, sizeof(insns))) <= 0 ||
	    n % (ssize_t)sizeof(insns[0])) {
		fprintf(stderr, "floor: cannot read the program %s\n", path);
		return 125;
	}
	close(fd);
	prog.len = (unsigned short)(n / (ssize_t)sizeof(insns[0]));
	prog.filter = insns;
	pid = fork();
	if (pid < 0)
		return 125;
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 125;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--export"))
		return export_prog(argv[2]);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--time-build"))
		return time_build(atoi(argv[2]), argc == 4 ? argv[3] : "unattended");
#if SECCOMP_PREBUILT_API
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--time-pick"))
		return time_pick(atoi(argv[2]), argc == 4 ? argv[3] : "unattended");
#endif
	if (argc >= 3 && argv[1][0] != '-')
		return run(argv[1], argv + 2);
	fprintf(stderr, "usage: floor --export FILE | floor FILE PROG ARGS... | "
			"floor --time-build N [PROFILE] | floor --time-pick N [PROFILE]\n");
	return 64;
}
