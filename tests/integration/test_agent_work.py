"""What ordinary agent snippets need from the sandbox, against a real broker,
worker and python3: signals as python3 started bare gets them, the working
directory's modules, process pools in a /dev/shm of the run's own (and
that another run cannot see it)."""
import os
import signal

import pytest

from conftest import Broker

# Unattended (no channel), under a saved grant (the unattended kernel
# profile, approver "grant"), approved (a card answered once).
PROFILES = ["unattended", "grant", "approved"]
APPROVER = {"unattended": "unattended", "grant": "grant", "approved": "user"}


def run(b, code, profile, *args):
    if profile == "grant" and not getattr(b, "granted", False):
        p = b.kotoba("run", "-c", "print(1)", "--answer", "always")
        assert p.returncode == 0, p.stderr
        b.granted = True
    out = b.run_json(code, *args, approve=(profile != "unattended"))
    assert out.get("approver") == APPROVER[profile], out
    return out


SIGNALS = r"""
import os, signal, time
print("int", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print("quit", signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL)
print("mask", sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_signals_ignored_by_the_broker_s_starter_are_default_in_the_snippet(tmpdir_k, profile):
    """A broker started with `&` from a script inherits SIGINT and SIGQUIT
    ignored; the snippet still gets them as python3 started bare does:
    KeyboardInterrupt on SIGINT, SIGQUIT default, nothing blocked."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        b = Broker(tmpdir_k).start()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    try:
        with open("/proc/%d/status" % b.proc.pid) as f:
            ign = int([l for l in f if l.startswith("SigIgn:")][0].split()[1], 16)
        # the control: the broker itself did inherit them ignored
        assert ign & (1 << (signal.SIGINT - 1)) and ign & (1 << (signal.SIGQUIT - 1))
        out = run(b, SIGNALS, profile)
        text = out["stdout"]
        assert "int True\nquit True\nmask []\nKeyboardInterrupt\n" == text, out
    finally:
        b.stop()


def project_dir(tmpdir_k):
    """A working directory as an agent leaves it: a helper module it wrote a
    step earlier, and a json.py that must not shadow the standard library."""
    d = os.path.join(tmpdir_k, "project")
    os.mkdir(d)
    files = {"helpers.py": "def slugify(s):\n    return s.lower().replace(' ', '-')\n",
             "json.py": "raise SystemExit('the json.py of the working directory ran')\n"}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(d, name), 0o644)
    os.chmod(d, 0o755)
    return d


IMPORTS = r"""
import json, os, sys
from helpers import slugify
print(slugify("Hello World"), json.__file__.startswith(sys.base_prefix))
print(sys.path[-1] == os.getcwd(), sys.path.index(os.getcwd()) > sys.path.index(os.path.dirname(os.__file__)))
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_the_working_directory_s_modules_import_after_everything_else(broker, tmpdir_k, profile):
    d = project_dir(tmpdir_k)
    out = run(broker, IMPORTS, profile, "--cwd", d)
    assert out["_status"] == 0 and out["stdout"] == "hello-world True\nTrue True\n", out


POOL = r"""
import multiprocessing, os
from concurrent.futures import ProcessPoolExecutor
def sq(x):
    return x * x
if __name__ == "__main__":
    with multiprocessing.Pool(2) as p:
        print("pool", sum(p.map(sq, range(10))))
    q = multiprocessing.Queue()
    w = multiprocessing.Process(target=q.put, args=(42,))
    w.start(); print("queue", q.get()); w.join()
    with ProcessPoolExecutor(2) as ex:
        print("executor", sum(ex.map(sq, range(10))))
    with open("/proc/self/mountinfo") as f:
        shm = [l.split(" - ")[1].split()[1] for l in f if l.split()[4] == "/dev/shm"]
    print("own shm", shm[-1] == "kotoba-shm", sorted(os.listdir("/dev/shm")) == [])
"""


def masked_dir(tmpdir_k, secrets):
    """A working directory the snippet's user may write to (it is not let);
    with secrets, a .env in it, so that the run masks it (and the next run
    of the same user joins the namespace the first one kept)."""
    d = os.path.join(tmpdir_k, "w")
    os.mkdir(d)
    os.chmod(d, 0o777)
    if secrets:
        with open(os.path.join(d, ".env"), "w") as f:
            f.write("TOKEN=x\n")
        os.chmod(os.path.join(d, ".env"), 0o644)
    return d


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("secrets", [False, True])
def test_process_pools_work_in_every_profile(broker, tmpdir_k, secrets, profile):
    """multiprocessing's locks, queues and pools and ProcessPoolExecutor
    need a writable /dev/shm: a run nobody read has its own, with masks
    and without (an approved run has the host's, as python3 bare)."""
    out = run(broker, POOL, profile, "--cwd", masked_dir(tmpdir_k, secrets))
    own = "own shm True True" if profile != "approved" else "own shm False"
    assert out["_status"] == 0, out
    assert out["stdout"].startswith("pool 285\nqueue 42\nexecutor 285\n" + own), out


HOLD = r"""
import os, sys, time
import tempfile
tempfile.mkstemp(dir="/dev/shm", prefix="first-run-")
print(os.environ["TMPDIR"], flush=True)
deadline = time.monotonic() + 60  # a backstop: the test writes "go"
while not os.path.exists("go") and time.monotonic() < deadline:
    time.sleep(0.02)
print("released" if os.path.exists("go") else "not released")
"""

LOOK = r"""
import errno, os, sys, tempfile
print("shm", sorted(os.listdir("/dev/shm")))
print("mount", [l.split(" - ")[1].split()[:2] for l in open("/proc/self/mountinfo")
                if l.split()[4] == "/dev/shm"][-1])
try:
    tempfile.mkstemp(dir=".")
except OSError as e:
    print("cwd", errno.errorcode[e.errno])
"""


@pytest.mark.parametrize("secrets", [False, True])
def test_a_run_s_dev_shm_is_its_own(broker, tmpdir_k, secrets):
    """While one unattended run holds a file in its /dev/shm, a second run
    of the same user sees an empty /dev/shm of its own (with masks: though
    it joins the namespace the first run kept); writing into the working
    directory stays refused (EACCES: Landlock)."""
    d = masked_dir(tmpdir_k, secrets)
    first = broker.client()
    first.exec(HOLD, id=1, cwd=d)
    buf = b""
    while b"\n" not in buf:
        m = first.recv()
        assert m["type"] in ("started", "output"), m
        if m["type"] == "output":
            buf += m["data"]
    out = broker.run_json(LOOK, "--cwd", d)
    with open(os.path.join(d, "go"), "w"):
        pass
    end = first.until_end(id=1)
    first.close()
    assert end["end"]["type"] == "exit" and end["stdout"] == b"released\n", end
    assert out["_status"] == 0, out
    assert out["stdout"] == "shm []\nmount ['tmpfs', 'kotoba-shm']\ncwd EACCES\n", out


SPAWN = r"""
import multiprocessing
def f():
    pass
if __name__ == "__main__":
    p = multiprocessing.get_context("spawn").Process(target=f)
    p.start()
    p.join()
    print("exit", p.exitcode)
"""


def test_spawn_is_refused_clearly(broker):
    """spawn execs a second interpreter (and its resource tracker): the
    exec gate refuses both, the child fails (multiprocessing reads no
    error back from its exec) and the receipt names the execs."""
    out = broker.run_json(SPAWN)
    assert out["_status"] == 0 and out["stdout"] not in ("exit 0\n", ""), out
    assert [(b["kind"], b["by"]) for b in out["blocked"]] == [("exec", "exec gate")], out
