/* SPDX-License-Identifier: MIT
 * Where the broker's socket lives when nobody says: the same rule for the
 * broker and every client, so neither needs a flag in the common case.
 *   /run/kotoba/broker.sock               as root
 *   $XDG_RUNTIME_DIR/kotoba/broker.sock   as an ordinary user
 *   /tmp/kotoba-UID/broker.sock           as a user without a runtime dir
 *                                         (the broker checks it owns the
 *                                         directory and makes it 0700)
 * KOTOBA_SOCKET overrides both, for clients and the broker alike.
 */
#ifndef KOTOBA_PATHS_H
#define KOTOBA_PATHS_H
#include <stddef.h>
#define SYSTEM_SOCKET "/run/kotoba/broker.sock"

/* The broker's default.  0, or -ENAMETOOLONG when the path does not fit a
 * sockaddr_un. */
int default_socket_path(char *out, size_t len);
/* A client's default: as above, but an ordinary user with no per-user
 * broker running finds the system broker's socket. */
int client_socket_path(char *out, size_t len);
#endif
