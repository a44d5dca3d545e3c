"""What ordinary agent snippets need from the sandbox, against a real broker,
worker and python3: signals as a shell leaves them, the working directory's
modules, output cut at [limits] output."""
import os
import signal

import pytest

from conftest import Broker

PROFILES = ["unattended", "approved"]


def run(b, code, profile, *args):
    return b.run_json(code, *args, approve=(profile == "approved"))


SIGNALS = r"""
import os, signal, time
print("int", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print("quit", signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL)
print("mask", sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_signals_ignored_by_the_broker_s_starter_are_default_in_the_snippet(tmpdir_k, profile):
    """A broker started with `&` from a script inherits SIGINT and SIGQUIT
    ignored; the snippet still gets them as python3 started bare does:
    KeyboardInterrupt on SIGINT, SIGQUIT default, nothing blocked."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        b = Broker(tmpdir_k).start()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    try:
        with open("/proc/%d/status" % b.proc.pid) as f:
            ign = int([l for l in f if l.startswith("SigIgn:")][0].split()[1], 16)
        # the control: the broker itself did inherit them ignored
        assert ign & (1 << (signal.SIGINT - 1)) and ign & (1 << (signal.SIGQUIT - 1))
        out = run(b, SIGNALS, profile)
        text = out["stdout"]
        assert "int True\nquit True\nmask []\nKeyboardInterrupt\n" == text, out
    finally:
        b.stop()


def project_dir(tmpdir_k):
    """A working directory as an agent leaves it: a helper module it wrote a
    step earlier, and a json.py that must not shadow the standard library."""
    d = os.path.join(tmpdir_k, "project")
    os.mkdir(d)
    files = {"helpers.py": "def slugify(s):\n    return s.lower().replace(' ', '-')\n",
             "json.py": "raise SystemExit('the json.py of the working directory ran')\n"}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(d, name), 0o644)
    os.chmod(d, 0o755)
    return d


IMPORTS = r"""
import json, os, sys
from helpers import slugify
print(slugify("Hello World"), json.__file__.startswith(sys.base_prefix))
print(sys.path[-1] == os.getcwd(), sys.path.index(os.getcwd()) > sys.path.index(os.path.dirname(os.__file__)))
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_the_working_directory_s_modules_import_after_everything_else(broker, tmpdir_k, profile):
    d = project_dir(tmpdir_k)
    out = run(broker, IMPORTS, profile, "--cwd", d)
    assert out["_status"] == 0 and out["stdout"] == "hello-world True\nTrue True\n", out
