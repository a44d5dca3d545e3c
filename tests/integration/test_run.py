"""The run path end to end: CLI -> broker -> worker -> python3, for real."""
import errno
import os
import signal
import subprocess
import time

import pytest

from conftest import KOTOBA, wait_for


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: gone while being read
        return False


def test_print_42(broker):
    p = broker.kotoba("run", "-c", "print(6*7)", "--no-channel")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"42\n"


def test_file_in_cwd(broker, tmpdir_k):
    work = os.path.join(tmpdir_k, "work")
    os.mkdir(work)
    script = os.path.join(tmpdir_k, "script.py")
    with open(script, "w") as f:
        f.write("import os\nprint(os.getcwd())\n")
    p = broker.kotoba("run", script, "--cwd", work, "--no-channel")
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().strip() == work


def test_stdin_exit_status(broker):
    p = broker.kotoba("run", "-", "--no-channel", input=b"import sys; sys.exit(3)")
    assert p.returncode == 3


def test_options_after_operands(broker):
    p = broker.kotoba("run", "-", "--no-channel", input=b"print('x')")
    assert p.returncode == 0 and p.stdout == b"x\n"


def test_json_fields(broker):
    r = broker.run_json("import sys; print('o'); print('e', file=sys.stderr); sys.exit(5)")
    assert r["stdout"] == "o\n" and r["stderr"] == "e\n"
    assert r["exit"] == 5 and r["signal"] is None and r["_status"] == 5
    assert r["timed_out"] is False and r["truncated"] is False and r["output_limit"] is None
    assert r["duration_ms"] >= 0 and r["decision"] == "ran"


def test_kernel_state_inside_snippet(broker):
    code = ("s = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
            "for k in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb', 'NoNewPrivs', 'Seccomp'):\n"
            "    print(k, s[k].strip())\n")
    r = broker.run_json(code)
    got = dict(line.split() for line in r["stdout"].splitlines())
    assert got["CapEff"] == "0000000000000000"
    assert got["CapPrm"] == "0000000000000000"
    assert got["CapInh"] == "0000000000000000"
    assert got["CapAmb"] == "0000000000000000"
    assert got["NoNewPrivs"] == "1"
    assert got["Seccomp"] == "2"


def test_secret_env_never_reaches_snippet(make_broker):
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="hunter2", GITHUB_TOKEN="ghp_x",
               KOTOBA_TEST_PLAIN="visible-to-broker-only")
    b = make_broker(env=env).start()
    c = b.client()
    c.exec("import os, json; print(json.dumps(dict(os.environ)))",
           env={"LANG": "C.UTF-8", "MY_API_KEY": "k", "OPENAI_API_KEY": "sk", "TZ": "UTC",
                "SSL_CERT_FILE": "/tmp/x.pem"})
    import json
    out = c.until_end()
    assert out["end"]["type"] == "exit", out["end"]
    snippet_env = json.loads(out["stdout"])
    for name in ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "KOTOBA_TEST_PLAIN", "MY_API_KEY",
                 "OPENAI_API_KEY", "PYTHONUNBUFFERED"):
        assert name not in snippet_env, name
    # The client's SSL_CERT_FILE never passes; an unattended run's names
    # the egress proxy's CA bundle, beside the socket.
    assert snippet_env["SSL_CERT_FILE"] == os.path.join(b.dir, "egress-ca.pem")
    assert snippet_env["REQUESTS_CA_BUNDLE"] == snippet_env["SSL_CERT_FILE"]
    assert "hunter2" not in out["stdout"].decode()
    assert snippet_env["TZ"] == "UTC"
    assert snippet_env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert os.path.isabs(snippet_env["HOME"]) and snippet_env["USER"]
    tmp = snippet_env["TMPDIR"]
    assert snippet_env["MPLCONFIGDIR"].startswith(tmp)
    assert snippet_env["XDG_CACHE_HOME"].startswith(tmp)
    assert not os.path.exists(tmp), "scratch dir must be removed after the run"
    c.close()


SYSCALL_PROBE = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def probe(name, nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, rc, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
probe('ptrace', 101, 16, os.getppid(), 0, 0)      # PTRACE_ATTACH
probe('mount', 165, 0, 0, 0, 0, 0)
probe('unshare', 272, 0x10000000)                  # CLONE_NEWUSER
probe('bpf', 321, 0, 0, 0)
probe('keyctl', 250, 0, 0, 0)
probe('io_uring_setup', 425, 1, 0)
probe('userfaultfd', 323, 0)
probe('perf_event_open', 298, 0, 0, -1, -1, 0)
"""


def test_denied_syscalls_fail_with_eperm(broker):
    # ctypes is labelled, so a person approves it: kernel-attack surface is
    # denied in the approved profile too.
    r = broker.run_json(SYSCALL_PROBE, approve=True)
    assert r["exit"] == 0, r
    results = {l.split()[0]: l.split()[1:] for l in r["stdout"].splitlines()}
    for name in ("ptrace", "mount", "unshare", "bpf", "keyctl", "io_uring_setup",
                 "userfaultfd", "perf_event_open"):
        assert results[name] == ["-1", "EPERM"], (name, results[name])


def test_only_standard_fds(broker):
    r = broker.run_json("import os, stat\n"
                        "print(sorted(int(f) for f in os.listdir('/proc/self/fd')))\n"
                        "print(stat.S_ISFIFO(os.fstat(4).st_mode), os.get_blocking(4))")
    fds = eval(r["stdout"].splitlines()[0])
    # 0-2, the receipt pipe's write end at 4 (PYTHON_RECEIPT_FD), non-blocking,
    # plus the directory fd listdir itself holds open
    assert fds[:3] == [0, 1, 2] and 4 in fds and len(fds) == 5, fds
    assert r["stdout"].splitlines()[1] == "True False", r["stdout"]


def test_code_not_in_argv(broker):
    r = broker.run_json("MARKER_8f3a = 1\nprint(open('/proc/self/cmdline').read())")
    assert "MARKER_8f3a" not in r["stdout"]
    # exactly the worker's argv (PYTHON_SNIPPET_ARGV in proto/proto.h): the
    # code comes on stdin, never as an argument; the one after -c is the
    # constant that reads it (PYTHON_SNIPPET_MAIN)
    argv = r["stdout"].split("\0")
    assert argv[:5] == ["python3", "-I", "-B", "-u", "-c"], argv
    assert argv[5].startswith("import os, site, sys\n"), argv
    assert argv[5].endswith("globals().pop('r')(globals().pop('c'), globals())\n"), argv
    # then the receipt's fd and program (PYTHON_RECEIPT_FD, beside the worker)
    assert argv[6] == "4" and argv[7].endswith("/kotoba_receipt.py") and argv[8:] == ["\n"], argv


# Each process reports with one write(2), so lines from several processes
# never interleave mid-line.
TREE = r"""
import os, sys, time
say = lambda: os.write(1, b"%d\n" % os.getpid())
say()
if os.fork() == 0:
    # double fork + setsid: the grandchild leaves the snippet's session
    if os.fork() == 0:
        os.setsid()
        say()
        time.sleep(600)
    os._exit(0)
if os.fork() == 0:
    say()
    time.sleep(600)
time.sleep(600)
"""


def test_timeout_kills_whole_tree(broker):
    # The limit leaves a loaded machine time to start all three first.
    r = broker.run_json(TREE, "--timeout", "4")
    assert r["timed_out"] is True and r["_status"] == 124, r
    pids = [int(x) for x in r["stdout"].split()]
    assert len(pids) == 3, r
    for pid in pids:
        wait_for(lambda: not pid_alive(pid), "pid %d, of the snippet's tree, to end" % pid)


def test_background_child_dies_with_snippet(broker):
    r = broker.run_json("import os, time, sys\n"
                        "pid = os.fork()\n"
                        "if pid == 0:\n    os.setsid(); time.sleep(600)\n"
                        "print(pid)\n")
    assert r["exit"] == 0
    pid = int(r["stdout"])
    wait_for(lambda: not pid_alive(pid), "the snippet's background child %d to end" % pid)


def test_output_capped_without_deadlock(broker):
    r = broker.run_json("import sys\nchunk = 'x' * 65536\n"
                        "for _ in range(800): sys.stdout.write(chunk)\n"
                        "print('done', file=sys.stderr)", timeout=120)
    assert r["exit"] == 0, r["stderr"][:200]
    assert r["truncated"] is True and r["output_limit"] == 200000
    assert len(r["stdout"]) == 200000
    assert r["stderr"] == "done\n"


def test_timeout_returns_output_so_far(broker):
    # The limit leaves a loaded machine time to start python3 and print.
    r = broker.run_json("print('before', flush=True)\nimport time; time.sleep(60)", "--timeout", "3")
    assert r["stdout"] == "before\n" and r["timed_out"] and r["_status"] == 124


def test_bad_cwd_is_setup_failure(broker, tmpdir_k):
    c = broker.client()
    c.exec("print(1)", cwd=os.path.join(tmpdir_k, "does-not-exist"))
    end = c.until_end()["end"]
    assert end["type"] == "error" and end["code"] == "bad-cwd", end
    assert end["step"] == "cwd" and end["errno"] == errno.ENOENT
    assert "does-not-exist" in end["message"]


def test_cli_rejects_missing_cwd(broker):
    p = broker.kotoba("run", "-c", "print(1)", "--cwd", "/nonexistent-dir", "--no-channel")
    assert p.returncode == 64 and b"working directory" in p.stderr


def test_missing_interpreter_is_setup_failure(make_broker):
    b = make_broker(config="[python]\npath = /nonexistent/python3\n").start()
    p = b.kotoba("run", "-c", "print(1)", "--no-channel")
    assert p.returncode == 127, p.stderr
    assert b"/nonexistent/python3" in p.stderr and b"exec" in p.stderr


def test_cancel_kills_snippet(broker):
    c = broker.client()
    c.exec("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)")
    pid = None
    while pid is None:
        m = c.recv()
        if m["type"] == "output":
            pid = int(m["data"])
    c.send({"type": "cancel", "id": 1})
    end = c.until_end()["end"]
    assert end["type"] == "error" and end["code"] == "cancelled", end
    wait_for(lambda: not pid_alive(pid), "the cancelled snippet %d to end" % pid)


def test_disconnect_kills_snippet(broker):
    c = broker.client()
    c.exec("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)")
    m = c.recv()
    while m["type"] != "output":
        m = c.recv()
    pid = int(m["data"])
    c.close()
    wait_for(lambda: not pid_alive(pid), "the snippet %d to be gone" % pid)
    assert not pid_alive(pid)
    assert broker.run_json("print(1)")["exit"] == 0


def test_sigterm_leaves_no_snippet(make_broker):
    b = make_broker().start()
    c = b.client()
    c.exec("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)")
    m = c.recv()
    while m["type"] != "output":
        m = c.recv()
    pid = int(m["data"])
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(10) == 0
    wait_for(lambda: not pid_alive(pid), "the snippet %d of a stopped broker to end" % pid)
    if os.geteuid() != 0:
        # a system broker no longer has the right to remove its socket from
        # a directory it does not own; the next start replaces it
        assert not os.path.exists(b.socket)
    b.start()
    assert b.run_json("print(1)")["exit"] == 0


def test_sandbox_none_offers_nothing(make_broker):
    b = make_broker(extra_args=["--sandbox", "none"]).start()
    c = b.client()
    assert c.welcome["tools"] == [] and c.welcome["mode"] == "none"
    c.exec("print(1)")
    end = c.until_end()["end"]
    assert end["code"] == "not-offered"
    p = b.kotoba("run", "-c", "print(1)", "--no-channel")
    assert p.returncode == 126


def test_env_kotoba_sandbox(make_broker):
    b = make_broker(env=dict(os.environ, KOTOBA_SANDBOX="none")).start()
    assert b.client().welcome["mode"] == "none"


def test_broker_unreachable_status(tmpdir_k):
    p = subprocess.run([KOTOBA, "run", "-c", "1", "--socket", os.path.join(tmpdir_k, "nope")],
                       capture_output=True)
    assert p.returncode == 125
    assert b"cannot reach the broker" in p.stderr


def test_usage_status(broker):
    assert broker.kotoba("run").returncode == 64
    assert broker.kotoba("run", "-c", "1", "--timeout", "abc").returncode == 64
    assert subprocess.run([KOTOBA, "frobnicate"], capture_output=True).returncode == 64


def test_worker_killed_mid_run_leaves_nothing(broker):
    c = broker.client()
    c.exec("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
           "    os.write(1, b'grandchild %d\\n' % os.getpid())\n    time.sleep(600)\n"
           "os.write(1, b'child %d\\n' % os.getpid())\ntime.sleep(600)")
    pids, text = {}, b""
    while len(pids) < 2:
        m = c.recv()
        if m["type"] == "output":
            text += m["data"]
            pids = {k: int(p) for k, p in
                    (l.split() for l in text.decode().split("\n")[:-1])}
    worker = int(open("/proc/%d/stat" % pids["child"]).read().split(")")[1].split()[1])
    os.kill(worker, signal.SIGKILL)
    end = c.until_end()["end"]
    assert end["type"] == "error" and end["code"] == "worker-lost", end
    wait_for(lambda: not any(pid_alive(p) for p in pids.values()), "the snippet's processes to be gone")
    for kind, pid in pids.items():
        wait_for(lambda: not pid_alive(pid), "the %s %d of a killed worker to end" % (kind, pid))
    assert broker.run_json("print(1)")["exit"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the broker's service user must "
                    "be one that RLIMIT_NPROC applies to")
def test_process_limit_is_named(make_broker):
    """A run the process limit stops says which limit, with its value: a
    broker allowed one process (its service user already has it) cannot
    fork a worker."""
    b = make_broker()
    b.args = ["prlimit", "--nproc=1", "--"] + b.args
    b.start()
    c = b.client()
    c.exec("print(1)")
    end = c.until_end()["end"]
    assert end["type"] == "error", end
    assert "process limit" in end["message"] and "RLIMIT_NPROC 1" in end["message"], end
    assert b.alive()

