/* SPDX-License-Identifier: MIT
 * Removing a directory tree a snippet had its hands on (worker/rmtree.c).
 */
#ifndef KOTOBA_WORKER_RMTREE_H
#define KOTOBA_WORKER_RMTREE_H

#include <stddef.h>

/* Removes `path` and everything beneath it, however deep, by directory
 * descriptor: never follows a symlink (the link goes, its target stays),
 * never leaves path's file system, gives back owner rwx to directories
 * whose modes refuse it, and holds four descriptors at most, at any depth.
 * Returns 0, or -errno with a sentence naming what stayed in `err`. */
int remove_tree(const char *path, char *err, size_t errlen);

#endif
