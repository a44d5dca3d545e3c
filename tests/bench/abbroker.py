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
against the first's.  As root each broker is a system broker: for a build
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
    """runs runs; the broker's exec->ready of each (warm: each that took a
    spare)."""
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
    return [int(us) for r, us in re.findall(r"run=(\d+) t_exec_to_ready_us=(\d+)", log)
            if r in took or not warm]


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
        base = bench.pct(ready[0], 50) if ready[0] else 0
        for i, xs in enumerate(ready):
            if not xs:
                print("b%d: no run took a spare" % i)
                continue
            p50 = bench.pct(xs, 50)
            print("b%d broker exec->ready, %s: p50 %.0f us, p99 %.0f us (n=%d)%s" % (
                i, "warm" if args.warm == "yes" else "cold", p50, bench.pct(xs, 99), len(xs),
                "; %.3f x b0" % (p50 / base) if i and base else ""))
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
