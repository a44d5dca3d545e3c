/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "broker/log.h"

enum log_level log_threshold = LOG_LVL_INFO;

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	/* sd-daemon(3) priority prefixes: journald maps them to levels, a
	 * terminal shows them as a harmless <N>. */
	static const char *const prefix[] = { "<3>", "<4>", "<6>", "<7>" };
	char line[1024];
	va_list ap;

	if (lvl > log_threshold)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* kotoba-brokerd or kotoba-monitor: both log to the same stream */
	fprintf(stderr, "%s%s: %s\n", prefix[lvl], program_invocation_short_name, line);
}
