"""The secret set end to end ([sandbox] secrets, secret_paths): what the
worker masks in an unattended run, what `exit` and the log say, and that
an approved run (a person read the snippet) sees everything.  The
hostile spellings are the escape suite's (tests/escape/cases/secret_*)."""
import os
import pwd
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import Broker, wait_until

PLANTED = "kotoba-integration-secret\n"
# Walks past the pre-screen: the path comes from the environment.
READ = ("import os\n"
        "try:\n"
        "    print(open(os.environ['SECRET_AT']).read(), end='')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno)\n")


def snippet_user():
    """Who root's snippets run as (the default root_user)."""
    return pwd.getpwnam("nobody") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())


def plant(d):
    """A secret file and a secret directory holding one, the snippet user's
    own, so that only the sandbox can keep a snippet out."""
    u = snippet_user()
    os.makedirs(os.path.join(d, "vault"))
    for p, text in [(os.path.join(d, "token"), PLANTED),
                    (os.path.join(d, "vault", "key"), PLANTED)]:
        with open(p, "w") as f:
            f.write(text)
    for p in [os.path.join(d, "token"), os.path.join(d, "vault"),
              os.path.join(d, "vault", "key")]:
        if os.geteuid() == 0:
            os.chown(p, u.pw_uid, u.pw_gid)
    return os.path.join(d, "token"), os.path.join(d, "vault", "key")


def config(d, secrets="yes"):
    return ("[sandbox]\nsecrets = %s\nsecret_paths = %s/token, %s/vault\n"
            % (secrets, d, d))


def run(b, code, path, channel, cwd):
    """One exec over the raw protocol; returns (stdout, the exit or error frame)."""
    c = b.client(channel=channel)
    c.exec(code.replace("os.environ['SECRET_AT']", repr(path)), cwd=cwd)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                      "choice": "once"}))
    c.sock.close()
    return out["stdout"].decode(), out["end"]


def test_unattended_read_is_refused_and_exit_says_masked(make_broker, tmpdir_k):
    token, key = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    for path in (token, key):
        out, end = run(b, READ, path, False, tmpdir_k)
        assert end["type"] == "exit", end
        assert out == "PermissionError 13\n", out
        assert end["secrets"] == "masked", end
    assert "secrets masked" in b.read_log()


def test_approved_run_reads_them_and_exit_says_unmasked(make_broker, tmpdir_k):
    token, key = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    for path in (token, key):
        out, end = run(b, READ, path, True, tmpdir_k)
        assert end["type"] == "exit", end
        assert out == PLANTED, out
        assert end["profile"] == "approved" and end["secrets"] == "unmasked", end


def test_secrets_off_is_said_at_start_in_the_log_and_in_exit(make_broker, tmpdir_k):
    token, _ = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k, "off")).start()
    out, end = run(b, READ, token, False, tmpdir_k)
    assert out == PLANTED, out
    assert end["secrets"] == "off", end
    log = b.read_log()
    assert "[sandbox] secrets = off" in log, log
    assert "secrets off" in log, log
    # ... and in the audit trail, before the run: an epoch row; a reload
    # that turns it back on records that too.
    with open(os.path.join(b.dir, "broker.conf"), "w") as f:
        f.write(config(tmpdir_k, "yes"))
    b.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "configuration reloaded" in b.read_log(), "the reload's log line")
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(b.state, "kotoba.db"), uri=True)
    rows = db.execute("SELECT event, decision FROM audit ORDER BY seq").fetchall()
    db.close()
    epochs = [d for e, d in rows if e == "epoch"]
    assert epochs == ["secrets-off", "secrets-on"], (rows, b.read_log()[-1500:])
    assert rows.index(("epoch", "secrets-off")) < rows.index(("exit", "ran")), rows
    out, end = run(b, READ, token, False, tmpdir_k)
    assert end["secrets"] == "masked" and PLANTED not in out, (out, end)


def test_a_working_directory_inside_a_secret_is_refused(make_broker, tmpdir_k):
    plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    out, end = run(b, "print('ran')\n", "", False, os.path.join(tmpdir_k, "vault"))
    assert end["type"] == "error" and end["code"] == "bad-cwd", end
    assert end["errno"] == 13, end
    out, end = run(b, "print('ran')\n", "", True, os.path.join(tmpdir_k, "vault"))
    assert out == "ran\n", end


def test_name_lookups_and_the_users_files_still_work(make_broker, tmpdir_k):
    plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    code = ("import os, pwd\n"
            "print(pwd.getpwuid(os.getuid()).pw_name)\n"
            "print(sorted(os.listdir('.'))[:3])\n")
    out, end = run(b, code, "", False, tmpdir_k)
    assert end["type"] == "exit" and end["code"] == 0, (out, end)
    assert out.splitlines()[0] == snippet_user().pw_name, out


def test_a_mask_over_the_directory_holding_the_first_one_leaves_the_rest_masked(
        make_broker, tmpdir_k):
    """The first secret directory carries the masks' sources; a later
    secret above it must not cut the later masks off from them."""
    token, key = plant(tmpdir_k)
    inner = os.path.join(tmpdir_k, "vault", "inner")
    os.makedirs(inner)
    if os.geteuid() == 0:
        u = snippet_user()
        os.chown(inner, u.pw_uid, u.pw_gid)
    b = make_broker(config="[sandbox]\nsecret_paths = %s %s/vault %s/token\n"
                    % (inner, tmpdir_k, tmpdir_k)).start()
    for path in (token, key):
        out, end = run(b, READ, path, False, tmpdir_k)
        assert out == "PermissionError 13\n", (path, out)


def test_another_users_symlink_above_the_working_directory_masks_nothing(
        make_broker, tmpdir_k):
    """A `.env.*` symlink another user made in a shared directory above the
    working directory (/tmp, say) would aim a mask at any file the snippet
    user reads (python3's standard library: no run could start).  Made by
    the snippet's user, the same link is followed and its target masked,
    which proves it is the link's owner that decides."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a symlink owned by another user")
    u = snippet_user()
    other = pwd.getpwnam("daemon")
    shared = os.path.join(tmpdir_k, "shared")
    work = os.path.join(shared, "work")
    os.makedirs(work)
    os.chmod(shared, 0o1777)
    notes = os.path.join(work, "notes.txt")
    with open(notes, "w") as f:
        f.write("notes\n")
    for p in (work, notes):
        os.chown(p, u.pw_uid, u.pw_gid)
    link = os.path.join(shared, ".env.planted")
    os.symlink(notes, link)
    b = make_broker(config="").start()
    for owner, expect in ((other, "notes\n"), (u, "PermissionError 13\n")):
        os.lchown(link, owner.pw_uid, owner.pw_gid)
        out, end = run(b, READ, notes, False, work)
        assert end["type"] == "exit" and end["code"] == 0, (owner.pw_name, out, end)
        assert out == expect, (owner.pw_name, out)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to bind-mount")
def test_a_second_mount_of_the_same_file_system_is_masked_too(make_broker, tmpdir_k):
    """A mask covers one mount: where the file system holding a secret is
    mounted again (a bind of /home elsewhere, a btrfs top level), the worker
    masks the secret's place under that mount as well."""
    token, key = plant(tmpdir_k)
    alias = os.path.join(tmpdir_k, "alias")
    os.mkdir(alias)
    subprocess.run(["mount", "--bind", tmpdir_k, alias], check=True)
    try:
        b = make_broker(config=config(tmpdir_k)).start()
        for path in (os.path.join(alias, "token"), os.path.join(alias, "vault", "key")):
            out, end = run(b, READ, path, False, tmpdir_k)
            assert out == "PermissionError 13\n", (path, out)
            # control: the same place, read by a snippet a person approved
            out, end = run(b, READ, path, True, tmpdir_k)
            assert out == PLANTED, (path, out)
    finally:
        subprocess.run(["umount", "-l", alias], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to bind-mount")
def test_a_mount_of_part_of_a_secret_directory_is_masked_too(make_broker, tmpdir_k):
    """A bind whose root lies inside a secret directory shows that part of
    it elsewhere: its mount point is masked whole."""
    token, key = plant(tmpdir_k)
    part = os.path.join(tmpdir_k, "part")
    os.mkdir(part)
    subprocess.run(["mount", "--bind", os.path.dirname(key), part], check=True)
    try:
        b = make_broker(config=config(tmpdir_k)).start()
        path = os.path.join(part, os.path.basename(key))
        out, end = run(b, READ, path, False, tmpdir_k)
        assert out == "PermissionError 13\n", (path, out, end)
        out, end = run(b, READ, path, True, tmpdir_k)
        assert out == PLANTED, (path, out)
    finally:
        subprocess.run(["umount", "-l", part], check=True)


def deep_dir(base, length):
    """A directory whose absolute path is `length` bytes, made by relative
    steps (no call is handed a path of PATH_MAX or more), the snippet
    user's; returns (a descriptor of it, its path)."""
    u = snippet_user()
    fd, path = os.open(base, os.O_DIRECTORY), base
    while len(path) < length:
        name = "d" * min(90, length - len(path) - 1)
        os.mkdir(name, dir_fd=fd)
        if os.geteuid() == 0:
            os.chown(name, u.pw_uid, u.pw_gid, dir_fd=fd)
        nfd = os.open(name, os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd, path = nfd, path + "/" + name
    return fd, path


def plant_at(fd, name):
    u = snippet_user()
    f = os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(f, PLANTED.encode())
    os.close(f)
    if os.geteuid() == 0:
        os.chown(name, u.pw_uid, u.pw_gid, dir_fd=fd)


def test_a_secret_whose_path_is_too_long_to_mask_stops_the_run(make_broker, tmpdir_k):
    """In a working directory 4,089 bytes long, `.env` fits in PATH_MAX and
    `.env.local` does not: a snippet there opens it by its name, so the
    run does not start."""
    fd, cwd = deep_dir(tmpdir_k, 4089)
    b = make_broker().start()
    out, end = run(b, "print('ran')\n", "", False, cwd)
    assert end["type"] == "exit" and out == "ran\n", end  # control: nothing to mask
    plant_at(fd, ".env.local")
    os.close(fd)
    out, end = run(b, "print('ran')\n", "", False, cwd)
    assert end["type"] == "error" and end["code"] == "setup-failed" and \
        end["step"] == "secrets" and ".env.local" in end["message"], end
    assert out == ""


def test_a_working_directory_whose_real_path_is_too_long_stops_the_run(make_broker, tmpdir_k):
    """Reached through a short symlink, the working directory's real path
    is over PATH_MAX: the `.env` above it, which `..` reaches, could not be
    named to be masked, so the run does not start."""
    fd, real = deep_dir(tmpdir_k, 4150)
    plant_at(fd, ".env")
    os.mkdir("proj", dir_fd=fd)
    os.close(fd)
    rel = os.path.relpath(real, tmpdir_k)
    half = rel.index("/", len(rel) // 2)
    os.symlink(rel[:half], os.path.join(tmpdir_k, "m"))
    os.symlink("m" + rel[half:] + "/proj", os.path.join(tmpdir_k, "w"))
    b = make_broker().start()
    # A snippet that names ../.env is refused by the pre-screen; one that
    # builds the name would read it: none runs.
    out, end = run(b, "print('ran')\n", "", False, os.path.join(tmpdir_k, "w"))
    assert end["type"] == "error" and end.get("step") == "secrets" and \
        "real path" in end["message"], (out, end)


# ---- the masks' namespace kept between a user's runs (PROTOCOL.md, "masks")

NS = "import os\nprint(os.readlink('/proc/self/ns/mnt'))\n"


def mount_ns(b, cwd):
    out, end = run(b, NS, "", False, cwd)
    assert end["type"] == "exit" and end["code"] == 0, (out, end)
    return out.strip()


def test_the_next_run_joins_the_kept_namespace_and_the_masks_still_hold(make_broker, tmpdir_k):
    token, key = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    first, second = mount_ns(b, tmpdir_k), mount_ns(b, tmpdir_k)
    assert first == second, "the second run made namespaces of its own: %s, %s" % (first, second)
    for path in (token, key):
        out, end = run(b, READ, path, False, tmpdir_k)
        assert out == "PermissionError 13\n", out
    # Control: without masks there is no namespace to keep.
    b2 = make_broker(config=config(tmpdir_k, "off")).start()
    assert mount_ns(b2, tmpdir_k) != first


def test_a_secret_that_appears_between_runs_is_masked_in_a_new_namespace(make_broker, tmpdir_k):
    plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    kept = mount_ns(b, tmpdir_k)
    fresh = os.path.join(tmpdir_k, ".env.later")
    with open(fresh, "w") as f:
        f.write(PLANTED)
    if os.geteuid() == 0:
        u = snippet_user()
        os.chown(fresh, u.pw_uid, u.pw_gid)
    # Spelled past the pre-screen, which would refuse the run unread.
    out, end = run(b, READ.replace("os.environ['SECRET_AT']", "'.en' + 'v.later'"), "", False,
                   tmpdir_k)
    assert out == "PermissionError 13\n", (out, end)
    assert mount_ns(b, tmpdir_k) != kept


def test_a_secret_linked_back_under_its_name_is_masked_again(make_broker, tmpdir_k):
    """The same file (device and inode: the key is unchanged) under a new
    name: the kept mount covered the old name, and the run reads each mask
    back before it trusts the namespace."""
    token, _ = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k)).start()
    kept = mount_ns(b, tmpdir_k)
    aside = os.path.join(tmpdir_k, "aside")
    os.link(token, aside)
    os.unlink(token)
    os.link(aside, token)
    os.unlink(aside)
    out, end = run(b, READ, token, False, tmpdir_k)
    assert end["type"] == "exit" and out == "PermissionError 13\n", (out, end)
    assert mount_ns(b, tmpdir_k) != kept, "the kept namespace was used as it was"


def test_each_user_has_namespaces_of_their_own(make_broker, tmpdir_k):
    if os.geteuid() != 0:
        pytest.skip("needs root: runs as two users")
    plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k) + "[broker]\nroot_user = daemon\n").start()
    as_daemon = mount_ns(b, tmpdir_k)
    b2 = make_broker(config=config(tmpdir_k)).start()
    assert mount_ns(b2, tmpdir_k) != as_daemon


def test_without_landlock_no_namespace_is_kept(make_broker, tmpdir_k):
    """Runs in one kept user namespace are kept apart by Landlock's ptrace
    rules: with landlock = no each run masks in namespaces of its own, and
    the secret stays masked."""
    token, _ = plant(tmpdir_k)
    b = make_broker(config=config(tmpdir_k) + "landlock = no\n").start()
    mount_ns(b, tmpdir_k)  # would be kept, if any were
    # Both alive at once: a namespace's number is free for reuse once it
    # is gone.
    first = b.client(channel=False)
    first.exec("import os, time\nprint(os.readlink('/proc/self/ns/mnt'), flush=True)\n"
               "while not os.path.exists('second-ran'):\n    time.sleep(0.02)\n", cwd=tmpdir_k)
    ns = first.snippet_line()
    second = mount_ns(b, tmpdir_k)
    open(os.path.join(tmpdir_k, "second-ran"), "w").close()
    end = first.until_end()["end"]
    first.sock.close()
    assert end["type"] == "exit" and end["code"] == 0, end
    assert ns != second, (ns, second)
    out, end = run(b, READ, token, False, tmpdir_k)
    assert out == "PermissionError 13\n", (out, end)
