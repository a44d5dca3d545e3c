"""The approval card as a person sees it: the real `kotoba run` on a real
pseudo-terminal, against a real broker, its output interpreted by a
terminal model (vt100.py).  Each snippet below tries to make the card show
other code than what would run; the screen must show every line of the
real code with its number, the hidden characters made visible, and a deny
must run nothing.  Also: `kotoba scan`, `audit tail`, `approvals ls` and
the broker's messages reach the terminal escaped.
"""
import fcntl
import os
import pty
import select
import shutil
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

import msgpack
import pytest

from conftest import BACKSTOP_S, KOTOBA
from vt100 import Screen

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from kotoba_broker import Card, Label  # noqa: E402
from kotoba_broker.render import card_text  # noqa: E402

COLS, ROWS = 80, 24
AGENT_TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "client", "python", "examples",
                          "agent_tool.py")
PWN = 'import os; os.system("id > card_pwned")'

# Each: (name, snippet, what the screen must show besides every line).
HOSTILE = [
    # The cursor goes back over line 1, erases it and writes a harmless
    # line in its place, then climbs to erase the pre-screen's line.
    ("cursor-overwrite",
     PWN + '\n#\x1b[2K\x1b[1A\x1b[2K\x1b[1G   1 print("hello")\n'
     '#\x1b[2K\x1b[3A\x1b[2K\x1b[3B\n',
     ["\\x1b[1A", "\\x1b[2K\\x1b[1G", "this snippet contains"]),
    # Operating system commands: a window title, a hyperlink, the clipboard.
    ("osc",
     'print(1)  # \x1b]0;pwned\x07\x1b]8;;http://x.test\x1b\\link\x1b]8;;\x1b\\\n'
     '# \x1b]52;c;aWQgPiBjYXJkX3B3bmVk\x07\n' + PWN + "\n",
     ["\\x1b]0;pwned\\x07", "\\x1b]52;c;"]),
    # Concealed text (SGR 8) from a comment down to the next one.
    ("conceal", "x = 1  # \x1b[8m\n" + PWN + "\n# \x1b[0m\n", ["\\x1b[8m"]),
    # 8-bit CSI: U+009B is CSI to a terminal that reads C1 controls.
    ("c1-csi", PWN + "\n#\u009b2K\u009b1A\u009b2K\n", ["<U+009B>2K"]),
    # Trojan Source: a right-to-left override makes the test read as a comment.
    ("bidi",
     'access = "user"\nif access != "none\u202e \u2066# admin only\u2069 \u2066":\n'
     '    ' + PWN + "\n",
     ["<U+202E>", "<U+2066>", "<U+2069>"]),
    ("zero-width", 'import os; os.system("id > card_pwned" + "\u200b"[1:])\n', ["<U+200B>"]),
    # A carriage return alone: Python takes it as a line break, so the
    # broker refuses it before any card (test_inject.py); a CR LF is shown.
    ("crlf", PWN + '\r\nprint("hello")' + " " * 40 + "\r\n", ["\\x0d"]),
    # The call far to the right of the screen.
    ("long-line", "x = 1" + " " * 300 + "; " + PWN + "\n", []),
    # Taller than the screen: line 150 must be on it too.
    ("200-lines",
     PWN + "\n" + "".join("print(%d)\n" % i if i != 150 else PWN + "\n"
                          for i in range(2, 201)),
     ["The snippet: 200 lines"]),
]


def labels_of(path):
    """The pre-screen's labels, as the broker will put them on the card."""
    p = subprocess.run([KOTOBA, "scan", path], capture_output=True, text=True)
    out = []
    for row in p.stdout.splitlines():
        parts = row.split()
        if len(parts) >= 3 and parts[1] == "line":
            out.append(Label(parts[0], int(parts[2]), 0, 0))
    return tuple(out)


def expected_rows(snippet, labels):
    """The snippet's rows as kotoba_broker.render lays them out: the same
    rules as libkotoba-client, written separately in Python."""
    card = Card(id="c", snippet=snippet, labels=labels, options=(), family="", button="",
                detail="", expires=0, reason="")
    rows = card_text(card, COLS).split("\n")
    start = next(i for i, r in enumerate(rows) if r.startswith("The snippet:")) + 1
    end = rows.index("  [o] Run once") - 1
    return rows[start:end]


def kotoba_run(broker, path, cwd):
    return [KOTOBA, "run", path, "--cwd", cwd, "--socket", broker.socket]


def agent_tool(broker, path, cwd):
    return ["/usr/bin/python3", AGENT_TOOL, path, "--cwd", cwd, "--socket", broker.socket]


def drive(broker, path, cwd, answer, timeout=BACKSTOP_S, argv=kotoba_run, again=None,
          screen=None):
    """Runs `kotoba run FILE` (or another argv) on a pty of COLS x ROWS; at
    each pager prompt takes a snapshot of the screen and presses Enter; at
    the question takes one and answers (`again` at an escalation card's,
    which fails the test when None).  Given a screen, it goes on with what
    an earlier program left there, and its snapshots are what a person can
    see (Screen.visible_lines).  Returns (snapshots, exit status, everything
    read)."""
    args = argv(broker, path, cwd)
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.execv(args[0], args)
        finally:
            os._exit(127)
    look = Screen.visible_lines if screen else Screen.lines
    screen, snaps, raw = screen or Screen(COLS, ROWS), [], b""
    waiting, deadline = False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.3)
            if r:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the child is gone
                    break
                if not data:
                    break
                raw += data
                screen.feed(data)
                waiting = False
                continue
            row = screen.cursor_line()
            if waiting:
                continue
            if row.startswith("-- rows") and row.endswith("--"):
                snaps.append(look(screen))
                os.write(fd, b"\n")
                waiting = True
            elif row.startswith("Your choice [o/a/d]:"):
                snaps.append(look(screen))
                os.write(fd, answer.encode() + b"\n")
                waiting = True
            elif row.startswith("[r]un it again with your permissions, or [l]eave it:"):
                snaps.append(look(screen))
                if again is None:
                    pytest.fail("an escalation card nobody expected:\n" + screen.text())
                os.write(fd, again.encode() + b"\n")
                waiting = True
        else:
            pytest.fail("kotoba run did not finish; screen:\n" + screen.text())
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return snaps, os.waitstatus_to_exitcode(status), raw


def assert_shown_in_order(snaps, rows):
    seen = [r for s in snaps for r in s]
    at = 0
    for want in rows:
        try:
            at = seen.index(want.rstrip(), at)
        except ValueError:
            pytest.fail("not on the screen: %r\nscreens:\n%s"
                        % (want, "\n----\n".join("\n".join(s) for s in snaps)))


@pytest.fixture
def workdir(tmpdir_k):
    """A directory the snippet's user (nobody, for a root client) could
    write card_pwned into, had it run."""
    d = os.path.join(tmpdir_k, "work")
    os.mkdir(d)
    os.chmod(d, 0o777)
    return d


def write_snippet(d, code):
    path = os.path.join(os.path.dirname(d), "snippet.py")
    with open(path, "w") as f:
        f.write(code)
    return path


@pytest.mark.parametrize("name,code,visible", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_card_shows_the_real_code_and_deny_runs_nothing(broker, workdir, name, code, visible):
    path = write_snippet(workdir, code)
    snaps, status, _ = drive(broker, path, workdir, "d")
    assert status == 126, status
    assert not os.path.exists(os.path.join(workdir, "card_pwned"))
    assert_shown_in_order(snaps, expected_rows(code, labels_of(path)))
    text = "\n".join("\n".join(s) for s in snaps)
    # written out by hand too, not only by the Python renderer
    assert "   1  " + (PWN if name not in ("osc", "conceal", "bidi", "zero-width",
                                         "long-line") else "") in text
    assert 'os.system("id > card_pwned"' in text
    for v in visible:
        assert v in text, (v, text)
    if name == "200-lines":
        assert " 150  " + PWN in text and " 200  print(200)" in text
        assert len(snaps) >= 9  # paged: 200 rows do not fit one screen


@pytest.mark.parametrize("name,code,visible", [HOSTILE[0], HOSTILE[4], HOSTILE[-1]],
                         ids=[HOSTILE[0][0], HOSTILE[4][0], HOSTILE[-1][0]])
def test_agent_tool_card_shows_the_real_code(broker, workdir, name, code, visible):
    """examples/agent_tool.py shows the card through kotoba_broker.render,
    paged the same way."""
    path = write_snippet(workdir, code)
    snaps, status, raw = drive(broker, path, workdir, "d", argv=agent_tool)
    assert status == 0 and b"The code did not run (denied)" in raw
    assert not os.path.exists(os.path.join(workdir, "card_pwned"))
    assert_shown_in_order(snaps, expected_rows(code, labels_of(path)))
    text = "\n".join("\n".join(s) for s in snaps)
    for v in visible:
        assert v in text, (v, text)


def test_the_terminal_model_sees_the_attack(workdir):
    """Control: the same snippet printed raw, as the card once did, hides
    the real line 1 on this screen, so the test above can fail."""
    code = HOSTILE[0][1]
    screen = Screen(COLS, ROWS)
    card = "\nPre-screen: shell-spawn (line 1)\n\n" + "".join(
        "%4d %s\n" % (i, line) for i, line in enumerate(code.split("\n")[:-1], 1))
    screen.feed(card.replace("\n", "\r\n").encode())  # as the tty's ONLCR sends it
    assert "os.system" not in screen.text()
    assert '   1 print("hello")' in screen.text()
    assert "Pre-screen" not in screen.text()


def test_approved_the_same_snippet_runs(broker, workdir):
    """Control: answered once, the snippet does what the card shows, so the
    deny above is what kept card_pwned from being written."""
    path = write_snippet(workdir, HOSTILE[0][1])
    snaps, status, _ = drive(broker, path, workdir, "o")
    assert status == 0, (status, snaps)
    assert os.path.exists(os.path.join(workdir, "card_pwned"))


def test_card_shows_cwd_timeout_env_and_limits(broker, workdir):
    path = write_snippet(workdir, "print(1)\n")
    env = dict(os.environ, TZ="Europe/Paris\x1b[2J", LANG="C.UTF-8")
    pid, fd = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLS, 0, 0))
            os.execve(KOTOBA, [KOTOBA, "run", path, "--cwd", workdir, "--timeout", "7",
                               "--socket", broker.socket], env)
        finally:
            os._exit(127)
    screen, out = Screen(COLS, 50), b""
    deadline = time.monotonic() + BACKSTOP_S
    try:
        while time.monotonic() < deadline and "Your choice" not in screen.cursor_line():
            if select.select([fd], [], [], 0.3)[0]:
                data = os.read(fd, 65536)
                out += data
                screen.feed(data)
        os.write(fd, b"d\n")
        while select.select([fd], [], [], 5)[0]:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    text = screen.text()
    assert "Runs in:     " + workdir in text
    assert "Time limit:  7.000 s wall clock" in text
    assert "Limits:      cpu " in text and "memory " in text
    assert "TZ=Europe/Paris\\x1b[2J" in text
    assert "LANG=C.UTF-8" in text
    assert b"\x1b[2J" not in out


# ---- other places text reaches the terminal ---------------------------------

def test_scan_output_is_escaped(tmpdir_k):
    path = os.path.join(tmpdir_k, "s.py")
    with open(path, "wb") as f:
        f.write('open("a\u202e\u200b\x1bb\u009b", "w")\n'.encode())
    p = subprocess.run([KOTOBA, "scan", path], capture_output=True)
    assert p.returncode == 1
    out = p.stdout.decode()
    assert "fs-write" in out and "\x1b" not in out
    assert not any(c in out for c in "\u202e\u200b\u009b")
    assert "<U+200B>" in out


class FakeBroker:
    """A broker that answers every request with the frames it is given:
    what the CLI shows of a broker's strings must not depend on the
    broker's goodwill."""

    def __init__(self, path, answers):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(1)
        self.answers = answers
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def recv(self, c):
        n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
        return msgpack.unpackb(c.recv(n, socket.MSG_WAITALL), raw=False)

    def send(self, c, m):
        p = msgpack.packb(m, use_bin_type=True)
        c.sendall(struct.pack(">I", len(p)) + p)

    def serve(self):
        c, _ = self.sock.accept()
        with c:
            self.recv(c)
            self.send(c, {"type": "welcome", "version": 1, "broker": "fake/1", "mode": "local",
                          "tools": ["execute_code"], "max_frame": 1 << 22,
                          "max_snippet": 1 << 20, "max_timeout_ms": 600000})
            req = self.recv(c)
            for a in self.answers:
                self.send(c, dict(a, id=req.get("id", 0)))
            time.sleep(0.5)


HOSTILE_TEXT = "x\x1b[2J\x1b]0;t\x07\u202e\u200by\u009b1A"


def assert_escaped(out):
    assert "\x1b" not in out and not any(c in out for c in "\u202e\u200b\u009b"), out
    assert "\\x1b[2J" in out and "<U+202E><U+200B>y<U+009B>1A" in out, out


@pytest.mark.parametrize("argv,answers", [
    (["run", "-c", "print(1)", "--no-channel"],
     [{"type": "error", "code": "refused", "message": HOSTILE_TEXT}]),
    (["audit", "tail"],
     [{"type": "audit_rows", "rows": [{
         "seq": 1, "time_ms": 1, "run": 1, "pid": 1, "event": "decision",
         "sha256": "ab\x1b[2J", "labels": HOSTILE_TEXT, "mode": "local", "decision": "ran",
         "approver": "grant", "profile": "unattended", "has_exit": False}]}]),
    (["approvals", "ls"],
     [{"type": "grant_list", "grants": [{"family": HOSTILE_TEXT, "saved_at_ms": 1,
                                         "card": HOSTILE_TEXT, "use_count": 1,
                                         "last_used_ms": 0, "expires_ms": 1,
                                         "expired": True, "scope": "/" + HOSTILE_TEXT}]}]),
], ids=["error-message", "audit-tail", "approvals-ls"])
def test_broker_strings_are_escaped(tmpdir_k, argv, answers):
    path = os.path.join(tmpdir_k, "fake.sock")
    FakeBroker(path, answers)
    p = subprocess.run([KOTOBA, *argv, "--socket", path], capture_output=True, timeout=30)
    assert_escaped(p.stdout.decode() + p.stderr.decode())


# ---- the card frame -----------------------------------------------------------

def test_card_frame_carries_what_the_run_gets(broker, workdir):
    c = broker.client(channel=True)
    c.exec("print(1)", cwd=workdir, timeout_ms=7000,
           env={"LANG": "C.UTF-8", "AWS_SECRET_KEY": "x",
                "NOT_ALLOWED": "y"})
    card = c.recv()
    assert card["type"] == "card", card
    assert card["cwd"] == workdir and card["timeout_ms"] == 7000
    # what the broker keeps, as the run's environment is built; no more
    assert "AWS_SECRET_KEY" not in card["env"] and "NOT_ALLOWED" not in card["env"]
    assert card["env"].get("LANG") == "C.UTF-8"
    assert set(card["limits"]) >= {"cpu_s", "memory_bytes", "processes", "output_bytes"}
    c.send({"type": "answer", "card": card["card"], "choice": "deny"})
    assert c.recv()["code"] == "denied"


def test_card_over_the_frame_limit_is_not_sent(make_broker, workdir):
    """An exec just under the frame limit whose card (the same code and kept
    env plus the card's own text) would be over it: refused in a sentence,
    since a client could not read such a card."""
    snippet, frame = 100 * 1024, 100 * 1024 + 64 * 1024 + 64
    b = make_broker(config="[limits]\nsnippet = %d\nframe = %d\n" % (snippet, frame)).start()
    c = b.client(channel=True)
    # the names this broker keeps, from a card
    names = ["LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
             "LC_MONETARY", "LC_NUMERIC", "LC_TIME", "TZ", "TERM", "COLUMNS", "LINES",
             "NO_COLOR", "VIRTUAL_ENV", "MPLBACKEND"]
    c.exec("print(1)", cwd=workdir, env={n: "x" for n in names})
    card = c.recv()
    c.send({"type": "answer", "card": card["card"], "choice": "deny"})
    assert c.recv()["code"] == "denied"
    kept = list(card["env"])
    assert len(kept) >= 12, kept
    msg = {"type": "exec", "id": 2, "code": "print(1)\n" + "#" * (snippet - 9), "cwd": workdir,
           "env": {n: "x" * 4096 for n in kept}}
    over = len(msgpack.packb(msg, use_bin_type=True)) - (frame - 100)
    assert over > 0
    msg["code"] = msg["code"][:-over]
    assert frame - 120 < len(msgpack.packb(msg, use_bin_type=True)) <= frame - 100
    c.send(msg)
    end = c.recv()
    assert end["type"] == "error" and end["code"] == "bad-field", end
    assert "frame limit" in end["message"]
    assert b.answers()
    b.stop()


def test_revoke_of_a_family_that_is_not_a_name(broker):
    """What a client names in a revoke reaches the broker's log and its
    answer: it must be a name, not terminal controls."""
    c = broker.client()
    c.send({"type": "revoke", "id": 5, "family": "x\x1b[2J\x1b]0;t\x07"})
    m = c.recv()
    assert m["type"] == "error" and m["code"] == "bad-field", m
    c.send({"type": "revoke", "id": 6, "family": "execute_code"})
    assert c.recv()["type"] == "ok"
    assert "\x1b" not in broker.read_log()


def test_docker_card_names_the_container_limits(make_broker, workdir):
    """In docker mode the card names the limits the container gets."""
    b = make_broker(config="[broker]\nsandbox = docker\n[docker]\ncli = podman\n"
                           "image = localhost/kotoba-test-python:bookworm\n"
                           "url = unix:///nonexistent/kotoba-engine.sock\nmemory = 300M\n").start()
    c = b.client(channel=True)
    c.exec("import shutil\nshutil.rmtree('/nonexistent-kotoba')\n", cwd=workdir)
    card = c.recv()
    assert card["type"] == "card", card
    assert card["limits"]["memory_bytes"] == 300 * 1024 * 1024
    assert "cpu_s" not in card["limits"] and "processes" in card["limits"]
    assert card["cwd"] == workdir
    c.send({"type": "answer", "card": card["card"], "choice": "deny"})
    assert c.recv()["code"] == "denied"
    b.stop()


# ---- the same card in a real terminal emulator ----------------------------------

TMUX = shutil.which("tmux")


@pytest.mark.skipif(not TMUX, reason="tmux is not installed: the card is checked through "
                    "vt100.py only (apt-get install tmux to check it in a real terminal too)")
def test_card_in_tmux_shows_the_real_line_1(broker, workdir):
    """tmux interprets the card as a terminal would; its screen must show
    the real line 1 and the escapes, and deny must run nothing."""
    path = write_snippet(workdir, HOSTILE[0][1])
    sock = "kotoba-test-%d" % os.getpid()
    tmux = [TMUX, "-L", sock, "-f", "/dev/null"]
    status = os.path.join(workdir, "..", "status")
    cmd = "%s; echo $? > %s" % (" ".join(kotoba_run(broker, path, workdir)), status)
    subprocess.run(tmux + ["new-session", "-d", "-x", str(COLS), "-y", str(ROWS), cmd],
                   check=True)
    try:
        deadline, screens = time.monotonic() + BACKSTOP_S, []
        while time.monotonic() < deadline:
            screen = subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                                    text=True).stdout
            last = [r for r in screen.split("\n") if r.strip()][-1:] or [""]
            if last[0].startswith("Your choice [o/a/d]:"):
                screens.append(screen)
                subprocess.run(tmux + ["send-keys", "d", "Enter"], check=True)
                break
            if last[0].startswith("-- rows") and screen not in screens:
                screens.append(screen)
                subprocess.run(tmux + ["send-keys", "Enter"], check=True)
            time.sleep(0.2)
        else:
            pytest.fail("no question on the tmux screen:\n" + "\n---\n".join(screens))
        while time.monotonic() < deadline and not os.path.exists(status):
            time.sleep(0.1)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
    text = "\n".join(screens)
    assert "   1  " + PWN in text, text
    assert "\\x1b[2K\\x1b[1A\\x1b[2K\\x1b[1G" in text and "Pre-screen:" in text
    with open(status) as f:
        assert f.read().strip() == "126"
    assert not os.path.exists(os.path.join(workdir, "card_pwned"))


# ---- the escalation card (PROTOCOL.md, "The escalation card") ---------------

# Writes notes.md where it runs, which the unattended profile refuses; a
# comment hides a cursor move, which the card must show escaped.
# A write into the project (refused unattended, which the worker's write
# witness sees) and a program started (refused by the exec gate); then it
# fails without notes.md: only a run that failed brings an escalation card.
WRITE_NOTES = ("import builtins\n"
               "o = builtins.__dict__['op' + 'en']  # \x1b[1A\x1b[2K\n"
               "m = builtins.__dict__['__imp' + 'ort__']\n"
               "try:\n"
               "    o('notes.md', 'a' + 't').write('done\\n')\n"
               "    print('wrote')\n"
               "except PermissionError:\n"
               "    print('refused')\n"
               "try:\n"
               "    getattr(m('sub' + 'process'), 'ca' + 'll')(['/bin/true'])\n"
               "except PermissionError:\n"
               "    pass\n"
               "try:\n"
               "    o('notes.md').close()\n"
               "except OSError:\n"
               "    raise SystemExit(3)\n")


def grant(broker, cwd):
    p = broker.kotoba("run", "-c", "print(1)", "--cwd", cwd, "--answer", "always")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("again", ["r", "l"])
def test_escalation_card_on_a_terminal(broker, workdir, again):
    grant(broker, workdir)
    path = write_snippet(workdir, WRITE_NOTES)
    snaps, status, raw = drive(broker, path, workdir, None, again=again)
    notes = os.path.join(workdir, "notes.md")
    text = raw.decode(errors="replace")
    # the run that ran last: the rerun's 0, or the first run's 3 when left
    assert status == (0 if again == "r" else 3), text
    assert_shown_in_order(snaps, [
        "== The sandbox stopped this snippet: run it again? ==",
        "Why:         This snippet already ran once under your execute_code grant, and",
        "Stopped:     create %s (landlock)" % notes,
        "             exec /bin/true (exec gate)",
        "  [r] Run it again with your permissions (the approved profile)",
        "  [l] Leave it: nothing runs again"])
    shown = "\n".join(r for s in snaps for r in s)
    assert "\\x1b[1A\\x1b[2K" in shown and "\x1b[1A" not in shown, shown
    assert "kotoba: the sandbox stopped 2 operations: create %s (landlock), exec /bin/true " \
        "(exec gate)" % notes in text
    assert "the snippet itself claims" not in text, text
    if again == "r":
        assert "running it again with your permissions" in text and "wrote" in text, text
        with open(notes) as f:
            assert f.read() == "done\n"
    else:
        assert "left as it was: nothing ran again" in text and not os.path.exists(notes)


def test_answer_flags_never_answer_an_escalation_card(broker, workdir):
    grant(broker, workdir)
    path = write_snippet(workdir, WRITE_NOTES)
    snaps, status, raw = drive(broker, path, workdir, None,
                               argv=lambda b, p, c: kotoba_run(b, p, c) + ["--answer", "once"])
    assert status == 3 and b"refused" in raw and not snaps, raw
    assert not os.path.exists(os.path.join(workdir, "notes.md"))
