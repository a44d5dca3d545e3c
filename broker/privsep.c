/* SPDX-License-Identifier: MIT */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/log.h"
#include "broker/privsep.h"

static bool system_mode;
static uid_t svc_uid, root_peer_uid;
static gid_t svc_gid, sock_gid;
static char svc_name[64];

bool privsep_system_mode(void)
{
	return system_mode;
}

/* A root client's snippets need an identity of their own: never root, and
 * never the service user, whose files are every user's grants. */
static int resolve_root_user(const struct config *c, char *err, size_t errlen)
{
	struct passwd *pw = getpwnam(c->root_user);

	if (!pw || pw->pw_uid == 0 || pw->pw_uid == svc_uid) {
		snprintf(err, errlen, "root_user '%s' in [broker] must be an existing user other "
			 "than root and the service user '%s'", c->root_user, svc_name);
		return -1;
	}
	root_peer_uid = pw->pw_uid;
	return 0;
}

int privsep_resolve(const struct config *c, char *err, size_t errlen)
{
	struct passwd *pw;
	struct group *gr;

	system_mode = geteuid() == 0;
	if (!system_mode)
		return 0;
	pw = getpwnam(c->user);
	if (!pw) {
		snprintf(err, errlen, "the service user '%s' does not exist; create it with "
			 "`useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "
			 "%s`, or set 'user' in [broker]", c->user, c->user);
		return -1;
	}
	if (pw->pw_uid == 0) {
		snprintf(err, errlen, "the service user '%s' is root; choose an unprivileged "
			 "user for 'user' in [broker]", c->user);
		return -1;
	}
	svc_uid = pw->pw_uid;
	svc_gid = pw->pw_gid;
	snprintf(svc_name, sizeof(svc_name), "%s", pw->pw_name);
	gr = getgrnam(c->socket_group);
	if (!gr) {
		snprintf(err, errlen, "the socket group '%s' does not exist; create it with "
			 "`groupadd --system %s`, or set 'socket_group' in [broker]",
			 c->socket_group, c->socket_group);
		return -1;
	}
	sock_gid = gr->gr_gid;
	return resolve_root_user(c, err, errlen);
}

void privsep_service_ids(uid_t *uid, gid_t *gid)
{
	*uid = svc_uid;
	*gid = svc_gid;
}

int privsep_own_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto fail;
	/* Already right: nothing to do, and nothing that needs the DAC
	 * capabilities a hardened unit does not grant. */
	if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == svc_uid &&
	    (st.st_mode & 07777) == 0700)
		return 0;
	/* O_NOFOLLOW|O_DIRECTORY: never chown what a symlink points at. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (fstat(fd, &st) < 0 || fchown(fd, svc_uid, svc_gid) < 0 || fchmod(fd, 0700) < 0) {
		close(fd);
		goto fail;
	}
	close(fd);
	return 0;
fail:
	snprintf(err, errlen, "cannot prepare the state directory %s for user %s: %s", dir,
		 svc_name, strerror(errno));
	return -1;
}

int privsep_own_socket(const char *path, unsigned mode, char *err, size_t errlen)
{
	if (lchown(path, svc_uid, sock_gid) < 0 || chmod(path, mode) < 0) {
		snprintf(err, errlen, "cannot give the socket %s to %s: %s", path, svc_name,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* The capability sets as the kernel holds them, one bit per capability. */
struct capsets {
	uint64_t eff, prm, inh, amb, bnd;
};

/* Reads every set back from the kernel (capget, CapBnd, PR_CAP_AMBIENT);
 * -1 when libcap-ng cannot. */
static int read_caps(struct capsets *s)
{
	static const struct {
		capng_type_t type;
		size_t off;
	} sets[] = {
		{ CAPNG_EFFECTIVE, offsetof(struct capsets, eff) },
		{ CAPNG_PERMITTED, offsetof(struct capsets, prm) },
		{ CAPNG_INHERITABLE, offsetof(struct capsets, inh) },
		{ CAPNG_AMBIENT, offsetof(struct capsets, amb) },
		{ CAPNG_BOUNDING_SET, offsetof(struct capsets, bnd) },
	};

	memset(s, 0, sizeof(*s));
	if (capng_get_caps_process() != 0)
		return -1;
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		for (unsigned int c = 0; c < 64; c++)
			if (capng_have_capability(sets[i].type, c))
				*(uint64_t *)((char *)s + sets[i].off) |= UINT64_C(1) << c;
	return 0;
}

/* The four sets of a process against what was asked for, and the
 * bounding set against empty when `bnd_empty`; false with the whole
 * read-back in err. */
static bool caps_match(const struct capsets *have, uint64_t kept, bool bnd_empty,
		       const char *when, char *err, size_t errlen)
{
	if (have->eff == kept && have->prm == kept && have->inh == 0 && have->amb == 0 &&
	    (!bnd_empty || have->bnd == 0))
		return true;
	snprintf(err, errlen, "%s: the kernel reports capabilities effective %#" PRIx64
		 ", permitted %#" PRIx64 ", inheritable %#" PRIx64 ", ambient %#" PRIx64
		 ", bounding %#" PRIx64 "; wanted %#" PRIx64 " in effective and permitted, "
		 "nothing else%s; refusing to go on", when, have->eff, have->prm, have->inh,
		 have->amb, have->bnd, kept, bnd_empty ? ", and an empty bounding set" : "");
	return false;
}

int privsep_become(uid_t uid, gid_t gid, uint64_t kept, char *err, size_t errlen)
{
	struct capsets have;
	bool bounding;
	char *caps;

	/* Clearing the bounding set needs CAP_SETPCAP; a unit whose own
	 * CapabilityBoundingSet= already leaves it out has done that part. */
	if (capng_get_caps_process() != 0) {
		snprintf(err, errlen, "cannot read its own capabilities (capget); refusing to "
			 "switch to uid %u blind", (unsigned)uid);
		return -1;
	}
	bounding = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);
	/* capng_change_id drops supplementary groups, sets the gid and uid
	 * with keep-caps, then applies exactly `kept`; with
	 * CAPNG_CLEAR_BOUNDING the bounding set is empty too. */
	capng_clear(CAPNG_SELECT_BOTH);
	for (unsigned int c = 0; c < 64; c++)
		if ((kept >> c & 1) &&
		    capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED, c) < 0) {
			snprintf(err, errlen, "cannot keep capability %u", c);
			return -1;
		}
	if (capng_change_id((int)uid, (int)gid,
			    CAPNG_DROP_SUPP_GRP | (bounding ? CAPNG_CLEAR_BOUNDING : 0)) != 0) {
		snprintf(err, errlen, "cannot switch to uid %u: %s", (unsigned)uid,
			 strerror(errno));
		return -1;
	}
	if (getuid() == 0 || geteuid() == 0 || getgid() == 0) {
		snprintf(err, errlen, "still root after switching to uid %u; refusing to go on",
			 (unsigned)uid);
		return -1;
	}
	/* Trust, but read back: the kernel's sets, not libcap-ng's copy. */
	if (read_caps(&have) < 0) {
		snprintf(err, errlen, "cannot read the capabilities back after switching to uid "
			 "%u; refusing to go on", (unsigned)uid);
		return -1;
	}
	if (!caps_match(&have, kept, bounding, "after switching user", err, errlen))
		return -1;
	caps = kept ? capng_print_caps_text(CAPNG_PRINT_BUFFER, CAPNG_EFFECTIVE) : NULL;
	log_info("running as uid %u, capabilities kept: %s", (unsigned)uid,
		 caps ? caps : "none");
	free(caps);
	return 0;
}

int privsep_drop(uint64_t kept, char *err, size_t errlen)
{
	return privsep_become(svc_uid, svc_gid, kept, err, errlen);
}

void privsep_monitor_ids(uid_t service, uid_t root_peer)
{
	system_mode = true;
	svc_uid = service;
	root_peer_uid = root_peer;
}

/* Splits a comma or space separated list and calls match on each word. */
static bool list_has(const char *list, bool (*match)(const char *w, const void *arg),
		     const void *arg)
{
	char buf[512], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *w = strtok_r(buf, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save))
		if (match(w, arg))
			return true;
	return false;
}

static bool word_is_uid(const char *w, const void *arg)
{
	uid_t uid = *(const uid_t *)arg;
	struct passwd *pw = getpwnam(w);
	char *end;
	unsigned long v = strtoul(w, &end, 10);

	return (pw && pw->pw_uid == uid) || (*end == '\0' && end != w && v == uid);
}

static bool word_is_gid(const char *w, const void *arg)
{
	gid_t gid = *(const gid_t *)arg;
	struct group *gr = getgrnam(w);
	char *end;
	unsigned long v = strtoul(w, &end, 10);

	return (gr && gr->gr_gid == gid) || (*end == '\0' && end != w && v == gid);
}

static bool in_allowed_groups(const struct config *c, uid_t uid, gid_t gid)
{
	struct passwd *pw = getpwuid(uid);
	gid_t groups[PROTO_GROUPS_MAX];
	int n = PROTO_GROUPS_MAX;

	if (list_has(c->allow_groups, word_is_gid, &gid))
		return true;
	if (!pw || getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (list_has(c->allow_groups, word_is_gid, &groups[i]))
			return true;
	return false;
}

bool privsep_is_service_uid(uid_t uid)
{
	return system_mode && uid == svc_uid;
}

bool privsep_peer_allowed(const struct config *c, uid_t uid, gid_t gid, char *why, size_t len)
{
	/* A per-user broker serves its own user only. */
	if (!system_mode) {
		if (uid == geteuid())
			return true;
		snprintf(why, len, "this broker serves uid %u only; you are uid %u",
			 (unsigned)geteuid(), (unsigned)uid);
		return false;
	}
	if (!c->allow_users[0] && !c->allow_groups[0])
		return true;
	if (c->allow_users[0] && list_has(c->allow_users, word_is_uid, &uid))
		return true;
	if (c->allow_groups[0] && in_allowed_groups(c, uid, gid))
		return true;
	snprintf(why, len, "uid %u is not in allow_users or allow_groups of this broker",
		 (unsigned)uid);
	return false;
}

int privsep_identity(uid_t peer, struct identity *id, char *err, size_t errlen)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int n = PROTO_GROUPS_MAX;

	memset(id, 0, sizeof(*id));
	id->switch_ids = system_mode;
	/* A root peer's snippets run as root_user: never as root. */
	if (system_mode && peer == 0)
		peer = root_peer_uid;
	if (getpwuid_r(peer, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
		snprintf(err, errlen, "uid %u has no entry in the user database", (unsigned)peer);
		return -1;
	}
	id->uid = pw.pw_uid;
	id->gid = pw.pw_gid;
	snprintf(id->name, sizeof(id->name), "%s", pw.pw_name);
	snprintf(id->home, sizeof(id->home), "%s", pw.pw_dir);
	snprintf(id->shell, sizeof(id->shell), "%s", pw.pw_shell);
	if (getgrouplist(pw.pw_name, pw.pw_gid, id->groups, &n) < 0) {
		snprintf(err, errlen, "user %s is in more than %d groups", pw.pw_name,
			 PROTO_GROUPS_MAX);
		return -1;
	}
	id->n_groups = (size_t)n;
	return 0;
}

int privsep_take_ids(const struct identity *id, const char **what)
{
	*what = "setgroups";
	if (setgroups(id->n_groups, id->groups) < 0)
		return -errno;
	*what = "setresgid";
	if (setresgid(id->gid, id->gid, id->gid) < 0)
		return -errno;
	*what = "setresuid";
	if (setresuid(id->uid, id->uid, id->uid) < 0)
		return -errno;
	return 0;
}

static bool has_group(const gid_t *list, int n, gid_t g)
{
	for (int i = 0; i < n; i++)
		if (list[i] == g)
			return true;
	return false;
}

bool privsep_ids_are(const struct identity *id)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg, now[PROTO_GROUPS_MAX];
	int n;

	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return false;
	if (ru != id->uid || eu != id->uid || su != id->uid || rg != id->gid ||
	    eg != id->gid || sg != id->gid)
		return false;
	n = getgroups(PROTO_GROUPS_MAX, now);
	if (n < 0 || (size_t)n != id->n_groups)
		return false;
	for (size_t i = 0; i < id->n_groups; i++)
		if (!has_group(now, n, id->groups[i]))
			return false;
	return true;
}

int privsep_drop_all_caps(char *err, size_t errlen)
{
	struct capsets have;

	/* The bounding set stays as privsep_drop left it: changing it needs
	 * CAP_SETPCAP, which the broker does not hold. */
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0 || capng_apply(CAPNG_SELECT_AMBIENT) != 0) {
		snprintf(err, errlen, "cannot clear the capability sets");
		return -EPERM;
	}
	if (read_caps(&have) < 0) {
		snprintf(err, errlen, "cannot read the capabilities back");
		return -EIO;
	}
	if (!caps_match(&have, 0, false, "after dropping them", err, errlen))
		return -EPERM;
	return 0;
}

uid_t privsep_root_peer_uid(void)
{
	return root_peer_uid;
}
