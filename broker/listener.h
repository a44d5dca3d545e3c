/* SPDX-License-Identifier: MIT */
#ifndef KOTOBA_LISTENER_H
#define KOTOBA_LISTENER_H
#include <stdbool.h>
#include <stddef.h>
/* Returns the listening fd (non-blocking), or -1 with err set. */
int listener_open(const char *path, unsigned mode, bool *activated, char *err, size_t errlen);
#endif
