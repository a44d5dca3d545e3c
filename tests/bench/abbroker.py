#!/usr/bin/python3
"""Two or more builds' brokers compared on one machine, interleaved.

  abbroker.py [--rounds 20] [--runs 25] [--warm yes|no] BUILD_A BUILD_B ...

`make bench-ab-broker BUILDS="/tmp/old/build build"`.  One broker per build
directory (its kotoba-brokerd, and what it starts beside it: the monitor
and the worker), each with `[sandbox] warm = yes`; then, taking turns in
rotating order, a round of warm runs on one protocol connection to each:
every run takes the spare the one before left (bench.py's STAMP snippet).
With --warm no, the same with cold runs: each starts its worker then, so
for a build with a monitor the request to it is on the measured path.
The figure is the broker's own exec->ready of those runs (its
t_exec_to_ready_us debug line), p50 over all rounds, and each build's p50
against the first's; beside it the hand-over part of it (t_handover_us:
cold, the worker's start and its job sent).  As root each broker is a system broker: for a build
with a monitor, the hop to it is in the figure (ARCHITECTURE.md, "The
monitor's requests").
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

CONF = "[sandbox]\nwarm = %s\nlandlock = yes\n"


def one_round(b, work, runs, first_id, warm):
    """runs runs; the broker's exec->ready and hand-over of each (warm:
    each that took a spare)."""
    off = len(b.read_log())
    c = bench.Client(b.socket, work)
    c.hello()
    for i in range(runs):
        if warm:
            b.wait_spare()
        _, _, _, _, end = c.exec_timed(bench.STAMP, first_id + i)
        if end["type"] != "exit":
            sys.exit("abbroker: %s: a run ended %r" % (b.brokerd, end))
    c.close()
    log = b.read_log()[off:]
    took = set(re.findall(r"run=(\d+) took spare worker", log))
    lines = re.findall(r"run=(\d+) t_exec_to_ready_us=(\d+).*? t_handover_us=(\d+)", log)
    return [(int(us), int(hand)) for r, us, hand in lines if r in took or not warm]


def report(ready, warm):
    """Each build's exec->ready, and its hand-over (cold: the worker's
    start through the monitor, and the job sent), against b0's."""
    base = [bench.pct([t[j] for t in ready[0]], 50) if ready[0] else 0 for j in (0, 1)]
    for i, ts in enumerate(ready):
        if not ts:
            print("b%d: no run took a spare" % i)
            continue
        for j, what in enumerate(("exec->ready", "hand-over")):
            xs = [t[j] for t in ts]
            p50 = bench.pct(xs, 50)
            print("b%d broker %s, %s: p50 %.0f us, p99 %.0f us (n=%d)%s" % (
                i, what, "warm" if warm else "cold", p50, bench.pct(xs, 99), len(xs),
                "; %.3f x b0" % (p50 / base[j]) if i and base[j] else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--warm", choices=("yes", "no"), default="yes")
    ap.add_argument("builds", nargs="+")
    args = ap.parse_args()
    builds = [os.path.abspath(b) for b in args.builds]
    work = tempfile.mkdtemp(prefix="kotoba-abbroker-")
    os.chmod(work, 0o755)
    brokers = []
    try:
        for i, build in enumerate(builds):
            d = os.path.join(work, "b%d" % i)
            os.makedirs(d)
            os.chmod(d, 0o755)
            b = bench.Broker(build, d, bench.BASE_CONF + CONF % args.warm)
            b.start()
            brokers.append(b)
        print("abbroker: %s; uid %d; loadavg %.2f %.2f %.2f" % (
            ", ".join("b%d %s" % (i, b) for i, b in enumerate(builds)), os.geteuid(),
            *os.getloadavg()), flush=True)
        ready = [[] for _ in brokers]
        for r in range(args.rounds):
            k = r % len(brokers)
            for i in list(range(k, len(brokers))) + list(range(k)):
                ready[i] += one_round(brokers[i], work, args.runs, 1 + r * args.runs,
                                      args.warm == "yes")
        report(ready, args.warm == "yes")
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
