"""No snippet can answer a card, save or revoke a grant, or read the audit
trail through the broker: a connection made from inside a run is refused
before hello is answered (`from-a-run`), and the attempt is audited.

The broker runs as root (snippets of a root client run as `nobody`) with a
socket every uid may reach, so the snippet's connect() succeeds and only
the broker's check stands between it and its own card.  A control run of
the same client code as `nobody`, outside any run, is served.
"""
import json
import os
import pwd
import sqlite3
import subprocess
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG = os.path.join(ROOT, "client", "python")
OPEN_SOCKET = "[broker]\nsocket_mode = 0666\n"

# The hostile snippet: the Python client, put on sys.path by the snippet
# itself (python3 runs isolated: no PYTHONPATH), tries everything a client
# may do.  ATTEMPTS runs in the snippet and in a setsid'd, double-forked
# orphan of it.
ATTEMPTS = r"""
import json, os, sys, time
sys.path.insert(0, %(pkg)r)
import kotoba_broker as kb
SOCK = %(sock)r

def attempt(fn):
    try:
        fn()
        return "served"
    except kb.KotobaError as e:
        return e.code

def answer_own_card_always():
    with kb.Broker(socket_path=SOCK, channel=True) as b:
        b.run("print(1)", on_card=lambda card: kb.ALWAYS)

def revoke():
    with kb.Broker(socket_path=SOCK, channel=False) as b:
        b.revoke()

def read_audit():
    with kb.Broker(socket_path=SOCK, channel=False) as b:
        b.audit_tail()

def attempts():
    return {"always": attempt(answer_own_card_always), "revoke": attempt(revoke),
            "audit": attempt(read_audit)}
"""

SNIPPET = ATTEMPTS + r"""
res = {"snippet": attempts()}
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    middle = os.getpid()
    if os.fork() == 0:
        os.close(r)
        while os.getppid() == middle:  # until the middle one exits: reparented to the worker
            time.sleep(0.01)
        os.write(w, json.dumps({"ppid": os.getppid(), **attempts()}).encode())
        os._exit(0)
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    data += chunk
res["orphan"] = json.loads(data)
print(json.dumps(res))
"""


def run_approved(broker, code):
    """Runs code with a card answered once (the approved profile)."""
    c = broker.client(channel=True)
    cards = []

    def on_card(cl, m):
        cards.append(m)
        cl.send({"type": "answer", "card": m["card"], "choice": "once"})

    c.exec(code, cwd="/")
    out = c.until_end(on_card=on_card)
    c.close()
    assert len(cards) == 1
    return out


def grants_and_connect_rows(broker):
    db = sqlite3.connect(os.path.join(broker.state, "kotoba.db"))
    try:
        grants = db.execute("select uid, family from grants").fetchall()
        rows = db.execute("select uid, event, decision, labels, profile from audit "
                          "where event = 'connect'").fetchall()
    finally:
        db.close()
    return grants, rows


@pytest.fixture
def open_broker(make_broker):
    b = make_broker(config=OPEN_SOCKET).start()
    os.chmod(b.dir, 0o755)
    yield b
    b.stop()
    assert "ERROR: AddressSanitizer" not in b.read_log(), b.read_log()
    assert "runtime error:" not in b.read_log(), b.read_log()


def test_control_the_same_client_outside_a_run_is_served(open_broker):
    """As `nobody`, the snippets' uid, but not from inside a run: served.
    So the refusal below is about where the connection comes from."""
    nobody = pwd.getpwnam("nobody")
    code = ATTEMPTS % {"pkg": PKG, "sock": open_broker.socket} + \
        "print(json.dumps({'audit': attempt(read_audit)}))\n"
    p = subprocess.run(["/usr/bin/python3", "-I", "-c", code], capture_output=True,
                       timeout=60, cwd="/",
                       preexec_fn=lambda: (os.setgid(nobody.pw_gid), os.setuid(nobody.pw_uid)))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"audit": "served"}


def test_an_approved_snippet_cannot_answer_its_own_card(open_broker):
    out = run_approved(open_broker, SNIPPET % {"pkg": PKG, "sock": open_broker.socket})
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, \
        (out["end"], out["stderr"])
    assert out["end"]["profile"] == "approved"
    res = json.loads(out["stdout"])
    refused = {"always": "from-a-run", "revoke": "from-a-run", "audit": "from-a-run"}
    assert res["snippet"] == refused, res
    orphan = dict(res["orphan"])
    assert orphan.pop("ppid") != 1, "the orphan was not kept below the worker"
    assert orphan == refused, res
    grants, rows = grants_and_connect_rows(open_broker)
    assert grants == [], "a snippet saved a grant: %r" % grants
    # one row per run, filed under the person's uid, naming its profile
    assert rows == [(0, "connect", "refused", "from-a-run", "approved")], rows
    log = open_broker.read_log()
    assert "refused: connection from inside run" in log


def test_a_grant_cannot_be_revoked_from_inside_a_run(open_broker):
    c = open_broker.client(channel=True)
    c.exec("print(1)", cwd="/")
    out = c.until_end(on_card=lambda cl, m: cl.send(
        {"type": "answer", "card": m["card"], "choice": "always"}))
    c.close()
    assert out["end"]["type"] == "exit"
    code = ATTEMPTS % {"pkg": PKG, "sock": open_broker.socket} + \
        "print(json.dumps({'revoke': attempt(revoke)}))\n"
    # with the grant saved, a plain snippet runs without a card (unattended
    # profile, where Unix sockets are refused by seccomp): use a labelled one
    # so a card is asked and answered once (approved profile, sockets allowed)
    out = run_approved(open_broker, code + "import subprocess  # labelled\n"
                       "subprocess.run(['true'])\n")
    assert out["end"]["type"] == "exit", (out["end"], out["stderr"])
    assert json.loads(out["stdout"].splitlines()[0]) == {"revoke": "from-a-run"}
    grants, _ = grants_and_connect_rows(open_broker)
    assert grants == [(0, "execute_code")], grants


def test_an_unattended_snippet_has_no_unix_socket_at_all(open_broker):
    # spelled past the pre-screen's raw-socket label (as the escape suite's
    # socket_path_unix case), so it runs unattended
    code = ("import errno, socket\n"
            "S = socket.SocketType\n"
            "try:\n"
            "    s = S(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "    s.connect(%r)\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n" % open_broker.socket)
    c = open_broker.client(channel=False)
    c.exec(code, cwd="/")
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["profile"] == "unattended", out["end"]
    assert out["stdout"].strip() in (b"EPERM", b"EACCES"), out
    grants, rows = grants_and_connect_rows(open_broker)
    assert grants == [] and rows == []


def test_a_normal_client_is_never_refused(open_broker):
    for _ in range(20):
        c = open_broker.client(channel=False)
        c.close()
    assert "refused" not in open_broker.read_log()


def _state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_peer_that_cannot_be_seen_is_refused(open_broker):
    """Fail closed: the process that called connect() has exited and been
    reaped before the broker looked, while another holds the connection."""
    import signal
    import socket
    import struct

    import msgpack

    open_broker.proc.send_signal(signal.SIGSTOP)
    # kill() returns before the stop takes effect: wait until the broker is
    # really stopped, so it cannot accept (and look) before the connector
    # has gone.
    deadline = time.monotonic() + 10
    while _state(open_broker.proc.pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # connects, hands the socket to its child, exits
            s = socket.socket(socket.AF_UNIX)
            s.connect(open_broker.socket)
            if os.fork() == 0:
                os.close(r)
                hello = msgpack.packb({"type": "hello", "version": 1, "channel": True})
                s.sendall(struct.pack(">I", len(hello)) + hello)
                os.write(w, b"x")  # the connector is gone by now (see below)
                s.settimeout(30)
                n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
                os.write(w, s.recv(n, socket.MSG_WAITALL))
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)  # reaped: its pid is free
        os.close(w)
        # The hello is sent while the broker is stopped: once it runs, it
        # may refuse and close at once, before a later send.
        data = os.read(r, 1)
    finally:
        open_broker.proc.send_signal(signal.SIGCONT)
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    err = msgpack.unpackb(data[1:], raw=False)
    assert err["type"] == "error" and err["code"] == "from-a-run", err
    assert "could not tell" in err["message"], err
    _, rows = grants_and_connect_rows(open_broker)
    assert rows == [(0, "connect", "refused", "unseen", "")], rows


def test_a_snippet_cannot_approve_itself_at_another_broker(open_broker, make_broker):
    """A run of one broker connecting to a second broker on the host: the
    second knows none of the first's pids, but sees its worker among the
    connecting process's ancestors."""
    other = make_broker(config=OPEN_SOCKET).start()
    os.chmod(other.dir, 0o755)
    code = ATTEMPTS % {"pkg": PKG, "sock": other.socket} + \
        "print(json.dumps(attempts()))\n"
    out = run_approved(open_broker, code)
    assert out["end"]["type"] == "exit", (out["end"], out["stderr"])
    assert json.loads(out["stdout"]) == {"always": "from-a-run", "revoke": "from-a-run",
                                         "audit": "from-a-run"}
    grants, rows = grants_and_connect_rows(other)
    assert grants == [] and rows and rows[0][1:4] == ("connect", "refused", "from-a-run"), rows
