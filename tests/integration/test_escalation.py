"""The escalation card (PROTOCOL.md, "The escalation card"), against the real
broker, worker and kernel: a run under the execute_code grant that the
sandbox stopped is offered to a person once more, and runs again under the
approved profile only on their answer."""
import os
import time

import msgpack
import pytest

from test_audit import copy_of, owner_edit, rechain, verify
from test_receipt import PRELUDE, home  # noqa: F401  (fixture)

# Writes notes.md in the working directory, which the unattended profile
# refuses (the user owns the directory: only the sandbox can refuse it),
# and starts /bin/true, which the exec gate refuses: a refusal a witness
# outside the snippet sees, as an escalation card needs.
ONLY_WRITE = PRELUDE + ("try:\n"
                        "    o('notes.md', 'a' + 't').write('done\\n')\n"
                        "    print('wrote')\n"
                        "except PermissionError:\n"
                        "    print('refused')\n")
WRITE_BODY = ONLY_WRITE + ("try:\n"
                           "    getattr(m('sub' + 'process'), 'ca' + 'll')(['/bin/true'])\n"
                           "except PermissionError:\n"
                           "    pass\n")
# ... and fails when notes.md is not there: only a run that failed brings
# an escalation card (one that succeeded handled what was refused).
FAILS = ("try:\n"
         "    o('notes.md').close()\n"
         "except OSError:\n"
         "    raise SystemExit(3)\n")
WRITE = WRITE_BODY + FAILS
# Removes notes.md, which the sandbox refuses too, but only the snippet's
# own interpreter reports a remove (no witness outside it sees one).
ONLY_DELETE = PRELUDE + ("p = getattr(m('path' + 'lib'), 'Path')('notes.md')\n"
                         "getattr(p, 'unl' + 'ink')()\n")


# What the first run of WRITE refused, as its exit lists it, in the order
# the worker's witnesses saw them.
def stopped(home):
    return [("create", os.path.join(home, "notes.md")), ("exec", "/bin/true")]

HARMLESS = "print(6 * 7)\n"


def hello(c, escalate=True):
    msg = {"type": "hello", "version": 1, "channel": True, "client": "pytest"}
    if escalate:
        msg["escalate"] = True
    c.send(msg)
    assert c.recv()["type"] == "welcome"


def save_grant(b, cwd):
    c = b.client(channel=True)
    c.exec(HARMLESS, cwd=cwd)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                     "choice": "always"}))
    assert out["end"]["type"] == "exit", out
    c.close()


def frames_until(c, id, stop):
    """Frames of request id (and any without one) up to the first that
    stop(frame) accepts, which is last."""
    got = []
    while True:
        m = c.recv()
        if m.get("id", id) != id and m["type"] != "ok":
            continue
        got.append(m)
        if stop(m):
            return got


def first_run(b, cwd, code=WRITE, escalate=True, id=1):
    """A grant run of code on a connection that can show escalation cards:
    its frames up to its exit, and the card that follows (or None)."""
    c = b.client(hello=False)
    hello(c, escalate)
    c.exec(code, id=id, cwd=cwd)
    frames = frames_until(c, id, lambda m: m["type"] in ("exit", "error"))
    end = frames[-1]
    assert end["type"] == "exit" and end["approver"] == "grant", frames
    card = None
    if end.get("escalate"):
        card = c.recv()
    return c, frames, end, card


def audit_rows(b, max=20):
    c = b.client()
    c.send({"type": "audit", "id": 9, "op": "tail", "max": max})
    rows = c.recv()
    c.close()
    assert rows["type"] == "audit_rows", rows
    return rows["rows"]


def ends_without_rerun(b, c, card, home, code, decision, words):
    """The exec's end after an escalation card that ran nothing again: an
    error `code` saying `words`, no notes.md, and the card's audit rows
    (card, then `decision`) linked to the first run's exit."""
    e = frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))[-1]
    assert e["type"] == "error" and e["code"] == code and words in e["message"], e
    assert not os.path.exists(os.path.join(home, "notes.md"))
    rows = audit_rows(b)
    assert [r["decision"] for r in rows if r.get("after") == card["after_seq"]] == \
        ["card", decision], rows


def test_a_stopped_grant_run_is_offered_and_reruns_approved(broker, home):
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home)
    out = b"".join(m["data"] for m in frames if m["type"] == "output")
    assert out == b"refused\n" and not os.path.exists(os.path.join(home, "notes.md"))
    assert end["code"] == 3, end
    assert end["escalate"] is True and end["profile"] == "unattended", end
    assert [(e["kind"], e["target"]) for e in end["blocked"]] == stopped(home), end
    # The card: the whole snippet, the first run's receipt, its audit row.
    assert card["type"] == "card" and card["kind"] == "escalate" and card["id"] == 1, card
    assert card["snippet"] == WRITE and card["options"] == ["rerun", "leave"], card
    assert card["blocked"] == end["blocked"] and card["blocked_total"] == end["blocked_total"]
    assert "already ran once" in card["reason"] and "stays done" in card["reason"], card
    # the witness and the kind, never the snippet's own text
    assert "seen by the worker (the first: create, refused by the landlock" in card["reason"]
    assert "/bin/true" not in card["reason"], card
    assert card["cwd"] == home and "family" not in card, card
    # Nothing runs again before the answer.
    c.sock.settimeout(0.5)
    with pytest.raises(OSError):
        c.recv()
    c.sock.settimeout(30)
    c.send({"type": "answer", "id": 5, "card": card["card"], "choice": "rerun"})
    frames = frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))
    assert frames[0]["type"] == "ok" and "rerun" in frames[0]["message"], frames
    started = [m for m in frames if m["type"] == "started"]
    assert started == [{"type": "started", "id": 1, "profile": "approved",
                        "approver": "user"}], frames
    again = frames[-1]
    assert again["type"] == "exit" and again["code"] == 0 and "escalate" not in again, again
    assert b"".join(m["data"] for m in frames if m["type"] == "output") == b"wrote\n"
    with open(os.path.join(home, "notes.md")) as f:
        assert f.read() == "done\n"
    c.close()
    # The audit trail links both runs to the first run's exit row.
    rows = audit_rows(broker)
    first_exit = [r for r in rows if r["seq"] == card["after_seq"]]
    assert first_exit and first_exit[0]["event"] == "exit" and \
        first_exit[0]["approver"] == "grant" and first_exit[0]["blocked_total"] == 2, rows
    linked = [(r["event"], r["decision"], r["approver"], r["profile"])
              for r in rows if r.get("after") == card["after_seq"]]
    assert linked == [("decision", "card", "", ""), ("decision", "ran", "user", "approved"),
                      ("exit", "ran", "user", "approved")], rows
    assert all("after" not in r for r in rows if r["seq"] <= card["after_seq"]), rows


def test_leave_runs_nothing_again(broker, home):
    save_grant(broker, home)
    c, _, end, card = first_run(broker, home)
    c.send({"type": "answer", "card": card["card"], "choice": "leave"})
    ends_without_rerun(broker, c, card, home, "denied", "denied", "did not run again")


def test_a_run_card_answer_on_an_escalation_card_is_refused(broker, home):
    save_grant(broker, home)
    c, _, _, card = first_run(broker, home)
    for bad in ({"choice": "once"}, {"choice": "always"}, {"choice": "deny"},
                {"choice": "always", "for_ms": 1000}):
        c.send(dict({"type": "answer", "id": 3, "card": card["card"]}, **bad))
        e = c.recv()
        assert e["type"] == "error" and e["code"] == "bad-field" and e["id"] == 3, (bad, e)
    # Still open: the right answer is taken.
    c.send({"type": "answer", "card": card["card"], "choice": "leave"})
    assert frames_until(c, 1, lambda m: m["type"] == "error")[-1]["code"] == "denied"


def test_rerun_on_a_run_card_is_refused(broker, home):
    c = broker.client(hello=False)
    hello(c)
    c.exec(HARMLESS, cwd=home)
    card = c.recv()
    assert card["type"] == "card" and "kind" not in card, card
    c.send({"type": "answer", "id": 3, "card": card["card"], "choice": "rerun"})
    e = c.recv()
    assert e["type"] == "error" and e["code"] == "bad-field" and "once" in e["message"], e
    c.send({"type": "answer", "card": card["card"], "choice": "deny"})
    assert c.until_end()["end"]["code"] == "denied"


def test_no_card_when_nothing_was_stopped(broker, home):
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home, code=HARMLESS)
    assert card is None and "escalate" not in end and "blocked" not in end, frames
    c.send({"type": "exec", "id": 2, "code": HARMLESS, "cwd": home})
    assert c.until_end(id=2)["end"]["type"] == "exit"  # nothing else was in between


def test_no_card_for_a_client_that_cannot_show_one(broker, home):
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home, escalate=False)
    assert card is None and "escalate" not in end and end["blocked_total"] == 2, end


def test_no_card_for_what_only_the_snippet_reported(broker, home):
    # The interpreter's report of the refused remove is the snippet's word:
    # it is in the receipt, and brings no card, though the run failed.
    with open(os.path.join(home, "notes.md"), "w") as f:
        f.write("kept\n")
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home, code=ONLY_DELETE)
    assert card is None and "escalate" not in end and end["code"] != 0, end
    assert [(e["kind"], e["seen_by"]) for e in end["blocked"]] == [("delete", "python")], end
    assert os.path.exists(os.path.join(home, "notes.md"))


def test_a_forged_receipt_line_brings_no_card(broker, home):
    # A snippet that refuses nothing writes a line of its own to the
    # receipt pipe: the worker keeps it as the interpreter's report (the
    # profile would refuse a bind), and no card asks for the person's
    # permissions on its word.
    save_grant(broker, home)
    forge = "import os\nos.write(4, b'bind\\t127.0.0.1:8080\\n')\nprint('fine')\n"
    c, frames, end, card = first_run(broker, home, code=forge)
    assert card is None and "escalate" not in end, end
    assert [(e["kind"], e["target"], e["seen_by"]) for e in end["blocked"]] == \
        [("bind", "127.0.0.1:8080", "python")], end
    c.send({"type": "exec", "id": 2, "code": HARMLESS, "cwd": home})
    assert c.until_end(id=2)["end"]["type"] == "exit"  # nothing else was in between


def test_no_card_for_a_snippet_a_person_approved(broker, home):
    # No grant: the person reads it on a run card and answers once.  The
    # same write then succeeds, and nothing is offered after it.
    c = broker.client(hello=False)
    hello(c)
    c.exec(WRITE, cwd=home)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                     "choice": "once"}))
    assert out["end"]["approver"] == "user" and "escalate" not in out["end"], out["end"]
    assert out["stdout"] == b"wrote\n"


def test_no_card_under_escalate_never(make_broker, home):
    b = make_broker(config="[gate]\nescalate = never\n").start()
    save_grant(b, home)
    c, frames, end, card = first_run(b, home)
    assert card is None and "escalate" not in end and end["blocked_total"] == 2, end


def test_a_card_nobody_answers_expires(make_broker, home):
    b = make_broker(config="[gate]\ncard_timeout = 1s\n").start()
    save_grant(b, home)
    c, _, _, card = first_run(b, home)
    ends_without_rerun(b, c, card, home, "expired", "expired", "escalation card")


def test_cancel_and_half_close_withdraw_it(broker, home):
    save_grant(broker, home)
    c, _, _, card = first_run(broker, home)
    c.send({"type": "cancel", "id": 1})
    ends_without_rerun(broker, c, card, home, "cancelled", "cancelled", "did not run again")
    # The id is free again once the exec has ended.
    c.exec(HARMLESS, id=1, cwd=home)
    assert c.until_end()["end"]["type"] == "exit"
    c.close()
    # A client that shut its sending side can answer nothing: no card.
    c = broker.client(hello=False)
    hello(c)
    c.exec(WRITE, cwd=home)
    import socket
    c.sock.shutdown(socket.SHUT_WR)
    end = frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))[-1]
    assert end["type"] == "exit" and "escalate" not in end, end
    assert c.closed()


def test_the_exec_id_stays_in_use_while_the_card_waits(broker, home):
    save_grant(broker, home)
    c, _, _, card = first_run(broker, home)
    c.exec(HARMLESS, id=1, cwd=home)
    e = c.recv()
    assert e["type"] == "error" and e["code"] == "id-in-use" and e["dup_id"] == 1, e
    c.send({"type": "answer", "card": card["card"], "choice": "leave"})
    assert frames_until(c, 1, lambda m: m["type"] == "error")[-1]["code"] == "denied"


def test_the_links_are_in_the_hash_chain(broker, home, tmpdir_k):
    save_grant(broker, home)
    c, _, _, card = first_run(broker, home)
    c.send({"type": "answer", "card": card["card"], "choice": "rerun"})
    assert frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))[-1]["type"] == "exit"
    c.close()
    v = broker.client()
    v.send({"type": "audit", "id": 4, "op": "verify"})
    assert v.recv()["type"] == "ok"
    # kotoba audit verify --db and the shell procedure agree on a copy...
    path = copy_of(broker, tmpdir_k)
    assert verify(path)[0] == 0
    # ... and both see a link moved to another row.
    owner_edit(path, "update audit set after_seq = after_seq - 1 where after_seq != 0")
    rc, found, _ = verify(path)
    assert rc == 1 and ("chain", str(card["after_seq"] + 1)) in found, found
    # Recomputed by AUDIT.md alone, fields 19 and 20 included, it verifies.
    rechain(path, 1)
    assert verify(path)[0] == 0


def test_an_escalation_card_vector_decodes_as_sent(broker):
    """The broker refuses a card from a client like any broker-only frame,
    even one of the new kind (no state confusion from its fields)."""
    c = broker.client(channel=True)
    c.send({"type": "card", "id": 1, "kind": "escalate", "card": "c-1", "snippet": "x",
            "labels": [], "options": ["rerun", "leave"], "expires_ms": 1, "reason": "r",
            "blocked": [], "blocked_total": 1, "after_seq": 1})
    assert c.recv()["code"] == "bad-state"
    assert msgpack  # the raw client packs with python3-msgpack


@pytest.mark.parametrize("delay", [0.0, 0.02])
def test_a_cancel_after_the_snippet_ended_gets_no_card(broker, home, delay):
    # The snippet ends, and its scratch (20,000 files) takes the worker a
    # while to remove: a cancel sent then comes after the end.  The exec
    # ends with its exit (or `cancelled`), never with a card.
    save_grant(broker, home)
    code = WRITE_BODY + ("d = os.environ['TMPDIR']\n"
                         "for i in range(20000):\n"
                         "    o(os.path.join(d, 'f%d' % i), 'w' + 't').close()\n"
                         "print('last', flush=True)\n") + FAILS
    c = broker.client(hello=False)
    hello(c)
    c.exec(code, cwd=home)
    while True:
        m = c.recv()
        if m["type"] == "output" and b"last" in m["data"]:
            break
    time.sleep(delay)
    c.send({"type": "cancel", "id": 1})
    end = frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))[-1]
    assert (end["type"] == "exit" and "escalate" not in end) or \
        (end["type"] == "error" and end["code"] == "cancelled"), end
    c.sock.settimeout(0.5)
    with pytest.raises(OSError):
        print("after the end:", c.recv())


# sqlite3 opens its database in C: the worker's write witness sees the
# refusal, so the failed run brings the card, and `rerun` writes the file.
SQLITE = PRELUDE + ("sq = m('sql' + 'ite3')\n"
                    "db = getattr(sq, 'conn' + 'ect')('results.db')\n"
                    "db.execute('create table t (x)')\n"
                    "db.commit()\n"
                    "print('saved')\n")


def test_a_write_refused_in_c_brings_the_card_and_rerun_writes_it(broker, home):
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home, code=SQLITE)
    assert end["code"] != 0 and not os.path.exists(os.path.join(home, "results.db")), end
    assert [(e["kind"], e["target"], e["seen_by"]) for e in end["blocked"]] == \
        [("create", os.path.join(home, "results.db"), "worker")], end
    assert card is not None and card["kind"] == "escalate", end
    c.send({"type": "answer", "card": card["card"], "choice": "rerun"})
    frames = frames_until(c, 1, lambda m: m["type"] in ("exit", "error"))
    again = frames[-1]
    assert again["type"] == "exit" and again["code"] == 0, frames
    assert b"".join(m["data"] for m in frames if m["type"] == "output") == b"saved\n"
    assert os.path.getsize(os.path.join(home, "results.db")) > 0


def test_a_run_that_succeeded_brings_no_card(broker, home):
    # The same refusals, handled: the run exits 0, its receipt lists them,
    # and nothing is offered again.
    save_grant(broker, home)
    c, frames, end, card = first_run(broker, home, code=WRITE_BODY)
    assert end["code"] == 0 and card is None and "escalate" not in end, end
    assert [(e["kind"], e["target"]) for e in end["blocked"]] == stopped(home), end
    c.exec(HARMLESS, id=2, cwd=home)
    assert c.until_end(id=2)["end"]["type"] == "exit"  # nothing else was in between
    assert "the run succeeded" in broker.read_log()
