/* SPDX-License-Identifier: MIT
 * The snippet's seccomp policy, written as named syscall groups with help
 * text (after systemd's @system-service and Docker's default profile) and
 * compiled to a BPF program with libseccomp.
 *
 * The snippet child builds its own program, just before the rlimits: the
 * unattended profile's rules depend on the Landlock ABI actually in force
 * and on the child's own pid (signals), both known only there.
 */
#ifndef KOTOBA_WORKER_SECCOMP_H
#define KOTOBA_WORKER_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

struct seccomp_opts {
	const char *profile;       /* "approved" | "unattended" */
	unsigned int landlock_abi; /* Landlock ABI in force for this snippet, 0: none */
	pid_t self;                /* the snippet's first process */
};

/* Builds the filter into a malloc'd program.  Returns 0, or -errno with a
 * sentence in `err`. */
int seccomp_build(const struct seccomp_opts *o, struct sock_fprog *out, char *err,
		  size_t errlen);
void seccomp_prog_free(struct sock_fprog *prog);

/* True when the profile's program routes exec through the exec gate
 * (SECCOMP_RET_USER_NOTIF): it must be loaded with a listener, which the
 * supervisor serves (worker/execgate.c). */
bool seccomp_has_exec_gate(const char *profile);

/* Loads a built program; with `listener`, returns the listener fd (else
 * 0).  -errno on failure. */
int seccomp_load_prog(const struct sock_fprog *prog, bool listener);

/* Writes every group, its action in each profile, help text and members,
 * for the documentation (`kotoba-worker --list-syscall-groups`). */
void seccomp_describe(FILE *out);

#endif
