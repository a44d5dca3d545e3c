/* SPDX-License-Identifier: MIT
 * The sentence for a call that failed because a resource limit was
 * reached, shared by the broker and the worker so that a run stopped by
 * a limit says which one, not only "Resource temporarily unavailable".
 */
#ifndef KOTOBA_LIMITS_H
#define KOTOBA_LIMITS_H
#include <stddef.h>
#include <stdint.h>

/* Writes what `err` from a fork, an exec after a change of user, or an
 * open in the calling process (`who`, e.g. "the broker") means, naming the
 * limit and its value there: EAGAIN the user's process limit
 * (RLIMIT_NPROC), EMFILE the process's open files (RLIMIT_NOFILE), ENFILE
 * the system's, ENOMEM memory (RLIMIT_AS).  Any other errno: its
 * description.  Never allocates. */
void limit_named(int err, const char *who, char *out, size_t len);

/* A duration as a person and the config file write it, in the largest
 * unit that divides ms: "8h", "90m", "45s", "250ms", "2d". */
void duration_text(uint64_t ms, char *out, size_t len);
#endif
