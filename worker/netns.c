/* SPDX-License-Identifier: MIT
 * The unattended run's network (and, with [egress] approved = proxy, an
 * approved run's): a namespace of its own with only
 * loopback, and in it one listening TCP socket, 127.0.0.1:EGRESS_PORT,
 * that C makes before the snippet starts and hands to S, S to the broker
 * with `ready`, and the broker to the egress proxy (broker/egress/).
 * HTTP_PROXY and HTTPS_PROXY point at it (plan.c).  Nothing else leaves
 * the namespace: raw TCP, UDP and DNS reach no interface but loopback,
 * and there nothing listens but the proxy's socket.
 *
 * Why the listening socket itself goes to the proxy, rather than S
 * accepting and splicing to the proxy's Unix socket: a socket keeps the
 * namespace it was made in, so the proxy accepts the run's connections
 * directly, every byte is copied once, S's loop stays as it is, and the
 * socket names its run (the broker tells the proxy which run it is when
 * it passes it): no process of the user can connect to the proxy and
 * claim to be a run.
 *
 * The namespace is made in the user namespace the secrets step entered
 * (secrets.c: C holds every capability there); an approved run enters
 * one of its own here, its uid and gid mapped to themselves.  Where
 * there is none (user namespaces turned off) unshare fails and the run
 * does not start: a run whose network is the proxy never gets the host's.
 */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/worker.h"

static const char *up_loopback(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	const char *what = NULL;

	if (s < 0)
		return "socket(AF_INET, SOCK_DGRAM) for the loopback's flags";
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		what = "ioctl(SIOCGIFFLAGS, lo)";
	else if (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		what = "ioctl(SIOCSIFFLAGS, lo up)";
	if (what) {
		int err = errno;

		close(s);
		errno = err;
	} else {
		close(s);
	}
	return what;
}

static int egress_listener(const char **what)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(EGRESS_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	*what = "socket(AF_INET, SOCK_STREAM) for the egress proxy";
	if (s < 0)
		return -errno;
	*what = "bind 127.0.0.1:" EGRESS_PORT_STR " for the egress proxy";
	if (bind(s, (const struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (*what = "listen on 127.0.0.1:" EGRESS_PORT_STR, listen(s, EGRESS_BACKLOG) < 0)) {
		int err = errno;

		close(s);
		return -err;
	}
	return s;
}

int private_network(const struct plan *p, int *listener, const char **what)
{
	const char *failed;
	int s;

	*listener = -1;
	*what = "";
	if (!plan_has_egress(p))
		return 0;
	/* Approved with `proxy`: no secrets step entered a user namespace,
	 * and C, the snippet's user without a capability, can make a
	 * network namespace only in one of its own. */
	if (p->profile == PROFILE_APPROVED && (s = own_user_namespace(what)) < 0)
		return s;
	*what = "unshare(CLONE_NEWNET) (a run nobody read reaches the network only through the "
		"egress proxy, in a network namespace of its own: this needs user namespaces)";
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	failed = up_loopback();
	if (failed) {
		*what = failed;
		return -errno;
	}
	s = egress_listener(what);
	if (s < 0)
		return s;
	*listener = s;
	return 0;
}
