/* SPDX-License-Identifier: MIT
 * The secret set (secrets.h).  The one list of built-in places is
 * below; SECURITY.md and kotoba-broker.conf(5) describe it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/secrets.h"

/* The spec's secret-read list as real places, then where the users of
 * agents keep credentials.  "~/" is the snippet user's home; an entry
 * without '/' is a file name looked for in the working directory and
 * each of its parents; a final '*' matches any rest of the name. */
static const char *const builtin[] = {
	"~/.ssh", "~/.aws", "~/.netrc", "~/.keystore_key", ".env", ".env.*",
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"~/.gnupg", "~/.config/gcloud", "~/.azure", "~/.kube", "~/.docker/config.json",
	"~/.git-credentials", "~/.pgpass", "~/.config/gh", "~/.pypirc", "~/.npmrc",
	"~/.password-store",
	/* A per-user broker's store, whichever broker runs the snippet:
	 * the audit trail holds every snippet, so it is a secret itself. */
	"~/.local/state/kotoba",
};

#define N_BUILTIN (sizeof(builtin) / sizeof(builtin[0]))
/* Room for the built-in set, this broker's state directory and the
 * configured entries. */
_Static_assert(N_BUILTIN + 1 + CONFIG_SECRET_PATHS_MAX <= PROTO_SECRETS_MAX,
	       "job.secrets cannot hold the whole set");

static char paths[PROTO_SECRETS_MAX][PATH_MAX];

static int add(struct msg_job *job, const struct identity *id, const char *s, size_t n,
	       char *err, size_t errlen)
{
	char *out = paths[job->n_secrets];
	int len;

	if (job->n_secrets == PROTO_SECRETS_MAX) {
		snprintf(err, errlen, "the secret set has more than %d entries", PROTO_SECRETS_MAX);
		return -E2BIG;
	}
	if (n >= 2 && s[0] == '~' && s[1] == '/') {
		/* No home, no secrets in it to mask (nobody's is /nonexistent). */
		if (id->home[0] != '/')
			return 0;
		len = snprintf(out, PATH_MAX, "%s%s%.*s", id->home,
			       id->home[strlen(id->home) - 1] == '/' ? "" : "/", (int)(n - 2),
			       s + 2);
	} else {
		len = snprintf(out, PATH_MAX, "%.*s", (int)n, s);
	}
	if (len < 0 || len >= PATH_MAX)
		return 0; /* no such path can be opened either */
	job->secrets[job->n_secrets++] = (struct pstr){ out, (size_t)len };
	return 0;
}

int secrets_fill_job(const struct broker *b, const struct identity *id, struct msg_job *job,
		     char *err, size_t errlen)
{
	const char *s = b->cfg.secret_paths, *w;
	size_t n;
	int rc = 0;

	job->has_secrets = false;
	job->n_secrets = 0;
	if (!b->cfg.secrets)
		return 0;
	/* A container sees the working directory only: its file names are
	 * what the worker turns into the container's masks. */
	if (job->has_engine && job->engine.n_steps > 0) {
		job->has_secrets = true;
		for (size_t i = 0; rc == 0 && i < N_BUILTIN; i++)
			if (!strchr(builtin[i], '/'))
				rc = add(job, id, builtin[i], strlen(builtin[i]), err, errlen);
		while (rc == 0 && (n = config_list_next(&s, &w)))
			if (!memchr(w, '/', n) && w[0] != '~')
				rc = add(job, id, w, n, err, errlen);
		return rc;
	}
	if (job->profile != PROFILE_UNATTENDED)
		return 0;
	job->has_secrets = true;
	for (size_t i = 0; rc == 0 && i < N_BUILTIN; i++)
		rc = add(job, id, builtin[i], strlen(builtin[i]), err, errlen);
	if (rc == 0 && b->state_dir[0] == '/')
		rc = add(job, id, b->state_dir, strlen(b->state_dir), err, errlen);
	while (rc == 0 && (n = config_list_next(&s, &w)))
		rc = add(job, id, w, n, err, errlen);
	return rc;
}

const char *secrets_state(const struct broker *b, enum proto_profile profile)
{
	if (profile == PROFILE_APPROVED)
		return "unmasked";
	return b->cfg.secrets ? "masked" : "off";
}

/* ---- The masks' namespaces kept between runs ----------------------------
 *
 * A worker that masked a user's set in a new user and mount namespace
 * sends the mount namespace back (PROTOCOL.md, "masks"); the user's next
 * unattended job carries it, and its worker joins it when the set, its
 * files and the mount table are what the namespace was made from (the
 * key), and reads each mask back there.  That spares a run the new
 * namespaces, their mounts and, at its end, their teardown.  The broker
 * only holds the descriptors: it is not the user and cannot join them.
 * Closing the last reference tears the namespace down on the broker's
 * loop (an RCU grace period, some 0.1-0.3 ms), so it happens only when a
 * user's set changes, one goes unused for KEPT_IDLE_MS, or the table is
 * full. */

#define KEPT_MAX 64
#define KEPT_IDLE_MS 60000

static struct kept {
	uid_t uid;
	int fd; /* -1: a free slot */
	uint8_t key[PROTO_MASKS_KEY_LEN];
	uint64_t used;
} kept[KEPT_MAX];
static bool kept_ready;

static void kept_init(void)
{
	if (kept_ready)
		return;
	for (size_t i = 0; i < KEPT_MAX; i++)
		kept[i].fd = -1;
	kept_ready = true;
}

static void kept_drop(struct kept *k)
{
	close(k->fd);
	k->fd = -1;
}

static struct kept *kept_of(uid_t uid)
{
	kept_init();
	for (size_t i = 0; i < KEPT_MAX; i++)
		if (kept[i].fd >= 0 && kept[i].uid == uid)
			return &kept[i];
	return NULL;
}

int secrets_kept(uid_t uid, uint64_t now, uint8_t key[PROTO_MASKS_KEY_LEN])
{
	struct kept *k = kept_of(uid);

	if (!k)
		return -1;
	k->used = now;
	memcpy(key, k->key, PROTO_MASKS_KEY_LEN);
	return k->fd;
}

/* The uid's own slot, else a free one, else the one unused longest. */
static struct kept *kept_slot(uid_t uid)
{
	struct kept *k = kept_of(uid), *oldest = &kept[0];

	for (size_t i = 0; !k && i < KEPT_MAX; i++) {
		if (kept[i].fd < 0)
			k = &kept[i];
		else if (kept[i].used < oldest->used)
			oldest = &kept[i];
	}
	return k ? k : oldest;
}

void secrets_keep(uid_t uid, int fd, const uint8_t key[PROTO_MASKS_KEY_LEN], uint64_t now)
{
	struct kept *k = kept_slot(uid);

	if (k->fd >= 0)
		kept_drop(k);
	*k = (struct kept){ .uid = uid, .fd = fd, .used = now };
	memcpy(k->key, key, PROTO_MASKS_KEY_LEN);
}

int secrets_kept_tick(uint64_t now)
{
	uint64_t next = UINT64_MAX;

	kept_init();
	for (size_t i = 0; i < KEPT_MAX; i++) {
		if (kept[i].fd < 0)
			continue;
		if (now - kept[i].used >= KEPT_IDLE_MS)
			kept_drop(&kept[i]);
		else if (kept[i].used + KEPT_IDLE_MS - now < next)
			next = kept[i].used + KEPT_IDLE_MS - now;
	}
	return next == UINT64_MAX ? -1 : (int)next;
}

/* ---- The mount table, for the workers ------------------------------------
 *
 * A worker needs the mount table to find a secret's other places (a second
 * mount of its device) and to key the kept namespaces.  Read by each
 * worker, it costs the worker its first /proc lookup as well as the
 * table's making (some 0.1 ms a run).  The broker is in the workers' mount
 * namespace (its fork children start them), keeps the text, and reads it
 * again only when the kernel says it changed: POLLPRI on an open
 * mountinfo, asked with each job. */

static int table_fd = -1;
static char *table;
static size_t table_len;

static bool table_changed(void)
{
	struct pollfd p = { .fd = table_fd, .events = POLLPRI };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR));
}

/* The whole text again; false (and no table) when it cannot be read. */
static bool table_read(void)
{
	size_t cap = table ? table_len + 4096 : 16384, len = 0;
	ssize_t n = 1;
	char *grown;

	while (n > 0) {
		if (len == cap || !table) {
			cap = table ? cap * 2 : cap;
			if (!(grown = realloc(table, cap)))
				break;
			table = grown;
		}
		n = pread(table_fd, table + len, cap - len, (off_t)len);
		len += n > 0 ? (size_t)n : 0;
	}
	table_len = n == 0 ? len : 0;
	return table_len > 0;
}

static uint64_t table_generation;

struct pstr secrets_mount_table(void)
{
	if (table_fd < 0) {
		table_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
		if (table_fd < 0 || !table_read())
			return (struct pstr){ NULL, 0 };
	} else if (table_changed()) {
		table_generation++;
		if (!table_read())
			return (struct pstr){ NULL, 0 };
	}
	return (struct pstr){ table, table_len };
}

uint64_t secrets_mount_generation(void)
{
	struct pstr t = secrets_mount_table();

	/* Unreadable: a generation no spare was made under. */
	return t.len ? table_generation : ++table_generation;
}
