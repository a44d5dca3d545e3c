/* SPDX-License-Identifier: MIT
 * Where the broker's socket lives when nobody says: the same rule for the
 * broker and every client, so neither needs a flag in the common case.
 *   $XDG_RUNTIME_DIR/kotoba/broker.sock   a per-user broker or client
 *   /run/kotoba/broker.sock               as root, or with no runtime dir
 * KOTOBA_SOCKET overrides both, for clients and the broker alike.
 */
#ifndef KOTOBA_PATHS_H
#define KOTOBA_PATHS_H
#include <stddef.h>
/* 0, or -ENAMETOOLONG when the path does not fit a sockaddr_un. */
int default_socket_path(char *out, size_t len);
#endif
