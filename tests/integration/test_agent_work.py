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
