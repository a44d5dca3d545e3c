"""Fixtures for the C library's test: a real kotoba-brokerd per test,
started by the integration suite's Broker class (tests/integration/
conftest.py, loaded under another module name so it does not shadow this
conftest).  KOTOBA_BUILD points at the build directory."""
import importlib.util
import os
import shutil
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("KOTOBA_BUILD", os.path.join(ROOT, "build"))
KC_TEST = os.path.join(BUILD, "client", "tests", "kc-test")


def _load_integration():
    path = os.path.join(ROOT, "tests", "integration", "conftest.py")
    spec = importlib.util.spec_from_file_location("kotoba_integration_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


integration = _load_integration()
BrokerProcess = integration.Broker
wait_for = integration.wait_for


@pytest.fixture
def workdir():
    # 0755: as root the broker runs snippets as its own unprivileged user,
    # which must be able to enter the working directory
    d = tempfile.mkdtemp(prefix="kotoba-kc-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _clean(b):
    b.stop()
    log = b.read_log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error:" not in log, log


@pytest.fixture
def make_broker(workdir):
    """make_broker(config=None, extra_args=()) -> a started broker process."""
    made = []

    def make(**kw):
        sub = tempfile.mkdtemp(dir=workdir)
        os.chmod(sub, 0o755)
        b = BrokerProcess(sub, **kw).start()
        made.append(b)
        return b

    yield make
    for b in made:
        _clean(b)


@pytest.fixture
def broker_proc(make_broker):
    return make_broker()
