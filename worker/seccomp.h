/* SPDX-License-Identifier: MIT
 * The snippet's seccomp policy, written as named syscall groups with help
 * text (after systemd's @system-service and Docker's default profile) and
 * compiled to BPF programs with libseccomp.
 *
 * Compiled once, at build time, not per run: worker/gen/seccomp_gen.c
 * links worker/seccomp.c, builds every program a snippet can get (each
 * profile at each Landlock ABI) and writes them into a generated C file
 * (worker/seccomp_programs.c in the build directory).  The unattended
 * and engine profiles' rules depend on the Landlock ABI in force (chosen
 * by table); unattended's, below ABI 6, also on the snippet's own pid
 * (signals; engine's never do): the generator
 * finds the instructions that hold the pid by building with two stand-in
 * pids and comparing, and the snippet child writes its pid there.
 *
 * Two halves:
 *   worker/seccomp.c       the policy and seccomp_build() (libseccomp):
 *                          linked by the generator, the unit tests and
 *                          the bench, not by kotoba-worker
 *   worker/seccomp_load.c  what kotoba-worker runs: pick a prebuilt
 *                          program, patch the pid in, load it (no
 *                          libseccomp, no allocation)
 */
#ifndef KOTOBA_WORKER_SECCOMP_H
#define KOTOBA_WORKER_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "proto/names.h"

struct seccomp_opts {
	const char *profile;       /* "approved" | "unattended" | "engine" */
	unsigned int landlock_abi; /* Landlock ABI in force for this snippet, 0: none */
	pid_t self;                /* the snippet's first process */
};

/* ---- the policy (worker/seccomp.c, libseccomp) ---------------------------- */

/* Builds the filter into a malloc'd program.  Returns 0, or -errno with a
 * sentence in `err`. */
int seccomp_build(const struct seccomp_opts *o, struct sock_fprog *out, char *err,
		  size_t errlen);
void seccomp_prog_free(struct sock_fprog *prog);

/* The same policy for one architecture `arch` (SCMP_ARCH_*), another
 * than the native one if need be, with `badarch` (SCMP_ACT_*) for calls of
 * any other.  seccomp_build() is this for the native architecture with
 * EPERM.  For tests of a policy on an architecture the build host can
 * enter but does not run natively (i386 on x86_64: socketcall). */
int seccomp_build_arch(const struct seccomp_opts *o, uint32_t arch, uint32_t badarch,
		       struct sock_fprog *out, char *err, size_t errlen);

/* Writes every group, its action in each profile, help text and members,
 * for the documentation.  The generator stores this text in the worker,
 * which prints it for `kotoba-worker --list-syscall-groups`. */
void seccomp_describe(FILE *out);

/* ---- the prebuilt programs (generated; worker/seccomp_load.c) ------------- */

/* The newest Landlock ABI the generated table covers. */
#define SECCOMP_ABI_MAX 7

/* Stand-in pids the generator builds with; the instructions that differ
 * between the two are the pid's.  Any pid in (0, 2^31) sorts like them in
 * libseccomp's argument trees, so the program's shape does not depend on
 * it (checked by the generator and by tests/unit/test_seccomp.c). */
#define SECCOMP_PID_STANDIN_A 0x00a5a5a5
#define SECCOMP_PID_STANDIN_B 0x005a5a5a

/* A patch point: the instruction's k becomes the pid, or (PID_NEG) its
 * negation as 32 bits (kill(-pgid)). */
#define SECCOMP_PID_NEG 0x8000u

struct seccomp_program {
	const struct sock_filter *insns; /* built with SECCOMP_PID_STANDIN_A */
	unsigned short len;
	const uint16_t *pid_at;          /* instruction index | SECCOMP_PID_NEG */
	unsigned short n_pid_at;
};

struct seccomp_variant {
	const char *profile;
	unsigned int landlock_abi;
	const struct seccomp_program *prog;
};

/* In the generated file. */
extern const struct seccomp_variant seccomp_variants[];
extern const size_t seccomp_n_variants;
extern const char seccomp_description[];

/* The program for `o`, with o->self written into its patch points: points
 * `out` at the generated table, or, when the pid must be patched in, at a
 * static buffer (one per process; not thread-safe).  Never allocates.
 * Returns 0, or -EINVAL with a sentence in `err` (unknown profile or ABI,
 * no pid when one is needed, a table that does not hold the stand-in). */
int seccomp_program_for(const struct seccomp_opts *o, struct sock_fprog *out, char *err,
			size_t errlen);

/* True when the profile's program routes exec through the exec gate
 * (SECCOMP_RET_USER_NOTIF): it must be loaded with a listener, which the
 * supervisor serves (worker/execgate.c). */
bool seccomp_has_exec_gate(const char *profile);

/* Loads a program; with `listener`, returns the listener fd (else 0).
 * -errno on failure. */
int seccomp_load_prog(const struct sock_fprog *prog, bool listener);

#endif
