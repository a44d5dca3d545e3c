#!/usr/bin/python3
"""An agent's `execute_code` tool on top of kotoba-brokerd.

The model asks to run Python; this tool sends the code to the broker, shows
the approval card to the person at the terminal when the broker asks for
one, and turns the result into the short text the model sees: the exit
code, then stdout and stderr trimmed to a budget (head and tail kept, the
middle elided), or one sentence saying why the code did not run.

    python3 agent_tool.py -c 'print(6*7)'               # asks at the terminal
    python3 agent_tool.py script.py --answer once       # non-interactive
    echo 'import os; print(os.getcwd())' | python3 agent_tool.py - --cwd /tmp

In an agent, register TOOL (the schema the model is given) and call
execute_code(arguments["code"]) when the model uses it.
"""
import argparse
import os
import sys

# Run from a source tree without installing: the package is one level up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kotoba_broker import (Broker, BrokerUnavailable, DidNotRun, KotobaError,  # noqa: E402
                           SetupFailed, show)

TOOL = {
    "name": "execute_code",
    "description": ("Run a Python 3 snippet on the user's computer and return its exit code, "
                    "stdout and stderr. The user may be asked to approve it first; a snippet "
                    "that writes files, deletes, spawns processes or sends data out is always "
                    "shown to them."),
    "input_schema": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source"}},
        "required": ["code"],
    },
}

STREAM_BUDGET = 4000  # characters of each stream the model sees


# ---- the card, at the terminal -------------------------------------------------

def _terminal():
    """The controlling terminal for the card (stdin may be the snippet), as
    a reader and a writer: a text file cannot be opened "r+" on a tty."""
    try:
        tin = open("/dev/tty")
    except OSError:
        return None
    try:
        return tin, open("/dev/tty", "w")
    except OSError:
        tin.close()
        return None


def _screen(out):
    """(columns, rows) of the terminal `out` writes to; 80 x 24 otherwise."""
    try:
        size = os.get_terminal_size(out.fileno())
        return max(size.columns, 20), max(size.lines, 5)
    except (OSError, ValueError, AttributeError):
        return 80, 24


def show_card(card, out, tin=None):
    """The card as kotoba_broker renders it: every character visible (an
    escape sequence in the snippet is shown as `\\x1b`, not obeyed), every
    line numbered, long lines wrapped, and the working directory, time
    limit and environment the run gets.  On a terminal (`tin` given) it is
    paged, so every row is on the screen before the question."""
    cols, rows = _screen(out)
    text = card.text(cols, colour=out.isatty())
    lines = text.split("\n")
    page = rows - 2 if tin is not None else len(lines)
    for i in range(0, len(lines), page):
        if i:
            out.write("-- rows %d-%d of %d shown; press Enter for more --"
                      % (i - page + 1, i, len(lines)))
            out.flush()
            if not tin.readline():
                return False
        out.write("\n".join(lines[i:i + page]) + ("\n" if i + page < len(lines) else ""))
    print("(unanswered, it expires in %d s)" % card.expires, file=out)
    return True


def ask_at_terminal(card):
    tty = _terminal()
    if tty is None:
        print("agent_tool: no terminal to show the approval card on; denying",
              file=sys.stderr)
        return "deny"
    tin, tout = tty
    with tin, tout:
        if not show_card(card, tout, tin):
            return "deny"  # end of input
        while True:
            tout.write("Your choice [o/a/d]: ")
            tout.flush()
            reply = tin.readline().strip().lower()
            if not reply:
                return "deny"  # end of input
            choice = {"o": "once", "a": "always", "d": "deny"}.get(reply[0])
            if choice:
                return choice


def preset_answer(choice):
    """For scripts and demos: show the card on stderr, answer `choice`."""
    def on_card(card):
        show_card(card, sys.stderr)
        print("Your choice [o/a/d]: %s (--answer)" % choice, file=sys.stderr)
        return choice
    return on_card


# ---- the result, for the model ------------------------------------------------------

def trim(text, budget=STREAM_BUDGET):
    """Keeps the head and the tail: errors are usually at the end, and what
    the snippet set out to do at the start."""
    if len(text) <= budget:
        return text
    head = budget * 2 // 5
    tail = budget - head
    return "%s\n[... %d characters omitted ...]\n%s" % (text[:head], len(text) - budget,
                                                      text[-tail:])


def for_model(result):
    if result.timed_out:
        status = "timed out after %.1f s and was killed" % result.duration
    elif result.signal is not None:
        status = "killed by signal %d" % result.signal
    else:
        status = "exit code: %d" % result.exit_code
    parts = [status]
    if result.limit and result.limit != "wall":
        parts.append("(it hit its %s limit)" % result.limit)
    if result.truncated:
        parts.append("(output was cut at the broker's limit)")
    text = " ".join(parts)
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        text += "\n--- %s ---\n%s" % (name, trim(stream) if stream else "(empty)")
    return text


def execute_code(code, cwd=None, timeout=60, on_card=ask_at_terminal, socket_path=None):
    """The tool: returns the text the model sees, never raises for the
    broker's answers (the model should read why, not crash the agent)."""
    try:
        with Broker(socket_path=socket_path, channel=True) as broker:
            result = broker.run(code, cwd=cwd, timeout=timeout, on_card=on_card)
    except DidNotRun as e:  # denied, expired, refused, not offered, cancelled
        return "The code did not run (%s): %s" % (e.code, e.message)
    except SetupFailed as e:
        return "The code did not run: its sandbox could not be set up: %s" % e.message
    except BrokerUnavailable as e:
        return "Code execution is unavailable on this computer: %s" % e.message
    except KotobaError as e:
        return "The code did not run (%s): %s" % (e.code, e.message)
    return for_model(result)


def main():
    p = argparse.ArgumentParser(description="Run a snippet as an agent's execute_code tool "
                                "would, and print what the model would see.")
    p.add_argument("file", nargs="?", help="a Python file, or - for stdin")
    p.add_argument("-c", dest="code", help="the code itself")
    p.add_argument("--cwd", help="working directory (default: this one)")
    p.add_argument("--timeout", type=float, default=60, help="seconds (default 60)")
    p.add_argument("--socket", help="the broker's socket (default: as kotoba-brokerd)")
    p.add_argument("--answer", choices=("once", "always", "deny"),
                   help="answer any card with this instead of asking")
    a = p.parse_args()
    if (a.code is None) == (a.file is None):
        p.error("give -c CODE or a FILE")
    if a.code is None:
        with (sys.stdin if a.file == "-" else open(a.file)) as f:
            a.code = f.read()
    on_card = preset_answer(a.answer) if a.answer else ask_at_terminal
    # What the model reads is the snippet's output, raw; what a person reads
    # here goes through show(), like every text this tool puts on a terminal.
    print(show(execute_code(a.code, cwd=a.cwd, timeout=a.timeout, on_card=on_card,
                            socket_path=a.socket), lines=True))


if __name__ == "__main__":
    main()
