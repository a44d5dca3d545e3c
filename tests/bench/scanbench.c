/* SPDX-License-Identifier: MIT
 * The pre-screen's speed, for `make bench` (tests/bench/bench.py reads the
 * key=value lines this prints).
 *
 *   scanbench CORPUS
 *
 * CORPUS is real Python (bench.py concatenates the standard library).  It
 * is scanned in chunks of at most the 1 MiB snippet limit, cut at line
 * ends; then the first 1 MiB is scanned again with every flagged line
 * blanked ("ordinary": code that matches nothing, so every pattern reads
 * all of it, the slowest ordinary case); then 1 MiB adversarial inputs:
 * deep nesting, long runs of near-matches for each label.  Every time is
 * the best of REPS runs: the one least disturbed by the rest of a shared
 * machine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "broker/scan.h"
#include "tests/scan_text.h"

#define MIB ((size_t)1 << 20)
#define REPS 5

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double time_scan(const char *code, size_t len, int reps, struct scan_result *r)
{
	double best = 1e9;

	for (int i = 0; i < reps; i++) {
		double t0 = now_s(), t;
		int rc = scan_snippet(code, len, MIB, r);

		t = now_s() - t0;
		if (rc < 0) {
			fprintf(stderr, "scanbench: scan_snippet: %s\n", strerror(-rc));
			exit(1);
		}
		if (t < best)
			best = t;
	}
	return best;
}

static char *load(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	FILE *f = fopen(path, "rb");

	if (!f || fstat(fileno(f), &st) < 0) {
		fprintf(stderr, "scanbench: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		exit(1);
	*len = fread(buf, 1, (size_t)st.st_size, f);
	fclose(f);
	return buf;
}

/* The end of the chunk starting at `a`: at most MIB bytes, at a line end. */
static size_t chunk_end(const char *s, size_t len, size_t a)
{
	size_t b = a + MIB < len ? a + MIB : len;

	if (b == len)
		return b;
	while (b > a && s[b - 1] != '\n')
		b--;
	return b > a ? b : (a + MIB < len ? a + MIB : len);
}

static void labels_str(const struct scan_result *r, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < r->n && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%s%s", i ? "," : "",
				      scan_label_name(r->hits[i].label),
				      r->hits[i].limited ? "(limit)" : "");
	if (!r->n)
		snprintf(out, cap, "-");
}

/* head, then unit repeated to 1 MiB. */
static const char *const adversaries[][3] = {
	/* nesting */
	{ "nested open(", "", "open(" },
	{ "nested open(os.path.join(", "", "open(os.path.join(" },
	{ "nested f(", "", "f(" },
	{ "nested ([{", "", "([{" },
	{ "open( then ()", "open(x", "()" },
	{ "open( then args", "open(x", "a = b + c " },
	{ "open( then 1 MiB of commas", "open(x", ", a" },
	{ "open(x, \"w unclosed", "open(x", ", \"w" },
	{ "open(x, 'r') read calls", "", "open(x, 'r') " },
	{ "quotes", "", "'\"" },
	/* fs-destroy */
	{ "shutil.rmtre", "", "shutil.rmtre " },
	{ "os.remov(", "", "os.remov(" },
	{ ".unlin(", "", ".unlin(" },
	{ "from os import a,", "", "from os import a, " },
	{ "long import list", "from os import a", ", a" },
	{ "from shutil import (a,", "", "from shutil import (a, # c\n" },
	{ "import a,", "", "import a, " },
	/* shell-spawn */
	{ "os.syste(", "", "os.syste(" },
	{ "subprocess", "", "subprocess " },
	{ "subprocess\\", "", "subprocess\\ " },
	{ "os spaces", "os", " " },
	{ "os backslashes", "os", "\\" },
	{ "getattr(o", "", "getattr(o, " },
	/* raw-socket */
	{ "socket.socke", "", "socket.socke " },
	{ ".connect(", "", ".connect(" },
	{ ".bind( (", "", ".bind( x" },
	/* dynamic-eval */
	{ "x.eval(", "", "x.eval(" },
	{ "eva(", "", "eva(" },
	{ "compil(", "", "compil(" },
	{ "pickle.loa", "", "pickle.loa " },
	/* fs-write */
	{ "os.open(O", "os.open(", "O" },
	{ "os.open(O_RDONLY", "os.open(", "O_RDONLY " },
	{ ".open(x, 'r'", "", ".open(x, 'r' " },
	{ "shutil.cop", "", "shutil.co " },
	/* data-out */
	{ "requests.get(", "", "requests.get(" },
	{ "requests.get no call", "", "requests.get " },
	{ "requests.get(\"https://", "", "requests.get(\"https://" },
	{ "session.get(x, params", "session.get(x", ", params" },
	{ "urlopen(", "", "urlopen(" },
	{ "Request(", "", "Request(" },
	{ "Request(a, b,", "Request(", "a, " },
	{ ".pos", "", ".pos " },
	{ "method='pos'", "", "method='pos' " },
	/* secret-read */
	{ ".env lookalikes", "", "os.environ.envx " },
	{ ".ss", "", "x.ss " },
	{ "/etc/", "", "/etc/" },
	{ "/proc/", "", "/proc/" },
	{ "id_", "", "id_" },
	{ "doten", "", "doten " },
	{ "keyring.get_passwor", "", "keyring.get_passwor " },
	{ "= o", "", "= o" },
};

int main(int argc, char **argv)
{
	struct scan_result r;
	char err[256] = "", got[128];
	char *corpus, *ord, *adv;
	size_t clen, olen, chunks = 0;
	double t_all = 0, t_ord, t_raw, worst = 0;
	const char *worst_what = "";

	if (argc != 2) {
		fprintf(stderr, "usage: scanbench CORPUS\n");
		return 64;
	}
	if (scan_init(err, sizeof(err)) < 0) {
		fprintf(stderr, "scanbench: scan_init: %s\n", err);
		return 1;
	}
	corpus = load(argv[1], &clen);
	for (size_t a = 0; a < clen;) {
		size_t b = chunk_end(corpus, clen, a);

		t_all += time_scan(corpus + a, b - a, 3, &r);
		chunks++;
		a = b;
	}
	printf("corpus bytes=%zu chunks=%zu ms=%.3f mbps=%.1f\n", clen, chunks, t_all * 1e3,
	       (double)clen / 1e6 / t_all);

	olen = chunk_end(corpus, clen, 0);
	ord = malloc(MIB);
	adv = malloc(MIB);
	if (!ord || !adv)
		return 1;
	memcpy(ord, corpus, olen);
	t_raw = time_scan(ord, olen, REPS, &r);
	labels_str(&r, got, sizeof(got));
	printf("raw bytes=%zu ms=%.3f mbps=%.1f labels=%s\n", olen, t_raw * 1e3,
	       (double)olen / 1e6 / t_raw, got);
	if (blank_flagged(ord, olen, MIB) < 0) {
		fprintf(stderr, "scanbench: could not blank the flagged lines\n");
		return 1;
	}
	t_ord = time_scan(ord, olen, REPS, &r);
	printf("ordinary bytes=%zu ms=%.3f mbps=%.1f labels=%zu\n", olen, t_ord * 1e3,
	       (double)olen / 1e6 / t_ord, r.n);

	for (size_t i = 0; i < sizeof(adversaries) / sizeof(adversaries[0]); i++) {
		size_t len = repeat(adv, MIB, adversaries[i][1], adversaries[i][2]);
		double t = time_scan(adv, len, REPS, &r);

		labels_str(&r, got, sizeof(got));
		printf("adv bytes=%zu ms=%.3f ratio=%.2f labels=%s name=%s\n", len, t * 1e3,
		       t / t_ord, got, adversaries[i][0]);
		if (t / t_ord > worst) {
			worst = t / t_ord;
			worst_what = adversaries[i][0];
		}
	}
	printf("worst ratio=%.2f name=%s\n", worst, worst_what);
	scan_fini();
	free(corpus);
	free(ord);
	free(adv);
	return 0;
}
