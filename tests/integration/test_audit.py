"""The audit trail against whoever later owns its file (AUDIT.md).

A real broker writes a sealed trail; each test tampers with a copy of its
database as the file's owner could (dropping the append-only triggers
first), then checks the copy with `kotoba audit verify --db` and with the
shipped shell procedure (dist/kotoba-audit-verify.sh: sqlite3 and openssl
only, no kotoba code).  Both must fail, and name the same rows; on an
intact copy both must pass.  The key or the broker's log is given where
the case needs it, and each case also shows what is NOT caught without it.
"""
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess

import pytest

from conftest import BROKERD, KOTOBA

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "dist", "kotoba-audit-verify.sh")
ZERO = "0" * 64
PROBLEM = re.compile(r"^(chain|seal|anchor) at row (-?\d+):", re.M)
CONFIG = "[audit]\nanchor_rows = 4\n"


def key_init(b):
    p = subprocess.run([BROKERD, "--audit-key-init", "--state-dir", b.state,
                        "--socket", b.socket, "--config", os.path.join(b.dir, "broker.conf")],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    key = p.stdout.decode().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", key), p.stdout
    assert key.encode() not in p.stderr
    return key, p


@pytest.fixture
def trail(make_broker):
    """A stopped broker whose sealed trail holds decisions, exits and
    refusals, and whose log holds anchors; yields (broker, key)."""
    b = make_broker(config=CONFIG)
    key, _ = key_init(b)
    b.start()
    for i in range(5):
        assert b.run_json("print(%d)" % i)["_status"] == 0
    # labelled and no channel: refused, a decision row with no exit
    assert b.run_json("import shutil\nshutil.rmtree('/nonexistent')\n")["_status"] == 126
    b.stop()
    assert key not in b.read_log()
    yield b, key
    # every start of this broker, the tests' own included
    log = b.read_log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error:" not in log, log


def copy_of(b, tmp, name="copy.db"):
    """A copy as an auditor takes it: sqlite3's online backup."""
    path = os.path.join(tmp, name)
    src = sqlite3.connect("file:%s?mode=ro" % os.path.join(b.state, "kotoba.db"), uri=True)
    dst = sqlite3.connect(path)
    src.backup(dst)
    src.close()
    dst.close()
    return path


def owner_edit(path, *sql):
    """What the file's owner can do: the triggers go first."""
    db = sqlite3.connect(path)
    for (name,) in db.execute("select name from sqlite_master where type='trigger'").fetchall():
        db.execute('drop trigger "%s"' % name)
    for s in sql:
        db.execute(s)
    db.commit()
    db.close()


def verify(path, *args):
    """Both tools on one copy; they must agree.  Returns (status, problems,
    kotoba's output)."""
    c = subprocess.run([KOTOBA, "audit", "verify", "--db", path, *args],
                       capture_output=True, timeout=60)
    s = subprocess.run(["sh", SCRIPT, path, *args], capture_output=True, timeout=300)
    out_c, out_s = c.stdout.decode(), s.stdout.decode()
    print("$ kotoba audit verify --db", os.path.basename(path), *args)
    print(out_c, c.stderr.decode())
    print("$ kotoba-audit-verify.sh", os.path.basename(path), *args)
    print(out_s, s.stderr.decode())
    assert c.returncode in (0, 1) and s.returncode in (0, 1), (c.stderr, s.stderr)
    assert c.returncode == s.returncode, (out_c, out_s)
    found_c, found_s = set(PROBLEM.findall(out_c)), set(PROBLEM.findall(out_s))
    assert found_c == found_s, (out_c, out_s)
    return c.returncode, found_c, out_c


def anchors_of(b):
    return os.path.join(b.dir, "broker.log")


# ---- the hash, from AUDIT.md alone (what an attacker can recompute) ---------

def field(v):
    if v is None:
        return b"n"
    if isinstance(v, int):
        return b"i" + (v & (2 ** 64 - 1)).to_bytes(8, "big")
    if isinstance(v, str):
        v = v.encode()
    return b"s" + len(v).to_bytes(8, "big") + v


COLS = ("seq, time_ms, uid, pid, run_id, event, CASE WHEN NOT code_ref THEN code WHEN code IS "
        "NULL THEN (SELECT c.code FROM audit_code c WHERE c.sha256 = a.sha256) END, sha256, "
        "labels, mode, decision, approver, profile, has_exit, exit_code, signal, timed_out, "
        "duration_ms")


def rechain(path, from_seq):
    """Recomputes every hash from from_seq on and the head: the chain
    alone then verifies."""
    db = sqlite3.connect(path)
    prev = db.execute("select hash from audit where seq < ? order by seq desc limit 1",
                      (from_seq,)).fetchone()
    prev = prev[0] if prev else ZERO
    rows = db.execute("select %s, blocked, after_seq from audit a where seq >= ? order by seq"
                      % COLS, (from_seq,)).fetchall()
    for r in rows:
        # fields 19 and 20 only when set (AUDIT.md, "Row hash")
        tail = [field(r[18])] if r[18] else []
        tail += [field(r[19])] if r[19] else []
        h = hashlib.sha256(prev.encode() + b"kotoba-audit-v1\0" +
                           b"".join(field(v) for v in r[:18]) + b"".join(tail)).hexdigest()
        db.execute("update audit set prev_hash = ?, hash = ? where seq = ?", (prev, h, r[0]))
        prev = h
    db.execute("update audit_head set seq = (select max(seq) from audit), hash = ?", (prev,))
    db.commit()
    db.close()


def rows(path, sql="select count(*) from audit"):
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchone()[0]
    finally:
        db.close()


# ---- intact ------------------------------------------------------------------

def test_intact_copy_verifies_with_key_and_anchors(trail, tmpdir_k):
    b, key = trail
    path = copy_of(b, tmpdir_k)
    n = rows(path)
    assert n >= 12
    assert verify(path, "--key", key, "--anchors", anchors_of(b))[0] == 0
    rc, _, out = verify(path)
    assert rc == 0 and "seals: not checked (no --key)" in out
    # every row is sealed, the first under key 0 by the epoch row
    assert rows(path, "select count(*) from audit_seal") == n
    assert rows(path, "select event || '/' || decision from audit where seq = 1") == \
        "epoch/sealed"
    # anchors: start, every 4th row, stop
    log = b.read_log()
    assert re.search(r"audit-anchor seq=1 hash=[0-9a-f]{64} \(start\)", log), log
    assert re.search(r"audit-anchor seq=4 hash=[0-9a-f]{64} \(rows\)", log), log
    assert re.search(r"audit-anchor seq=%d hash=[0-9a-f]{64} \(stop\)" % n, log), log


def test_wrong_key_fails_every_seal(trail, tmpdir_k):
    b, key = trail
    path = copy_of(b, tmpdir_k)
    wrong = ("0" if key[0] != "0" else "1") + key[1:]
    rc, found, _ = verify(path, "--key", wrong)
    assert rc == 1 and {k for k, _ in found} == {"seal"}
    assert len(found) == rows(path)


# ---- the cases caught by the chain alone --------------------------------------

def test_edit_a_row(trail, tmpdir_k):
    b, _ = trail
    path = copy_of(b, tmpdir_k)
    owner_edit(path, "update audit set pid = pid + 1 where seq = 7")
    assert verify(path) == (1, {("chain", "7")}, verify(path)[2])


def test_delete_middle_rows(trail, tmpdir_k):
    b, _ = trail
    path = copy_of(b, tmpdir_k)
    owner_edit(path, "delete from audit where seq in (5, 6, 7)")
    rc, found, out = verify(path)
    assert (rc, found) == (1, {("chain", "5")}) and "rows 5 to 7 are missing" in out


def test_delete_last_rows_head_in_place(trail, tmpdir_k):
    b, _ = trail
    path = copy_of(b, tmpdir_k)
    n = rows(path)
    owner_edit(path, "delete from audit where seq > %d" % (n - 3))
    rc, found, _ = verify(path)
    assert (rc, found) == (1, {("chain", str(n - 2))})


def test_drop_triggers_then_edit(trail, tmpdir_k):
    b, _ = trail
    path = copy_of(b, tmpdir_k)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("update audit set uid = uid + 1000 where seq = 3")
    db.close()
    owner_edit(path, "update audit set uid = uid + 1000 where seq = 3",
               "update audit_code set code = cast('print(42)' as blob) where rowid = 1")
    rc, found, _ = verify(path)
    assert rc == 1 and ("chain", "3") in found


# ---- the three the chain alone does not catch ----------------------------------

def test_delete_last_rows_and_move_head_back(trail, tmpdir_k):
    b, key = trail
    path = copy_of(b, tmpdir_k)
    n = rows(path)
    owner_edit(path, "delete from audit where seq > %d" % (n - 3),
               "delete from audit_seal where seq > %d" % (n - 3),
               "update audit_head set seq = %d, hash = (select hash from audit where seq = %d)"
               % (n - 3, n - 3))
    # the chain and the seals of what is left: intact
    assert verify(path)[0] == 0
    assert verify(path, "--key", key)[0] == 0
    # the broker's log is not the file's: its anchors name the lost rows
    rc, found, out = verify(path, "--anchors", anchors_of(b))
    assert (rc, found) == (1, {("anchor", str(n - 2))})
    assert "rows %d to %d were removed" % (n - 2, n) in out


def test_edit_row_and_recompute_chain(trail, tmpdir_k):
    b, key = trail
    path = copy_of(b, tmpdir_k)
    n = rows(path)
    owner_edit(path, "update audit set time_ms = time_ms - 3600000 where seq = 5")
    rechain(path, 5)
    # the hash has no key: the chain alone is fooled
    rc, found, out = verify(path)
    assert (rc, found) == (0, set()) and "chain: intact" in out
    # the seals of rows 5.. were made under keys erased since
    rc, found, _ = verify(path, "--key", key)
    assert rc == 1 and found == {("seal", str(s)) for s in range(5, n + 1)}
    # and the anchors logged after row 5 name other hashes
    rc, found, _ = verify(path, "--anchors", anchors_of(b))
    assert rc == 1 and ("anchor", "8") in found and ("anchor", str(n)) in found


def test_delete_every_row_and_reset_head(trail, tmpdir_k):
    b, key = trail
    path = copy_of(b, tmpdir_k)
    owner_edit(path, "delete from audit", "delete from audit_seal", "delete from audit_code",
               "update audit_head set seq = 0, hash = '%s'" % ZERO)
    rc, found, out = verify(path)
    assert (rc, found) == (0, set()) and "(0 rows)" in out
    rc, found, out = verify(path, "--key", key)
    assert (rc, found) == (1, {("seal", "1")}) and "no row begins sealing" in out
    rc, found, _ = verify(path, "--anchors", anchors_of(b))
    assert (rc, found) == (1, {("anchor", "1")})


# ---- the broker at start -------------------------------------------------------

def test_broker_records_a_broken_chain_at_start(trail):
    b, key = trail
    db_path = os.path.join(b.state, "kotoba.db")
    n = rows(db_path)
    owner_edit(db_path, "update audit set pid = pid + 1 where seq = 6")
    b.start()
    b.stop()
    log = b.read_log()
    assert re.search(r"<3>kotoba-brokerd: audit chain broken at row 6: its contents do not "
                     r"match its hash", log), log
    assert "epoch row %d records the break at row 6" % (n + 1) in log
    assert rows(db_path, "select event || '/' || decision || '/' || run_id from audit "
                         "where seq = %d" % (n + 1)) == "epoch/broken/6"
    # the epoch row is sealed like any other, and the break stays visible
    path = copy_of(b, b.dir, "after.db")
    rc, found, out = verify(path, "--key", key, "--anchors", anchors_of(b))
    # the edited row's seal no longer matches it either; every other seal does
    assert (rc, found) == (1, {("chain", "6"), ("seal", "6")})
    assert "recorded by the broker in epoch row %d" % (n + 1) in out
    # a second start does not record the same break again
    b.start()
    assert b.run_json("print(1)")["_status"] == 0
    b.stop()
    assert rows(db_path, "select count(*) from audit where event = 'epoch' and "
                         "decision = 'broken'") == 1
    assert "(recorded by epoch row %d)" % (n + 1) in b.read_log()


def test_key_file_removed_nothing_runs(trail):
    b, _ = trail
    os.unlink(os.path.join(b.state, "audit-seal.key"))
    b.start()
    out = b.run_json("print(1)")
    assert out["_status"] != 0
    b.stop()
    assert "is gone: no unsealed row is written after sealed ones" in b.read_log()


def test_key_init_once(trail):
    b, _ = trail
    p = subprocess.run([BROKERD, "--audit-key-init", "--state-dir", b.state,
                        "--socket", b.socket], capture_output=True, timeout=30)
    assert p.returncode == 1 and p.stdout == b""
    assert b"sealed already" in p.stderr, p.stderr


def test_anchor_every_interval_in_journal_format(make_broker, tmpdir_k):
    b = make_broker(config="[audit]\nanchor_interval = 1s\nanchor_rows = 0\n").start()
    assert b.run_json("print(1)")["_status"] == 0
    deadline = 50
    while "(interval)" not in b.read_log() and deadline:
        subprocess.run(["sleep", "0.1"])
        deadline -= 1
    b.stop()
    log = b.read_log()
    assert re.search(r"audit-anchor seq=2 hash=[0-9a-f]{64} \(interval\)", log), log
    assert "(rows)" not in log
    # journalctl -o cat drops the priority prefix: the same lines still count
    cat = os.path.join(tmpdir_k, "journal.txt")
    with open(cat, "w") as f:
        f.write(re.sub(r"^<\d>", "", log, flags=re.M))
    path = copy_of(b, tmpdir_k)
    rc, _, out = verify(path, "--anchors", cat)
    assert rc == 0 and re.search(r"anchors: every anchor matches; 2 match", out), out


def test_kill9_while_sealing_leaves_every_seal_valid(trail, tmpdir_k):
    """SIGKILL lands between a row's seal, its key step and its COMMIT: a
    key index may go unused, but no row is left whose seal fails, and the
    broker starts again and goes on sealing."""
    b, key = trail
    for i in range(8):
        b.start()
        runs = [subprocess.Popen([KOTOBA, "run", "-c", "print(%d)" % j, "--no-channel",
                                  "--socket", b.socket], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for j in range(12)]
        # at different points of the burst: some kills land mid-append
        subprocess.run(["sleep", "0.0%d" % (i + 2)])
        b.proc.kill()
        b.proc.wait()
        b.log.close()
        for r in runs:
            r.wait(30)
    b.start()
    assert b.run_json("print('after')")["_status"] == 0
    b.stop()
    path = copy_of(b, tmpdir_k)
    # a key file with the key in it: the verification key as an auditor keeps it
    key_file = os.path.join(tmpdir_k, "key0.txt")
    with open(key_file, "w") as f:
        f.write(key + "\n")
    rc, found, out = verify(path, "--key-file", key_file, "--anchors", anchors_of(b))
    assert (rc, found) == (0, set()), out
    assert "every seal verifies" in out
    p = subprocess.run([KOTOBA, "audit", "verify", "--db", path, "--key-file", "-"],
                       input=key.encode(), capture_output=True, timeout=60)
    assert p.returncode == 0 and b"every seal verifies" in p.stdout, p.stdout


def test_rows_before_sealing_are_held_by_the_seals_after(make_broker, tmpdir_k):
    b = make_broker(config=CONFIG).start()
    assert b.run_json("print(1)")["_status"] == 0
    b.stop()
    key, _ = key_init(b)
    b.start()
    assert b.run_json("print(2)")["_status"] == 0
    b.stop()
    path = copy_of(b, tmpdir_k)
    # rows 1-2 unsealed, 3 began sealing, 4-5 sealed
    assert rows(path, "select min(seq) from audit_seal") == 3
    assert verify(path, "--key", key)[0] == 0
    owner_edit(path, "update audit set pid = pid + 1 where seq = 1")
    rechain(path, 1)
    assert verify(path)[0] == 0
    rc, found, _ = verify(path, "--key", key)
    assert rc == 1 and found == {("seal", "3"), ("seal", "4"), ("seal", "5")}


@pytest.mark.parametrize("window", ["0", "1s"])
def test_the_decision_row_is_committed_before_the_snippet_runs(make_broker, tmpdir_k, window):
    """With [audit] sync_window the row waits for the disk, not for its
    readers: another connection finds it while the snippet still runs (the
    snippet waits on a fifo the test opens only after reading the row)."""
    b = make_broker(config="[audit]\nsync_window = %s\n" % window).start()
    work = os.path.join(tmpdir_k, "work")
    os.mkdir(work)
    os.chmod(work, 0o755)
    fifo = os.path.join(work, "go")
    os.mkfifo(fifo, 0o666)
    os.chmod(fifo, 0o666)
    c = b.client()
    c.exec("print('up', flush=True)\nprint(open('go').read())\n", id=7, cwd=work)
    assert c.first_line() == "up"
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(b.state, "kotoba.db"), uri=True)
    decided = db.execute("select decision, profile from audit where run_id = 7 and "
                         "event = 'decision'").fetchall()
    db.close()
    assert decided == [("ran", "unattended")], decided
    with open(fifo, "w") as f:
        f.write("done")
    out = c.until_end(id=7)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert out["stdout"] == b"done\n", out  # "up" was read above
