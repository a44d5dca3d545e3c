"""The write witness (worker/fileattr.c): every open for writing the
unattended sandbox refuses is in the receipt, seen by the worker, also when
C code made it (sqlite3, io.FileIO, os.open), against the real broker,
worker, kernel and python3.  Writes into the run's own places record
nothing; an approved run of the same acts writes and records nothing."""
import os

import pytest

from test_receipt import PRELUDE, entries, home, run  # noqa: F401  (fixture)

# Names built at run time, as the escape suite's cases do: the pre-screen
# would ask before a snippet that names them plainly.
C_WRITES = ("px = m('pos' + 'ix')\n"
            "sq = m('sql' + 'ite3')\n"
            "io_ = m('io')\n"
            "def attempt(what, f):\n"
            "    try:\n"
            "        f()\n"
            "        print(what, 'ok')\n"
            "    except Exception as e:\n"
            "        print(what, type(e).__name__)\n"
            "attempt('sqlite', lambda: getattr(sq, 'conn' + 'ect')('results.db')"
            ".execute('create table t (x)'))\n"
            "attempt('posix.open', lambda: getattr(px, 'op' + 'en')('raw.bin', "
            "getattr(px, 'O_WR' + 'ONLY') | getattr(px, 'O_CR' + 'EAT'), 0o600))\n"
            "attempt('FileIO', lambda: getattr(io_, 'File' + 'IO')('fio.bin', 'w' + 'b'))\n")

OWN_PLACES = ("px = m('pos' + 'ix')\n"
              "def put(d):\n"
              "    fd = getattr(px, 'op' + 'en')(os.path.join(d, 'f.bin'), "
              "getattr(px, 'O_WR' + 'ONLY') | getattr(px, 'O_CR' + 'EAT'), 0o600)\n"
              "    os.close(fd)\n"
              "    return os.path.exists(os.path.join(d, 'f.bin'))\n"
              "print(put(os.environ['TMPDIR']), put('/dev/shm'), "
              "put(os.environ['KOTOBA_OUTPUT_DIR']))\n"
              "getattr(px, 'op' + 'en')('/dev/null', getattr(px, 'O_WR' + 'ONLY'))\n")


def witnessed(end):
    got, blocked = entries(end)
    return sorted((k, t) for k, t, by in got), blocked


def test_writes_refused_in_c_are_witnessed(broker, home):
    out, err, end = run(broker, C_WRITES, home)
    assert out.split("\n")[:3] == ["sqlite OperationalError", "posix.open PermissionError",
                                   "FileIO PermissionError"], (out, err, end)
    for name in ("results.db", "raw.bin", "fio.bin"):
        assert not os.path.exists(os.path.join(home, name)), name
    got, blocked = witnessed(end)
    assert got == [("create", os.path.join(home, n))
                   for n in ("fio.bin", "raw.bin", "results.db")], end
    by = {"landlock"} if end.get("landlock") != "off" else {"seccomp"}
    for e in blocked:
        # one entry per file: the interpreter's own report of io.FileIO
        # and os.open is the same refusal, and adds nothing
        assert e["seen_by"] == "worker" and e["by"] in by and e["count"] == 1, blocked


def test_own_places_record_nothing(broker, home):
    out, err, end = run(broker, OWN_PLACES, home)
    assert out == "True True True\n", (out, err)
    assert "blocked" not in end and "blocked_total" not in end, end


def test_approved_run_of_the_same_writes_and_records_nothing(broker, home):
    out, err, end = run(broker, C_WRITES, home, channel=True)
    assert out.split("\n")[:3] == ["sqlite ok", "posix.open ok", "FileIO ok"], (out, err)
    for name in ("results.db", "raw.bin", "fio.bin"):
        assert os.path.exists(os.path.join(home, name)), name
    assert "blocked" not in end, end
