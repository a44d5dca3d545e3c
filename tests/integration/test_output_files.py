"""The snippet's output directory, $KOTOBA_OUTPUT_DIR: made empty for each
run inside its scratch, writable by the snippet, gone with the run."""
import os
import tempfile

from conftest import wait_for

SHOW_DIR = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "print(d)\n"
            "print(sorted(os.listdir(d)))\n"
            "print(os.path.dirname(d) == os.environ['TMPDIR'])\n")


WRITE = ("with open(os.path.join(d, 'a.png'), 'wb') as f:\n"
         "    f.write(b'x')\n")


def test_output_dir_is_empty_and_writable(broker):
    # A write by open() asks for a card: answered once, the approved profile.
    for approve in (False, True):
        r = broker.run_json(SHOW_DIR + (WRITE if approve else ""), approve=approve)
        assert r["exit"] == 0, r
        d, listing, inside = r["stdout"].splitlines()
        assert listing == "[]" and inside == "True", r
        wait_for(lambda: not os.path.exists(d), "the run's output directory %s removed" % d)


def test_second_run_sees_none_of_the_first(broker):
    first = broker.run_json(SHOW_DIR + WRITE, approve=True)
    second = broker.run_json(SHOW_DIR)
    assert first["exit"] == 0 and second["exit"] == 0, (first, second)
    assert first["stdout"].splitlines()[0] != second["stdout"].splitlines()[0]
    assert second["stdout"].splitlines()[1] == "[]"


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5f6a3a60000000049454e44ae426082")


def run_raw(broker, code):
    """Runs code over the raw protocol, answering its card `once`; returns
    the frames up to the end."""
    c = broker.client(channel=True)
    c.exec(code)
    out = c.until_end(on_card=lambda cl, m: cl.send({"type": "answer", "card": m["card"],
                                                     "choice": "once"}))
    c.close()
    return out


def files_of(out):
    return [(m["name"], m["data"]) for m in out["frames"] if m["type"] == "file"]


WRITE_PNG = ("import os\n"
             "with open(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'plot.png'), 'wb') as f:\n"
             "    f.write(bytes.fromhex(%r))\n" % PNG.hex())


def test_png_comes_back_before_exit(broker):
    out = run_raw(broker, WRITE_PNG)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out["end"]
    assert files_of(out) == [("plot.png", PNG)]
    types = [m["type"] for m in out["frames"]]
    assert types.index("file") < types.index("exit")
    assert "files_left_out" not in out["end"]


def test_symlinks_fifos_and_dirs_are_not_followed(broker, tmpdir_k):
    secret = os.path.join(tmpdir_k, "secret.txt")
    with open(secret, "w") as f:
        f.write("not for the client")
    os.chmod(secret, 0o644)
    code = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "os.symlink(%r, os.path.join(d, 'link.txt'))\n"
            "os.mkfifo(os.path.join(d, 'fifo'))\n"
            "os.mkdir(os.path.join(d, 'sub'))\n"
            "with open(os.path.join(d, 'sub', 'inner.txt'), 'w') as f:\n"
            "    f.write('inner')\n"
            "with open(os.path.join(d, 'ok.txt'), 'w') as f:\n"
            "    f.write('ok')\n" % secret)
    out = run_raw(broker, code)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert files_of(out) == [("ok.txt", b"ok")]
    assert out["end"]["files_left_out"] == 3


def test_caps_hold(broker):
    code = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "for i in range(20):\n"
            "    with open(os.path.join(d, 'f%02d' % i), 'wb') as f:\n"
            "        f.write(b'x' * (600 << 10))\n"  # 16 fit the count; 13 the 8 MiB total
            "with open(os.path.join(d, 'big'), 'wb') as f:\n"
            "    f.write(b'y' * ((2 << 20) + 1))\n"
            "with open(os.path.join(d, 'bad\\nname'), 'w') as f:\n"
            "    f.write('z')\n")
    out = run_raw(broker, code)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out["end"]
    got = files_of(out)
    assert [n for n, _ in got] == ["f%02d" % i for i in range(13)]
    assert all(len(d) == 600 << 10 for _, d in got)
    # 'bad\nname', 'big' (over 2 MiB), f13-f19 (over the total)
    assert out["end"]["files_left_out"] == 1 + 1 + 7


def test_second_run_gets_none_of_the_first(broker):
    assert files_of(run_raw(broker, WRITE_PNG)) == [("plot.png", PNG)]
    out = run_raw(broker, "print('nothing written')\n")
    assert files_of(out) == [] and "files_left_out" not in out["end"]


def test_cli_output_dir_saves_and_json_lists(broker, tmpdir_k):
    save = os.path.join(tmpdir_k, "saved")
    os.mkdir(save)
    r = broker.run_json(WRITE_PNG, "--output-dir", save, approve=True)
    assert r["exit"] == 0, r
    assert r["files"] == [{"name": "plot.png", "size": len(PNG), "mime_type": "image/png",
                           "saved": True}]
    assert r["files_left_out"] == 0
    with open(os.path.join(save, "plot.png"), "rb") as f:
        assert f.read() == PNG


def test_cli_never_writes_through_a_symlink(broker, tmpdir_k):
    save = os.path.join(tmpdir_k, "saved")
    os.mkdir(save)
    victim = os.path.join(tmpdir_k, "victim")
    with open(victim, "wb") as f:
        f.write(b"keep")
    os.symlink(victim, os.path.join(save, "plot.png"))
    p = broker.kotoba("run", "-c", WRITE_PNG, "--answer", "once", "--output-dir", save)
    assert p.returncode == 0, p.stderr
    assert b"cannot save plot.png in" in p.stderr, p.stderr
    with open(victim, "rb") as f:
        assert f.read() == b"keep"


def test_cli_says_what_was_left_out(broker):
    code = ("import os\n"
            "os.mkdir(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'sub'))\n")
    p = broker.kotoba("run", "-c", code, "--answer", "once")
    assert p.returncode == 0, p.stderr
    assert b"1 entry of KOTOBA_OUTPUT_DIR not sent" in p.stderr, p.stderr


def test_unattended_run_returns_its_files(broker):
    # sqlite3.connect into the run's own places asks for no card: this runs
    # unattended (Landlock lets it write only in scratch) and still returns.
    code = ("import os, sqlite3\n"
            "c = sqlite3.connect(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'data.db'))\n"
            "c.execute('create table t (x)')\n"
            "c.commit()\n"
            "c.close()\n")
    c = broker.client(channel=False)
    c.exec(code)
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert out["end"]["profile"] == "unattended"
    (name, data), = files_of(out)
    assert name == "data.db" and data.startswith(b"SQLite format 3\0")


# The output directory named first, with a fallback into the working
# directory: the pre-screen lets it through on the host, where the sandbox
# of a run nobody read keeps every write in the run's own places (in docker
# mode the same snippet is fs-write: tests/container).
FALLBACK = ("import os\n"
            "del os.environ['KOTOBA_OUTPUT_DIR']\n"
            "try:\n"
            "    open(os.environ.get('KOTOBA_OUTPUT_DIR') or 'notes.txt', 'w').write('x')\n"
            "    print('wrote')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")


def test_a_fallback_from_the_output_directory_is_unlabelled_and_kept_out_on_the_host(
        broker):
    # a directory the snippet's user reaches and could write, were it let
    cwd = tempfile.mkdtemp(prefix="fallback-", dir=os.environ["KOTOBA_BUILD"])
    os.chmod(cwd, 0o777)
    # no channel: a labelled snippet would be refused, an unlabelled one runs
    c = broker.client(channel=False)
    c.exec(FALLBACK, cwd=cwd)
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out
    assert out["end"]["profile"] == "unattended", out["end"]
    assert out["stdout"].startswith(b"refused "), out
    assert not os.path.exists(os.path.join(cwd, "notes.txt"))
    os.rmdir(cwd)


# Unattended (no card to read): 13 database files of about 550 KiB, by the
# spelling the pre-screen lets through.
MANY_FILES = ("import os, sqlite3\n"
              "for i in range(13):\n"
              "    c = sqlite3.connect(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'f%02d.db' % i))\n"
              "    c.execute('create table t (b)')\n"
              "    c.execute('insert into t values (?)', (b'x' * (550 << 10),))\n"
              "    c.commit()\n"
              "    c.close()\n")


def test_a_client_that_does_not_read_is_not_sent_more_files_than_the_bound(broker):
    """Two runs each leave about 7 MiB of files while their client reads
    nothing: what the broker queues for that connection stops at 8 MiB
    (PROTO_FILES_TOTAL), and the rest is counted as left out."""
    c = broker.client(channel=False)
    for i in (1, 2):
        c.exec(MANY_FILES, id=i)
    wait_for(lambda: broker.read_log().count("ended: finished") >= 2, "both runs' ends")
    ends, got = {}, {1: 0, 2: 0}
    while len(ends) < 2:
        m = c.recv()
        if m["type"] == "file":
            got[m["id"]] += len(m["data"])
        elif m["type"] in ("exit", "error"):
            ends[m["id"]] = m
    c.close()
    assert all(e["type"] == "exit" and e["code"] == 0 for e in ends.values()), ends
    left = sum(e.get("files_left_out", 0) for e in ends.values())
    assert left >= 1, (got, ends)
    # 8 MiB queued, plus what the kernel's socket buffers took (far less)
    assert got[1] + got[2] <= (8 << 20) + (4 << 20), (got, ends)


# matplotlib's plt.show() with no display: each open figure is saved into
# the output directory as figure-N.png and closed (PYTHON_SNIPPET_MAIN).
# Run without a channel: a card would end the run with an error.
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_unattended(broker, code, **fields):
    c = broker.client()
    c.exec(code, **fields)
    out = c.until_end()
    c.close()
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, (out["end"], out["stderr"])
    return out


def test_plt_show_returns_the_figure_as_png(broker):
    out = run_unattended(broker, "import matplotlib.pyplot as plt\n"
                                 "plt.plot([1, 3, 2])\n"
                                 "plt.show()\n"
                                 "print(plt.get_fignums())\n")
    files = files_of(out)
    assert [n for n, _ in files] == ["figure-1.png"], out
    assert files[0][1].startswith(PNG_MAGIC), files[0][1][:16]
    assert out["stdout"] == b"[]\n", out  # show() closed it


def test_two_figures_two_files_and_no_name_overwritten(broker):
    # figure-1.png is the snippet's own (a small savefig, no card): show()
    # takes the next free names, in figure order.
    out = run_unattended(broker, "import os, matplotlib.pyplot as plt\n"
                                 "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
                                 "plt.figure(); plt.plot([1, 2])\n"
                                 "plt.savefig(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'figure-1.png'),"
                                 " dpi=10)\n"
                                 "print(os.path.getsize(os.path.join(d, 'figure-1.png')))\n"
                                 "plt.figure(); plt.plot([2, 1])\n"
                                 "plt.show()\n"
                                 "plt.figure(); plt.plot([0, 0])\n"
                                 "plt.show()\n")
    files = dict(files_of(out))
    assert sorted(files) == ["figure-1.png", "figure-2.png", "figure-3.png", "figure-4.png"], out
    assert len(files["figure-1.png"]) == int(out["stdout"]), "show() wrote over figure-1.png"
    assert all(b.startswith(PNG_MAGIC) for b in files.values())
    assert len(files["figure-2.png"]) > len(files["figure-1.png"])


def test_client_mplbackend_is_kept_and_show_saves_nothing(broker):
    out = run_unattended(broker, "import matplotlib, matplotlib.pyplot as plt\n"
                                 "plt.plot([1, 2])\n"
                                 "plt.show()\n"
                                 "print(matplotlib.get_backend())\n",
                         env={"MPLBACKEND": "Agg"})
    assert files_of(out) == [], out
    assert out["stdout"].strip().lower() == b"agg", out


def test_a_run_without_matplotlib_does_not_import_it(broker):
    # sys.modules asks for a card (a way to import unseen): answered once.
    out = run_raw(broker, "import os, sys\n"
                          "print('matplotlib' in sys.modules)\n"
                          "print(os.environ['MPLBACKEND'])\n")
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, out["end"]
    assert out["stdout"] == b"False\nmodule://_kotoba_figures\n", out
    assert files_of(out) == []


def test_a_python3_the_snippet_starts_plots_with_matplotlib_default(broker):
    # The backend module lives in the snippet's python3 only: a child
    # python3 inherits no MPLBACKEND naming it (else its first plot fails
    # with "No module named '_kotoba_figures'").  subprocess: answered once.
    child = ("import os, matplotlib, matplotlib.pyplot as plt\n"
             "plt.plot([1, 2])\n"
             "print(os.environ.get('MPLBACKEND'), matplotlib.get_backend())\n")
    out = run_raw(broker, "import subprocess, sys\n"
                          "subprocess.run([sys.executable, '-c', %r], check=True)\n" % child)
    assert out["end"]["type"] == "exit" and out["end"]["code"] == 0, (out["end"], out["stderr"])
    assert out["stdout"] == b"None agg\n", out
