"""Fixtures that start a real kotoba-brokerd on a temporary socket.

Every test talks to a real broker process, which starts the real
kotoba-worker, which execs the real /usr/bin/python3.  KOTOBA_BUILD points
at the build directory (the sanitizer build reuses these tests).
"""
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import msgpack
import pytest

BUILD = os.environ.get("KOTOBA_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
BROKERD = os.path.join(BUILD, "kotoba-brokerd")
KOTOBA = os.path.join(BUILD, "kotoba")
# A command the broker runs under, e.g. valgrind (make check-valgrind).
WRAPPER = shlex.split(os.environ.get("KOTOBA_BROKER_WRAPPER", ""))
# KOTOBA_WARM=yes or no: every broker gets [sandbox] warm so (unless its
# test sets warm itself), so that a suite runs on both paths.
WARM = os.environ.get("KOTOBA_WARM", "")


SERVICE_USER = "kotoba"


def ensure_service_user():
    """As root the broker becomes its service user, `kotoba` by default,
    with a socket group of the same name; create both when missing, as an
    install would."""
    if os.geteuid() != 0:
        return
    if subprocess.run(["getent", "group", SERVICE_USER], capture_output=True).returncode:
        subprocess.run(["groupadd", "--system", SERVICE_USER], check=True)
    if subprocess.run(["getent", "passwd", SERVICE_USER], capture_output=True).returncode:
        subprocess.run(["useradd", "--system", "--gid", SERVICE_USER, "--no-create-home",
                        "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                        SERVICE_USER], check=True)


ensure_service_user()


def ensure_user(name):
    """A login-less test user in the socket group, created when missing."""
    if subprocess.run(["getent", "passwd", name], capture_output=True).returncode:
        subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "-G", SERVICE_USER, name], check=True)
    return pwd.getpwnam(name)


# How long a test waits for a condition before it fails.  Only a backstop:
# every wait ends as soon as its condition holds, so it may be generous
# (a sanitizer build under `make check-stress` is many times slower).
BACKSTOP_S = 120


def run_processes(broker_pid):
    """The broker's children that belong to runs (its workers, and what a
    dead worker left to it): all of them but its helpers, a system
    broker's monitor and the egress proxy."""
    out = []
    with open("/proc/%d/task/%d/children" % (broker_pid, broker_pid)) as f:
        for pid in f.read().split():
            try:
                with open("/proc/%s/comm" % pid) as c:
                    if c.read().strip() in ("kotoba-monitor", "kotoba-egress"):
                        continue
            except OSError:
                continue
            out.append(int(pid))
    return out


def wait_for(cond, what, timeout=BACKSTOP_S):
    """Polls cond() until it is true; fails naming what it waited for."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("waited %d s for %s" % (timeout, what))
        time.sleep(0.02)
    return True


class Broker:
    """One broker process and its temporary directories."""

    def __init__(self, tmp, extra_args=(), env=None, config=None):
        self.dir = tmp
        self.socket = os.path.join(tmp, "broker.sock")
        self.state = os.path.join(tmp, "state")
        os.makedirs(self.state, exist_ok=True)
        self.log_path = os.path.join(tmp, "broker.log")
        self.args = [BROKERD, "--socket", self.socket, "--state-dir", self.state, "--verbose"]
        if WARM and "warm =" not in (config or ""):
            config = (config or "") + "\n[sandbox]\nwarm = %s\n" % WARM
        if config is not None:
            path = os.path.join(tmp, "broker.conf")
            with open(path, "w") as f:
                f.write(config)
            self.args += ["--config", path]
        self.args += list(extra_args)
        self.env = dict(env if env is not None else os.environ)
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(WRAPPER + self.args, stdout=self.log, stderr=self.log,
                                     env=self.env)
        # valgrind takes seconds just to load the broker
        deadline = time.monotonic() + (60 if WRAPPER else 10)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited at start:\n" + self.read_log())
            if os.path.exists(self.socket) and self.answers():
                return self
            time.sleep(0.02)
        self.proc.kill()  # not left behind when no fixture will stop it
        self.proc.wait()
        raise RuntimeError("broker did not start:\n" + self.read_log())

    def answers(self):
        """Whether a hello gets an answer (a welcome, or a refusal for a peer
        the broker does not serve): the broker listens before its store is
        open, and one that then fails at start never answers."""
        try:
            c = Client(self.socket)
            try:
                c.send({"type": "hello", "version": 1, "channel": False, "client": "pytest"})
                return c.recv()["type"] in ("welcome", "error")
            finally:
                c.sock.close()
        except (OSError, EOFError):
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                # valgrind's leak check at exit takes a while: let it finish
                self.proc.wait(60 if WRAPPER else 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def alive(self):
        return self.proc.poll() is None

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kotoba(self, *args, input=None, timeout=60, env=None):
        """Runs the real CLI against this broker."""
        return subprocess.run([KOTOBA, *args, "--socket", self.socket], input=input,
                              capture_output=True, timeout=timeout, env=env)

    def run_json(self, code, *args, timeout=60, approve=False):
        """Runs code through the CLI; unattended (no channel) unless approve,
        which answers the card `once` (the approved profile)."""
        gate = ["--answer", "once"] if approve else ["--no-channel"]
        p = self.kotoba("run", "-c", code, "--json", *gate, *args, timeout=timeout)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            raise AssertionError("not JSON: %r / stderr %r" % (p.stdout, p.stderr))
        out["_status"] = p.returncode
        return out

    def client(self, hello=True, channel=False):
        c = Client(self.socket)
        if hello:
            c.hello(channel=channel)
        return c


class Client:
    """A raw protocol client: frames built by hand with python3-msgpack."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        # connect blocking: a non-blocking AF_UNIX connect fails with EAGAIN
        # when the listen backlog is momentarily full
        self.sock.connect(path)
        self.sock.settimeout(30)
        self.welcome = None

    def send(self, obj):
        self.send_raw(msgpack.packb(obj, use_bin_type=True))

    def send_raw(self, payload, length=None):
        n = len(payload) if length is None else length
        self.sock.sendall(struct.pack(">I", n) + payload)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed")
            buf += chunk
        return buf

    def recv(self):
        n = struct.unpack(">I", self.recv_exact(4))[0]
        return msgpack.unpackb(self.recv_exact(n), raw=False)

    def closed(self):
        """True when the broker closed the connection (after any queued frames)."""
        try:
            while True:
                self.recv()
        except EOFError:
            return True
        except OSError:
            return True

    def hello(self, channel=False):
        self.send({"type": "hello", "version": 1, "channel": channel, "client": "pytest"})
        self.welcome = self.recv()
        assert self.welcome["type"] == "welcome", self.welcome
        return self.welcome

    def exec(self, code, id=1, **fields):
        msg = {"type": "exec", "id": id, "code": code, "cwd": fields.pop("cwd", os.getcwd())}
        msg.update(fields)
        self.send(msg)

    def until_end(self, id=1, on_card=None):
        """Collects frames for one run until its exit or error."""
        out = {"stdout": b"", "stderr": b"", "frames": []}
        while True:
            m = self.recv()
            out["frames"].append(m)
            if m["type"] == "output" and m["id"] == id:
                out[m["stream"]] += m["data"]
            elif m["type"] == "card" and on_card:
                on_card(self, m)
            elif m["type"] in ("exit", "error") and m.get("id") == id:
                out["end"] = m
                return out

    def first_line(self):
        """Reads frames until the snippet's first stdout line, and returns it."""
        buf = b""
        while b"\n" not in buf:
            m = self.recv()
            assert m["type"] in ("started", "output"), m
            if m["type"] == "output" and m["stream"] == "stdout":
                buf += m["data"]
        return buf.split(b"\n")[0].decode()

    def snippet_pid(self):
        """Reads frames until the snippet's first stdout line: its pid."""
        return int(self.first_line())

    def close(self):
        self.sock.close()


@pytest.fixture
def tmpdir_k():
    d = tempfile.mkdtemp(prefix="kotoba-test-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def broker(tmpdir_k):
    b = Broker(tmpdir_k).start()
    yield b
    b.stop()
    assert "ERROR: AddressSanitizer" not in b.read_log(), b.read_log()
    assert "runtime error:" not in b.read_log(), b.read_log()


@pytest.fixture
def make_broker(tmpdir_k):
    made = []

    def make(*args, **kw):
        sub = tempfile.mkdtemp(dir=tmpdir_k)
        os.chmod(sub, 0o755)
        b = Broker(sub, *args, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()
