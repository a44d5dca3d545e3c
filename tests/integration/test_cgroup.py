"""Memory and process limits for a snippet as a whole (broker/cgroup.c).

A broker started as root puts each run in a cgroup of its own, here the
cgroup v1 memory and pids controllers this machine has, with [limits]
memory and processes; the kernel then holds the limit for all the
snippet's processes together, where RLIMIT_AS holds each process alone.
Real broker, real worker, real python3, real kernel.  Needs root, and the
v1 memory and pids controllers (or delegated v2); skipped loudly otherwise.
"""
import os
import pwd
import re
import subprocess
import tempfile
import time

import pytest

from conftest import BROKERD, KOTOBA, Broker, SERVICE_USER

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only a broker started "
                                "as root can make cgroups on this machine")

MIB = 1 << 20
LIMIT = 1 << 30  # [limits] memory below

# Three children, each touching 600 MiB: every one is far under RLIMIT_AS
# (1 GiB per process), and together they are 1.8 GiB.  Each holds its block
# until the parent lets go, which it does once all three hold theirs or one
# has died: the three are alive together however slow the machine.
THREE_CHILDREN = """
import os, select
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
kids = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        block = b"\\x01" * (600 * 2**20)
        os.write(ready_w, b".")
        os.read(go_r, 1)
        os._exit(0)
    kids.append(pid)
os.close(ready_w)
held, ended = 0, {}
while held < 3 and not ended:
    if select.select([ready_r], [], [], 0.05)[0]:
        held += len(os.read(ready_r, 3))
    for k in kids:
        if k not in ended:
            p, st = os.waitpid(k, os.WNOHANG)
            if p:
                ended[k] = st
os.close(go_w)
print(" ".join(str(ended[k] if k in ended else os.waitpid(k, 0)[1]) for k in kids))
"""

# Each child holds its process slot until the parent has ended (EOF on the
# pipe), so no slot frees while the parent still forks.
FORK_UNTIL_REFUSED = """
import os, resource
r, w = os.pipe()
print(resource.getrlimit(resource.RLIMIT_NPROC)[0])
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, e.errno)
"""


def own_cgroup(controller):
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                return path
    return None


def v1_dirs(broker_pid):
    """The broker's own directory in each v1 hierarchy: it was started from
    this process's cgroup."""
    dirs = {}
    for c in ("memory", "pids"):
        own = own_cgroup(c)
        if own is not None and os.path.isdir("/sys/fs/cgroup/" + c):
            dirs[c] = "/sys/fs/cgroup/%s%s/kotoba/%d" % (c, "" if own == "/" else own, broker_pid)
    return dirs


def have_v1():
    return all(os.path.exists("/sys/fs/cgroup/%s/cgroup.procs" % c) for c in ("memory", "pids"))


needs_v1 = pytest.mark.skipif(not have_v1(), reason="the cgroup v1 memory and pids "
                              "controllers are not mounted at /sys/fs/cgroup/{memory,pids}")


@pytest.fixture
def cgbroker(make_broker):
    b = make_broker(config="[limits]\nmemory = 1G\nprocesses = 16\n").start()
    yield b


def cgroup_lines(b):
    return [m.groups() for m in re.finditer(
        r"run=(\d+) cgroup: memory peak (\d+) (bytes|KiB|MiB|GiB) of 1 GiB, (\d+) OOM kills, "
        r"(\d+) forks refused at (\d+) processes", b.read_log())]


def peak_bytes(num, unit):
    return int(num) * {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]


def wait_for(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@needs_v1
def test_broker_says_which_cgroups_hold(cgbroker):
    dirs = v1_dirs(cgbroker.proc.pid)
    log = cgbroker.read_log()
    for c, d in dirs.items():
        assert "per-run cgroups: v1 %s under %s" % (c, d) in log, log
        st = os.stat(d)
        assert pwd.getpwuid(st.st_uid).pw_name == SERVICE_USER


@needs_v1
@pytest.mark.parametrize("approve", [False, True], ids=["unattended", "approved"])
def test_memory_limit_holds_for_all_processes_together(cgbroker, approve):
    out = cgbroker.run_json(THREE_CHILDREN, approve=approve, timeout=120)
    assert out["profile"] == ("approved" if approve else "unattended"), out
    # The kernel's OOM killer took children: exit says which limit, not
    # just that something died of SIGKILL.
    assert out["limit"] == "memory", out
    statuses = [int(s) for s in out["stdout"].split()]
    assert 9 in [s & 0x7f for s in statuses], out
    log = cgbroker.read_log()
    assert "out of memory: 1 GiB limit for all the snippet's processes together" in log, log
    run, num, unit, ooms, _, _ = cgroup_lines(cgbroker)[-1]
    assert int(ooms) >= 1
    # The run's peak, read from memory.max_usage_in_bytes before the
    # cgroup went: never above the limit, though 1.8 GiB was asked for.
    assert peak_bytes(num, unit) <= LIMIT, (num, unit)


@needs_v1
def test_fork_beyond_processes_is_refused_by_the_runs_pids_max(cgbroker):
    out = cgbroker.run_json(FORK_UNTIL_REFUSED, timeout=60)
    nproc, line = out["stdout"].splitlines()
    count, err = (int(x) for x in line.split())
    assert err == 11, out  # EAGAIN, as fork fails at any process limit
    # 16 tasks in the run: the worker, python, and its children.
    assert count <= 16 - 2, out
    # Not RLIMIT_NPROC: the run's is far above 16 (the ceiling for all of
    # a user's runs together) ...
    assert int(nproc) > 16, out
    # ... and the pids controller counted the refusals (pids.events max),
    # which only a fork refused at pids.max adds to.
    refused = int(cgroup_lines(cgbroker)[-1][4])
    assert refused >= 1, cgbroker.read_log()


@needs_v1
def test_each_runs_cgroup_is_removed(cgbroker):
    dirs = v1_dirs(cgbroker.proc.pid)
    # a plain run, one killed at its timeout with children, one whose
    # children left its process tree (double fork, setsid)
    cgbroker.run_json("print(1)")
    cgbroker.run_json("import os, time\nfor i in range(4):\n    os.fork()\ntime.sleep(30)",
                      "--timeout", "1")
    cgbroker.run_json("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
                      "    if os.fork() == 0:\n        time.sleep(30)\n    os._exit(0)\n"
                      "time.sleep(0.3)")
    # With [sandbox] warm a spare for the next run waits in a cgroup of its
    # own: only the three runs' must be gone now, and every one at the stop.
    def ended():
        return {"run-" + i for i in re.findall(r"run=(\d+) ended: finished", cgbroker.read_log())}
    assert wait_for(lambda: len(ended()) == 3), cgbroker.read_log()
    ran = ended()
    for d in dirs.values():
        assert wait_for(lambda: not ran & set(os.listdir(d))), os.listdir(d)
    cgbroker.stop()
    for d in dirs.values():
        assert not os.path.exists(d), d


@needs_v1
def test_snippet_cannot_leave_or_widen_its_cgroup(cgbroker):
    """As the approved profile (no Landlock write rules): the run's
    cgroup files belong to the service user, not to the snippet's."""
    code = """
import os
own = [l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if ":pids:" in l][0]
base = "/sys/fs/cgroup/pids" + own
targets = [base + "/pids.max", base + "/cgroup.procs", base + "/tasks",
           os.path.dirname(base) + "/cgroup.procs", os.path.dirname(base) + "/tasks",
           "/sys/fs/cgroup/pids/cgroup.procs", "/sys/fs/cgroup/pids/kotoba/tasks"]
for t in targets:
    try:
        with open(t, "w") as f:
            f.write("max" if t.endswith("pids.max") else str(os.getpid()))
        print("WROTE", t)
    except OSError as e:
        print("refused", e.errno, os.path.exists(t))
print(open(base + "/pids.max").read().strip())
"""
    out = cgbroker.run_json(code, approve=True)
    lines = out["stdout"].splitlines()
    assert not [l for l in lines if l.startswith("WROTE")], out
    assert lines[:7] == ["refused 13 True"] * 7, out  # EACCES, and the file is there
    assert lines[7] == "16", out


# ---- without cgroups: a per-user broker -------------------------------------

PER_USER = "kotoba-tcg"


@pytest.fixture
def per_user_broker(tmpdir_k):
    if subprocess.run(["getent", "passwd", PER_USER], capture_output=True).returncode:
        subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", PER_USER], check=True)
    pw = pwd.getpwnam(PER_USER)
    home = tempfile.mkdtemp(dir=tmpdir_k)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    sock = os.path.join(home, "broker.sock")
    conf = os.path.join(home, "broker.conf")
    with open(conf, "w") as f:
        f.write("[limits]\nmemory = 1G\nprocesses = 64\n")
    log = os.path.join(tmpdir_k, "per-user.log")
    with open(log, "wb") as lf:
        proc = subprocess.Popen([BROKERD, "--socket", sock, "--state-dir",
                                 os.path.join(home, "state"), "--config", conf],
                                user=pw.pw_uid, group=pw.pw_gid, env={"HOME": home},
                                stdout=lf, stderr=lf)
    assert wait_for(lambda: os.path.exists(sock), 10), open(log).read()

    def run(code):
        p = subprocess.run([KOTOBA, "run", "--socket", sock, "--no-channel", "--json", "-c",
                            code], capture_output=True, user=pw.pw_uid, group=pw.pw_gid,
                           cwd=home, env={"HOME": home}, timeout=120)
        import json
        return json.loads(p.stdout)

    yield run, log
    proc.terminate()
    proc.wait(10)


def test_per_user_broker_without_cgroups_says_so_and_runs(per_user_broker):
    run, log = per_user_broker
    out = run("print(6 * 7)")
    assert out["stdout"] == "42\n" and out["exit"] == 0, out
    text = open(log).read()
    assert "no per-run cgroup for memory and pids" in text, text
    assert "RLIMIT_AS, RLIMIT_NPROC" in text, text


@needs_v1
def test_control_without_cgroups_three_children_exceed_the_limit(per_user_broker):
    """What the cgroup stops: with RLIMIT_AS alone, each 600 MiB child is
    within 1 GiB, and together they hold 1.8 GiB."""
    run, _ = per_user_broker
    out = run(THREE_CHILDREN)
    assert out["stdout"].split() == ["0", "0", "0"], out
    assert out["limit"] == "", out


def test_system_daemon_without_cgroups_says_so_loudly_and_runs(make_broker):
    """A host with no cgroup controllers, made here by hiding /sys/fs/cgroup
    under an empty tmpfs in a mount namespace of the broker's own: the
    broker logs an error line naming what is missing, and snippets run with
    the rlimits alone (RLIMIT_NPROC back to [limits] processes)."""
    b = make_broker(config="[limits]\nmemory = 1G\nprocesses = 16\n")
    b.args = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
              'mount -t tmpfs none /sys/fs/cgroup && exec "$@"', "sh"] + b.args
    b.start()
    log = b.read_log()
    assert "<3>kotoba-brokerd: WARNING: no per-run cgroup for memory and pids" in log, log
    assert "per-run cgroups:" not in log, log
    out = b.run_json("import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC)[0])")
    assert out["exit"] == 0 and out["stdout"] == "16\n", out
