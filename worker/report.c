/* SPDX-License-Identifier: MIT
 * The worker's messages to the broker.  Each frame is one
 * SOCK_SEQPACKET message on fd 3.  When fd 3 cannot take it, the last
 * resort is a line on fd 2, the snippet's stderr pipe, which the broker
 * reads anyway: otherwise nobody would learn why the run vanished.  That
 * holds until the fork: then S gives its copy of the pipe away (main.c),
 * and a worker that can no longer report is seen as lost.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "worker/worker.h"

static bool send_frame(struct frame *f, int rc, const char *what)
{
	if (rc == 0)
		rc = write_all(FD_BROKER, f->data, f->len);
	frame_free(f);
	if (rc < 0) {
		dprintf(FD_STDERR, "kotoba-worker: cannot send '%s' to the broker: %s\n", what,
			strerror(-rc));
		return false;
	}
	return true;
}

bool report_ready(pid_t pid, uint64_t landlock_abi, int egress)
{
	struct msg_ready m = { .pid = (uint64_t)pid, .landlock_abi = landlock_abi };
	struct frame f = { 0 };
	int rc;

	if (egress < 0)
		return send_frame(&f, enc_ready(&f, &m), "ready");
	rc = enc_ready(&f, &m);
	if (rc == 0)
		rc = frame_send_fd(FD_BROKER, &f, egress);
	frame_free(&f);
	if (rc < 0)
		dprintf(FD_STDERR, "kotoba-worker: cannot send 'ready' to the broker: %s\n",
			strerror(-rc));
	return rc == 0;
}

bool report_warm(pid_t pid)
{
	struct msg_warm m = { .pid = (uint64_t)pid };
	struct frame f = { 0 };

	return send_frame(&f, enc_warm(&f, &m), "warm");
}

bool report_setup_error(const char *step, int err, const char *msg)
{
	struct msg_setup_error m = { .step = pstr_c(step), .err_no = err, .message = pstr_c(msg) };
	struct frame f = { 0 };

	if (!send_frame(&f, enc_setup_error(&f, &m), "setup_error")) {
		dprintf(FD_STDERR, "kotoba-worker: setup failed at %s: %s\n", step, msg);
		return false;
	}
	return true;
}

bool report_finished(const struct run_result *r, const struct receipt *blocked,
		     uint64_t files_left_out)
{
	struct msg_finished m = { .r = *r, .blocked = *blocked, .files_left_out = files_left_out };
	struct frame f = { 0 };

	return send_frame(&f, enc_finished(&f, &m), "finished");
}

/* After `finished`: the masks' namespace this run made, for the user's
 * next unattended run (PROTOCOL.md, "masks").  No stderr line when it
 * cannot go: the run is over and reported, and the next builds anew. */
bool report_masks(int mounts, const uint8_t key[PROTO_MASKS_KEY_LEN])
{
	struct msg_masks m;
	struct frame f = { 0 };
	bool sent;

	memcpy(m.key, key, sizeof(m.key));
	if (enc_masks(&f, &m) < 0)
		return false;
	sent = frame_send_fd(FD_BROKER, &f, mounts) == 0;
	frame_free(&f);
	return sent;
}
