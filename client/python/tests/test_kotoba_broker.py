"""kotoba_broker against a real broker: blocking and asyncio APIs."""
import asyncio
import errno
import os
import signal
import threading
import time

import pytest

import kotoba_broker as kb
from kotoba_broker import AsyncBroker, Broker
from conftest import wait_for

LABELLED = "import shutil\nshutil.rmtree('/nonexistent-kotoba-test')\n"
# the pid in one write(2), so it arrives in one output frame
SLEEPER = "import os, time\nos.write(1, b'%d\\n' % os.getpid())\ntime.sleep(600)"


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: gone while being read
        return False


def assert_dies(pid, seconds=120):
    """Fails, saying what the process is, when it is still alive after
    `seconds`: its status and command line, to tell a live snippet from a
    reused pid."""
    deadline = time.monotonic() + seconds
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not pid_alive(pid):
        return
    try:
        with open("/proc/%d/status" % pid) as f:
            status = f.read()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read().split(b"\0")
    except OSError:
        return  # gone just now
    raise AssertionError("pid %d still alive after %s s: %r\n%s" % (pid, seconds, cmdline, status))


def connect(b, channel=True):
    return Broker(socket_path=b.socket, channel=channel)


def test_welcome(broker_proc):
    with connect(broker_proc) as c:
        w = c.welcome
        assert w.version == 1 and w.mode == "local" and w.offers_execute_code
        assert w.broker.startswith("kotoba-brokerd/") and w.max_timeout > 0


# ---- every field of Result ----------------------------------------------------

def test_result_fields(broker_proc):
    with connect(broker_proc, channel=False) as c:
        r = c.run("import sys\nprint('o')\nprint('e', file=sys.stderr)\nsys.exit(5)",
                  cwd=broker_proc.dir)
    assert r.stdout == "o\n" and r.stderr == "e\n"
    assert r.stdout_bytes == b"o\n" and r.stderr_bytes == b"e\n"
    assert r.exit_code == 5 and r.signal is None and not r.ok
    assert r.timed_out is False and r.truncated is False and r.limit == ""
    assert r.output_limit == 0
    assert r.decision == "ran" and r.approver == "unattended" and r.profile == "unattended"
    assert r.labels == ()
    assert isinstance(r.duration, float) and 0 < r.duration < 30  # seconds
    assert r.cpu_time >= 0 and r.max_rss_kb > 0
    assert r.where == "host" and r.container is None


def test_result_where_from_frames():
    """No broker needed: how `where` and `container` reach a Result."""
    end = {"type": "exit", "id": 1, "status": "exited", "code": 137, "limit": "memory",
           "where": "container", "container": "kotoba-7"}
    r = kb.Result.from_frames(end, b"", b"")
    assert r.where == "container" and r.container == "kotoba-7" and r.limit == "memory"
    # a broker from before `where` ran everything on the host
    del end["where"], end["container"]
    r = kb.Result.from_frames(end, b"", b"")
    assert r.where == "host" and r.container is None


def test_result_signal_timeout_truncated(broker_proc):
    with connect(broker_proc, channel=False) as c:
        r = c.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", cwd=broker_proc.dir)
        assert r.exit_code is None and r.signal == signal.SIGKILL
        # The limit leaves a loaded machine time to start python3 and print.
        r = c.run("import time\nprint('before', flush=True)\ntime.sleep(60)",
                  cwd=broker_proc.dir, timeout=3)
        assert r.timed_out and r.limit == "wall" and r.stdout == "before\n"
        assert r.duration > 0.7
        r = c.run("import sys\nsys.stdout.write('x' * 300000)", cwd=broker_proc.dir)
        assert r.truncated and len(r.stdout) == 200000 and r.exit_code == 0
        assert r.output_limit == 200000


def test_labels_and_approver_in_result(broker_proc):
    with connect(broker_proc) as c:
        r = c.run(LABELLED.replace("/nonexistent", "/tmp/none"), cwd=broker_proc.dir,
                  on_card=lambda card: kb.ONCE)
    assert r.labels == ("fs-destroy",) and r.approver == "user" and r.profile == "approved"
    assert r.decision == "ran"


def test_non_utf8_output_is_replaced_not_fatal(broker_proc):
    with connect(broker_proc, channel=False) as c:
        r = c.run("import sys\nsys.stdout.buffer.write(b'ok\\xff\\n')", cwd=broker_proc.dir)
    assert r.stdout == "ok\ufffd\n" and r.stdout_bytes == b"ok\xff\n"


# ---- cards --------------------------------------------------------------------

def test_card_answered_by_callback(broker_proc):
    seen = []

    def on_card(card):
        seen.append(card)
        return "once"

    with connect(broker_proc) as c:
        r = c.run(LABELLED, cwd=broker_proc.dir, on_card=on_card)
    card = seen[0]
    assert isinstance(card, kb.Card) and card.snippet == LABELLED
    assert card.labels[0].label == "fs-destroy" and card.labels[0].line == 2
    assert card.labels[0].start < card.labels[0].end
    assert card.options == ("once", "always", "deny") and card.family == "execute_code"
    assert card.button == "Always allow her to run Python"
    assert card.detail == ("Any code she writes then runs on this computer without asking, "
                           "until you revoke it in Settings.")
    assert card.expires == 300 and card.reason and card.id
    assert card.annotated_lines()[1] == (2, "shutil.rmtree('/nonexistent-kotoba-test')",
                                         ["fs-destroy"])
    assert r.approver == "user" and r.exit_code == 1  # the directory does not exist


def test_card_denied_raises(broker_proc):
    with connect(broker_proc) as c:
        with pytest.raises(kb.Denied) as e:
            c.run("print(1)", cwd=broker_proc.dir, on_card=lambda card: "deny")
        assert e.value.code == "denied" and e.value.message and isinstance(e.value, kb.DidNotRun)
        # no callback: the card is denied, and the exception says why
        with pytest.raises(kb.Denied) as e:
            c.run("print(1)", cwd=broker_proc.dir)
        assert "no on_card" in e.value.message

    async def main():
        async with AsyncBroker(socket_path=broker_proc.socket) as c:
            with pytest.raises(kb.Denied) as e:
                await c.run("print(1)", cwd=broker_proc.dir)
            assert "no on_card" in e.value.message

    asyncio.run(main())


def test_card_deferred_and_answered_from_another_thread(broker_proc):
    with connect(broker_proc) as c:
        def on_card(card):
            threading.Timer(0.2, c.answer, (card.id, "once")).start()
            return kb.DEFER
        r = c.run("print('later')", cwd=broker_proc.dir, on_card=on_card)
    assert r.stdout == "later\n" and r.approver == "user"


def test_bad_answer_cancels_and_raises(broker_proc):
    with connect(broker_proc) as c:
        with pytest.raises(ValueError):
            c.run("print(1)", cwd=broker_proc.dir, on_card=lambda card: None)
        # the connection is still in step
        assert c.run("print(2)", cwd=broker_proc.dir, on_card=lambda card: "once").stdout == "2\n"


def test_callback_exception_cancels_run(broker_proc):
    def boom(card):
        raise RuntimeError("the UI crashed")

    with connect(broker_proc) as c:
        with pytest.raises(RuntimeError):
            c.run("print(1)", cwd=broker_proc.dir, on_card=boom)
        rows = c.audit_tail(5)
        assert rows[-1].decision == "cancelled"


def test_card_expired(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n")
    with connect(b) as c:
        def slow(card):
            # answers only once the broker has recorded the card expired
            assert card.expires == 1
            with connect(b, channel=False) as other:
                wait_for(lambda: "expired" in [r.decision for r in other.audit_tail(5)],
                           "the card's expired row")
            return "once"
        with pytest.raises(kb.Expired) as e:
            c.run("print(1)", cwd=b.dir, on_card=slow)
        assert e.value.code == "expired"
        # the broker's answer to the late "once" (no-such-card) does not
        # disturb the next request; it is kept as a notice
        rows = c.audit_tail(5)
        assert "expired" in [r.decision for r in rows] and "denied" not in [r.decision for r in rows]
        assert c.run("print(3)", cwd=b.dir, on_card=lambda card: "once").stdout == "3\n"
        assert [n.code for n in c.notices] == ["no-such-card"]


def test_card_expired_async(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n")
    cancelled = []

    async def never(card):
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            cancelled.append(card.id)
            raise

    async def main():
        async with AsyncBroker(socket_path=b.socket) as c:
            with pytest.raises(kb.Expired):
                await c.run("print(1)", cwd=b.dir, on_card=never)
        assert cancelled

    asyncio.run(main())


# ---- grants -----------------------------------------------------------------------

def test_grant_saved_and_revoked(broker_proc):
    def must_not_ask(card):
        raise AssertionError("asked with a grant saved")

    with connect(broker_proc) as c:
        assert c.grants() == []
        c.run("print(1)", cwd=broker_proc.dir, on_card=lambda card: kb.ALWAYS)
        (g,) = c.grants()
        assert g.family == "execute_code" and g.card and g.saved_at is not None
        r = c.run("print('granted')", cwd=broker_proc.dir, on_card=must_not_ask)
        assert r.approver == "grant" and r.profile == "unattended"
        assert c.grants()[0].use_count >= 1 and c.grants()[0].last_used is not None
        assert c.revoke() == "revoked execute_code"
        assert c.grants() == []
        with pytest.raises(kb.Denied):
            c.run("print('asks again')", cwd=broker_proc.dir, on_card=lambda card: "deny")
        assert "no execute_code grant" in c.revoke("execute_code")


def test_grant_with_terms(make_broker):
    """answer(..., for_=, scope=) from inside on_card: the grant lasts at
    most [gate] grant_ttl, covers only its tree, and expires."""
    # 3 s: the grant must still hold for the next two runs on a loaded machine.
    b = make_broker(config="[gate]\ngrant_ttl = 3s\n")
    inside = os.path.join(b.dir, "proj")
    os.mkdir(inside)
    os.chmod(inside, 0o755)
    seen = []

    with connect(b) as c:
        def always_here(card):
            seen.append(card)
            c.answer(card.id, kb.ALWAYS, for_=3600, scope=inside)
            return kb.DEFER

        c.run("print(1)", cwd=inside, on_card=always_here)
        assert seen[0].grant_ttl_ms == 3000 and "for 3s at most" in seen[0].detail
        (g,) = c.grants()
        assert g.scope == os.path.realpath(inside) and not g.expired
        assert g.expires is not None and 0 < g.expires_ms - g.saved_at_ms <= 3000
        assert c.run("print(2)", cwd=inside, on_card=None).approver == "grant"
        with pytest.raises(kb.Denied):
            c.run("print(3)", cwd=b.dir, on_card=lambda card: kb.DENY)
        wait_for(lambda: time.time() * 1000 >= g.expires_ms + 1,
                   "the wall clock to pass the grant's expiry")
        with pytest.raises(kb.Denied):
            c.run("print(4)", cwd=inside, on_card=lambda card: kb.DENY)
        assert c.grants()[0].expired


def test_answer_terms_are_checked_before_sending():
    from kotoba_broker import wire
    with pytest.raises(ValueError):
        wire.answer_frame("c-1", "once", for_=60)
    with pytest.raises(ValueError):
        wire.answer_frame("c-1", "always", scope="relative")
    with pytest.raises(ValueError):
        wire.answer_frame("c-1", "always", for_=0)
    assert b"for_ms" in wire.answer_frame("c-1", "always", for_=0.5)


# ---- audit ----------------------------------------------------------------------------

def test_audit_tail_and_verify(broker_proc):
    with connect(broker_proc, channel=False) as c:
        c.run("print(1)", cwd=broker_proc.dir)
        rows = c.audit_tail()
        assert rows and all(len(r.sha256) == 64 for r in rows)
        exits = [r for r in rows if r.event == "exit"]
        assert exits[-1].exit_code == 0 and exits[-1].duration_ms is not None
        assert rows[0].exit_code is None and rows[0].time is not None
        assert "intact" in c.audit_verify()


def test_audit_broken_raises(make_broker):
    import sqlite3
    b = make_broker()
    with connect(b, channel=False) as c:
        c.run("print(1)", cwd=b.dir)
    b.stop()
    db = sqlite3.connect(os.path.join(b.state, "kotoba.db"))
    for (name,) in db.execute("select name from sqlite_master where type='trigger'").fetchall():
        db.execute('drop trigger "%s"' % name)
    db.execute("update audit set decision='denied' where decision='ran'")
    db.commit()
    db.close()
    b.start()
    with connect(b) as c:
        with pytest.raises(kb.AuditBroken) as e:
            c.audit_verify()
        assert e.value.code == "audit-broken" and "row" in e.value.message


# ---- refusals and setup errors ---------------------------------------------------------

def test_refused_without_channel(broker_proc):
    with connect(broker_proc, channel=False) as c:
        with pytest.raises(kb.Refused) as e:
            c.run(LABELLED, cwd=broker_proc.dir)
    assert "fs-destroy" in e.value.message


def test_bad_cwd(broker_proc):
    with connect(broker_proc, channel=False) as c:
        with pytest.raises(kb.SetupFailed) as e:
            c.run("print(1)", cwd=os.path.join(broker_proc.dir, "gone"))
    assert isinstance(e.value, kb.BadCwd) and e.value.step == "cwd"
    assert e.value.errno == errno.ENOENT


def test_not_offered(make_broker):
    b = make_broker(extra_args=["--sandbox", "none"])
    with connect(b) as c:
        assert not c.welcome.offers_execute_code
        with pytest.raises(kb.NotOffered):
            c.run("print(1)", cwd=b.dir)


def test_timeout_over_broker_limit_is_bad_request(broker_proc):
    with connect(broker_proc, channel=False) as c:
        with pytest.raises(kb.BadRequest) as e:
            c.run("print(1)", cwd=broker_proc.dir, timeout=c.welcome.max_timeout + 60)
        assert e.value.code == "bad-field"
        with pytest.raises(ValueError):
            c.run("print(1)", timeout=0)


# ---- streaming and cancellation --------------------------------------------------------------

def test_output_streams_in_order_while_running(broker_proc):
    # Each line waits until the client has it (a file the callback makes in
    # the working directory): streamed, not buffered to the end, and in order
    # across the two streams whatever the machine's speed.
    chunks = []
    code = ("import os, sys, time\n"
            "def line(text, f):\n"
            "    print(text, file=f, flush=True)\n"
            "    while not os.path.exists('seen-' + text):\n"
            "        time.sleep(0.01)\n"
            "line('one', sys.stdout)\nline('two', sys.stderr)\nline('three', sys.stdout)\n")

    def seen(s, d):
        chunks.append((s, d))
        for text in d.split():
            open(os.path.join(broker_proc.dir, "seen-" + text.decode()), "w").close()
    with connect(broker_proc, channel=False) as c:
        r = c.run(code, cwd=broker_proc.dir, on_output=seen)
    text = [(s, d.strip()) for s, d in chunks if d.strip()]
    assert text == [("stdout", b"one"), ("stderr", b"two"), ("stdout", b"three")]
    assert all(isinstance(d, bytes) for _, d in chunks)
    assert r.stdout == "one\nthree\n" and r.stderr == "two\n"


def test_cancel_from_another_thread(broker_proc):
    pids = []

    with connect(broker_proc, channel=False) as c:
        def on_output(stream, data):
            pids.append(int(data))
            threading.Thread(target=c.cancel).start()
        with pytest.raises(kb.Cancelled):
            c.run(SLEEPER, cwd=broker_proc.dir, on_output=on_output)
        assert_dies(pids[0])
        with pytest.raises(kb.NoSuchRun):
            c.cancel()


def test_cancel_from_asyncio(broker_proc):
    async def main():
        async with AsyncBroker(socket_path=broker_proc.socket, channel=False) as c:
            started = asyncio.Event()
            pids = []

            def on_output(stream, data):
                pids.append(int(data))
                started.set()

            task = asyncio.create_task(c.run(SLEEPER, cwd=broker_proc.dir, on_output=on_output))
            await asyncio.wait_for(started.wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the broker confirmed before CancelledError reached us
            assert_dies(pids[0])
            rows = await c.audit_tail(5)
            assert "cancelled" in [r.decision for r in rows]
            # the connection goes on
            r = await c.run("print('after')", cwd=broker_proc.dir)
            assert r.stdout == "after\n"

    asyncio.run(main())


def test_async_concurrent_runs_and_requests(broker_proc):
    async def main():
        async with AsyncBroker(socket_path=broker_proc.socket, channel=True) as c:
            async def approve(card):
                await asyncio.sleep(0.05)
                return "once"

            code = "import time\nfor i in range(3):\n    print(%r, i, flush=True)\n    time.sleep(0.1)"
            a, b, grants = await asyncio.gather(
                c.run(code % "a", cwd=broker_proc.dir, on_card=approve),
                c.run(code % "b", cwd=broker_proc.dir, on_card=approve),
                c.grants())
            assert a.stdout == "a 0\na 1\na 2\n" and b.stdout == "b 0\nb 1\nb 2\n"
            assert grants == [] and "intact" in await c.audit_verify()

    asyncio.run(main())


# ---- the broker is not there ----------------------------------------------------------------

def test_broker_not_running(workdir):
    path = os.path.join(workdir, "nope.sock")
    with pytest.raises(kb.BrokerUnavailable) as e:
        Broker(socket_path=path)
    assert e.value.code == "unreachable" and path in e.value.message
    assert "kotoba-brokerd running" in e.value.message and e.value.errno == errno.ENOENT

    async def main():
        with pytest.raises(kb.BrokerUnavailable):
            await AsyncBroker(socket_path=path).open()

    asyncio.run(main())


def test_default_socket_path(monkeypatch, broker_proc):
    monkeypatch.setenv("KOTOBA_SOCKET", broker_proc.socket)
    assert kb.default_socket_path() == broker_proc.socket
    with Broker() as c:
        assert c.socket_path == broker_proc.socket


def test_broker_dies_mid_run(make_broker):
    b = make_broker()
    with connect(b, channel=False) as c:
        def on_output(stream, data):
            b.proc.send_signal(signal.SIGTERM)
        with pytest.raises(kb.ConnectionLost) as e:
            c.run(SLEEPER, cwd=b.dir, on_output=on_output)
        assert isinstance(e.value, kb.BrokerUnavailable)
        with pytest.raises(kb.ConnectionLost):
            c.grants()


def test_peer_not_allowed_gets_the_brokers_reason(make_broker):
    b = make_broker(config="[broker]\nallow_users = nobody\n")
    for _ in range(3):  # the refusal may come before or after hello is written
        with pytest.raises(kb.Refused) as e:
            Broker(socket_path=b.socket)
        assert "allow_users" in e.value.message

    async def main():
        with pytest.raises(kb.Refused):
            await AsyncBroker(socket_path=b.socket).open()

    asyncio.run(main())


# ---- the receipt --------------------------------------------------------------

def test_receipt_from_frames_and_its_line():
    """No broker needed: `blocked` to a Result, and the line shown for it."""
    end = {"type": "exit", "id": 1, "status": "exited", "code": 1,
           "blocked_total": 4, "blocked": [
               {"kind": "exec", "target": "/bin/sh", "count": 2, "by": "exec gate",
                "seen_by": "worker", "inferred": False},
               {"kind": "secret-read", "target": "/h/.ssh/id\x1b[2J", "count": 1,
                "by": "mount mask", "seen_by": "python", "inferred": True}]}
    r = kb.Result.from_frames(end, b"", b"")
    assert r.blocked_total == 4 and len(r.blocked) == 2
    assert r.blocked[0] == kb.Blocked("exec", "/bin/sh", 2, "exec gate", "worker", False)
    text = kb.receipt_text(r)
    assert "\x1b" not in text
    # what only the snippet's interpreter reported is its claim, apart
    assert text.split("\n") == [
        "kotoba: the sandbox stopped 2 operations: exec /bin/sh x2 (exec gate)",
        "kotoba: the snippet itself claims 1 operation was refused (its own report, which no "
        "witness outside it saw): read /h/.ssh/id\\x1b[2J (secret)",
        "kotoba: and 1 more refusal, past what a receipt lists"], text
    assert kb.receipt_text(kb.Result.from_frames({"status": "exited", "code": 0}, b"", b"")) == ""
    # a run that exited 0 handled what was refused: the line is a note
    end["code"] = 0
    assert kb.receipt_text(kb.Result.from_frames(end, b"", b"")).split("\n")[0] == (
        "kotoba: note: the run succeeded; the sandbox refused 2 operations, which the "
        "program handled: exec /bin/sh x2 (exec gate)")


def test_a_request_the_egress_proxy_refused_reads_as_its_sentence():
    """Kind `request`: the target is the proxy's sentence, shown without a
    kind word; by `egress proxy`, seen by `proxy` (a witness outside the
    snippet, not its claim)."""
    sentence = "POST https://api.example.org/up\x1b[2Jload refused: a grant covers plain GET requests"
    end = {"type": "exit", "id": 1, "status": "exited", "code": 4, "blocked_total": 3,
           "blocked": [{"kind": "request", "target": sentence, "count": 2,
                        "by": "egress proxy", "seen_by": "proxy", "inferred": False},
                       {"kind": "exec", "target": "/bin/sh", "count": 1, "by": "exec gate",
                        "seen_by": "worker", "inferred": False}]}
    r = kb.Result.from_frames(end, b"", b"")
    assert r.blocked[0] == kb.Blocked("request", sentence, 2, "egress proxy", "proxy", False)
    assert kb.receipt_text(r) == (
        "kotoba: the sandbox stopped 3 operations: POST https://api.example.org/up\\x1b[2Jload "
        "refused: a grant covers plain GET requests x2 (egress proxy), exec /bin/sh (exec gate)")


def test_receipt_of_a_refused_exec(broker_proc):
    code = ("import builtins\n"
            "sp = builtins.__dict__['__imp' + 'ort__']('sub' + 'process')\n"
            "try:\n"
            "    sp.run(['/bin/sh', '-c', 'true'])\n"
            "except PermissionError:\n"
            "    print('refused')\n")
    with connect(broker_proc, channel=False) as c:
        r = c.run(code, cwd=broker_proc.dir)
    assert r.stdout == "refused\n", r
    assert r.blocked == (kb.Blocked("exec", "/bin/sh", 1, "exec gate", "worker", False),)
    assert r.blocked_total == 1
    with connect(broker_proc, channel=False) as c:
        r = c.run("print(1)", cwd=broker_proc.dir)
        rows = [x for x in c.audit_tail(4) if x.event == "exit"]
        assert [x.blocked_total for x in rows] == [1, 0], rows
        assert rows[0].blocked == ()
        shown = c.audit_show(rows[0].seq)
        assert shown is not None and shown.blocked_total == 1
        assert shown.blocked == (kb.Blocked("exec", "/bin/sh", 1, "exec gate", "worker", False),)
        assert c.audit_show(10 ** 9) is None
    assert r.blocked == () and r.blocked_total == 0


# ---- the escalation card -------------------------------------------------------

# Stopped under a grant (unattended: the exec gate refuses /bin/sh), runs
# under the approved profile.
# Unlabelled, so that a grant covers it (as test_receipt_of_a_refused_exec).
STOPPED = ("import builtins, sys\n"
           "sp = builtins.__dict__['__imp' + 'ort__']('sub' + 'process')\n"
           "try:\n"
           "    sp.run(['/bin/sh', '-c', 'echo from-sh'], check=True)\n"
           "except PermissionError:\n"
           "    print('refused'); sys.exit(3)\n")


def granted(b, **kw):
    """A connection whose user holds the execute_code grant."""
    c = Broker(socket_path=b.socket, channel=True, **kw)
    c.run("print(1)", cwd=b.dir, on_card=lambda card: kb.ALWAYS)
    return c


def test_escalation_card_rerun(broker_proc):
    cards = []

    def on_card(card):
        cards.append(card)
        assert card.escalate and card.kind == "escalate"
        return kb.RERUN

    with granted(broker_proc, escalate=True) as c:
        r = c.run(STOPPED, cwd=broker_proc.dir, on_card=on_card)
        (card,) = cards
        assert card.options == ("rerun", "leave") and card.family == ""
        assert card.blocked_total >= 1 and card.after_seq > 0
        assert any(b.kind == "exec" and b.target.startswith("/bin/sh") for b in card.blocked)
        assert "[r] Run it again" in card.text()
        assert r.escalation == "rerun" and r.first is not None
        assert r.first.exit_code == 3 and r.first.stdout == "refused\n"
        assert r.first.approver == "grant" and r.first.profile == "unattended"
        assert r.first.blocked_total >= 1
        assert r.exit_code == 0 and "from-sh" in r.stdout and "refused" not in r.stdout
        assert r.approver == "user" and r.profile == "approved"
        rows = c.audit_tail(10)
        first_exit = [x for x in rows if x.event == "exit" and x.seq == card.after_seq]
        assert first_exit and first_exit[0].after is None
        linked = [x for x in rows if x.after == card.after_seq]
        assert linked and any(x.event == "exit" for x in linked), rows


def test_escalation_card_left(broker_proc):
    with granted(broker_proc, escalate=True) as c:
        r = c.run(STOPPED, cwd=broker_proc.dir, on_card=lambda card: kb.LEAVE)
        assert r.escalation == "left" and r.first is not None
        assert r.exit_code == 3 and r.stdout == "refused\n" and r.approver == "grant"
        # the connection takes the next run
        assert c.run("print(2)", cwd=broker_proc.dir).stdout == "2\n"


def test_escalation_card_without_callback_is_left(broker_proc):
    with granted(broker_proc, escalate=True) as c:
        r = c.run(STOPPED, cwd=broker_proc.dir)
        assert r.escalation == "left" and r.exit_code == 3


def test_escalation_card_run_answer_is_a_value_error(broker_proc):
    with granted(broker_proc, escalate=True) as c:
        with pytest.raises(ValueError, match="escalation card"):
            c.run(STOPPED, cwd=broker_proc.dir, on_card=lambda card: kb.ONCE)
        assert c.run("print(2)", cwd=broker_proc.dir).stdout == "2\n"


def test_no_escalation_unless_asked(broker_proc):
    def must_not_ask(card):
        raise AssertionError("an escalation card without escalate=True")

    with granted(broker_proc) as c:
        r = c.run(STOPPED, cwd=broker_proc.dir, on_card=must_not_ask)
        assert r.escalation is None and r.first is None and r.exit_code == 3


def test_escalate_needs_a_channel(broker_proc):
    with pytest.raises(ValueError):
        Broker(socket_path=broker_proc.socket, channel=False, escalate=True)


def test_escalation_card_deferred_rerun(broker_proc):
    with granted(broker_proc, escalate=True) as c:
        def on_card(card):
            threading.Timer(0.1, c.answer, (card.id, kb.RERUN)).start()
            return kb.DEFER
        r = c.run(STOPPED, cwd=broker_proc.dir, on_card=on_card)
        assert r.escalation == "rerun" and r.exit_code == 0


def test_escalation_card_async(broker_proc):
    async def main():
        async with AsyncBroker(socket_path=broker_proc.socket, channel=True,
                               escalate=True) as c:
            await c.run("print(1)", cwd=broker_proc.dir, on_card=lambda card: kb.ALWAYS)

            async def rerun(card):
                await asyncio.sleep(0)
                return kb.RERUN if card.escalate else kb.DENY
            r1 = await c.run(STOPPED, cwd=broker_proc.dir, on_card=rerun)
            r2 = await c.run(STOPPED, cwd=broker_proc.dir, on_card=lambda card: kb.LEAVE)
            return r1, r2

    r1, r2 = asyncio.run(main())
    assert r1.escalation == "rerun" and r1.exit_code == 0 and r1.first.exit_code == 3
    assert r2.escalation == "left" and r2.exit_code == 3


def test_escalation_frames_without_a_broker():
    """The card and the result from frames as PROTOCOL.md's vectors have them."""
    card = kb.Card.from_frame({
        "type": "card", "id": 7, "kind": "escalate", "card": "c-2", "snippet": "x\n",
        "labels": [], "options": ["rerun", "leave"], "expires_ms": 300000,
        "reason": "r?", "cwd": "/w", "timeout_ms": 60000, "env": {}, "limits": {},
        "blocked": [{"kind": "write", "target": "/w/notes.md", "count": 1, "by": "landlock",
                     "seen_by": "python", "inferred": True}],
        "blocked_total": 1, "after_seq": 41})
    assert card.escalate and card.after_seq == 41 and card.blocked_total == 1
    assert card.blocked[0].seen_by == "python"
    assert "the snippet's own claim" in card.text()
    run = kb.Card.from_frame({"type": "card", "id": 1, "card": "c-1", "snippet": "x"})
    assert run.kind == "run" and not run.escalate
    row = kb.AuditRow.from_frame({"seq": 43, "time_ms": 1, "run": 2, "pid": 3, "event": "exit",
                                  "sha256": "00", "labels": "", "mode": "local",
                                  "decision": "ran", "approver": "user",
                                  "profile": "approved", "has_exit": False, "after": 41})
    assert row.after == 41


def test_escalation_card_expired_and_cancelled(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n")
    with granted(b, escalate=True) as c:
        r = c.run(STOPPED, cwd=b.dir, on_card=lambda card: kb.DEFER)
        assert r.escalation == "expired" and r.exit_code == 3 and r.first is not None

        def withdraw(card):
            c.cancel()
            return kb.DEFER
        r = c.run(STOPPED, cwd=b.dir, on_card=withdraw)
        assert r.escalation == "cancelled" and r.exit_code == 3
        assert c.run("print(2)", cwd=b.dir).stdout == "2\n"


def test_escalation_card_expired_async(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n")

    async def main():
        async with AsyncBroker(socket_path=b.socket, escalate=True) as c:
            await c.run("print(1)", cwd=b.dir, on_card=lambda card: kb.ALWAYS)

            async def never(card):
                await asyncio.sleep(600)
                return kb.RERUN
            return await c.run(STOPPED, cwd=b.dir, on_card=never)

    r = asyncio.run(main())
    assert r.escalation == "expired" and r.exit_code == 3
