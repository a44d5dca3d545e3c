/* SPDX-License-Identifier: MIT
 * libkotoba-client internals: shared by its source files, never installed.
 * The shared library exports kotoba_* only (client/libkotoba-client.map).
 */
#ifndef KOTOBA_CLIENT_INTERNAL_H
#define KOTOBA_CLIENT_INTERNAL_H
#include <pthread.h>
#include <sys/un.h>

#include "client/kotoba-client.h"
#include "proto/proto.h"

struct kotoba_client {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* Writes happen from the exec thread and, for answer and cancel, from
	 * any other thread: one lock keeps frames whole on the socket. */
	pthread_mutex_t wlock;
	uint64_t next_id;
	uint64_t running;     /* id of the exec in flight, 0 when none (under wlock) */
	bool welcomed;
	struct kotoba_welcome welcome;
	size_t max_frame, max_snippet;
	uint8_t *buf;         /* payload of the last frame received */
	struct msg *msg;      /* its decoded form: large, so on the heap */
};

/* Fills *err (when given) and returns code. */
enum kotoba_code kc_fail(struct kotoba_error *err, enum kotoba_code code, int sys_errno,
				  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Fills *err from a broker `error` frame and returns its code. */
enum kotoba_code kc_broker_error(struct kotoba_error *err, const struct msg_error *e);

/* Sends and frees a frame, with c->wlock held by the caller. */
enum kotoba_code kc_send_locked(struct kotoba_client *c, struct frame *f,
				struct kotoba_error *err);
/* Sends and frees a frame; thread-safe. */
enum kotoba_code kc_send(struct kotoba_client *c, struct frame *f,
				  struct kotoba_error *err);
/* Encoder result to a code: enc_* return -errno. */
enum kotoba_code kc_encoded(int rc, struct kotoba_error *err);
/* Reads and decodes the next frame into c->msg. */
enum kotoba_code kc_recv(struct kotoba_client *c, struct kotoba_error *err);
/* Sends a request with `id` and reads until its answer, left in c->msg;
 * an `error` answer is returned as its code. */
enum kotoba_code kc_request(struct kotoba_client *c, struct frame *f, uint64_t id,
				     struct kotoba_error *err);
/* The next request id, under the write lock. */
uint64_t kc_next_id(struct kotoba_client *c);
/* 0 when hello was said, else fails with KOTOBA_ERR_INVALID. */
enum kotoba_code kc_ready(const struct kotoba_client *c, struct kotoba_error *err);

/* Copies a counted string into a fixed array, truncating, always terminated. */
void kc_copy(char *dst, size_t len, const char *src, size_t src_len);
#endif
