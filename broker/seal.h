/* SPDX-License-Identifier: MIT
 * Forward-secure sealing of the audit trail, after systemd-journald's FSS:
 * each row carries an HMAC-SHA256 under a key that evolves one way,
 *
 *   key[n+1] = HKDF-Expand-SHA256(PRK = key[n], info = "kotoba-audit-evolve-v1", L = 32)
 *            = HMAC-SHA256(key[n], "kotoba-audit-evolve-v1" 0x01)
 *   seal[n]  = HMAC-SHA256(key[n], "kotoba-audit-seal-v1" 0x00 || be64(n) || row hash (64 hex))
 *
 * The administrator holds key[0] (the verification key); the broker keeps
 * only the current key[n] in <state_dir>/audit-seal.key (mode 0600),
 * rewritten atomically each time it evolves, so whoever takes the service
 * user later holds no key that seals an earlier row.  Nettle does the
 * cryptography (HMAC, HKDF); AUDIT.md gives the same steps with openssl.
 */
#ifndef KOTOBA_SEAL_H
#define KOTOBA_SEAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEAL_KEY_LEN 32
#define SEAL_KEY_FILE "audit-seal.key"

struct seal_key {
	uint64_t index;
	uint8_t key[SEAL_KEY_LEN];
};

/* Reads <dir>/audit-seal.key.  0, -ENOENT when there is none (sealing was
 * never set up), or another negative errno with a sentence in err
 * (malformed, a symbolic link, not ours, not mode 0600). */
int seal_key_load(const char *dir, struct seal_key *k, char *err, size_t errlen);
/* Replaces <dir>/audit-seal.key with k, durably (temporary file, fsync,
 * rename, fsync of the directory); the old key's blocks are the file
 * system's, as journald's are. */
int seal_key_save(const char *dir, const struct seal_key *k, char *err, size_t errlen);
/* key[0] from getrandom(2); index 0. */
int seal_key_new(struct seal_key *k);
/* k becomes key[index + 1]; the old key is erased. */
void seal_key_evolve(struct seal_key *k);
/* Erases the key from memory (explicit_bzero). */
void seal_key_wipe(struct seal_key *k);
/* The seal of a row: 64 lowercase hex digits and a NUL. */
void seal_mac(const struct seal_key *k, const char hash_hex[64], char out[65]);
/* 64 hex digits (either case) into a key with the given index. */
int seal_key_parse(const char *hex, uint64_t index, struct seal_key *k);
void seal_key_hex(const struct seal_key *k, char out[2 * SEAL_KEY_LEN + 1]);
#endif
