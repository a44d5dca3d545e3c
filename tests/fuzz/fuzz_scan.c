/* SPDX-License-Identifier: MIT
 * Fuzz target: the pre-screen, scan_snippet() (broker/scan.c).
 *
 * The input is a snippet's source.  Beyond "no crash, no sanitizer report",
 * every hit must be well-formed: labels in label order and each at most
 * once, a byte span inside the snippet, and the 1-based line of its start.
 * A run in a container is labelled at least as the same snippet on the
 * host (the container only loses the own-places exemption).
 * libFuzzer's -timeout catches a pattern that stops being linear.
 */
#include <errno.h>
#include <string.h>

#include "broker/scan.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256] = "";

	if (scan_init(err, sizeof(err)) < 0) {
		fprintf(stderr, "scan_init: %s\n", err);
		abort();
	}
	return 0;
}

static unsigned line_of(const uint8_t *p, size_t off)
{
	unsigned line = 1;

	for (size_t i = 0; i < off; i++)
		line += p[i] == '\n';
	return line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scan_result r, in;
	int rc;

	if (size > 0)
		FUZZ_ASSERT(scan_snippet((const char *)data, size, size - 1, &r) == -E2BIG);
	memset(&r, 0xa5, sizeof(r));
	rc = scan_snippet((const char *)data, size, size, &r);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(r.n <= SCAN_LABEL_COUNT);
	for (size_t i = 0; i < r.n; i++) {
		const struct scan_hit *h = &r.hits[i];

		FUZZ_ASSERT((unsigned)h->label < SCAN_LABEL_COUNT);
		FUZZ_ASSERT(i == 0 || h->label > r.hits[i - 1].label);
		FUZZ_ASSERT(h->start <= h->end && h->end <= size);
		FUZZ_ASSERT(h->limited || h->line == line_of(data, h->start));
		FUZZ_ASSERT(strcmp(scan_label_name(h->label), "unknown") != 0);
	}
	FUZZ_ASSERT(scan_snippet_for((const char *)data, size, size, SCAN_IN_CONTAINER, &in) == 0);
	for (size_t i = 0, j = 0; i < r.n; i++, j++) {
		while (j < in.n && in.hits[j].label < r.hits[i].label)
			j++;
		FUZZ_ASSERT(j < in.n && in.hits[j].label == r.hits[i].label);
	}
	return 0;
}
