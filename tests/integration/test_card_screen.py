"""The card is drawn on a screen the snippet cannot restyle.  A snippet's
output may leave the terminal in any state: the foreground drawn in the
background's colour (OSC 10/11, the palette, SGR), concealed text, another
screen, another character set, a hidden cursor.  The next card, in the same
`kotoba run` (an escalation card) or the next one (a run card), must show
every line of the real snippet readable on the main screen: the terminal
model (vt100.py) keeps colours, screens and character sets, and the check
is what a person can see there (Screen.visible_lines).  Output of a run
nobody read reaches a terminal with its control sequences made visible;
an approved run's output arrives as written."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import BACKSTOP_S, wait_for

from test_card_tty import (COLS, ROWS, assert_shown_in_order, drive, expected_rows, grant,
                           kotoba_run, labels_of, workdir, write_snippet)  # noqa: F401
from vt100 import Screen

sys_write = "import sys\nsys.stdout.write(%r)\nsys.stdout.flush()\n"

# Each leaves the screen so that text drawn after it in the default
# colours, or in the card's own attributes, cannot be read.
RESTYLE = [
    ("dynamic-colours", "\x1b]10;#101010\x07\x1b]11;#101010\x07"),
    ("dynamic-colours-st", "\x1b]10;rgb:10/10/10\x1b\\\x1b]11;rgb:10/10/10\x1b\\"),
    ("palette", "\x1b]4;0;#e5e5e5\x07\x1b]4;7;#e5e5e5\x07\x1b]4;3;#000000\x07\x1b[40;37m"),
    ("sgr-same-colours", "\x1b[38;2;9;9;9;48;2;9;9;9m"),
    ("conceal", "\x1b[8m"),
    ("reverse-screen", "\x1b]11;#e5e5e5\x07\x1b[?5h"),
    ("alternate-screen", "\x1b[?1049h\x1b[2J\x1b[Hnothing to see here"),
    ("old-alternate-screen", "\x1b[?47h"),
    ("line-drawing", "\x1b(0"),
    ("shift-out", "\x1b)0\x0e"),
    ("hidden-cursor", "\x1b[?25l"),
    # Text far right on every row, the cursor sent home: the card's rows
    # would be drawn beside it, and read with it.
    ("beside-the-rows", "".join("\x1b[%d;50H; os.system('evil')" % r for r in range(1, 25))
     + "\x1b[H"),
]
IDS = [r[0] for r in RESTYLE]

# The next card's snippet: what must be readable on it.
NEXT = 'import os\nos.system("id > card_pwned")  # the line that matters\n'


def card_rows_visible(snaps, code, path):
    assert_shown_in_order(snaps, expected_rows(code, labels_of(path)))


def final_state(screen):
    """What the card leaves behind: the main screen, the cursor shown."""
    assert screen.main is None, "the card was drawn on an alternate screen"
    assert screen.cursor_visible, "the cursor is hidden on the card"


@pytest.mark.parametrize("name,seq", RESTYLE, ids=IDS)
def test_an_approved_run_cannot_restyle_the_next_card(broker, workdir, name, seq):
    screen = Screen(COLS, ROWS)
    first = write_snippet(workdir, sys_write % seq)
    snaps, status, raw = drive(broker, first, workdir, "o", screen=screen)
    assert status == 0, raw
    # approved: the person read it, and its bytes reach the terminal raw
    assert seq.encode() in raw
    path = write_snippet(workdir, NEXT)
    snaps, status, raw = drive(broker, path, workdir, "d", screen=screen)
    assert status == 126, raw
    card_rows_visible(snaps, NEXT, path)
    final_state(screen)
    assert not os.path.exists(os.path.join(workdir, "card_pwned"))


@pytest.mark.parametrize("name,seq", RESTYLE, ids=IDS)
def test_a_grant_run_cannot_restyle_its_escalation_card(broker, workdir, name, seq):
    """Under a saved grant the snippet prints the sequence, then the exec
    gate refuses a program and it fails: the escalation card follows in the
    same run.
    Its output is shown made visible; with --raw-output it is not, and the
    card must hold all the same."""
    grant(broker, workdir)
    code = (sys_write % seq + "import builtins\n"
            "m = builtins.__dict__['__imp' + 'ort__']\n"
            "try:\n    getattr(m('sub' + 'process'), 'ca' + 'll')(['/bin/true'])\n"
            "except PermissionError:\n    pass\n"
            # only a run that failed brings the escalation card
            "raise SystemExit(4)\n")
    path = write_snippet(workdir, code)
    for raw_output in (False, True):
        screen = Screen(COLS, ROWS)
        argv = (lambda b, p, c: kotoba_run(b, p, c) + ["--raw-output"]) if raw_output \
            else kotoba_run
        snaps, status, raw = drive(broker, path, workdir, None, again="l", argv=argv,
                                   screen=screen)
        assert status == 4, raw  # left: the first run's status
        assert (seq.encode() in raw) == raw_output, raw
        assert_shown_in_order(snaps, ["== The sandbox stopped this snippet: run it again? =="]
                              + expected_rows(code, ()))
        final_state(screen)


def test_the_terminal_model_sees_the_attack(workdir):
    """Control: each sequence, then a card drawn without the reset that
    kotoba_card_text() starts with, hides it on this screen: the tests above
    can fail."""
    from kotoba_broker import Card, Label
    from kotoba_broker.render import card_text
    labels = (Label("shell-spawn", 2, 0, 0),)  # drawn in the palette's yellow
    card = Card(id="c", snippet=NEXT, labels=labels, options=(), family="", button="",
                detail="", expires=0, reason="")
    plain = card_text(card, COLS, colour=True).split("\x1b]119\x1b\\\x1b[J", 1)[1]
    want = [r for r in expected_rows(NEXT, labels) if r.strip()]
    for name, seq in RESTYLE:
        screen = Screen(COLS, ROWS)
        screen.feed((seq + plain).replace("\n", "\r\n").encode())
        if name in ("sgr-same-colours", "conceal"):
            continue  # the card's own SGR 0, after its heading, undoes these
        seen = screen.visible_lines()
        hidden = any(w not in seen for w in want) or screen.main is not None or \
            not screen.cursor_visible
        assert hidden, "the model does not see what %s does" % name
        # ... and the whole card, reset included, shows it
        screen = Screen(COLS, ROWS)
        screen.feed((seq + card_text(card, COLS, colour=True)).replace("\n", "\r\n").encode())
        seen = screen.visible_lines()
        assert all(w in seen for w in want), (name, seen)


def test_unattended_output_on_a_terminal_is_made_visible(broker, workdir):
    """No channel: nobody read the snippet.  On a terminal its escapes are
    shown as the card shows a snippet's; in a pipe, and with --raw-output,
    they are the bytes it wrote; a character cut between two output frames
    is whole."""
    # two writes, most likely two output frames: the é cut between them
    code = ("import sys, time\n"
            "sys.stdout.buffer.write(b'\\x1b[31mred\\x1b[0m caf\\xc3'); sys.stdout.flush()\n"
            "time.sleep(0.2)\n"
            "sys.stdout.buffer.write(b'\\xa9 done\\n')\n")
    path = write_snippet(workdir, code)
    no_channel = lambda b, p, c: kotoba_run(b, p, c) + ["--no-channel"]  # noqa: E731
    screen = Screen(COLS, ROWS)
    _, status, raw = drive(broker, path, workdir, None, argv=no_channel, screen=screen)
    assert status == 0, raw
    assert b"\x1b[31mred" not in raw, raw
    assert "\\x1b[31mred\\x1b[0m caf\u00e9 done" in screen.text(), screen.text()
    screen = Screen(COLS, ROWS)
    _, status, raw = drive(broker, path, workdir, None, screen=screen,
                           argv=lambda b, p, c: no_channel(b, p, c) + ["--raw-output"])
    assert b"\x1b[31mred\x1b[0m caf\xc3\xa9 done" in raw, raw
    p = broker.kotoba("run", path, "--no-channel", "--cwd", workdir)
    assert p.stdout == b"\x1b[31mred\x1b[0m caf\xc3\xa9 done\n", p.stdout


def test_an_approved_runs_colours_arrive_as_colour(broker, workdir):
    path = write_snippet(workdir, "print('\\x1b[31mred\\x1b[0m plain')\n")
    screen = Screen(COLS, ROWS)
    _, status, raw = drive(broker, path, workdir, "o", screen=screen)
    assert status == 0 and b"\x1b[31mred\x1b[0m plain" in raw, raw
    y = next(i for i, row in enumerate(screen.lines()) if row.startswith("red plain"))
    assert screen.attrs[y][0][0] == 1 and screen.attrs[y][4][0] is None  # red, then default


# ---- the same in a real terminal emulator ---------------------------------------

TMUX = shutil.which("tmux")


def tmux_question(tmux, times):
    """Waits for the times-th card question on the tmux pane; returns the
    pane as text, and as tmux sees its state (alternate screen, cursor)."""
    asked = 0
    deadline = time.monotonic() + BACKSTOP_S
    while time.monotonic() < deadline:
        screen = subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                                text=True).stdout
        last = [r for r in screen.split("\n") if r.strip()][-1:] or [""]
        if last[0].startswith("-- rows") and last[0].endswith("--"):
            subprocess.run(tmux + ["send-keys", "Enter"], check=True)
            wait_for(lambda: subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                                            text=True).stdout != screen, "the next page")
            continue
        if last[0].startswith("Your choice [o/a/d]:"):
            asked += 1
            if asked == times:
                state = subprocess.run(tmux + ["display", "-p",
                                               "#{alternate_on} #{cursor_flag}"],
                                       capture_output=True, text=True).stdout.split()
                coloured = subprocess.run(tmux + ["capture-pane", "-p", "-e"],
                                          capture_output=True, text=True).stdout
                return screen, state, coloured
        time.sleep(0.1)
    pytest.fail("no question %d on the tmux pane" % times)


@pytest.mark.skipif(not TMUX, reason="tmux is not installed (make check-integration installs it)")
def test_in_tmux_an_approved_run_cannot_hide_the_next_card(broker, workdir):
    """tmux interprets both runs as a terminal would: an approved snippet
    leaves the pane on the alternate screen, with concealed text and no
    cursor; the next card is on the main screen, readable, the cursor on."""
    first = write_snippet(workdir, sys_write % "\x1b[?1049h\x1b[8m\x1b[?25lhidden")
    nxt = os.path.join(workdir, "..", "next.py")
    with open(nxt, "w") as f:
        f.write(NEXT)
    status = os.path.join(workdir, "..", "status")
    sock = "kotoba-screen-%d" % os.getpid()
    tmux = [TMUX, "-L", sock, "-f", "/dev/null"]
    cmd = "%s; %s; echo $? > %s" % (" ".join(kotoba_run(broker, first, workdir)),
                                     " ".join(kotoba_run(broker, nxt, workdir)), status)
    subprocess.run(tmux + ["new-session", "-d", "-x", str(COLS), "-y", str(ROWS), cmd],
                   check=True)
    try:
        tmux_question(tmux, 1)
        subprocess.run(tmux + ["send-keys", "o", "Enter"], check=True)
        screen, state, coloured = tmux_question(tmux, 1)
        while "os.system" not in screen:  # still the first card's question
            screen, state, coloured = tmux_question(tmux, 1)
        subprocess.run(tmux + ["send-keys", "d", "Enter"], check=True)
        wait_for(lambda: os.path.exists(status), "the second run's status")
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
    assert state == ["0", "1"], state  # the main screen, the cursor shown
    assert '   2  os.system("id > card_pwned")  # the line that matters' in screen, screen
    row = next(r for r in coloured.split("\n") if "the line that matters" in r)
    assert "\x1b[8m" not in row, repr(row)  # not concealed
    with open(status) as f:
        assert f.read().strip() == "126"
