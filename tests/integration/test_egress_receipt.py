"""Every decision of the egress proxy on the run's receipt, for real: a
real broker and kotoba-egress, unattended runs, and HTTP and HTTPS servers
this test starts on the host's loopback (allow_hosts lists 127.0.0.1 for
them).  Nothing else is contacted.  The proxy sends each refusal's event
to the broker before it answers the run, and the broker takes what is
queued before it reports the run's end: no test waits for anything but the
run's own end."""
import os
import re
import sqlite3
import sys

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
import kotoba_broker as kb  # noqa: E402
from conftest import wait_for  # noqa: E402
from test_audit import copy_of, verify  # noqa: E402
from test_egress import (CAP, GET, Recorder, clean_log, egress_broker, http_server,  # noqa: F401,E402
                         https_server, send, workdir)

PROXY = {"by": "egress proxy", "seen_by": "proxy", "inferred": False}
POST_REFUSED = "POST %s refused: a grant covers plain GET requests"
# The pre-screen refuses a snippet that plainly sends a body; the code in a
# module of the working directory walks past it, as an attacker's could.
IMPORT = "import sys\nsys.path.insert(0, '.')\nimport payload\n"


def run_json(b, tmp, code):
    r = b.run_json(IMPORT, "--cwd", workdir(tmp, code))
    clean_log(b)
    return r


def requests_of(r):
    return [e for e in r["blocked"] if e["kind"] == "request"]


def test_a_refused_post_over_http_is_on_the_receipt(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/upload" % http_server.server_address[1]
    r = run_json(b, tmpdir_k, send("POST", url))
    assert r["_status"] == 0 and r["stdout"] == "405 %s\n" % (POST_REFUSED % url), r
    assert r["blocked"] == [dict(kind="request", target=POST_REFUSED % url, count=1, **PROXY)]
    assert r["blocked_total"] == 1 and Recorder.seen == [], r
    # `kotoba run` says it in plain words, on stderr.
    p = b.kotoba("run", "-c", IMPORT, "--no-channel", "--cwd", workdir(tmpdir_k, send("POST", url)))
    assert p.returncode == 0, p.stderr
    assert ("kotoba: note: the run succeeded; the sandbox refused 1 operation, which the "
            "program handled: %s (egress proxy)\n" % (POST_REFUSED % url)).encode() in p.stderr
    assert Recorder.seen == []


def test_a_refused_post_inside_https_is_on_the_receipt(make_broker, tmpdir_k, https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    url = "https://127.0.0.1:%d/upload" % https_server.server_address[1]
    r = run_json(b, tmpdir_k, send("POST", url) + "raise SystemExit(4)\n")
    assert r["_status"] == 4 and r["exit"] == 4, r
    assert r["blocked"] == [dict(kind="request", target=POST_REFUSED % url, count=1, **PROXY)]
    assert Recorder.seen == []


def test_the_exit_frame_carries_the_entry(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/upload" % http_server.server_address[1]
    c = b.client()
    c.exec(IMPORT, cwd=workdir(tmpdir_k, send("PUT", url)))
    end = c.until_end()["end"]
    c.close()
    assert end["type"] == "exit" and end["profile"] == "unattended", end
    assert end["blocked"] == [dict(kind="request", count=1, **PROXY,
                                   target="PUT %s refused: a grant covers plain GET requests"
                                   % url)], end
    assert end["blocked_total"] == 1, end


def test_a_private_address_refused_is_on_the_receipt(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker, allow="example.invalid")
    url = "http://127.0.0.1:%d/" % http_server.server_address[1]
    r = run_json(b, tmpdir_k, send("GET", url))
    [e] = requests_of(r)
    assert e["target"].startswith("GET %s refused: the host resolves to a loopback" % url), e
    assert r["stdout"] == "403 %s\n" % e["target"], r
    assert Recorder.seen == []


def test_the_connection_cap_is_on_the_receipt(make_broker, tmpdir_k):
    b = egress_broker(make_broker)
    r = run_json(b, tmpdir_k, CAP)
    assert r["stdout"] == "HTTP/1.1 503 Service Unavailable\n", r
    assert requests_of(r) == [dict(kind="request", count=1, **PROXY, target="a connection "
                                   "refused: this run has too many connections open through "
                                   "the egress proxy (32)")], r


TUNNEL = """
import urllib.request
try:
    urllib.request.urlopen('%s', timeout=30)
except OSError as e:
    print('failed', e)
"""


def test_a_refused_connect_is_on_the_receipt(make_broker, tmpdir_k, https_server):
    b = egress_broker(make_broker, "deny_hosts = 127.0.0.1\n", allow="example.invalid")
    port = https_server.server_address[1]
    r = run_json(b, tmpdir_k, TUNNEL % ("https://127.0.0.1:%d/" % port))
    assert r["stdout"].startswith("failed") and "403" in r["stdout"], r
    [e] = requests_of(r)
    assert e["target"].startswith("CONNECT 127.0.0.1:%d refused: " % port), e
    assert Recorder.seen == []


FLOOD = """
import urllib.request, urllib.error
for i in range(40):
    req = urllib.request.Request('%s/%%d' %% i, data=b'x', method='POST')
    try:
        urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as e:
        e.read()
print('done')
"""


def test_a_flood_of_refusals_is_capped_and_counted(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d" % http_server.server_address[1]
    r = run_json(b, tmpdir_k, FLOOD % url)
    assert r["stdout"] == "done\n", r
    assert [e["target"] for e in r["blocked"]] == \
        [POST_REFUSED % ("%s/%d" % (url, i)) for i in range(16)], r
    assert r["blocked_total"] == 40 and Recorder.seen == [], r


def test_an_allowed_get_is_not_on_the_receipt(make_broker, tmpdir_k, http_server):
    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/ok" % http_server.server_address[1]
    r = run_json(b, tmpdir_k, send("GET", url))
    assert r["stdout"] == "sent\n" and r["blocked"] == [] and r["blocked_total"] == 0, r
    assert Recorder.seen == [("GET", "/ok", b"")]


# ---- the escalation card -------------------------------------------------

POST_OR_FAIL = """
import urllib.request, urllib.error
req = urllib.request.Request('%s', data=b'SECRET-BODY', method='POST')
try:
    urllib.request.urlopen(req, timeout=30).read()
    print('sent')
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
    raise SystemExit(4)
"""


def test_a_failed_run_with_a_refused_request_brings_the_card(make_broker, tmpdir_k,
                                                             http_server):
    """A grant run that failed after the proxy refused its POST: the
    escalation card on a real pty; `r` runs it again approved, with the
    host's network, and only then does the server see the POST."""
    from test_card_tty import assert_shown_in_order, drive, grant

    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/upload" % http_server.server_address[1]
    work = workdir(tmpdir_k, POST_OR_FAIL % url)
    os.chmod(work, 0o777)
    grant(b, work)
    path = os.path.join(tmpdir_k, "snippet.py")
    with open(path, "w") as f:
        f.write(IMPORT)
    snaps, status, raw = drive(b, path, work, None, again="r")
    text = raw.decode(errors="replace")
    assert status == 0, text
    assert_shown_in_order(snaps, [
        "== The sandbox stopped this snippet: run it again? ==",
        "  [r] Run it again with your permissions (the approved profile)"])
    shown = "\n".join(r for s in snaps for r in s)
    assert "Stopped:     POST %s refused: a grant covers" % url in shown, shown
    assert "kotoba: the sandbox stopped 1 operation: %s (egress proxy)" % (POST_REFUSED % url) \
        in text, text
    assert "405 %s" % (POST_REFUSED % url) in text and "sent" in text, text
    assert Recorder.seen == [("POST", "/upload", b"SECRET-BODY")]
    clean_log(b)


def test_a_refused_request_in_a_run_that_succeeded_brings_no_card(make_broker, tmpdir_k,
                                                                  http_server):
    from test_card_tty import drive, grant

    b = egress_broker(make_broker)
    url = "http://127.0.0.1:%d/upload" % http_server.server_address[1]
    work = workdir(tmpdir_k, send("POST", url))
    os.chmod(work, 0o777)
    grant(b, work)
    path = os.path.join(tmpdir_k, "snippet.py")
    with open(path, "w") as f:
        f.write(IMPORT)
    snaps, status, raw = drive(b, path, work, None, again=None)
    text = raw.decode(errors="replace")
    assert status == 0 and not snaps, text
    assert "kotoba: note: the run succeeded; the sandbox refused 1 operation" in text, text
    assert Recorder.seen == []


# ---- the audit trail -----------------------------------------------------

# A GET through the proxy read to the end of the connection: the proxy
# sends the connection's traffic before it closes the run's side, so the
# byte count is the broker's by the time the snippet has read it all.
GET_TO_EOF = """
import os, socket
host, port = os.environ['http_proxy'].split('//')[1].rstrip('/').rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=30)
s.sendall(b'GET %s HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n')
got = b''
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(len(got), got.split(b'\\r\\n')[0].decode())
"""


def exit_rows(b, tmp, n=1):
    """The exit rows of the audit trail, each with its `blocked` column
    decoded (AUDIT.md): read from a copy as an auditor takes it, once the
    broker has written n of them (it writes a run's row after its exit
    frame)."""
    out = []

    def written():
        db = sqlite3.connect(copy_of(b, tmp, "net.db"))
        rows = db.execute("SELECT seq, blocked FROM audit WHERE event = 'exit' ORDER BY seq")
        out[:] = [(seq, msgpack.unpackb(blob) if blob else {}) for seq, blob in rows]
        db.close()
        return len(out) >= n

    wait_for(written, "%d exit rows in the audit trail" % n)
    return out


def test_the_exit_row_names_hosts_methods_bytes_and_refusals(make_broker, tmpdir_k,
                                                             http_server):
    b = egress_broker(make_broker)
    port = http_server.server_address[1]
    url = "http://127.0.0.1:%d/upload" % port
    code = send("POST", url) + GET_TO_EOF % ("http://127.0.0.1:%d/x" % port, port)
    r = run_json(b, tmpdir_k, code)
    out = r["stdout"].split("\n")
    assert out[0] == "405 %s" % (POST_REFUSED % url) and out[1].endswith(" HTTP/1.1 200 OK"), r
    got = int(out[1].split()[0])
    [(_, row)] = exit_rows(b, tmpdir_k)
    assert row["type"] == "receipt" and row["blocked_total"] == 1, row
    assert row["blocked"] == [dict(kind="request", target=POST_REFUSED % url, count=1, **PROXY)]
    [use] = row["network"]
    assert use["host"] == "127.0.0.1:%d" % port and use["methods"] == "GET", use
    assert use["requests"] == 1 and use["bytes_in"] == got and use["bytes_out"] > 0, use
    assert Recorder.seen == [("GET", "/x", b"")]
    # kotoba audit tail sums it on the row, audit show lists it.
    [(seq, _)] = exit_rows(b, tmpdir_k)
    tail = b.kotoba("audit", "tail").stdout.decode()
    assert "blocked 1 network 1 host %d B out %d B in" % (use["bytes_out"], got) in tail, tail
    shown = b.kotoba("audit", "show", str(seq)).stdout.decode().split("\n")
    assert "  request      %s  x1  by egress proxy, seen by proxy" % (POST_REFUSED % url) \
        in shown, shown
    assert "  network      127.0.0.1:%d GET  1 request, %d bytes out, %d bytes in" \
        % (port, use["bytes_out"], got) in shown, shown
    # ... and the Python package gives the same.
    with kb.Broker(socket_path=b.socket) as c:
        row = c.audit_show(seq)
    assert (row.net_hosts, row.net_bytes_out, row.net_bytes_in) == (1, use["bytes_out"], got)
    assert row.network == (kb.NetUse("127.0.0.1:%d" % port, "GET", 1, use["bytes_out"], got),)
    # Hash-chained like every row: both verifiers pass the trail as it is.
    status, problems, _ = verify(copy_of(b, tmpdir_k, "verify.db"))
    assert status == 0 and not problems, problems


def test_a_get_over_https_is_on_the_exit_row(make_broker, tmpdir_k, https_server):
    b = egress_broker(make_broker, "upstream_ca_file = %s\n" % https_server.ca_file)
    port = https_server.server_address[1]
    r = run_json(b, tmpdir_k, GET % ("https://127.0.0.1:%d/secure" % port))
    assert r["stdout"] == "200 hello from /secure\n" and r["blocked"] == [], r
    [(_, row)] = exit_rows(b, tmpdir_k)
    assert "blocked" not in row, row
    [use] = row["network"]
    assert use["host"] == "127.0.0.1:%d" % port and use["methods"] == "GET", use
    assert use["requests"] == 1 and use["bytes_out"] > 0, use


# ---- a proxy that lies -----------------------------------------------------

# In place of kotoba-egress, beside a copy of the broker (which starts the
# program of that name beside itself): a proxy that says it serves, and on
# each run's listener sends the broker every kind of bad event, two valid
# refusals with bytes no receipt may carry raw, and a flood of traffic to
# 300 hosts; then it answers the run's one connection, so the run ends
# after all of it was sent.
LIAR = r'''#!/usr/bin/python3
import os, socket, struct
EV = "=IIQQQQ16s256s"
link = socket.socket(fileno=3)
os.close(4)
link.send(b"S")

def ev(run, kind=1, text=b"x", method=b"GET", version=1, n=(0, 0, 0)):
    return struct.pack(EV, version, kind, run, *n, method, text)

while True:
    msg, anc, _, _ = link.recvmsg(64, socket.CMSG_SPACE(4))
    if not msg:
        break
    fds = [int.from_bytes(d[:4], "little") for _, _, d in anc]
    op, uid, run = struct.unpack("=IIQ", msg[:16])
    if op != 1 or not fds:
        continue
    for bad in (b"", b"x", ev(run)[:-1], ev(run) + b"y", ev(run, version=2), ev(run, kind=9),
                ev(run + 1000), ev(run, text=b"A" * 256), ev(run, text=b""),
                ev(run, kind=2, method=b"M" * 16, text=b"h:1")):
        link.send(bad)
    link.send(ev(run, text=b"GET http://x/\x1b[2J refused: a test"))
    link.send(ev(run, text=b"GET http://x/\xff\xfe refused: a test"))
    for i in range(300):
        link.send(ev(run, kind=2, text=b"h%d:80" % i, n=(1, 10, 20)))
    listener = socket.socket(fileno=fds[0])
    listener.setblocking(True)
    c, _ = listener.accept()
    c.sendall(b"done")
    c.close()
'''

TALK = """
import os, socket
host, port = os.environ['http_proxy'].split('//')[1].rstrip('/').rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=30)
print(s.recv(16).decode())
"""


def test_the_broker_checks_every_event_of_a_lying_proxy(make_broker, tmpdir_k):
    import shutil
    from conftest import BUILD

    bin_dir = os.path.join(tmpdir_k, "bin")
    os.mkdir(bin_dir)
    os.chmod(bin_dir, 0o755)
    for program in ("kotoba-brokerd", "kotoba-monitor"):
        shutil.copy(os.path.join(BUILD, program), bin_dir)
    with open(os.path.join(bin_dir, "kotoba-egress"), "w") as f:
        f.write(LIAR)
    os.chmod(os.path.join(bin_dir, "kotoba-egress"), 0o755)
    b = make_broker(config="[broker]\nworker = %s\n" % os.path.join(BUILD, "kotoba-worker"))
    b.args[0] = os.path.join(bin_dir, "kotoba-brokerd")
    b.start()
    r = run_json(b, tmpdir_k, TALK)
    assert r["_status"] == 0 and r["stdout"] == "done\n", r["stderr"]
    assert [e["target"] for e in r["blocked"]] == [
        "GET http://x/?[2J refused: a test", "GET http://x/?? refused: a test"], r
    assert r["blocked_total"] == 2 and all(e["seen_by"] == "proxy" for e in r["blocked"])
    [(_, row)] = exit_rows(b, tmpdir_k)
    hosts = row["network"]
    assert [u["host"] for u in hosts] == ["h%d:80" % i for i in range(15)] + ["*"], hosts
    assert sum(u["requests"] for u in hosts) == 300 and hosts[-1]["bytes_in"] == 285 * 20
    # Ten bad events (an empty one first, which is no end of the link),
    # each dropped; a flood of them is a few log lines.
    log = b.read_log()
    run_id = int(re.search(r"run=(\d+) network: h0:80 GET", log).group(1))
    dropped = [line.split(": ", 1)[1] for line in log.split("\n")
               if "an event from the egress proxy dropped" in line]
    assert dropped == [
        "an event from the egress proxy dropped (1 so far): not an event's size (run=0)",
        "an event from the egress proxy dropped (2 so far): not an event's size (run=0)",
        "an event from the egress proxy dropped (4 so far): not an event's size (run=0)",
        "an event from the egress proxy dropped (8 so far): its text is not a string (run=%d)"
        % run_id], dropped
    assert b.alive()
    # and it serves the next run as before
    assert b.run_json("print(6 * 7)")["stdout"] == "42\n"
