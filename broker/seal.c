/* SPDX-License-Identifier: MIT
 * The audit trail's sealing key: derivation (Nettle HMAC and HKDF) and the
 * key file, one line "kotoba-audit-seal-v1 <index> <64 hex digits>\n".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/hkdf.h>
#include <nettle/hmac.h>

#include "broker/seal.h"

#define FILE_TAG "kotoba-audit-seal-v1"
#define EVOLVE_INFO "kotoba-audit-evolve-v1"
#define SEAL_DOMAIN "kotoba-audit-seal-v1"

static const char digits[] = "0123456789abcdef";

void seal_key_wipe(struct seal_key *k)
{
	explicit_bzero(k, sizeof(*k));
}

void seal_key_evolve(struct seal_key *k)
{
	struct hmac_sha256_ctx ctx;
	uint8_t next[SEAL_KEY_LEN];

	hmac_sha256_set_key(&ctx, SEAL_KEY_LEN, k->key);
	hkdf_expand(&ctx, (nettle_hash_update_func *)hmac_sha256_update,
		    (nettle_hash_digest_func *)hmac_sha256_digest, SHA256_DIGEST_SIZE,
		    sizeof(EVOLVE_INFO) - 1, (const uint8_t *)EVOLVE_INFO, SEAL_KEY_LEN, next);
	memcpy(k->key, next, SEAL_KEY_LEN);
	k->index++;
	explicit_bzero(next, sizeof(next));
	explicit_bzero(&ctx, sizeof(ctx));
}

static void be64(uint64_t v, uint8_t b[8])
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

void seal_mac(const struct seal_key *k, const char hash_hex[64], char out[65])
{
	struct hmac_sha256_ctx ctx;
	uint8_t md[SHA256_DIGEST_SIZE], n[8];

	be64(k->index, n);
	hmac_sha256_set_key(&ctx, SEAL_KEY_LEN, k->key);
	/* the domain with its NUL: sizeof counts it */
	hmac_sha256_update(&ctx, sizeof(SEAL_DOMAIN), (const uint8_t *)SEAL_DOMAIN);
	hmac_sha256_update(&ctx, sizeof(n), n);
	hmac_sha256_update(&ctx, 64, (const uint8_t *)hash_hex);
	hmac_sha256_digest(&ctx, sizeof(md), md);
	explicit_bzero(&ctx, sizeof(ctx));
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[64] = '\0';
}

int seal_key_new(struct seal_key *k)
{
	ssize_t n = getrandom(k->key, SEAL_KEY_LEN, 0);

	k->index = 0;
	if (n != SEAL_KEY_LEN) {
		seal_key_wipe(k);
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int seal_key_parse(const char *hex, uint64_t index, struct seal_key *k)
{
	k->index = index;
	for (int i = 0; i < SEAL_KEY_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			seal_key_wipe(k);
			return -EINVAL;
		}
		k->key[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[2 * SEAL_KEY_LEN] != '\0' && hex[2 * SEAL_KEY_LEN] != '\n') {
		seal_key_wipe(k);
		return -EINVAL;
	}
	return 0;
}

void seal_key_hex(const struct seal_key *k, char out[2 * SEAL_KEY_LEN + 1])
{
	for (int i = 0; i < SEAL_KEY_LEN; i++) {
		out[2 * i] = digits[k->key[i] >> 4];
		out[2 * i + 1] = digits[k->key[i] & 15];
	}
	out[2 * SEAL_KEY_LEN] = '\0';
}

/* ---- the key file ------------------------------------------------------- */

static int key_path(const char *dir, const char *suffix, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s%s", dir, SEAL_KEY_FILE, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int fail(char *err, size_t errlen, int rc, const char *what, const char *path)
{
	snprintf(err, errlen, "%s %s: %s", what, path, strerror(-rc));
	return rc;
}

/* Our own regular file, 0600: anything else was put there by someone else. */
static int check_file(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return fail(err, errlen, -errno, "cannot stat the sealing key", path);
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600) {
		snprintf(err, errlen, "the sealing key %s must be a regular file of uid %u with mode "
			 "0600", path, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

static int parse_line(char *buf, struct seal_key *k)
{
	char *p = buf, *end;
	uint64_t index;

	if (strncmp(p, FILE_TAG " ", sizeof(FILE_TAG)))
		return -EINVAL;
	p += sizeof(FILE_TAG);
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	index = strtoull(p, &end, 10);
	if (errno || *end != ' ' || strlen(end + 1) != 2 * SEAL_KEY_LEN + 1 ||
	    end[1 + 2 * SEAL_KEY_LEN] != '\n')
		return -EINVAL;
	return seal_key_parse(end + 1, index, k);
}

int seal_key_load(const char *dir, struct seal_key *k, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[160];
	ssize_t n;
	int fd, rc;

	rc = key_path(dir, "", path, sizeof(path));
	if (rc)
		return fail(err, errlen, rc, "cannot name the sealing key in", dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		return fail(err, errlen, -errno, "cannot open the sealing key", path);
	}
	rc = check_file(fd, path, err, errlen);
	n = rc ? 0 : read(fd, buf, sizeof(buf) - 1);
	if (!rc && n < 0)
		rc = fail(err, errlen, -errno, "cannot read the sealing key", path);
	close(fd);
	if (rc)
		return rc;
	buf[n] = '\0';
	rc = parse_line(buf, k);
	explicit_bzero(buf, sizeof(buf));
	if (rc)
		snprintf(err, errlen, "the sealing key %s is malformed", path);
	return rc;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_temp(const char *tmp, const struct seal_key *k)
{
	char hex[2 * SEAL_KEY_LEN + 1], line[160];
	int fd, n, rc;

	unlink(tmp); /* a leftover of a crash; O_EXCL below refuses anything else */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	seal_key_hex(k, hex);
	n = snprintf(line, sizeof(line), FILE_TAG " %" PRIu64 " %s\n", k->index, hex);
	rc = fchmod(fd, 0600) < 0 ? -errno : write_all(fd, line, (size_t)n);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	explicit_bzero(hex, sizeof(hex));
	explicit_bzero(line, sizeof(line));
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int seal_key_save(const char *dir, const struct seal_key *k, char *err, size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int rc = key_path(dir, "", path, sizeof(path));

	if (!rc)
		rc = key_path(dir, ".new", tmp, sizeof(tmp));
	if (rc)
		return fail(err, errlen, rc, "cannot name the sealing key in", dir);
	rc = write_temp(tmp, k);
	if (rc)
		return fail(err, errlen, rc, "cannot write the sealing key", tmp);
	if (rename(tmp, path) < 0) {
		rc = -errno;
		unlink(tmp);
		return fail(err, errlen, rc, "cannot replace the sealing key", path);
	}
	rc = sync_dir(dir);
	if (rc)
		return fail(err, errlen, rc, "cannot sync the directory of", path);
	return 0;
}
