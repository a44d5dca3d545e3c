#!/usr/bin/python3
"""Where the time of one `kotoba run -c pass` goes, phase by phase.

  phases.py --build build [--runs 60]

Starts a broker, runs the CLI sequentially under `perf trace` (syscall
tracepoints, system wide, only a few marker calls) and prints the median
of each phase between markers: CLI start, audit fsync, identity and env,
fork, worker exec, scratch directory, the child's sandbox steps, the
seccomp load, python3, teardown.  (Trees that built the seccomp program
per run show the build between the first seccomp() call and the load.)
Needs perf with tracepoints (as root); it is not part of `make bench`
(`make bench-phases`).  Marker syscalls cost a few microseconds each
under perf trace: small phases read a little high.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

MARKERS = "execve,clone,fdatasync,memfd_create,mkdir,rmdir,seccomp,sendto,recvfrom,exit_group"
LINE = re.compile(r"^\s*([\d.]+) \(\s*([\d.]*) ?m?s?\): (\S+)/(\d+) (\w+)\((.*)")


def parse(text):
    ev = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            ts, dur, comm, pid, call, rest = m.groups()
            ev.append((float(ts), float(dur) if dur else 0.0, comm, int(pid), call, rest))
    return ev


MARK_TEXT = {
    "cli_exec": "CLI execve",
    "welcome": "broker sends welcome",
    "fsync1": "broker starts the audit fdatasync (decision row)",
    "fsync1_end": "fdatasync returns",
    "memfd": "broker memfd_create (after identity + env lookups)",
    "bfork": "broker fork returns",
    "wexec": "worker execve",
    "wjob": "worker reads the job",
    "mkdir": "worker mkdir scratch",
    "sfork": "supervisor forks the snippet child",
    "probe": "the child's first seccomp() call (the load: the program is prebuilt)",
    "load": "seccomp filter loaded",
    "pexec": "python3 execve",
    "started": "broker sends started",
    "pexit": "python3 exit_group",
    "rmdir": "supervisor's first rmdir (scratch)",
    "sexit": "supervisor exit_group",
    "exitf": "broker sends exit",
    "cli_exit": "CLI exit_group",
}


def markers_of(seg):
    """Marker name -> ms for one run's events (in time order)."""
    def first(pred, after=-1.0):
        for e in seg:
            if e[0] > after and pred(e):
                return e
        return None

    def last(pred, before):
        found = None
        for e in seg:
            if e[0] < before and pred(e):
                found = e
        return found

    m = {}
    cli = first(lambda e: e[2] == "kotoba" and e[4] == "execve")
    wexec = first(lambda e: e[2] == "kotoba-worker" and e[4] == "execve")
    pexec = first(lambda e: e[2] == "python3" and e[4] == "execve")
    if not (cli and wexec and pexec):
        return None
    spid = wexec[3]
    brk = lambda call: lambda e: e[2] == "kotoba-brokerd" and e[4] == call  # noqa: E731
    sup = lambda call: lambda e: e[3] == spid and e[4] == call  # noqa: E731
    ev = {
        "cli_exec": cli,
        "welcome": first(brk("sendto")),
        "fsync1": first(brk("fdatasync")),
        "memfd": first(brk("memfd_create")),
        "bfork": first(lambda e: brk("clone")(e) and e[1] > 0),
        "wexec": wexec,
        "wjob": first(sup("recvfrom")),
        "mkdir": first(sup("mkdir")),
        "sfork": first(lambda e: sup("clone")(e) and e[1] > 0),
        "probe": first(lambda e: e[2] == "kotoba-worker" and e[4] == "seccomp"),
        "load": last(lambda e: e[2] == "kotoba-worker" and e[3] != spid and e[4] == "seccomp",
                     pexec[0]),
        "pexec": pexec,
        "started": first(brk("sendto"), pexec[0]),
        "pexit": first(lambda e: e[2] == "python3" and e[4] == "exit_group"),
        "rmdir": first(sup("rmdir")),
        "sexit": first(sup("exit_group")),
        "cli_exit": first(lambda e: e[2] == "kotoba" and e[4] == "exit_group"),
    }
    sends = [e for e in seg if brk("sendto")(e)]
    ev["exitf"] = sends[-1] if sends else None
    for k, e in ev.items():
        if e:
            m[k] = e[0] - cli[0]
    if ev["fsync1"]:
        m["fsync1_end"] = ev["fsync1"][0] + ev["fsync1"][1] - cli[0]
    if ev["bfork"]:
        m["bfork"] += ev["bfork"][1]
    if ev["sfork"]:
        m["sfork"] += ev["sfork"][1]
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=60)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not shutil.which("perf"):
        sys.exit("phases: perf is not installed (apt-get install linux-perf)")
    work = tempfile.mkdtemp(prefix="kotoba-phases-")
    os.chmod(work, 0o755)
    os.chdir(work)
    b = bench.Broker(build, work)
    b.start()
    try:
        for _ in range(3):
            bench.timed_run([b.kotoba, "run", "-c", "pass", "--no-channel", "--socket", b.socket])
        out = os.path.join(work, "trace.txt")
        tr = subprocess.Popen(["perf", "trace", "-a", "-o", out, "-e", MARKERS],
                              stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        for _ in range(args.runs):
            bench.timed_run([b.kotoba, "run", "-c", "pass", "--no-channel", "--socket", b.socket])
            time.sleep(0.02)
        time.sleep(0.3)
        tr.terminate()
        tr.wait()
        with open(out) as f:
            ev = parse(f.read())
    finally:
        b.stop()
    ev.sort(key=lambda e: e[0])
    starts = [i for i, e in enumerate(ev) if e[2] == "kotoba" and e[4] == "execve"]
    runs = []
    for k, i in enumerate(starts):
        seg = ev[i:starts[k + 1] if k + 1 < len(starts) else len(ev)]
        m = markers_of(seg)
        if m and "cli_exit" in m:
            runs.append(m)
    if not runs:
        sys.exit("phases: could not read any run from perf trace (see %s)" % out)
    names = [n for n in MARK_TEXT if sum(n in r for r in runs) >= len(runs) // 2]
    names.sort(key=lambda n: statistics.median(r[n] for r in runs if n in r))
    print("one `kotoba run -c pass --no-channel`, %d runs: median ms between markers (p25-p75)"
          % len(runs))
    for a_, b_ in zip(names, names[1:]):
        xs = [r[b_] - r[a_] for r in runs if a_ in r and b_ in r]
        print("  %6.2f (%5.2f-%5.2f)  %s -> %s" % (statistics.median(xs), bench.pct(xs, 25),
                                                  bench.pct(xs, 75), MARK_TEXT[a_],
                                                  MARK_TEXT[b_]))
    xs = [r["cli_exit"] for r in runs]
    print("  %6.2f (%5.2f-%5.2f)  total" % (statistics.median(xs), bench.pct(xs, 25),
                                           bench.pct(xs, 75)))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
