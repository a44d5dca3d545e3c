"""libkotoba-client against a real broker, through kc-test (a small C
program over the public header) which prints one JSON object per event."""
import errno
import json
import os
import re
import subprocess
import time

import pytest

from conftest import BUILD, KC_TEST, ROOT

# The library's soname version, as mk/client.mk builds it.
SOVERSION = re.search(r"KOTOBA_CLIENT_SOVERSION := (\d+)",
                      open(os.path.join(ROOT, "mk", "client.mk")).read()).group(1)
LABELLED = "import shutil\nshutil.rmtree('/nonexistent-kotoba-test')\n"


def kc(sock, *args, timeout=60):
    p = subprocess.run([KC_TEST, sock, *args], capture_output=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    # LeakSanitizer and friends report on stderr: the sanitizer build must be silent
    assert b"Sanitizer" not in p.stderr and b"runtime error" not in p.stderr, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def run(b, code, *args, **kw):
    return kc(b.socket, "run", code, "cwd=" + b.dir, *args, **kw)


def last(events, kind):
    return [e for e in events if e["event"] == kind][-1]


def test_welcome(broker_proc):
    w = kc(broker_proc.socket, "welcome")[0]
    assert w["version"] == 1 and w["mode"] == "local" and w["execute_code"]
    assert w["broker"].startswith("kotoba-brokerd/") and w["socket"] == broker_proc.socket
    assert w["max_frame"] > 0 and w["max_snippet"] > 0 and w["max_timeout_ms"] > 0


# Writes a line on one stream, then waits until the broker has read that
# stream's pipe empty: the next line, on the other stream, comes after it.
FORWARDED = """import fcntl, sys, termios, time
def line(text, f):
    print(text, file=f, flush=True)
    while fcntl.ioctl(f.fileno(), termios.FIONREAD, bytes(4)) != bytes(4):
        time.sleep(0.01)
"""


def test_exit_fields_and_output_order(broker_proc):
    ev = run(broker_proc, FORWARDED + "line('a', sys.stdout)\nline('b', sys.stderr)\n"
             "print('c')\nsys.exit(5)")
    out = [(e["stream"], e["data"]) for e in ev if e["event"] == "output"]
    # chunks arrive as written, in order across the two streams
    assert [(s, d.strip()) for s, d in out if d.strip()] == \
        [("stdout", "a"), ("stderr", "b"), ("stdout", "c")], out
    x = ev[-1]
    assert x["event"] == "exit" and x["exited"] and x["exit_code"] == 5
    assert x["timed_out"] is False and x["truncated"] is False and x["limit"] == ""
    assert x["output_limit"] == 0
    assert x["decision"] == "ran" and x["approver"] == "unattended"
    assert x["profile"] == "unattended" and x["labels"] == []
    assert 0 < x["duration_us"] < 30e6 and x["max_rss_kb"] > 0
    # mode local: on the host, so no container name
    assert x["where"] == "host" and x["container"] == ""


def test_cli_json_says_where(broker_proc):
    p = subprocess.run([os.path.join(BUILD, "kotoba"), "run", "-c", "print(6*7)", "--json",
                        "--no-channel", "--socket", broker_proc.socket,
                        "--cwd", broker_proc.dir], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["stdout"] == "42\n" and out["where"] == "host" and "container" not in out


def test_cut_output_says_where_and_the_cli_which_setting(broker_proc):
    x = run(broker_proc, "import sys\nsys.stdout.write('x' * 300000)")[-1]
    assert x["truncated"] is True and x["output_limit"] == 200000, x
    p = subprocess.run([os.path.join(BUILD, "kotoba"), "run", "-c",
                        "import sys\nsys.stdout.write('x' * 300000)", "--no-channel",
                        "--socket", broker_proc.socket, "--cwd", broker_proc.dir],
                       capture_output=True, timeout=60)
    assert len(p.stdout) == 200000, len(p.stdout)
    assert (b"output was cut at 200000 bytes per stream; the broker's [limits] output "
            b"setting raises it") in p.stderr, p.stderr


def test_signal_and_timeout(broker_proc):
    x = run(broker_proc, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")[-1]
    assert x["exited"] is False and x["signal"] == 9
    # The limit leaves a loaded machine time to start python3 and print.
    ev = run(broker_proc, "import time\nprint('before', flush=True)\ntime.sleep(30)",
             "timeout_ms=3000")
    assert ev[-1]["timed_out"] is True and ev[-1]["limit"] == "wall"
    assert "before" in "".join(e["data"] for e in ev if e["event"] == "output")


def test_card_answered_by_callback(broker_proc):
    ev = run(broker_proc, LABELLED, "channel", "answer=once")
    card = ev[0]
    assert card["event"] == "card" and card["snippet"] == LABELLED
    assert card["labels"][0]["label"] == "fs-destroy" and card["labels"][0]["line"] == 2
    assert card["options"] == ["once", "always", "deny"] and card["family"] == "execute_code"
    assert card["button"] == "Always allow her to run Python"
    assert card["detail"].startswith("Any code she writes") and card["expires_ms"] > 0
    x = ev[-1]
    assert x["event"] == "exit" and x["approver"] == "user" and x["profile"] == "approved"
    assert x["labels"] == ["fs-destroy"]


def test_card_deferred_and_answered_from_another_thread(broker_proc):
    ev = run(broker_proc, "print('later')", "channel", "answer=defer")
    assert ev[0]["event"] == "card"
    assert ev[-1]["event"] == "exit" and ev[-1]["approver"] == "user"
    assert not [e for e in ev if e["event"] in ("answer-failed", "notice")]


def test_denied_is_an_error_value(broker_proc):
    e = run(broker_proc, "print(1)", "channel", "answer=deny")[-1]
    assert e["event"] == "error" and e["code"] == "denied" and e["from_broker"]
    assert e["message"]
    # no callback at all: the library answers deny
    assert run(broker_proc, "print(1)", "channel", "answer=none")[-1]["code"] == "denied"


def test_refused_without_channel(broker_proc):
    e = run(broker_proc, LABELLED)[-1]
    assert e["code"] == "refused" and "fs-destroy" in e["message"]


def test_bad_cwd_carries_step_and_errno(broker_proc):
    e = kc(broker_proc.socket, "run", "print(1)", "cwd=" + os.path.join(broker_proc.dir, "gone"))[-1]
    assert e["code"] == "bad-cwd" and e["step"] == "cwd" and e["errno"] == errno.ENOENT


def test_expired_card_then_late_answer(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n")
    ev = run(b, "print(1)", "channel", "answer=late")
    assert ev[0]["event"] == "card"
    end = [e for e in ev if e["event"] == "error"][0]
    assert end["code"] == "expired" and end["from_broker"]
    # the late answer's no-such-card did not confuse the next request
    assert ev[-1] == {"event": "grants", "n": 0}
    rows = [r for r in kc(b.socket, "tail", "10") if r["event"] == "row"]
    assert "expired" in {r["decision"] for r in rows}


def test_cancel_from_another_thread(broker_proc):
    ev = kc(broker_proc.socket, "cancel", "import time\nprint('x', flush=True)\ntime.sleep(60)",
            broker_proc.dir)
    assert ev[0]["event"] == "output"
    end = [e for e in ev if e["event"] == "error"][0]
    assert end["code"] == "cancelled"
    again = last(ev, "cancel-again")
    assert again["code"] == "no-such-run" and again["from_broker"] is False


def test_grants_revoke_audit(broker_proc):
    s = broker_proc.socket
    assert run(broker_proc, "print(1)", "channel", "answer=always")[-1]["event"] == "exit"
    g = kc(s, "grants")
    assert g[0]["family"] == "execute_code" and g[0]["saved_at_ms"] > 0 and g[-1]["n"] == 1
    x = run(broker_proc, "print(2)", "channel", "answer=deny")[-1]
    assert x["event"] == "exit" and x["approver"] == "grant"
    assert kc(s, "revoke", "execute_code")[0]["message"] == "revoked execute_code"
    assert "no execute_code grant" in kc(s, "revoke", "execute_code")[0]["message"]
    assert kc(s, "grants")[-1]["n"] == 0
    rows = [r for r in kc(s, "tail", "50") if r["event"] == "row"]
    assert rows and all(len(r["sha256"]) == 64 for r in rows)
    assert {"card", "ran"} <= {r["decision"] for r in rows}
    assert [r for r in rows if r["has_exit"]]
    assert "intact" in kc(s, "verify")[0]["message"]


def test_answer_always_with_terms(make_broker):
    """kotoba_answer_always from the callback: the grant's life, cut to the
    broker's grant_ttl, and its scope; kotoba_grants reads them back."""
    b = make_broker(config="[gate]\ngrant_ttl = 1h\n")
    s = b.socket
    ev = run(b, "print(1)", "channel", "answer=always", "for_ms=86400000",
             "scope=" + b.dir)
    card = [e for e in ev if e["event"] == "card"][0]
    assert card["grant_ttl_ms"] == 3600000
    assert card["detail"] == ("Any code she writes then runs on this computer without "
                              "asking, for 1h at most, or until you revoke it in Settings.")
    assert ev[-1]["event"] == "exit"
    g = kc(s, "grants")[0]
    assert g["scope"] == os.path.realpath(b.dir) and g["expired"] is False
    assert abs(g["expires_ms"] - g["saved_at_ms"] - 3600000) < 2000
    # Outside the scope the card comes back.
    ev = run(b, "print(2)", "channel", "answer=deny", "cwd=/")
    assert [e for e in ev if e["event"] == "card"] and ev[-1]["code"] == "denied"
    # A relative scope never leaves the library.
    ev = run(b, "print(3)", "channel", "answer=always", "scope=relative", "cwd=/")
    assert [e for e in ev if e["event"] == "answer-failed"][0]["code"] == "invalid"


def test_misuse_is_reported_not_fatal(broker_proc):
    ev = {e["event"]: e for e in kc(broker_proc.socket, "misuse")}
    for name in ("exec-before-hello", "grants-before-hello", "hello-twice", "answer-defer",
                 "tail-zero", "exec-null", "exec-bad-env", "exec-unsized", "exec-short-result",
                 "grants-short-row", "process-idle"):
        assert ev[name]["code"] == "invalid" and ev[name]["message"], name
    assert ev["cancel-idle"]["code"] == "no-such-run"
    # a newer caller's options: refused only when a field this library
    # does not know is set
    assert ev["exec-unknown-field"]["code"] == "invalid"
    assert ev["exec-unknown-field"]["errno"] == errno.E2BIG
    unset = ev["exec-unknown-field-unset"]
    assert unset["rc"] == 0, unset
    # the connection still works after every refusal; without a cwd the
    # snippet runs where its user may enter (for root's, as nobody: /)
    assert ev["exec-after"]["code"] == "ok" and ev["exec-after"]["rc"] == 0


def test_unreachable(workdir):
    e = kc(os.path.join(workdir, "nope.sock"), "welcome")[0]
    assert e["event"] == "open" and e["code"] == "unreachable"
    assert e["errno"] == errno.ENOENT and "nope.sock" in e["message"]
    e = kc("/" + "x" * 200, "welcome")[0]
    assert e["code"] == "invalid" and "too long" in e["message"]


def test_shared_library_exports_only_the_api():
    so = os.path.join(BUILD, "libkotoba-client.so." + SOVERSION)
    p = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("nm unavailable: %s" % p.stderr)
    names = {l.split()[-1].split("@")[0] for l in p.stdout.splitlines() if l.strip()}
    names.discard("KOTOBA_CLIENT_0")
    assert names and all(n.startswith("kotoba_") for n in names), names
    assert {"kotoba_open", "kotoba_exec", "kotoba_answer", "kotoba_cancel", "kotoba_grants",
            "kotoba_revoke", "kotoba_audit_tail", "kotoba_audit_verify", "kotoba_close"} <= names


def test_pkg_config_file_builds_a_program(workdir):
    pc = os.path.join(BUILD, "kotoba-client.pc")
    text = open(pc).read()
    assert "-lkotoba-client" in text and "Requires.private: msgpack" in text
    # compile against the header and link the shared library, as an installed user would
    src = os.path.join(workdir, "hello.c")
    with open(src, "w") as f:
        f.write('#include <kotoba-client.h>\n#include <stdio.h>\n'
                'int main(void) { struct kotoba_error e = KOTOBA_ERROR_INIT; struct kotoba_client *c;\n'
                '  int rc = kotoba_open(&c, "/nonexistent/sock", false, &e);\n'
                '  printf("%s %s\\n", kotoba_code_name(rc), e.name); return 0; }\n')
    exe = os.path.join(workdir, "hello")
    cc = subprocess.run(["cc", "-o", exe, src, "-I" + os.path.join(ROOT, "client"),
                         "-L" + BUILD, "-lkotoba-client", "-Wl,-rpath," + BUILD,
                         *os.environ.get("KC_TEST_LDFLAGS", "").split()],
                        capture_output=True, text=True)
    if "asan" in BUILD:
        pytest.skip("the sanitizer build's shared library needs the sanitizer runtime")
    assert cc.returncode == 0, cc.stderr
    out = subprocess.run([exe], capture_output=True, text=True)
    assert out.stdout == "unreachable unreachable\n", out


def test_version_is_the_headers():
    v = kc("/nonexistent", "version")[0]
    assert v["library"] == v["header"] and re.fullmatch(r"\d+\.\d+\.\d+", v["library"])
    pc = open(os.path.join(BUILD, "kotoba-client.pc")).read()
    assert "Version: %s\n" % v["library"] in pc


def test_event_loop_runs_a_snippet_without_blocking(broker_proc):
    # the snippet sleeps between its lines: a loop that blocked in the
    # library would see no timer ticks meanwhile
    ev = kc(broker_proc.socket, "poll",
            "import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')\n",
            broker_proc.dir)
    out = "".join(e["data"] for e in ev if e["event"] == "output")
    assert out == "a\nb\n", ev
    # a request would read the run's frames: refused while it runs
    for name in ("grants-while-running", "exec-while-running"):
        assert last(ev, name)["code"] == "invalid" and last(ev, name)["errno"] == errno.EBUSY
    loop = last(ev, "loop")
    assert loop["ticks"] >= 5 and loop["steps"] >= 2, loop
    x = ev[-1]
    assert x["event"] == "exit" and x["exited"] and x["exit_code"] == 0


def test_event_loop_reports_the_brokers_refusal(broker_proc):
    ev = kc(broker_proc.socket, "poll", "print(1)", "/nonexistent-kotoba-dir")
    assert ev[-1]["event"] == "error" and ev[-1]["code"] == "bad-cwd", ev


def defined_globals(args):
    p = subprocess.run(["nm", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = [l.split() for l in p.stdout.splitlines()]
    return {r[-1].split("@")[0] for r in rows if len(r) == 3}


# A program's own names that the library's internals also use: linked
# beside the archive they must not collide with it.
COLLIDING = "int write_all(void); int write_all(void) { return 0; }\nint proto_decode;\n"


@pytest.fixture
def stage():
    d = os.environ.get("KOTOBA_CLIENT_STAGE")
    if not d:
        pytest.skip("KOTOBA_CLIENT_STAGE unset: `make check-client-c` stages an install")
    if "asan" in BUILD:
        pytest.skip("the sanitizer build's libraries need the sanitizer runtime")
    return os.path.join(d, "usr")


def test_installed_libraries_define_only_the_api(stage):
    lib = os.path.join(stage, "lib")
    a = defined_globals(["-g", "--defined-only", os.path.join(lib, "libkotoba-client.a")])
    so = defined_globals(["-D", "--defined-only", os.path.join(lib, "libkotoba-client.so")])
    so.discard("KOTOBA_CLIENT_0")
    for names in (a, so):
        assert "kotoba_exec" in names and "kotoba_conn_process" in names, names
        assert all(n.startswith("kotoba_") for n in names), sorted(names)
    assert a == so


@pytest.mark.parametrize("link", ["static", "shared"])
def test_program_built_on_the_installed_library_runs(stage, link, broker_proc, workdir):
    inc, lib = os.path.join(stage, "include"), os.path.join(stage, "lib")
    other = os.path.join(workdir, "other.c")
    with open(other, "w") as f:
        f.write(COLLIDING)
    exe = os.path.join(workdir, "kc-" + link)
    libs = ([os.path.join(lib, "libkotoba-client.a"), "-lmsgpackc", "-lpthread"]
            if link == "static" else ["-L" + lib, "-lkotoba-client", "-Wl,-rpath," + lib])
    cc = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-I" + inc, "-o", exe,
                         os.path.join(ROOT, "client", "tests", "kc-test.c"), other, *libs],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    if link == "shared":
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
        assert os.path.join(lib, "libkotoba-client.so.") in ldd, ldd
    p = subprocess.run([exe, broker_proc.socket, "poll", "print(6*7)", broker_proc.dir],
                       capture_output=True, text=True, timeout=60)
    ev = [json.loads(l) for l in p.stdout.splitlines()]
    assert "".join(e["data"] for e in ev if e["event"] == "output") == "42\n", ev
    assert ev[-1]["event"] == "exit" and ev[-1]["exit_code"] == 0, ev


# ---- the escalation card -------------------------------------------------------

# Unlabelled (a grant covers it); the exec gate stops /bin/sh under the
# grant's unattended profile, the approved one lets it run.
STOPPED = ("import builtins, sys\n"
           "sp = builtins.__dict__['__imp' + 'ort__']('sub' + 'process')\n"
           "try:\n"
           "    sp.run(['/bin/sh', '-c', 'exit 0'], check=True)\n"
           "except PermissionError:\n"
           "    sys.exit(3)\n")
ESC_NONE, ESC_RERUN, ESC_LEFT, ESC_EXPIRED, ESC_CANCELLED = range(5)


def escalate(b, mode):
    ev = kc(b.socket, "escalate", STOPPED, b.dir, mode)
    cards = [e for e in ev if e["event"] == "card"]
    return ev, cards, last(ev, "escalation")


@pytest.mark.parametrize("mode", ["rerun", "defer", "poll"])
def test_escalation_rerun(broker_proc, mode):
    ev, (card,), esc = escalate(broker_proc, mode)
    assert card["escalate"] and card["options"] == ["rerun", "leave"] and card["family"] is None
    assert card["after_seq"] > 0 and card["blocked_total"] >= 1
    assert any(b["kind"] == "exec" and b["target"].startswith("/bin/sh")
               for b in card["blocked"]), card
    # during the card, the first run's result is there already
    assert card["during"] == {"rc": 0, "outcome": ESC_RERUN, "after_seq": card["after_seq"],
                              "first_exit_code": 3}
    assert "== The sandbox stopped this snippet: run it again? ==" in card["text"]
    assert "[r] Run it again with your permissions" in card["text"]
    x = last(ev, "exit")
    assert x["exit_code"] == 0 and x["approver"] == "user" and x["profile"] == "approved"
    assert esc["outcome"] == ESC_RERUN and esc["after_seq"] == card["after_seq"]
    assert esc["first"] == {"exit_code": 3, "approver": "grant", "profile": "unattended",
                            "blocked_total": card["blocked_total"]}
    rows = [e for e in ev if e["event"] == "row"]
    assert any(r["after"] == card["after_seq"] and r["kind"] == "exit" for r in rows), rows


@pytest.mark.parametrize("mode", ["leave", "once", "none"])
def test_escalation_left(broker_proc, mode):
    """leave, an answer of the other kind (taken as leave) and no on_card:
    nothing runs again, the result is the first run's."""
    ev, cards, esc = escalate(broker_proc, mode)
    assert len(cards) == (0 if mode == "none" else 1) and esc["cards"] == len(cards)
    x = last(ev, "exit")
    assert x["exit_code"] == 3 and x["approver"] == "grant" and x["profile"] == "unattended"
    assert esc["outcome"] == ESC_LEFT and esc["first"]["exit_code"] == 3
    assert not [e for e in ev if e["event"] == "error"], ev


def test_no_escalation_card_without_the_flag(broker_proc):
    """kotoba_hello() (no KOTOBA_HELLO_ESCALATE): the grant's run just ends."""
    run(broker_proc, "print(1)", "channel", "answer=always")
    ev = run(broker_proc, STOPPED, "channel", "answer=deny")
    assert not [e for e in ev if e["event"] == "card"], ev
    assert last(ev, "exit")["exit_code"] == 3


def test_escalation_expired_and_cancelled(make_broker):
    """Nobody answers, or the program withdraws the card: KOTOBA_OK with the
    first run's result, and kotoba_escalation() says which."""
    b = make_broker(config="[gate]\ncard_timeout = 1\n")
    for mode, outcome in (("wait", ESC_EXPIRED), ("cancel", ESC_CANCELLED)):
        ev, (card,), esc = escalate(b, mode)
        assert last(ev, "exit")["exit_code"] == 3, ev
        assert esc["outcome"] == outcome and esc["first"]["exit_code"] == 3, ev
        assert not [e for e in ev if e["event"] in ("error", "cancel-failed")], ev
