/* SPDX-License-Identifier: MIT */
#ifndef KOTOBA_LISTENER_H
#define KOTOBA_LISTENER_H
#include <stdbool.h>
#include <stddef.h>
/* Returns the socket (non-blocking), bound but not yet listening unless
 * systemd passed it, or -1 with err set. */
int listener_open(const char *path, unsigned mode, bool *activated, char *err, size_t errlen);
/* Starts accepting: only once the broker can serve (its store is open),
 * so a broker that fails at start never takes a client.  -errno. */
int listener_start(int fd);
#endif
