"""What ordinary agent snippets need from the sandbox, against a real broker,
worker and python3: signals as python3 started bare gets them, the working
directory's modules, process pools in a /dev/shm of the run's own (and
that another run cannot see it)."""
import os
import signal
import stat
import tempfile

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
    first.first_line()  # it holds its file now
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


# Modes, times, copies with metadata, archives, renames and deletes in the
# run's scratch and its own /dev/shm; then the same acts on files of the
# snippet's user outside (the working directory, /tmp, the home), and on a
# symlink in scratch that points at one of them.
ATTRS = r"""
import builtins, errno, io, os, posix, stat, sys, tarfile, tempfile
SH = tempfile.__dict__["_sh" + "util"]  # tempfile imported it
def call(mod, name, *a, **k):  # a name built at run time: past the pre-screen
    return getattr(mod, name[:2] + name[2:])(*a, **k)
def tell(what, f):
    try:
        r = f()
        print(what, "ok" if r is None else r)
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))
def mode(p):
    return oct(stat.S_IMODE(os.stat(p).st_mode))
def inside(place):
    d = tempfile.mkdtemp(dir=place)
    src, dst = os.path.join(d, "src"), os.path.join(d, "dst")
    with call(builtins, "open", src, "w") as f:
        f.write("data")
    tell("chmod", lambda: call(posix, "chmod", src, 0o640) or mode(src))
    tell("utime", lambda: call(posix, "utime", src, (1000000000, 1000000000)) or os.stat(src).st_mtime)
    tell("fchmod", lambda: call(posix, "fchmod", os.open(src, os.O_RDONLY), 0o604) or mode(src))
    # glibc: an O_PATH descriptor, then chmod of /proc/self/fd/N
    tell("nofollow", lambda: call(posix, "chmod", src, 0o604, follow_symlinks=False) or mode(src))
    tell("copy2", lambda: call(SH, "copy2", src, dst) and (mode(dst), os.stat(dst).st_mtime))
    call(posix, "utime", dst, None)
    tell("copystat", lambda: call(SH, "copystat", src, dst) or (mode(dst), os.stat(dst).st_mtime))
    buf = io.BytesIO()
    with call(tarfile, "open", fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo("t/run.sh")
        ti.mode, ti.mtime, ti.size = 0o750, 1234567890, 2
        t.addfile(ti, io.BytesIO(b"hi"))
    buf.seek(0)
    with tarfile.open(fileobj=buf) as t:
        t.errorlevel = 2  # a failed chmod or utime raises instead of passing unseen
        call(t, "extractall", d, **({"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}))
    x = os.path.join(d, "t", "run.sh")
    tell("tar", lambda: (mode(x), os.stat(x).st_mtime))
    tell("rename", lambda: call(posix, "rename", x, x + ".2"))
    tell("unlink", lambda: call(posix, "unlink", x + ".2"))
    tell("setuid", lambda: call(posix, "chmod", src, 0o4755))
    tell("setgid", lambda: call(posix, "chmod", src, 0o2755))
    tell("kept", lambda: mode(src))
    link = os.path.join(d, "link")
    call(posix, "symlink", os.path.abspath("victim"), link)
    tell("link-chmod", lambda: call(posix, "chmod", link, 0o777))
    tell("link-utime", lambda: call(posix, "utime", link, (0, 0)))
for name, place in (("scratch", os.environ["TMPDIR"]), ("shm", "/dev/shm")):
    print("--", name)
    inside(place)
print("-- outside")
for p in V:
    tell("chmod", lambda: call(posix, "chmod", p, 0o777))
    tell("utime", lambda: call(posix, "utime", p, (0, 0)))
    tell("rename", lambda: call(posix, "rename", p, p + ".2"))
    tell("unlink", lambda: call(posix, "unlink", p))
tell("fchmod", lambda: call(posix, "fchmod", os.open("victim", os.O_RDONLY), 0o777))
tell("proc", lambda: call(posix, "chmod", "/proc/self/cwd/victim", 0o777))
"""

INSIDE = ["chmod 0o640", "utime 1000000000.0", "fchmod 0o604", "nofollow 0o604", "copy2 ('0o604', 1000000000.0)",
          "copystat ('0o604', 1000000000.0)", "tar ('0o750', 1234567890.0)", "rename ok",
          "unlink ok"]
# Unattended: no setuid or setgid bit; nothing through the link, which
# leads out (EPERM, the answer the filter gave every chmod and utime
# before); outside, chmod and utime EPERM, rename and unlink EACCES
# (Landlock), as before.
UNATTENDED = (INSIDE + ["setuid EPERM", "setgid EPERM", "kept 0o604", "link-chmod EPERM",
                        "link-utime EPERM"])
OUTSIDE = ["chmod EPERM", "utime EPERM", "rename EACCES", "unlink EACCES"]

# A file in the working directory, one under /tmp, one in the home when the
# snippet's user has one: each the user's own.
VICTIMS = r"""
import os
home = os.path.expanduser("~")
for p in ["victim", ARG] + ([home + "/.kotoba-attr-victim"] if os.path.isdir(home) else []):
    with open(p, "w") as f:
        f.write("keep")
    os.chmod(p, 0o644)
    os.utime(p, (1500000000, 1500000000))
    print(p)
"""

# The control: the same acts on the same files work in an approved run (the
# files are the snippet's user's own), which then removes them.
CONTROL = r"""
import os
for p in V:
    os.chmod(p, 0o600)
    os.utime(p, (0, 0))
    os.rename(p, p + ".2")
    os.unlink(p + ".2")
    print("control ok")
"""


def attr_run(b, code, profile, d, tmp_victim, victims=()):
    return run(b, "ARG = %r\nV = %r\n" % (tmp_victim, list(victims)) + code, profile,
               "--cwd", d)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("secrets", [False, True])
def test_modes_and_times_work_in_the_run_s_own_places_only(broker, tmpdir_k, secrets, profile):
    """chmod, utime, shutil.copy2 and copystat, tar extraction with modes
    and times, rename and unlink work in scratch and the run's /dev/shm in
    every profile; unattended and under a grant, the same acts on files of
    the snippet's user outside are refused as before (chmod, utime EPERM;
    rename, unlink EACCES), a setuid or setgid bit is refused, and a symlink
    in scratch leads nowhere outside."""
    d = masked_dir(tmpdir_k, secrets)
    tmp_victim = tempfile.mktemp(prefix="kotoba-attr-victim-", dir="/tmp")
    made = attr_run(broker, VICTIMS, "approved", d, tmp_victim)
    assert made["_status"] == 0, made
    victims = made["stdout"].splitlines()
    try:
        out = attr_run(broker, ATTRS, profile, d, tmp_victim, victims)
        assert out["_status"] == 0, (out["stdout"], out["stderr"])
        got = out["stdout"].splitlines()
        if profile == "approved":
            n = len(INSIDE)
            assert got[1:1 + n] == INSIDE and got[n + 7:2 * n + 7] == INSIDE, out
        else:
            want = (["-- scratch"] + UNATTENDED + ["-- shm"] + UNATTENDED + ["-- outside"] +
                    OUTSIDE * len(victims) + ["fchmod EPERM", "proc EPERM"])
            assert got == want, out
            # Again: with KOTOBA_WARM=yes this one takes the spare the
            # first one left.
            again = attr_run(broker, ATTRS, profile, d, tmp_victim, victims)
            assert again["stdout"].splitlines() == want, again
            for p in victims:
                st = os.stat(os.path.join(d, p))
                assert (stat.S_IMODE(st.st_mode), st.st_mtime) == (0o644, 1500000000), p
    finally:
        control = attr_run(broker, CONTROL, "approved", d, tmp_victim, victims)
    if profile != "approved":
        assert control["stdout"] == "control ok\n" * len(victims), control


HOLD_FILE = r"""
import builtins, os, time
with builtins.__dict__["op" + "en"](os.path.join(os.environ["TMPDIR"], "held"), "w"):
    pass
print(os.environ["TMPDIR"], flush=True)
deadline = time.monotonic() + 60  # a backstop: the test writes "go"
while not os.path.exists("go") and time.monotonic() < deadline:
    time.sleep(0.02)
"""

OTHER = r"""
import errno, posix
for what, f in (("chmod", lambda: getattr(posix, "ch" + "mod")(ARG + "/held", 0o777)),
                ("utime", lambda: getattr(posix, "ut" + "ime")(ARG + "/held", (0, 0)))):
    try:
        f()
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
"""


def test_a_run_cannot_change_modes_in_another_run_s_scratch(broker, tmpdir_k):
    """While one unattended run holds a file in its scratch, a second run of
    the same user cannot change its mode or times (EPERM): only its own
    scratch is a place of its own."""
    d = masked_dir(tmpdir_k, False)
    first = broker.client()
    first.exec(HOLD_FILE, id=1, cwd=d)
    scratch = first.first_line().strip()
    out = broker.run_json("ARG = %r\n" % scratch + OTHER, "--cwd", d)
    with open(os.path.join(d, "go"), "w"):
        pass
    end = first.until_end(id=1)
    first.close()
    assert end["end"]["type"] == "exit", end
    assert out["_status"] == 0 and out["stdout"] == "chmod EPERM\nutime EPERM\n", out
