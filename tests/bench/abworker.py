#!/usr/bin/python3
"""Two or more kotoba-worker binaries compared on one machine, interleaved.

  abworker.py --build build [--rounds 60] [--runs 200] [--landlock yes|no]
              WORKER_A WORKER_B ...

`make bench-ab WORKERS="old/kotoba-worker new/kotoba-worker"`.  One broker
and CLI (from --build) per worker binary, each with `[broker] worker = ` that
binary; then, taking turns in rotating order:

  1. end to end: `kotoba run -c pass --no-channel` through each broker and
     bare `python3 -B -c pass`; per round ratios, median and IQR, as part 1
     of bench.py, plus each worker against the first;
  2. the broker path on one protocol connection per broker: exec sent ->
     started received, snippet exit -> exit received (bench.py's STAMP
     snippet), and the broker's own t_*_us timing lines.

For a change inside the worker this is the fair comparison on a shared
machine: everything else (broker, CLI, python3, the neighbours' load) is
the same for A and B at each moment.
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def ratios(xs, ys):
    rs = [x / y for x, y in zip(xs, ys)]
    return "median %.3f  (IQR %.3f-%.3f, n=%d)" % (statistics.median(rs), bench.pct(rs, 25),
                                                   bench.pct(rs, 75), len(rs))


def end_to_end(args, brokers):
    cmds = {"python3": [bench.PYTHON, "-B", "-c", "pass"]}
    for i, b in enumerate(brokers):
        cmds["w%d" % i] = [b.kotoba, "run", "-c", "pass", "--no-channel", "--socket", b.socket]
    names = list(cmds)
    for n in names:
        for _ in range(3):
            if bench.timed_run(cmds[n])[2] != 0:
                sys.exit("abworker: %s failed: %s" % (n, " ".join(cmds[n])))
    wall = {n: [] for n in names}
    for r in range(args.rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            w, _, rc = bench.timed_run(cmds[n])
            if rc != 0:
                sys.exit("abworker: %s exited %d" % (n, rc))
            wall[n].append(w)
    print("== end to end, %d rounds; median wall ms: %s" % (args.rounds, ", ".join(
        "%s %.1f" % (n, statistics.median(wall[n]) * 1e3) for n in names)))
    for i, w in enumerate(args.workers):
        print("w%d / python3 -B -c pass  %s   %s" % (i, ratios(wall["w%d" % i], wall["python3"]),
                                                     w))
    for i in range(1, len(args.workers)):
        print("w%d / w0                  %s" % (i, ratios(wall["w%d" % i], wall["w0"])))


def broker_path(args, brokers, work):
    clients = []
    for b in brokers:
        c = bench.Client(b.socket, work)
        c.hello()
        clients.append(c)
    res = [{"exec->started": [], "exit->exit": []} for _ in brokers]
    offs = [len(b.read_log()) for b in brokers]
    for r in range(args.runs):
        order = list(range(len(brokers)))
        if r % 2:
            order.reverse()
        for i in order:
            t_sent, t_started, t_exit, out, end = clients[i].exec_timed(bench.STAMP, r + 1)
            if end["type"] != "exit" or t_started is None or not out.isdigit():
                sys.exit("abworker: w%d: run %d ended %r" % (i, r + 1, end))
            res[i]["exec->started"].append((t_started - t_sent) / 1e3)
            res[i]["exit->exit"].append((t_exit - int(out)) / 1e3)
    for c in clients:
        c.close()
    print("== broker path, %d runs each on one connection (client side; us)" % args.runs)
    for i, b in enumerate(brokers):
        timing = {}
        for line in b.read_log()[offs[i]:].splitlines():
            for key, val in re.findall(r"(t_\w+_us)=(\d+)", line):
                timing.setdefault(key, []).append(int(val))
        figs = ["%s p50 %.0f" % (k, bench.pct(v, 50)) for k, v in res[i].items()]
        figs += ["%s p50 %.0f" % (k, bench.pct(v, 50)) for k, v in sorted(timing.items())]
        print("w%d  %s" % (i, "  ".join(figs)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--landlock", choices=("yes", "no"), default="yes")
    ap.add_argument("workers", nargs="+")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    args.workers = [os.path.abspath(w) for w in args.workers]
    work = tempfile.mkdtemp(prefix="kotoba-abworker-")
    os.chmod(work, 0o755)
    os.chdir(work)
    brokers = []
    try:
        for i, w in enumerate(args.workers):
            d = os.path.join(work, "w%d" % i)
            os.makedirs(d)
            os.chmod(d, 0o755)
            b = bench.Broker(build, d)
            with open(b.conf, "w") as f:
                f.write("[broker]\nworker = %s\n[sandbox]\nlandlock = %s\n"
                        % (w, args.landlock))
            b.start()
            brokers.append(b)
        print("abworker: %s, landlock = %s, loadavg %.2f %.2f %.2f" % (
            ", ".join("w%d %s" % (i, w) for i, w in enumerate(args.workers)), args.landlock,
            *os.getloadavg()))
        end_to_end(args, brokers)
        if args.runs:
            broker_path(args, brokers, work)
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
