"""Grants that expire and grants scoped to a directory, through the real
broker: the card comes back when a grant has expired or the run is outside
its tree, [gate] grant_ttl caps what an answer may choose, `approvals ls`
and `grant_list` say so, and the audit trail records the expiry once."""
import os
import subprocess
import time

from conftest import BROKERD, wait_for

PLAIN = "print(sum(range(10)))"


def run(b, code=PLAIN, cwd=None, answer=None, **terms):
    """One exec on a fresh connection with a channel; a card is answered
    `answer` (with terms, and an id so the answer is answered).  Returns
    (card or None, the answer's reply or None, end frame)."""
    c = b.client(channel=True)
    c.exec(code, cwd=cwd or b.dir)
    card = reply = None
    while True:
        m = c.recv()
        if m["type"] == "card":
            card = m
            assert answer, "a card was asked: %r" % m["reason"]
            c.send({"type": "answer", "id": 90, "card": m["card"], "choice": answer, **terms})
        elif m.get("id") == 90:
            reply = m
        elif m["type"] in ("exit", "error") and m.get("id") == 1:
            c.close()
            return card, reply, m


def grants(b):
    c = b.client()
    c.send({"type": "grants", "id": 5})
    m = c.recv()
    c.close()
    assert m["type"] == "grant_list", m
    return m["grants"]


def audit_rows(b):
    c = b.client()
    c.send({"type": "audit", "id": 6, "op": "tail", "max": 256})
    m = c.recv()
    c.close()
    return m["rows"]


# A grant must still hold for the run right after it was saved, on any
# machine: lifetimes of a few seconds, never one.  Its end is waited for on
# the clock the broker stamps it with (the wall clock): a grant is expired
# from expires_ms on.
LIFETIME_S = 3


def wait_expired(b):
    ends = [g["expires_ms"] for g in grants(b)]
    wait_for(lambda: time.time() * 1000 >= max(ends) + 1,
               "the wall clock to pass the grants' expiry %s" % ends)


def test_expired_grant_raises_the_card_again(make_broker):
    b = make_broker().start()
    card, reply, end = run(b, answer="always", for_ms=LIFETIME_S * 1000)
    assert card and end["type"] == "exit" and reply["type"] == "ok"
    assert "lasts %ds" % LIFETIME_S in reply["message"], reply
    card, _, end = run(b)
    assert card is None and end["approver"] == "grant"
    wait_expired(b)
    for _ in range(2):
        card, _, end = run(b, answer="deny")
        assert card is not None and "expired" in card["reason"], card
        assert end["code"] == "denied"
    # Recorded once, filed under the exec that found it, chain intact.
    rows = [r for r in audit_rows(b) if r["event"] == "grant"]
    assert len(rows) == 1, rows
    assert rows[0]["decision"] == "expired" and rows[0]["labels"] == "execute_code"
    assert b.kotoba("audit", "verify").returncode == 0
    g, = grants(b)
    assert g["expired"] is True and g["expires_ms"] > g["saved_at_ms"]
    p = b.kotoba("approvals", "ls")
    assert p.returncode == 0 and b"expired" in p.stdout, p.stdout
    # A new `always` replaces it, and a later expiry is recorded again.
    card, _, end = run(b, answer="always", for_ms=LIFETIME_S * 1000)
    assert end["type"] == "exit" and not grants(b)[0]["expired"]
    wait_expired(b)
    assert run(b, answer="deny")[0] is not None
    assert len([r for r in audit_rows(b) if r["event"] == "grant"]) == 2


def test_config_ttl_expires_a_grant_saved_without_for(make_broker):
    b = make_broker(config="[gate]\ngrant_ttl = %ds\n" % LIFETIME_S).start()
    card, reply, end = run(b, answer="always")
    assert card["grant_ttl_ms"] == LIFETIME_S * 1000
    assert card["family_text"]["detail"] == (
        "Any code she writes then runs on this computer without asking, for %ds at most, "
        "or until you revoke it in Settings." % LIFETIME_S)
    assert end["type"] == "exit" and "lasts %ds" % LIFETIME_S in reply["message"]
    assert run(b)[0] is None
    wait_expired(b)
    assert "expired" in run(b, answer="deny")[0]["reason"]


def test_grant_ttl_clamps_the_answer_and_says_so(make_broker):
    b = make_broker(config="[gate]\ngrant_ttl = 1h\n").start()
    card, reply, end = run(b, answer="always", for_ms=8 * 3600 * 1000)
    assert end["type"] == "exit"
    assert "lasts 1h (cut to [gate] grant_ttl from the 8h asked)" in reply["message"], reply
    g, = grants(b)
    assert abs(g["expires_ms"] - g["saved_at_ms"] - 3600 * 1000) < 2000
    assert g["expired"] is False and "scope" not in g


def test_shorter_choice_under_ttl_stands(make_broker):
    b = make_broker(config="[gate]\ngrant_ttl = 1h\n").start()
    _, reply, _ = run(b, answer="always", for_ms=60000)
    assert "lasts 1m and covers runs in any directory" in reply["message"], reply
    g, = grants(b)
    assert abs(g["expires_ms"] - g["saved_at_ms"] - 60000) < 2000


def test_no_ttl_no_for_lasts_until_revoked(broker):
    _, reply, _ = run(broker, answer="always")
    assert "lasts until revoked" in reply["message"]
    g, = grants(broker)
    assert "expires_ms" not in g and "expired" not in g and "scope" not in g


def make_tree(base):
    proj = os.path.join(base, "proj")
    sub = os.path.join(proj, "sub")
    sibling = os.path.join(base, "sibling")
    for d in (sub, sibling):
        os.makedirs(d)
        os.chmod(d, 0o755)
    os.chmod(proj, 0o755)
    os.symlink(sibling, os.path.join(proj, "out"))
    return proj, sub, sibling


def test_scoped_grant_covers_only_its_tree(make_broker):
    b = make_broker().start()
    proj, sub, sibling = make_tree(b.dir)
    # Given with `..` and a doubled slash: stored as the real path.
    given = os.path.join(sub, "..") + "/"
    card, reply, end = run(b, cwd=proj, answer="always", scope=given)
    assert end["type"] == "exit" and ("covers runs in " + proj) in reply["message"], reply
    g, = grants(b)
    assert g["scope"] == proj
    for inside in (proj, sub, os.path.join(sub, "..")):
        card, _, end = run(b, cwd=inside)
        assert card is None and end["approver"] == "grant", inside
    # A sibling, a `..` walk out of the tree, a symbolic link inside it that
    # leads out, and a directory whose name only starts like the scope's.
    lookalike = proj + "2"
    os.mkdir(lookalike)
    os.chmod(lookalike, 0o755)
    for outside in (sibling, os.path.join(proj, "..", "sibling"), os.path.join(proj, "out"),
                    lookalike, b.dir):
        card, _, end = run(b, cwd=outside, answer="deny")
        assert card is not None and "inside its directory" in card["reason"], outside
        assert end["code"] == "denied"
    p = b.kotoba("approvals", "ls")
    assert proj.encode() in p.stdout, p.stdout


def test_scoped_grant_without_a_channel(make_broker):
    """Without a channel the grant is not what decides: an unlabelled
    snippet runs unattended wherever it is, a labelled one is refused."""
    b = make_broker().start()
    proj, sub, sibling = make_tree(b.dir)
    run(b, cwd=proj, answer="always", scope=proj)
    c = b.client(channel=False)
    c.exec("import shutil\nshutil.rmtree('/nonexistent-kotoba-test')\n", cwd=sibling)
    end = c.until_end()["end"]
    assert end["type"] == "error" and end["code"] == "refused"
    c.close()


def answer_error(b, **fields):
    """Sends a malformed answer to an open card: the error, and whether the
    card was still open after it (a good answer then runs the snippet)."""
    c = b.client(channel=True)
    c.exec(PLAIN, cwd=b.dir)
    card = c.recv()
    assert card["type"] == "card"
    c.send({"type": "answer", "id": 91, "card": card["card"], **fields})
    err = c.recv()
    c.send({"type": "answer", "card": card["card"], "choice": "once"})
    end = c.until_end()["end"]
    c.close()
    return err, end["type"] == "exit"


def test_bad_answer_fields_are_bad_field_naming_them(broker):
    cases = [
        ({"choice": "once", "for_ms": 1000}, "for_ms"),
        ({"choice": "deny", "scope": "/tmp"}, "scope"),
        ({"choice": "always", "for_ms": 0}, "for_ms"),
        ({"choice": "always", "for_ms": "8h"}, "for_ms"),
        ({"choice": "always", "for_ms": -5}, "for_ms"),
        ({"choice": "always", "scope": "relative/dir"}, "scope"),
        ({"choice": "always", "scope": ""}, "scope"),
        ({"choice": "always", "scope": 7}, "scope"),
        ({"choice": "always", "scope": "/nonexistent-kotoba-scope"}, "scope"),
        ({"choice": "always", "scope": "/etc/hostname"}, "scope"),
    ]
    for fields, name in cases:
        err, still_open = answer_error(broker, **fields)
        assert err["type"] == "error" and err["code"] == "bad-field", (fields, err)
        assert err.get("id") == 91 and name in err["message"], (fields, err)
        assert still_open, fields
    assert grants(broker) == []


def test_bad_grant_ttl_is_file_and_line(tmpdir_k):
    for value, why in (("8 hours", "not valid"), ("367d", "out of range"), ("-1h", "not valid")):
        path = os.path.join(tmpdir_k, "broker.conf")
        with open(path, "w") as f:
            f.write("[gate]\n\ngrant_ttl = %s\n" % value)
        p = subprocess.run([BROKERD, "--check-config", "--config", path], capture_output=True)
        err = p.stderr.decode()
        assert p.returncode != 0 and ("%s:3: [gate] grant_ttl" % path) in err, err
        assert why in err, err


# ---- the CLI -----------------------------------------------------------------

def test_cli_answer_always_for_and_scope(make_broker):
    b = make_broker(config="[gate]\ngrant_ttl = 1h\n").start()
    proj, sub, sibling = make_tree(b.dir)
    p = b.kotoba("run", "-c", PLAIN, "--cwd", sub, "--answer", "always", "--for", "8h",
                 "--scope", os.path.join(sub, ".."))
    assert p.returncode == 0 and p.stdout == b"45\n", p.stderr
    assert b"lasts 1h, the most the broker allows ([gate] grant_ttl), not the 8h asked" \
        in p.stderr, p.stderr
    g, = grants(b)
    assert g["scope"] == proj and abs(g["expires_ms"] - g["saved_at_ms"] - 3600000) < 2000
    # Inside the tree: no card (no --answer, no terminal: a card would be denied).
    p = b.kotoba("run", "-c", PLAIN, "--cwd", sub)
    assert p.returncode == 0 and p.stdout == b"45\n", p.stderr
    p = b.kotoba("run", "-c", PLAIN, "--cwd", sibling)
    assert p.returncode == 126 and b"answering deny" in p.stderr, p.stderr
    p = b.kotoba("approvals", "ls")
    out = p.stdout.decode()
    assert "EXPIRES" in out and "COVERS RUNS IN" in out and proj in out, out
    assert "expired" not in out and "until revoked" not in out, out


def test_cli_expired_grant_shows_in_approvals_ls(make_broker):
    b = make_broker().start()
    p = b.kotoba("run", "-c", PLAIN, "--answer", "always", "--for", "%ds" % LIFETIME_S)
    assert p.returncode == 0, p.stderr
    assert b.kotoba("run", "-c", PLAIN).returncode == 0
    wait_expired(b)
    p = b.kotoba("run", "-c", PLAIN)
    assert p.returncode == 126, p.stderr
    out = b.kotoba("approvals", "ls").stdout.decode()
    assert "expired 2" in out and "any directory" in out, out
    tail = b.kotoba("audit", "tail").stdout.decode()
    assert "grant" in tail and "expired" in tail, tail


def test_cli_terms_need_always(broker):
    for args, why in ((["--answer", "once", "--for", "1h"], "--for and --scope go with"),
                      (["--answer", "deny", "--scope", "/"], "--for and --scope go with"),
                      (["--for", "8 hours"], "--for takes a duration"),
                      (["--for", "0"], "--for takes a duration"),
                      (["--for", "1w"], "--for takes a duration"),
                      (["--scope", "/nonexistent-kotoba-scope"], "--scope")):
        p = broker.kotoba("run", "-c", PLAIN, *args)
        assert p.returncode == 64 and why.encode() in p.stderr, (args, p.stderr)
