/* SPDX-License-Identifier: MIT
 * The broker's single event loop: epoll over every fd it owns, each fd
 * with a callback.  Nothing blocks in a callback.
 */
#ifndef KOTOBA_LOOP_H
#define KOTOBA_LOOP_H
#include <stdint.h>

struct watch;
typedef void (*watch_fn)(struct watch *w, uint32_t events);

struct watch {
	int fd;
	uint32_t events; /* what is armed now */
	watch_fn fn;
	void *ctx;
};

int loop_init(void);
void loop_fini(void);
int loop_add(struct watch *w, int fd, uint32_t events, watch_fn fn, void *ctx);
int loop_mod(struct watch *w, uint32_t events);
/* Removes the fd from the loop and closes it; safe on a watch never added. */
void loop_close(struct watch *w);
/* Waits at most timeout_ms (-1: forever) and dispatches what is ready.
 * Returns 0 or -errno. */
int loop_run_once(int timeout_ms);
/* Frees an object after the current batch of events is dispatched, so an
 * event still queued for one of its watches never touches freed memory. */
void loop_defer_free(void (*fn)(void *), void *p);
/* Asks for freed heap to go back to the kernel (malloc_trim) once the
 * current batch of events is done: call it after freeing something big. */
void loop_trim_later(void);
/* Monotonic milliseconds. */
uint64_t now_ms(void);
uint64_t now_us(void);
#endif
