/* SPDX-License-Identifier: MIT
 * Build-time generator of kotoba-worker's seccomp programs.
 *
 *   seccomp-gen > seccomp_programs.c
 *
 * Links worker/seccomp.c (the policy) and libseccomp, builds the program
 * of every profile at every Landlock ABI from 0 to SECCOMP_ABI_MAX, and
 * writes them as C arrays with a table from (profile, ABI) to program,
 * plus the text of `kotoba-worker --list-syscall-groups`.  Identical
 * programs are written once.
 *
 * The snippet's pid is the only input known at run time.  Each program is
 * built with two stand-in pids; the instructions that differ are where the
 * pid goes, and they must differ only in k, holding the stand-in or its
 * negation.  Then the patched program is compared with a fresh build for
 * a few real-looking pids.  Any surprise fails the build: the worker
 * never loads a program this file could not account for.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <seccomp.h>

#include "worker/seccomp.h"

/* The profiles a job may name (proto/names.h), in the table's order. */
static const char *profiles[PROFILE_COUNT];
static size_t n_profiles;

static void list_profiles(void)
{
	for (unsigned p = 0; p < PROFILE_COUNT; p++)
		if (PROFILES_JOB & PROFILE_BIT(p))
			profiles[n_profiles++] = profile_name((enum proto_profile)p);
}
#define N_ABIS (SECCOMP_ABI_MAX + 1)

/* Pids the patched program is checked against: the smallest, the
 * kernel's PID_MAX_LIMIT on 64-bit, and the largest pid_t. */
static const pid_t check_pids[] = { 1, 2, 4194304, 0x7fffffff };

struct prog {
	struct sock_fprog bpf; /* built with SECCOMP_PID_STANDIN_A */
	uint16_t pid_at[BPF_MAXINSNS];
	unsigned short n_pid_at;
	int same_as;           /* index of an identical earlier program, or -1 */
};

static struct prog progs[PROFILE_COUNT * N_ABIS];

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("seccomp-gen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void build(const char *profile, unsigned int abi, pid_t pid, struct sock_fprog *out)
{
	struct seccomp_opts o = { profile, abi, pid };
	char err[256] = "";

	if (seccomp_build(&o, out, err, sizeof(err)) < 0)
		die("building %s at Landlock ABI %u: %s", profile, abi, err);
}

/* The pid's places: where the builds with the two stand-ins differ. */
static void find_pid(struct prog *p, const struct sock_fprog *b, const char *profile,
		     unsigned int abi)
{
	const struct sock_fprog *a = &p->bpf;

	if (a->len != b->len)
		die("%s at ABI %u: the program's length depends on the pid (%u vs %u)", profile,
		    abi, a->len, b->len);
	p->n_pid_at = 0;
	for (unsigned int i = 0; i < a->len; i++) {
		const struct sock_filter *x = &a->filter[i], *y = &b->filter[i];
		uint16_t at = (uint16_t)i;

		if (x->code != y->code || x->jt != y->jt || x->jf != y->jf)
			die("%s at ABI %u: instruction %u changes shape with the pid", profile, abi, i);
		if (x->k == y->k)
			continue;
		if (x->k == (uint32_t)SECCOMP_PID_STANDIN_A && y->k == (uint32_t)SECCOMP_PID_STANDIN_B)
			;
		else if (x->k == -(uint32_t)SECCOMP_PID_STANDIN_A &&
			 y->k == -(uint32_t)SECCOMP_PID_STANDIN_B)
			at |= SECCOMP_PID_NEG;
		else
			die("%s at ABI %u: instruction %u depends on the pid in a way this "
			    "generator cannot patch (k %#x vs %#x)", profile, abi, i, x->k, y->k);
		p->pid_at[p->n_pid_at++] = at;
	}
}

/* The patched program must be what libseccomp builds for that pid. */
static void check_patching(const struct prog *p, const char *profile, unsigned int abi)
{
	for (size_t c = 0; c < sizeof(check_pids) / sizeof(check_pids[0]); c++) {
		struct sock_fprog fresh;
		struct sock_filter *patched = malloc(p->bpf.len * sizeof(*patched));

		if (!patched)
			die("out of memory");
		memcpy(patched, p->bpf.filter, p->bpf.len * sizeof(*patched));
		for (unsigned short i = 0; i < p->n_pid_at; i++) {
			uint16_t at = p->pid_at[i] & ~SECCOMP_PID_NEG;

			patched[at].k = p->pid_at[i] & SECCOMP_PID_NEG ? -(uint32_t)check_pids[c]
								       : (uint32_t)check_pids[c];
		}
		build(profile, abi, check_pids[c], &fresh);
		if (fresh.len != p->bpf.len ||
		    memcmp(fresh.filter, patched, fresh.len * sizeof(*patched)))
			die("%s at ABI %u: the program patched for pid %d is not what libseccomp "
			    "builds for it", profile, abi, (int)check_pids[c]);
		seccomp_prog_free(&fresh);
		free(patched);
	}
}

static bool same_prog(const struct prog *a, const struct prog *b)
{
	return a->bpf.len == b->bpf.len && a->n_pid_at == b->n_pid_at &&
	       !memcmp(a->bpf.filter, b->bpf.filter, a->bpf.len * sizeof(*a->bpf.filter)) &&
	       !memcmp(a->pid_at, b->pid_at, a->n_pid_at * sizeof(*a->pid_at));
}

static void emit_prog(int n, const struct prog *p)
{
	printf("\nstatic const struct sock_filter prog_%d[%u] = {\n", n, p->bpf.len);
	for (unsigned int i = 0; i < p->bpf.len; i++) {
		const struct sock_filter *f = &p->bpf.filter[i];

		printf("\t{ 0x%04x, %3u, %3u, 0x%08x },\n", f->code, f->jt, f->jf, f->k);
	}
	printf("};\n");
	if (p->n_pid_at) {
		printf("static const uint16_t pid_at_%d[%u] = {", n, p->n_pid_at);
		for (unsigned short i = 0; i < p->n_pid_at; i++)
			printf("%s0x%04x", i % 8 ? ", " : "\n\t", p->pid_at[i]);
		printf("\n};\n");
	}
	if (p->n_pid_at)
		printf("static const struct seccomp_program program_%d = { prog_%d, %u, pid_at_%d, "
		       "%u };\n", n, n, p->bpf.len, n, p->n_pid_at);
	else
		printf("static const struct seccomp_program program_%d = { prog_%d, %u, NULL, 0 };\n",
		       n, n, p->bpf.len);
}

static void emit_string(const char *text)
{
	printf("\nconst char seccomp_description[] =");
	for (const char *l = text; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);

		printf("\n\t\"");
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)l[i];

			if (c == '\n')
				printf("\\n");
			else if (c == '"' || c == '\\')
				printf("\\%c", c);
			else if (c < 0x20 || c >= 0x7f)
				printf("\\%03o", c);
			else
				putchar(c);
		}
		putchar('"');
		l += n;
	}
	printf(";\n");
}

static char *description(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		die("open_memstream: %s", strerror(errno));
	seccomp_describe(f);
	if (fclose(f) != 0)
		die("writing the description: %s", strerror(errno));
	return text;
}

int main(void)
{
	const struct scmp_version *v = seccomp_version();
	char *text = description();
	int n = 0;

	list_profiles();
	for (size_t pr = 0; pr < n_profiles; pr++) {
		for (unsigned int abi = 0; abi < N_ABIS; abi++, n++) {
			struct prog *p = &progs[n];
			struct sock_fprog b;

			build(profiles[pr], abi, SECCOMP_PID_STANDIN_A, &p->bpf);
			build(profiles[pr], abi, SECCOMP_PID_STANDIN_B, &b);
			find_pid(p, &b, profiles[pr], abi);
			seccomp_prog_free(&b);
			check_patching(p, profiles[pr], abi);
			p->same_as = -1;
			for (int k = 0; k < n && p->same_as < 0; k++)
				if (progs[k].same_as < 0 && same_prog(&progs[k], p))
					p->same_as = k;
		}
	}
	printf("/* Generated by worker/gen/seccomp_gen.c from worker/seccomp.c with libseccomp "
	       "%u.%u.%u: do not edit.\n * The seccomp program of each profile at each Landlock "
	       "ABI; see worker/seccomp.h. */\n#include <stddef.h>\n\n#include "
	       "\"worker/seccomp.h\"\n",
	       v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
	for (int k = 0; k < n; k++)
		if (progs[k].same_as < 0)
			emit_prog(k, &progs[k]);
	printf("\nconst struct seccomp_variant seccomp_variants[] = {\n");
	for (int k = 0; k < n; k++) {
		int use = progs[k].same_as < 0 ? k : progs[k].same_as;

		printf("\t{ \"%s\", %d, &program_%d },\n", profiles[k / N_ABIS], k % N_ABIS, use);
	}
	printf("};\nconst size_t seccomp_n_variants = %d;\n", n);
	emit_string(text);
	free(text);
	for (int k = 0; k < n; k++)
		seccomp_prog_free(&progs[k].bpf);
	if (fflush(stdout) != 0 || ferror(stdout))
		die("writing the output: %s", strerror(errno));
	return 0;
}
