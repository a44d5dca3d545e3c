/* SPDX-License-Identifier: MIT
 * sandbox = docker: the warm containers and the engine command lines the
 * worker runs.  The broker never talks to the engine itself: every engine
 * command runs in a confined worker as the snippet's user, whose own
 * access (docker group, a rootless podman service) is what reaches the
 * engine.  So the broker only builds argv and keeps a table.
 *
 * A container serves one snippet at a time.  It is kept warm for its
 * (user, working directory, image) after a snippet that ended normally,
 * and dropped (and removed by the worker or a stop command) after a
 * timeout, a cancel, a kill by the engine or the OOM killer, or any
 * engine error: a container that misbehaved is replaced, never reused.
 */
#ifndef KOTOBA_BROKER_CONTAINER_H
#define KOTOBA_BROKER_CONTAINER_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "broker/privsep.h"
#include "proto/proto.h"

struct broker;
struct run_info;
struct run_ops;

/* Room for every string of one job's engine section. */
#define ENGINE_TEXT_MAX 32768

struct container {
	TAILQ_ENTRY(container) link;
	uid_t peer;              /* whose client asked (root maps to root_user) */
	uid_t uid;               /* who it runs as */
	gid_t gid;
	char cwd[PATH_MAX];
	char image[128];
	char name[64];
	enum { CT_BUSY, CT_IDLE } state;
	bool started;            /* false: the run that has it starts it */
	uint64_t idle_since_ms;
};

/* The engine section of one job, and the text its pstrs point into. */
struct engine_job {
	struct job_engine e;
	char text[ENGINE_TEXT_MAX];
	size_t used;
	bool overflow;
};

/* How container.c starts an engine command (run_start_engine(), set by
 * main.c at start-up): it never calls the run module, which sits above it.
 * Without one, no engine command starts and the caller logs why. */
typedef int engine_runner(struct broker *b, uid_t peer, const struct engine_job *j,
			  const struct run_ops *ops, void *ctx, char *err, size_t errlen);
void container_set_runner(engine_runner *fn);

/* A container for this run: an idle warm one of (identity, cwd, image), or
 * a new one the run starts.  Marks it busy.  -EINVAL when cwd cannot be
 * mounted, other -errno; with a sentence. */
int container_claim(struct broker *b, uid_t peer, const struct identity *id, const char *cwd,
		    struct container **out, char *err, size_t errlen);
/* The job's engine section for a snippet in ct; env are the snippet's
 * NAME=value strings.  -ENOEXEC when the engine cannot be driven (no
 * CLI, a command line over the limits), with a sentence. */
int container_snippet_job(const struct broker *b, const struct container *ct, char *const *env,
			  size_t n_env, struct engine_job *out, char *err, size_t errlen);
/* After its run: warm again, or dropped and stopped. */
void container_release(struct broker *b, struct container *ct, const struct run_info *ri);
/* Stops idle containers; returns ms to the next idle deadline, -1: none. */
int containers_tick(struct broker *b, uint64_t now);
/* At start: logs the engine client it will use (a warning when it is not
 * installed), has the engine check the image as the user a root client's
 * snippets run as (system mode) or as the broker's own user, and logs
 * what that found.  Only a hint for other users, whose engine or image
 * store may differ (rootless podman): each cold start checks again. */
void container_check_image(struct broker *b);
/* At shutdown: stops every idle container (busy ones go with their runs). */
void containers_stop_all(struct broker *b);
#endif
