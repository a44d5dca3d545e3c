"""How a snippet ends: python3 leaves without its module teardown
(PYTHON_SNIPPET_END in proto/proto.h), and nothing a snippet can observe
changes: threads are joined, atexit handlers run, what its names held is
finalized, every file it left open is complete when the client sees the
result, and the exit status is the interpreter's.  Each test runs warm (the
code goes to a spare) and cold."""
import os
import re

import pytest

from test_secrets import snippet_user
from test_warm import spare_waits, took

BIG = 1 << 20  # written through the buffer; what follows stays in it


def approved(b, code, cwd):
    """One run from a client with a channel, its card answered `once`
    (the approved profile: it may write its working directory)."""
    c = b.client(channel=True)
    c.exec(code, cwd=cwd)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                     "choice": "once"}))
    c.close()
    return out["stdout"].decode(), out["stderr"].decode(), out["end"]


@pytest.fixture(params=["warm", "cold"])
def end_of(request, make_broker, tmpdir_k):
    """run(code) -> (stdout, stderr, end) in a working directory the
    snippet's user owns, taking a spare when warm."""
    warm = request.param == "warm"
    b = make_broker(config="[sandbox]\nwarm = %s\n" % ("yes" if warm else "no")).start()
    work = os.path.join(tmpdir_k, "work")
    os.mkdir(work)
    u = snippet_user()
    os.chown(work, u.pw_uid, u.pw_gid)

    def go(code):
        # "pass" may take a spare still starting; a new one waits after it.
        if warm:
            waiting = len(re.findall(r"waits for a snippet", b.read_log()))
            approved(b, "pass", work)
            spare_waits(b, waiting + 1)
        before = took(b)
        out = approved(b, code, work)
        assert took(b) == before + warm, b.read_log()[-3000:]
        return out

    go.work = work
    return go


def size(work, name):
    return os.path.getsize(os.path.join(work, name))


def test_files_left_open_are_complete_when_the_result_comes(end_of):
    # One held by a module-level name, one only by another module, one text
    # file with its last line unterminated.
    code = ("import json\n"
            "f = open('top.bin', 'wb')\n"
            "f.write(b'x' * %d)\n"
            "f.write(b'x' * 100)\n"
            "json.kept = open('elsewhere.bin', 'wb')\n"
            "json.kept.write(b'y' * 1000)\n"
            "t = open('text.txt', 'w')\n"
            "t.write('line\\n' * 1000 + 'last')\n"
            "print('written')\n" % BIG)
    out, err, end = end_of(code)
    assert (out, end["type"], end.get("code")) == ("written\n", "exit", 0), (out, err, end)
    # The client has the result: every byte is already in the files.
    assert size(end_of.work, "top.bin") == BIG + 100
    assert size(end_of.work, "elsewhere.bin") == 1000
    with open(os.path.join(end_of.work, "text.txt")) as f:
        assert f.read() == "line\n" * 1000 + "last"


def test_a_zipfile_left_open_gets_its_directory(end_of):
    # ZipFile.__del__ writes the central directory: what only the
    # snippet's names held is finalized as the interpreter would.
    code = ("import zipfile\n"
            "z = zipfile.ZipFile('out.zip', 'w')\n"
            "z.writestr('a.txt', 'alpha')\n")
    _, err, end = end_of(code)
    assert end.get("code") == 0, (err, end)
    import zipfile
    with zipfile.ZipFile(os.path.join(end_of.work, "out.zip")) as z:
        assert z.read("a.txt") == b"alpha"


def test_atexit_handlers_and_finalizers_run_in_order(end_of):
    code = ("import atexit\n"
            "class D:\n"
            "    def __del__(self):\n"
            "        print('del')\n"
            "d = D()\n"
            "atexit.register(print, 'atexit')\n"
            "print('body')\n")
    out, err, end = end_of(code)
    assert out == "body\natexit\ndel\n", (out, err)
    assert end.get("code") == 0, end


def test_a_non_daemon_thread_is_joined_before_atexit(end_of):
    # The thread outlives the code by design; were it not joined, its line
    # would never come, however long the test waited.
    code = ("import atexit, threading, time\n"
            "def late():\n"
            "    time.sleep(0.3)\n"
            "    print('thread', flush=True)\n"
            "threading.Thread(target=late).start()\n"
            "atexit.register(print, 'atexit')\n"
            "print('body')\n")
    out, err, end = end_of(code)
    assert out == "body\nthread\natexit\n", (out, err)


@pytest.mark.parametrize("code,status,err_has", [
    ("import sys\nsys.exit(3)\n", 3, None),
    ("import sys\nsys.exit(None)\n", 0, None),
    ("import sys\nsys.exit(True)\n", 1, None),
    ("import sys\nsys.exit('bad input')\n", 1, "bad input\n"),
    ("def f():\n    raise ValueError('at the end')\nf()\n", 1,
     'File "<stdin>", line 3, in <module>'),
    ("import atexit\natexit.register(print, 'atexit')\nraise KeyError(1)\n", 1, "KeyError: 1"),
    ("syntax error here\n", 1, "SyntaxError"),
])
def test_the_exit_status_is_the_interpreters(end_of, code, status, err_has):
    out, err, end = end_of(code)
    assert end["type"] == "exit" and end["code"] == status, (out, err, end)
    if err_has:
        assert err_has in err, err
    # Only the snippet's frames: none of the bootstrap's.
    assert 'File "<string>"' not in err, err
    if "atexit" in code:
        assert out == "atexit\n", out


def test_an_uncaught_exception_prints_as_python_does(end_of):
    out, err, end = end_of("print('before')\nraise RuntimeError('boom')\n")
    assert out == "before\n"
    assert err == ('Traceback (most recent call last):\n'
                   '  File "<stdin>", line 2, in <module>\n'
                   'RuntimeError: boom\n'), err
    assert end["code"] == 1


def test_names_the_snippet_defines_do_not_break_the_end(end_of):
    code = ("isinstance = type = issubclass = exec = None\n"
            "os = sys = gc = io = r = s = 'mine'\n"
            "import sys as real\n"
            "print('ok')\n"
            "real.exit(4)\n")
    out, err, end = end_of(code)
    assert (out, end["code"]) == ("ok\n", 4), (out, err, end)


def test_two_runs_draw_different_random_numbers(end_of):
    code = "import os, random\nprint(random.random(), os.urandom(16).hex())\n"
    first = end_of(code)[0]
    second = end_of(code)[0]
    assert re.fullmatch(r"0\.\d+ [0-9a-f]{32}\n", first), first
    assert first.split()[0] != second.split()[0] and first.split()[1] != second.split()[1]
