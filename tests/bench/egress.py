#!/usr/bin/python3
"""The egress proxy's cost (`make bench`): a 1 MiB GET through kotoba-egress
against the same GET direct, over HTTP and over HTTPS, and the proxy's
start-up (exec to "serving").  The proxy runs as the broker runs it: its
link at fd 3 (one ATTACH with a listening socket on the host's loopback,
as a run's would be in its namespace), the CA bundle's file at fd 4.
Servers are this script's own, on 127.0.0.1, which allow_hosts lists.

usage: egress.py --build BUILD [--rounds N]"""
import argparse
import fcntl
import http.server
import os
import socket
import ssl
import statistics
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

BODY = os.urandom(1 << 20)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)


def serve(tls_dir=None):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls_dir:
        key, crt = os.path.join(tls_dir, "k.pem"), os.path.join(tls_dir, "c.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                       capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
        s.ca = crt
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def start_proxy(build, tmp, upstream_ca):
    link, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    bundle = os.path.join(tmp, "egress-ca.pem")
    bfd = os.open(bundle, os.O_WRONLY | os.O_CREAT, 0o644)
    t0 = time.monotonic()
    hi = (os.dup(theirs.fileno()), os.dup(bfd))
    hi = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD, 20) for fd in hi)

    argv = [os.path.join(build, "kotoba-egress"), "--mode", "get", "--allow", "127.0.0.1",
            "--upstream-ca", upstream_ca]
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(hi[0], 3)
            os.dup2(hi[1], 4)
            os.closerange(5, 1 << 16)
            null = os.open("/dev/null", os.O_WRONLY)
            os.dup2(null, 2)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    for fd in hi:
        os.close(fd)
    theirs.close()
    os.close(bfd)
    assert link.recv(1) == b"S", "the proxy did not say it serves"
    startup = time.monotonic() - t0
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    lst.setblocking(False)
    # ATTACH (broker/egress/wire.h): op, uid, run id, rule (unattended), 0
    link.sendmsg([struct.pack("=IIQII", 1, os.getuid(), 1, 1, 0)],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", lst.fileno()))])
    return pid, link, lst, bundle, startup


def timed(opener, url, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with opener.open(url, timeout=30) as r:
            assert len(r.read()) == len(BODY)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, tls = serve(), serve(tmp)
        p, link, lst, bundle, startup = start_proxy(a.build, tmp, tls.ca)
        try:
            proxy = "http://127.0.0.1:%d" % lst.getsockname()[1]
            direct = urllib.request.build_opener(
                urllib.request.ProxyHandler({}),
                urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=tls.ca)))
            via = urllib.request.build_opener(
                urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
                urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=bundle)))
            print("egress proxy start-up (exec to serving): %.1f ms" % (startup * 1000))
            for name, srv, scheme, goal in (("HTTP", plain, "http", 1.5),
                                            ("HTTPS", tls, "https", 2.0)):
                url = "%s://127.0.0.1:%d/" % (scheme, srv.server_address[1])
                d = timed(direct, url, a.rounds)
                v = timed(via, url, a.rounds)
                print("1 MiB GET over %s: direct %.2f ms, through the proxy %.2f ms, "
                      "ratio %.2f (goal %.1f)" % (name, d * 1000, v * 1000, v / d, goal))
        finally:
            link.close()
            os.waitpid(p, 0)


if __name__ == "__main__":
    main()
