"""kotoba_broker as a package: its version, the names it renamed, its type
annotations (PEP 561), and `pip install` into a venv, offline, then used
against a real broker from outside this tree."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import kotoba_broker as kb
from kotoba_broker import AsyncBroker, Broker

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PACKAGE = os.path.join(ROOT, "client", "python")
# What Debian's packages are installed for (`python3` may be another one).
PYTHON = "/usr/bin/python3"


def test_version_is_the_c_librarys():
    header = open(os.path.join(ROOT, "client", "kotoba-client.h")).read()
    v = re.search(r'^#define KOTOBA_CLIENT_VERSION "(.*)"$', header, re.M).group(1)
    assert kb.__version__ == v
    assert Broker.__init__.__defaults__[-1].endswith("/" + v)  # the client name sent


def test_former_parameter_names_still_work_with_a_warning(broker_proc):
    with pytest.warns(DeprecationWarning, match="socket= is deprecated"):
        c = Broker(socket=broker_proc.socket, channel=False)
    with c:
        with pytest.warns(DeprecationWarning, match="max= is deprecated"):
            assert len(c.audit_tail(max=1)) <= 1
        with pytest.raises(TypeError, match="not both"), pytest.warns(DeprecationWarning):
            c.audit_tail(2, max=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sock'"):
        Broker(sock=broker_proc.socket)
    with pytest.warns(DeprecationWarning):
        AsyncBroker(socket=broker_proc.socket)


def test_typed_strictly():
    if not os.path.exists("/usr/bin/mypy"):
        pytest.skip("mypy is not installed (Debian: mypy)")
    p = subprocess.run(["/usr/bin/mypy", "--strict", "--no-incremental", "kotoba_broker"],
                       cwd=PACKAGE, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.exists(os.path.join(PACKAGE, "kotoba_broker", "py.typed"))


USER_PROGRAM = """\
import sys
from kotoba_broker import Broker, Result

with Broker(socket_path=sys.argv[1], channel=False) as b:
    r: Result = b.run("print(6*7)", cwd=sys.argv[2])
    print(r.stdout, end="")
    print(b.audit_tail(count=1)[0].decision)
"""


def test_pip_installs_into_a_venv_and_runs(broker_proc, workdir):
    # a copy: setuptools builds in the source directory it is given
    src = os.path.join(workdir, "src")
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    venv = os.path.join(workdir, "v")
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index",
                          "--no-build-isolation", src], capture_output=True, text=True, env=env)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    prog = os.path.join(workdir, "prog.py")
    with open(prog, "w") as f:
        f.write(USER_PROGRAM)
    vpy = os.path.join(venv, "bin", "python")
    where = subprocess.run([vpy, "-c", "import kotoba_broker; print(kotoba_broker.__file__)"],
                           cwd=workdir, capture_output=True, text=True, env=env)
    assert where.stdout.startswith(venv + "/lib/"), where
    run = subprocess.run([vpy, prog, broker_proc.socket, broker_proc.dir], cwd=workdir,
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and run.stdout == "42\nran\n", run
    if not os.path.exists("/usr/bin/mypy"):
        return
    # the installed package's annotations reach a program that uses it
    # (py.typed), and mistakes in it are found
    mypy = ["/usr/bin/mypy", "--strict", "--no-incremental", "--python-executable", vpy]
    ok = subprocess.run(mypy + [prog], cwd=workdir, capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    with open(prog, "a") as f:
        f.write("n: int = b.revoke()\n")
    bad = subprocess.run(mypy + [prog], cwd=workdir, capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and 'expression has type "str"' in bad.stdout, bad


def test_hello_declares_escalate_only_when_asked():
    """The hello vectors of PROTOCOL.md, byte for byte."""
    from kotoba_broker import wire
    plain = wire.hello_frame(True, "kotoba/0.1")
    assert b"escalate" not in plain
    esc = wire.hello_frame(True, "kotoba/0.1", escalate=True)
    assert esc == bytes.fromhex(
        "0000003a85a474797065a568656c6c6fa776657273696f6e01a76368616e6e656c"
        "c3a8657363616c617465c3a6636c69656e74aa6b6f746f62612f302e31")
    with pytest.raises(ValueError):
        wire.hello_frame(False, "x", escalate=True)
    rerun = wire.answer_frame("c-2", "rerun")
    assert rerun[4:] and b"rerun" in rerun
    with pytest.raises(ValueError):
        wire.answer_frame("c-2", "rerun", for_=1)
