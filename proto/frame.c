/* SPDX-License-Identifier: MIT
 * Framing: a 4-byte big-endian payload length, then the payload (one
 * msgpack map).  The length is checked against the limit before any
 * payload memory is allocated, as OpenSSH's monitor does.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/proto.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void frame_reader_init(struct frame_reader *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void frame_reader_free(struct frame_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Drops the frame handed out by the previous frame_reader_next(). */
static void drop_used(struct frame_reader *r)
{
	if (!r->used)
		return;
	memmove(r->buf, r->buf + r->used, r->len - r->used);
	r->len -= r->used;
	r->used = 0;
}

/* Grows the buffer to hold `need` bytes; `need` is already bounded by
 * max + header, so a peer cannot make us allocate more than that. */
static int reserve(struct frame_reader *r, size_t need)
{
	uint8_t *nb;
	size_t cap;

	if (need <= r->cap)
		return 0;
	cap = r->cap ? r->cap : 4096;
	while (cap < need)
		cap *= 2;
	nb = realloc(r->buf, cap);
	if (!nb)
		return -ENOMEM;
	r->buf = nb;
	r->cap = cap;
	return 0;
}

/* How many bytes the reader wants in total before it can return a frame. */
static size_t wanted(const struct frame_reader *r)
{
	if (r->len < PROTO_HEADER_LEN)
		return PROTO_HEADER_LEN;
	return PROTO_HEADER_LEN + (size_t)be32(r->buf);
}

ssize_t frame_reader_fill(struct frame_reader *r, int fd)
{
	size_t want;
	ssize_t n;
	int rc;

	drop_used(r);
	want = wanted(r);
	if (r->len >= PROTO_HEADER_LEN && be32(r->buf) > r->max)
		return -EMSGSIZE;
	/* Read ahead up to 64 KiB past the current frame so that small frames
	 * arriving together cost one read, but never past the limit. */
	if (want < r->len + 65536)
		want = r->len + 65536;
	if (want > r->max + PROTO_HEADER_LEN)
		want = r->max + PROTO_HEADER_LEN;
	if (want <= r->len)
		want = r->len + PROTO_HEADER_LEN;
	rc = reserve(r, want);
	if (rc < 0)
		return rc;
	do
		n = read(fd, r->buf + r->len, want - r->len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	r->len += (size_t)n;
	return n;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *len)
{
	uint32_t n;

	drop_used(r);
	if (r->len < PROTO_HEADER_LEN)
		return 0;
	n = be32(r->buf);
	if (n > r->max)
		return -EMSGSIZE;
	if (r->len - PROTO_HEADER_LEN < n)
		return 0;
	*payload = r->buf + PROTO_HEADER_LEN;
	*len = n;
	r->used = PROTO_HEADER_LEN + n;
	return 1;
}

bool frame_reader_partial(const struct frame_reader *r)
{
	return r->len > r->used;
}

static ssize_t read_full(int fd, uint8_t *p, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int frame_parse_datagram(const uint8_t *buf, size_t n, size_t max, const uint8_t **payload,
			 size_t *len)
{
	/* Shorter than a header: be32() would read bytes never received. */
	if (n < PROTO_HEADER_LEN)
		return -EPROTO;
	if (n > max + PROTO_HEADER_LEN || be32(buf) > max)
		return -EMSGSIZE;
	if (be32(buf) != n - PROTO_HEADER_LEN)
		return -EPROTO;
	*payload = buf + PROTO_HEADER_LEN;
	*len = n - PROTO_HEADER_LEN;
	return 0;
}

/* On a SOCK_SEQPACKET socket each frame is one message: it is received
 * whole with recv(MSG_TRUNC) so a frame longer than promised is detected
 * rather than silently split. */
/* The descriptor that came with a datagram into *passed (-1: none), or
 * closed when the caller takes none; more than one, or one cut off, is
 * -EPROTO and none is kept. */
static int take_passed(struct msghdr *mh, int *passed)
{
	int rc = mh->msg_flags & MSG_CTRUNC ? -EPROTO : 0, fd;

	if (passed)
		*passed = -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; CMSG_LEN((i + 1) * sizeof(int)) <= cm->cmsg_len; i++) {
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (passed && *passed == -1 && rc == 0) {
				*passed = fd;
				continue;
			}
			close(fd);
			rc = -EPROTO;
		}
	}
	if (rc < 0 && passed && *passed >= 0) {
		close(*passed);
		*passed = -1;
	}
	return rc;
}

ssize_t frame_recv_fd(int sock, uint8_t *buf, size_t len, int flags, int *passed)
{
	/* Room for several: each the kernel installs is one we must close. */
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;

	*passed = -1;
	do
		n = recvmsg(sock, &mh, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (take_passed(&mh, passed) < 0)
		*passed = -EPROTO;
	return n;
}

static ssize_t read_seqpacket(int fd, size_t max, uint8_t **buf, int *passed)
{
	uint8_t *b = malloc(max + PROTO_HEADER_LEN);
	const uint8_t *payload;
	int got = -1, rc = 0;
	size_t len;
	ssize_t n;

	if (!b)
		return -ENOMEM;
	n = frame_recv_fd(fd, b, max + PROTO_HEADER_LEN, 0, &got);
	if (n <= 0) {
		free(b);
		return n;
	}
	if (got == -EPROTO)
		rc = -EPROTO;
	if (rc == 0)
		rc = frame_parse_datagram(b, (size_t)n, max, &payload, &len);
	if (rc == 0 && passed)
		*passed = got;
	else if (got >= 0)
		close(got);
	if (rc < 0) {
		free(b);
		return rc;
	}
	memmove(b, payload, len);
	*buf = b;
	return (ssize_t)len;
}

static ssize_t read_stream(int fd, size_t max, uint8_t **buf)
{
	uint8_t hdr[PROTO_HEADER_LEN];
	uint8_t *b;
	uint32_t n;
	ssize_t got;

	got = read_full(fd, hdr, sizeof(hdr));
	if (got <= 0)
		return got;
	if (got < (ssize_t)sizeof(hdr))
		return -EPROTO;
	n = be32(hdr);
	if (n > max)
		return -EMSGSIZE;
	b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	got = read_full(fd, b, n);
	if (got != (ssize_t)n) {
		free(b);
		return got < 0 ? got : -EPROTO;
	}
	*buf = b;
	return n;
}

ssize_t frame_read_blocking_fd(int fd, size_t max, uint8_t **buf, int *passed)
{
	int type = 0;
	socklen_t sl = sizeof(type);

	if (passed)
		*passed = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) == 0 && type == SOCK_SEQPACKET)
		return read_seqpacket(fd, max, buf, passed);
	return read_stream(fd, max, buf);
}

ssize_t frame_read_blocking(int fd, size_t max, uint8_t **buf)
{
	return frame_read_blocking_fd(fd, max, buf, NULL);
}

static int write_loop(int fd, const uint8_t *p, size_t len, bool sock)
{
	ssize_t n;

	while (len) {
		n = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	return write_loop(fd, buf, len, false);
}

int send_all(int fd, const void *buf, size_t len)
{
	return write_loop(fd, buf, len, true);
}

void frame_free(struct frame *f)
{
	free(f->data);
	f->data = NULL;
	f->len = 0;
}

ssize_t send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
	union {
		char buf[CMSG_SPACE(SEND_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t sent;

	if (n > SEND_FDS_MAX)
		return -EINVAL;
	if (n) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	sent = sendmsg(sock, &mh, MSG_NOSIGNAL);
	return sent < 0 ? -errno : sent;
}

int frame_send_fd(int sock, const struct frame *f, int fd)
{
	ssize_t sent = send_with_fds(sock, f->data, f->len, &fd, fd >= 0);

	return sent < 0 ? (int)sent : 0;
}
