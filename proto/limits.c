/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "proto/limits.h"

static void rlimit_text(int res, char *out, size_t len)
{
	struct rlimit rl;

	if (getrlimit(res, &rl) < 0)
		snprintf(out, len, "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(out, len, "unlimited");
	else
		snprintf(out, len, "%llu", (unsigned long long)rl.rlim_cur);
}

void limit_named(int err, const char *who, char *out, size_t len)
{
	char v[32];

	switch (err) {
	case EAGAIN:
		rlimit_text(RLIMIT_NPROC, v, sizeof(v));
		snprintf(out, len, "%s: uid %u reached its process limit in %s (RLIMIT_NPROC %s, "
			 "or a pids cgroup, or kernel.threads-max)", strerrordesc_np(err),
			 (unsigned)getuid(), who, v);
		break;
	case EMFILE:
		rlimit_text(RLIMIT_NOFILE, v, sizeof(v));
		snprintf(out, len, "%s: the open-file limit of %s was reached (RLIMIT_NOFILE %s)",
			 strerrordesc_np(err), who, v);
		break;
	case ENFILE:
		snprintf(out, len, "%s: the system's open-file limit was reached (fs.file-max)",
			 strerrordesc_np(err));
		break;
	case ENOMEM:
		rlimit_text(RLIMIT_AS, v, sizeof(v));
		snprintf(out, len, "%s: memory ran out in %s (RLIMIT_AS %s, or the system's)",
			 strerrordesc_np(err), who, v);
		break;
	default:
		snprintf(out, len, "%s", err ? strerrordesc_np(err) : "no error");
		break;
	}
}

void duration_text(uint64_t ms, char *out, size_t len)
{
	static const struct {
		uint64_t ms;
		const char *unit;
	} units[] = {
		{ 86400000, "d" }, { 3600000, "h" }, { 60000, "m" }, { 1000, "s" }, { 1, "ms" },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ms % units[i].ms == 0) {
			snprintf(out, len, "%" PRIu64 "%s", ms / units[i].ms, units[i].unit);
			return;
		}
}
