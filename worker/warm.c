/* SPDX-License-Identifier: MIT
 * A warm job (PROTOCOL.md, "go"): S builds the run as for any other, and C
 * execs python3, which imports the preload list and then waits on its
 * stdin, a socket, for the code.  When `go` brings the code, S checks that
 * what C was built from still holds (the secret set, the working
 * directory, the interpreter, and every mask still over its path in C's
 * namespace) and hands the code's memfd over; when it no
 * longer holds, C is killed and S starts a cold child with the code
 * (main.c), so a run never gets a sandbox older than its `go` could see.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/secrets.h"
#include "worker/worker.h"

static int join_preload(struct plan *p, char *err, size_t errlen)
{
	const struct msg_job *job = p->job;
	size_t off = 0;

	p->preload[0] = '\0';
	for (size_t i = 0; i < job->n_preload; i++) {
		int n = snprintf(p->preload + off, sizeof(p->preload) - off, "%s%.*s", i ? "," : "",
				 (int)job->preload[i].len, job->preload[i].ptr);

		if (n < 0 || (size_t)n >= sizeof(p->preload) - off) {
			snprintf(err, errlen, "the preload list does not fit");
			return -E2BIG;
		}
		off += (size_t)n;
	}
	return 0;
}

int plan_warm(struct plan *p, char *err, size_t errlen)
{
	int sv[2], rc;

	p->timeout_ms = p->job->timeout_ms;
	if (!p->job->warm)
		return 0;
	if ((rc = join_preload(p, err, errlen)) < 0)
		return rc;
	/* Not there now: C fails at its own step (cwd, exec) and says so. */
	if (stat(p->cwd, &p->cwd_st) < 0)
		memset(&p->cwd_st, 0, sizeof(p->cwd_st));
	if (stat(p->python, &p->python_st) < 0)
		memset(&p->python_st, 0, sizeof(p->python_st));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		snprintf(err, errlen, "creating the code socket: %s", strerror(-rc));
		return rc;
	}
	p->code_tx = sv[0];
	p->code_rx = sv[1];
	return 0;
}

/* The working directory is the same directory (its files may change: C
 * holds the directory, not a copy); the interpreter the same file. */
static bool same_place(const struct plan *p)
{
	struct stat cwd, py;

	return stat(p->cwd, &cwd) == 0 && stat(p->python, &py) == 0 &&
	       cwd.st_dev == p->cwd_st.st_dev && cwd.st_ino == p->cwd_st.st_ino &&
	       py.st_dev == p->python_st.st_dev && py.st_ino == p->python_st.st_ino &&
	       py.st_size == p->python_st.st_size &&
	       py.st_mtim.tv_sec == p->python_st.st_mtim.tv_sec &&
	       py.st_mtim.tv_nsec == p->python_st.st_mtim.tv_nsec;
}

/* The secret set as it is now: the same places, files and mount table as
 * C masked (the key says all three), or else p takes the new set. */
static int same_secrets(struct plan *p, bool *same, char *err, size_t errlen)
{
	static struct plan now;
	int rc;

	now = *p;
	now.masks = NULL;
	now.n_masks = 0;
	now.kept_masks = -1;
	rc = plan_secrets(&now, err, errlen);
	*same = rc == 0 && now.n_masks == p->n_masks &&
		(!now.n_masks || !memcmp(now.masks_key, p->masks_key, sizeof(p->masks_key)));
	if (rc < 0 || *same) {
		plan_free_secrets(&now);
		return rc;
	}
	plan_free_secrets(p);
	p->masks = now.masks;
	p->n_masks = now.n_masks;
	memcpy(p->masks_key, now.masks_key, sizeof(p->masks_key));
	return 0;
}

int warm_still_fits(struct plan *p, pid_t child, bool *fits, char *err, size_t errlen)
{
	bool secrets_same = false;
	int rc = same_secrets(p, &secrets_same, err, errlen);

	if (rc < 0)
		return rc;
	*fits = secrets_same && same_place(p) && masks_hold_in(p, child);
	if (!*fits && p->kept_masks >= 0) {
		/* A cold child makes its own masks from the set found now. */
		close(p->kept_masks);
		p->kept_masks = -1;
	}
	if (!*fits)
		p->join_kept = false;
	return 0;
}

/* One byte with the memfd: python3's bootstrap (PYTHON_SNIPPET_MAIN)
 * takes it as its stdin and reads the code from it as a cold run does. */
int warm_hand_over(struct plan *p)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char byte = 'c';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	ssize_t n;
	int err;

	memset(ctl.buf, 0, sizeof(ctl.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &p->code_fd, sizeof(int));
	do
		n = sendmsg(p->code_tx, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	err = n < 0 ? errno : EIO;
	close(p->code_tx);
	p->code_tx = -1;
	if (n != 1)
		return -err; /* a cold child still needs the outputs */
	warm_drop_outputs(p);
	return 0;
}

/* A warm job's S keeps the output pipes past the fork, for a cold child
 * that `go` may still need; dropped once the code is handed over. */
void warm_keep_outputs(struct plan *p)
{
	if (p->code_tx < 0)
		return;
	p->out_keep[0] = fcntl(FD_STDOUT, F_DUPFD_CLOEXEC, 3);
	p->out_keep[1] = fcntl(FD_STDERR, F_DUPFD_CLOEXEC, 3);
}

/* After the fork of a cold child, or once the warm one has the code. */
void warm_drop_outputs(struct plan *p)
{
	if (p->code_tx >= 0)
		return; /* still waiting for go */
	for (int i = 0; i < 2; i++) {
		if (p->out_keep[i] >= 0)
			close(p->out_keep[i]);
		p->out_keep[i] = -1;
	}
}
