/* SPDX-License-Identifier: MIT
 * Text for timing the pre-screen (broker/scan.c), shared by its unit test
 * (tests/unit/test_scan.c) and the bench (tests/bench/scanbench.c):
 * ordinary code made to match nothing, and adversarial filler.
 *
 * Header-only: the unit-test link rule builds each test from its own file
 * and the module objects it names, nothing shared.
 */
#ifndef KOTOBA_TESTS_SCAN_TEXT_H
#define KOTOBA_TESTS_SCAN_TEXT_H

#include <string.h>

#include "broker/scan.h"

/* Blanks whole lines in [from, to) so the text keeps its length. */
static void blank_lines(char *s, size_t len, size_t from, size_t to)
{
	while (from > 0 && s[from - 1] != '\n')
		from--;
	while (to < len && s[to] != '\n')
		to++;
	for (size_t i = from; i < to; i++)
		if (s[i] != '\n')
			s[i] = ' ';
}

/*
 * Ordinary code that matches nothing, so a scan reads all of it with every
 * pattern (a first match would end a label's pass early and flatter the
 * timing): blanks every line that matches alone, then whatever still
 * matches across lines.  Returns 0, or -1 when a scan fails or the text
 * will not come clean.
 */
static int blank_flagged(char *s, size_t len, size_t max)
{
	struct scan_result r;
	size_t a = 0;

	while (a < len) {
		char *nl = memchr(s + a, '\n', len - a);
		size_t b = nl ? (size_t)(nl - s) + 1 : len;

		if (scan_snippet(s + a, b - a, max, &r) < 0)
			return -1;
		if (r.n)
			blank_lines(s, len, a, a + 1);
		a = b;
	}
	for (int round = 0; round < 1000; round++) {
		if (scan_snippet(s, len, max, &r) < 0)
			return -1;
		if (!r.n)
			return 0;
		for (size_t i = 0; i < r.n; i++)
			blank_lines(s, len, r.hits[i].start, r.hits[i].end);
	}
	return -1;
}

/* Fills buf with head, then copies of unit, up to len bytes. */
static size_t repeat(char *buf, size_t len, const char *head, const char *unit)
{
	size_t h = strlen(head), u = strlen(unit), n = h;

	memcpy(buf, head, h);
	while (n + u <= len) {
		memcpy(buf + n, unit, u);
		n += u;
	}
	return n;
}

#endif
