"""Fixtures: a real kotoba-brokerd per test, the same ones the C library's
tests use (client/tests/conftest.py, loaded under another module name so it
does not shadow this conftest).  KOTOBA_BUILD points at the build directory."""
import importlib.util
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))


def _load_shared():
    path = os.path.join(ROOT, "client", "tests", "conftest.py")
    spec = importlib.util.spec_from_file_location("kotoba_client_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_shared = _load_shared()
workdir = _shared.workdir
make_broker = _shared.make_broker
broker_proc = _shared.broker_proc
wait_for = _shared.wait_for
