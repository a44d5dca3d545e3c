/* SPDX-License-Identifier: MIT
 * kotoba-brokerd: the unprivileged broker.  It owns the socket, the gate,
 * the grants and the audit trail, and starts one kotoba-worker per snippet.
 * It runs in the foreground and logs to stderr, as a systemd service does.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "broker/auditlog.h"
#include "broker/broker.h"
#include "broker/secrets.h"
#include "broker/cgroup.h"
#include "broker/container.h"
#include "broker/gate.h"
#include "broker/listener.h"
#include "broker/confine.h"
#include "broker/egresslink.h"
#include "broker/log.h"
#include "broker/monlink.h"
#include "broker/privsep.h"
#include "proto/paths.h"
#include "proto/status.h"

#define SHUTDOWN_WAIT_MS 5000

extern char **environ;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kotoba-brokerd [--socket PATH] [--state-dir DIR] [--config FILE]\n"
		"                      [--sandbox local|docker|none] [--check-config] [--verbose]\n"
		"       kotoba-brokerd --audit-key-init [--state-dir DIR] [--config FILE]\n"
		"\n"
		"Runs the kotoba broker in the foreground, logging to stderr.\n"
		"  --socket PATH     listen here (default: $XDG_RUNTIME_DIR/kotoba/broker.sock,\n"
		"                    /run/kotoba/broker.sock as root)\n"
		"  --state-dir DIR   grants and audit trail (default: ~/.local/state/kotoba,\n"
		"                    /var/lib/kotoba as root)\n"
		"  --config FILE     INI configuration (default: /etc/kotoba/broker.conf as root,\n"
		"                    ~/.config/kotoba/broker.conf otherwise, when present)\n"
		"  --sandbox MODE    overrides the config file and KOTOBA_SANDBOX\n"
		"  --check-config    validate, print the effective configuration, exit\n"
		"  --verbose         log each connection\n"
		"  --audit-key-init  start sealing the audit trail and print its verification\n"
		"                    key, once (AUDIT.md); as root, or as the service user\n");
}

/* OpenSSH's sanitise_stdfd: a daemon started with 0-2 closed would
 * otherwise hand its first sockets out as someone's stdout. */
static void sanitise_stdfd(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	while (fd >= 0 && fd <= 2)
		fd = dup(fd);
	if (fd > 2)
		close(fd);
}

struct options {
	const char *config;
	bool check_config;
	/* One per option that sets a key: each is given at most once. */
	struct { const char *section, *key, *value; } set[3];
	bool audit_key_init;
	size_t n_set;
};

static struct options opts;

static const struct option longopts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "state-dir", required_argument, NULL, 'd' },
	{ "config", required_argument, NULL, 'c' },
	{ "sandbox", required_argument, NULL, 'm' },
	{ "check-config", no_argument, NULL, 'C' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "audit-key-init", no_argument, NULL, 'K' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Each option at most once, and never with an empty argument: which of
 * two --socket values counts, or what an empty --config means, should not
 * be left to guess.  Returns false after saying why. */
static bool first_and_filled(int c, unsigned *seen)
{
	for (unsigned i = 0; longopts[i].name; i++) {
		if (longopts[i].val != c)
			continue;
		if (*seen & 1u << i) {
			fprintf(stderr, "kotoba-brokerd: --%s given more than once\n",
				longopts[i].name);
			return false;
		}
		*seen |= 1u << i;
		if (longopts[i].has_arg && !*optarg) {
			fprintf(stderr, "kotoba-brokerd: --%s needs a non-empty argument\n",
				longopts[i].name);
			return false;
		}
	}
	return true;
}

static void set_key(struct options *o, const char *key, const char *value)
{
	o->set[o->n_set++] = (typeof(o->set[0])){ "broker", key, value };
}

static int parse_args(int argc, char **argv, struct options *o)
{
	unsigned seen = 0;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (!first_and_filled(c, &seen)) {
			usage(stderr);
			return -1;
		}
		switch (c) {
		case 's': set_key(o, "socket", optarg); break;
		case 'd': set_key(o, "state_dir", optarg); break;
		case 'm': set_key(o, "sandbox", optarg); break;
		case 'c': o->config = optarg; break;
		case 'C': o->check_config = true; break;
		case 'v': log_threshold = LOG_LVL_DEBUG; break;
		case 'K': o->audit_key_init = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kotoba-brokerd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return -1;
	}
	return 0;
}

static const char *default_config_path(char *buf, size_t len)
{
	const char *home = getenv("HOME");

	if (geteuid() == 0)
		snprintf(buf, len, "/etc/kotoba/broker.conf");
	else if (home && *home == '/')
		snprintf(buf, len, "%s/.config/kotoba/broker.conf", home);
	else
		return NULL;
	return access(buf, F_OK) == 0 ? buf : NULL;
}

/* Layers, lowest first: defaults, file, KOTOBA_SANDBOX, command line. */
static int build_config(struct config *c, const struct options *o, struct config_error *err)
{
	config_defaults(c);
	if (o->config && config_load(c, o->config, err) < 0)
		return -1;
	if (config_apply_env(c, (const char *const *)environ, err) < 0)
		return -1;
	for (size_t i = 0; i < o->n_set; i++)
		if (config_set(c, o->set[i].section, o->set[i].key, o->set[i].value, err) < 0)
			return -1;
	return config_validate(c, err);
}

static int load_config(struct broker *b, struct options *o)
{
	static char path[4096];
	struct config_error err = { 0 };

	/* Found once, before the switch to the service user, so a reload
	 * reads the same file. */
	if (!o->config)
		o->config = default_config_path(path, sizeof(path));

	if (build_config(&b->cfg, o, &err) == 0)
		return 0;
	fputs("kotoba-brokerd: ", stderr);
	config_error_print(stderr, &err);
	return -1;
}

/* SIGHUP: limits and policy change for the next snippet; what was bound
 * or switched at start (socket, users, directories, worker) stays, and
 * running snippets keep the limits they started with.  A bad file changes
 * nothing. */
static void reload_config(struct broker *b)
{
	struct config_error err = { 0 };
	struct config next;
	bool was_masking;

	sd_notify(0, "RELOADING=1");
	if (build_config(&next, &opts, &err) < 0) {
		char line[400];
		FILE *f = fmemopen(line, sizeof(line), "w");

		if (f) {
			config_error_print(f, &err);
			fclose(f);
		}
		log_err("reload failed, keeping the running configuration: %s",
			f ? line : err.message);
	} else {
		memcpy(next.socket_path, b->cfg.socket_path, sizeof(next.socket_path));
		memcpy(next.socket_group, b->cfg.socket_group, sizeof(next.socket_group));
		next.socket_mode = b->cfg.socket_mode;
		memcpy(next.state_dir, b->cfg.state_dir, sizeof(next.state_dir));
		memcpy(next.user, b->cfg.user, sizeof(next.user));
		memcpy(next.worker_path, b->cfg.worker_path, sizeof(next.worker_path));
		was_masking = b->cfg.secrets;
		b->cfg = next;
		audit_watch_secrets(was_masking, b->cfg.secrets);
		runs_stop_spares(b, "the configuration was reloaded");
		log_info("configuration reloaded: sandbox=%s", sandbox_mode_name(b->cfg.sandbox));
	}
	sd_notify(0, "READY=1");
}

static int default_state_dir(char *out, size_t len)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;

	if (geteuid() == 0)
		n = snprintf(out, len, "/var/lib/kotoba");
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/kotoba", xdg);
	else if (home && *home == '/')
		n = snprintf(out, len, "%s/.local/state/kotoba", home);
	else
		return -1;
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Like `mkdir -p`; the last component 0700: the store is the broker's. */
static int make_dirs(const char *dir)
{
	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* As root the directory is then handed to the service user, as systemd's
 * StateDirectory= would. */
static int prepare_state_dir(struct broker *b)
{
	char err[300];
	int rc;

	if (b->cfg.state_dir[0])
		snprintf(b->state_dir, sizeof(b->state_dir), "%s", b->cfg.state_dir);
	else if (default_state_dir(b->state_dir, sizeof(b->state_dir)) < 0) {
		log_err("no state directory: set HOME or pass --state-dir");
		return -1;
	}
	rc = make_dirs(b->state_dir);
	if (rc < 0) {
		log_err("cannot create the state directory %s: %s", b->state_dir, strerror(-rc));
		return -1;
	}
	if (privsep_system_mode() && privsep_own_dir(b->state_dir, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

/* A program of the project's, found from the broker's own path: beside it
 * in a build tree; PREFIX/libexec/kotoba when installed in PREFIX/sbin. */
static int beside_self(const char *name, char *out, size_t len)
{
	char self[4000]; /* leaves room for the suffixes below */
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0) {
		log_err("cannot find my own path to locate %s: %s", name, strerror(errno));
		return -1;
	}
	self[n] = '\0';
	dirname(self);
	snprintf(out, len, "%s/%s", self, name);
	if (access(out, X_OK) < 0)
		snprintf(out, len, "%s/../libexec/kotoba/%s", self, name);
	return 0;
}

static int find_worker(struct broker *b)
{
	if (b->cfg.worker_path[0])
		snprintf(b->worker_path, sizeof(b->worker_path), "%s", b->cfg.worker_path);
	else if (beside_self("kotoba-worker", b->worker_path, sizeof(b->worker_path)) < 0)
		return -1;
	if (access(b->worker_path, X_OK) < 0) {
		log_err("the worker %s is not executable: %s (set 'worker' in [broker])",
			b->worker_path, strerror(errno));
		return -1;
	}
	return 0;
}

static int check_dirs(struct broker *b)
{
	struct stat st;

	if (stat(b->cfg.scratch_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_err("scratch_dir %s is not a directory (set 'scratch_dir' in [python])",
			b->cfg.scratch_dir);
		return -1;
	}
	if (access(b->cfg.python, X_OK) < 0)
		log_warn("python %s is not executable: %s; every snippet will fail until it is "
			 "(set 'path' in [python])", b->cfg.python, strerror(errno));
	return 0;
}

static void on_signal(struct watch *w, uint32_t events)
{
	struct broker *b = w->ctx;
	struct signalfd_siginfo si;

	while (read(w->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			runs_reap(b);
			break;
		case SIGTERM:
		case SIGINT:
			if (!b->stopping)
				log_info("signal %d: stopping", (int)si.ssi_signo);
			b->stopping = true;
			break;
		case SIGHUP:
			reload_config(b);
			break;
		default:
			break;
		}
	}
}

static int setup_signals(struct broker *b)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	return loop_add(&b->sig, fd, EPOLLIN, on_signal, b);
}

static int open_socket(struct broker *b)
{
	char err[300] = "";
	bool activated;
	int fd;

	if (b->cfg.socket_path[0])
		snprintf(b->socket_path, sizeof(b->socket_path), "%s", b->cfg.socket_path);
	else if (default_socket_path(b->socket_path, sizeof(b->socket_path)) < 0) {
		log_err("the default socket path is too long; use --socket");
		return -1;
	}
	/* A per-user broker's socket is for its user alone. */
	fd = listener_open(b->socket_path, geteuid() == 0 ? b->cfg.socket_mode : 0600, &activated,
			   err, sizeof(err));
	if (fd < 0) {
		log_err("%s", err);
		return -1;
	}
	if (activated)
		b->socket_path[0] = '\0'; /* systemd owns the file */
	else if (privsep_system_mode() &&
		 privsep_own_socket(b->socket_path, b->cfg.socket_mode, err, sizeof(err)) < 0) {
		log_err("%s", err);
		close(fd);
		return -1;
	}
	log_info("listening on %s, sandbox=%s", activated ? "the socket systemd passed" :
		 b->socket_path, sandbox_mode_name(b->cfg.sandbox));
	/* Opened now, with the broker's other long-lived descriptors. */
	if (b->cfg.secrets && !secrets_mount_table().len)
		log_warn("cannot read /proc/self/mountinfo: each worker reads its own");
	if (!b->cfg.secrets)
		log_warn("[sandbox] secrets = off: unattended snippets can read the user's "
			 "secrets (~/.ssh, .env files, the broker's state)");
	return loop_add(&b->listen, fd, EPOLLIN, session_accept, b);
}

static int next_timeout(struct broker *b)
{
	uint64_t now = now_ms();
	int t[] = { runs_next_deadline(b, now), gate_next_deadline(b, now),
		    containers_tick(b, now), sessions_next_deadline(b, now),
		    audit_watch_next_deadline(now), secrets_kept_tick(now) };
	int next = -1;

	if (b->stopping)
		return 100;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i] >= 0 && (next < 0 || t[i] < next))
			next = t[i];
	return next;
}

/* Stop accepting, cancel every run (each worker then kills its snippet),
 * stop the spares and the warm containers, and wait for the workers; a
 * worker that does not go is killed. */
static void shut_down(struct broker *b)
{
	uint64_t deadline = now_ms() + SHUTDOWN_WAIT_MS;

	sd_notify(0, "STOPPING=1");
	loop_close(&b->listen);
	if (b->socket_path[0])
		unlink(b->socket_path);
	sessions_close_all(b);
	runs_stop_spares(b, "the broker stops");
	/* Busy containers go with their cancelled runs; these are idle. */
	containers_stop_all(b);
	while (b->nruns + b->nspares > 0 && now_ms() < deadline)
		loop_run_once(100);
	runs_kill(b);
	while (b->nruns + b->nspares > 0 && loop_run_once(100) == 0 && now_ms() < deadline + 1000)
		;
}

static int serve(struct broker *b)
{
	while (!b->stopping) {
		if (loop_run_once(next_timeout(b)) < 0)
			return -1;
		runs_tick(b, now_ms());
		gate_tick(b, now_ms());
		sessions_tick(b, now_ms());
		audit_watch_tick(now_ms());
	}
	shut_down(b);
	return 0;
}

/* As root, for the service user: each run's memory and process limits
 * then hold for all its processes together (broker/cgroup.c). */
static void setup_cgroups(void)
{
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;

	if (privsep_system_mode())
		privsep_service_ids(&uid, &gid);
	cgroup_setup(uid, gid, privsep_system_mode());
}

/* --audit-key-init: in the state directory, as the service user, as the
 * broker itself would write there; then it exits. */
static int key_init(struct broker *b)
{
	char err[400] = "";

	if (privsep_resolve(&b->cfg, err, sizeof(err)) < 0 || prepare_state_dir(b) < 0 ||
	    (privsep_system_mode() && privsep_drop(0, err, sizeof(err)) < 0)) {
		if (err[0])
			log_err("%s", err);
		return 1;
	}
	return audit_key_init(b->state_dir);
}

/* A spare made as a run ends, and a container stopped once idle, start
 * as their user after its connection closed: the monitor allows that this
 * long after the user's last connection. */
static unsigned long monitor_linger_ms(const struct broker *b)
{
	return b->cfg.sandbox == SANDBOX_DOCKER ? b->cfg.container_idle_ms + 60000 : 10000;
}

/* As root, before a byte is read: the monitor takes the listening socket
 * and the privilege; the broker hears of connections from it. */
static int start_monitor(struct broker *b)
{
	char err[400], path[4096];
	uid_t svc;
	gid_t svc_gid;

	privsep_service_ids(&svc, &svc_gid);
	/* Never from the configuration: the program that holds the privilege
	 * is the one installed with the broker. */
	if (beside_self("kotoba-monitor", path, sizeof(path)) < 0)
		return -1;
	if (monlink_start(path, b->worker_path, b->listen.fd, svc, svc_gid,
			  privsep_root_peer_uid(), monitor_linger_ms(b), err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	loop_close(&b->listen);
	return loop_add(&b->attach, monlink_attach_fd(), EPOLLIN, session_attach, b);
}

/* The egress proxy: the bundle's file while the broker may still be
 * root, the proxy as its own user after.  A bundle that
 * cannot be made (the socket's directory is not writable: an activated
 * socket elsewhere) leaves the broker without a proxy, which start_egress
 * says. */
static int open_egress_bundle(struct broker *b)
{
	char err[400], dir[sizeof(b->socket_path)];

	/* An activated socket's file is systemd's: the bundle goes where
	 * the configured or default socket would be (the unit's runtime
	 * directory). */
	if (b->socket_path[0])
		snprintf(dir, sizeof(dir), "%s", b->socket_path);
	else if (b->cfg.socket_path[0])
		snprintf(dir, sizeof(dir), "%s", b->cfg.socket_path);
	else if (default_socket_path(dir, sizeof(dir)) < 0)
		dir[0] = '\0';
	if (dir[0] != '/')
		log_err("the egress proxy's CA bundle has no directory (no socket path)");
	else if (egresslink_open_bundle(dirname(dir), err, sizeof(err)) < 0)
		log_err("%s", err);
	return 0;
}

/* The proxy's events as they come; its end closed: no more to watch. */
static void on_egress_events(struct watch *w, uint32_t events)
{
	if (egresslink_take_events(w->ctx, w->fd) < 0)
		loop_close(w);
}

static int start_egress(struct broker *b)
{
	char err[400], path[4096];

	if (!egresslink_bundle_open()) {
		log_err("the egress proxy needs its CA bundle beside the socket");
		return -1;
	}
	if (beside_self("kotoba-egress", path, sizeof(path)) < 0)
		return -1;
	if (egresslink_start(path, &b->cfg, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	egresslink_set_sink(run_take_egress_event);
	return loop_add(&b->egress, egresslink_events_fd(), EPOLLIN, on_egress_events, b);
}

/* A system broker gives up exec, the set*id calls, namespaces, network
 * sockets, and writing anywhere but its state directory, its cgroup tree
 * and (to remove it at stop) its socket's directory. */
static int confine(struct broker *b, char *err, size_t errlen)
{
	struct confine_dir d[2 + CGROUP_HIER_MAX];
	int cg[CGROUP_HIER_MAX];
	size_t n = 0, k = cgroup_tree_dirs(cg, CGROUP_HIER_MAX);
	unsigned abi = 0;
	int rc = 0;

	d[n++] = (struct confine_dir){ open(b->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC),
				       false };
	if (b->socket_path[0]) {
		char dir[sizeof(b->socket_path)];

		snprintf(dir, sizeof(dir), "%s", b->socket_path);
		d[n++] = (struct confine_dir){ open(dirname(dir), O_PATH | O_DIRECTORY | O_CLOEXEC),
					       true };
	}
	for (size_t i = 0; i < k; i++)
		d[n++] = (struct confine_dir){ cg[i], false };
	for (size_t i = 0; i < n; i++)
		if (d[i].fd < 0) {
			snprintf(err, errlen, "cannot confine the broker: cannot open a directory it "
				 "writes in: %s", strerror(errno));
			rc = -1;
		}
	if (rc == 0)
		rc = confine_broker(d, n, &abi, err, errlen);
	for (size_t i = 0; i < n; i++)
		if (d[i].fd >= 0)
			close(d[i].fd);
	if (rc == 0)
		log_info("confined: no capability, no_new_privs, seccomp, %s%u", abi ? "Landlock ABI "
			 : "no Landlock on this kernel, ABI ", abi);
	return rc;
}

/* Everything that needs root happens here, then root is given up for
 * good, before any client is heard. */
static int start_up(struct broker *b)
{
	char err[400] = "";

	if (loop_init() < 0 || setup_signals(b) < 0) {
		log_err("cannot set up the event loop: %s", strerror(errno));
		return -1;
	}
	/* Orphans of a worker that died come here to be killed (run.c). */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		log_warn("cannot become a child subreaper: %s", strerror(errno));
	if (find_worker(b) < 0 || check_dirs(b) < 0)
		return -1;
	if (privsep_resolve(&b->cfg, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	if (prepare_state_dir(b) < 0 || open_socket(b) < 0 || open_egress_bundle(b) < 0)
		return -1;
	setup_cgroups();
	if (privsep_system_mode() && (start_monitor(b) < 0 || privsep_drop(0, err, sizeof(err)) < 0)) {
		if (err[0])
			log_err("%s", err);
		return -1;
	}
	/* As the broker's own user, with nothing of root left to inherit.
	 * A proxy that cannot start (a process limit) leaves the broker
	 * serving: runs nobody read then have no network, and the log says
	 * why. */
	if (start_egress(b) < 0)
		log_err("no egress proxy: runs nobody read have no network");
	/* A snippet may run as the broker's own uid (a per-user broker): it
	 * must not read the broker's memory or environment through /proc.
	 * After the uid change, which resets the flag. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0) {
		log_err("cannot make the broker non-dumpable: %s", strerror(errno));
		return -1;
	}
	container_set_runner(run_start_engine);
	if (gate_init(b, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	if (audit_watch_start(b, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	audit_watch_secrets(true, b->cfg.secrets);
	if (b->cfg.sandbox == SANDBOX_DOCKER)
		container_check_image(b);
	/* Last, once every file it keeps is open; nothing has been read from
	 * a client yet. */
	if (privsep_system_mode() && (monlink_started() < 0 || confine(b, err, sizeof(err)) < 0)) {
		log_err("%s", err[0] ? err : "the monitor did not take the end of the start-up");
		return -1;
	}
	sd_notifyf(0, "READY=1\nSTATUS=serving, sandbox=%s", sandbox_mode_name(b->cfg.sandbox));
	return 0;
}

int main(int argc, char **argv)
{
	static struct broker b;

	sanitise_stdfd();
	TAILQ_INIT(&b.sessions);
	TAILQ_INIT(&b.runs);
	if (parse_args(argc, argv, &opts) < 0)
		return BROKERD_EXIT_USAGE;
	if (load_config(&b, &opts) < 0)
		return BROKERD_EXIT_CONFIG;
	if (opts.check_config) {
		config_print(stdout, &b.cfg);
		return BROKERD_EXIT_OK;
	}
	if (opts.audit_key_init)
		return key_init(&b);
	if (start_up(&b) < 0)
		return BROKERD_EXIT_START;
	serve(&b);
	audit_watch_stop();
	cgroup_teardown();
	gate_fini();
	loop_fini();
	log_info("stopped");
	return b.failed ? BROKERD_EXIT_START : BROKERD_EXIT_OK;
}
