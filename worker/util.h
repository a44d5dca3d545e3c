/* SPDX-License-Identifier: MIT
 * Small helpers S uses both while it supervises the snippet
 * (supervise.c) and while it runs the engine's commands (engine.c).
 */
#ifndef KOTOBA_WORKER_UTIL_H
#define KOTOBA_WORKER_UTIL_H

#include <stdbool.h>
#include <stdint.h>

/* The monotonic clock in microseconds. */
uint64_t monotonic_us(void);
/* t + ms, in microseconds, or 0 ("never") when that would overflow. */
uint64_t deadline_after_ms(uint64_t t, uint64_t ms);
/* The report channel of one confined child: SOCK_SEQPACKET, both ends
 * CLOEXEC, S's end (*r) non-blocking.  0 or -errno. */
int open_report_pair(int *r, int *w);
/* True when fd 3's poll events (and what waits there) mean the broker
 * cancelled the run or is gone. */
bool broker_says_stop(short revents);

#endif
