"""A broker started as root serving several users (DESIGN.md, "Privilege
model"): the service user, kept capabilities, per-peer identity, allow
lists, reload, socket activation.  Needs root; skipped loudly otherwise."""
import errno
import grp
import os
import pickle
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time

import pytest

from conftest import BROKERD, KOTOBA, Broker, Client, SERVICE_USER, ensure_user, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the broker must start "
                                "as root to serve several users")

USERS = ("kotoba-ta", "kotoba-tb", "kotoba-tc")


@pytest.fixture(scope="module")
def users():
    return {name: ensure_user(name) for name in USERS}


def as_user(pw, fn, *args):
    """Runs fn(*args) in a child process that is `pw` (with its groups) and
    returns what it returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.initgroups(pw.pw_name, pw.pw_gid)
            os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
            os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
            result = ("ok", fn(*args))
        except BaseException as e:  # report anything to the parent
            result = ("err", repr(e))
        os.write(w, pickle.dumps(result))
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    assert kind == "ok", value
    return value


def cli(pw, broker, *args):
    groups = [g.gr_gid for g in grp.getgrall() if pw.pw_name in g.gr_mem]
    p = subprocess.run([KOTOBA, *args, "--socket", broker.socket], capture_output=True,
                       user=pw.pw_uid, group=pw.pw_gid, extra_groups=groups, timeout=60)
    return p


def run_code(socket_path, code, cwd, answer="once", channel=True):
    c = Client(socket_path)
    c.hello(channel=channel)
    c.exec(code, cwd=cwd)

    def on_card(cl, m):
        cl.send({"type": "answer", "card": m["card"], "choice": answer})

    out = c.until_end(on_card=on_card)
    c.close()
    return out["end"], out["stdout"].decode(), out["stderr"].decode()


@pytest.fixture
def work(users):
    d = tempfile.mkdtemp(prefix="kotoba-sys-")
    os.chmod(d, 0o755)
    homes = {}
    for name, pw in users.items():
        h = os.path.join(d, name)
        os.mkdir(h, 0o700)
        os.chown(h, pw.pw_uid, pw.pw_gid)
        homes[name] = h
    yield d, homes
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sysbroker(work):
    d, _ = work
    b = Broker(tempfile.mkdtemp(dir=d), config="[broker]\nallow_users = kotoba-ta kotoba-tb root\n")
    os.chmod(b.dir, 0o755)
    b.start()
    yield b
    b.stop()


def proc_status(pid):
    return dict(l.split(":", 1) for l in open("/proc/%d/status" % pid))


def monitor_pid(b):
    """The broker's child that is kotoba-monitor."""
    kids = open("/proc/%d/task/%d/children" % (b.proc.pid, b.proc.pid)).read().split()
    mons = [int(k) for k in kids if open("/proc/%s/comm" % k).read().strip() == "kotoba-monitor"]
    assert len(mons) == 1, (kids, b.read_log()[-2000:])
    return mons[0]


def test_broker_holds_no_capability_and_is_confined(sysbroker):
    """The process that parses every untrusted byte holds nothing: no
    capability in any set, no_new_privs, its seccomp filter; the monitor
    holds the three that start and stop workers as other users, and maps
    no parser's library."""
    if os.environ.get("KOTOBA_BROKER_WRAPPER"):
        # valgrind runs the broker on its own thread; /proc's main-thread
        # view of the credentials is the tool's, not the broker's
        pytest.skip("under a wrapper (valgrind) /proc shows the tool's credentials")
    svc = pwd.getpwnam(SERVICE_USER)
    b = proc_status(sysbroker.proc.pid)
    assert b["Uid"].split() == [str(svc.pw_uid)] * 4
    for s in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"):
        assert int(b[s], 16) == 0, (s, b[s])
    assert b["NoNewPrivs"].strip() == "1" and b["Seccomp"].strip() == "2", b
    m = proc_status(monitor_pid(sysbroker))
    kept = (1 << 5) | (1 << 6) | (1 << 7)  # CAP_KILL, CAP_SETGID, CAP_SETUID
    assert m["Uid"].split() == [str(svc.pw_uid)] * 4
    assert int(m["CapEff"], 16) == kept and int(m["CapPrm"], 16) == kept, m
    assert int(m["CapInh"], 16) == 0 and int(m["CapAmb"], 16) == 0, m
    assert int(m["CapBnd"], 16) == 0 and m["NoNewPrivs"].strip() == "1", m
    maps = open("/proc/%d/maps" % monitor_pid(sysbroker)).read()
    for lib in ("libmsgpack", "libpcre2", "libsqlite3"):
        assert lib not in maps, lib
    assert "libcap-ng" in maps  # the control: the reading sees libraries
    log = sysbroker.read_log()
    assert "capabilities kept: kill, setgid, setuid" in log, log
    assert "capabilities kept: none" in log, log


def test_socket_owned_by_service_user(sysbroker):
    st = os.stat(sysbroker.socket)
    assert st.st_uid == pwd.getpwnam(SERVICE_USER).pw_uid
    assert st.st_gid == grp.getgrnam(SERVICE_USER).gr_gid
    assert st.st_mode & 0o777 == 0o660


def test_each_snippet_runs_as_its_peer(sysbroker, users, work):
    _, homes = work
    for name in ("kotoba-ta", "kotoba-tb"):
        pw = users[name]
        end, out, _ = as_user(pw, run_code, sysbroker.socket,
                              "import os\nprint(os.getuid(), os.getgid())\n"
                              "open('made-by-snippet', 'w').write('x')\n"
                              "st = os.stat('made-by-snippet')\nprint(st.st_uid)\n"
                              "print(os.stat(os.environ['TMPDIR']).st_uid)",
                              homes[name])
        assert end["type"] == "exit", end
        uid, gid, owner, tmp_owner = out.split()
        assert int(uid) == pw.pw_uid and int(gid) == pw.pw_gid
        assert int(owner) == pw.pw_uid and int(tmp_owner) == pw.pw_uid
        assert os.stat(os.path.join(homes[name], "made-by-snippet")).st_uid == pw.pw_uid


def test_cannot_read_another_users_file(sysbroker, users, work):
    _, homes = work
    secret = os.path.join(homes["kotoba-tb"], "b-secret")
    with open(secret, "w") as f:
        f.write("b's secret")
    os.chown(secret, users["kotoba-tb"].pw_uid, users["kotoba-tb"].pw_gid)
    os.chmod(secret, 0o600)
    os.chmod(homes["kotoba-tb"], 0o755)
    end, out, err = as_user(users["kotoba-ta"], run_code, sysbroker.socket,
                            "try:\n    print(open(%r).read())\nexcept PermissionError:\n"
                            "    print('denied')" % secret, homes["kotoba-ta"])
    assert out.strip() == "denied"


def test_cwd_checked_as_the_snippet_user(sysbroker, users, work):
    _, homes = work
    end, _, _ = as_user(users["kotoba-ta"], run_code, sysbroker.socket, "print(1)",
                        homes["kotoba-tb"])
    assert end["type"] == "error" and end["code"] == "bad-cwd" and end["errno"] == 13


def test_root_peer_runs_as_root_user_never_root_nor_service_user(sysbroker, work):
    d, _ = work
    end, out, _ = run_code(sysbroker.socket, "import os\nprint(os.getuid())\n"
                           "try:\n    open(%r, 'rb')\n    print('db readable')\n"
                           "except PermissionError:\n    print('db denied')"
                           % os.path.join(sysbroker.state, "kotoba.db"), d)
    uid, db = out.split("\n", 1)
    assert int(uid) == pwd.getpwnam("nobody").pw_uid
    assert int(uid) != pwd.getpwnam(SERVICE_USER).pw_uid
    assert db.strip() == "db denied"


def test_grants_are_per_user(sysbroker, users, work):
    _, homes = work
    end, _, _ = as_user(users["kotoba-tb"], run_code, sysbroker.socket, "print(1)",
                        homes["kotoba-tb"], "always")
    assert end["type"] == "exit"
    assert b"execute_code" in cli(users["kotoba-tb"], sysbroker, "approvals", "ls").stdout
    assert b"no saved grants" in cli(users["kotoba-ta"], sysbroker, "approvals", "ls").stdout
    p = cli(users["kotoba-ta"], sysbroker, "approvals", "rm", "execute_code")
    assert b"no execute_code grant" in p.stdout
    assert b"execute_code" in cli(users["kotoba-tb"], sysbroker, "approvals", "ls").stdout
    # and A's snippets are still asked about
    end, _, _ = as_user(users["kotoba-ta"], run_code, sysbroker.socket, "print(1)",
                        homes["kotoba-ta"], "deny")
    assert end["code"] == "denied"


def test_cannot_answer_another_users_card(sysbroker, users, work):
    _, homes = work
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # never return into pytest from the forked child
        try:
            os.close(r)
            pw = users["kotoba-tb"]
            os.initgroups(pw.pw_name, pw.pw_gid)
            os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
            os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
            c = Client(sysbroker.socket)
            c.hello(channel=True)
            c.exec("print('b ran')", cwd=homes["kotoba-tb"])
            card = c.recv()
            os.write(w, card["card"].encode() + b"\n")
            # wait for the parent's attempt, then check the card is still
            # open: B withdraws it and hears `cancelled`
            os.read(go_r, 1)
            c.send({"type": "cancel", "id": 1})
            m = c.recv()
            os._exit(0 if m["code"] == "cancelled" else 1)
        finally:
            os._exit(2)
    os.close(w)
    card_id = os.read(r, 100).decode().strip()

    def steal(sock_path, cid):
        c = Client(sock_path)
        c.hello(channel=True)
        c.send({"type": "answer", "card": cid, "choice": "always"})
        return c.recv()["code"]

    assert as_user(users["kotoba-ta"], steal, sysbroker.socket, card_id) == "no-such-card"
    os.write(go_w, b"x")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "B's card did not survive A's answer"


def test_peer_outside_allow_lists_refused(sysbroker, users):
    p = cli(users["kotoba-tc"], sysbroker, "run", "-c", "print(1)", "--no-channel")
    assert p.returncode == 125
    assert b"not in allow_users or allow_groups" in p.stderr
    assert "refused" in sysbroker.read_log()


def test_sighup_changes_limit_for_next_snippet(work):
    d, _ = work
    b = Broker(tempfile.mkdtemp(dir=d), config="[limits]\noutput = 100000\n")
    os.chmod(b.dir, 0o755)
    b.start()
    try:
        code = "print('x' * 5000)"
        r = b.run_json(code)
        assert r["truncated"] is False and len(r["stdout"]) == 5001
        with open(os.path.join(b.dir, "broker.conf"), "w") as f:
            f.write("[limits]\noutput = 1000\n")
        b.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in b.read_log(), "the reload's log line")
        r = b.run_json(code)
        assert r["truncated"] is True and len(r["stdout"]) == 1000 and r["output_limit"] == 1000
        with open(os.path.join(b.dir, "broker.conf"), "w") as f:
            f.write("[limits]\noutput = lots\n")
        b.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload failed" in b.read_log(), "the failed reload's log line")
        assert "broker.conf:2" in b.read_log()
        assert b.run_json(code)["truncated"] is True
    finally:
        b.stop()


def test_config_error_names_file_and_line(tmpdir_k):
    path = os.path.join(tmpdir_k, "bad.conf")
    with open(path, "w") as f:
        f.write("[broker]\nsandbox = local\nmax_runs = many\n")
    p = subprocess.run([BROKERD, "--config", path, "--check-config"], capture_output=True)
    assert p.returncode == 78
    assert (path + ":3:").encode() in p.stderr and b"max_runs" in p.stderr


def test_missing_service_user_is_a_clear_error(tmpdir_k):
    path = os.path.join(tmpdir_k, "u.conf")
    with open(path, "w") as f:
        f.write("[broker]\nuser = no-such-kotoba-user\n")
    p = subprocess.run([BROKERD, "--config", path, "--socket", os.path.join(tmpdir_k, "s"),
                        "--state-dir", os.path.join(tmpdir_k, "st")], capture_output=True,
                       timeout=10)
    assert p.returncode != 0 and b"useradd" in p.stderr


def test_per_user_broker_serves_its_user_only(users, work):
    d, homes = work
    a, b = users["kotoba-ta"], users["kotoba-tb"]
    rundir = os.path.join(homes["kotoba-ta"], "run")
    os.mkdir(rundir, 0o700)
    os.chown(rundir, a.pw_uid, a.pw_gid)
    sock = os.path.join(rundir, "broker.sock")
    os.chmod(homes["kotoba-ta"], 0o755)
    proc = subprocess.Popen([BROKERD, "--socket", sock, "--state-dir",
                             os.path.join(rundir, "state")],
                            user=a.pw_uid, group=a.pw_gid, env={"HOME": homes["kotoba-ta"]},
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(sock), "the broker's socket")
        os.chmod(rundir, 0o755)  # let B reach the socket file to be refused by the broker
        os.chmod(sock, 0o777)
        end, out, _ = as_user(a, run_code, sock, "import os\nprint(os.getuid())",
                              homes["kotoba-ta"], "once", False)
        assert int(out) == a.pw_uid

        def try_b(path):
            c = Client(path)
            m = c.recv()
            return m["code"], m["message"]

        code, message = as_user(b, try_b, sock)
        assert code == "refused" and "serves uid %d only" % a.pw_uid in message
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"),
                    reason="systemd-socket-activate is not installed")
def test_socket_activation(work):
    d, _ = work
    sock = os.path.join(d, "activated.sock")
    state = os.path.join(d, "act-state")
    proc = subprocess.Popen(["systemd-socket-activate", "-l", sock, BROKERD, "--state-dir",
                             state], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(sock), "the broker's socket")
        end, out, _ = run_code(sock, "print(6*7)", d, channel=False)
        assert out == "42\n"
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_service_user_is_refused_at_accept(work):
    """A client running as the service user, whose files are every user's
    grants and the audit trail, is refused before anything else: logged,
    recorded, and nothing runs as it."""
    d, _ = work
    b = Broker(tempfile.mkdtemp(dir=d))  # no allow_users: anyone else may connect
    os.chmod(b.dir, 0o755)
    b.start()
    try:
        svc = pwd.getpwnam(SERVICE_USER)
        p = cli(svc, b, "run", "-c", "import os; print(os.getuid())", "--no-channel",
                "--cwd", "/")
        assert p.returncode != 0 and not p.stdout, p
        assert b"service user" in p.stderr, p.stderr
        wait_for(lambda: "refused: a client running as the service user" in b.read_log(),
                 "the refusal's log line")
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(b.state, "kotoba.db"), uri=True)
        rows = db.execute("SELECT uid, event, decision, labels FROM audit").fetchall()
        db.close()
        assert (svc.pw_uid, "connect", "refused", "service-user") in rows, rows
        assert not [r for r in rows if r[0] == svc.pw_uid and r[1] != "connect"], rows
        # control: root is served by the same broker
        assert b.run_json("print(1)")["exit"] == 0
    finally:
        b.stop()


def test_a_worker_start_that_fails_in_the_monitors_child_names_its_step(users, work):
    """The monitor answers as soon as the worker's process exists; what
    fails after that (here the exec, as the peer, of a worker the peer
    may not reach) still ends the run as a setup error naming the step,
    with the kernel's errno, and the broker serves on."""
    d, homes = work
    svc = pwd.getpwnam(SERVICE_USER)
    hidden = os.path.join(d, "hidden")
    os.mkdir(hidden)
    # The service user passes; the peer, in the socket group, does not.
    os.chown(hidden, svc.pw_uid, 0)
    os.chmod(hidden, 0o700)
    worker = os.path.join(hidden, "kotoba-worker")
    shutil.copy2(os.path.join(os.path.dirname(BROKERD), "kotoba-worker"), worker)
    os.chmod(worker, 0o755)
    b = Broker(tempfile.mkdtemp(dir=d),
               config="[broker]\nallow_users = kotoba-ta\nworker = %s\n" % worker)
    os.chmod(b.dir, 0o755)
    b.start()
    try:
        for _ in range(2):  # and again: the broker is still serving
            end, out, _ = as_user(users["kotoba-ta"], run_code, b.socket, "print(1)",
                                  homes["kotoba-ta"])
            assert end["type"] == "error" and end["code"] == "setup-failed", end
            assert end["step"] == "worker" and end["errno"] == errno.EACCES, end
            assert "cannot exec kotoba-worker" in end["message"], end
            assert out == ""
        assert b.alive()
    finally:
        b.stop()
