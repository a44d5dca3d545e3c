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
		n = snprintf(out, len, "%s", SYSTEM_SOCKET);
	else if (rt && *rt == '/')
		n = snprintf(out, len, "%s/kotoba/broker.sock", rt);
	else
		n = snprintf(out, len, "/tmp/kotoba-%u/broker.sock", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A client prefers a per-user broker, then the system one: an ordinary
 * user of a host-wide broker needs no flag either. */
int client_socket_path(char *out, size_t len)
{
	const char *env = getenv("KOTOBA_SOCKET");
	int rc = default_socket_path(out, len);

	if (rc < 0 || (env && *env) || geteuid() == 0 || access(out, F_OK) == 0)
		return rc;
	if (access(SYSTEM_SOCKET, F_OK) == 0)
		return snprintf(out, len, "%s", SYSTEM_SOCKET) >= (int)len ? -ENAMETOOLONG : 0;
	return rc;
}
