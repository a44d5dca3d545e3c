/* SPDX-License-Identifier: MIT
 * What the broker (B) and its monitor (M) say to each other: fixed-size
 * structs over two SOCK_SEQPACKET socketpairs, descriptors beside them in
 * SCM_RIGHTS (ARCHITECTURE.md, "The monitor's requests").
 *
 *   attach link  M -> B  one `struct mon_attach` per accepted connection,
 *                        with the connection's fd
 *   request link B -> M  one `struct mon_request`, answered by one
 *                        `struct mon_reply` before the next is read
 *
 * M reads nothing else from B: a message of another size, an unknown op,
 * or the wrong number of descriptors is refused (EBADMSG) and logged.
 */
#ifndef KOTOBA_MONITOR_WIRE_H
#define KOTOBA_MONITOR_WIRE_H
#include <stdint.h>

/* The descriptors M is started with (kotoba-monitor's fds 3 to 5). */
enum { MON_FD_LISTEN = 3, MON_FD_REQUESTS = 4, MON_FD_ATTACH = 5 };

enum mon_op {
	/* Start a worker for the peer uid `uid` attached to a live
	 * connection.  fds: the worker's 0-3 (code, stdout, stderr, worker
	 * link), the write end of B's start-report pipe, then the run's
	 * cgroup.procs files (0 to 2).  M answers once the child exists; a
	 * start that fails in the child later is told on that pipe as one
	 * `struct mon_start_fail`, and the pipe closes without it at the
	 * worker's exec. */
	MON_SPAWN = 1,
	/* SIGKILL to pid, which must be a child of B (a worker, or what a
	 * dead worker left reparented to B).  No fds. */
	MON_KILL = 2,
	/* The broker's start-up is over.  Until then (before it has read a
	 * byte from anyone) it may start workers as root_user's user without
	 * a connection: the container image check at start.  No fds. */
	MON_STARTED = 3,
};

/* The fds of MON_SPAWN: the worker's four, the start-report pipe, then
 * at most two cgroup.procs. */
enum { MON_SPAWN_FDS = 5 };
#define MON_FDS_MAX 7

struct mon_request {
	uint32_t op;       /* enum mon_op */
	uint32_t uid;      /* MON_SPAWN: the peer's uid as attached */
	int32_t pid;       /* MON_KILL */
	uint32_t n_fds;    /* as sent: must match what arrived */
};

/* Where a worker's start failed, as the worker link's setup_error names
 * it (proto/names.h). */
enum mon_step { MON_STEP_NONE, MON_STEP_CGROUP, MON_STEP_IDENTITY, MON_STEP_CAPS,
		MON_STEP_WORKER };

/* Written by M's child on the start-report pipe when the start fails
 * after M has answered: B tells it to the run as the setup_error the
 * worker would have sent. */
struct mon_start_fail {
	uint32_t step;     /* enum mon_step */
	int32_t err;       /* errno */
	char what[200];    /* why, in words */
};

struct mon_reply {
	int32_t err;       /* 0, or an errno: the request was refused or failed */
	int32_t pid;       /* MON_SPAWN: the worker, a child of B (CLONE_PARENT) */
	char what[240];    /* why, in words */
};

enum mon_attached {
	/* M will not start workers for this uid (the service user, a uid
	 * with no user entry): `why` says so. */
	MON_NOT_ATTACHED = 0,
	/* M attached this uid and will start workers for it while the
	 * connection lives. */
	MON_ATTACHED = 1,
	/* M is at its open-file limit: it took the connection only to hand
	 * it over for its refusal. */
	MON_AT_FD_LIMIT = 2,
};

struct mon_attach {
	uint32_t uid;      /* SO_PEERCRED, read by M */
	uint32_t gid;
	int32_t pid;
	/* enum mon_attached */
	uint32_t attached;
	char why[200];
};
#endif
