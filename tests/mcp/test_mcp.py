"""`kotoba mcp` driven by the official MCP TypeScript SDK (driver.mjs) over
stdio, against a real broker; malformed input as raw lines."""
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from conftest import BUILD, KOTOBA, Broker, make_broker, tmpdir_k  # noqa: E402,F401
from test_escalation import WRITE  # noqa: E402
from test_receipt import home  # noqa: E402,F401  (fixture)

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "driver.mjs")
# Where the build put node_modules (the sanitizer build's run uses the
# ordinary build's).
NODE_DIR = os.environ.get("KOTOBA_MCP_NODE", os.path.join(BUILD, "mcp"))


def drive(broker, cwd, answer, steps, escalation=None):
    # Node resolves packages from the script's directory: run a copy there.
    script = os.path.join(NODE_DIR, "driver.mjs")
    with open(DRIVER) as src, open(script, "w") as dst:
        dst.write(src.read())
    p = subprocess.run(["node", script, KOTOBA, broker.socket, cwd,
                        json.dumps({"answer": answer, "escalation": escalation,
                                    "steps": steps})],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return json.loads(p.stdout)


@pytest.fixture
def broker(tmpdir_k):
    b = Broker(tmpdir_k).start()
    yield b
    b.stop()


def text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


def test_list_tools(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, None, [{"list": True}])
    assert out["server"]["name"] == "kotoba"
    (tool,) = out["steps"][0]["tools"]
    assert tool["name"] == "execute_code"
    assert tool["inputSchema"]["required"] == ["code"]
    assert tool["annotations"]["destructiveHint"] is True
    assert "stdout" in tool["outputSchema"]["properties"]


def test_plain_run_without_elicitation(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, None, [{"code": "print(6*7)"}])
    r = out["steps"][0]
    assert not r.get("isError")
    assert text(r) == "42\n"
    assert r["structuredContent"]["approver"] == "unattended"
    assert r["structuredContent"]["exit"] == 0


def test_labelled_refused_without_elicitation(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, None, [{"code": "import os\nos.system('id')"}])
    r = out["steps"][0]
    assert r["isError"] is True
    assert "shell-spawn" in text(r)
    assert r["structuredContent"]["error"]["code"] == "refused"
    assert out["elicitations"] == []


def test_elicitation_once(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, "once", [{"code": "print('approved')"}])
    r = out["steps"][0]
    assert text(r) == "approved\n", r
    assert r["structuredContent"]["approver"] == "user"
    (e,) = out["elicitations"]
    # The whole card: the snippet itself and its options.
    assert "print('approved')" in e["message"]
    assert e["schema"]["properties"]["answer"]["enum"] == ["once", "always", "deny"]


def test_operator_withholds_elicitation(make_broker, tmpdir_k):
    """[mcp] elicitation = no: a client that declares elicitation is served
    as one without a channel.  The same client against the default broker
    is the control: there the labelled snippet brings a card."""
    b = make_broker(config="[mcp]\nelicitation = no\n").start()
    out = drive(b, tmpdir_k, "once", [{"code": "print(6*7)"},
                                      {"code": "import os\nos.system('id')"}])
    plain, labelled = out["steps"]
    assert text(plain) == "42\n" and plain["structuredContent"]["approver"] == "unattended"
    assert labelled["isError"] is True
    assert labelled["structuredContent"]["error"]["code"] == "refused"
    assert "[mcp] elicitation = no" in text(labelled) and "shell-spawn" in text(labelled)
    assert out["elicitations"] == []
    assert "the MCP front and [mcp] elicitation = no" in b.read_log()

    control = make_broker().start()
    out = drive(control, tmpdir_k, "deny", [{"code": "import os\nos.system('id')"}])
    assert len(out["elicitations"]) == 1


def test_elicitation_message_is_escaped_like_the_terminal_card(broker, tmpdir_k):
    hostile = "x = 1  # \x1b[2J\x1b]0;t\x07\u202e\u200b\u009b1A\nprint('shown')"
    out = drive(broker, tmpdir_k, "deny", [{"code": hostile}])
    (e,) = out["elicitations"]
    msg = e["message"]
    assert not any(c in msg for c in "\x1b\x07\u202e\u200b\u009b"), msg
    assert "\\x1b" in msg and "<U+202E>" in msg and "print('shown')" in msg


def test_elicitation_always_saves_a_grant(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, "always", [{"code": "print(1)"}, {"code": "print(2)"}])
    first, second = out["steps"]
    assert text(first) == "1\n" and text(second) == "2\n"
    assert second["structuredContent"]["approver"] == "grant"
    assert len(out["elicitations"]) == 1  # the grant answered the second


@pytest.mark.parametrize("again", ["rerun", "leave"])
def test_escalation_card_through_elicitation(broker, home, again):
    """Under a grant, a write the unattended profile refuses: the
    escalation card comes as an elicitation with the receipt; rerun runs it
    again under the approved profile, leave does not."""
    out = drive(broker, home, "always", [{"code": "print(1)"}, {"code": WRITE}],
                escalation=again)
    r = out["steps"][1]
    first, card = out["elicitations"]
    assert card["schema"]["properties"]["answer"]["enum"] == ["rerun", "leave"]
    assert "notes.md" in card["message"]
    assert r["structuredContent"]["escalation"] == ("rerun" if again == "rerun" else "left")
    if again == "rerun":
        assert text(r).startswith("wrote"), r
        assert r["structuredContent"]["approver"] == "user"
        assert os.path.exists(os.path.join(home, "notes.md"))
    else:
        assert text(r).startswith("refused"), r
        assert not os.path.exists(os.path.join(home, "notes.md"))


@pytest.mark.parametrize("answer", ["deny", "decline"])
def test_elicitation_deny(broker, tmpdir_k, answer):
    out = drive(broker, tmpdir_k, answer, [{"code": "print('never')"}])
    r = out["steps"][0]
    assert r["isError"] is True
    assert "never" not in r["structuredContent"]["stdout"]
    assert r["structuredContent"]["error"]["code"] == "denied"


def wait_cancelled_exit(broker):
    """Until the audit trail has the run's exit row saying cancelled (the
    broker killed it); the deadline is only a backstop."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tail = broker.kotoba("audit", "tail").stdout.decode(errors="replace")
        if any(" exit " in row and "cancelled" in row for row in tail.splitlines()):
            return
        time.sleep(0.1)
    raise AssertionError("no exit row saying cancelled in the audit trail:\n" + tail)


def test_cancel_stops_the_run(broker, tmpdir_k):
    out = drive(broker, tmpdir_k, None, [
        {"code": "import time\nprint('started', flush=True)\ntime.sleep(600)",
         "cancel_on_progress": True},
        {"code": "print('after')"}])
    assert "cancelled by the test" in out["steps"][0]["thrown"]
    assert text(out["steps"][1]) == "after\n"  # the server serves on
    wait_cancelled_exit(broker)


def test_eof_stops_the_run(broker, tmpdir_k):
    p = subprocess.Popen([KOTOBA, "mcp", "--socket", broker.socket, "--cwd", tmpdir_k],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute_code", "arguments": {"code": "import time\ntime.sleep(600)"},
        "_meta": {"progressToken": 7}}}) + "\n")
    p.stdin.flush()
    # A progress notification: the run is going on.
    assert json.loads(p.stdout.readline())["method"] == "notifications/progress"
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    wait_cancelled_exit(broker)


def test_stopped_broker_is_a_tool_error(broker, tmpdir_k):
    broker.stop()
    out = drive(broker, tmpdir_k, None, [{"list": True}, {"code": "print(1)"}])
    r = out["steps"][1]
    assert r["isError"] is True
    assert "cannot reach the broker" in text(r)


def test_malformed_input(broker, tmpdir_k):
    lines = ["not json", json.dumps([1, 2]),
             json.dumps({"jsonrpc": "2.0", "id": 1, "method": "no/such"}),
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "execute_code", "arguments": {"code": 5}}}),
             "x" * (16 * 1024 * 1024 + 10),
             json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})]
    p = subprocess.run([KOTOBA, "mcp", "--socket", broker.socket, "--cwd", tmpdir_k],
                       input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Sanitizer" not in p.stderr, p.stderr
    got = [json.loads(x) for x in p.stdout.splitlines()]
    assert [m.get("error", {}).get("code") for m in got] == \
        [-32700, -32600, -32601, -32602, -32600, None]
    assert "arguments.code" in got[3]["error"]["message"]
    assert "longer than" in got[4]["error"]["message"]
    assert got[5] == {"jsonrpc": "2.0", "id": 3, "result": {}}


def raw(socket, cwd, *msgs):
    """Lines to `kotoba mcp`, its answers parsed."""
    p = subprocess.run([KOTOBA, "mcp", "--socket", socket, "--cwd", cwd],
                       input="".join(json.dumps(m) + "\n" for m in msgs),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Sanitizer" not in p.stderr, p.stderr
    return [json.loads(x) for x in p.stdout.splitlines()]


def init(id, version):
    return {"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}


def test_version_negotiation(broker, tmpdir_k):
    got = raw(broker.socket, tmpdir_k, init(1, "2025-06-18"), init(2, "2025-11-25"),
              init(3, "1999-01-01"))
    assert [g["result"]["protocolVersion"] for g in got] == \
        ["2025-06-18", "2025-11-25", "2025-11-25"]


def test_no_tool_in_mode_none(make_broker, tmpdir_k):
    b = make_broker(extra_args=["--sandbox", "none"]).start()
    try:
        (got,) = raw(b.socket, tmpdir_k, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    finally:
        b.stop()
    assert got["result"] == {"tools": []}


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5f6a3a60000000049454e44ae426082")


def test_output_files_as_image_content(broker, tmpdir_k):
    code = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "with open(os.path.join(d, 'plot.dat'), 'wb') as f:\n"  # a PNG by its bytes
            "    f.write(bytes.fromhex(%r))\n"
            "with open(os.path.join(d, 'table.csv'), 'w') as f:\n"
            "    f.write('a,b\\n')\n" % PNG.hex())
    out = drive(broker, tmpdir_k, "once", [{"code": code}])
    r = out["steps"][0]
    assert not r.get("isError"), r
    images = [c for c in r["content"] if c["type"] == "image"]
    assert images == [{"type": "image", "mimeType": "image/png",
                       "data": __import__("base64").b64encode(PNG).decode()}]
    assert "table.csv" in text(r) and "plot.dat" not in text(r)


def test_plt_show_comes_back_as_image_content(broker, tmpdir_k):
    code = ("import matplotlib.pyplot as plt\n"
            "plt.plot([1, 3, 2])\n"
            "plt.show()\n")
    out = drive(broker, tmpdir_k, "once", [{"code": code}])
    r = out["steps"][0]
    assert not r.get("isError"), r
    images = [c for c in r["content"] if c["type"] == "image"]
    assert [i["mimeType"] for i in images] == ["image/png"], r
    data = __import__("base64").b64decode(images[0]["data"])
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), data[:16]


INSPECTOR = os.path.join(NODE_DIR, "node_modules", ".bin", "mcp-inspector")


def inspector(broker, *args):
    p = subprocess.run([INSPECTOR, "--cli", KOTOBA, "mcp", "--socket", broker.socket,
                        *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    return json.loads(p.stdout)


def node_major():
    out = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    return int(out.strip().lstrip("v").split(".")[0])


@pytest.mark.skipif(node_major() < 20, reason="the MCP Inspector 2.12 needs node 20 or later "
                    "(its package asks for 22.19; it runs on 20); Debian 12's nodejs is 18")
def test_mcp_inspector_cli_smoke(broker, tmpdir_k):
    """The MCP Inspector's CLI mode (pinned in package-lock.json) as a
    second client: it lists the tool and calls it."""
    (tool,) = inspector(broker, "--method", "tools/list")["tools"]
    assert tool["name"] == "execute_code"
    r = inspector(broker, "--method", "tools/call", "--tool-name", "execute_code",
                  "--tool-arg", "code=print(6*7)", "--tool-arg", "cwd=%s" % tmpdir_k)
    assert r["content"] == [{"type": "text", "text": "42\n"}] and r["isError"] is False
    assert r["structuredContent"]["approver"] == "unattended"

