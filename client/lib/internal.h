/* SPDX-License-Identifier: MIT
 * libkotoba-client internals: shared by its source files, never installed.
 * The shared library exports kotoba_* only (client/libkotoba-client.map).
 */
#ifndef KOTOBA_CLIENT_INTERNAL_H
#define KOTOBA_CLIENT_INTERNAL_H
#include <pthread.h>
#include <stddef.h>
#include <sys/un.h>

#include "client/kotoba-client.h"
#include "proto/proto.h"

struct kotoba_client {
	int fd;
	struct frame_reader in; /* frames read and not yet handled */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* Writes happen from the exec thread and, for answer and cancel, from
	 * any other thread: one lock keeps frames whole on the socket. */
	pthread_mutex_t wlock;
	uint64_t next_id;
	uint64_t running;     /* id of the exec in flight, 0 when none (under wlock) */
	bool welcomed;
	struct kotoba_welcome welcome;
	size_t max_frame, max_snippet;
	struct msg *msg;      /* the last frame received, decoded: large, so on the heap */
	struct kotoba_exec_opts opts; /* of the run in flight: its callbacks */
	bool escalate;        /* hello said escalate: escalation cards may come */
	/* The run in flight's escalation, from its first exit with escalate. */
	enum kotoba_escalation esc;
	bool esc_rerun;       /* rerun was answered (under wlock) or the re-run began */
	uint64_t esc_after;   /* the card's after_seq */
	struct kotoba_result esc_first; /* the first run's result */
};

/* The size of the first version of a growing struct, through its last
 * field then: what a caller's `size` must reach.  Fixed, while sizeof()
 * grows with the fields appended later. */
#define KC_SIZE_THROUGH(type, field) \
	(offsetof(struct type, field) + sizeof(((struct type *)0)->field))
#define KC_ERROR_SIZE KC_SIZE_THROUGH(kotoba_error, sys_errno)
#define KC_EXEC_OPTS_SIZE KC_SIZE_THROUGH(kotoba_exec_opts, arg)
#define KC_RESULT_SIZE KC_SIZE_THROUGH(kotoba_result, container)
#define KC_GRANT_SIZE KC_SIZE_THROUGH(kotoba_grant, last_used_ms)
#define KC_AUDIT_ROW_SIZE KC_SIZE_THROUGH(kotoba_audit_row, timed_out)
#define KC_GRANT_TERMS_SIZE KC_SIZE_THROUGH(kotoba_grant_terms, scope)

/* Copies the library's whole struct @src (@src_size bytes, starting with
 * its size) into the caller's @dst, as much of it as the caller's own
 * `size` says it holds; dst's size stays the caller's. */
void kc_put_sized(void *dst, const void *src, size_t src_size);
/* The `size` a caller's struct starts with. */
size_t kc_size_of(const void *s);

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
/* The same without blocking: KOTOBA_OK with *got false when no whole frame
 * is there yet after one read of what the socket holds. */
enum kotoba_code kc_recv_ready(struct kotoba_client *c, bool *got, struct kotoba_error *err);
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
