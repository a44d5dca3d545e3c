#!/usr/bin/python3
"""`make bench`: how much a sandboxed snippet costs over bare python3 (issue 7).

Every figure is a ratio against a baseline measured in the same run, the
two interleaved (A B A B ...), because the machine is shared and absolute
wall times say more about the neighbours than about kotoba.  Nothing here
asserts: each line ends with its target and MET / NOT MET, and the whole
output is also written to --out (build/bench.txt).

  1. end to end: `kotoba run -c pass --no-channel` against python3 -B -c pass,
     bubblewrap, and the fork + no_new_privs + seccomp + exec floor;
     1b. snippets that import the standard modules agents use, and numpy
     (installed for the bench as python3-numpy), against bare python3;
     the CLI's own start (`kotoba --help`, `kotoba scan`) against /bin/true
  2. broker overhead on the run path, from a protocol client (an upper
     bound; see README.md for the broker log line that would make it exact)
  3. throughput with 1 (back to back), 2, 8 and 32 clients against the
     machine's own limit and against as many bare python3 loops
  4. the pre-screen: MB/s over the standard library, adversarial 1 MiB input
  5. memory: broker idle, with 1,000 idle connections, the worker's supervisor
  6. docker mode: a warm run (the user's container already up) against a
     cold run (a new container) and against the engine's own exec, on the
     test engine of tests/container/ (root only)
  7. the secret masks: an unattended `pass` with [sandbox] secrets = yes
     against secrets = off, brokers interleaved: a developer's set (~/.ssh,
     ~/.aws, ~/.gnupg, ~/.config/gh, ~/.docker/config.json and the
     project's .env: 6 masks; target: the p50 difference at most 0.5 ms),
     18 masks, and the developer's set made anew on every run (a new
     .env.N each time: the kept namespace never fits)
  8. the receipt: an unattended `pass` with the receipt (the worker's pipe,
     python3 running kotoba_receipt.py's wrappers) against the same worker
     without it (a copy alone in its directory, where it finds no
     kotoba_receipt.py), brokers interleaved (target: the p50 difference at
     most 0.3 ms); and, for reference, a snippet that is refused an exec
     and a write, with and without

The targets for spaced runs (each finds its spare waiting) are printed
beside today's, each marked "(warm interpreters)": kotoba -c pass <= 0.30 x
python3 and <= 0.40 x bubblewrap, the imports <= 0.15 x and numpy <= 0.10 x
bare python3, broker exec->ready p50 < 500 us; back to back, one client's
time per run <= 0.80 x bare python3's; 32 clients' runs per second >= 1.00 x
32 bare python3 loops', with no error in 5,000 runs.
"""
import argparse
import glob
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

try:
    import msgpack
except ImportError:  # pragma: no cover
    sys.exit("bench: python3-msgpack is missing (apt-get install python3-msgpack)")

PYTHON = "/usr/bin/python3"
BWRAP_ARGS = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
              "--share-net", "--die-with-parent", "--cap-drop", "ALL"]
# Stamps CLOCK_MONOTONIC as its last act and leaves without interpreter
# teardown, so "snippet exit -> exit frame" starts within microseconds of
# the process's real end.  Matches no pre-screen label (it runs unattended).
STAMP = "import os,time\nos.write(1,b'%d' % time.monotonic_ns())\nos._exit(0)\n"

OUT = []
OUT_FILE = None


def say(line=""):
    print(line, flush=True)
    OUT.append(line)
    if OUT_FILE:
        with open(OUT_FILE, "a") as f:
            f.write(line + "\n")


def verdict(ok):
    return "MET" if ok else "NOT MET"


SUMMARY = []


def target_line(text, target, ok, name=None):
    """A result line ending with its target and whether it was met."""
    say("%s   target %s: %s" % (text, target, verdict(ok)))
    SUMMARY.append((name or re.split(r":|  ", text)[0].strip(), target, ok))


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def status_kb(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


# ---- processes ------------------------------------------------------------

DEVNULL_ACTIONS = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]


def timed_run(argv):
    """Wall seconds, CPU seconds of the process (and its waited-for
    children) and exit status of one run, output discarded."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=DEVNULL_ACTIONS)
    _, status, ru = os.wait4(pid, 0)
    wall = (time.perf_counter_ns() - t0) / 1e9
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


# ---- the broker -----------------------------------------------------------

# The main brokers' limits: one user (root) holds the idle connections, so
# its [quota] share is at most half of max_connections.
BASE_CONF = ("[broker]\nmax_connections = 2200\nmax_runs = 64\nmax_runs_per_uid = 64\n"
             "[quota]\nconnections = 1100\n")


class Broker:
    def __init__(self, build, work, conf=""):
        self.brokerd = os.path.join(build, "kotoba-brokerd")
        self.kotoba = os.path.join(build, "kotoba")
        self.dir = work
        self.socket = os.path.join(work, "broker.sock")
        self.state = os.path.join(work, "state")
        self.log_path = os.path.join(work, "broker.log")
        os.makedirs(self.state, exist_ok=True)
        self.conf = os.path.join(work, "broker.conf")
        os.makedirs(work, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(conf or BASE_CONF)
        os.chmod(self.conf, 0o644)
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.brokerd, "--socket", self.socket, "--state-dir", self.state,
             "--config", self.conf, "--verbose"],
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit("bench: the broker exited at start:\n" + self.read_log())
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.socket)
                s.close()
                return
            except OSError:
                time.sleep(0.02)
        sys.exit("bench: the broker did not start:\n" + self.read_log())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_spare(self, timeout=2.0):
        """Until the spare the last run made waits for its snippet (its start
        is not what a warm run measures); False if none came.  Then marks
        the log: the next call waits for the spare the coming run makes."""
        deadline = time.monotonic() + timeout
        ok = False
        while time.monotonic() < deadline:
            log = self.read_log()
            if "waits for a snippet" in log[getattr(self, "mark", 0):]:
                ok = True
                break
            time.sleep(0.005)
        self.mark = len(self.read_log())
        return ok

    def spare_pids(self):
        """(worker, python3) of each spare waiting now."""
        log = self.read_log()
        out = []
        for run, worker in re.findall(r"run=(\d+) started spare worker pid=(\d+)", log):
            if re.search(r"run=%s (took spare|spare stopped|spare failed)" % run, log):
                continue
            m = re.search(r"run=%s spare pid=(\d+) waits" % run, log)
            if m:
                out.append((int(worker), int(m.group(1))))
        return out

    def children(self):
        pids = []
        for task in glob.glob("/proc/%d/task/*/children" % self.proc.pid):
            try:
                with open(task) as f:
                    pids += [int(p) for p in f.read().split()]
            except OSError:
                pass
        return pids


class Client:
    """A protocol client (proto/PROTOCOL.md): one connection, frames by hand."""

    def __init__(self, path, cwd):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.sock.settimeout(120)
        self.rf = self.sock.makefile("rb", buffering=65536)
        self.cwd = cwd

    def send(self, obj):
        p = msgpack.packb(obj, use_bin_type=True)
        self.sock.sendall(struct.pack(">I", len(p)) + p)

    def recv(self):
        h = self.rf.read(4)
        if len(h) < 4:
            raise EOFError("the broker closed the connection")
        n = struct.unpack(">I", h)[0]
        return msgpack.unpackb(self.rf.read(n), raw=False)

    def hello(self):
        self.send({"type": "hello", "version": 1, "channel": False, "client": "kotoba-bench"})
        w = self.recv()
        if w.get("type") != "welcome":
            raise RuntimeError("no welcome: %r" % (w,))

    def exec_timed(self, code, rid):
        """Runs one snippet; returns (t_sent, t_started, t_exit, stdout, end)
        with times in CLOCK_MONOTONIC nanoseconds."""
        t_started = None
        out = b""
        msg = {"type": "exec", "id": rid, "code": code, "cwd": self.cwd}
        t_sent = time.monotonic_ns()
        self.send(msg)
        while True:
            m = self.recv()
            t = time.monotonic_ns()
            if m.get("id") != rid:
                continue
            if m["type"] == "started":
                t_started = t
            elif m["type"] == "output" and m.get("stream") == "stdout":
                out += m["data"]
            elif m["type"] in ("exit", "error"):
                return t_sent, t_started, t, out, m

    def close(self):
        self.rf.close()
        self.sock.close()


# ---- 1. end to end --------------------------------------------------------

def ratio_line(name, num, den, target=None, cmp=None):
    rs = [a / b for a, b in zip(num, den)]
    med, lo, hi = statistics.median(rs), pct(rs, 25), pct(rs, 75)
    text = "%-44s median %.3f  (IQR %.3f-%.3f, n=%d)" % (name, med, lo, hi, len(rs))
    if target:
        target_line(text, target, cmp(med))
    else:
        say(text + "   target: none (reference)")
    return med


def apt_install(package, present, why):
    """Installs a Debian package the bench compares with, as root; else
    says how.  present() tells whether it is there already."""
    if present():
        return True
    if os.geteuid() != 0:
        say("*** %s is not installed; %s: sudo apt-get install %s" % (package, why, package))
        return False
    say("%s is not installed: installing it (apt-get install -y %s)" % (package, package))
    for attempt in (1, 2):
        if attempt == 2:
            subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if subprocess.run(["apt-get", "install", "-y", "-q", package], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            break
    return present()


def bwrap_available():
    apt_install("bubblewrap", lambda: shutil.which("bwrap"), "to compare with it run")
    path = shutil.which("bwrap")
    if not path:
        say("*** SKIPPED: the bubblewrap comparison (bwrap not available)")
        return None
    p = subprocess.run([path] + BWRAP_ARGS + [PYTHON, "-B", "-c", "pass"], capture_output=True)
    if p.returncode != 0:
        say("*** SKIPPED: the bubblewrap comparison: bwrap fails here (%s)"
            % p.stderr.decode(errors="replace").strip()[:200])
        return None
    return path


def timed_kotoba(broker, argv):
    """timed_run, after the warm broker's spare for it is ready."""
    if broker is not None:
        broker.wait_spare()
    return timed_run(argv)


def cli_start(build, rounds=400):
    """The CLI's own start: `kotoba --help` (the program every run starts)
    and `kotoba scan` of an empty snippet (kotoba execs kotoba-admin, which
    links the pre-screen's PCRE2 and SQLite), each against /bin/true,
    interleaved; medians of the paired differences, from wall time."""
    kotoba = os.path.join(build, "kotoba")
    empty = os.path.join(tempfile.mkdtemp(prefix="kotoba-bench-cli-"), "empty.py")
    open(empty, "w").close()
    cmds = [["/bin/true"], [kotoba, "--help"], [kotoba, "scan", empty]]
    walls = [[] for _ in cmds]
    for r in range(rounds):
        for i in (range(len(cmds)) if r % 2 == 0 else reversed(range(len(cmds)))):
            walls[i].append(timed_run(cmds[i])[0])
    shutil.rmtree(os.path.dirname(empty), ignore_errors=True)
    diff = [statistics.median(b - a for a, b in zip(walls[0], w)) * 1e3 for w in walls[1:]]
    say("the CLI's own start, %d rounds: kotoba --help %.2f ms more than /bin/true, kotoba scan "
        "(through kotoba-admin) %.2f ms more   target: none (reference)" % (rounds, *diff))


def end_to_end(args, broker, cold, floor_bin, bpf):
    say("== 1. end to end: %d rounds, each command once per round in rotating order; kotoba "
        "with spare interpreters ([sandbox] warm = yes, each run after its spare is ready), "
        "kotoba-cold without (warm = no)" % args.pairs)
    cmds = {
        "python3": [PYTHON, "-B", "-c", "pass"],
        "kotoba": [broker.kotoba, "run", "-c", "pass", "--no-channel", "--socket", broker.socket],
        "kotoba-cold": [cold.kotoba, "run", "-c", "pass", "--no-channel", "--socket",
                        cold.socket],
        "floor": [floor_bin, bpf, PYTHON, "-B", "-c", "pass"],
    }
    bwrap = bwrap_available()
    if bwrap:
        cmds["bwrap"] = [bwrap] + BWRAP_ARGS + [PYTHON, "-B", "-c", "pass"]
    names = list(cmds)
    for name in names:  # warm the page cache and the broker
        for _ in range(3):
            _, _, rc = timed_run(cmds[name])
            if rc != 0:
                sys.exit("bench: %s exited %d: %s" % (name, rc, " ".join(cmds[name])))
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for i in range(args.pairs):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            w, c, rc = timed_kotoba(broker if name == "kotoba" else None, cmds[name])
            if rc != 0:
                sys.exit("bench: %s exited %d" % (name, rc))
            wall[name].append(w)
            cpu[name].append(c)
    say("median wall ms: " + ", ".join("%s %.1f" % (n, statistics.median(wall[n]) * 1e3)
                                       for n in names)
        + "   (absolute times: context only, the machine is shared)")
    py = wall["python3"]
    res = {"python_wall": statistics.median(py), "python_cpu": statistics.median(cpu["python3"])}
    res["kotoba"] = ratio_line("kotoba run -c pass / python3 -B -c pass", wall["kotoba"], py,
                               "<= 1.15", lambda m: m <= 1.15)
    warm_target("kotoba run -c pass / python3 -B -c pass", res["kotoba"], 0.30)
    ratio_line("kotoba-cold run -c pass / python3 -B -c pass", wall["kotoba-cold"], py,
               "<= 1.15", lambda m: m <= 1.15)
    if bwrap:
        ratio_line("bwrap ... python3 / python3", wall["bwrap"], py)
        res["bwrap"] = ratio_line("kotoba / bwrap", wall["kotoba"], wall["bwrap"], "< 1.00",
                                  lambda m: m < 1.0)
        warm_target("kotoba / bwrap", res["bwrap"], 0.40)
        ratio_line("kotoba-cold / bwrap", wall["kotoba-cold"], wall["bwrap"], "< 1.00",
                   lambda m: m < 1.0)
    else:
        say("kotoba / bwrap: SKIPPED (no bubblewrap)   target < 1.00: NOT MEASURED")
    ratio_line("floor (fork+NNP+seccomp+exec) / python3", wall["floor"], py)
    ratio_line("kotoba-cold / floor", wall["kotoba-cold"], wall["floor"])
    say("python3 -B -c pass CPU: median %.1f ms (user+sys, from wait4)"
        % (res["python_cpu"] * 1e3))
    return res


def warm_target(name, med, most):
    """The target for a spaced run (its spare waits), on a ratio already
    printed above."""
    target_line("%s (warm interpreters): median %.3f" % (name, med), "<= %.2f" % most,
                med <= most, name + " (warm)")


# Snippets whose imports a warm interpreter holds already.
IMPORT_SNIPPETS = [
    ("stdlib imports", "import json, re, pathlib, urllib.request, csv, datetime", 0.15, None),
    ("numpy", "import numpy; print(numpy.arange(10).sum())", 0.10, "python3-numpy"),
]


def module_present(module):
    return subprocess.run([PYTHON, "-c", "import " + module], capture_output=True).returncode == 0


def imports(args, build, work, broker, cold):
    """kotoba run against bare python3 for snippets that import what agents
    use, interleaved: cold, a start that pays for its imports; warm, a spare
    that imported them before the code came ([sandbox] preload; numpy is
    added to it for its line, as an administrator would)."""
    say("== 1b. snippets with imports: %d rounds each, interleaved with bare python3"
        % args.pairs)
    for name, code, most, package in IMPORT_SNIPPETS:
        warm = broker
        if package and not apt_install(package, lambda: module_present("numpy"),
                                       "to time the numpy snippet"):
            target_line("%s: SKIPPED (%s not installed)" % (name, package), "<= %.2f" % most,
                        False, name + " / python3 (warm)")
            continue
        if package:
            warm = Broker(build, os.path.join(work, "numpy"), BASE_CONF + "[sandbox]\n"
                          "preload = json,re,pathlib,urllib.request,csv,datetime,numpy\n")
            warm.start()
        try:
            wall = imports_timed(args, code, warm, cold)
        finally:
            if warm is not broker:
                warm.stop()
        say("median wall ms: python3 %.1f, kotoba %.1f, kotoba-cold %.1f   (%s)"
            % tuple([statistics.median(wall[n]) * 1e3 for n in ("python3", "kotoba",
                                                               "kotoba-cold")] + [code]))
        med = ratio_line("kotoba / python3, " + name, wall["kotoba"], wall["python3"])
        warm_target("kotoba / python3, " + name, med, most)
        ratio_line("kotoba-cold / python3, " + name, wall["kotoba-cold"], wall["python3"])


def imports_timed(args, code, warm, cold):
    cmds = {"python3": [PYTHON, "-B", "-c", code],
            "kotoba": [warm.kotoba, "run", "-c", code, "--no-channel", "--socket", warm.socket],
            "kotoba-cold": [cold.kotoba, "run", "-c", code, "--no-channel", "--socket",
                            cold.socket]}
    wall = {n: [] for n in cmds}
    names = list(cmds)
    for r in range(args.pairs + 2):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            w, _, rc = timed_kotoba(warm if n == "kotoba" else None, cmds[n])
            if rc != 0:
                sys.exit("bench: %s exited %d: %s" % (n, rc, " ".join(cmds[n])))
            if r >= 2:  # the first two rounds warm the page cache and the spares
                wall[n].append(w)
    return wall


# ---- 2. broker overhead ---------------------------------------------------

def warm_overhead(args, broker, work):
    """exec -> ready of runs that each take a spare (the broker's log)."""
    n = args.warm_runs
    log_off = len(broker.read_log())
    c = Client(broker.socket, work)
    c.hello()
    for i in range(n):
        broker.wait_spare()
        c.exec_timed(STAMP, i + 1)
    c.close()
    time.sleep(0.2)
    log = broker.read_log()[log_off:]
    took = {r for r in re.findall(r"run=(\d+) took spare worker", log)}
    stopped = {}
    for why in re.findall(r"spare stopped: (.*)", log):
        stopped[why] = stopped.get(why, 0) + 1
    say("warm runs: %d of %d took a spare; spares stopped: %s" % (
        len(took), n, ", ".join("%d (%s)" % (v, k) for k, v in stopped.items()) or "none"))
    ready = [int(us) for r, us in re.findall(r"run=(\d+) t_exec_to_ready_us=(\d+)", log)
             if r in took]
    if not ready:
        target_line("broker exec->ready, warm: no run took a spare", "p50 < 500 us", False,
                    "broker exec->ready (warm)")
        return
    target_line("broker exec->ready, warm (broker log, %d of %d runs took a spare): p50 %.0f us, "
                "p99 %.0f us" % (len(ready), n, pct(ready, 50), pct(ready, 99)), "p50 < 500 us",
                pct(ready, 50) < 500, "broker exec->ready (warm)")
    sync = sync_floor(broker.state)
    say("  its floor: the decision row's fdatasync on the state directory's disk, p50 %.0f us, "
        "p90 %.0f us (%d appends of a 4 KiB page, measured now)" % (
            pct(sync, 50), pct(sync, 90), len(sync)))


def sync_floor(state_dir, rounds=100):
    """What one durable row costs on this disk, whatever the broker does
    around it: a 4 KiB append and fdatasync, as a WAL commit makes."""
    path = os.path.join(state_dir, "bench-sync")
    us = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        for _ in range(rounds):
            os.write(fd, b"\0" * 4096)
            t = time.monotonic_ns()
            os.fdatasync(fd)
            us.append((time.monotonic_ns() - t) / 1000.0)
    finally:
        os.close(fd)
        os.unlink(path)
    return us


def warm_phases(args, broker, work):
    """Where a spaced warm `pass` goes, phase by phase, each run paired with
    a bare `python3 -B -c pass`: the client's clock for what it waits for,
    the broker's log for its own share of each (the snippet ends through
    its own end, PYTHON_SNIPPET_END, not STAMP's os._exit)."""
    n = min(args.warm_runs, 100)
    log_off = len(broker.read_log())
    c = Client(broker.socket, work)
    c.hello()
    start, end, total, bare = [], [], [], []
    for i in range(n):
        broker.wait_spare()
        t_sent, t_started, t_exit, _, m = c.exec_timed("pass", 100000 + i)
        if m.get("type") != "exit" or t_started is None:
            continue
        start.append((t_started - t_sent) / 1e3)
        end.append((t_exit - t_started) / 1e3)
        total.append((t_exit - t_sent) / 1e3)
        bare.append(timed_run([PYTHON, "-B", "-c", "pass"])[0] * 1e6)
    c.close()
    time.sleep(0.2)
    log = broker.read_log()[log_off:]
    timing = {}
    for line in log.splitlines():
        if "t_exec_to_ready_us=" in line:
            for key, val in re.findall(r"(t_\w+_us)=(\d+)", line):
                timing.setdefault(key, []).append(int(val))
    ready = timing.get("t_exec_to_ready_us", [])
    frame = timing.get("t_exit_to_frame_us", [])
    say("phases of a spaced warm `pass` run (p50 over %d runs, us):" % len(total))
    rows = [("exec sent -> started frame (client: scan, decision, audit row, go, "
             "the worker's check, hand-over)", start),
            ("  of which the broker's exec frame -> ready (its log)", ready),
            ("    the gate: scan, grant, decision, its audit row committed",
             timing.get("t_gate_us", [])),
            ("    the hand-over: the spare found, the code sealed, `go` sent",
             timing.get("t_handover_us", [])),
            ("    the worker: its check that the spare still fits, the code to python3, "
             "`ready` read", timing.get("t_worker_us", [])),
            ("started -> exit frame (client: the snippet, its end, output drained, "
             "exit reported)", end),
            ("  of which the broker's exit -> exit frame (its log)", frame),
            ("exec sent -> exit frame (client)", total),
            ("bare python3 -B -c pass, run after each (baseline)", bare)]
    for name, xs in rows:
        say("  %-92s %8.0f" % (name, pct(xs, 50) if xs else float("nan")))
    if total:
        ratio_line("warm pass (client, its end) / python3 -c pass", total, bare,
                   "<= 0.30", lambda r: r <= 0.30)


def broker_overhead(args, broker, work, e2e):
    n = args.runs
    say("== 2. broker overhead, %d sequential runs on one connection (client-side upper bound); "
        "a broker with [sandbox] warm = no" % n)
    log_off = len(broker.read_log())
    c = Client(broker.socket, work)
    c.hello()
    start_ready, exit_frame, total = [], [], []
    bad = 0
    for i in range(n):
        t_sent, t_started, t_exit, out, end = c.exec_timed(STAMP, i + 1)
        if end["type"] != "exit" or t_started is None or not out.isdigit():
            bad += 1
            if bad == 1:
                say("run %d did not end as expected: %r %r" % (i + 1, end, out[:100]))
            continue
        start_ready.append((t_started - t_sent) / 1e3)
        exit_frame.append((t_exit - int(out)) / 1e3)
        total.append((t_exit - t_sent) / 1e3)
    c.close()
    if bad:
        say("*** %d of %d runs failed" % (bad, n))
    if not start_ready:
        target_line("broker overhead: no run succeeded", "p50 < 500 us", False)
        return
    sums = [a + b for a, b in zip(start_ready, exit_frame)]
    say("exec sent -> started received   p50 %7.0f us  p99 %7.0f us   (includes worker exec, "
        "scratch dir, fork, sandbox steps, seccomp load, execve of python3)"
        % (pct(start_ready, 50), pct(start_ready, 99)))
    say("snippet exit -> exit received   p50 %7.0f us  p99 %7.0f us   (reap, kill sweep, "
        "scratch removal, finished, audit row)" % (pct(exit_frame, 50), pct(exit_frame, 99)))
    say("exec sent -> exit received      p50 %7.0f us  p99 %7.0f us   (= %.2f x python3 -c pass "
        "wall)" % (pct(total, 50), pct(total, 99), pct(total, 50) / 1e6 / e2e["python_wall"]))
    # Exact figures from the broker's debug line (README.md: the timing line).
    timing = {}
    for line in broker.read_log()[log_off:].splitlines():
        if "t_exec_to_ready_us=" in line:
            for key, val in re.findall(r"(t_\w+_us)=(\d+)", line):
                timing.setdefault(key, []).append(int(val))
    for key in sorted(timing):
        say("broker log %-24s p50 %7.0f us  p99 %7.0f us  (n=%d)"
            % (key, pct(timing[key], 50), pct(timing[key], 99), len(timing[key])))
    if "t_exec_to_ready_us" in timing:
        ready = timing["t_exec_to_ready_us"]
        target_line("broker exec->ready (broker log): p50 %.0f us" % pct(ready, 50),
                    "p50 < 500 us", pct(ready, 50) < 500, "broker exec->ready")
    if "t_exec_to_ready_us" in timing and "t_exit_to_frame_us" in timing:
        both = [a + b for a, b in zip(timing["t_exec_to_ready_us"], timing["t_exit_to_frame_us"])]
        target_line("broker overhead, exec->ready + finished->exit frame (broker log): p50 %.0f "
                    "us, p99 %.0f us" % (pct(both, 50), pct(both, 99)), "p50 < 500 us",
                    pct(both, 50) < 500, "broker overhead (broker log)")
    else:
        say("broker log: no t_exec_to_ready_us lines (a broker without the timing line); the "
            "client-side figures are upper bounds")
        target_line("broker overhead, both together (client-side upper bound): p50 %.0f us, "
                    "p99 %.0f us" % (pct(sums, 50), pct(sums, 99)), "p50 < 500 us",
                    pct(sums, 50) < 500)


# ---- 3. throughput --------------------------------------------------------

def proc_cpu(pid):
    """(self, waited-for children) CPU seconds of a process, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(v[11]) + int(v[12])) / tck, (int(v[13]) + int(v[14])) / tck


def run_together(client, nclients, barrier):
    """Runs client() in nclients threads, which all wait at barrier (of
    nclients + 1) before they start; returns the seconds from the barrier
    until the last one ends."""
    threads = [threading.Thread(target=client) for _ in range(nclients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return time.monotonic() - t0


def kotoba_throughput(broker, work, nclients, per_client):
    errors = []
    snippet_cpu = []
    barrier = threading.Barrier(nclients + 1)

    def client():
        try:
            c = Client(broker.socket, work)
            c.hello()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
            barrier.wait()
            return
        barrier.wait()
        for i in range(per_client):
            try:
                _, _, _, _, end = c.exec_timed("pass", i + 1)
                if end["type"] != "exit" or end.get("code") != 0:
                    errors.append(repr(end))
                else:
                    snippet_cpu.append(end.get("cpu_us", 0) / 1e6)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                break
        c.close()

    dt = run_together(client, nclients, barrier)
    return (nclients * per_client - len(errors)) / dt, errors, snippet_cpu


def bare_throughput(nclients, per_client, cpu=None):
    """Runs per second; each run's CPU seconds appended to cpu."""
    argv = [PYTHON, "-B", "-c", "pass"]
    barrier = threading.Barrier(nclients + 1)
    cpu = [] if cpu is None else cpu

    def client():
        barrier.wait()
        for _ in range(per_client):
            cpu.append(timed_run(argv)[1])

    return nclients * per_client / run_together(client, nclients, barrier)


def machine_idle(fn):
    """fn()'s result and the share of the machine's CPU time that was idle
    (or waiting for I/O) while it ran, from /proc/stat: above 0 at 32
    clients, something other than CPU holds the runs back."""
    def ticks():
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    t0 = ticks()
    out = fn()
    d = [b - a for a, b in zip(t0, ticks())]
    return out, (d[3] + d[4]) / max(1, sum(d))


def throughput(args, broker, work, e2e):
    cores = len(os.sched_getaffinity(0))
    limit = cores / e2e["python_cpu"]
    say("== 3. throughput: %d snippets per level, %d rounds alternating with bare python3"
        % (args.tput_total, args.tput_rounds))
    say("machine limit: %d cores / %.1f ms CPU of python3 -B -c pass = %.0f snippets/s"
        % (cores, e2e["python_cpu"] * 1e3, limit))
    for n in (1, 2, 8, 32):
        # One client back to back: each run's spare is made when it ends,
        # so the next run finds it still starting, or ready (SECURITY.md,
        # "Spare interpreters").
        per = max(1, args.tput_total // n) if n > 1 else min(100, args.tput_total)
        if n == 32:  # no error in this many runs
            per = max(per, -(-args.tput_runs_32 // (n * args.tput_rounds)))
        ks, bs, snip, bare_cpu, idle = [], [], [], [], []
        nerr = 0
        cpu0 = proc_cpu(broker.proc.pid)
        for r in range(args.tput_rounds):
            def kotoba_round():
                return kotoba_throughput(broker, work, n, per)
            if r % 2 == 0:
                (k, errs, sc), i = machine_idle(kotoba_round)
                b = bare_throughput(n, per, bare_cpu)
            else:
                b = bare_throughput(n, per, bare_cpu)
                (k, errs, sc), i = machine_idle(kotoba_round)
            snip += sc
            idle.append(i)
            nerr += len(errs)
            if errs:
                say("*** %d clients: %d errors, first: %s" % (n, len(errs), errs[0][:200]))
            ks.append(k)
            bs.append(b)
        time.sleep(0.3)  # let the broker reap its last workers
        cpu1 = proc_cpu(broker.proc.pid)
        k, b = statistics.median(ks), statistics.median(bs)
        text = ("%2d clients x %3d: %5.1f snippets/s = %3.0f%% of the limit; bare python3 at %d: "
                "%5.1f/s (kotoba = %3.0f%% of it)" % (n, per, k, 100 * k / limit, n, b, 100 * k / b))
        if n == 32:
            target_line(text, ">= 85% of the limit", k / limit >= 0.85,
                        "throughput, 32 clients")
            target_line("32 clients (warm interpreters): %.2f x the limit, %d errors in %d runs"
                        % (k / limit, nerr, args.tput_rounds * n * per),
                        ">= 2.00 x, 0 errors", k / limit >= 2.0 and nerr == 0,
                        "throughput, 32 clients (warm)")
            paired = statistics.median(x / y for x, y in zip(ks, bs))
            target_line("32 clients against 32 bare python3 loops, same run: %.2f x (rounds: %s; "
                        "machine idle while kotoba ran: %s)"
                        % (paired, " ".join("%.2f" % (x / y) for x, y in zip(ks, bs)),
                           " ".join("%.0f%%" % (100 * x) for x in idle)),
                        ">= 1.00 x", paired >= 1.0, "throughput, 32 clients / bare python3")
        elif n == 1:
            paired = statistics.median(y / x for x, y in zip(ks, bs))
            target_line("one client back to back: kotoba's time per run %.2f x bare python3's "
                        "(rounds: %s)" % (paired, " ".join("%.2f" % (y / x) for x, y in zip(ks, bs))),
                        "<= 0.80 x", paired <= 0.80, "back to back, one client")
        else:
            say(text + "   target: none at %d clients" % n)
        if snip:
            nrun = len(snip)
            c_ms = sum(snip) / nrun * 1e3
            s_ms = ((cpu1[1] - cpu0[1]) - sum(snip)) / nrun * 1e3
            b_ms = (cpu1[0] - cpu0[0]) / nrun * 1e3
            say("   CPU per snippet: snippet process (sandbox steps + python3) %.1f ms, worker "
                "supervisor %.1f ms, broker %.1f ms; bare python3 %.1f ms -> kotoba costs "
                "%.2f x the CPU   target: none (reference)" % (c_ms, s_ms, b_ms, e2e["python_cpu"] * 1e3,
                                    (c_ms + s_ms + b_ms) / (e2e["python_cpu"] * 1e3)))
            say("   bare python3 -B -c pass at %d at once: %.1f ms CPU per run (wait4; alone: "
                "%.1f ms)   target: none (reference)"
                % (n, statistics.mean(bare_cpu) * 1e3, e2e["python_cpu"] * 1e3))


# ---- 4. the pre-screen ----------------------------------------------------

def make_corpus(path, cap):
    files = []
    for d in sorted(glob.glob("/usr/lib/python3*/")):
        for root, dirs, names in os.walk(d):
            dirs.sort()
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    total = 0
    with open(path, "wb") as out:
        for f in files:
            try:
                size = os.path.getsize(f)
                if size == 0 or size > (1 << 20) or total + size > cap:
                    continue
                with open(f, "rb") as src:
                    data = src.read()
            except OSError:
                continue
            if not data.endswith(b"\n"):
                data += b"\n"
            out.write(data)
            total += len(data)
    return total, len(files)


def prescreen(args, build, work, e2e):
    say("== 4. pre-screen (broker/scan.c linked into build/bench/scanbench; best of 5 each)")
    corpus = os.path.join(work, "stdlib.py")
    total, nfiles = make_corpus(corpus, args.corpus_mib << 20)
    p = subprocess.run([os.path.join(build, "bench", "scanbench"), corpus], capture_output=True,
                       text=True)
    if p.returncode != 0:
        target_line("pre-screen: scanbench failed: " + p.stderr.strip()[:200], "", False)
        return
    with open(os.path.join(build, "bench", "scan.txt"), "w") as f:
        f.write(p.stdout)

    def kv(line):
        head, _, rest = line.partition(" name=")
        d = dict(x.split("=", 1) for x in head.split()[1:])
        d["name"] = rest
        return d

    lines = p.stdout.splitlines()
    corp = kv(next(line for line in lines if line.startswith("corpus ")))
    raw = kv(next(line for line in lines if line.startswith("raw ")))
    ordi = kv(next(line for line in lines if line.startswith("ordinary ")))
    adv = [kv(line) for line in lines if line.startswith("adv ")]
    py_ms = e2e["python_wall"] * 1e3
    say("standard library as it is: %.1f MiB in %s chunks of <= 1 MiB: %.0f MB/s"
        "   target: none (reference)" % (int(corp["bytes"]) / 2**20, corp["chunks"],
                                          float(corp["mbps"])))
    say("first 1 MiB as it is: %.2f ms (%s; a first match ends a label's pass early)"
        % (float(raw["ms"]), raw["labels"]))
    o_ms = float(ordi["ms"])
    target_line("1 MiB ordinary code, no labels (every pattern reads it all): %.2f ms, %.0f MB/s "
                "= %.3f x python3 -c pass" % (o_ms, float(ordi["mbps"]), o_ms / py_ms),
                "< 0.10", o_ms / py_ms < 0.10)
    adv.sort(key=lambda d: -float(d["ms"]))
    for d in adv[:5]:
        say("  adversarial %-30s %7.2f ms  %5.2f x ordinary  labels %s"
            % (d["name"], float(d["ms"]), float(d["ratio"]), d["labels"]))
    say("  (all %d adversarial inputs: build/bench/scan.txt)" % len(adv))
    worst = adv[0]
    target_line("worst 1 MiB adversarial (%s): %.2f x ordinary" % (worst["name"],
                                                                   float(worst["ratio"])),
                "<= 5x", float(worst["ratio"]) <= 5.0)
    top = max([o_ms, float(raw["ms"])] + [float(d["ms"]) for d in adv])
    target_line("costliest snippet up to the limit: %.2f ms = %.3f x python3 -c pass"
                % (top, top / py_ms), "< 0.10", top / py_ms < 0.10)


# ---- 5. memory ------------------------------------------------------------

def rss_text(pid):
    return "VmRSS %.1f MiB (anon %.1f, file %.1f), VmHWM %.1f MiB" % (
        status_kb(pid, "VmRSS") / 1024, status_kb(pid, "RssAnon") / 1024,
        status_kb(pid, "RssFile") / 1024, status_kb(pid, "VmHWM") / 1024)


def memory(args, broker, work, idle_rss):
    say("== 5. memory")
    pid = broker.proc.pid
    target_line("broker idle, fresh: %.1f MiB (%s)" % (idle_rss[0] / 1024, idle_rss[1]),
                "< 8 MiB", idle_rss[0] < 8 * 1024)
    now = status_kb(pid, "VmRSS")
    target_line("broker idle after phases 1-4: %.1f MiB (%s)" % (now / 1024, rss_text(pid)),
                "< 8 MiB", now < 8 * 1024)
    conns = []
    try:
        for _ in range(args.idle_conns):
            c = Client(broker.socket, work)
            c.hello()
            conns.append(c)
        time.sleep(0.2)
        rss = status_kb(pid, "VmRSS")
        target_line("broker with %d idle connections: %.1f MiB (+%.1f KiB per connection)"
                    % (len(conns), rss / 1024, (rss - now) / max(1, len(conns))),
                    "< 32 MiB", rss < 32 * 1024)
    except OSError as e:
        target_line("broker with %d idle connections: failed after %d: %s"
                    % (args.idle_conns, len(conns), e), "< 32 MiB", False)
    finally:
        for c in conns:
            c.close()
    # The supervisor S while a snippet sleeps: what stays resident per run.
    c = Client(broker.socket, work)
    c.hello()
    c.send({"type": "exec", "id": 1, "code": "import time\ntime.sleep(1.5)\n", "cwd": work})
    m = c.recv()
    while m.get("type") != "started":
        if m.get("type") in ("exit", "error"):
            say("worker RSS: the snippet did not start: %r" % (m,))
            return
        m = c.recv()
    time.sleep(0.3)
    workers = [w for w in broker.children() if _comm(w) == "kotoba-worker"]
    for w in workers:
        say("worker supervisor S pid %d: %s   target: none (reference)" % (w, rss_text(w)))
        for ch in _children(w):
            say("  its snippet child (python3 sleeping) pid %d: %s" % (ch, rss_text(ch)))
    if not workers:
        say("worker RSS: no kotoba-worker child of the broker found")
    spare_memory(os.path.dirname(broker.brokerd), work)
    while m.get("type") not in ("exit", "error"):
        m = c.recv()
    c.close()


def spare_memory(build, work):
    """What a waiting spare holds: its worker and its python3 with the
    default preload list imported (a broker of its own: phase 3's clients
    may have left this user without spares for a while)."""
    b = Broker(build, os.path.join(work, "spare"), BASE_CONF + "[sandbox]\nwarm = yes\n")
    b.start()
    try:
        c = Client(b.socket, work)
        c.hello()
        c.exec_timed("pass", 1)
        c.close()
        b.wait_spare(5.0)
        spares = b.spare_pids()
        if not spares:
            say("spare RSS: no spare waits")
        for worker, py in spares[:1]:
            say("a spare waiting: worker pid %d: %s; python3 with [sandbox] preload imported "
                "pid %d: %s   target: none (reference)" % (worker, rss_text(worker), py,
                                                         rss_text(py)))
    finally:
        b.stop()


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def _children(pid):
    out = []
    for task in glob.glob("/proc/%d/task/*/children" % pid):
        try:
            with open(task) as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return out


# ---- main -----------------------------------------------------------------

# ---- 6. docker mode -------------------------------------------------------

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CT_SOCKET = "/run/kotoba-test-engine/podman.sock"
CT_IMAGE = "localhost/kotoba-test-python:bookworm"
CT_USER = "kotoba-ct"
DOCKER_CONF = ("[broker]\nsandbox = docker\nroot_user = %s\nmax_runs_per_uid = 64\n"
               "[docker]\ncli = podman\nimage = %s\nurl = unix://%s\nidle = 600s\n"
               % (CT_USER, CT_IMAGE, CT_SOCKET))


def engine_ready():
    """tests/container/setup.sh: the test engine service and image.
    Returns None when ready, else why not."""
    if os.geteuid() != 0:
        return "needs root (it starts the test engine service)"
    p = subprocess.run([os.path.join(TOP, "tests", "container", "setup.sh")],
                       capture_output=True, text=True)
    if p.returncode == 0:
        return None
    return "tests/container/setup.sh %s: %s" % (
        "skipped" if p.returncode == 77 else "failed (%d)" % p.returncode,
        p.stderr.strip()[-300:])


def user_dir(work, name):
    import pwd
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    pw = pwd.getpwnam(CT_USER)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    return d


def docker_run(broker, cwd):
    """`kotoba run -c pass` in a container: (wall seconds, container)."""
    t0 = time.perf_counter_ns()
    p = subprocess.run([broker.kotoba, "run", "--socket", broker.socket, "--no-channel",
                        "--json", "--cwd", cwd, "-c", "pass"], capture_output=True)
    wall = (time.perf_counter_ns() - t0) / 1e9
    import json
    out = json.loads(p.stdout)
    if out.get("where") != "container" or out.get("exit") != 0:
        raise RuntimeError("docker-mode run failed: %r" % (out,))
    return wall, out["container"]


def engine_exec(name):
    """The engine's own exec into the same container, as the broker's
    worker runs it but without the broker, the worker or the sandbox."""
    argv = ["/usr/bin/podman", "--remote", "--url=unix://" + CT_SOCKET, "exec", "--interactive",
            name, "python3", "-B", "-"]
    t0 = time.perf_counter_ns()
    subprocess.run(argv, input=b"pass\n", capture_output=True, check=True)
    return (time.perf_counter_ns() - t0) / 1e9


def docker_mode(args, build, work):
    rounds = args.docker_rounds
    say("== 6. docker mode: %d rounds of a cold run (new working directory, so a new "
        "container), a warm run and the engine's exec alone" % rounds)
    why = engine_ready()
    if why:
        say("*** SKIPPED: docker mode: " + why)
        return
    dwork = os.path.join(work, "docker")
    os.makedirs(dwork)
    broker = Broker(build, dwork, DOCKER_CONF)
    broker.start()
    try:
        warm_dir = user_dir(dwork, "warm")
        _, name = docker_run(broker, warm_dir)  # starts the warm container
        cold, warm, bare = [], [], []
        for i in range(rounds):
            cold.append(docker_run(broker, user_dir(dwork, "cold%d" % i))[0])
            wall, again = docker_run(broker, warm_dir)
            if again != name:
                raise RuntimeError("the warm container was replaced: %s, then %s" % (name, again))
            warm.append(wall)
            bare.append(engine_exec(name))
        say("  medians: cold run %.3f s, warm run %.3f s, engine exec alone %.3f s"
            % (statistics.median(cold), statistics.median(warm), statistics.median(bare)))
        ratio_line("docker: warm run / cold run", warm, cold)
        ratio_line("docker: warm run / engine exec alone", warm, bare)
    finally:
        broker.stop()
        subprocess.run([os.path.join(TOP, "tests", "container", "teardown.sh")],
                       capture_output=True)


# ---- 7. the secret masks ----------------------------------------------------

DEV_SET = [".ssh/", ".aws/", ".gnupg/", ".config/gh/", ".docker/config.json"]


def plant(base, names):
    """Each name under base, a directory (trailing /) holding a key or a
    file, readable by the snippet's user; returns their paths."""
    paths = []
    for name in names:
        p = os.path.join(base, name.rstrip("/"))
        if name.endswith("/"):
            os.makedirs(p, exist_ok=True)
            with open(os.path.join(p, "key"), "w") as f:
                f.write("planted\n")
        else:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write("planted\n")
        paths.append(p)
    subprocess.run(["chmod", "-R", "a+rX", base], check=True)
    return paths


def mask_brokers(build, work):
    """secrets = off, a developer's set, 18 masks, the developer's set anew:
    {name: (broker, its project directory)}, each project holding a .env."""
    home = plant(os.path.join(work, "home"), DEV_SET)
    many = plant(os.path.join(work, "many"), ["d%d/" % i for i in range(8)] +
                 ["f%d" % i for i in range(9)])
    os.chmod(work, 0o755)
    sets = {"off": ("off", home), "developer": ("yes", home), "18 masks": ("yes", many),
            "anew": ("yes", home)}
    out = {}
    for name, (mode, paths) in sets.items():
        d = os.path.join(work, "masks-" + name.replace(" ", "-"))
        proj = os.path.join(d, "project")
        plant(proj, [".env"])
        os.chmod(d, 0o755)
        # Cold runs: each pays for its masks (a spare pays before the run).
        b = Broker(build, d, "[sandbox]\nwarm = no\nsecrets = %s\nsecret_paths = %s\n"
                   % (mode, " ".join(paths)))
        b.start()
        out[name] = (b, proj)
    return out


def another_env(proj, i):
    """The same number of masks under another key: .env.<i> for .env.<i-1>."""
    old = os.path.join(proj, ".env.%d" % (i - 1))
    if os.path.exists(old):
        os.unlink(old)
    plant(proj, [".env.%d" % i])


def secret_masks(args, build, work):
    say("== 7. secret masks: %d unattended runs of `pass` per set, secrets = off and on, "
        "interleaved" % args.mask_runs)
    brokers = mask_brokers(build, work)
    try:
        clients = {m: Client(b.socket, proj) for m, (b, proj) in brokers.items()}
        for c in clients.values():
            c.hello()
        times = {m: [] for m in clients}
        names = list(clients)
        for i in range(args.mask_runs + 5):
            for k in range(len(names)):
                m = names[(i + k) % len(names)]
                if m == "anew":
                    another_env(brokers[m][1], i)
                t0, _, t1, _, end = clients[m].exec_timed("pass", i + 1)
                if end.get("type") != "exit" or end.get("secrets") != (
                        "off" if m == "off" else "masked"):
                    sys.exit("bench: secrets, %s: %r" % (m, end))
                if i >= 5:  # the first rounds warm the caches
                    times[m].append((t1 - t0) / 1e6)
        for c in clients.values():
            c.close()
    finally:
        for b, _ in brokers.values():
            b.stop()
    off = statistics.median(times["off"])
    say("exec -> exit ms, p50 (p90): " + ", ".join(
        "%s %.2f (%.2f)" % (m, statistics.median(t), pct(t, 90)) for m, t in times.items()))
    for m in names[1:]:
        diffs = statistics.median(a - b for a, b in zip(times[m], times["off"]))
        text = ("secret masks, %s: p50 added per run %.3f ms (median of paired differences "
                "%.3f ms, n=%d)" % (m, statistics.median(times[m]) - off, diffs, len(times[m])))
        if m == "developer":
            target_line(text, "<= 0.5 ms", statistics.median(times[m]) - off <= 0.5,
                        name="secret masks per run")
        else:
            say(text + "   (reference)")


# Refused an exec (the gate's entry) and a write (the interpreter's),
# names built at run time to pass the pre-screen.
REFUSED = ("import builtins\n"
           "o = builtins.__dict__['op' + 'en']\n"
           "sp = builtins.__dict__['__imp' + 'ort__']('sub' + 'process')\n"
           "try:\n    sp.run(['/bin/true'])\nexcept OSError:\n    pass\n"
           "try:\n    o('notes.md', 'w' + 't')\nexcept OSError:\n    pass\n")


def receipt_brokers(build, work):
    """{"on": broker, "off": broker}: the same worker binary, beside its
    kotoba_receipt.py or alone in a directory of its own."""
    alone = os.path.join(work, "worker-alone")
    os.makedirs(alone)
    shutil.copy2(os.path.join(build, "kotoba-worker"), alone)
    subprocess.run(["chmod", "-R", "a+rX", alone], check=True)
    out = {}
    for name, conf in (("on", ""), ("off", "worker = %s\n" % os.path.join(alone, "kotoba-worker"))):
        d = os.path.join(work, "receipt-" + name)
        os.makedirs(os.path.join(d, "project"))
        os.chmod(d, 0o755)
        # the snippet's user may write there: only the sandbox refuses it
        os.chmod(os.path.join(d, "project"), 0o777)
        b = Broker(build, d, "[broker]\n" + conf + "[sandbox]\nwarm = no\n")
        b.start()
        out[name] = b
    return out


def receipts(args, build, work):
    say("== 8. the receipt: %d unattended runs of `pass` per broker, with the receipt and "
        "without, interleaved" % args.receipt_runs)
    brokers = receipt_brokers(build, work)
    try:
        clients = {m: Client(b.socket, os.path.join(b.dir, "project")) for m, b in brokers.items()}
        for c in clients.values():
            c.hello()
        times = {(m, code): [] for m in clients for code in ("pass", "refused")}
        cpu = {m: [] for m in clients}
        for i in range(args.receipt_runs + 5):
            for k, m in enumerate(("on", "off") if i % 2 else ("off", "on")):
                for code, text in (("pass", "pass"), ("refused", REFUSED)):
                    if code == "refused" and i % 4:
                        continue  # the reference needs fewer rounds
                    t0, _, t1, _, end = clients[m].exec_timed(text, 2 * i + 1 + k)
                    want = 2 if code == "refused" and m == "on" else (
                        1 if code == "refused" else 0)
                    if end.get("type") != "exit" or end.get("blocked_total", 0) != want:
                        sys.exit("bench: receipt %s, %s: %r" % (m, code, end))
                    if i >= 5:
                        times[(m, code)].append((t1 - t0) / 1e6)
                        if code == "pass":
                            cpu[m].append(end.get("cpu_us", 0) / 1e3)
        for c in clients.values():
            c.close()
    finally:
        for b in brokers.values():
            b.stop()
    say("exec -> exit ms, p50 (p90): " + ", ".join(
        "%s %s %.2f (%.2f)" % (code, m, statistics.median(t), pct(t, 90))
        for (m, code), t in times.items()))
    on, off = times[("on", "pass")], times[("off", "pass")]
    diff = statistics.median(on) - statistics.median(off)
    target_line("receipt: p50 added per run %.3f ms (median of paired differences %.3f ms, "
                "n=%d)" % (diff, statistics.median(a - b for a, b in zip(on, off)), len(on)),
                "<= 0.3 ms", diff <= 0.3, name="receipt per run")
    # python3's own CPU (the exit frame's cpu_us): what the wrappers cost
    # the snippet's process, far less noisy than wall time
    say("receipt: python3's CPU p50 added per run %.3f ms (on %.2f, off %.2f)   (reference)"
        % (statistics.median(cpu["on"]) - statistics.median(cpu["off"]),
           statistics.median(cpu["on"]), statistics.median(cpu["off"])))
    ron, roff = times[("on", "refused")], times[("off", "refused")]
    say("receipt of a refused exec and write: p50 added %.3f ms (n=%d)   (reference)"
        % (statistics.median(ron) - statistics.median(roff), len(ron)))


def main():
    global OUT_FILE
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--warm-runs", type=int, default=300,
                    help="part 2: runs that each wait for and take a spare")
    ap.add_argument("--tput-total", type=int, default=256)
    ap.add_argument("--tput-rounds", type=int, default=3)
    ap.add_argument("--tput-runs-32", type=int, default=5000,
                    help="runs at 32 clients, all rounds together")
    ap.add_argument("--corpus-mib", type=int, default=16)
    ap.add_argument("--idle-conns", type=int, default=1000)
    ap.add_argument("--docker-rounds", type=int, default=10)
    ap.add_argument("--mask-runs", type=int, default=1000)
    ap.add_argument("--receipt-runs", type=int, default=300)
    ap.add_argument("--only", default="12345678", help="phases to run, e.g. 14")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    OUT_FILE = args.out
    open(OUT_FILE, "w").close()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(4096, args.idle_conns + 256)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="kotoba-bench-")
    os.chmod(work, 0o755)
    os.chdir(work)
    floor_bin = os.path.join(build, "bench", "floor")
    bpf = os.path.join(work, "unattended.bpf")
    floor_prog = subprocess.run([floor_bin, "--export", bpf], check=True, capture_output=True,
                                text=True).stdout.strip()
    build_cost = subprocess.run([floor_bin, "--time-build", "200"], capture_output=True,
                                text=True).stdout.strip()
    # Trees that build the programs at build time (worker/seccomp.h):
    # the snippet child only picks one and patches its pid in.
    pick = subprocess.run([floor_bin, "--time-pick", "2000"], capture_output=True, text=True)
    pick_cost = pick.stdout.strip() if pick.returncode == 0 else ""

    say("kotoba-broker bench  %s  kernel %s  %d cores  loadavg %.2f %.2f %.2f  uid %d"
        % (time.strftime("%Y-%m-%d %H:%M:%S"), os.uname().release,
           len(os.sched_getaffinity(0)), *os.getloadavg(), os.geteuid()))
    say("ratios are medians of interleaved pairs; the spread is the interquartile range")
    say("floor: the worker's seccomp program built ahead (%s)" % floor_prog)
    broker = Broker(build, work, BASE_CONF + "[sandbox]\nwarm = yes\n")
    cold = Broker(build, os.path.join(work, "cold"), BASE_CONF + "[sandbox]\nwarm = no\n")
    broker.start()
    cold.start()
    try:
        time.sleep(0.3)
        pid = broker.proc.pid
        idle = (status_kb(pid, "VmRSS"), rss_text(pid))
        e2e = end_to_end(args, broker, cold, floor_bin, bpf)
        cli_start(build)
        if "1" in args.only:
            imports(args, build, work, broker, cold)
        if pick_cost:
            say("seccomp_build(unattended) in-process, which the worker no longer runs per "
                "snippet: %s" % build_cost)
            say("seccomp_program_for(unattended), what the snippet child runs instead (pick "
                "the prebuilt program, patch the pid): %s" % pick_cost)
        else:
            say("seccomp_build(unattended) in-process, which the worker runs once per snippet: "
                "%s" % build_cost)
        if "2" in args.only:
            broker_overhead(args, cold, work, e2e)
            warm_overhead(args, broker, work)
            warm_phases(args, broker, work)
        if "3" in args.only:
            throughput(args, broker, work, e2e)
        if "4" in args.only:
            prescreen(args, build, work, e2e)
        if "5" in args.only:
            memory(args, broker, work, idle)
        if "6" in args.only:
            docker_mode(args, build, work)
        if "7" in args.only:
            secret_masks(args, build, work)
        if "8" in args.only:
            receipts(args, build, work)
    finally:
        cold.stop()
        broker.stop()
        log = broker.read_log() + cold.read_log()
        if "ERROR" in log or "runtime error" in log:
            say("*** the broker log has errors: %s" % os.path.join(work, "broker.log"))
        else:
            shutil.rmtree(work, ignore_errors=True)
    say("== summary (loadavg now %.2f %.2f %.2f)" % os.getloadavg())
    for name, target, ok in SUMMARY:
        say("  %-8s %-22s %s" % (verdict(ok), target, name))
    say("written to %s" % OUT_FILE)


if __name__ == "__main__":
    main()
