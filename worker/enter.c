/* SPDX-License-Identifier: MIT
 * A confined child: from fork to exec, one step after the other, each
 * failing closed.  The snippet child (C) execs python3 (host profiles) or
 * the container engine's CLI (profile "engine"); each of the engine's
 * other commands (worker/engine.c) comes through here too, in a child of
 * its own, and is confined exactly like C.
 *
 * Rules for this file:
 *  - Any failure goes through die_step(): it tells S which step and errno
 *    over the report channel and exits 127.  Nothing continues
 *    half-confined.
 *  - S built everything that allocates (env, paths); the seccomp program
 *    was built at build time, and C only writes its pid into it.  After
 *    RLIMIT_AS is set nothing here may allocate: no stdio, no strerror.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cap-ng.h>

#include "worker/landlock.h"
#include "worker/seccomp.h"
#include "worker/secrets.h"
#include "worker/worker.h"

/* C's end of the report channel; moves to fd 3 when the fds are closed. */
static int report_fd = -1;

/* strerrordesc_np, not strerror: it returns a constant and never
 * allocates, which matters once the address-space limit is in place. */
__attribute__((noreturn, format(printf, 3, 4))) static void
die_step(const char *step, int err, const char *fmt, ...)
{
	struct setup_report r;
	const char *desc = err ? strerrordesc_np(err) : NULL;
	size_t n;
	va_list ap;

	memset(&r, 0, sizeof(r));
	snprintf(r.step, sizeof(r.step), "%s", step);
	r.err = err;
	va_start(ap, fmt);
	vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
	va_end(ap);
	n = strlen(r.msg);
	if (desc && n < sizeof(r.msg))
		snprintf(r.msg + n, sizeof(r.msg) - n, ": %s", desc);
	if (write(report_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) {
		/* Nothing left to tell: S sees EOF and the exit status. */
	}
	_exit(WORKER_CHILD_DIED);
}

/* Every disposition back to the default and nothing blocked: an ignored
 * signal survives exec, and the broker may have been started with SIGINT
 * and SIGQUIT ignored (a shell's `&`), S ignores SIGPIPE.  A handler does
 * not survive exec, so only SIG_IGN matters; resetting all is simplest.
 * SIGKILL and SIGSTOP cannot be changed, and glibc keeps two real-time
 * signals for itself (EINVAL): both are skipped. */
static void reset_signals(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;

	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		die_step(step_name(STEP_SIGNALS), errno, "sigprocmask");
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (sigaction(sig, &dfl, NULL) < 0 && errno != EINVAL)
			die_step(step_name(STEP_SIGNALS), errno, "restoring signal %d", sig);
	}
}

static void new_session(void)
{
	if (setsid() < 0)
		die_step(step_name(STEP_SETSID), errno, "setsid");
}

static void tie_to_supervisor(const struct plan *p)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		die_step(step_name(STEP_PDEATHSIG), errno, "prctl(PR_SET_PDEATHSIG)");
	/* S may have died between fork and prctl; then nobody would. */
	if (getppid() != p->supervisor)
		die_step(step_name(STEP_PDEATHSIG), ESRCH, "the supervisor exited during setup");
}

/* The kept masks' namespace C is to join (fd 4, or 5 beside the receipt
 * pipe, once close_other_fds() has run, until the secrets step closes
 * it); -1: none. */
static int kept_fd = -1;

/* The namespace the masks live in, for S with the exec gate (worker.h,
 * CHILD_MSG_GATE); -1: none.  new_masks: made by this run, so S may hand
 * it to the broker for the user's next run. */
static int mounts_fd = -1;
static bool new_masks;

/* The egress proxy's listener in the run's own network namespace
 * (netns.c), for S; -1: none. */
static int egress_fd = -1;

/* The run has its own /dev/shm (private_shm): Landlock lets it write there. */
static bool own_shm;
/* Scratch is a mount of the run's own (private_shm). */
static bool own_scratch;

static void secrets_step(const struct plan *p)
{
	const char *what;
	int rc = mask_secrets(p, kept_fd, &what);

	if (kept_fd >= 0)
		close(kept_fd);
	if (rc < 0)
		die_step(step_name(STEP_SECRETS), -rc, "%s", what);
	/* Joined: S holds the kept namespace already (p->kept_masks). */
	if (rc == MASKS_NEW || rc == MASKS_PATCHED) {
		new_masks = rc == MASKS_NEW && p->landlock_abi > 0; /* main.c, prepare() */
		mounts_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
		if (mounts_fd < 0)
			die_step(step_name(STEP_SECRETS), errno, "opening /proc/self/ns/mnt");
	}
	/* After mounts_fd: the namespace S keeps for the next runs is the
	 * masks' one, without this run's /dev/shm. */
	rc = private_shm(p, (enum masks_made)rc, &what);
	if (rc < 0)
		die_step(step_name(STEP_SECRETS), -rc, "%s", what);
	own_shm = rc & OWN_SHM;
	own_scratch = rc & OWN_SCRATCH;
}

static void network_step(const struct plan *p)
{
	const char *what;
	int rc = private_network(p, &egress_fd, &what);
	char msg[2] = { CHILD_MSG_NET, CHILD_GATE_NET };
	ssize_t sent;

	if (rc < 0)
		die_step(step_name(STEP_NETWORK), -rc, "%s", what);
	/* With an exec gate the listener goes to S with it; without one
	 * (approved) it goes now, on its own. */
	if (egress_fd < 0 || seccomp_has_exec_gate(profile_name(p->profile)))
		return;
	sent = send_with_fds(report_fd, msg, sizeof(msg), &egress_fd, 1);
	if (sent != (ssize_t)sizeof(msg))
		die_step(step_name(STEP_NETWORK), sent < 0 ? (int)-sent : EIO,
			 "handing the egress proxy's listener to the supervisor");
	close(egress_fd);
	egress_fd = -1;
}

static void enter_cwd(const struct plan *p)
{
	struct stat st;

	if (chdir(p->cwd) < 0)
		die_step(step_name(STEP_CWD), errno, "cannot enter working directory %s", p->cwd);
	if (stat(".", &st) < 0)
		die_step(step_name(STEP_CWD), errno, "cannot stat working directory %s", p->cwd);
	if (!S_ISDIR(st.st_mode))
		die_step(step_name(STEP_CWD), ENOTDIR, "working directory %s", p->cwd);
}

/* An engine command's stdin and output: /dev/null and S's pipe instead of
 * the snippet's code and output streams.  dup2 leaves the copies
 * inheritable; the originals are CLOEXEC and go below. */
static void take_stdio(const struct sandbox_exec *x)
{
	for (int fd = FD_CODE; fd <= FD_STDERR; fd++)
		if (x->stdio[fd] >= 0 && dup2(x->stdio[fd], fd) < 0)
			die_step(step_name(STEP_FDS), errno, "moving fd %d to %d", x->stdio[fd],
				 fd);
}

static void close_other_fds(const struct plan *p, const struct sandbox_exec *x)
{
	unsigned int first_closed = FD_BROKER + 1;
	bool receipt = x->receipt_fd >= 0;

	/* fd 3 is the broker's socket: the snippet must never hold it.  The
	 * report channel takes its place (still CLOEXEC) and the rest goes,
	 * but for the receipt pipe's write end, which python3 keeps at
	 * PYTHON_RECEIPT_FD (4), and a kept namespace to join, which moves
	 * to the next fd.  The namespace first: it may sit at 4, the pipe
	 * never does (S made it above 15). */
	if (dup3(report_fd, FD_BROKER, O_CLOEXEC) < 0)
		die_step(step_name(STEP_FDS), errno, "moving the report channel to fd 3");
	report_fd = FD_BROKER;
	if (receipt)
		first_closed++;
	if (p->join_kept) {
		kept_fd = (int)first_closed++;
		if (p->kept_masks != kept_fd && dup3(p->kept_masks, kept_fd, O_CLOEXEC) < 0)
			die_step(step_name(STEP_FDS), errno,
				 "moving the kept masks' namespace to fd %d", kept_fd);
	}
	if (receipt && dup2(x->receipt_fd, PYTHON_RECEIPT_FD) < 0)
		die_step(step_name(STEP_FDS), errno, "moving the receipt pipe to fd %d",
			 PYTHON_RECEIPT_FD);
	if (close_range(first_closed, ~0U, 0) < 0)
		die_step(step_name(STEP_FDS), errno, "close_range");
}

/* Empties the bounding set; false when C may not (no CAP_SETPCAP: an
 * ordinary user, who cannot shrink it and has nothing in it to gain from,
 * since NO_NEW_PRIVS keeps file capabilities and setuid binaries from
 * adding any).  By hand rather than capng_apply(CAPNG_SELECT_BOUNDS),
 * which reads /proc/self/status three times to learn what the kernel's
 * own answers say here, on every run: EPERM at the first capability
 * without CAP_SETPCAP, EINVAL past the last one this kernel has. */
static bool drop_bounding_set(void)
{
	for (int cap = 0;; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EPERM && cap == 0)
			return false;
		if (errno == EINVAL && cap > CAP_SETPCAP)
			return true;
		die_step(step_name(STEP_CAPS), errno, "dropping capability %d from the bounding set",
			 cap);
	}
}

/* Returns true when the bounding set was emptied too (root, or C in the
 * secrets step's user namespace, where it holds every capability).  What
 * the sets hold afterwards is read back once, with the other fields, just
 * before exec (verify_confinement). */
static bool drop_capabilities(void)
{
	bool root = drop_bounding_set();

	/* Securebits while CAP_SETPCAP is still effective: root must not
	 * regain capabilities by exec or setuid. */
	if (root && capng_lock() < 0)
		die_step(step_name(STEP_CAPS), errno, "locking securebits");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		die_step(step_name(STEP_CAPS), errno, "clearing ambient capabilities");
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_apply(CAPNG_SELECT_CAPS) < 0)
		die_step(step_name(STEP_CAPS), errno, "dropping capabilities");
	return root;
}

static void set_no_new_privs(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die_step(step_name(STEP_NO_NEW_PRIVS), errno, "prctl(PR_SET_NO_NEW_PRIVS)");
}

static void landlock_step(const struct plan *p)
{
	const char *what;
	int rc = apply_landlock(p, own_shm, &what);

	if (rc < 0)
		die_step(step_name(STEP_LANDLOCK), -rc, "Landlock ABI %u: %s", p->landlock_abi,
			 what);
}

/* The program was built at build time for each profile and Landlock ABI
 * (worker/seccomp.h): take the one for the ABI now in force (the rules
 * Landlock holds, seccomp need not) and write our pid into it (signals,
 * below ABI 6).  No allocation. */
static void pick_seccomp(const struct plan *p, struct sock_fprog *prog)
{
	struct seccomp_opts o = { profile_name(p->profile), p->landlock_abi, getpid() };
	char err[160];
	int rc = seccomp_program_for(&o, prog, err, sizeof(err));

	if (rc < 0)
		die_step(step_name(STEP_SECCOMP_BUILD), -rc, "%s", err);
}

static rlim_t clamp(uint64_t v)
{
	return v >= RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)v;
}

/* Capabilities are gone by now, so a hard limit can only go down: never
 * ask for more than the current hard limit (that would fail with EPERM
 * and a lower limit is what we want anyway). */
static void set_limit(int res, const char *name, rlim_t soft, rlim_t hard)
{
	struct rlimit cur, want;

	if (getrlimit(res, &cur) < 0)
		die_step(step_name(STEP_RLIMITS), errno, "getrlimit %s", name);
	want.rlim_max = hard < cur.rlim_max ? hard : cur.rlim_max;
	want.rlim_cur = soft < want.rlim_max ? soft : want.rlim_max;
	if (setrlimit(res, &want) < 0)
		die_step(step_name(STEP_RLIMITS), errno, "setrlimit %s %llu", name,
			 (unsigned long long)want.rlim_cur);
}

static void set_rlimits(const struct plan *p)
{
	const struct job_limits *l = &p->job->lim;
	/* The engine CLI is a Go program: it reserves far more address
	 * space than it uses, and its threads count against the user's
	 * processes.  Its snippet's limits are the container's. */
	bool engine = p->profile == PROFILE_ENGINE;

	/* CPU: SIGXCPU at the soft limit names the cause (S reports "cpu");
	 * the hard limit a second later is SIGKILL for a snippet that
	 * catches SIGXCPU. */
	if (l->cpu_s)
		set_limit(RLIMIT_CPU, "RLIMIT_CPU", clamp(l->cpu_s),
			  l->cpu_s < RLIM_INFINITY - 1 ? clamp(l->cpu_s + 1) : RLIM_INFINITY);
	if (l->as_bytes && !engine)
		set_limit(RLIMIT_AS, "RLIMIT_AS", clamp(l->as_bytes), clamp(l->as_bytes));
	if (l->nproc && !engine)
		set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", clamp(l->nproc), clamp(l->nproc));
	if (l->fsize_bytes)
		set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", clamp(l->fsize_bytes),
			  clamp(l->fsize_bytes));
	if (l->nofile)
		set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", clamp(l->nofile), clamp(l->nofile));
	set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0);
}

/* A place of the run's own, as S is to know it (CHILD_GATE_SCRATCH,
 * CHILD_GATE_SHM): a descriptor of its mount's root; -1 when the run has
 * no such mount. */
static int own_place(const char *path, bool own)
{
	int fd;

	if (!own)
		return -1;
	fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		die_step(step_name(STEP_EXEC_GATE), errno, "opening %s for the supervisor", path);
	return fd;
}

/* Hands the exec gate's listener to S, which must answer our own exec
 * next, with the masks' mount namespace when there is one, and the
 * mounts of scratch and /dev/shm when they are the run's own (S lets
 * modes and times change beneath them only).  Two bytes of data: the tag
 * and which descriptors follow the listener, in that order. */
static void hand_over_gate(const struct plan *p, int listener)
{
	int fds[CHILD_GATE_FDS_MAX] = { listener };
	int scratch = own_place(p->scratch, own_scratch), shm = own_place(SHM_DIR, own_shm);
	char msg[2] = { new_masks ? CHILD_MSG_GATE_NEW_MASKS : CHILD_MSG_GATE, 0 };
	size_t n = 1;
	ssize_t sent;

	if (mounts_fd >= 0) {
		fds[n++] = mounts_fd;
		msg[1] |= CHILD_GATE_MOUNTS;
	}
	if (scratch >= 0) {
		fds[n++] = scratch;
		msg[1] |= CHILD_GATE_SCRATCH;
	}
	if (shm >= 0) {
		fds[n++] = shm;
		msg[1] |= CHILD_GATE_SHM;
	}
	if (egress_fd >= 0) {
		fds[n++] = egress_fd;
		msg[1] |= CHILD_GATE_NET;
	}
	sent = send_with_fds(report_fd, msg, sizeof(msg), fds, n);
	if (sent != (ssize_t)sizeof(msg))
		die_step(step_name(STEP_EXEC_GATE), sent < 0 ? (int)-sent : EIO,
			 "handing the exec gate to the supervisor");
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	mounts_fd = -1;
	egress_fd = -1;
}

static void load_seccomp(const struct plan *p, struct sock_fprog *prog)
{
	bool gate = seccomp_has_exec_gate(profile_name(p->profile));
	int rc = seccomp_load_prog(prog, gate);

	if (rc < 0)
		die_step(step_name(STEP_SECCOMP), -rc, "loading the seccomp filter%s",
			 gate ? " with its exec gate (needs Linux 5.5)" : "");
	if (gate)
		hand_over_gate(p, rc);
}

/* Returns the value after "key:" and its blanks, or NULL. */
static const char *status_field(const char *buf, const char *key)
{
	size_t n = strlen(key);

	for (const char *l = buf; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, key, n) || l[n] != ':')
			continue;
		l += n + 1;
		while (*l == ' ' || *l == '\t')
			l++;
		return l;
	}
	return NULL;
}

static void expect_field(const char *buf, const char *key, const char *want)
{
	const char *v = status_field(buf, key);
	size_t n = strlen(want);

	if (!v || strncmp(v, want, n) || (v[n] != '\n' && v[n] != '\0'))
		die_step(step_name(STEP_VERIFY), EPERM, "/proc/self/status: %s is not %s", key,
			 want);
}

static void read_status(char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;
	int fd;

	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die_step(step_name(STEP_VERIFY), errno, "cannot open /proc/self/status");
	while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_step(step_name(STEP_VERIFY), errno, "cannot read /proc/self/status");
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
}

/* Trust, but read back: refuse to run unless the kernel agrees with what
 * the steps above asked for (firejail once ran on after a failed load). */
static void verify_confinement(bool bounding_dropped)
{
	static const char zero[] = "0000000000000000";
	char buf[8192];

	read_status(buf, sizeof(buf));
	expect_field(buf, "NoNewPrivs", "1");
	expect_field(buf, "Seccomp", "2");
	expect_field(buf, "CapInh", zero);
	expect_field(buf, "CapPrm", zero);
	expect_field(buf, "CapEff", zero);
	expect_field(buf, "CapAmb", zero);
	if (bounding_dropped)
		expect_field(buf, "CapBnd", zero);
}

static void exec_program(const struct plan *p, const struct sandbox_exec *x)
{
	/* Unattended, this is the exec the gate lets through. */
	execve(x->path, x->argv, x->envp);
	if (errno == EOPNOTSUPP && seccomp_has_exec_gate(profile_name(p->profile)))
		die_step(step_name(STEP_EXEC_GATE), errno,
			 "the exec gate needs Linux 5.5 "
			 "(SECCOMP_USER_NOTIF_FLAG_CONTINUE)");
	die_step(step_name(STEP_EXEC), errno, "cannot execute %s", x->path);
}

void enter_sandbox(const struct plan *p, const struct sandbox_exec *x)
{
	struct sock_fprog prog;
	bool bounding_dropped;

	report_fd = x->report_fd;
	/* S blocks SIGCHLD (for its signalfd) and ignores SIGPIPE, and the
	 * broker may have inherited SIGINT and SIGQUIT ignored: all would
	 * survive exec and surprise Python and its subprocesses. */
	reset_signals();
	/* Own session and process group, no controlling terminal: S kills
	 * the snippet by group, and no TIOCSTI can reach a terminal. */
	new_session();
	/* If S dies, so does C: never a snippet nobody supervises. */
	tie_to_supervisor(p);
	/* Only the code memfd, stdout, stderr and the report channel
	 * survive: no broker socket, no fd inherited by accident.  An engine
	 * command swaps in /dev/null and S's pipe for the first three.
	 * Before the secrets step, which makes C attachable for a moment. */
	take_stdio(x);
	close_other_fds(p, x);
	/* Unattended: a user and mount namespace with the secret set
	 * masked.  The worker already runs as the snippet's user (the
	 * broker's fork child switched before exec), so the namespace
	 * belongs to that user; before cwd (below); before the capabilities
	 * go (the mounts need CAP_SYS_ADMIN in the new namespace), before
	 * NNP, Landlock (which refuses mounts to a restricted process) and
	 * seccomp (which denies mount). */
	secrets_step(p);
	/* Unattended (approved too with [egress] approved = proxy): a
	 * network namespace with only loopback and the egress proxy's
	 * listener.  In the user namespace the secrets step entered, or an
	 * approved run's own (CAP_NET_ADMIN there brings loopback up), before
	 * the capabilities go, and before seccomp, which denies unshare and
	 * listen. */
	network_step(p);
	/* Before NNP.  After the secrets step C holds every capability of
	 * its own user namespace: all of them go, the bounding set too. */
	bounding_dropped = drop_capabilities();
	/* As the snippet's user with no capability left (the secrets step
	 * gave C all of its own namespace's), so that permission on cwd is
	 * exactly theirs; after the masks, so that a working directory
	 * inside a secret resolves to its mask and is refused. */
	enter_cwd(p);
	/* No exec may add privilege from here on (setuid, file caps); also
	 * what lets an unprivileged process load seccomp and Landlock. */
	set_no_new_privs();
	/* Unattended and engine: the file-system, TCP-bind and IPC-scope
	 * rules.  After NNP, which lets an unprivileged process restrict
	 * itself; before seccomp, which does not allow the landlock_* calls. */
	landlock_step(p);
	/* Knows which rules Landlock now holds. */
	pick_seccomp(p, &prog);
	/* Nothing in C allocates from here on: RLIMIT_AS may be tight. */
	set_rlimits(p);
	/* Last: the filter cuts off calls the steps above may use
	 * (landlock_*, and unattended much more); after it come only
	 * handing the exec gate to S, open/read of /proc/self/status and
	 * execve, which the gate lets through once. */
	load_seccomp(p, &prog);
	verify_confinement(bounding_dropped);
	exec_program(p, x);
	__builtin_unreachable();
}
