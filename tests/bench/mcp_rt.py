#!/usr/bin/env python3
"""The round trip of an MCP tools/call for print(1) through `kotoba mcp`
against `kotoba run -c 'print(1)'`, on one cold broker ([sandbox] warm = no,
so both pay the same worker start), interleaved, medians printed.

The MCP figure is request written to response read on an initialized
server (a host keeps its server running); the run figure is the CLI's
process from start to exit, as an agent that shells out to it pays."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import BASE_CONF, Broker  # noqa: E402


def mcp_server(kotoba, sock, cwd):
    p = subprocess.Popen([kotoba, "mcp", "--socket", sock, "--cwd", cwd],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    ask(p, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "1"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    return p


def ask(p, method, params, ident=[0]):
    ident[0] += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident[0], "method": method,
                              "params": params}) + "\n")
    while True:
        msg = json.loads(p.stdout.readline())
        if msg.get("id") == ident[0]:
            return msg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    kotoba = os.path.join(a.build, "kotoba")
    work = tempfile.mkdtemp(prefix="kotoba-bench-mcp-")
    os.chmod(work, 0o755)
    b = Broker(a.build, work, BASE_CONF + "[sandbox]\nwarm = no\n")
    b.start()
    srv = mcp_server(kotoba, b.socket, work)
    call = {"name": "execute_code", "arguments": {"code": "print(1)"}}
    mcp, run = [], []
    try:
        for _ in range(a.rounds):
            t = time.perf_counter()
            r = ask(srv, "tools/call", call)
            mcp.append(time.perf_counter() - t)
            assert r["result"]["content"][0]["text"] == "1\n", r
            t = time.perf_counter()
            out = subprocess.run([kotoba, "run", "-c", "print(1)", "--no-channel",
                                  "--socket", b.socket, "--cwd", work],
                                 capture_output=True, text=True)
            run.append(time.perf_counter() - t)
            assert out.stdout == "1\n", out
    finally:
        srv.stdin.close()
        srv.wait()
        b.stop()
    m, k = statistics.median(mcp) * 1e3, statistics.median(run) * 1e3
    print("MCP tools/call print(1), median of %d: %.2f ms" % (a.rounds, m))
    print("kotoba run -c 'print(1)', median of %d: %.2f ms" % (a.rounds, k))
    print("MCP minus kotoba run: %+.2f ms (the target: at most +1 ms)" % (m - k))


main()
