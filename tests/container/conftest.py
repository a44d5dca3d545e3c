"""Fixtures for sandbox = docker against a real engine: podman as a client
of a rootful API service (tests/container/setup.sh), a real broker, worker
and CLI (the integration suite's Broker and Client, loaded from
tests/integration/conftest.py).

`make check-container` runs setup.sh first and sets KOTOBA_CT_READY (or
KOTOBA_CT_SKIP with the reason when the tests cannot run here); run by hand,
the session runs setup.sh itself and teardown.sh at its end.
"""
import fcntl
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "kotoba_integration_kit", os.path.join(HERE, "..", "integration", "conftest.py"))
kit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kit)

Broker = kit.Broker
Client = kit.Client

CT_USER = "kotoba-ct"
RUN_DIR = os.environ.get("KOTOBA_CT_RUN", "/run/kotoba-test-engine")
SOCK = os.environ.get("KOTOBA_CT_SOCKET", os.path.join(RUN_DIR, "podman.sock"))
URL = "unix://" + SOCK
IMAGE = os.environ.get("KOTOBA_CT_IMAGE", "localhost/kotoba-test-python:bookworm")
# Working directories live here on the host and, mounted at the same path,
# in the container (not under /tmp: the container has its own /tmp).
CWD_BASE = os.environ.get("KOTOBA_CT_CWD_BASE", "/var/tmp")

MEMORY = "256M"
CONFIG = """[broker]
sandbox = docker
root_user = {user}
[docker]
cli = {cli}
image = {image}
url = {url}
memory = {memory}
processes = 64
nproc = 1024
open_files = 1024
idle = {idle}
"""


def docker_config(cli="podman", image=IMAGE, url=URL, idle="30s"):
    return CONFIG.format(user=CT_USER, cli=cli, image=image, url=url, memory=MEMORY, idle=idle)


# ---- the engine, as the tests see it ------------------------------------------

class Engine:
    """podman --remote on the test service: what is really there."""

    def __init__(self, url=URL):
        self.url = url

    def podman(self, *args, check=True, timeout=60):
        p = subprocess.run(["podman", "--remote", "--url", self.url, *args],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode:
            raise AssertionError("podman %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                              p.stderr.strip()))
        return p

    def names(self, uid, running_only=False):
        """Names of the containers labelled with that user's uid, or
        named for it (kotoba-UID-...)."""
        args = ["ps", "--format", "{{.Names}}"]
        if not running_only:
            args.insert(1, "--all")
        found = set()
        for flt in ("label=org.kotoba.uid=%d" % uid, "name=^kotoba-%d-" % uid):
            out = self.podman(*args, "--filter", flt).stdout.split()
            found.update(out)
        return found

    def inspect(self, name):
        """The container's state, or None when the engine has no such container."""
        p = self.podman("container", "inspect", name, check=False)
        if p.returncode:
            return None
        return json.loads(p.stdout)[0]

    def running(self, name):
        info = self.inspect(name)
        return bool(info and info["State"]["Running"])

    def remove(self, names):
        for n in names:
            self.podman("rm", "--force", "--time", "0", n, check=False)


def wait_for(cond, what, timeout=15.0):
    """Polls cond() until it is true; fails naming `what` when the time is up.
    A bound on how long the engine may take, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("still not the case after %.0f s: %s" % (timeout, what))
        time.sleep(0.1)


def _status_fields(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
    except OSError:
        return None


def _processes_of(uid):
    """(pid, /proc/PID/status fields) of every process of `uid`."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _status_fields(int(d))
        if st and int(st["Uid"].split()[0]) == uid:
            yield int(d), st


def container_snippet_processes(uid):
    """Host pids of processes of `uid` that are inside a container and are
    not its first process (pid 1 in its pid namespace, the keep-alive):
    what a snippet (python3 -B - run by exec) and its children would be."""
    found = []
    for pid, st in _processes_of(uid):
        nspid = st.get("NSpid", "").split()
        if len(nspid) > 1 and nspid[-1] != "1":
            found.append(pid)
    return found


def engine_clients(uid):
    """Host pids of podman clients of `uid` talking to the test service."""
    found = []
    for pid, _ in _processes_of(uid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"podman" and any(
                SOCK.encode() in a for a in argv):
            found.append(pid)
    return found


# ---- session: the engine is there -------------------------------------------------

@pytest.fixture(scope="session")
def engine():
    if os.environ.get("KOTOBA_CT_SKIP"):
        pytest.skip(os.environ["KOTOBA_CT_SKIP"])
    if os.geteuid() != 0:
        pytest.skip("needs root: the broker must start as root to run snippets as %s, and "
                    "the engine is a rootful podman service" % CT_USER)
    ours = not os.environ.get("KOTOBA_CT_READY")
    lock = None
    if ours:
        # as check.sh does: a shared lock while the engine is in use, and
        # the service stopped only by the last run out
        os.makedirs(RUN_DIR, exist_ok=True)
        lock = open(os.path.join(RUN_DIR, "users.lock"), "a")
        fcntl.flock(lock, fcntl.LOCK_SH)
        skip_file = os.path.join(tempfile.mkdtemp(prefix="kotoba-ct-setup-"), "skip")
        p = subprocess.run([os.path.join(HERE, "setup.sh")],
                           env=dict(os.environ, KOTOBA_CT_SKIP_FILE=skip_file))
        if p.returncode == 77:
            reason = "container setup skipped"
            try:
                with open(skip_file) as f:
                    reason = f.read().strip()
            except OSError:
                pass
            shutil.rmtree(os.path.dirname(skip_file), ignore_errors=True)
            pytest.skip(reason)
        shutil.rmtree(os.path.dirname(skip_file), ignore_errors=True)
        assert p.returncode == 0, "tests/container/setup.sh failed (exit %d)" % p.returncode
    e = Engine()
    assert e.podman("version", check=False).returncode == 0, \
        "the test engine does not answer on %s: run tests/container/setup.sh" % SOCK
    assert e.podman("image", "exists", IMAGE, check=False).returncode == 0, \
        "the test image %s is missing: run tests/container/setup.sh" % IMAGE
    yield e
    if ours:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            subprocess.run([os.path.join(HERE, "teardown.sh")])
        except BlockingIOError:
            print("another run still uses the podman service: left running")
        lock.close()


@pytest.fixture(scope="session")
def ct_user(engine):
    return pwd.getpwnam(CT_USER)


# ---- working directories -------------------------------------------------------------

@pytest.fixture
def make_cwd(ct_user):
    """Makes working directories kotoba-ct owns (0700)."""
    made = []

    def make(base=CWD_BASE):
        d = tempfile.mkdtemp(prefix="kotoba-ct-", dir=base)
        os.chown(d, ct_user.pw_uid, ct_user.pw_gid)
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def cwd(make_cwd):
    return make_cwd()


# ---- brokers -----------------------------------------------------------------------------

class CtBroker(Broker):
    """A broker in docker mode; remembers the containers its runs reported."""

    def __init__(self, tmp, **kw):
        super().__init__(tmp, **kw)
        self.containers = set()

    def run(self, code, cwd, *args, gate="channel", timeout=None, cli_timeout=120):
        """`kotoba run --json` as root.  gate: "channel" (a channel, and a
        card, if one came, is denied: plain code must raise none), "approve"
        (a card is answered once), "none" (--no-channel)."""
        flags = {"channel": ["--answer", "deny"], "approve": ["--answer", "once"],
                 "none": ["--no-channel"]}[gate]
        if timeout is not None:
            flags += ["--timeout", str(timeout)]
        t0 = time.monotonic()
        p = self.kotoba("run", "-c", code, "--json", "--cwd", cwd, *flags, *args,
                        timeout=cli_timeout)
        wall = time.monotonic() - t0
        try:
            out = json.loads(p.stdout)
        except ValueError:
            raise AssertionError("kotoba run printed no JSON: stdout %r stderr %r\nbroker log:\n%s"
                                 % (p.stdout, p.stderr, self.read_log()[-4000:]))
        out["_status"] = p.returncode
        out["_wall_s"] = wall
        if out.get("container"):
            self.containers.add(out["container"])
        return out


def _new_broker(engine, ct_user, config):
    d = tempfile.mkdtemp(prefix="kotoba-ctb-")
    os.chmod(d, 0o755)
    return CtBroker(d, config=config)


def _finish(engine, ct_user, b, before):
    """Stops the broker, removes whatever it left in the engine (the
    tests that judge leftovers do so themselves, before this) and its
    directory; returns its log."""
    if b.proc is not None:
        b.stop()
    left = (engine.names(ct_user.pw_uid) - before) | {
        n for n in b.containers if engine.inspect(n) is not None}
    if left:
        print("removing containers left behind: %s" % sorted(left))
        engine.remove(left)
    log = b.read_log() if os.path.exists(b.log_path) else ""
    shutil.rmtree(b.dir, ignore_errors=True)
    return log


@pytest.fixture(scope="module")
def ctbroker(engine, ct_user):
    """One docker-mode broker for a module's tests (each test has its own
    working directory, so its own container)."""
    before = engine.names(ct_user.pw_uid)
    b = _new_broker(engine, ct_user, docker_config())
    b.start()
    yield b
    log = _finish(engine, ct_user, b, before)
    assert "ERROR: AddressSanitizer" not in log, log
    assert "runtime error:" not in log, log


@pytest.fixture
def make_ctbroker(engine, ct_user):
    """Brokers of one test with their own config (not started)."""
    made = []
    before = engine.names(ct_user.pw_uid)

    def make(config):
        b = _new_broker(engine, ct_user, config)
        made.append(b)
        return b

    yield make
    for b in made:
        _finish(engine, ct_user, b, before)


def dead_socket(d):
    """A socket path nothing listens on (bound once, then closed)."""
    path = os.path.join(d, "dead-engine.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    os.chmod(path, 0o666)
    return path

