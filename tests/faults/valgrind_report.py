#!/usr/bin/python3
"""Judges the valgrind logs of `make check-valgrind`: one log per broker
the integration suite started.  Fails on any memcheck error or any byte
definitely lost.  Two kinds of log have no summary and are counted, not
judged: a broker's forked child that exec'd a worker (its parent is a
logged broker), and a broker the suite itself killed (SIGKILL tests).

usage: valgrind_report.py DIR
"""
import glob
import os
import re
import sys


def main(d):
    logs = sorted(glob.glob(os.path.join(d, "vg-*.log")))
    if not logs:
        print("check-valgrind: no valgrind logs in %s: did the broker run under valgrind?" % d)
        return 1
    bad, killed, forked, brokers = [], [], 0, 0
    pids = {re.sub(r"\D", "", os.path.basename(p)) for p in logs}
    for path in logs:
        text = open(path, errors="replace").read()
        if "kotoba-brokerd" not in text:
            continue  # a process valgrind followed that is not the broker
        errors = re.search(r"ERROR SUMMARY: (\d+) errors", text)
        parent = re.search(r"Parent PID: (\d+)", text)
        if not errors and parent and parent.group(1) in pids:
            forked += 1
            continue
        brokers += 1
        if not errors:
            killed.append(os.path.basename(path))
            continue
        lost = re.search(r"definitely lost: ([\d,]+) bytes", text)
        lost_bytes = int(lost.group(1).replace(",", "")) if lost else 0
        if int(errors.group(1)) or lost_bytes:
            bad.append("%s: %s errors, %d bytes definitely lost"
                       % (path, errors.group(1), lost_bytes))
    print("check-valgrind: %d brokers under memcheck, %d with errors or leaks, %d killed by "
          "their test (no summary); %d forked children exec'd a worker"
          % (brokers, len(bad), len(killed), forked))
    for line in bad:
        print("  " + line)
    return 1 if bad or not brokers else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
