"""sandbox = docker against a real engine (podman --remote on a rootful API
service, runc): the gate's docker rows, what a snippet in the container can
and cannot do, warm reuse, the limits, the engine's failures, and the broker
stopping.  Every snippet goes through the real broker, worker and CLI or the
raw protocol client; every fact about containers is read from the engine.

The test image has python3-minimal only (no json, no shutil): snippets
print repr() and the tests read it back with ast.literal_eval.

Needs root (the broker starts as root; a root client's snippets run as the
test user kotoba-ct, root_user); skipped loudly otherwise, and when podman
cannot be installed (tests/container/setup.sh).
"""
import ast
import json
import os
import signal
import stat

from conftest import (CT_USER, IMAGE, container_snippet_processes, dead_socket,
                      docker_config, engine_clients, wait_for)


def show(obj):
    """The whole of a result, for an assertion's message (pytest would
    shorten a dict)."""
    return json.dumps(obj, default=repr, sort_keys=True)


def ran_in_container(r, uid):
    """The JSON of a run that ran in a container: says so and names it."""
    assert "error" not in r, show(r)
    assert r.get("where") == "container", show(r)
    name = r.get("container")
    assert isinstance(name, str) and name.startswith("kotoba-%d-" % uid), show(r)
    return name


# ---- the gate's docker rows --------------------------------------------------------

def test_plain_code_with_a_channel_runs_in_the_container_with_no_card(ctbroker, ct_user, cwd,
                                                                     engine):
    # --answer deny: a card, had one come, would end the run as denied
    r = ctbroker.run("print(6*7)", cwd, gate="channel")
    assert r["_status"] == 0, show(r)
    assert r["stdout"] == "42\n", show(r)
    assert r["approver"] == "container", show(r)
    assert r["decision"] == "ran", show(r)
    name = ran_in_container(r, ct_user.pw_uid)
    assert engine.inspect(name) is not None, "the engine has no container %s" % name

    # the raw protocol: no card frame at all, and the exit frame says where
    c = ctbroker.client(channel=True)
    c.exec("print(7*6)", cwd=cwd)
    cards = []
    out = c.until_end(on_card=lambda cl, m: (cards.append(m), cl.send(
        {"type": "answer", "card": m["card"], "choice": "deny"})))
    c.close()
    assert cards == [], show(cards)
    end = out["end"]
    assert end["type"] == "exit", show(end)
    assert out["stdout"] == b"42\n"
    assert end["approver"] == "container", show(end)
    assert end["where"] == "container", show(end)
    assert end["container"].startswith("kotoba-%d-" % ct_user.pw_uid), show(end)


def test_plain_code_without_a_channel_runs_unattended_in_the_container(ctbroker, ct_user, cwd):
    r = ctbroker.run("print('no channel')", cwd, gate="none")
    assert r["_status"] == 0, show(r)
    assert r["stdout"] == "no channel\n", show(r)
    assert r["approver"] == "unattended", show(r)
    ran_in_container(r, ct_user.pw_uid)


def test_labelled_code_with_a_channel_raises_a_card_and_once_runs_it_in_the_container(
        ctbroker, ct_user, cwd):
    code = "open('card-ran.txt', 'w').write('yes')\nprint('wrote')\n"
    c = ctbroker.client(channel=True)
    c.exec(code, cwd=cwd)
    cards = []

    def once(cl, m):
        cards.append(m)
        cl.send({"type": "answer", "card": m["card"], "choice": "once"})

    out = c.until_end(on_card=once)
    c.close()
    assert len(cards) == 1, show(out["frames"])
    assert cards[0]["snippet"] == code
    assert "fs-write" in [l["label"] for l in cards[0]["labels"]], cards[0]
    end = out["end"]
    assert end["type"] == "exit", show(end)
    assert end.get("code") == 0, show((end, out["stderr"]))
    assert out["stdout"] == b"wrote\n"
    assert end["approver"] == "user", show(end)
    assert end["where"] == "container", show(end)
    assert end["container"].startswith("kotoba-%d-" % ct_user.pw_uid), show(end)
    path = os.path.join(cwd, "card-ran.txt")
    with open(path) as f:
        assert f.read() == "yes"
    assert os.stat(path).st_uid == ct_user.pw_uid


def test_labelled_code_without_a_channel_is_refused(ctbroker, ct_user, cwd, engine):
    before = engine.names(ct_user.pw_uid)
    r = ctbroker.run("open('refused.txt', 'w').write('x')\n", cwd, gate="none")
    assert r["_status"] == 126, show(r)
    assert r["error"]["code"] == "refused", show(r)
    assert not os.path.exists(os.path.join(cwd, "refused.txt"))
    assert engine.names(ct_user.pw_uid) - before == set(), "a refused snippet started a container"


# The output directory named first, with a fallback: on the host the
# pre-screen lets it through (the host's sandbox keeps a run nobody read in
# its own places: tests/integration/test_output_files.py); here the working
# directory is the user's project, mounted read-write, so it is fs-write.
FALLBACK = "import os\nopen(os.environ.get('KOTOBA_OUTPUT_DIR') or 'notes.txt', 'w').write('x')\n"


def test_a_write_naming_the_output_directory_is_labelled_fs_write_in_the_container(
        ctbroker, ct_user, cwd, engine):
    c = ctbroker.client(channel=True)
    c.exec(FALLBACK, cwd=cwd)
    cards = []
    out = c.until_end(on_card=lambda cl, m: (cards.append(m), cl.send(
        {"type": "answer", "card": m["card"], "choice": "deny"})))
    c.close()
    assert len(cards) == 1, show(out["frames"])
    assert [l["label"] for l in cards[0]["labels"]] == ["fs-write"], show(cards[0])
    assert out["end"]["type"] == "error" and out["end"]["code"] == "denied", show(out["end"])

    before = engine.names(ct_user.pw_uid)
    r = ctbroker.run(FALLBACK, cwd, gate="none")
    assert r["_status"] == 126, show(r)
    assert r["error"]["code"] == "refused", show(r)
    assert engine.names(ct_user.pw_uid) - before == set(), "a refused snippet started a container"
    assert not os.path.exists(os.path.join(cwd, "notes.txt"))

# ---- what the snippet is, sees and can touch ---------------------------------------------

def test_the_snippet_runs_as_the_user_with_no_capabilities(ctbroker, ct_user, cwd):
    code = ("import os\n"
            "st = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
            "print(repr({'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(),\n"
            "    'egid': os.getegid(), 'cwd': os.getcwd(),\n"
            "    'capeff': st['CapEff'].strip(), 'capprm': st['CapPrm'].strip(),\n"
            "    'nnp': st['NoNewPrivs'].strip()}))\n")
    r = ctbroker.run(code, cwd, gate="none")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    got = ast.literal_eval(r["stdout"])
    assert (got["uid"], got["euid"]) == (ct_user.pw_uid, ct_user.pw_uid), show(got)
    assert (got["gid"], got["egid"]) == (ct_user.pw_gid, ct_user.pw_gid), show(got)
    assert got["cwd"] == cwd, show(got)
    assert int(got["capeff"], 16) == 0 and int(got["capprm"], 16) == 0, show(got)
    assert got["nnp"] == "1", show(got)


def test_the_snippet_sees_no_network(ctbroker, ct_user, cwd):
    r = ctbroker.run("import socket\nprint(sorted(n for _, n in socket.if_nameindex()))\n",
                     cwd, gate="none")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    assert r["stdout"] == "['lo']\n", show(r)

    # connecting out is labelled (raw-socket): a card, answered once
    code = ("import socket\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 53), timeout=10)\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print('errno', e.errno)\n"
            "try:\n"
            "    socket.getaddrinfo('deb.debian.org', 80)\n"
            "    print('resolved')\n"
            "except OSError as e:\n"
            "    print('no dns')\n")
    r = ctbroker.run(code, cwd, gate="approve")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    # ENETUNREACH (101): no route at all, not a firewall's timeout
    assert r["stdout"] == "errno 101\nno dns\n", show(r)


def test_the_snippet_cannot_write_outside_its_working_directory(ctbroker, ct_user, make_cwd):
    cwd = make_cwd()
    sibling = make_cwd()  # another directory of the same user on the host
    with open(os.path.join(sibling, "host-file"), "w") as f:
        f.write("host")
    code = ("import errno, os\n"
            "res = {}\n"
            "for p in ('/etc/kotoba-probe', '/kotoba-probe', '/usr/kotoba-probe',\n"
            "          '/var/tmp/kotoba-probe', '/run/kotoba-probe', %r):\n"
            "    try:\n"
            "        open(p, 'w').close()\n"
            "        res[p] = 'written'\n"
            "    except OSError as e:\n"
            "        res[p] = errno.errorcode.get(e.errno, str(e.errno))\n"
            "open('/tmp/probe', 'w').write('x' * 1024)\n"
            "tmp = [l.split() for l in open('/proc/mounts') if l.split()[1] == '/tmp']\n"
            "sv = os.statvfs('/tmp')\n"
            "res['tmp_fstype'] = tmp[-1][2] if tmp else None\n"
            "res['tmp_bytes'] = sv.f_blocks * sv.f_frsize\n"
            "res['sibling_seen'] = os.path.exists(%r)\n"
            "print(repr(res))\n" % (os.path.join(sibling, "host-file"), sibling))
    r = ctbroker.run(code, cwd, gate="approve")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    got = ast.literal_eval(r["stdout"])
    # EROFS, not EACCES: the root file system is mounted read-only (a
    # writable one would refuse a non-root user with EACCES)
    for p in ("/etc/kotoba-probe", "/kotoba-probe", "/usr/kotoba-probe"):
        assert got[p] == "EROFS", show(got)
    # podman's --read-only also puts a writable tmpfs on /var/tmp and /run
    # unless --read-only-tmpfs=false: only /tmp and the working directory
    # are meant to take writes
    for p in ("/var/tmp/kotoba-probe", "/run/kotoba-probe"):
        assert got[p] in ("EROFS", "EACCES"), show(got)
    # the other host directory is not there at all
    assert got[os.path.join(sibling, "host-file")] in ("ENOENT", "EROFS"), show(got)
    assert got["sibling_seen"] is False, show(got)
    with open(os.path.join(sibling, "host-file")) as f:
        assert f.read() == "host"
    # /tmp is a small tmpfs of its own
    assert got["tmp_fstype"] == "tmpfs", show(got)
    assert 0 < got["tmp_bytes"] <= 256 << 20, show(got)
    assert not os.path.exists("/tmp/probe") or os.stat("/tmp/probe").st_uid != ct_user.pw_uid


def test_a_file_written_in_the_working_directory_is_the_users_on_the_host(ctbroker, ct_user, cwd):
    r = ctbroker.run("open('made-inside.txt', 'w').write('from the container\\n')\n", cwd,
                     gate="approve")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    path = os.path.join(cwd, "made-inside.txt")
    st = os.stat(path)
    assert (st.st_uid, st.st_gid) == (ct_user.pw_uid, ct_user.pw_gid)
    assert stat.S_ISREG(st.st_mode)
    with open(path) as f:
        assert f.read() == "from the container\n"


def test_a_file_deleted_in_the_working_directory_is_gone_on_the_host(ctbroker, ct_user, cwd):
    victim = os.path.join(cwd, "victim.txt")
    with open(victim, "w") as f:
        f.write("delete me")
    os.chown(victim, ct_user.pw_uid, ct_user.pw_gid)
    r = ctbroker.run("import os\nos.remove('victim.txt')\nprint('removed')\n", cwd,
                     gate="approve")
    assert r["_status"] == 0, show(r)
    assert r["stdout"] == "removed\n", show(r)
    ran_in_container(r, ct_user.pw_uid)
    assert not os.path.exists(victim)


def test_a_working_directory_under_tmp_is_the_hosts_not_the_containers_tmp(ctbroker, ct_user,
                                                                          make_cwd):
    cwd = make_cwd(base="/tmp")
    r = ctbroker.run("import os\nopen('in-tmp.txt', 'w').write('x')\nprint(os.getcwd())\n", cwd,
                     gate="approve")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    assert r["stdout"] == cwd + "\n", show(r)
    assert os.stat(os.path.join(cwd, "in-tmp.txt")).st_uid == ct_user.pw_uid


# ---- warm containers ------------------------------------------------------------------

def test_two_runs_in_one_directory_share_a_warm_container(ctbroker, ct_user, cwd, engine, capsys):
    first = ctbroker.run("print(1)", cwd, gate="none")
    second = ctbroker.run("print(2)", cwd, gate="none")
    assert (first["_status"], second["_status"]) == (0, 0), show((first, second))
    a, b = ran_in_container(first, ct_user.pw_uid), ran_in_container(second, ct_user.pw_uid)
    with capsys.disabled():
        print("\n  docker mode: cold run %d ms (CLI %.2f s), warm run %d ms (CLI %.2f s)"
              % (first["duration_ms"], first["_wall_s"], second["duration_ms"],
                 second["_wall_s"]))
    assert a == b, show((first, second))
    assert engine.running(a)


def test_another_working_directory_gets_another_container(ctbroker, ct_user, make_cwd, engine):
    one, two = make_cwd(), make_cwd()
    r1 = ctbroker.run("import os; print(os.getcwd())", one, gate="none")
    r2 = ctbroker.run("import os; print(os.getcwd())", two, gate="none")
    assert (r1["stdout"], r2["stdout"]) == (one + "\n", two + "\n"), show((r1, r2))
    a, b = ran_in_container(r1, ct_user.pw_uid), ran_in_container(r2, ct_user.pw_uid)
    assert a != b
    assert engine.inspect(a)["Id"] != engine.inspect(b)["Id"]


# ---- the run's output directory ------------------------------------------------------------

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5f6a3a60000000049454e44ae426082")

# What the directory is when the snippet starts, then a figure, a text file
# and what must not come back: a symlink (to a file the snippet may read),
# a FIFO and a subdirectory with a file in it.
WRITES_FILES = (
    "import os, stat\n"
    "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
    "st = os.lstat(d)\n"
    "print(repr((d, oct(stat.S_IMODE(st.st_mode)), stat.S_ISDIR(st.st_mode), os.listdir(d))))\n"
    "with open(os.path.join(d, 'plot.png'), 'wb') as f:\n"
    "    f.write(bytes.fromhex(%r))\n"
    "with open(os.path.join(d, 'notes.txt'), 'w') as f:\n"
    "    f.write('seen in the container')\n"
    "os.symlink('/etc/passwd', os.path.join(d, 'link.txt'))\n"
    "os.mkfifo(os.path.join(d, 'fifo'))\n"
    "os.mkdir(os.path.join(d, 'sub'))\n"
    "open(os.path.join(d, 'sub', 'inner.txt'), 'w').write('inner')\n" % PNG.hex())

OUT_DIR = "/tmp/.kotoba-out"
LISTS_OUT_DIR = "import os\nprint(repr(sorted(os.listdir(os.environ['KOTOBA_OUTPUT_DIR']))))\n"


def run_frames(ctbroker, code, cwd):
    """The raw protocol, any card answered once: the frames to the end."""
    c = ctbroker.client(channel=True)
    c.exec(code, cwd=cwd)
    out = c.until_end(on_card=lambda cl, m: cl.send(
        {"type": "answer", "card": m["card"], "choice": "once"}))
    c.close()
    return out


def files_of(out):
    return [(m["name"], m["data"]) for m in out["frames"] if m["type"] == "file"]


def stdout_of(out):
    return b"".join(m["data"] for m in out["frames"]
                    if m["type"] == "output" and m["stream"] == "stdout").decode()


def out_dir_in(engine, name):
    """What the container's output directory holds, read by the engine."""
    p = engine.podman("exec", name, "python3", "-I", "-c",
                      "import os; print(repr(sorted(os.listdir(%r))))" % OUT_DIR)
    return ast.literal_eval(p.stdout.strip())


def test_files_left_in_the_output_directory_come_back_from_the_container(ctbroker, ct_user,
                                                                          cwd, engine):
    out = run_frames(ctbroker, WRITES_FILES, cwd)
    end = out["end"]
    assert end["type"] == "exit" and end["code"] == 0, show(out["frames"])
    assert end.get("where") == "container", show(end)
    d, mode, is_dir, listing = ast.literal_eval(stdout_of(out).strip())
    # In the container's own /tmp, its own mount, empty for this run.
    assert d == OUT_DIR, d
    assert (mode, is_dir, listing) == ("0o700", True, []), (mode, is_dir, listing)
    assert not os.path.exists(d), "the container's directory is on the host: %s" % d
    # Only the regular files, in name order, before the exit; the rest counted.
    assert files_of(out) == [("notes.txt", b"seen in the container"), ("plot.png", PNG)], \
        show(out["frames"])
    types = [m["type"] for m in out["frames"]]
    assert types.index("file") < types.index("exit")
    assert end["files_left_out"] == 3, show(end)


def test_the_next_run_in_the_container_finds_none_of_the_last_ones_files(ctbroker, ct_user,
                                                                          cwd, engine):
    first = run_frames(ctbroker, WRITES_FILES, cwd)
    assert len(files_of(first)) == 2, show(first["frames"])
    name = first["end"]["container"]
    # The first's files are still in the container until the next run starts.
    assert out_dir_in(engine, name) == ["fifo", "link.txt", "notes.txt", "plot.png", "sub"]
    second = run_frames(ctbroker, LISTS_OUT_DIR, cwd)
    assert second["end"]["container"] == name, show(second["end"])
    assert ast.literal_eval(stdout_of(second).strip()) == [], show(second["frames"])
    assert files_of(second) == [] and "files_left_out" not in second["end"], \
        show(second["frames"])
    assert out_dir_in(engine, name) == [], "the first run's files stayed"


def test_the_output_directory_cannot_be_swapped_for_a_symlink_to_what_the_user_cannot_read(
        ctbroker, ct_user, cwd):
    """The engine's copy reads as root: a symlink in place of the directory
    would make it read what the container's user may not.  The control: the
    snippet itself is refused the file."""
    secret = os.path.join(cwd, "root-only.txt")
    with open(secret, "w") as f:
        f.write("ROOT ONLY\n")
    os.chmod(secret, 0o600)
    code = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "try:\n"
            "    open('root-only.txt').read()\n"
            "    print('read')\n"
            "except PermissionError:\n"
            "    print('refused')\n"
            "try:\n"
            "    os.rename(d, d + '.old')\n"
            "    os.symlink(os.getcwd(), d)\n"
            "    print('swapped')\n"
            "except OSError:\n"
            "    print('kept')\n"
            "    os.symlink(os.getcwd(), os.path.join(d, 'cwd'))\n"
            "    os.symlink(os.path.abspath('root-only.txt'), os.path.join(d, 'root-only.txt'))\n")
    out = run_frames(ctbroker, code, cwd)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, show(out["frames"])
    assert stdout_of(out).split() == ["refused", "kept"], show(out["frames"])
    assert not any(b"ROOT ONLY" in data for _, data in files_of(out)), show(out["frames"])
    assert files_of(out) == [] and out["end"]["files_left_out"] == 2, show(out["frames"])


def test_a_copy_that_stops_halfway_sends_none_of_the_files(make_ctbroker, ct_user, cwd):
    """A sparse file costs the container's tmpfs nothing, but the copy
    writes it out in full on the host: FSIZE stops the copy there, after
    the file before it was copied.  Nothing may come back: the copy failed
    and could have stopped inside any file.  The control: the same small
    file alone comes back."""
    b = make_ctbroker(docker_config() + "[limits]\nfile_size = 1M\n").start()
    small = ("import os\n"
             "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
             "open(os.path.join(d, 'a.txt'), 'w').write('first')\n")
    sparse = small + ("with open(os.path.join(d, 'z.bin'), 'wb') as f:\n"
                      "    f.truncate(8 << 20)\n")
    alone = run_frames(b, small, cwd)
    assert files_of(alone) == [("a.txt", b"first")], show(alone["frames"])
    out = run_frames(b, sparse, cwd)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, show(out["frames"])
    sent = [(name, len(data)) for name, data in files_of(out)]
    assert sent == [] and "files_left_out" not in out["end"], (sent, show(out["end"]))


# ---- limits ------------------------------------------------------------------------------

def test_two_snippets_at_once_in_one_directory_get_a_container_each(ctbroker, ct_user, cwd):
    # The first holds its container until it reads a file the test writes.
    go = os.path.join(cwd, "go")
    waits = ("import os, time\nprint('waiting', flush=True)\n"
             "while not os.path.exists('go'):\n    time.sleep(0.05)\nprint('went')\n")
    c = ctbroker.client(channel=False)
    c.exec(waits, cwd=cwd)
    m = c.recv()
    while m["type"] != "output":
        assert m["type"] == "started", m
        m = c.recv()
    other = ctbroker.run("print('meanwhile')", cwd, gate="none")
    assert other["_status"] == 0 and other["stdout"] == "meanwhile\n", show(other)
    with open(go, "w"):
        pass
    end = c.until_end()["end"]
    c.close()
    assert end["type"] == "exit" and end["code"] == 0, show(end)
    assert end["where"] == "container", show(end)
    # one snippet at a time per container: the second got another one
    assert ran_in_container(other, ct_user.pw_uid) != end["container"], show([other, end])


def test_an_idle_container_is_stopped(make_ctbroker, cwd, ct_user, engine):
    b = make_ctbroker(docker_config(idle="1s")).start()
    r = b.run("print('once')", cwd, gate="none")
    assert r["_status"] == 0, show(r)
    name = ran_in_container(r, ct_user.pw_uid)
    wait_for(lambda: not engine.inspect(name), "idle container %s still there" % name)
    assert b.alive()
    again = b.run("print('twice')", cwd, gate="none")
    assert again["_status"] == 0 and again["stdout"] == "twice\n", show(again)
    assert ran_in_container(again, ct_user.pw_uid) != name


def test_a_timeout_leaves_no_process_and_the_next_run_gets_a_new_container(ctbroker, ct_user,
                                                                            cwd, engine):
    uid = ct_user.pw_uid
    warm = ctbroker.run("print('warm')", cwd, gate="none")
    assert warm["_status"] == 0, show(warm)
    first = ran_in_container(warm, uid)
    first_id = engine.inspect(first)["Id"]

    # a file in its output directory does not come back: the container is
    # removed, not copied from
    r = ctbroker.run("import os, time\n"
                     "open(os.environ['KOTOBA_OUTPUT_DIR'] + '/partial.txt', 'w').write('x')\n"
                     "print(os.getpid(), flush=True)\ntime.sleep(60)\n", cwd,
                     gate="approve", timeout=2)
    assert r["_status"] == 124, show(r)
    assert r["timed_out"] is True, show(r)
    assert r["limit"] == "wall", show(r)
    assert r.get("files", []) == [] and r.get("files_left_out", 0) == 0, show(r)
    timed_out = ran_in_container(r, uid)
    assert r["stdout"].strip().isdigit(), r  # it did start, in the container

    # nothing of it is left: no process in a container but the first ones,
    # no engine client, and the container it ran in is not running
    wait_for(lambda: not container_snippet_processes(uid),
             "processes of %s still in a container: %s" % (CT_USER, container_snippet_processes(uid)))
    wait_for(lambda: not engine_clients(uid), "podman clients of %s still running" % CT_USER)
    wait_for(lambda: not engine.running(timed_out), "container %s still running" % timed_out)

    after = ctbroker.run("print('after')", cwd, gate="none")
    assert after["_status"] == 0, show(after)
    assert after["stdout"] == "after\n", show(after)
    fresh = ran_in_container(after, uid)
    assert fresh != timed_out
    assert engine.inspect(fresh)["Id"] != first_id


def test_allocating_past_the_memory_limit_ends_with_limit_memory(ctbroker, ct_user, cwd):
    r = ctbroker.run("x = b'x' * (400 << 20)\nprint(len(x))\n", cwd, gate="none")
    ran_in_container(r, ct_user.pw_uid)
    assert r["limit"] == "memory", show(r)
    assert r["stdout"] == "", show(r)
    assert r["timed_out"] is False, show(r)
    assert r["_status"] != 0, show(r)

    again = ctbroker.run("print('still works')", cwd, gate="none")
    assert again["_status"] == 0, show(again)
    assert again["stdout"] == "still works\n", show(again)


# ---- the engine's failures -----------------------------------------------------------------

WRITES_A_FILE = "open('ran-on-host.txt', 'w').write('ran')\nprint('ran')\n"


def nothing_ran(r, cwd):
    assert r["stdout"] == "", show(r)
    assert not os.path.exists(os.path.join(cwd, "ran-on-host.txt")), \
        "the snippet ran somewhere that writes the host's directory"


def test_an_engine_that_does_not_answer_fails_the_engine_step_and_runs_nothing(
        make_ctbroker, make_cwd):
    cwd = make_cwd()
    sock = dead_socket(make_cwd())
    b = make_ctbroker(docker_config(url="unix://" + sock)).start()
    for gate in ("approve", "none"):
        code = WRITES_A_FILE if gate == "approve" else "print('ran')\n"
        r = b.run(code, cwd, gate=gate)
        assert r["_status"] == 127, show(r)
        assert r["error"]["code"] == "setup-failed", show(r)
        assert r["error"].get("step") == "engine", show(r)
        nothing_ran(r, cwd)
    assert b.alive()
    wait_for(lambda: "checked as %s (root_user): step 'engine' failed" % CT_USER
             in b.read_log(), "the check at start named the engine step")


def test_the_broker_checks_the_image_at_start(ctbroker):
    wait_for(lambda: "checked as %s (root_user): image %s is there" % (CT_USER, IMAGE)
             in ctbroker.read_log(), "the check at start found the image")


def test_a_missing_image_fails_naming_the_image_and_runs_nothing(make_ctbroker, cwd, engine,
                                                                 ct_user):
    before = engine.names(ct_user.pw_uid)
    b = make_ctbroker(docker_config(image="localhost/nope:1")).start()
    wait_for(lambda: "checked as %s (root_user): image localhost/nope:1 is missing"
             % CT_USER in b.read_log(), "the check at start missed the image")
    r = b.run(WRITES_A_FILE, cwd, gate="approve")
    assert r["_status"] == 127, show(r)
    assert r["error"]["code"] == "setup-failed", show(r)
    assert r["error"].get("step") == "image", show(r)
    assert "localhost/nope:1" in r["error"]["message"], show(r)
    nothing_ran(r, cwd)
    assert engine.names(ct_user.pw_uid) - before == set()


def test_a_missing_engine_cli_is_a_clear_error_and_runs_nothing(make_ctbroker, cwd):
    b = make_ctbroker(docker_config(cli="/nonexistent/podman"))
    try:
        b.start()
    except RuntimeError as e:
        # refusing to start at all is clear too, if it names the command
        assert "/nonexistent/podman" in str(e), str(e)
        return
    r = b.run(WRITES_A_FILE, cwd, gate="approve")
    assert "error" in r, show(r)
    assert r["_status"] in (126, 127), show(r)
    assert "/nonexistent/podman" in r["error"]["message"], show(r)
    nothing_ran(r, cwd)
    assert b.alive()


# ---- the broker stopping --------------------------------------------------------------------

def test_sigterm_stops_the_brokers_containers(make_ctbroker, make_cwd, ct_user, engine):
    uid = ct_user.pw_uid
    before = engine.names(uid)
    b = make_ctbroker(docker_config()).start()
    idle = set()
    for _ in range(2):
        r = b.run("print('idle after this')", make_cwd(), gate="none")
        assert r["_status"] == 0, show(r)
        idle.add(ran_in_container(r, uid))
    assert len(idle) == 2 and all(engine.running(n) for n in idle), show(idle)

    # one more, busy when the TERM comes
    c = b.client(channel=False)
    c.exec("import time\nprint('busy', flush=True)\ntime.sleep(60)\n", cwd=make_cwd())
    m = c.recv()
    while m["type"] != "output":
        assert m["type"] == "started", m
        m = c.recv()
    busy = engine.names(uid, running_only=True) - before - idle
    assert len(busy) == 1, show(busy)

    b.proc.send_signal(signal.SIGTERM)
    rc = b.proc.wait(30)
    assert rc == 0, "the broker ended with %d on SIGTERM:\n%s" % (rc, b.read_log()[-3000:])
    c.close()
    mine = idle | busy
    wait_for(lambda: not any(engine.inspect(n) for n in mine),
             "containers of the stopped broker still there: %s"
             % sorted(n for n in mine if engine.inspect(n)))
    assert engine.names(uid) - before == set()
    wait_for(lambda: not container_snippet_processes(uid),
             "processes of %s still in a container" % CT_USER)


def test_the_working_directorys_env_files_are_masked_in_the_container(ctbroker, ct_user,
                                                                       make_cwd):
    """.env and .env.* of the working directory read as empty there (a file
    mount cannot refuse reads), a .env directory cannot be entered, and the
    other files of the directory are untouched; the host's files stay."""
    cwd = make_cwd()
    for name, text in ((".env", "TOKEN=planted\n"), (".env.local", "TOKEN=planted\n"),
                       ("notes.txt", "plain\n")):
        path = os.path.join(cwd, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, ct_user.pw_uid, ct_user.pw_gid)
    os.makedirs(os.path.join(cwd, ".env.d"))
    os.chown(os.path.join(cwd, ".env.d"), ct_user.pw_uid, ct_user.pw_gid)
    # The names are built at run time: the pre-screen must not refuse it.
    code = ("import os\n"
            "d = '.' + 'env'\n"
            "out = {}\n"
            "for n in (d, d + '.local', 'notes.txt'):\n"
            "    out[n] = open(n).read()\n"
            "try:\n"
            "    os.listdir(d + '.d')\n"
            "    out['dir'] = 'listed'\n"
            "except PermissionError:\n"
            "    out['dir'] = 'refused'\n"
            "print(repr(out))\n")
    r = ctbroker.run(code, cwd, gate="none")
    assert r["_status"] == 0, show(r)
    got = ast.literal_eval(r["stdout"])
    assert got == {".env": "", ".env.local": "", "notes.txt": "plain\n", "dir": "refused"}, \
        show(r)
    with open(os.path.join(cwd, ".env")) as f:
        assert f.read() == "TOKEN=planted\n"


def test_the_working_directory_s_modules_import_in_the_container(ctbroker, ct_user, cwd):
    """A module the agent wrote in the working directory imports in the
    container as on the host, after the standard library (a textwrap.py
    there is not textwrap)."""
    files = {"helpers.py": "def slugify(s):\n    return s.lower().replace(' ', '-')\n",
             "textwrap.py": "raise SystemExit('the textwrap.py of the working directory ran')\n"}
    for name, text in files.items():
        path = os.path.join(cwd, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, ct_user.pw_uid, ct_user.pw_gid)
    code = ("import os, sys, textwrap\nfrom helpers import slugify\n"
            "print(slugify('Hello World'), sys.path[-1] == os.getcwd(), textwrap.shorten('a b', 9))\n")
    r = ctbroker.run(code, cwd, gate="none")
    assert r["_status"] == 0 and r["stdout"] == "hello-world True a b\n", show(r)


def test_code_planted_in_the_working_directory_does_not_run_in_the_container(ctbroker, ct_user,
                                                                              cwd):
    """python3 starts isolated (-I) in the container too: a sitecustomize,
    usercustomize, .pth file or a textwrap.py shadowing the standard library
    in the working directory (which is on sys.path for a plain `python3 -`)
    runs nothing; the snippet itself runs and gets the real textwrap (the
    test image has python3-minimal, without json)."""
    marker = os.path.join(cwd, "planted-ran")
    payload = "open(%r, 'a').write(__name__ + '\\n')\n" % marker
    files = {"sitecustomize.py": payload, "usercustomize.py": payload,
             "textwrap.py": payload + "def shorten(*a, **k): return 'shadowed'\n",
             "evil.pth": "import os; " + payload.strip() + "\n"}
    for name, text in files.items():
        path = os.path.join(cwd, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, ct_user.pw_uid, ct_user.pw_gid)
    code = "import textwrap, sys\nprint(textwrap.shorten('a b', 9), sys.flags.isolated)\n"
    for gate in ("none", "approve"):
        r = ctbroker.run(code, cwd, gate=gate)
        assert r["_status"] == 0 and r["stdout"] == "a b 1\n", show(r)
        assert not os.path.exists(marker), (gate, open(marker).read())


def test_modes_and_times_change_in_the_container_s_own_places(ctbroker, ct_user, cwd):
    """In the container a snippet nobody read changes modes and times,
    renames and deletes in /tmp, /dev/shm and its working directory, as
    python3 bare does (the engine's own profile); a setuid bit it may set
    there gives nothing: both tmpfs are nosuid, and no_new_privileges
    holds."""
    # names built at run time: past the pre-screen, which would ask first
    code = ("import builtins, errno, os, posix, stat\n"
            "def f(n):\n"
            "    return getattr(posix, n[:2] + n[2:])\n"
            "res = {}\n"
            "for d in ('/tmp', '/dev/shm', os.getcwd()):\n"
            "    p = os.path.join(d, 'kotoba-attr')\n"
            "    try:\n"
            "        builtins.__dict__['op' + 'en'](p, 'w').close()\n"
            "        f('chmod')(p, 0o640)\n"
            "        f('utime')(p, (1000000000, 1000000000))\n"
            "        st = os.stat(p)\n"
            "        f('rename')(p, p + '.2')\n"
            "        f('unlink')(p + '.2')\n"
            "        res[d] = (oct(stat.S_IMODE(st.st_mode)), int(st.st_mtime))\n"
            "    except OSError as e:\n"
            "        res[d] = errno.errorcode.get(e.errno, str(e.errno))\n"
            "res['nosuid'] = sorted(l.split()[1] for l in open('/proc/mounts')\n"
            "                       if l.split()[1] in ('/tmp', '/dev/shm')\n"
            "                       and 'nosuid' in l.split()[3].split(','))\n"
            "print(repr(res))\n")
    r = ctbroker.run(code, cwd, gate="none")
    assert r["_status"] == 0, show(r)
    ran_in_container(r, ct_user.pw_uid)
    got = ast.literal_eval(r["stdout"])
    for d in ("/tmp", "/dev/shm", cwd):
        assert got[d] == ("0o640", 1000000000), show(got)
    assert got["nosuid"] == ["/dev/shm", "/tmp"], show(got)
    assert not os.path.exists(os.path.join(cwd, "kotoba-attr.2"))
