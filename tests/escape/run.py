#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The escape suite: hostile snippets against the real broker, worker and
kernel, under both kernel profiles, with Landlock on and off, each cold and
with spare interpreters ([sandbox] warm).

Each file in cases/ is a snippet with a header:

    # tries: what it attempts
    # must: fail in unattended | fail in both | work in unattended
    # receipt: KIND, KIND... | none (why)   (required unless must: work)
    # receipt seccomp-only: ...   (optional, where that mode differs)
    # control: works in approved      (optional)
    # needs: landlock | numpy | fork-bound | home   (optional, with the reason)

The header is the harness's; what is submitted is the code below it, and
every case must walk past the pre-screen (the broker runs it unattended,
which it refuses for a labelled snippet): the threat is exactly a snippet
that fooled the text matcher.  Cases that must fail in both are also run
through a card answered `once` (the approved profile).

A snippet reports what the kernel answered, one line per attempt:
`BLOCKED ...` (refused) or `ESCAPED ...` (it worked); positive cases print
`OK ...` or `FAIL ...`.  Lines starting otherwise are notes.  A case passes
when every attempt is BLOCKED (or, positive, every check OK and exit 0);
`control: works in approved` also runs it approved and requires every
attempt to work there, which proves the unattended refusal is the
profile's doing and not, say, file permissions.  After every unattended
run the working directory must be exactly as planted and the broker alive.

Run as root, the suite's brokers run root's snippets as the user
`kotoba-escape` (created when missing, with a home of its own), and
before every case the suite plants real secrets (SECRETS below, each file
holding SECRET_MARK) in that home, in the working directory and in its
parent: the `secret_*` cases try to read them (`needs: home`), and an
approved control reads every one.  Not as root, the snippets run as the
caller, whose home the suite leaves alone: those cases are skipped.

A case may print `SCRATCH <path>` to name its scratch directory: the path
must be gone once the run is over, whatever the case left in it.

`receipt:` is what the unattended run's receipt (`blocked`, PROTOCOL.md
"exit") must hold: exactly that set of kinds (write, create, delete,
rename, exec, secret-read, connect-unix, bind, listen, signal, syscall),
or `none` with the reason in parentheses: the refusal is a limit's, not
the sandbox's, or neither witness sees it (ctypes, a C extension, a call
the interpreter's witness does not wrap; SECURITY.md, "The receipt").
`receipt landlock:` or `receipt seccomp-only:` overrides it in that mode
and in its -warm twin.
A case that must fail cannot leave it out; one that must work has an empty
receipt, always.  Every entry's target must fit: a path (write, create,
delete, rename, secret-read) absolute and under the working directory, the
snippet user's home, the run's scratch directory or the secrets planted
beside the working directory (read through doubled slashes or a
/proc/<pid>/root as may be), or named in the case's code; `blocked_total`
the sum of the counts unless the entries are at their cap (16).  Every
approved run (control, and the approved run of `fail in both`) must have
an empty receipt.  The kinds show in each case's line, `receipt{...}`;
-v lists the entries.

Prints one line per case and mode, then exactly `N passed, N failed`;
exits 1 when anything failed.  Run: make check-escape, or
    KOTOBA_BUILD=build /usr/bin/python3 tests/escape/run.py [--mode MODE] [CASE...]
with MODE all (the default), landlock, seccomp-only, landlock-warm or
seccomp-only-warm: the last two are the first two with [sandbox] warm = yes,
where a run takes a spare interpreter when one fits (each mode's last line
says how many did).
"""
import argparse
import ctypes
import hashlib
import http.server
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
os.environ.setdefault("KOTOBA_BUILD", os.path.join(HERE, "..", "..", "build"))
from conftest import Broker  # noqa: E402  (needs KOTOBA_BUILD set first)

CASES = os.path.join(HERE, "cases")
PYTHON = "/usr/bin/python3"
# The broker's limits for the suite: the bombs are measured against these.
CONFIG = """\
[broker]
root_user = {root_user}

[sandbox]
landlock = {landlock}
warm = {warm}

# The harness's HTTP server is on the host's loopback, which a run's own
# network namespace is not: the egress proxy goes there only when listed.
[egress]
allow_hosts = 127.0.0.1, localhost

[limits]
memory = 512M
processes = 64
file_size = 8M
timeout = 60s
"""
FIXTURE = "kotoba escape suite fixture\n"
# The user root's snippets run as: a home the suite may plant secrets in.
CASE_USER = "kotoba-escape"
# The secret_* cases' shared prelude (their @@SECRET_PROBE@@), without its
# own comment lines.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "secret_probe.py")) as _f:
    SECRET_PROBE = "".join(l for l in _f if not l.startswith("#"))
SECRET_MARK = "kotoba-planted-secret"
# Planted before every case: "~/" in the snippet user's home, "../" in the
# working directory's parent, others in the working directory; a value
# ending in "/" is a directory holding one file, "-> target" a symlink.
SECRETS = {
    "~/.ssh/id_ed25519": "", "~/.aws/credentials": "", "~/.netrc": "",
    "~/.keystore_key": "", "~/.gnupg/private-keys-v1.d/key.key": "",
    "~/.config/gcloud/credentials.db": "", "~/.azure/accessTokens.json": "",
    "~/.kube/config": "", "~/.docker/config.json": "", "~/.git-credentials": "",
    "~/.pgpass": "", "~/.config/gh/hosts.yml": "", "~/.pypirc": "", "~/.npmrc": "",
    "~/.password-store/bank.gpg": "", "~/.local/state/kotoba/kotoba.db-wal": "",
    ".env": "", ".env.local": "", "../.env": "", "../.env.production": "",
    "~/key-link": "-> .ssh/id_ed25519", "~/ssh-link": "-> .ssh",
}
# Planted beside them, no secrets: what ordinary work still reads.
PLAIN = {
    "~/.local/lib/python%d.%d/site-packages/kotoba_probe.py" % sys.version_info[:2]:
        "VALUE = 42\n",
    # Start-up hooks beside it, which must never run in a snippet (the
    # user's site directory is on sys.path as a plain directory, last):
    # each puts its name in os.environ (KOTOBA_HOOKS_RAN), which
    # ok_beside_secrets reads.  (A
    # python3 a case starts itself, as exec_any_spelling's control does,
    # runs them, quietly.)
    "~/.local/lib/python%d.%d/site-packages/kotoba_hook.pth" % sys.version_info[:2]:
        "import os; os.environ['KOTOBA_HOOKS_RAN'] = 'pth'\n",
    "~/.local/lib/python%d.%d/site-packages/usercustomize.py" % sys.version_info[:2]:
        "import os; os.environ['KOTOBA_HOOKS_RAN'] = 'usercustomize'\n",
    "~/.local/lib/python%d.%d/site-packages/sitecustomize.py" % sys.version_info[:2]:
        "import os; os.environ['KOTOBA_HOOKS_RAN'] = 'sitecustomize'\n",
    "~/.local/lib/python%d.%d/site-packages/json.py" % sys.version_info[:2]:
        "import os; os.environ['KOTOBA_HOOKS_RAN'] = 'json.py'\n",
    "~/notes.txt": "plain notes\n",
    # A virtual environment in the working directory, as projects keep one.
    "venv/lib/python%d.%d/site-packages/kotoba_venv_probe.py" % sys.version_info[:2]:
        "VALUE = 7\n",
}
# The receipt's kinds (PROTOCOL.md, "exit"), and those whose target is a path.
KINDS = ("write", "create", "delete", "rename", "exec", "secret-read", "connect-unix", "bind",
         "listen", "signal", "syscall", "request")
PATH_KINDS = ("write", "create", "delete", "rename", "secret-read")
BLOCKED_MAX = 16  # PROTO_BLOCKED_MAX: past it, refusals count in blocked_total only
HEADER_KEYS = ("tries", "must", "control", "needs", "receipt", "receipt landlock",
               "receipt seccomp-only")
VICTIMS = ("append", "truncate", "chmod", "touch", "xattr", "link", "rename", "delete")


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)), 0)


def ensure_case_user():
    """As root: the user snippets of root clients run as, with a home."""
    if os.geteuid() != 0:
        return None
    if subprocess.run(["getent", "passwd", CASE_USER], capture_output=True).returncode:
        subprocess.run(["useradd", "--system", "--user-group", "--create-home", "--home-dir",
                        "/home/" + CASE_USER, "--shell", "/usr/sbin/nologin", CASE_USER],
                       check=True)
    return CASE_USER


def have_numpy():
    return subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True).returncode == 0


class Case:
    def __init__(self, path):
        self.name = os.path.basename(path)[:-3]
        self.fields = {}
        with open(path) as f:
            lines = f.read().splitlines()
        body = 0
        key = None
        for body, line in enumerate(lines):
            if not line.startswith("#"):
                break
            text = line[1:].strip()
            if ":" in text and text.split(":", 1)[0] in HEADER_KEYS:
                key, text = text.split(":", 1)
                self.fields[key] = text.strip()
            elif key:
                self.fields[key] += " " + text
        self.code = "\n".join(lines[body:]) + "\n"
        self.must = self.fields.get("must", "")
        if self.must not in ("fail in unattended", "fail in both", "work in unattended"):
            raise SystemExit("%s: bad or missing '# must:' line" % path)
        self.needs = self.fields.get("needs", "").split(" ", 1)[0]
        self.receipts = {}
        for key in ("receipt", "receipt landlock", "receipt seccomp-only"):
            if key in self.fields:
                self.receipts[key] = self.parse_receipt(path, key, self.fields[key])
        if self.positive() and any(self.receipts.values()):
            raise SystemExit("%s: a case that must work must have an empty receipt "
                             "('# receipt: none', the default)" % path)
        if not self.positive() and "receipt" not in self.receipts and not (
                "receipt landlock" in self.receipts and "receipt seccomp-only" in self.receipts):
            raise SystemExit("%s: a case that must fail needs a '# receipt:' line: the kinds "
                             "its unattended run's receipt holds, or 'none (why)'" % path)

    @staticmethod
    def parse_receipt(path, key, text):
        """'# receipt: KIND, KIND' or 'none (why)': the set of kinds."""
        head, _, why = text.partition("(")
        head = head.strip()
        if head == "none":
            if not why.strip(" )"):
                raise SystemExit("%s: '# %s: none' needs its reason in parentheses" % (path, key))
            return frozenset()
        kinds = [k.strip() for k in head.split(",")]
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise SystemExit("%s: '# %s:' names no receipt kind %s (kinds: %s, or none)"
                             % (path, key, ", ".join(bad), ", ".join(KINDS)))
        return frozenset(kinds)

    def receipt(self, mode):
        """The kinds the unattended run's receipt must hold in this mode."""
        base = mode[:-len("-warm")] if mode.endswith("-warm") else mode
        return self.receipts.get("receipt " + base, self.receipts.get("receipt", frozenset()))

    def positive(self):
        return self.must == "work in unattended"


def verdicts(out):
    return [l.split(None, 1)[0] for l in out.splitlines()
            if l.split(None, 1)[:1] in (["BLOCKED"], ["ESCAPED"], ["OK"], ["FAIL"])]


class Env:
    """What the cases run against: one broker per mode, a working directory
    the snippet's user could write to, and the harness's own servers."""

    def __init__(self, root):
        self.root = root
        self.case_user = ensure_case_user()
        self.peer = self.start_peer()
        self.port = self.start_http()
        self.abstract = "kotoba-escape-%d" % os.getpid()
        self.abstract_sock = self.listen_unix("\0" + self.abstract)
        self.unix_path = os.path.join(root, "svc", "service.sock")
        os.makedirs(os.path.dirname(self.unix_path))
        os.chmod(os.path.dirname(self.unix_path), 0o755)
        self.unix_sock = self.listen_unix(self.unix_path)
        # DAC must allow the connect: only the profile may refuse it.
        os.chmod(self.unix_path, 0o777)
        # Datagram services (syslog's kind), drained so a send never blocks.
        self.dgram_path = os.path.join(root, "svc", "dgram.sock")
        self.dgram_socks = [self.drained_dgram(a)
                            for a in (self.dgram_path, "\0" + self.abstract + "-dg")]
        os.chmod(self.dgram_path, 0o777)

    def start_peer(self):
        """A process of the snippet's user outside every sandbox (as a
        user's shell would be), for cases that reach /proc/<pid>/root."""
        if not self.case_user:
            return None
        return subprocess.Popen(["setpriv", "--reuid=" + self.case_user, "--regid=" + self.case_user,
                                 "--init-groups", "sleep", "3600"])

    def start_http(self):
        d = os.path.join(self.root, "www")
        os.makedirs(d)
        with open(os.path.join(d, "hello.txt"), "w") as f:
            f.write("hello from the harness\n")

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=d, **kw)

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv.server_address[1]

    @staticmethod
    def listen_unix(addr):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(addr)
        s.listen(64)
        return s

    @staticmethod
    def drained_dgram(addr):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(addr)

        def drain():
            while True:
                s.recv(65536)
        threading.Thread(target=drain, daemon=True).start()
        return s

    def substitute(self, code, workdir):
        code = code.replace("@@SECRET_PROBE@@", SECRET_PROBE)
        return (code.replace("@@WORKDIR@@", workdir).replace("@@PORT@@", str(self.port))
                .replace("@@MARK@@", SECRET_MARK)
                .replace("@@PEERPID@@", str(self.peer.pid if self.peer else 0))
                .replace("@@ABSTRACT@@", self.abstract).replace("@@UNIXSOCK@@", self.unix_path)
                .replace("@@UNIXDGRAM@@", self.dgram_path))


class Mode:
    def __init__(self, env, name, landlock, warm=False):
        self.env = env
        self.name = name
        self.landlock = landlock
        self.warm = warm
        d = tempfile.mkdtemp(dir=env.root)
        os.chmod(d, 0o755)
        self.broker = Broker(d, config=CONFIG.format(landlock="yes" if landlock else "no",
                                                     warm="yes" if warm else "no",
                                                     root_user=env.case_user or "nobody"))
        self.broker.start()
        self.workdir = os.path.join(d, "work")
        os.makedirs(self.workdir)
        self.uid, self.gid = self.snippet_identity()
        self.home = pwd.getpwuid(self.uid).pw_dir if env.case_user else None

    def snippet_identity(self):
        r = self.run("import os\nprint(os.getuid(), os.getgid())\n", False, "/")
        if "stdout" not in r:
            raise SystemExit("the broker runs nothing: %r\n%s" % (r, self.broker.read_log()))
        uid, gid = (int(x) for x in r["stdout"].split())
        return uid, gid

    def run(self, code, approve, cwd=None):
        if self.warm:
            # Time for the spare the last run of this kind left to start:
            # the case then meets the warm path, not a cold start.
            time.sleep(0.15)
        return self.broker.run_json(code, "--cwd", cwd or self.workdir, timeout=120,
                                    approve=approve)

    def plant(self):
        """The working directory as every case finds it: owned by the
        snippet's user, so file permissions never refuse for the profile.
        A warm mode keeps the directory and every planted file that is
        still what was planted (rewritten in place): a spare holds the
        directory and masked the secrets by their files, and a new inode
        would make each run start cold instead of taking the spare."""
        if self.warm:
            self.empty_workdir()
        else:
            shutil.rmtree(self.workdir)
            os.makedirs(self.workdir)
        files = {"readme-fixture.txt": FIXTURE}
        files.update({"victim-%s.txt" % v: "victim\n" for v in VICTIMS})
        for name, text in files.items():
            with open(os.path.join(self.workdir, name), "w") as f:
                f.write(text)
        for p in [self.workdir] + [os.path.join(self.workdir, n) for n in files]:
            if os.geteuid() == 0:
                os.chown(p, self.uid, self.gid)
        os.chmod(self.workdir, 0o755)
        if self.home:
            self.plant_secrets()

    def empty_workdir(self):
        """Everything in the working directory goes but the planted files,
        which plant() rewrites in place."""
        keep = {"readme-fixture.txt"} | {"victim-%s.txt" % v for v in VICTIMS}
        keep |= {n.split("/")[0] for n in dict(SECRETS, **PLAIN)
                 if not n.startswith(("~/", "../"))}
        for name in os.listdir(self.workdir):
            p = os.path.join(self.workdir, name)
            if name not in keep:
                self.remove_path(p)

    def remove_planted(self):
        """What plant_secrets made, gone (the home's included)."""
        for name in dict(SECRETS, **PLAIN):
            if name.startswith("~/"):
                base, rel = self.home, name[2:]
            elif name.startswith("../"):
                base, rel = os.path.dirname(self.workdir), name[3:]
            else:
                base, rel = self.workdir, name
            top = os.path.join(base, rel.split("/")[0])
            if os.path.isdir(top) and not os.path.islink(top):
                shutil.rmtree(top)
            elif os.path.lexists(top):
                os.unlink(top)

    def plant_secrets(self):
        """Each of SECRETS afresh, the user's own, readable by the user
        alone: only the profile, never permissions, may keep a snippet out."""
        planted = dict(SECRETS, **PLAIN)
        if not self.warm:
            self.remove_planted()
        for name, what in planted.items():
            if name.startswith("~/"):
                base, rel = self.home, name[2:]
            elif name.startswith("../"):
                base, rel = os.path.dirname(self.workdir), name[3:]
            else:
                base, rel = self.workdir, name
            path = os.path.join(base, rel)
            d = base
            for part in rel.split("/")[:-1]:
                d = os.path.join(d, part)
                os.makedirs(d, mode=0o700, exist_ok=True)
                os.chown(d, self.uid, self.gid)
            if what.startswith("-> "):
                if os.path.islink(path) and os.readlink(path) == what[3:]:
                    continue
                self.remove_path(path)
                os.symlink(what[3:], path)
                os.lchown(path, self.uid, self.gid)
                continue
            if os.path.islink(path) or os.path.isdir(path):
                self.remove_path(path)
            with open(path, "w") as f:
                f.write(PLAIN.get(name) or "%s %s\n" % (SECRET_MARK, name))
            os.chown(path, self.uid, self.gid)
            os.chmod(path, 0o644 if name in PLAIN else 0o600)

    @staticmethod
    def remove_path(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def snapshot(self):
        """Every name under the working directory (the planted venv's too)."""
        snap = {}
        for top, dirs, files in os.walk(self.workdir):
            dirs.sort()
            for name in sorted(dirs + files):
                p = os.path.join(top, name)
                st = os.lstat(p)
                digest = "directory"
                if name in files:
                    with open(p, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                snap[os.path.relpath(p, self.workdir)] = (
                    st.st_mode, st.st_size, st.st_mtime_ns, st.st_nlink, digest,
                    tuple(sorted(os.listxattr(p))))
        return snap

    def spares_taken(self):
        return len(re.findall(r"took spare worker", self.broker.read_log()))

    def stop(self):
        self.broker.stop()
        if self.home:
            self.remove_planted()


def skip_reason(case, mode, kernel_abi, numpy):
    if case.needs == "landlock" and not mode.landlock:
        return "needs Landlock; this mode is seccomp-only: " + case.fields["needs"]
    if case.needs == "landlock" and not kernel_abi:
        return "needs Landlock, which this kernel lacks"
    if case.needs == "home" and not mode.home:
        return ("snippets run as the caller, whose home the suite does not plant "
                "secrets in; run the suite as root")
    if case.needs == "numpy" and not numpy:
        return "numpy is not installed for %s (apt-get install python3-numpy)" % PYTHON
    if case.needs == "fork-bound" and mode.uid == 0:
        return ("snippets would run as uid 0, which RLIMIT_NPROC does not bind: "
                "nothing bounds a fork bomb; not run")
    return None


def scratch_left(r):
    """The scratch directories a run named (`SCRATCH <path>`) that outlived it."""
    named = [l.split(None, 1)[1] for l in r.get("stdout", "").splitlines()
             if l.startswith("SCRATCH ")]
    return [p for p in named if os.path.lexists(p)]


def describe(r):
    if "error" in r:
        return "error %s" % r.get("error")
    vs = verdicts(r.get("stdout", ""))
    counts = {v: vs.count(v) for v in dict.fromkeys(vs)}
    kinds = sorted({e.get("kind", "?") for e in r.get("blocked") or []})
    return ((" ".join("%s x%d" % kv for kv in counts.items()) or "no verdict")
            + " receipt{%s}" % ",".join(kinds))


def plausible_path(target, mode, code):
    """A refused path is one the case could have meant: under the working
    directory, the snippet user's home, the run's scratch directory or the
    secrets planted beside the working directory (spelled with doubled
    slashes or through a /proc/<pid>/root as the case may), or named in the
    case's code (it or its directory; /proc/<pid>/x as /proc/%s/x)."""
    if target in code or os.path.dirname(target) in code:
        return True
    # /proc/<pid>/...: a case that formats a pid into /proc/%s/...
    if re.sub(r"^/proc/[0-9]+/", "/proc/%s/", target) in code:
        return True
    path = re.sub(r"^/proc/(self|thread-self|[0-9]+)/root/", "/", re.sub("/+", "/", target))
    if re.search(r"/kotoba-run-[A-Za-z0-9]{6}(/|$)", path):
        return True
    home = pwd.getpwuid(mode.uid).pw_dir if mode.uid >= 0 else None
    parent = os.path.dirname(mode.workdir)
    roots = [mode.workdir] + ([home] if home else [])
    roots += [os.path.join(parent, n[3:]) for n in SECRETS if n.startswith("../")]
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def check_receipt(case, mode, r, code):
    """What is wrong with an unattended run's receipt (empty: nothing)."""
    blocked = r.get("blocked") or []
    problems = []
    want = case.receipt(mode.name)
    got = {e.get("kind") for e in blocked}
    if got != want:
        problems.append("receipt: holds {%s}, the header says {%s}" % (
            ", ".join(sorted(map(str, got))), ", ".join(sorted(want))))
    for e in blocked:
        t = e.get("target", "")
        bad = None
        if e.get("kind") not in KINDS:
            bad = "unknown kind"
        elif not isinstance(e.get("count"), int) or e["count"] < 1:
            bad = "count below 1"
        elif e.get("seen_by") not in ("worker", "python", "proxy"):
            bad = "seen_by neither worker, python nor proxy"
        elif (e["kind"] == "request") != (e.get("seen_by") == "proxy" and
                                          e.get("by") == "egress proxy"):
            bad = "a request not by the egress proxy, or the proxy's entry not a request"
        elif e["kind"] == "request" and " refused: " not in t:
            bad = "a request's target not the proxy's sentence"
        elif e.get("seen_by") == "python" and e.get("inferred") is not True:
            bad = "an interpreter's entry not marked inferred"
        elif e["kind"] in PATH_KINDS and not t.startswith("/"):
            bad = "target not an absolute path"
        elif e["kind"] in PATH_KINDS and not plausible_path(t, mode, code):
            bad = "target neither under the working directory or home nor named by the case"
        elif e["kind"] == "exec" and not (t.startswith("/") or t.startswith("fd ") or t == "?"):
            bad = "exec target neither a path nor `fd N`"
        elif e["kind"] == "signal" and not t.isdigit():
            bad = "signal target not a pid"
        elif e["kind"] == "connect-unix" and t != "AF_UNIX socket":
            bad = "connect-unix target not `AF_UNIX socket`"
        elif not t:
            bad = "empty target"
        if bad:
            problems.append("receipt: %s: %r" % (bad, e))
    total = sum(e.get("count", 0) for e in blocked)
    if len(blocked) < BLOCKED_MAX and r.get("blocked_total", 0) != total:
        problems.append("receipt: blocked_total %r, the entries count %d"
                        % (r.get("blocked_total"), total))
    if len(blocked) >= BLOCKED_MAX and (r.get("blocked_total") or 0) < total:
        problems.append("receipt: blocked_total %r below the entries' %d"
                        % (r.get("blocked_total"), total))
    if problems:
        problems.append("receipt: %s" % json.dumps(
            {k: r[k] for k in ("blocked", "blocked_total") if k in r}))
    return problems


def judge(case, r, profile, want):
    """Returns None when the run says what it must, else why not.  want:
    'fail' (every attempt BLOCKED), 'work' (OK, exit 0) or 'control'
    (every attempt ESCAPED)."""
    if r.get("error") or "stdout" not in r:
        labels = r.get("labels")
        if labels:
            return ("the pre-screen caught it (%s): a case must walk past the text "
                    "matcher" % ", ".join(labels))
        return "did not run: %s" % r.get("error", r)
    if r.get("profile") != profile:
        return "ran under profile %r, not %r" % (r.get("profile"), profile)
    vs = verdicts(r["stdout"])
    if want == "fail" and (not vs or any(v != "BLOCKED" for v in vs)):
        return "not everything was blocked"
    if want == "control" and (not vs or any(v != "ESCAPED" for v in vs)):
        return "control: the attempt failed even approved, so the refusal proves nothing"
    if want == "work" and (not vs or any(v != "OK" for v in vs) or r.get("exit") != 0):
        return "did not work (exit %r)" % r.get("exit")
    return None


def run_case(case, mode, verbose):
    """Runs one case in one mode; returns (ok, summary, problems, runs to show)."""
    env, notes, problems, details = mode.env, [], [], []
    code = lambda: env.substitute(case.code, mode.workdir)  # noqa: E731
    mode.plant()
    before = mode.snapshot()
    r = mode.run(code(), approve=False)
    why = judge(case, r, "unattended", "work" if case.positive() else "fail")
    notes.append("unattended: " + describe(r))
    if why or verbose:
        details.append(r)
    if why:
        problems.append("unattended: " + why)
    if "stdout" in r:
        problems += ["unattended: " + p for p in check_receipt(case, mode, r, code())]
    if scratch_left(r):
        problems.append("scratch outlived the run: %s" % ", ".join(scratch_left(r)))
    after = mode.snapshot()
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before if before.get(k) != after.get(k)})
        problems.append("the working directory changed: %s" % ", ".join(changed))
    if not mode.broker.alive():
        problems.append("the broker died")
    runs = []
    if case.must == "fail in both":
        runs.append(("approved", "fail"))
    if case.fields.get("control") == "works in approved":
        runs.append(("control", "control"))
    for label, want in runs:
        mode.plant()
        r = mode.run(code(), approve=True)
        why = judge(case, r, "approved", want)
        notes.append("%s: %s" % (label, describe(r)))
        if why or verbose:
            details.append(r)
        if why:
            problems.append("%s: %s" % (label, why))
        # `kotoba run --json` prints an absent receipt as [] and 0.
        if r.get("blocked") or r.get("blocked_total"):
            problems.append("%s: an approved run's receipt must be empty: %s" % (label, json.dumps(
                {k: r[k] for k in ("blocked", "blocked_total") if k in r})))
        if not mode.broker.alive():
            problems.append("the broker died")
    return not problems, " | ".join(notes), problems, details


def print_details(problems, details):
    for p in problems:
        print("      - " + p)
    for r in details:
        for stream in ("stdout", "stderr"):
            text = (r.get(stream) or "").strip()
            if text:
                print("      %s:" % stream)
                for line in text.splitlines()[-12:]:
                    print("        " + line)
        if r.get("blocked"):
            print("      receipt (blocked_total %s):" % r.get("blocked_total"))
            for e in r["blocked"]:
                print("        %s %r x%s by %s, seen by %s" % (e.get("kind"), e.get("target"),
                                                          e.get("count"), e.get("by"),
                                                          e.get("seen_by")))
        if "error" in r:
            print("        %s" % {k: v for k, v in r.items() if k not in ("stdout", "stderr")})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("all", "landlock", "seccomp-only", "landlock-warm",
                                       "seccomp-only-warm"), default="all")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every run's output")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args()
    cases = [Case(os.path.join(CASES, f)) for f in sorted(os.listdir(CASES)) if f.endswith(".py")]
    if args.cases:
        cases = [c for c in cases if c.name in args.cases]
    abi, numpy = landlock_abi(), have_numpy()
    print("# kernel Landlock ABI %d (the worker uses up to 7); numpy %s; %d cases"
          % (abi, "installed" if numpy else "absent", len(cases)))
    root = tempfile.mkdtemp(prefix="kotoba-escape-")
    os.chmod(root, 0o755)
    passed = failed = skipped = 0
    env = None
    try:
        env = Env(root)
        modes = [("landlock", True, False), ("seccomp-only", False, False),
                 ("landlock-warm", True, True), ("seccomp-only-warm", False, True)]
        if args.mode != "all":
            modes = [m for m in modes if m[0] == args.mode]
        for name, landlock, warm in modes:
            mode = Mode(env, name, landlock, warm)
            user = pwd.getpwuid(mode.uid).pw_name if mode.uid >= 0 else "?"
            print("# mode %s: [sandbox] landlock = %s, warm = %s; snippets run as %s (uid %d)"
                  % (name, "yes" if landlock else "no", "yes" if warm else "no", user,
                     mode.uid))
            if landlock and not abi:
                print("# SKIP LOUDLY: this kernel has no Landlock; the landlock mode "
                      "runs on the seccomp fallback")
            try:
                for case in cases:
                    reason = skip_reason(case, mode, abi, numpy)
                    if reason:
                        skipped += 1
                        print("SKIP  %-26s [%s] %s" % (case.name, name, reason))
                        continue
                    t = time.monotonic()
                    ok, summary, problems, details = run_case(case, mode, args.verbose)
                    passed += ok
                    failed += not ok
                    print("%s  %-26s [%s] %s (%.1fs)" % ("PASS" if ok else "FAIL", case.name,
                                                          name, summary, time.monotonic() - t))
                    if problems or details:
                        print_details(problems, details)
                    sys.stdout.flush()
            finally:
                if warm:
                    print("# mode %s: %d runs took a spare" % (name, mode.spares_taken()))
                mode.stop()
    finally:
        if env and env.peer:
            env.peer.kill()
            env.peer.wait()
        shutil.rmtree(root, ignore_errors=True)
    print("# %d skipped (each SKIP line says why)" % skipped)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
