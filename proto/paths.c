/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "proto/paths.h"

int default_socket_path(char *out, size_t len)
{
	const char *env = getenv("KOTOBA_SOCKET");
	const char *rt = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env && *env)
		n = snprintf(out, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(out, len, "/run/kotoba/broker.sock");
	else if (rt && *rt == '/')
		n = snprintf(out, len, "%s/kotoba/broker.sock", rt);
	else
		n = snprintf(out, len, "/tmp/kotoba-%u/broker.sock", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
