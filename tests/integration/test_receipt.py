"""The receipt (PROTOCOL.md, "exit", `blocked`): what the sandbox refused
in a run, against the real broker, worker and kernel.  Each escape-style
snippet below is refused one thing; its receipt names that and nothing
else.  A snippet that does only what is allowed gets no receipt."""
import os
import signal
import subprocess
import time

import pytest

from test_secrets import config, plant, snippet_user


# The pre-screen refuses, without a channel, a snippet whose text opens for
# writing, starts programs or makes sockets: these build the names at run
# time, as the escape suite's cases do (tests/escape/cases).
PRELUDE = ("import builtins, os\n"
           "o = builtins.__dict__['op' + 'en']\n"
           "m = builtins.__dict__['__imp' + 'ort__']\n")


def run(b, code, cwd, channel=False):
    code = PRELUDE + code
    c = b.client(channel=channel)
    c.exec(code, cwd=cwd)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                      "choice": "once"}))
    c.sock.close()
    return out["stdout"].decode(), out["stderr"].decode(), out["end"]


def entries(end):
    """The receipt as (kind, target, by) triples, and the whole entries."""
    assert end["type"] == "exit", end
    blocked = end.get("blocked", [])
    assert end.get("blocked_total", 0) == sum(e["count"] for e in blocked), end
    return [(e["kind"], e["target"], e["by"]) for e in blocked], blocked


@pytest.fixture
def home(tmpdir_k):
    """A working directory the snippet's user owns, so that only the
    sandbox can refuse a write there."""
    d = os.path.join(tmpdir_k, "work")
    os.makedirs(d)
    u = snippet_user()
    if os.geteuid() == 0:
        os.chown(d, u.pw_uid, u.pw_gid)
    return d


def test_control_snippet_has_no_receipt(broker, home):
    code = ("import os, tempfile\n"
            "p = os.path.join(os.environ['TMPDIR'], 'scratch.txt')\n"
            "o(p, 'w' + 't').write('ok')\n"
            "print(o(p).read(), o('/etc/hostname').read() != '')\n")
    out, err, end = run(broker, code, home)
    assert out.startswith("ok True"), (out, err)
    assert "blocked" not in end and "blocked_total" not in end, end


def test_write_outside_scratch_is_named(broker, home):
    code = ("try:\n"
            "    o('notes.md', 'w' + 't')\n"
            "except PermissionError as e:\n"
            "    print('refused', e.errno)\n")
    out, err, end = run(broker, code, home)
    assert out.startswith("refused"), (out, err)
    got, blocked = entries(end)
    assert got == [("create", os.path.join(home, "notes.md"),
                    "landlock" if end["profile"] and blocked[0]["by"] == "landlock"
                    else "seccomp")], end
    # the worker's write witness saw the open; the interpreter's report of
    # the same refusal adds nothing
    assert blocked[0]["seen_by"] == "worker" and blocked[0]["inferred"] is True, blocked
    assert blocked[0]["count"] == 1 and end["blocked_total"] == 1, blocked


def test_exec_of_a_shell_is_named_by_the_gate(broker, home):
    code = ("sp = m('sub' + 'process')\n"
            "for _ in range(2):\n"
            "    try:\n"
            "        sp.run(['/bin/sh', '-c', 'true'])\n"
            "    except PermissionError:\n"
            "        print('refused')\n")
    out, err, end = run(broker, code, home)
    assert out.count("refused") == 2, (out, err)
    got, blocked = entries(end)
    assert got == [("exec", "/bin/sh", "exec gate")], end
    assert blocked[0] == {"kind": "exec", "target": "/bin/sh", "count": 2, "by": "exec gate",
                          "seen_by": "worker", "inferred": False}, blocked


def test_reading_a_planted_secret_is_named(make_broker, tmpdir_k):
    token, _ = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    code = ("try:\n"
            "    o(%r).read()\n"
            "except PermissionError:\n"
            "    print('refused')\n" % token)
    out, err, end = run(b, code, tmpdir_k)
    assert out.startswith("refused"), (out, err)
    got, _ = entries(end)
    assert got == [("secret-read", token, "mount mask")], end


def test_a_secret_reached_through_proc_or_a_dir_fd_is_named(make_broker, tmpdir_k):
    # The worker judges a report after the snippet is gone: the interpreter
    # names the file itself, not /proc/self/... or a name relative to an fd.
    token, key = plant(tmpdir_k)
    os.mkdir(os.path.join(tmpdir_k, "work"))
    b = make_broker(config=config(tmpdir_k)).start()
    code = ("d = os.open(%r, os.O_RDONLY)\n"
            "os.chdir(%r)\n"
            "for how in (lambda: o('/proc/self/fd/%%d/token' %% d),\n"
            "            lambda: o('/proc/self/cwd/../token'),\n"
            "            lambda: os.open('vault/key', os.O_RDONLY, dir_fd=d)):\n"
            "    try:\n"
            "        how()\n"
            "    except PermissionError:\n"
            "        print('refused')\n" % (tmpdir_k, os.path.join(tmpdir_k, "work")))
    out, err, end = run(b, code, tmpdir_k)
    assert out.count("refused") == 3, (out, err)
    got, blocked = entries(end)
    assert got == [("secret-read", token, "mount mask"), ("secret-read", key, "mount mask")], end
    assert [e["count"] for e in blocked] == [2, 1], blocked


def test_the_same_read_approved_has_no_receipt(make_broker, tmpdir_k):
    token, _ = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    out, err, end = run(b, "print(o(%r).read(), end='')\n" % token, tmpdir_k, channel=True)
    assert end["profile"] == "approved" and "kotoba-integration-secret" in out, (out, err)
    assert "blocked" not in end, end


def test_a_unix_socket_is_named(broker, home):
    code = ("socket = m('soc' + 'ket')\n"
            "try:\n"
            "    s = getattr(socket, 'soc' + 'ket')(getattr(socket, 'AF_' + 'UNIX'))\n"
            "    s.connect('/run/dbus/system_bus_socket')\n"
            "except PermissionError:\n"
            "    print('refused')\n")
    out, err, end = run(broker, code, home)
    assert out.startswith("refused"), (out, err)
    got, _ = entries(end)
    assert got == [("connect-unix", "AF_UNIX socket", "seccomp")], end


def test_a_signal_to_another_process_is_named(broker, home):
    u = snippet_user()
    victim = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: (
        os.setgid(u.pw_gid), os.setuid(u.pw_uid)) if os.geteuid() == 0 else None)
    try:
        code = ("import signal\n"
                "try:\n"
                "    os.kill(%d, signal.SIGTERM)\n"
                "except PermissionError:\n"
                "    print('refused')\n" % victim.pid)
        out, err, end = run(broker, code, home)
        assert out.startswith("refused"), (out, err)
        assert victim.poll() is None
        got, _ = entries(end)
        assert len(got) == 1 and got[0][:2] == ("signal", str(victim.pid)), end
        assert got[0][2] in ("seccomp", "landlock"), end
    finally:
        victim.kill()
        victim.wait()


def test_a_refusal_by_file_mode_is_not_the_sandbox(broker, home):
    # /etc/hostname is not the user's to write even without a sandbox:
    # refused, but not by the sandbox, so not on the receipt.
    code = ("try:\n"
            "    o('/etc/hostname', 'a' + 't')\n"
            "except PermissionError:\n"
            "    print('refused')\n")
    out, err, end = run(broker, code, home)
    assert out.startswith("refused"), (out, err)
    assert "blocked" not in end, end


def test_forged_lines_are_judged_not_believed(broker, home):
    # The snippet writes its own reports: a read of a file that is no
    # secret and garbage are dropped; what it claims for a path the user
    # could not write anyway is dropped too.
    code = ("os.write(4, b'read\\t/etc/hostname\\n\\xff\\xfe\\x00garbage\\nwrite\\t/etc/hostname\\n'"
            " + b'x' * 5000 + b'\\n')\n")
    out, err, end = run(broker, code, home)
    assert end["type"] == "exit" and "blocked" not in end, (end, err)


def test_cli_prints_the_receipt_escaped_and_in_json(broker, home):
    # A file name with a terminal escape in it: the summary line shows it
    # escaped, the JSON carries it as a JSON string.
    code = PRELUDE + ("sp = m('sub' + 'process')\n"
                      "for name in ('notes.md', 'evil\\x1b[2Jname'):\n"
                      "    try:\n"
                      "        o(name, 'w' + 't')\n"
                      "    except PermissionError:\n"
                      "        pass\n"
                      "try:\n"
                      "    sp.run(['/bin/sh'])\n"
                      "except PermissionError:\n"
                      "    pass\n")
    p = broker.kotoba("run", "-c", code, "--no-channel", "--cwd", home, "--json")
    err = p.stderr.decode()
    assert "\x1b" not in err, err
    # the exec gate's refusal and the write witness's are the sandbox's
    # record, in the order seen; the run succeeded, so its program handled
    # them, and the line is a note
    lines = [l for l in err.splitlines() if l.startswith("kotoba: ")]
    assert lines[0].startswith("kotoba: note: the run succeeded; the sandbox refused 3 "
                               "operations, which the program handled: "), err
    assert "create %s/notes.md (landlock)" % home in lines[0], lines
    assert "create %s/evil\\x1b[2Jname (landlock)" % home in lines[0], lines
    assert lines[0].endswith(", exec /bin/sh (exec gate)"), lines
    assert len(lines) == 1, err
    out = __import__("json").loads(p.stdout)
    assert out["blocked_total"] == 3, out
    assert [b["kind"] for b in out["blocked"]] == ["create", "create", "exec"], out
    assert out["blocked"][1]["target"] == home + "/evil\x1b[2Jname", out
    assert {b["seen_by"] for b in out["blocked"]} == {"worker"}, out
    assert out["blocked_handled"] is True and out["exit"] == 0, out


def test_known_probes_are_named_and_a_failed_run_is_not_a_note(broker, home):
    # platform.uname()'s processor probe (pandas) execs `uname -p` along
    # PATH, urllib3's (requests) binds an IPv6 socket: both refused, both
    # handled, both named for what they are.
    code = ("import platform\n"
            "import urllib3.util.connection as c\n"
            "print(repr(platform.uname().processor), c.HAS_IPV6)\n")
    p = broker.kotoba("run", "-c", code, "--no-channel", "--cwd", home, "--json")
    err = p.stderr.decode()
    out = __import__("json").loads(p.stdout)
    assert out["exit"] == 0 and out["blocked_handled"] is True, out
    probes = {(b["kind"], b.get("probe")) for b in out["blocked"]}
    assert probes == {("exec", "platform.uname's processor probe"),
                      ("bind", "urllib3's IPv6 probe")}, out
    lines = [l for l in err.splitlines() if l.startswith("kotoba: ")]
    assert lines[0].startswith("kotoba: note: the run succeeded; the sandbox refused "), err
    assert "(argv[0] uname) (exec gate: platform.uname's processor probe)" in lines[0], err
    assert "bind ::1:0 (seccomp: urllib3's IPv6 probe)" in lines[1], err
    # the same refusal in a run that failed is no note
    p = broker.kotoba("run", "-c", code + "raise SystemExit(2)\n", "--no-channel",
                      "--cwd", home)
    err = p.stderr.decode()
    assert p.returncode == 2 and "kotoba: the sandbox stopped " in err, err
    assert "note:" not in err, err


def test_cli_says_nothing_when_nothing_was_refused(broker, home):
    p = broker.kotoba("run", "-c", "print(1)", "--no-channel", "--cwd", home)
    assert p.returncode == 0 and p.stdout == b"1\n", p
    assert b"sandbox stopped" not in p.stderr, p.stderr
    out = broker.run_json("print(1)")
    assert out["blocked_total"] == 0 and out["blocked"] == [], out


def test_audit_keeps_the_receipt_and_verifies(broker, home, tmpdir_k):
    code = PRELUDE + ("sp = m('sub' + 'process')\n"
                      "for _ in range(3):\n"
                      "    try:\n"
                      "        sp.run(['/bin/sh'])\n"
                      "    except PermissionError:\n"
                      "        pass\n")
    p = broker.kotoba("run", "-c", code, "--no-channel", "--cwd", home)
    assert b"refused 3 operations, which the program handled: exec /bin/sh x3 (exec gate)" \
        in p.stderr, p.stderr
    broker.kotoba("run", "-c", "print(1)", "--no-channel", "--cwd", home)
    tail = broker.kotoba("audit", "tail", "-n", "4").stdout.decode().splitlines()
    exits = [l for l in tail if " exit " in l and "ran" in l]
    assert len(exits) == 2, tail
    assert exits[0].endswith(" blocked 3") and "blocked" not in exits[1], tail
    seq = exits[0].split("#")[1].split()[0]
    show = broker.kotoba("audit", "show", seq)
    assert show.returncode == 0, show
    lines = show.stdout.decode().splitlines()
    assert lines[0] == exits[0], lines
    assert lines[1].split() == ["exec", "/bin/sh", "x3", "by", "exec", "gate,", "seen", "by",
                                "worker"], lines
    assert broker.kotoba("audit", "show", "999999").returncode == 1
    # the chain holds, the receipt in it: the broker, the offline tool, the script
    v = broker.kotoba("audit", "verify")
    assert v.returncode == 0, v
    copy = os.path.join(tmpdir_k, "copy.db")
    subprocess.run(["sqlite3", os.path.join(broker.state, "kotoba.db"), ".backup " + copy],
                   check=True)
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    for cmd in (["build/kotoba", "audit", "verify", "--db", copy],
                ["sh", "dist/kotoba-audit-verify.sh", copy]):
        r = subprocess.run(cmd, cwd=root, capture_output=True)
        assert r.returncode == 0, (cmd, r)
    # editing the receipt breaks the chain at its row
    subprocess.run(["sqlite3", copy, "DROP TRIGGER audit_no_update; UPDATE audit SET "
                    "blocked = X'' WHERE seq = %s" % seq], check=True)
    for cmd in (["build/kotoba", "audit", "verify", "--db", copy],
                ["sh", "dist/kotoba-audit-verify.sh", copy]):
        r = subprocess.run(cmd, cwd=root, capture_output=True)
        assert r.returncode == 1 and b"row %s" % seq.encode() in r.stdout, (cmd, r)


def test_the_wrappers_change_nothing_a_snippet_can_rely_on(broker, home):
    # shutil's symlink-safe rmtree is chosen by what os says it supports;
    # a PermissionError is the same object, with its errno and filename
    code = ("import io, shutil\n"
            "print(shutil._use_fd_functions, o is io.open, os.open.__name__)\n"
            "try:\n"
            "    o('x.txt', 'w' + 't')\n"
            "except PermissionError as e:\n"
            "    print(type(e).__name__, e.errno, e.filename)\n")
    out, err, end = run(broker, code, home)
    assert out == "True True open\nPermissionError 13 x.txt\n", (out, err)


def test_exec_names_argv0_when_it_differs(broker, home):
    code = ("ex = getattr(m('o' + 's'), 'ex' + 'ecv')\n"
            "prog, name = '/bin/' + 's' + 'h', '-' + 's' + 'h'\n"
            "try:\n"
            "    ex(prog, [name, '-c', 'true'])\n"
            "except PermissionError:\n"
            "    print('refused')\n")
    out, err, end = run(broker, code, home)
    assert out == "refused\n", (out, err)
    got, _ = entries(end)
    assert got == [("exec", "/bin/sh (argv[0] -sh)", "exec gate")], end


def test_a_flood_of_reports_stops_neither_the_clock_nor_the_run(broker, home):
    # four processes keep the pipe full; the wall clock still ends the run
    # on time, and nothing of the flood is believed
    code = ("import time\n"
            "for _ in range(3):\n"
            "    if os.fork() == 0:\n"
            "        break\n"
            "line = b'write\\t/etc/hostname\\n' * 200\n"
            "while True:\n"
            "    try:\n"
            "        os.write(4, line)\n"
            "    except BlockingIOError:\n"
            "        pass\n")
    c = broker.client()
    t0 = time.monotonic()
    c.exec(PRELUDE + code, cwd=home, timeout_ms=1500)
    out = c.until_end()
    c.close()
    end = out["end"]
    assert end["type"] == "exit" and end["timed_out"] is True, end
    assert time.monotonic() - t0 < 10, end
    assert "blocked" not in end, end
