/* SPDX-License-Identifier: MIT
 * HTTPS in the `get` mode: the proxy ends the run's TLS itself, with a
 * leaf certificate for the CONNECT's host signed by a CA made when the
 * proxy starts (its key is in this process's memory only, never in a
 * file, so never in a sandbox), checks each request inside as plain
 * HTTP's, and makes its own TLS connection upstream, verified against
 * the system's trust store (and [egress] upstream_ca_file) with SNI and
 * a hostname check.  The runs trust the CA through SSL_CERT_FILE and
 * REQUESTS_CA_BUNDLE: the bundle is the system's CAs and this one.
 * Everything X.509 and TLS is GnuTLS's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "broker/egress/egress.h"

#define SYSTEM_CA_FILE "/etc/ssl/certs/ca-certificates.crt"

static gnutls_x509_privkey_t ca_key, leaf_key;
static gnutls_x509_crt_t ca_crt;
static gnutls_certificate_credentials_t upstream_cred;
static unsigned char ca_key_id[64];
static size_t ca_key_id_len = sizeof(ca_key_id);

ssize_t egress_io_read(struct egress_io *io, void *buf, size_t len)
{
	ssize_t n;

	if (!io->tls) {
		do
			n = read(io->fd, buf, len);
		while (n < 0 && errno == EINTR);
		return n < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : n;
	}
	do
		n = gnutls_record_recv(io->tls, buf, len);
	while (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN);
	/* A peer that closes without close_notify ends the stream too. */
	if (n == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	return n < 0 ? -EIO : n;
}

int egress_io_write(struct egress_io *io, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = io->tls ? gnutls_record_send(io->tls, p, len) : write(io->fd, p, len);

		if (!io->tls && n < 0 && errno == EINTR)
			continue;
		if (io->tls && (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN))
			continue;
		if (n <= 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

bool egress_tls_pending(struct egress_io *io)
{
	return io->tls && gnutls_record_check_pending(io->tls) > 0;
}

void egress_tls_shut_wr(struct egress_io *io)
{
	if (io->tls)
		gnutls_bye(io->tls, GNUTLS_SHUT_WR);
}

void egress_tls_close(struct egress_io *io)
{
	if (!io->tls)
		return;
	gnutls_bye(io->tls, GNUTLS_SHUT_WR);
	gnutls_deinit(io->tls);
	io->tls = NULL;
}

static int new_key(gnutls_x509_privkey_t *key)
{
	int rc = gnutls_x509_privkey_init(key);

	return rc < 0 ? rc
		      : gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
						     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
}

static int set_validity(gnutls_x509_crt_t crt, time_t days)
{
	unsigned char serial[16];
	time_t now = time(NULL);
	int rc;

	if ((rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial))) < 0)
		return rc;
	serial[0] &= 0x7f; /* positive */
	if ((rc = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial))) < 0 ||
	    (rc = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0)
		return rc;
	return gnutls_x509_crt_set_expiration_time(crt, now + days * 86400);
}

static int make_ca(void)
{
	const char *bad;
	int rc;

	if ((rc = new_key(&ca_key)) < 0 || (rc = new_key(&leaf_key)) < 0 ||
	    (rc = gnutls_x509_crt_init(&ca_crt)) < 0 || (rc = set_validity(ca_crt, 3650)) < 0 ||
	    (rc = gnutls_x509_crt_set_dn(ca_crt, "CN=kotoba-broker egress proxy CA", &bad)) < 0 ||
	    (rc = gnutls_x509_crt_set_key(ca_crt, ca_key)) < 0 ||
	    (rc = gnutls_x509_crt_set_basic_constraints(ca_crt, 1, 0)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_usage(ca_crt, GNUTLS_KEY_KEY_CERT_SIGN |
							   GNUTLS_KEY_CRL_SIGN)) < 0 ||
	    (rc = gnutls_x509_crt_get_key_id(ca_crt, 0, ca_key_id, &ca_key_id_len)) < 0 ||
	    (rc = gnutls_x509_crt_set_subject_key_id(ca_crt, ca_key_id, ca_key_id_len)) < 0)
		return rc;
	return gnutls_x509_crt_sign2(ca_crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0);
}

/* The system's CAs, then ours, into the file the broker opened for it
 * beside its socket (a place the runs may read and the proxy, another
 * user, could not create a file in).  Written before the proxy says it
 * serves, so before any run can read it. */
static int write_bundle(int fd, char *err, size_t errlen)
{
	gnutls_datum_t pem = { NULL, 0 }, sys = { NULL, 0 };
	int rc = gnutls_x509_crt_export2(ca_crt, GNUTLS_X509_FMT_PEM, &pem);

	if (rc < 0) {
		snprintf(err, errlen, "cannot export the CA: %s", gnutls_strerror(rc));
		return -1;
	}
	/* A system without a trust store: the bundle is our CA alone. */
	if (gnutls_load_file(SYSTEM_CA_FILE, &sys) < 0)
		sys.size = 0;
	if (ftruncate(fd, 0) < 0 || (sys.size && write(fd, sys.data, sys.size) != (ssize_t)sys.size) ||
	    write(fd, pem.data, pem.size) != (ssize_t)pem.size) {
		snprintf(err, errlen, "cannot write the CA bundle: %s", strerror(errno));
		rc = -1;
	}
	close(fd);
	gnutls_free(pem.data);
	gnutls_free(sys.data);
	return rc < 0 ? -1 : 0;
}

int egress_tls_init(int bundle, const char *upstream_ca, char *err, size_t errlen)
{
	int rc = make_ca();

	if (rc < 0) {
		snprintf(err, errlen, "cannot make the egress CA: %s", gnutls_strerror(rc));
		return -1;
	}
	if ((rc = gnutls_certificate_allocate_credentials(&upstream_cred)) < 0 ||
	    (rc = gnutls_certificate_set_x509_system_trust(upstream_cred)) < 0) {
		snprintf(err, errlen, "cannot load the system's trust store: %s",
			 gnutls_strerror(rc));
		return -1;
	}
	if (upstream_ca &&
	    (rc = gnutls_certificate_set_x509_trust_file(upstream_cred, upstream_ca,
							 GNUTLS_X509_FMT_PEM)) <= 0) {
		snprintf(err, errlen, "[egress] upstream_ca_file %s: %s", upstream_ca,
			 rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
		return -1;
	}
	return write_bundle(bundle, err, errlen);
}

/* A leaf for host (a name, or an address as an IP SAN), signed by the CA. */
static int make_leaf(const char *host, gnutls_x509_crt_t *crt)
{
	unsigned char ip[16];
	int fam = strchr(host, ':') ? AF_INET6 : AF_INET;
	bool is_ip = inet_pton(fam, host, ip) == 1;
	const char *bad;
	char dn[300];
	int rc;

	snprintf(dn, sizeof(dn), "CN=%s", host);
	if ((rc = gnutls_x509_crt_init(crt)) < 0 || (rc = set_validity(*crt, 7)) < 0 ||
	    (rc = gnutls_x509_crt_set_key(*crt, leaf_key)) < 0 ||
	    (rc = gnutls_x509_crt_set_basic_constraints(*crt, 0, -1)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_usage(*crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_purpose_oid(*crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
	    (rc = gnutls_x509_crt_set_authority_key_id(*crt, ca_key_id, ca_key_id_len)) < 0)
		return rc;
	/* CN=host for old clients; a name with ',' or '=' would need
	 * escaping, and is not a host name anyway. */
	if (!strpbrk(host, ",=+\"\\<>;") &&
	    (rc = gnutls_x509_crt_set_dn(*crt, dn, &bad)) < 0)
		return rc;
	rc = is_ip ? gnutls_x509_crt_set_subject_alt_name(*crt, GNUTLS_SAN_IPADDRESS, ip,
							  fam == AF_INET ? 4 : 16,
							  GNUTLS_FSAN_SET)
		   : gnutls_x509_crt_set_subject_alt_name(*crt, GNUTLS_SAN_DNSNAME, host,
							  (unsigned)strlen(host), GNUTLS_FSAN_SET);
	if (rc < 0)
		return rc;
	return gnutls_x509_crt_sign2(*crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0);
}

static int handshake(gnutls_session_t s)
{
	int rc;

	gnutls_handshake_set_timeout(s, EGRESS_CONNECT_TIMEOUT_S * 1000);
	do
		rc = gnutls_handshake(s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	return rc;
}

/* The upstream side: SNI for a name, the certificate checked against
 * host (name or address) and the trust store. */
static int wrap_upstream(struct egress_io *up, const char *host, char *why, size_t len)
{
	gnutls_session_t s;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	int rc;

	if ((rc = gnutls_init(&s, GNUTLS_CLIENT)) < 0) {
		snprintf(why, len, "TLS upstream: %s", gnutls_strerror(rc));
		return -1;
	}
	if ((rc = gnutls_set_default_priority(s)) < 0 ||
	    (rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, upstream_cred)) < 0 ||
	    (!is_ip && (rc = gnutls_server_name_set(s, GNUTLS_NAME_DNS, host, strlen(host))) < 0)) {
		snprintf(why, len, "TLS upstream: %s", gnutls_strerror(rc));
		gnutls_deinit(s);
		return -1;
	}
	gnutls_session_set_verify_cert(s, host, 0);
	gnutls_transport_set_int(s, up->fd);
	rc = handshake(s);
	if (rc < 0) {
		gnutls_datum_t out = { NULL, 0 };
		unsigned status = gnutls_session_get_verify_cert_status(s);

		if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR &&
		    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out,
								 0) == 0) {
			snprintf(why, len, "the upstream certificate for %s is not trusted: %s",
				 host, out.data);
			gnutls_free(out.data);
		} else {
			snprintf(why, len, "TLS with %s failed: %s", host, gnutls_strerror(rc));
		}
		gnutls_deinit(s);
		return -1;
	}
	up->tls = s;
	return 0;
}

void egress_serve_tls(struct egress_run *r, int fd, const char *host, const char *port)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	gnutls_certificate_credentials_t cred = NULL;
	gnutls_x509_crt_t chain[2] = { NULL, ca_crt };
	struct egress_io c = { fd, NULL };
	gnutls_session_t s = NULL;
	char what[600], why[300];
	int rc;

	snprintf(what, sizeof(what), "CONNECT %s:%s", host, port);
	if ((rc = make_leaf(host, &chain[0])) < 0 ||
	    (rc = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
	    (rc = gnutls_certificate_set_x509_key(cred, chain, 2, leaf_key)) < 0) {
		egress_log(r, "CONNECT %s:%s: cannot make its certificate: %s", host, port,
			   gnutls_strerror(rc));
		egress_report_refusal(r, what, "the egress proxy cannot make a certificate for "
					       "this host");
		egress_refuse(&c, 502, "the egress proxy cannot make a certificate for this host");
		goto out;
	}
	if (egress_io_write(&c, ok, sizeof(ok) - 1) < 0)
		goto out;
	if ((rc = gnutls_init(&s, GNUTLS_SERVER)) < 0 ||
	    (rc = gnutls_set_default_priority(s)) < 0 ||
	    (rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred)) < 0)
		goto tls_failed;
	gnutls_transport_set_int(s, fd);
	if ((rc = handshake(s)) < 0)
		goto tls_failed;
	c.tls = s;
	egress_serve_request(r, &c, host, port, wrap_upstream);
	egress_tls_close(&c);
	s = NULL;
	goto out;
tls_failed:
	/* A client that pins its certificates, or does not trust the
	 * bundle (SSL_CERT_FILE), ends here: its own error says which. */
	snprintf(why, sizeof(why), "the TLS handshake with the run failed: %s (a client that "
		 "pins certificates, or does not use SSL_CERT_FILE, cannot go through the egress "
		 "proxy)", gnutls_strerror(rc));
	egress_log(r, "%s refused: %s", what, why);
	egress_report_refusal(r, what, why);
out:
	if (s)
		gnutls_deinit(s);
	if (cred)
		gnutls_certificate_free_credentials(cred);
	if (chain[0])
		gnutls_x509_crt_deinit(chain[0]);
}
