"""The egress proxy, for real: unattended runs (--no-channel) of a real
broker reach HTTP and HTTPS servers this test starts on the host's
loopback only through kotoba-egress, whose allow_hosts lists 127.0.0.1
for them.  Nothing else is contacted."""
import base64
import functools
import hashlib
import http.server
import os
import signal
import shutil
import socket
import ssl
import subprocess
import threading
import zipfile

import pytest

from conftest import ensure_user, wait_for
from test_system import as_user


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers GET and HEAD with a fixed body; records every request and
    whatever body bytes reached it."""
    seen = []
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _answer(self, body=True):
        data = b"hello from %s\n" % self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self):
        self.seen.append(("GET", self.path, b""))
        if self.path.startswith("/hold"):
            # held until the test lets go (a backstop: the proxy's idle
            # timeout is 60 s)
            self.hold.wait(50)
        self._answer()

    def do_HEAD(self):
        self.seen.append(("HEAD", self.path, b""))
        self._answer(body=False)

    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.command, self.path, self.rfile.read(n) if n else b""))
        self._answer()

    do_POST = do_PUT = do_DELETE = _any


def serve(server):
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    return server


@pytest.fixture
def http_server():
    Recorder.seen = []
    Recorder.hold = threading.Event()
    s = serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder))
    yield s
    s.shutdown()
    s.server_close()


def make_ca(tmp):
    """A self-signed certificate for 127.0.0.1, made by openssl(1): the
    upstream's, which the proxy trusts through upstream_ca_file."""
    key = os.path.join(tmp, "up.key")
    crt = os.path.join(tmp, "up.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, crt


def tls_server(tmp, handler):
    """A loopback HTTPS server with a certificate of the test's own CA
    (its file as `ca_file`), served until the test ends."""
    key, crt = make_ca(tmp)
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    serve(s)
    s.ca_file = crt
    yield s
    s.shutdown()
    s.server_close()


@pytest.fixture
def https_server(tmpdir_k):
    if not shutil.which("openssl"):
        pytest.skip("openssl(1) is needed to make the upstream's test certificate")
    Recorder.seen = []
    yield from tls_server(tmpdir_k, Recorder)


def egress_broker(make_broker, extra="", allow="127.0.0.1"):
    cfg = "[egress]\nallow_hosts = %s\n%s" % (allow, extra)
    return make_broker(config=cfg).start()


def clean_log(b):
    """Under KOTOBA_BUILD=.../asan the proxy's reports land in the broker's log."""
    log = b.read_log()
    for marker in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        assert marker not in log, log


def run(b, code):
    r = b.run_json(code)
    assert r["_status"] == 0, (r["stderr"], r)
    clean_log(b)
    return r["stdout"]


def workdir(tmp, code):
    """A working directory whose payload.py is the code."""
    work = os.path.join(tmp, "work")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)
    with open(os.path.join(work, "payload.py"), "w") as f:
        f.write(code)
    os.chmod(os.path.join(work, "payload.py"), 0o644)
    return work


# The pre-screen refuses an unattended snippet that plainly sends a body or
# opens a socket (data-out, raw-socket); the code in a module of the
# working directory walks past it, as an attacker's could: the proxy and
# the network namespace are what must hold.
def run_module(b, tmp, code):
    r = b.run_json("import sys\nsys.path.insert(0, '.')\nimport payload\n", "--cwd",
                   workdir(tmp, code))
    assert r["_status"] == 0, (r["stderr"], r)
    clean_log(b)
    return r["stdout"]


GET = """
import urllib.request
with urllib.request.urlopen('%s', timeout=30) as r:
    print(r.status, r.read().decode().strip())
"""


def test_get_over_http_goes_through_the_proxy(make_broker, http_server):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/x?y=1" % http_server.server_address[1]
    assert run(b, GET % url) == "200 hello from /x?y=1\n"
    assert Recorder.seen == [("GET", "/x?y=1", b"")]
    assert "GET %s" % url in b.read_log()


def test_get_over_https_is_checked_inside_tls(make_broker, https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/secure" % https_server.server_address[1]
    assert run(b, GET % url) == "200 hello from /secure\n"
    assert Recorder.seen == [("GET", "/secure", b"")]


SEND = """
import urllib.request, urllib.error
req = urllib.request.Request('%s', data=%r, method='%s')
try:
    urllib.request.urlopen(req, timeout=30)
    print('sent')
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
"""


def send(method, url, body=b"SECRET-BODY"):
    return SEND % (url, body if method != "GET" else None, method)


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_post_and_put_are_refused_with_the_proxys_sentence(make_broker, tmpdir_k, http_server,
                                                           method):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/upload" % http_server.server_address[1]
    out = run_module(b, tmpdir_k, send(method, url))
    assert out == "405 %s %s refused: a grant covers plain GET requests\n" % (method, url)
    assert Recorder.seen == []


def test_post_inside_https_is_refused(make_broker, tmpdir_k, https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/upload" % https_server.server_address[1]
    out = run_module(b, tmpdir_k, send("POST", url))
    assert out == "405 POST %s refused: a grant covers plain GET requests\n" % url
    assert Recorder.seen == []


RAW = """
import socket
for what, f in (('tcp', lambda: socket.create_connection(('127.0.0.1', %d), timeout=5)),
                ('dns', lambda: socket.getaddrinfo('example.org', 80))):
    try:
        f()
        print(what, 'reached')
    except OSError as e:
        print(what, 'failed', type(e).__name__)
"""


def test_raw_tcp_to_the_test_server_fails(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker)
    out = run_module(b, tmpdir_k, RAW % http_server.server_address[1]).split("\n")
    assert out[0] == "tcp failed ConnectionRefusedError", out
    assert out[1].startswith("dns failed"), out
    assert Recorder.seen == []


def test_a_private_address_is_refused_unless_listed(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker, allow="example.invalid")
    url = "http://127.0.0.1:%d/" % http_server.server_address[1]
    out = run_module(b, tmpdir_k, send("GET", url))
    assert out.startswith("403 GET %s refused: the host resolves to a loopback" % url), out
    assert Recorder.seen == []


PINNED = """
import os, ssl, socket, urllib.request, urllib.error
# A client that pins: it trusts the system's CAs only, not SSL_CERT_FILE's bundle.
ctx = ssl.create_default_context(cafile=None, capath='/nonexistent')
ctx.load_verify_locations(cafile='/etc/ssl/certs/ca-certificates.crt')
try:
    urllib.request.urlopen('%s', timeout=30, context=ctx)
    print('reached')
except urllib.error.URLError as e:
    print('failed', type(e.reason).__name__, 'CERTIFICATE_VERIFY_FAILED' in str(e.reason))
"""


def test_connect_with_a_pinned_certificate_fails_clearly(make_broker, https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/" % https_server.server_address[1]
    assert run(b, PINNED % url) == "failed SSLCertVerificationError True\n"
    assert Recorder.seen == []
    assert "the TLS handshake with the run failed" in b.read_log()


REQUESTS = """
import requests
r = requests.get('%s', timeout=30)
h = requests.head('%s', timeout=30)
print(r.status_code, r.text.strip(), h.status_code, h.headers['Content-Length'])
"""


def test_requests_get_and_head_over_https(make_broker, https_server):
    """requests reads REQUESTS_CA_BUNDLE and HTTPS_PROXY: nothing to change."""
    if subprocess.run(["/usr/bin/python3", "-I", "-c", "import requests"]).returncode:
        pytest.skip("requests is not installed for /usr/bin/python3 (python3-requests)")
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/r" % https_server.server_address[1]
    assert run(b, REQUESTS % (url, url)) == "200 hello from /r 200 14\n"
    assert [m for m, _, _ in Recorder.seen] == ["GET", "HEAD"]


HTTPX = """
import httpx
r = httpx.get('%s', timeout=30)
h = httpx.head('%s', timeout=30)
print(r.status_code, r.text.strip(), h.status_code, h.headers['Content-Length'])
"""


def python_has(module):
    return subprocess.run(["/usr/bin/python3", "-I", "-c", "import " + module]).returncode == 0


def test_httpx_get_and_head_over_https(make_broker, https_server):
    """httpx reads HTTPS_PROXY and SSL_CERT_FILE: nothing to change."""
    if not python_has("httpx"):
        pytest.skip("httpx is not installed for /usr/bin/python3 (python3-httpx)")
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/x" % https_server.server_address[1]
    assert run(b, HTTPX % (url, url)) == "200 hello from /x 200 14\n"
    assert [m for m, _, _ in Recorder.seen] == ["GET", "HEAD"]


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def make_index(root):
    """A PEP 503 simple index in root with one package, tinypkg 0.1, as a
    pure-Python wheel made here."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 'tiny 0.1'\n",
        "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
        "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: kotoba-test\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "\n".join([record_line(n, d) for n, d in files.items()] +
                       ["tinypkg-0.1.dist-info/RECORD,,", ""])
    pkg = os.path.join(root, "simple", "tinypkg")
    os.makedirs(pkg)
    whl = os.path.join(pkg, "tinypkg-0.1-py3-none-any.whl")
    with zipfile.ZipFile(whl, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinypkg-0.1.dist-info/RECORD", record)
    with open(whl, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(pkg, "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="tinypkg-0.1-py3-none-any.whl#sha256=%s">'
                'tinypkg-0.1-py3-none-any.whl</a></body></html>\n' % sha)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def pip_index(tmpdir_k):
    if not shutil.which("openssl"):
        pytest.skip("openssl(1) is needed to make the upstream's test certificate")
    root = os.path.join(tmpdir_k, "index")
    make_index(root)
    yield from tls_server(tmpdir_k, functools.partial(Quiet, directory=root))


# pip in the snippet's own interpreter (an unattended run execs nothing
# more), installing into the run's scratch.
PIP = """
import os, sys
if %r:
    del os.environ['REQUESTS_CA_BUNDLE']
from pip._internal.cli.main import main
target = os.path.join(os.environ['TMPDIR'], 'site')
rc = main(['install', '--no-cache-dir', '--disable-pip-version-check', '--no-compile',
           '--quiet', '--retries', '0', '--target', target, '--index-url', '%s', 'tinypkg'])
sys.path.insert(0, target)
try:
    import tinypkg
    print(rc, tinypkg.VALUE)
except ImportError:
    print(rc, 'not installed')
"""


@pytest.mark.parametrize("bundle", ["REQUESTS_CA_BUNDLE", "without"])
def test_pip_installs_from_an_https_index(make_broker, tmpdir_k, pip_index, bundle):
    """Debian 12's pip (23.0) trusts REQUESTS_CA_BUNDLE (and PIP_CERT), not
    SSL_CERT_FILE: the run's REQUESTS_CA_BUNDLE is what lets it through
    the proxy's TLS unchanged; the control without it fails."""
    if not python_has("pip"):
        pytest.skip("pip is not installed for /usr/bin/python3 (python3-pip)")
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % pip_index.ca_file)
    url = "https://127.0.0.1:%d/simple/" % pip_index.server_address[1]
    out = run_module(b, tmpdir_k, PIP % (bundle == "without", url))
    log = b.read_log()
    if bundle == "without":
        assert out == "1 not installed\n", out
        assert "the TLS handshake with the run failed" in log, log
    else:
        assert out == "0 tiny 0.1\n", out
        assert "GET %stinypkg/: " % url in log, log
        assert "GET %stinypkg/tinypkg-0.1-py3-none-any.whl: " % url in log, log


# Requests by hand: each is sent on its own connection to the proxy, and
# the proxy's answer's first line and body are printed.
RAW_HTTP = """
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
for req in %r:
    s = socket.create_connection((p.hostname, p.port), timeout=30)
    s.sendall(req)
    got = b''
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    head, _, body = got.partition(b'\\r\\n\\r\\n')
    print(head.split(b'\\r\\n')[0].decode(), '|', body.decode().strip())
"""


def test_bodies_chunks_and_smuggling_are_refused_and_reach_nothing(make_broker, tmpdir_k,
                                                                     http_server):
    b = egress_broker(make_broker)
    host = "127.0.0.1:%d" % http_server.server_address[1]
    url = "http://%s/u" % host
    reqs = [
        # a GET with a body
        b"GET %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 6\r\n\r\nSECRET" % (url.encode(), host.encode()),
        # chunked
        b"GET %s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nSECRET\r\n0\r\n\r\n"
        % (url.encode(), host.encode()),
        # both, the smuggler's pair
        b"GET %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"6\r\nSECRET\r\n0\r\n\r\n" % (url.encode(), host.encode()),
        # a second request pipelined after a good one: only the first goes
        b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\nPOST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 6\r\n\r\nSECRET"
        % (url.encode(), host.encode(), url.encode(), host.encode()),
        # HEAD is a plain request too
        b"HEAD %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.encode(), host.encode()),
        # not HTTP
        b"\x16\x03\x01 hello\r\n\r\n",
        # a head over 16 KiB
        b"GET %s HTTP/1.1\r\nX: %s\r\n\r\n" % (url.encode(), b"a" * 17000),
    ]
    out = run_module(b, tmpdir_k, RAW_HTTP % (reqs,)).splitlines()
    body = "a grant covers plain GET requests, and this one has a body"
    assert out == [
        "HTTP/1.1 405 Method Not Allowed | GET %s refused: %s (Content-Length)" % (url, body),
        "HTTP/1.1 405 Method Not Allowed | GET %s refused: %s (Transfer-Encoding)" % (url, body),
        "HTTP/1.1 405 Method Not Allowed | GET %s refused: %s (Transfer-Encoding)" % (url, body),
        "HTTP/1.1 200 OK | hello from /u",
        "HTTP/1.1 200 OK | ",
        "HTTP/1.1 400 Bad Request | a request refused: the request line is not METHOD TARGET HTTP/1.x",
        "HTTP/1.1 431 Request Header Fields Too Large | a request refused: its head is over 16 KiB",
    ], out
    assert Recorder.seen == [("GET", "/u", b""), ("HEAD", "/u", b"")]


def test_a_host_header_naming_another_host_is_refused(make_broker, tmpdir_k, http_server):
    """The proxy connects to the host the URL names and checked; a Host
    header that names another would reach another site of a shared
    server.  The same request with a matching Host is the control."""
    b = egress_broker(make_broker)
    host = "127.0.0.1:%d" % http_server.server_address[1]
    url = "http://%s/h" % host
    reqs = [
        b"GET %s HTTP/1.1\r\nHost: internal.example\r\n\r\n" % url.encode(),
        b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n" % url.encode(),
        b"GET %s HTTP/1.1\r\nHost: %s\r\nHost: internal.example\r\n\r\n"
        % (url.encode(), host.encode()),
        b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.encode(), host.encode()),
    ]
    out = run_module(b, tmpdir_k, RAW_HTTP % (reqs,)).splitlines()
    assert out == [
        "HTTP/1.1 400 Bad Request | a request refused: the Host header names another host "
        "than the request",
        "HTTP/1.1 400 Bad Request | a request refused: the Host header names another host "
        "than the request",
        "HTTP/1.1 400 Bad Request | a request refused: a request has more than one Host header",
        "HTTP/1.1 200 OK | hello from /h",
    ], out
    assert Recorder.seen == [("GET", "/h", b"")]


FRONTED = """
import urllib.request, urllib.error
req = urllib.request.Request('%s', headers={'Host': 'internal.example'})
try:
    urllib.request.urlopen(req, timeout=30)
    print('reached')
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
"""


def test_a_host_header_naming_another_host_is_refused_inside_tls(make_broker, tmpdir_k,
                                                                 https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/f" % https_server.server_address[1]
    assert run_module(b, tmpdir_k, FRONTED % url) == \
        "400 a request refused: the Host header names another host than the request\n"
    assert Recorder.seen == []


NAMED = """
import urllib.request, urllib.error
try:
    urllib.request.urlopen('http://localhost:%d/n', timeout=30)
    print('reached')
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
"""


def test_a_name_resolving_to_loopback_is_refused_unless_listed(make_broker, http_server):
    port = http_server.server_address[1]
    b = egress_broker(make_broker, allow="example.invalid")
    out = run(b, NAMED % port)
    assert out.startswith("403 GET http://localhost:%d/n refused: the host resolves to a "
                          "loopback" % port), out
    assert Recorder.seen == []
    listed = egress_broker(make_broker, allow="localhost")
    out = run(listed, NAMED % port)
    assert out == "reached\n", out
    assert Recorder.seen == [("GET", "/n", b"")]


@pytest.mark.parametrize("mode,get,post", [
    ("none", "403", "403"),
    ("allowlist", "200", "200"),
    ("any", "200", "200"),
])
def test_modes(make_broker, tmpdir_k, http_server, mode, get, post):
    b = egress_broker(make_broker, "unattended = %s\n" % mode)
    url = "http://127.0.0.1:%d/m" % http_server.server_address[1]
    code = send("GET", url).replace("print('sent')", "print(200)") + \
        send("POST", url).replace("print('sent')", "print(200)")
    out = run_module(b, tmpdir_k, code).splitlines()
    assert [o.split()[0] for o in out] == [get, post], out
    if mode == "none":
        assert "([egress] unattended = none)" in out[0], out
        assert Recorder.seen == []
    else:
        assert Recorder.seen == [("GET", "/m", b""), ("POST", "/m", b"SECRET-BODY")]


def test_allowlist_refuses_a_host_not_listed(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker, "unattended = allowlist\n", allow="localhost")
    url = "http://127.0.0.1:%d/a" % http_server.server_address[1]
    out = run_module(b, tmpdir_k, send("GET", url))
    assert out == "403 GET %s refused: the host is not on [egress] allow_hosts\n" % url, out
    assert Recorder.seen == []


def test_deny_hosts_wins_over_allow_hosts(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker, "deny_hosts = 127.0.0.1\n")
    url = "http://127.0.0.1:%d/d" % http_server.server_address[1]
    out = run_module(b, tmpdir_k, send("GET", url))
    assert out == "403 GET %s refused: the host is on [egress] deny_hosts\n" % url, out


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def test_a_proxy_crash_fails_closed_and_a_new_server_takes_the_next_runs(make_broker,
                                                                          http_server):
    b = egress_broker(make_broker)
    proxy = [p for p in children(b.proc.pid) if comm(p) == "kotoba-egress"]
    assert len(proxy) == 1, proxy
    wait_for(lambda: children(proxy[0]), "the proxy's serving process")
    (server,) = children(proxy[0])
    os.kill(server, signal.SIGKILL)
    wait_for(lambda: children(proxy[0]) and children(proxy[0]) != [server],
             "a new serving process")
    assert "the serving process %d ended (signal 9)" % server in b.read_log()
    url = "http://127.0.0.1:%d/after" % http_server.server_address[1]
    assert run(b, GET % url) == "200 hello from /after\n"
    assert b.alive()


def proxy_processes(b):
    """The broker's proxy and its serving process."""
    (proxy,) = [p for p in children(b.proc.pid) if comm(p) == "kotoba-egress"]
    wait_for(lambda: children(proxy), "the proxy's serving process")
    return [proxy] + children(proxy)


def gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] == "Z"  # a zombie nobody reaps yet
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_proxy_goes_with_the_broker(make_broker, how):
    """However the broker ends, its proxy and serving process end too:
    none is left restarting servers for a broker that is gone."""
    b = egress_broker(make_broker)
    procs = proxy_processes(b)
    assert len(procs) == 2, procs
    if how == "kill":
        b.proc.kill()
        b.proc.wait()
    else:
        b.stop()
    for p in procs:
        wait_for(lambda: gone(p), "proxy process %d to end after the broker's %s" % (p, how))


CAP = """
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
held = [socket.create_connection((p.hostname, p.port), timeout=30) for _ in range(32)]
extra = socket.create_connection((p.hostname, p.port), timeout=30)
print(extra.recv(200).split(b'\\r\\n')[0].decode())
"""


def test_a_run_has_at_most_32_connections_at_once(make_broker, tmpdir_k):
    b = egress_broker(make_broker)
    assert run_module(b, tmpdir_k, CAP) == "HTTP/1.1 503 Service Unavailable\n"
    assert "connection refused: the run has 32 open already" in b.read_log()


def test_the_proxy_holds_no_capability_under_no_new_privs_and_a_filter(make_broker):
    b = egress_broker(make_broker)
    (proxy,) = [p for p in children(b.proc.pid) if comm(p) == "kotoba-egress"]
    wait_for(lambda: children(proxy), "the proxy's serving process")
    for pid in [proxy] + children(proxy):
        with open("/proc/%d/status" % pid) as f:
            st = dict(line.split(":", 1) for line in f)
        for k in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert int(st[k], 16) == 0, (pid, k, st[k])
        assert st["NoNewPrivs"].strip() == "1" and st["Seccomp"].strip() == "2", st


# A run a person approved (the card answered `once`): a POST with a body,
# then raw TCP to the test server on the host's loopback.
APPROVED = """
import os, socket, urllib.request
print(os.environ.get('HTTP_PROXY'))
req = urllib.request.Request('%s', data=b'FROM-APPROVED', method='POST')
with urllib.request.urlopen(req, timeout=30) as r:
    print(r.status, r.read().decode().strip())
try:
    socket.create_connection(('127.0.0.1', %d), timeout=5).close()
    print('tcp reached')
except OSError as e:
    print('tcp failed', type(e).__name__)
"""


def approved_run(b, code):
    r = b.run_json(code, approve=True)
    assert r["_status"] == 0, (r["stderr"], r)
    clean_log(b)
    return r["stdout"]


@pytest.mark.parametrize("approved", ["direct", "proxy"])
def test_approved_proxy_sends_any_method_and_closes_the_hosts_loopback(make_broker,
                                                                      http_server, approved):
    """approved = proxy: a run a person approved POSTs through the proxy
    (recorded), and its raw TCP to a server on the host's loopback reaches
    nothing; approved = direct is the control that reaches it."""
    b = egress_broker(make_broker, "approved = %s\n" % approved)
    port = http_server.server_address[1]
    url = "http://127.0.0.1:%d/p" % port
    out = approved_run(b, APPROVED % (url, port)).splitlines()
    proxied = approved == "proxy"
    assert out == ["http://127.0.0.1:3128" if proxied else "None",
                   "200 hello from /p",
                   "tcp failed ConnectionRefusedError" if proxied else "tcp reached"], out
    assert Recorder.seen[0] == ("POST", "/p", b"FROM-APPROVED"), Recorder.seen
    assert ("POST %s: " % url in b.read_log()) == proxied


def test_approved_proxy_leaves_the_unattended_rule_as_it_is(make_broker, tmpdir_k,
                                                            http_server):
    b = egress_broker(make_broker, "approved = proxy\n")
    url = "http://127.0.0.1:%d/u" % http_server.server_address[1]
    out = run_module(b, tmpdir_k, send("POST", url))
    assert out == "405 POST %s refused: a grant covers plain GET requests\n" % url
    assert Recorder.seen == []
    out = approved_run(b, SEND % (url, b"BODY", "POST"))
    assert out == "sent\n", out
    assert Recorder.seen == [("POST", "/u", b"BODY")]


def test_approved_proxy_refuses_a_loopback_address_not_listed(make_broker, http_server):
    b = egress_broker(make_broker, "approved = proxy\n", allow="example.invalid")
    url = "http://127.0.0.1:%d/l" % http_server.server_address[1]
    out = approved_run(b, SEND % (url, b"BODY", "POST"))
    assert out.startswith("403 POST %s refused: the host resolves to a loopback" % url), out
    assert Recorder.seen == []


TUNNELLED = """
import ssl, urllib.request
ctx = ssl.create_default_context(cafile=%r)
req = urllib.request.Request('%s', data=b'TLS-BODY', method='PUT')
with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
    print(r.status, r.read().decode().strip())
"""


def test_approved_proxy_tunnels_https_as_is(make_broker, tmpdir_k, https_server):
    """CONNECT from an approved run is tunnelled: the run verifies the
    upstream's own certificate (here the test CA it names itself), not a
    leaf of the proxy's CA, and any method goes inside."""
    os.chmod(https_server.ca_file, 0o644)
    b = egress_broker(make_broker, "approved = proxy\n")
    url = "https://127.0.0.1:%d/t" % https_server.server_address[1]
    assert approved_run(b, TUNNELLED % (https_server.ca_file, url)) == "200 hello from /t\n"
    assert Recorder.seen == [("PUT", "/t", b"TLS-BODY")]
    assert "CONNECT 127.0.0.1:%d tunnelled ([egress] approved = proxy)" % \
        https_server.server_address[1] in b.read_log()


def test_approved_proxy_holds_on_a_spare(make_broker, http_server):
    """A warm spare of the approved profile is made with the proxy's
    network too: the run that takes it reaches nothing else."""
    b = egress_broker(make_broker, "approved = proxy\n[sandbox]\nwarm = yes\n")
    port = http_server.server_address[1]
    url = "http://127.0.0.1:%d/w" % port
    first = approved_run(b, APPROVED % (url, port))
    wait_for(lambda: "waits for a snippet" in b.read_log(), "a spare of the approved profile")
    second = approved_run(b, APPROVED % (url, port))
    assert "took spare worker" in b.read_log()
    assert first == second == "http://127.0.0.1:3128\n200 hello from /w\n" \
        "tcp failed ConnectionRefusedError\n", (first, second)


# Opens `held` connections to the proxy, each with a GET the test server
# holds, then `extra` more, whose answers it prints; then the held ones'.
HOLD = """
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
def conn():
    return socket.create_connection((p.hostname, p.port), timeout=60)
def answer(s):
    got = b''
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    head, _, body = got.partition(b'\\r\\n\\r\\n')
    return head.split(b'\\r\\n')[0].decode() + ' | ' + body.decode().strip()
get = b'GET http://%(host)s%(path)s HTTP/1.1\\r\\nHost: %(host)s\\r\\n\\r\\n'
held = [conn() for _ in range(%(held)d)]
for s in held if %(early)s else []:
    s.sendall(get)
extra = [conn() for _ in range(%(extra)d)]
for s in extra:
    print(answer(s), flush=True)
for s in held if not %(early)s else []:
    s.sendall(get)
for s in held:
    print(answer(s))
"""


def hold(b, tmp, host, held, extra, path="/hold", early=True):
    """early: the held connections' requests go before the extra ones
    connect (the server holds /hold); else after (the proxy holds them
    while it waits for a head)."""
    return run_module(b, tmp, HOLD % {"host": host, "held": held, "extra": extra,
                                      "path": path, "early": early})


def held_requests():
    return sum(1 for m, p, _ in Recorder.seen if p == "/hold")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: two real users on one broker")
def test_the_proxys_caps_per_user_and_for_all(make_broker, tmpdir_k, http_server):
    """[egress] connections_per_user and connections: one user's runs
    holding their share leave the rest to another user, whose runs meet
    the total cap only; each refusal is a 503 whose body names its cap."""
    other = ensure_user("kotoba-ta")
    b = egress_broker(make_broker, "connections = 4\nconnections_per_user = 2\n"
                      "[broker]\nallow_users = kotoba-ta root\n")
    host = "127.0.0.1:%d" % http_server.server_address[1]
    work = os.path.join(tmpdir_k, "mine")
    os.makedirs(work)
    os.chmod(tmpdir_k, 0o755)
    result = {}
    first = threading.Thread(target=lambda: result.update(
        out=hold(b, work, host, held=2, extra=1)))
    first.start()
    try:
        wait_for(lambda: held_requests() == 2, "the first user's two held requests")
        theirs = os.path.join(tmpdir_k, "theirs")
        os.makedirs(theirs)
        os.chmod(theirs, 0o777)
        # the other user: two more fill the total, the next is refused
        # by it (the broadest cap that is full)
        out = as_user(other, hold, b, theirs, host, 2, 1, "/b", False)
    finally:
        Recorder.hold.set()
        first.join(120)
    per_user = ("HTTP/1.1 503 Service Unavailable | a connection refused: this user's runs have 2 "
                "connections open through the egress proxy, their most "
                "([egress] connections_per_user)")
    total = ("HTTP/1.1 503 Service Unavailable | a connection refused: the egress proxy serves 4 "
             "connections for all users already, its most ([egress] connections)")
    ok = "HTTP/1.1 200 OK | hello from /hold"
    assert result["out"].splitlines() == [per_user, ok, ok], result
    assert out.splitlines() == [total] + ["HTTP/1.1 200 OK | hello from /b"] * 2, out
    log = b.read_log()
    assert "connections_per_user" in log and "([egress] connections)" in log, log
