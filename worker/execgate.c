/* SPDX-License-Identifier: MIT
 * The exec gate: in the unattended profile a snippet gets exactly one
 * exec, the one that starts python3, and every later execve/execveat
 * fails with EPERM however it is spelled (subprocess, os.system, os.exec*,
 * ctypes, a hand-made execveat with an absolute path).
 *
 * Why not a pure filter: seccomp sees only argument values, and a filter
 * that allows "execveat of fd N" still lets execveat(N, "/bin/sh", ...)
 * through, because the kernel ignores the directory fd when the path is
 * absolute.  So the filter returns SECCOMP_RET_USER_NOTIF for both calls;
 * the snippet child (C) hands the listener to S before its exec, and S
 * answers: the first notification, from C itself, continues (C is our
 * code, single-threaded, and no snippet code has run yet, so the usual
 * CONTINUE time-of-check race has nobody to race it); every later one is
 * answered EPERM.  While S holds the listener the kernel refuses any other
 * listener in the snippet's filter stack (EBUSY), so the snippet cannot
 * answer its own exec.  If S dies, the kernel answers ENOSYS: still no
 * exec.  Needs Linux 5.5 (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
 *
 * The same listener carries the snippet's chmod and utime calls, which
 * fileattr.c answers (never with CONTINUE), and its opens for writing,
 * which fileattr.c's write witness records and lets the kernel answer;
 * neither spends the exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "worker/worker.h"

/* The kernel's struct sizes may exceed our header's: ask, and size the
 * buffers for the larger. */
static int notif_sizes(size_t *req, size_t *resp)
{
	struct seccomp_notif_sizes sz;

	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return -errno;
	*req = sz.seccomp_notif > sizeof(struct seccomp_notif) ? sz.seccomp_notif
							       : sizeof(struct seccomp_notif);
	*resp = sz.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
			? sz.seccomp_notif_resp
			: sizeof(struct seccomp_notif_resp);
	return 0;
}

int exec_gate_open(struct exec_gate *g, int fd, pid_t child, struct receipt *blocked)
{
	int rc;

	g->fd = fd;
	g->child = child;
	g->blocked = blocked;
	g->spent = false;
	g->landlock_abi = 0; /* until told: S refuses opens for writing itself */
	memset(g->own_mounts, 0, sizeof(g->own_mounts));
	rc = notif_sizes(&g->req_len, &g->resp_len);
	if (rc < 0)
		return rc;
	g->req = calloc(1, g->req_len);
	g->resp = calloc(1, g->resp_len);
	return g->req && g->resp ? 0 : -ENOMEM;
}

static void answer(struct exec_gate *g, uint64_t id, bool let_through)
{
	struct seccomp_notif_resp *resp = g->resp;

	memset(resp, 0, g->resp_len);
	resp->id = id;
	if (let_through)
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	else
		resp->error = -EPERM;
	/* ENOENT: the caller died or was interrupted meanwhile; the
	 * syscall is then restarted and asks again, or never will. */
	if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && let_through && errno != ENOENT) {
		/* A kernel without CONTINUE (before 5.5): C's exec fails
		 * and C reports the step; nothing runs. */
		resp->flags = 0;
		resp->error = -EOPNOTSUPP;
		(void)ioctl(g->fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
}

/* A NUL-terminated string of at most len - 1 bytes at addr in the
 * caller's memory; "" when it cannot be read. */
static void read_string(int mem, uint64_t addr, char *out, size_t len)
{
	ssize_t n = addr ? pread(mem, out, len - 1, (off_t)addr) : -1;

	out[n > 0 ? n : 0] = '\0';
}

/* The program a refused exec named, and its argv[0] when that says
 * something else, read from the caller's memory while it waits for our
 * answer: execve's path and argv, execveat's (an empty path with
 * AT_EMPTY_PATH is fexecve: the descriptor).  Read before the answer and
 * believed only if the notification is still pending after it; another
 * thread of the caller may still have changed the bytes meanwhile, which
 * makes the target that thread's choice, not a way past the gate (the
 * answer is EPERM whatever they say). */
static void refused_program(const struct exec_gate *g, const struct seccomp_notif *req,
			    char *out, size_t len)
{
	bool at = req->data.nr == __NR_execveat;
	uint64_t path = at ? req->data.args[1] : req->data.args[0];
	uint64_t argv = at ? req->data.args[2] : req->data.args[1], argv0 = 0;
	char mem[32], prog[PROTO_BLOCKED_TARGET_MAX + 1], name[64];
	int fd;

	snprintf(out, len, "?");
	snprintf(mem, sizeof(mem), "/proc/%u/mem", req->pid);
	fd = open(mem, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	read_string(fd, path, prog, sizeof(prog));
	if (!argv || pread(fd, &argv0, sizeof(argv0), (off_t)argv) != (ssize_t)sizeof(argv0))
		argv0 = 0;
	read_string(fd, argv0, name, sizeof(name));
	close(fd);
	if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		return;
	if (prog[0] == '\0' && at)
		snprintf(prog, sizeof(prog), "fd %d", (int)req->data.args[0]);
	if (name[0] && strcmp(name, prog))
		snprintf(out, len, "%s (argv[0] %s)", prog, name);
	else
		snprintf(out, len, "%s", prog[0] ? prog : "?");
}

static void record_refusal(const struct exec_gate *g, const struct seccomp_notif *req)
{
	char program[PROTO_BLOCKED_TARGET_MAX + 96]; /* cut to a target by receipt_add() */

	if (!g->blocked)
		return;
	refused_program(g, req, program, sizeof(program));
	receipt_add(g->blocked, BLOCK_EXEC, program, BY_EXEC_GATE, SEEN_BY_WORKER, false);
}

int exec_gate_own_place(struct exec_gate *g, size_t which, int fd)
{
	struct statx stx;
	int rc = 0;

	if (fd < 0 || which >= sizeof(g->own_mounts) / sizeof(g->own_mounts[0]))
		return -EPROTO;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
		rc = -errno;
	else if (!(stx.stx_mask & STATX_MNT_ID))
		rc = -EOPNOTSUPP; /* before Linux 5.8: no change allowed anywhere */
	else
		g->own_mounts[which] = stx.stx_mnt_id;
	close(fd);
	return rc == -EOPNOTSUPP ? 0 : rc;
}

/* Answers one pending notification.  Returns false when the listener is
 * finished (no process uses the filter any more, or it failed). */
bool exec_gate_serve(struct exec_gate *g)
{
	struct seccomp_notif *req = g->req;
	bool first;

	memset(req, 0, g->req_len);
	if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
		return errno == EINTR || errno == ENOENT || errno == EAGAIN;
	/* A chmod or utime, or an open for writing (fileattr.c): answered
	 * there, never an exec. */
	memset(g->resp, 0, g->resp_len);
	if (file_attr_answer(g, req, g->resp) || write_witness_answer(g, req, g->resp)) {
		(void)ioctl(g->fd, SECCOMP_IOCTL_NOTIF_SEND, g->resp);
		return true;
	}
	/* Only C's own exec, and only once: a notification from any other
	 * pid (there can be none before that exec) does not spend it. */
	first = !g->spent && (pid_t)req->pid == g->child;
	if (first)
		g->spent = true;
	else
		record_refusal(g, req);
	answer(g, req->id, first);
	return true;
}

/* Keeps `spent`: whether C's exec went through outlives the listener. */
void exec_gate_close(struct exec_gate *g)
{
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
	free(g->req);
	free(g->resp);
	g->req = NULL;
	g->resp = NULL;
}
