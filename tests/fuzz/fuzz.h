/* SPDX-License-Identifier: MIT
 * Shared by the libFuzzer targets in tests/fuzz/.  A broken invariant is a
 * crash, so libFuzzer saves the input that broke it.
 */
#ifndef KOTOBA_FUZZ_H
#define KOTOBA_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(cond)                                                                  \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,     \
				#cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
#endif
