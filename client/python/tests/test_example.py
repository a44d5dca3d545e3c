"""examples/agent_tool.py end to end, as a person would run it."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "agent_tool.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))

import agent_tool  # noqa: E402


def tool(b, *args, stdin=None):
    p = subprocess.run(["/usr/bin/python3", EXAMPLE, "--socket", b.socket, "--cwd", b.dir, *args],
                       capture_output=True, text=True, input=stdin, timeout=60,
                       start_new_session=True)  # no controlling terminal
    assert p.returncode == 0, p.stderr
    return p


def test_approved_run_gives_the_model_exit_code_and_streams(broker_proc):
    p = tool(broker_proc, "-c", "import sys\nprint(6*7)\nprint('warn', file=sys.stderr)",
             "--answer", "once")
    assert p.stdout == "exit code: 0\n--- stdout ---\n42\n\n--- stderr ---\nwarn\n\n"
    assert "Approval needed: run this Python snippet" in p.stderr
    assert "Always allow her to run Python" in p.stderr and "(--answer)" in p.stderr


def test_labels_shown_at_their_line(broker_proc):
    p = tool(broker_proc, "-", "--answer", "deny",
             stdin="x = 1\nimport shutil\nshutil.rmtree('/tmp/none-such')\n")
    assert "   3  shutil.rmtree('/tmp/none-such')   <- fs-destroy" in p.stderr
    assert p.stdout.startswith("The code did not run (denied): ")


def test_no_terminal_denies(broker_proc):
    p = tool(broker_proc, "-c", "print(1)")
    assert "no terminal" in p.stderr and "(denied)" in p.stdout


def test_broker_missing_is_a_sentence_for_the_model(workdir):
    out = agent_tool.execute_code("print(1)", socket_path=os.path.join(workdir, "nope"))
    assert out.startswith("Code execution is unavailable on this computer: cannot reach")


def test_trim_keeps_head_and_tail():
    text = "".join("line %04d\n" % i for i in range(2000))
    t = agent_tool.trim(text, 1000)
    assert t.startswith("line 0000") and t.endswith("line 1999\n")
    assert "characters omitted" in t and len(t) < 1100
    assert agent_tool.trim("short") == "short"


def test_timeout_text(broker_proc):
    # The limit leaves a loaded machine time to start python3 and print.
    p = tool(broker_proc, "-c", "import time\nprint('started', flush=True)\ntime.sleep(30)",
             "--timeout", "3", "--answer", "once")
    assert p.stdout.startswith("timed out after 3.")
    assert "started" in p.stdout
