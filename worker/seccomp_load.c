/* SPDX-License-Identifier: MIT
 * The seccomp programs as kotoba-worker uses them: pick the one built for
 * the profile and the Landlock ABI in force, write the snippet's pid into
 * it, load it.
 *
 * The programs were built from worker/seccomp.c by libseccomp at build
 * time (worker/gen/seccomp_gen.c); this file needs neither libseccomp nor
 * the heap, so it runs in the snippet child at any point, also after
 * RLIMIT_AS.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "worker/seccomp.h"

bool seccomp_has_exec_gate(const char *profile)
{
	return !strcmp(profile, profile_name(PROFILE_UNATTENDED));
}

static const struct seccomp_program *find(const char *profile, unsigned int abi)
{
	for (size_t i = 0; i < seccomp_n_variants; i++)
		if (seccomp_variants[i].landlock_abi == abi &&
		    !strcmp(seccomp_variants[i].profile, profile))
			return seccomp_variants[i].prog;
	return NULL;
}

int seccomp_program_for(const struct seccomp_opts *o, struct sock_fprog *out, char *err,
			size_t errlen)
{
	/* One snippet child, one program: static, so that patching needs no
	 * allocation. */
	static struct sock_filter patched[BPF_MAXINSNS];
	const struct seccomp_program *p = find(o->profile, o->landlock_abi);

	out->len = 0;
	out->filter = NULL;
	if (!p) {
		snprintf(err, errlen, "no seccomp program for profile '%s' at Landlock ABI %u",
			 o->profile, o->landlock_abi);
		return -EINVAL;
	}
	if (p->n_pid_at == 0) {
		/* Nothing to patch: seccomp(2) only reads the program. */
		out->filter = (struct sock_filter *)(uintptr_t)p->insns;
		out->len = p->len;
		return 0;
	}
	if (o->self <= 0 || p->len > BPF_MAXINSNS) {
		snprintf(err, errlen, "the %s filter at Landlock ABI %u needs the snippet's pid",
			 o->profile, o->landlock_abi);
		return -EINVAL;
	}
	memcpy(patched, p->insns, p->len * sizeof(patched[0]));
	for (unsigned short i = 0; i < p->n_pid_at; i++) {
		unsigned int at = p->pid_at[i] & ~SECCOMP_PID_NEG;
		bool neg = p->pid_at[i] & SECCOMP_PID_NEG;
		uint32_t standin = neg ? -(uint32_t)SECCOMP_PID_STANDIN_A : SECCOMP_PID_STANDIN_A;

		/* The generator said this instruction holds the stand-in;
		 * anything else means a table out of step with this file. */
		if (at >= p->len || patched[at].k != standin) {
			snprintf(err, errlen, "the prebuilt %s filter has no pid at instruction %u",
				 o->profile, at);
			return -EINVAL;
		}
		patched[at].k = neg ? -(uint32_t)o->self : (uint32_t)o->self;
	}
	out->filter = patched;
	out->len = p->len;
	return 0;
}

int seccomp_load_prog(const struct sock_fprog *prog, bool listener)
{
	unsigned long flags = listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
	long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);

	if (rc < 0)
		return -errno;
	return listener ? (int)rc : 0;
}
