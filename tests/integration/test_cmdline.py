# SPDX-License-Identifier: MIT
"""Every program's command line, table-tested with the real binaries.

For kotoba-brokerd, kotoba-worker and each `kotoba` subcommand: an option
given twice, an option missing its argument, an empty argument, an unknown
option, stray operands and 64 KiB arguments.  Each must end in a clear
message and the program's documented status (64 for a usage error, 78 for
the broker's configuration errors), never a crash: a status of 128 or more
(or death by a signal) fails, and so does a sanitizer report when
KOTOBA_BUILD points at the ASan build.

Usage errors must be found before anything is contacted: every `kotoba`
line names a socket nobody listens on, so a line that got past parsing
would end 125 (broker unreachable) instead of 64.
"""
import os
import subprocess

import pytest

from conftest import BROKERD, BUILD, KOTOBA

WORKER = os.path.join(BUILD, "kotoba-worker")
USAGE = 64
CONFIG_ERROR = 78
LONG = "a" * 65536


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, **kw)
    err = p.stderr.decode(errors="replace")
    assert 0 <= p.returncode < 128, "%s crashed: status %d\n%s" % (argv[0], p.returncode, err[-2000:])
    assert "Sanitizer" not in err and "runtime error:" not in err, err[-4000:]
    return p.returncode, err


def ids(table):
    return [" ".join(a if len(a) < 40 else "<%d bytes>" % len(a) for a in argv) or "(none)"
            for argv, *_ in table]


# ---- kotoba-brokerd ----------------------------------------------------------

@pytest.fixture
def empty_config(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("")
    return str(path)


# (arguments, status, a phrase stderr must hold); --check-config keeps any
# line that parses from starting a broker.
BROKERD_CASES = [
    (["--sandbox", "local"] * 12 + ["--check-config"], USAGE, "--sandbox given more than once"),
    (["--socket", "/tmp/a", "--socket", "/tmp/b", "--check-config"], USAGE, "--socket given more than once"),
    (["--state-dir", "/tmp/a", "--state-dir", "/tmp/a", "--check-config"], USAGE, "--state-dir given more than once"),
    (["--config", "CONFIG", "--config", "CONFIG", "--check-config"], USAGE, "--config given more than once"),
    (["--check-config", "--check-config"], USAGE, "--check-config given more than once"),
    (["--verbose", "--verbose", "--check-config"], USAGE, "--verbose given more than once"),
    (["--check-config", "--socket"], USAGE, "requires an argument"),
    (["--check-config", "--state-dir"], USAGE, "requires an argument"),
    (["--check-config", "--config"], USAGE, "requires an argument"),
    (["--check-config", "--sandbox"], USAGE, "requires an argument"),
    (["--socket", "", "--check-config"], USAGE, "--socket needs a non-empty argument"),
    (["--state-dir", "", "--check-config"], USAGE, "--state-dir needs a non-empty argument"),
    (["--config", "", "--check-config"], USAGE, "--config needs a non-empty argument"),
    (["--sandbox", "", "--check-config"], USAGE, "--sandbox needs a non-empty argument"),
    (["--bogus", "--check-config"], USAGE, "unrecognized option"),
    (["-x", "--check-config"], USAGE, "invalid option"),
    (["--check-config", "stray"], USAGE, "unexpected argument 'stray'"),
    (["", "--check-config"], USAGE, "unexpected argument ''"),
    (["--" + LONG, "--check-config"], USAGE, "unrecognized option"),
    ([LONG, "--check-config"], USAGE, "unexpected argument"),
    (["--socket", LONG, "--check-config"], CONFIG_ERROR, "at most"),
    (["--state-dir", LONG, "--check-config"], CONFIG_ERROR, "state_dir"),
    (["--sandbox", LONG, "--check-config"], CONFIG_ERROR, "sandbox"),
    (["--sandbox", "nonsense", "--check-config"], CONFIG_ERROR, "sandbox"),
    (["--config", "/" + LONG, "--check-config"], CONFIG_ERROR, "name too long"),
]


@pytest.mark.parametrize("argv,status,says", BROKERD_CASES, ids=ids(BROKERD_CASES))
def test_brokerd(argv, status, says, empty_config):
    argv = [empty_config if a == "CONFIG" else a for a in argv]
    if "--config" not in argv:
        argv = ["--config", empty_config] + argv
    rc, err = run([BROKERD, *argv])
    assert rc == status, (rc, err[-2000:])
    assert says in err, err[-2000:]


def test_brokerd_valid_line_still_parses(empty_config):
    """The control: the same options, each once, are accepted."""
    rc, err = run([BROKERD, "--config", empty_config, "--socket", "/tmp/k.sock",
                   "--state-dir", "/tmp/k-state", "--sandbox", "local", "--verbose",
                   "--check-config"])
    assert rc == 0, err


# ---- kotoba-worker -----------------------------------------------------------

WORKER_CASES = [
    (["--list-syscall-groups", "--list-syscall-groups"],),
    (["--bogus"],),
    ([""],),
    ([LONG],),
    (["--" + LONG],),
    (["-x"],),
]


@pytest.mark.parametrize("argv", [c[0] for c in WORKER_CASES], ids=ids(WORKER_CASES))
def test_worker(argv):
    rc, err = run([WORKER, *argv])
    assert rc == USAGE and "usage: kotoba-worker" in err, (rc, err)


def test_worker_without_broker_socket():
    """Started by hand, without fd 3: a sentence, not a crash."""
    rc, err = run([WORKER], pass_fds=())
    assert rc == 1 and "fd 3 must be the broker's SOCK_SEQPACKET socket" in err, (rc, err)


# ---- kotoba ------------------------------------------------------------------

NOWHERE = "/nonexistent/kotoba-cmdline-test.sock"
S = ["--socket", NOWHERE]

KOTOBA_CASES = [
    # the command itself
    ([], USAGE, "usage: kotoba run"),
    (["bogus"], USAGE, "unknown command 'bogus'"),
    ([""], USAGE, "unknown command ''"),
    ([LONG], USAGE, "unknown command"),
    # run: repeated
    (["run", "-c", "pass", "-c", "pass", *S], USAGE, "-c given more than once"),
    (["run", "-c", "pass", "--cwd", "/", "--cwd", "/", *S], USAGE, "--cwd given more than once"),
    (["run", "-c", "pass", "--timeout", "1", "--timeout", "2", *S], USAGE, "--timeout given more than once"),
    (["run", "-c", "pass", *S, *S], USAGE, "--socket given more than once"),
    (["run", "-c", "pass", "--json", "--json", *S], USAGE, "--json given more than once"),
    (["run", "-c", "pass", "--no-channel", "--no-channel", *S], USAGE, "--no-channel given more than once"),
    (["run", "-c", "pass", "--answer", "once", "--answer", "deny", *S], USAGE, "--answer given more than once"),
    # run: missing argument
    (["run", *S, "-c"], USAGE, "requires an argument"),
    (["run", "-c", "pass", *S, "--cwd"], USAGE, "requires an argument"),
    (["run", "-c", "pass", *S, "--timeout"], USAGE, "requires an argument"),
    (["run", "-c", "pass", *S, "--answer"], USAGE, "requires an argument"),
    (["run", "-c", "pass", "--socket"], USAGE, "requires an argument"),
    (["run", *S], USAGE, "give the snippet"),
    # run: empty
    (["run", "-c", "", *S], USAGE, "-c needs a non-empty argument"),
    (["run", "-c", "pass", "--cwd", "", *S], USAGE, "--cwd needs a non-empty argument"),
    (["run", "-c", "pass", "--timeout", "", *S], USAGE, "--timeout needs a non-empty argument"),
    (["run", "-c", "pass", "--answer", "", *S], USAGE, "--answer needs a non-empty argument"),
    (["run", "-c", "pass", "--socket", ""], USAGE, "--socket needs a non-empty argument"),
    (["run", "", *S], USAGE, "cannot read"),
    # run: unknown, stray, conflicting, bad values
    (["run", "-c", "pass", "--bogus", *S], USAGE, "unrecognized option"),
    (["run", "-c", "pass", "-x", *S], USAGE, "invalid option"),
    (["run", "-c", "pass", "stray", *S], USAGE, "not both"),
    (["run", "a.py", "b.py", *S], USAGE, "give the snippet"),
    (["run", "-c", "pass", "--timeout", "soon", *S], USAGE, "--timeout takes seconds"),
    (["run", "-c", "pass", "--answer", "maybe", *S], USAGE, "--answer takes once, always or deny"),
    # run: 64 KiB arguments
    (["run", "-c", "pass", "--cwd", "/" + LONG, *S], USAGE, "working directory"),
    (["run", "-c", "pass", "--timeout", "1" * 65536, *S], USAGE, "--timeout takes seconds"),
    (["run", "-c", "pass", "--answer", LONG, *S], USAGE, "--answer takes once"),
    (["run", "-c", "pass", "--socket", LONG], USAGE, "a socket path holds at most 107"),
    (["run", "--" + LONG, "-c", "pass", *S], USAGE, "unrecognized option"),
    (["run", "/" + LONG, *S], USAGE, "cannot read"),
    # approvals and audit
    (["approvals"], USAGE, "usage: kotoba approvals"),
    (["approvals", "ls", *S, *S], USAGE, "--socket given more than once"),
    (["approvals", "ls", "--socket"], USAGE, "requires an argument"),
    (["approvals", "ls", "--socket", ""], USAGE, "--socket needs a non-empty argument"),
    (["approvals", "ls", "--socket", LONG], USAGE, "a socket path holds at most"),
    (["approvals", "ls", "--bogus", *S], USAGE, "unrecognized option"),
    (["approvals", "ls", "stray", *S], USAGE, "usage: kotoba approvals"),
    (["approvals", "rm", *S], USAGE, "usage: kotoba approvals"),
    (["approvals", "rm", "a", "b", "c", *S], USAGE, "usage: kotoba approvals"),
    (["approvals", "", *S], USAGE, "usage: kotoba approvals"),
    (["approvals", LONG, *S], USAGE, "usage: kotoba approvals"),
    (["audit"], USAGE, "usage: kotoba audit"),
    (["audit", "tail", "-n", "5", "-n", "5", *S], USAGE, "--max given more than once"),
    (["audit", "tail", "-n", "5", "--max", "5", *S], USAGE, "--max given more than once"),
    (["audit", "tail", *S, "-n"], USAGE, "requires an argument"),
    (["audit", "tail", "-n", "", *S], USAGE, "--max needs a non-empty argument"),
    (["audit", "tail", "-n", "abc", *S], USAGE, "--max takes a number"),
    (["audit", "tail", "-n", "-1", *S], USAGE, "--max takes a number"),
    (["audit", "tail", "-n", "9" * 65536, *S], USAGE, "--max takes a number"),
    (["audit", "tail", "--bogus", *S], USAGE, "unrecognized option"),
    (["audit", "tail", "verify", *S], USAGE, "usage: kotoba audit"),
    (["audit", "", *S], USAGE, "usage: kotoba audit"),
    # scan
    (["scan"], USAGE, "usage: kotoba scan"),
    (["scan", "a", "b"], USAGE, "usage: kotoba scan"),
    ([ "scan", ""], USAGE, "cannot read"),
    (["scan", "/" + LONG], USAGE, "cannot read"),
]


@pytest.mark.parametrize("argv,status,says", KOTOBA_CASES, ids=ids(KOTOBA_CASES))
def test_kotoba(argv, status, says):
    rc, err = run([KOTOBA, *argv])
    assert rc == status, (rc, err[-2000:])
    assert says in err, err[-2000:]


def test_kotoba_valid_lines_reach_the_broker():
    """The control: each table line's options, once and filled, get past
    parsing and fail only at the missing broker (125)."""
    for argv in (["run", "-c", "pass", "--cwd", "/", "--timeout", "1", "--json", "--no-channel",
                  "--answer", "deny", *S],
                 ["approvals", "ls", *S], ["approvals", "rm", "execute_code", *S],
                 ["audit", "tail", "-n", "5", *S], ["audit", "verify", *S]):
        rc, err = run([KOTOBA, *argv])
        assert rc == 125 and "cannot reach the broker" in err, (argv, rc, err)


def test_kotoba_long_snippet_runs(broker):
    """A 64 KiB -c is a snippet, not a usage error: it runs."""
    code = "#" + "x" * 65536 + "\nprint('ran')"
    p = broker.kotoba("run", "--no-channel", "-c", code)
    assert p.returncode == 0 and p.stdout == b"ran\n", p


def test_kotoba_without_its_admin_program(tmp_path):
    """kotoba alone (no kotoba-admin beside it or in ../libexec/kotoba):
    scan, approvals and audit end 125 with a message that names the
    program and why; run still gets as far as the broker; a symlink to
    kotoba finds kotoba-admin from the real path, as an installed one does."""
    alone = tmp_path / "bin" / "kotoba"
    alone.parent.mkdir()
    alone.write_bytes(open(KOTOBA, "rb").read())
    alone.chmod(0o755)
    for argv in (["scan", "-"], ["approvals", "ls", *S], ["audit", "tail", *S]):
        rc, err = run([str(alone), *argv])
        assert rc == 125, (argv, rc, err)
        assert "cannot start %s/libexec/kotoba/kotoba-admin: No such file or directory" \
            % (tmp_path / "bin" / "..") in err, err
    rc, err = run([str(alone), "run", "-c", "pass", *S])
    assert rc == 125 and "cannot reach the broker" in err, (rc, err)
    link = tmp_path / "link"
    link.symlink_to(KOTOBA)
    p = subprocess.run([str(link), "scan", "-"], input=b"import os\nos.system('x')\n",
                       capture_output=True, timeout=30)
    assert p.returncode == 1 and b"os.system" in p.stdout, p
