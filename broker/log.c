/* SPDX-License-Identifier: MIT */
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
	fprintf(stderr, "%skotoba-brokerd: %s\n", prefix[lvl], line);
}
