/* SPDX-License-Identifier: MIT
 * The system broker's side of its monitor (broker/monitor/): it starts
 * kotoba-monitor while still root, then asks it, over fixed-size requests,
 * to start each worker as another user and to kill a child that runs as
 * one.  A per-user broker has no monitor: it does both itself.
 */
#ifndef KOTOBA_MONLINK_H
#define KOTOBA_MONLINK_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "broker/monitor/wire.h"

/* As root, before anything untrusted is read: starts the monitor at path
 * with the listening socket, which the broker then no longer holds.  0, or
 * -1 with a sentence. */
int monlink_start(const char *path, const char *worker_path, int listen_fd, uid_t service_uid,
		  gid_t service_gid, uid_t root_peer_uid, unsigned long linger_ms, char *err,
		  size_t errlen);
/* Whether there is a monitor (a system broker), and its pid. */
bool monlink_active(void);
pid_t monlink_pid(void);
/* The attach link's fd, for the event loop; -1 without a monitor. */
int monlink_attach_fd(void);
/* One connection the monitor accepted: its fd (-1 when none came), and
 * what the monitor said of the peer.  0, -EAGAIN when nothing waits, or
 * -errno when the monitor is gone. */
int monlink_take_attach(struct mon_attach *a, int *fd);
/* Starts a worker as the user the monitor attached for uid, with fds
 * 0-3, the write end of the start-report pipe and the run's cgroup.procs
 * files.  0 with *pid as soon as the child exists (its start may still
 * fail: monlink_start_failed() tells), or -errno with what. */
int monlink_spawn(uid_t uid, const int *fd, size_t n_fds, pid_t *pid, char *what,
		  size_t whatlen);
/* After the worker link's end: did the child the monitor started fail
 * before its exec?  true with *step (enum mon_step), *err_no and what,
 * read from the start-report pipe's read end (non-blocking). */
bool monlink_start_failed(int report_fd, unsigned *step, int *err_no, char *what,
			  size_t whatlen);
/* The broker's start-up is over: no more workers without a connection.
 * 0 or -errno. */
int monlink_started(void);
/* SIGKILL to a child of the broker: through the monitor when there is one
 * (it runs as another user), else kill(2).  0 or -errno. */
int monlink_kill(pid_t pid);
#endif
