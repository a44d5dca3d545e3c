"""Spare interpreters ([sandbox] warm): a run that matches a spare takes it,
runs exactly as a cold one would, and shares nothing with the runs before
or beside it; what could change between a spare's start and its `go` (the
secret set, the working directory, the mount table, the configuration)
makes the worker or the broker start cold instead."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BACKSTOP_S, BROKERD, wait_for
from test_secrets import READ, plant, snippet_user

WARM = "[sandbox]\nwarm = yes\n"


def subdir(parent, name):
    """A working directory the snippet's user may enter."""
    d = os.path.join(parent, name)
    os.mkdir(d)
    os.chmod(d, 0o755)
    return d


def warm_broker(make_broker, extra=""):
    return make_broker(config=WARM + extra).start()


def run(b, code, cwd, env=None, timeout_ms=None):
    """One unattended exec over the raw protocol: (stdout, stderr, end)."""
    c = b.client()
    fields = {"cwd": cwd}
    if env:
        fields["env"] = env
    if timeout_ms:
        fields["timeout_ms"] = timeout_ms
    c.exec(code, **fields)
    out = c.until_end()
    c.close()
    return out["stdout"].decode(), out["stderr"].decode(), out["end"]


def wait_log(b, pattern, count=1, timeout=BACKSTOP_S):
    """Waits until the broker's log has pattern count times; returns the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = b.read_log()
        if len(re.findall(pattern, log)) >= count:
            return log
        time.sleep(0.02)
    raise AssertionError("no %r x%d in the log:\n%s" % (pattern, count, b.read_log()[-3000:]))


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def spare_waits(b, count=1):
    """The count-th spare's python3 waits for code; returns its pid."""
    log = wait_log(b, r"spare pid=\d+ waits for a snippet", count)
    return int(re.findall(r"spare pid=(\d+) waits for a snippet", log)[count - 1])


def took(b):
    return len(re.findall(r"took spare worker", b.read_log()))


def test_a_run_takes_the_spare_and_runs_as_a_cold_one(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    code = ("import sys\n"
            "print(__name__, __file__, sys.argv, repr(sys.stdin.read()))\n"
            "raise ValueError('at the end')\n")
    cold = run(b, code, tmpdir_k)
    spare_waits(b)
    warm = run(b, code, tmpdir_k)
    assert took(b) == 1, b.read_log()
    assert cold[0] == warm[0] == "__main__ <stdin> ['-'] ''\n", (cold, warm)
    assert cold[1] == warm[1], (cold, warm)
    assert 'File "<stdin>", line 3, in <module>' in warm[1], warm
    assert warm[2]["type"] == "exit" and warm[2]["code"] == 1, warm
    assert warm[2]["profile"] == "unattended" and warm[2]["secrets"] == "masked", warm


def test_state_and_randomness_are_not_shared(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    mess = ("import json, random, os\n"
            "json.dumps = lambda *a, **k: 'patched'\n"
            "json.left_behind = 1\n"
            "print(random.random(), os.urandom(8).hex())\n")
    look = ("import json, random, os\n"
            "print(json.dumps([1]), hasattr(json, 'left_behind'))\n"
            "print(random.random(), os.urandom(8).hex())\n")
    first = run(b, mess, tmpdir_k)[0]
    spare_waits(b)
    second = run(b, look, tmpdir_k)[0].splitlines()
    spare_waits(b, 2)
    third = run(b, look, tmpdir_k)[0].splitlines()
    assert took(b) == 2, b.read_log()
    assert second[0] == third[0] == "[1] False", (second, third)
    draws = {first.strip(), second[1], third[1]}
    assert len(draws) == 3, draws


def test_a_secret_made_after_the_spare_is_masked(make_broker, tmpdir_k):
    # The spare's namespace masks what existed when it started: nothing.
    b = warm_broker(make_broker, "secret_paths = %s/token, %s/vault\n" % (tmpdir_k, tmpdir_k))
    work = subdir(tmpdir_k, "work")
    run(b, "pass", work)
    spare_waits(b)
    token, key = plant(tmpdir_k)
    with open(os.path.join(work, ".env"), "w") as f:
        f.write("API_KEY=planted\n")
    os.chmod(os.path.join(work, ".env"), 0o644)
    # The names are built: the pre-screen would refuse them spelled out.
    env_read = READ.replace("os.environ['SECRET_AT']", "os.getcwd() + '/.' + 'e' + 'nv'")
    out, _, end = run(b, env_read + READ.replace("os.environ['SECRET_AT']", repr(token)), work)
    assert out == "PermissionError 13\nPermissionError 13\n", out
    assert end["secrets"] == "masked", end
    # It went to the spare, which no longer fitted: the worker started cold.
    assert took(b) == 1, b.read_log()


def test_a_secret_linked_back_after_the_spare_is_masked(make_broker, tmpdir_k):
    """The same file under the same name, so the same key: but unlinking it
    took the spare's mask away with the old name."""
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    env = os.path.join(work, ".env")
    with open(env, "w") as f:
        f.write("API_KEY=planted\n")
    u = snippet_user()
    os.chown(env, u.pw_uid, u.pw_gid)
    code = READ.replace("os.environ['SECRET_AT']", "os.getcwd() + '/.' + 'e' + 'nv'")
    assert run(b, code, work)[0] == "PermissionError 13\n"
    spare_waits(b)
    aside = os.path.join(tmpdir_k, "aside")
    os.link(env, aside)
    os.unlink(env)
    os.link(aside, env)
    os.unlink(aside)
    assert run(b, code, work)[0] == "PermissionError 13\n"
    assert took(b) == 1, b.read_log()


ENV_DOT = "os.getcwd() + '/{up}.' + 'e' + 'nv.{rest}'"


def read_built(path_expr):
    """READ of a path the pre-screen does not see spelled out."""
    return READ.replace("os.environ['SECRET_AT']", path_expr)


def write_secret(path, text="API_KEY=planted\n"):
    """A file any user may read: only a mask keeps a snippet out."""
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)


def spares_fitted(b):
    """How many runs' snippets ran in the python3 their spare had waiting
    (a spare that no longer fits runs the code in a cold child instead)."""
    log = b.read_log()
    waited = set(re.findall(r"spare pid=(\d+) waits for a snippet", log))
    ran = set(re.findall(r"snippet pid=(\d+) running", log))
    return len(waited & ran)


@pytest.mark.parametrize("how", ["made", "moved in", "linked in"])
def test_a_pattern_secret_made_after_the_spare_is_masked(make_broker, tmpdir_k, how):
    """The spare's check at `go` takes its listing of the working directory
    again only while nothing changed there: a `.env.*` made, moved or
    linked in after the spare started is found."""
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    code = read_built(ENV_DOT.format(up="", rest="local"))
    assert run(b, code, work)[0] == "FileNotFoundError 2\n"
    spare_waits(b)
    target = os.path.join(work, ".env.local")
    aside = os.path.join(tmpdir_k, "aside")
    write_secret(target if how == "made" else aside)
    if how == "moved in":
        os.rename(aside, target)
    elif how == "linked in":
        os.link(aside, target)
    out, _, end = run(b, code, work)
    assert out == "PermissionError 13\n", (how, out)
    assert end["secrets"] == "masked", end
    # It went to the spare, which no longer fitted: a cold child ran it.
    assert took(b) == 1 and spares_fitted(b) == 0, b.read_log()


def test_a_pattern_secret_made_in_a_parent_after_the_spare_is_masked(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    work = subdir(subdir(tmpdir_k, "repo"), "src")
    code = read_built(ENV_DOT.format(up="../", rest="prod"))
    assert run(b, code, work)[0] == "FileNotFoundError 2\n"
    spare_waits(b)
    write_secret(os.path.join(tmpdir_k, "repo", ".env.prod"))
    assert run(b, code, work)[0] == "PermissionError 13\n"


def test_an_unchanged_directory_keeps_the_spare_and_its_masks(make_broker, tmpdir_k):
    """The control: with a `.env.*` there from the start and nothing
    changed, every run takes its spare, and the secret stays masked."""
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    secret = os.path.join(work, ".env.local")
    write_secret(secret)
    code = read_built(ENV_DOT.format(up="", rest="local"))
    assert run(b, code, work)[0] == "PermissionError 13\n"
    for i in range(1, 4):
        spare_waits(b, i)
        assert run(b, code, work)[0] == "PermissionError 13\n"
    assert took(b) == 3 and spares_fitted(b) == 3, b.read_log()


def test_a_pattern_secret_removed_after_the_spare_leaves_no_mask(make_broker, tmpdir_k):
    """A `.env.*` removed after the spare started, then made again as a
    new file: the new one is masked (the removal was an event too)."""
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    secret = os.path.join(work, ".env.local")
    write_secret(secret, "old\n")
    code = read_built(ENV_DOT.format(up="", rest="local"))
    assert run(b, code, work)[0] == "PermissionError 13\n"
    spare_waits(b)
    os.unlink(secret)
    write_secret(secret)
    assert run(b, code, work)[0] == "PermissionError 13\n"


def test_stdin_is_the_code_as_in_a_cold_run(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    code = ("import sys\n"
            "i = sys.stdin\n"
            "print(i.name, i.mode, i.encoding, i.seekable(), i.buffer.seekable(),\n"
            "      i is sys.__stdin__)\n"
            "i.seek(0)\n"
            "print(len(i.read()), i.tell())\n")
    cold = run(b, code, tmpdir_k)
    spare_waits(b)
    warm = run(b, code, tmpdir_k)
    assert took(b) == 1
    assert cold[:2] == warm[:2] and cold[0] == "<stdin> r utf-8 True True True\n%d %d\n" % (
        len(code), len(code)), (cold, warm)


def test_the_receipt_names_what_preloaded_modules_were_refused(make_broker, tmpdir_k):
    """tokenize and linecache keep the open they imported: in a spare they
    import it after the receipt's wrappers, so their refusals are named."""
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    with open(os.path.join(work, ".env"), "w") as f:
        f.write("API_KEY=planted\n")
    code = ("import os, tokenize, linecache\n"
            "p = os.getcwd() + '/.' + 'e' + 'nv'\n"
            "try:\n"
            "    tokenize.open(p)\n"
            "except OSError as e:\n"
            "    print(type(e).__name__)\n"
            "print(linecache.getlines(p))\n")
    ends = []
    for i in range(2):
        if i:
            spare_waits(b)
        out, _, end = run(b, code, work)
        assert out == "PermissionError\n[]\n", out
        ends.append(end)
    assert took(b) == 1
    for end in ends:
        kinds = [(e["kind"], e["target"]) for e in end.get("blocked", [])]
        assert ("secret-read", os.path.join(work, ".env")) in kinds, end


def test_a_user_whose_spares_go_unused_gets_none_for_a_while(make_broker, tmpdir_k):
    b = warm_broker(make_broker, "warm_per_user = 1\n")
    dirs = [subdir(tmpdir_k, "d%d" % i) for i in range(3)]
    for i, d in enumerate(dirs):
        run(b, "pass", d)
        if i < 2:  # the third run's end finds two spares gone unused: none
            spare_waits(b, i + 1)
    wait_log(b, r"spares went unused 2 times in a row")
    made = len(re.findall(r"started spare worker", b.read_log()))
    refused = len(re.findall(r"no spare: its spares went unused", b.read_log()))
    for d in dirs:
        run(b, "pass", d)
    # each run's end asked for a spare, and each was refused
    wait_log(b, r"no spare: its spares went unused", refused + len(dirs))
    assert len(re.findall(r"started spare worker", b.read_log())) == made, b.read_log()
    assert took(b) == 0


def test_a_replaced_working_directory_is_the_new_one(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    work = subdir(tmpdir_k, "work")
    run(b, "pass", work)
    spare_waits(b)
    os.rename(work, work + ".old")
    subdir(tmpdir_k, "work")
    open(os.path.join(work, "new-file"), "w").close()
    out = run(b, "import os; print(sorted(os.listdir('.')))", work)[0]
    assert out == "['new-file']\n", out


def test_the_clock_starts_at_go(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    spare_waits(b)
    time.sleep(2.5)  # the spare waits longer than the run's own limit
    out, _, end = run(b, "print('done')", tmpdir_k, timeout_ms=2000)
    assert out == "done\n" and end["type"] == "exit" and end["code"] == 0, (out, end)
    assert took(b) == 1
    # ... and it holds: a warm run past its limit is stopped like a cold one.
    spare_waits(b, 2)
    out, _, end = run(b, "import time; time.sleep(5)", tmpdir_k, timeout_ms=500)
    assert end["type"] == "exit" and end["timed_out"] and end["limit"] == "wall", end
    assert took(b) == 2


def test_only_the_same_environment_takes_a_spare(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k, env={"TZ": "UTC"})
    spare_waits(b)
    out = run(b, "import os; print(os.environ.get('TZ'))", tmpdir_k, env={"TZ": "Asia/Tokyo"})[0]
    assert out == "Asia/Tokyo\n" and took(b) == 0, b.read_log()
    out = run(b, "import os; print(os.environ.get('TZ'))", tmpdir_k, env={"TZ": "UTC"})[0]
    assert out == "UTC\n" and took(b) == 1, b.read_log()


@pytest.mark.parametrize("landlock", ["yes", "no"])
def test_a_run_cannot_reach_a_waiting_spare(make_broker, tmpdir_k, landlock):
    """Another directory's spare of the same user waits while a run goes:
    the run can neither signal it nor write its memory, nor (with Landlock)
    read it."""
    b = warm_broker(make_broker, "landlock = %s\n" % landlock)
    other = subdir(tmpdir_k, "other")
    run(b, "pass", other)
    pid = spare_waits(b)
    # posix for os, flags by number: the pre-screen would refuse the snippet.
    probe = ("import os, posix, signal\n"
             "for what, flags in (('kill', None), ('write', 2), ('read', 0)):\n"
             "    try:\n"
             "        if flags is None:\n"
             "            os.kill(%d, signal.SIGKILL)\n"
             "        else:\n"
             "            posix.open('/proc/%d/mem', flags)\n"
             "        print(what, 'reached')\n"
             "    except OSError as e:\n"
             "        print(what, type(e).__name__)\n" % (pid, pid))
    out = run(b, probe, tmpdir_k)[0].splitlines()
    assert out[:2] == ["kill PermissionError", "write PermissionError"], out
    if landlock == "yes":
        assert out[2] == "read PermissionError", out
    os.kill(pid, 0)  # alive, and it still takes its snippet
    assert run(b, "print('ok')", other)[0] == "ok\n" and took(b) == 1, b.read_log()


def test_killing_a_warm_run_ends_it_and_the_next_gets_a_new_spare(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    pid = spare_waits(b)
    c = b.client()
    c.exec("import os, time; print(os.getpid(), flush=True); time.sleep(30)", cwd=tmpdir_k)
    assert c.snippet_pid() == pid
    os.kill(pid, signal.SIGKILL)
    end = c.until_end()["end"]
    c.close()
    assert end["type"] == "exit" and end["signal"] == signal.SIGKILL, end
    # Its interpreter is never used again: the next run gets another (a
    # spare still starting, or a cold start), and the one after a new spare.
    assert run(b, "print('a')", tmpdir_k)[0] == "a\n"
    assert spare_waits(b, 2) != pid
    before = took(b)
    assert run(b, "print('b')", tmpdir_k)[0] == "b\n" and took(b) == before + 1, b.read_log()


def test_reload_and_idle_stop_spares(make_broker, tmpdir_k):
    b = warm_broker(make_broker, "warm_idle = 1s\n")
    run(b, "pass", tmpdir_k)
    pid = spare_waits(b)
    b.proc.send_signal(signal.SIGHUP)
    wait_log(b, r"spare stopped: the configuration was reloaded")
    run(b, "pass", tmpdir_k)
    assert took(b) == 0
    pid2 = spare_waits(b, 2)
    assert pid2 != pid
    wait_log(b, r"spare stopped: no snippet took it in \[sandbox\] warm_idle")
    for p in (pid, pid2):
        wait_for(lambda: gone(p), "the spare %d to be gone" % p)


def test_a_changed_mount_table_stops_the_spare(make_broker, tmpdir_k):
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    spare_waits(b)
    where = os.path.join(tmpdir_k, "mnt")
    os.mkdir(where)
    subprocess.run(["mount", "-t", "tmpfs", "none", where], check=True)
    try:
        assert run(b, "print('ok')", tmpdir_k)[0] == "ok\n"
        assert "spare stopped: the mount table changed" in b.read_log()
        assert took(b) == 0
    finally:
        subprocess.run(["umount", where], check=True)


def test_spares_are_capped_and_not_counted_as_runs(make_broker, tmpdir_k):
    b = warm_broker(make_broker, "warm_per_user = 1\n[broker]\nmax_runs_per_uid = 1\n")
    dirs = [subdir(tmpdir_k, "d%d" % i) for i in range(2)]
    run(b, "pass", dirs[0])
    first = spare_waits(b)
    # A waiting spare takes no run slot: a run elsewhere still starts ...
    assert run(b, "print('elsewhere')", dirs[1])[0] == "elsewhere\n"
    # ... and its spare takes the place of the first (one per user here).
    second = spare_waits(b, 2)
    wait_log(b, r"spare stopped: its user's newer run wants a spare")
    wait_for(lambda: gone(first), "the first spare to be gone")
    os.kill(second, 0)
    assert run(b, "print('back')", dirs[1])[0] == "back\n" and took(b) == 1, b.read_log()


def test_bad_preload_entries_are_errors_with_their_line(tmpdir_k):
    path = os.path.join(tmpdir_k, "bad.conf")
    with open(path, "w") as f:
        f.write("[sandbox]\nwarm = yes\npreload = json, os;rm\n")
    p = subprocess.run([BROKERD, "--config", path, "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode != 0
    assert "%s:3:" % path in p.stderr and "'os;rm' is not a module name" in p.stderr, p.stderr


def test_a_failing_preload_module_is_skipped(make_broker, tmpdir_k):
    b = warm_broker(make_broker, "preload = json, no_such_module_here, csv\n")
    run(b, "pass", tmpdir_k)
    spare_waits(b)
    # sys.modules by another spelling: the pre-screen takes it for a shell.
    out = run(b, "import sys; m = getattr(sys, 'mod' + 'ules'); print('json' in m, 'csv' in m)",
              tmpdir_k)[0]
    assert out == "True True\n" and took(b) == 1, (out, b.read_log())


def test_the_approved_profile_has_spares_of_its_own(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    answer = lambda cl, m: cl.send({"type": "answer", "card": m["card"], "choice": "once"})  # noqa

    def approved(code):
        c = b.client(channel=True)
        c.exec(code, cwd=tmpdir_k)
        out = c.until_end(on_card=answer)
        c.close()
        return out["stdout"].decode(), out["end"]

    approved("pass")
    spare_waits(b)
    run(b, "pass", tmpdir_k)  # unattended: not the approved spare
    assert took(b) == 0
    out, end = approved("import os; print(os.getuid())")
    assert out == "%d\n" % snippet_user().pw_uid and end["profile"] == "approved", (out, end)
    assert took(b) == 1, b.read_log()


def test_a_spare_that_preloaded_pyplot_saves_shown_figures(make_broker, tmpdir_k):
    # matplotlib reads MPLBACKEND when imported: in a spare, at preload,
    # before the code; the output-directory backend is set before that.
    b = warm_broker(make_broker, "preload = matplotlib.pyplot\n")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
    for i in range(2):
        if i:
            spare_waits(b)
        c = b.client()
        c.exec(code, cwd=tmpdir_k)
        out = c.until_end()
        c.close()
        assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, (out["end"], out["stderr"])
        files = [(m["name"], m["data"][:8]) for m in out["frames"] if m["type"] == "file"]
        assert files == [("figure-1.png", b"\x89PNG\r\n\x1a\n")], out
    assert took(b) == 1, b.read_log()


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(k) for k in f.read().split()]
    except OSError:
        return []


def stopped_while_starting(b, tmpdir_k, attempts=5):
    """A spare of tmpdir_k caught before its interpreter said it waits: its
    supervisor SIGSTOPped, so the broker hears no `warm` until SIGCONT.
    Returns (run id, worker pid).  A spare that was warm already is used
    up by a run and the next one is tried."""
    seen = len(re.findall(r"started spare worker", b.read_log()))
    for _ in range(attempts):
        deadline = time.monotonic() + BACKSTOP_S
        while True:
            found = re.findall(r"run=(\d+) started spare worker pid=(\d+)", b.read_log())
            if len(found) > seen:
                break
            assert time.monotonic() < deadline, b.read_log()[-3000:]
            time.sleep(0.001)
        rid, pid = found[seen]
        # Once it has started the interpreter's process, whose start
        # takes tens of milliseconds more.
        while not children(int(pid)):
            assert time.monotonic() < deadline, b.read_log()[-3000:]
            time.sleep(0.001)
        os.kill(int(pid), signal.SIGSTOP)
        if not re.search(r"run=%s spare pid=\d+ waits" % rid, b.read_log()):
            return rid, int(pid)
        os.kill(int(pid), signal.SIGCONT)
        run(b, "pass", tmpdir_k)
        seen = len(found)
    raise AssertionError("every spare was warm before it could be stopped")


def test_a_run_takes_a_spare_that_is_still_starting(make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    rid, pid = stopped_while_starting(b, tmpdir_k)
    c = b.client()
    c.exec("import sys; print(sys.argv, repr(sys.stdin.read()))", cwd=tmpdir_k)
    log = wait_log(b, r"took spare worker pid=%d, profile=\w+, still starting" % pid)
    # The code waits in the worker; no second interpreter starts for it.
    assert not re.search(r"run=\d+ started worker pid", log.split("still starting")[-1]), log
    os.kill(pid, signal.SIGCONT)
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert out["stdout"].decode() == "['-'] ''\n", out
    wait_log(b, r"spare pid=\d+ is ready: it takes its code")
    # Its runs come faster than spares start: the next ones skip the
    # preload, and still import what the snippet asks for.
    wait_log(b, r"spares start without the preload")
    wait_log(b, r"started spare worker pid=\d+ as \S+, profile=\w+, lean")
    spare_waits(b, 1)
    out, err, end = run(b, "import json\nprint(json.dumps([1]))", tmpdir_k)
    assert out == "[1]\n" and end["code"] == 0, (out, err, end)
    # A spare that waited for its run (past LEAN_WAITED_MS, 250 ms: the
    # sleep is a lower bound, a slower machine only waits longer): full
    # ones again.
    spare_waits(b, 2)
    time.sleep(0.3)
    out, _, end = run(b, "print('c')", tmpdir_k)
    assert out == "c\n" and took(b) == 3, b.read_log()
    wait_log(b, r"spares start with the preload: a spare waited for its run")


def test_a_spare_that_dies_before_it_takes_the_code_fails_the_run_at_step_warm(
        make_broker, tmpdir_k):
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    rid, pid = stopped_while_starting(b, tmpdir_k)
    c = b.client()
    c.exec("print('never')", cwd=tmpdir_k)
    wait_log(b, r"took spare worker pid=%d, profile=\w+, still starting" % pid)
    # Its interpreter (the child of the stopped supervisor) is killed.
    kids = children(pid)
    assert kids, "the spare's supervisor has no child"
    for k in kids:
        os.kill(k, signal.SIGKILL)
    os.kill(pid, signal.SIGCONT)
    out = c.until_end()
    c.close()
    end = out["end"]
    assert end["type"] == "error" and end.get("step") == "warm", end
    assert out["stdout"] == b"", out


def test_a_spare_whose_interpreter_died_after_warm_runs_the_code_cold_once(make_broker,
                                                                           tmpdir_k):
    """`ready` goes before the code reaches python3; when python3 turns out
    to be gone, a cold child runs the code and reports no second `ready`."""
    b = warm_broker(make_broker)
    run(b, "pass", tmpdir_k)
    py = spare_waits(b)
    worker = int(re.findall(r"started spare worker pid=(\d+)", b.read_log())[-1])
    os.kill(worker, signal.SIGSTOP)
    try:
        c = b.client()
        c.exec("import sys; print('ran', repr(sys.stdin.read()))", cwd=tmpdir_k)
        wait_log(b, r"took spare worker pid=%d" % worker)
        os.kill(py, signal.SIGKILL)
        wait_for(lambda: gone(py) or open("/proc/%d/stat" % py).read().split()[2] == "Z",
                 "the spare's python3 %d dead" % py)
    finally:
        os.kill(worker, signal.SIGCONT)
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert out["stdout"].decode() == "ran ''\n", out
    started = [m for m in out["frames"] if m["type"] == "started"]
    assert len(started) == 1, out["frames"]
    log = b.read_log()
    run_id = re.findall(r"run=(\d+) took spare worker pid=%d" % worker, log)[0]
    pids = re.findall(r"run=%s snippet pid=(\d+) running" % run_id, log)
    # The dead interpreter was seen before `ready`, which names the cold child.
    assert len(pids) == 1 and int(pids[0]) != py, log
