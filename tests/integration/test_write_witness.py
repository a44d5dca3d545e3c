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


def test_without_landlock_the_filter_refuses_and_the_witness_records_each(make_broker, home):
    # landlock = no: the filter holds the rule (no open for writing at
    # all), the supervisor answers EACCES itself and records every one,
    # its own places included, as refused by seccomp.
    b = make_broker(config="[sandbox]\nlandlock = no\n").start()
    out, err, end = run(b, C_WRITES, home)
    assert out.split("\n")[:3] == ["sqlite OperationalError", "posix.open PermissionError",
                                   "FileIO PermissionError"], (out, err, end)
    got, blocked = witnessed(end)
    assert got == [("create", os.path.join(home, n))
                   for n in ("fio.bin", "raw.bin", "results.db")], end
    assert {(e["by"], e["seen_by"], e["inferred"]) for e in blocked} == \
        {("seccomp", "worker", False)}, blocked
    out, err, end = run(b, "px = m('pos' + 'ix')\n"
                        "try:\n"
                        "    getattr(px, 'op' + 'en')(os.environ['TMPDIR'] + '/f', 65, 0o600)\n"
                        "except PermissionError as e:\n"
                        "    print('refused', e.errno)\n", home)
    assert out == "refused 13\n", (out, err)
    got, blocked = witnessed(end)
    assert [k for k, _ in got] == ["create"] and got[0][1].endswith("/f"), end


# Many opens the sandbox refuses, each of a long name of its own: the
# supervisor answers every one, the receipt keeps its first 16 entries and
# counts them all.
FLOOD = ("px = m('pos' + 'ix')\n"
         "op = getattr(px, 'op' + 'en')\n"
         "N = 3000\n"
         "for i in range(N):\n"
         "    try:\n"
         "        op('%05d' % i + 'x' * 240, 65, 0o600)\n"
         "    except PermissionError:\n"
         "        pass\n"
         "print('done')\n")

# A thread swaps a symlink in scratch between a file of scratch and one of
# the working directory while the main thread writes through it: the record
# may say either (a witness, not the boundary); nothing is written outside.
RACE = ("import threading\n"
        "px = m('pos' + 'ix')\n"
        "sym, ren = getattr(px, 'sym' + 'link'), getattr(px, 'ren' + 'ame')\n"
        "d = os.environ['TMPDIR']\n"
        "link, inside, outside = d + '/l', d + '/inside', os.path.join(os.getcwd(), 'victim')\n"
        "stop = False\n"
        "def flip():\n"
        "    i = 0\n"
        "    while not stop:\n"
        "        i += 1\n"
        "        sym(inside if i % 2 else outside, d + '/t')\n"
        "        ren(d + '/t', link)\n"
        "t = threading.Thread(target=flip)\n"
        "t.start()\n"
        "n = 0\n"
        "for _ in range(2000):\n"
        "    try:\n"
        "        os.close(getattr(px, 'op' + 'en')(link, 65, 0o600))\n"
        "    except OSError:\n"
        "        n += 1\n"
        "stop = True\n"
        "t.join()\n"
        "print('refused', n)\n")


def test_a_flood_neither_stalls_the_run_nor_miscounts(broker, home):
    out, err, end = run(broker, FLOOD, home)
    assert out == "done\n" and end["code"] == 0, (out, err, end)
    assert not [n for n in os.listdir(home)], os.listdir(home)
    blocked = end["blocked"]
    assert len(blocked) == 16 and end["blocked_total"] == 3000, end
    assert all(e["kind"] == "create" and e["count"] == 1 and e["seen_by"] == "worker"
               for e in blocked), blocked
    assert blocked[0]["target"] == os.path.join(home, "00000" + "x" * 240)[:len(
        blocked[0]["target"])], blocked[0]


def test_a_symlink_race_is_bounded_and_writes_nothing_outside(broker, home):
    out, err, end = run(broker, RACE, home)
    assert out.startswith("refused ") and end["code"] == 0, (out, err, end)
    refused = int(out.split()[1])
    assert not os.path.exists(os.path.join(home, "victim"))
    blocked = end.get("blocked", [])
    assert end.get("blocked_total", 0) == sum(e["count"] for e in blocked) <= 2000, end
    assert all(e["kind"] in ("create", "write") and e["target"].endswith("/l")
               for e in blocked), blocked
    assert refused >= 1, out
