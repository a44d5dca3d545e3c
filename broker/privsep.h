/* SPDX-License-Identifier: MIT
 * Privilege separation.  Started as root, the broker prepares what needs
 * root (socket, state directory), then becomes its service user keeping
 * only the capabilities that start a worker as another user.  Each worker
 * is exec'd already as the peer's uid, gid and groups.
 */
#ifndef KOTOBA_PRIVSEP_H
#define KOTOBA_PRIVSEP_H
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/config.h"
#include "proto/proto.h"

/* Who a snippet runs as. */
struct identity {
	uid_t uid;
	gid_t gid;
	size_t n_groups;
	gid_t groups[PROTO_GROUPS_MAX];
	char name[64];
	char home[256];  /* for HOME; one lookup serves the identity and the env */
	char shell[128];
	bool switch_ids; /* false: run as the broker's own user */
};

/* True when the broker serves several users (it was started as root). */
bool privsep_system_mode(void);
/* As root: resolves the service user and socket group named in the config;
 * -1 with a sentence naming the fix. */
int privsep_resolve(const struct config *c, char *err, size_t errlen);
/* As root: creates or fixes the ownership of `dir` for the service user,
 * mode 0700, as systemd's StateDirectory= would. */
int privsep_own_dir(const char *dir, char *err, size_t errlen);
/* The service user's uid and gid, once resolved (system mode). */
void privsep_service_ids(uid_t *uid, gid_t *gid);
/* As root: gives the socket file to the service user and socket group. */
int privsep_own_socket(const char *path, unsigned mode, char *err, size_t errlen);
/* The capabilities the monitor keeps (broker/monitor/monitor.c): to start
 * each worker as its peer, and to kill a child of the broker that runs as
 * another user. */
#define PRIVSEP_MONITOR_CAPS \
	(UINT64_C(1) << CAP_SETUID | UINT64_C(1) << CAP_SETGID | UINT64_C(1) << CAP_KILL)
/* As root: becomes uid:gid keeping the capabilities of the mask `kept` (bit
 * n is capability n) in the effective and permitted sets; everything else
 * leaves every set, and the bounding set is emptied.  Read back. */
int privsep_become(uid_t uid, gid_t gid, uint64_t kept, char *err, size_t errlen);
/* privsep_become() as the service user: the broker keeps nothing. */
int privsep_drop(uint64_t kept, char *err, size_t errlen);
/* In the monitor, which is given them at its start: the service uid, and
 * the uid root's snippets run as (privsep_identity()). */
void privsep_monitor_ids(uid_t service, uid_t root_peer);
/* The uid root's snippets run as (system mode). */
uid_t privsep_root_peer_uid(void);
/* Whether uid is the service user of a system broker: its files are
 * every user's grants and the audit trail, so no client may be it. */
bool privsep_is_service_uid(uid_t uid);
/* May this peer use the broker at all? */
bool privsep_peer_allowed(const struct config *c, uid_t uid, gid_t gid, char *why, size_t len);
/* The identity a peer's snippets take: the peer's own, or root_user's
 * for root; never root, never the service user. */
int privsep_identity(uid_t peer, struct identity *id, char *err, size_t errlen);
/* The three calls below run in the broker's fork child between fork and
 * exec of a worker for another user (run.c), in this order.  The broker
 * has a single thread, so the child may allocate (libcap-ng reads
 * /proc/self/status with stdio). */
/* Groups, then gid, then uid, each set in full (real, effective, saved);
 * 0, or -errno with the failing call in *what. */
int privsep_take_ids(const struct identity *id, const char **what);
/* Reads the uids, gids and groups back: true when all are id's. */
bool privsep_ids_are(const struct identity *id);
/* Clears the effective, permitted, inheritable and ambient sets and reads
 * them back; 0, or -errno with a sentence in err. */
int privsep_drop_all_caps(char *err, size_t errlen);
#endif
