#!/usr/bin/python3
"""How long a system broker waits for its monitor to start a worker, for
two or more builds' monitors, interleaved.

  monspawn.py [--spawns 300] BUILD_A BUILD_B ...

As root.  The script plays the broker as tests/integration/test_monitor.py
does: one real kotoba-monitor per build, a connection of a test user
attached to each, then in turn a MON_SPAWN for that user (the worker's
fds 0-3 and a pipe) timed from send to answer: the time the broker's one
loop serves nothing else.  Each worker then gets EOF on its link and is
reaped before the next spawn.  A refused MON_KILL before each spawn gives
the link's own round trip for comparison (ARCHITECTURE.md, "The
monitor's requests")."""
import argparse
import os
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import test_monitor as tm  # noqa: E402
from conftest import ensure_user  # noqa: E402


def start(build, user):
    tm.MONITOR = os.path.join(build, "kotoba-monitor")
    m = tm.Monitor(worker=os.path.join(build, "kotoba-worker"), started=False)
    # Answers differ in size between builds: only err and pid are read.
    m.req.send(tm.REQUEST.pack(tm.STARTED, 0, 0, 0))
    assert int.from_bytes(m.req.recv(4096)[:4], "little") == 0
    conn = tm.connect_as(user, m.path)
    _, attached, why, got = m.attached()
    assert attached == 1, why
    return m, conn, got


def timed(m, data, fds=()):
    t0 = time.perf_counter_ns()
    socket.send_fds(m.req, [data], list(fds))
    reply = m.req.recv(4096)
    return (time.perf_counter_ns() - t0) / 1000, reply


def spawn_once(m, user):
    """One spawn's wait, in us, and the link's round trip."""
    floor, _ = timed(m, tm.REQUEST.pack(tm.KILL, 0, 1, 0))
    fds, mine, keep = tm.worker_fds()
    us, reply = timed(m, tm.REQUEST.pack(tm.SPAWN, user.pw_uid, 0, len(fds)), fds)
    pid = int.from_bytes(reply[4:8], "little", signed=True)
    if pid <= 0:
        sys.exit("monspawn: the monitor started no worker: %r" % reply)
    mine.close()
    tm.close_all(keep)
    os.waitpid(pid, 0)
    return us, floor


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spawns", type=int, default=300)
    ap.add_argument("builds", nargs="+")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("monspawn: needs root (the monitor starts as root)")
    user = ensure_user("kotoba-ta")
    builds = [os.path.abspath(b) for b in args.builds]
    mons = [start(b, user) for b in builds]
    waits = [[] for _ in builds]
    floors = [[] for _ in builds]
    print("monspawn: %s; loadavg %s" % (", ".join(builds), " ".join(
        open("/proc/loadavg").read().split()[:3])))
    for i in range(args.spawns):
        for k in range(len(builds)):
            k = (k + i) % len(builds)  # rotating order
            us, floor = spawn_once(mons[k][0], user)
            waits[k].append(us)
            floors[k].append(floor)
    for k, b in enumerate(builds):
        print("%s: MON_SPAWN send->answer p50 %.0f us, p90 %.0f us, p99 %.0f us; a refused "
              "MON_KILL p50 %.0f us (n=%d)" % (b, pct(waits[k], .5), pct(waits[k], .9),
                                              pct(waits[k], .99), pct(floors[k], .5),
                                              len(waits[k])))
    for m, conn, got in mons:
        conn.close()
        tm.close_all(got)
        m.stop()


if __name__ == "__main__":
    main()
