/* SPDX-License-Identifier: MIT
 * The snippet's seccomp policy, written as named syscall groups with help
 * text (after systemd's @system-service and Docker's default profile) and
 * compiled to a BPF program in the supervisor, so that the snippet child
 * loads it with one seccomp(2) call and no allocation.
 */
#ifndef KOTOBA_WORKER_SECCOMP_H
#define KOTOBA_WORKER_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdio.h>

/* Builds the filter for `profile` ("approved" | "unattended") into a
 * malloc'd program.  Returns 0, or -errno with a sentence in `err`. */
int seccomp_build(const char *profile, struct sock_fprog *out, char *err, size_t errlen);
void seccomp_prog_free(struct sock_fprog *prog);

/* Writes every group, its action, help text and members, for the
 * documentation (`kotoba-worker --list-syscall-groups`). */
void seccomp_describe(FILE *out);

#endif
