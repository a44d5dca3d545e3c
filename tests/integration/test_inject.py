"""Nothing runs that the card does not show: no environment variable and no
file beside the snippet injects code before or around it.

Each hidden payload prints a HIDDEN marker.  A control run of the same
python3 (/usr/bin/python3 -B -, as snippets started before -I) in the same
directory with the same variables shows that each payload is real; through
the broker, under the approved profile (card answered once) and unattended
(no channel), the marker never appears and the snippet's own output does.
"""
import os
import subprocess

import pytest

PYTHON = "/usr/bin/python3"


def hidden_files(d):
    """A working directory full of code the card would not show."""
    files = {
        "sitecustomize.py": 'print("HIDDEN-sitecustomize")\n',
        "usercustomize.py": 'print("HIDDEN-usercustomize")\n',
        "evil.pth": 'import sys; print("HIDDEN-pth")\n',
        # shadows the standard library's json for `import json`
        "json.py": 'print("HIDDEN-json")\ndef dumps(x):\n    return "HIDDEN-json-dumps"\n',
        "hook.py": 'def bp(*a, **k):\n    print("HIDDEN-breakpoint")\n',
        "startup.py": 'print("HIDDEN-startup")\n',
        "data.txt": "relative-read-ok\n",
    }
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    # a user base with a .pth in its site-packages
    ver = "python%d.%d" % tuple(int(x) for x in subprocess.check_output(
        [PYTHON, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"]).split())
    site = os.path.join(d, "userbase", "lib", ver, "site-packages")
    os.makedirs(site)
    with open(os.path.join(site, "u.pth"), "w") as f:
        f.write('import sys; print("HIDDEN-userbase")\n')
    # a PYTHONHOME whose `encodings` (imported first at start) is ours
    enc = os.path.join(d, "home", "lib", ver, "encodings")
    os.makedirs(enc)
    with open(os.path.join(enc, "__init__.py"), "w") as f:
        f.write('import posix\nposix.write(1, b"HIDDEN-pythonhome\\n")\n')
    so = os.path.join(d, "preload.so")
    src = os.path.join(d, "preload.c")
    with open(src, "w") as f:
        f.write('#include <unistd.h>\n__attribute__((constructor)) static void c(void)\n'
                '{ write(1, "HIDDEN-ld-preload\\n", 18); }\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", so, src], check=True)
    for root, dirs, names in os.walk(d):
        os.chmod(root, 0o755)
        for n in names:
            os.chmod(os.path.join(root, n), 0o644)
    return d


# Each variant: the env a client sends, the snippet, and its own output.
SNIPPET = 'print("snippet-ran")'
ENV_VARIANTS = {
    "PYTHONPATH": lambda d: ({"PYTHONPATH": d}, SNIPPET),
    "PYTHONSTARTUP+PYTHONINSPECT": lambda d: (
        {"PYTHONSTARTUP": os.path.join(d, "startup.py"), "PYTHONINSPECT": "1"}, SNIPPET),
    "PYTHONHOME": lambda d: ({"PYTHONHOME": os.path.join(d, "home")}, SNIPPET),
    "PYTHONUSERBASE": lambda d: ({"PYTHONUSERBASE": os.path.join(d, "userbase")}, SNIPPET),
    "PYTHONWARNINGS": lambda d: ({"PYTHONWARNINGS": "ignore::json.W", "PYTHONPATH": d},
                                 SNIPPET),
    "PYTHONBREAKPOINT": lambda d: ({"PYTHONBREAKPOINT": "hook.bp"},
                                   'breakpoint()\nprint("snippet-ran")'),
    "LD_PRELOAD": lambda d: ({"LD_PRELOAD": os.path.join(d, "preload.so")}, SNIPPET),
    "LD_LIBRARY_PATH": lambda d: ({"LD_LIBRARY_PATH": d}, SNIPPET),
    "GCONV_PATH": lambda d: ({"GCONV_PATH": d}, SNIPPET),
}

# The variants whose payload the control run shows running: proof that the
# refusal is what stops them, not a payload that never worked.
CONTROL_SHOWS = {"PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONBREAKPOINT",
                 "PYTHONWARNINGS", "LD_PRELOAD"}


def control(d, env, code):
    """The same payload against python3 started as before -I."""
    base = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    p = subprocess.run([PYTHON, "-B", "-"], input=code.encode(), cwd=d, capture_output=True,
                       env=dict(base, **env), timeout=30)
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def through_broker(broker, d, code, channel, env=None):
    """One exec; the card (if any) is answered once.  Returns (cards, end, text)."""
    c = broker.client(channel=channel)
    cards = []

    def on_card(cl, m):
        cards.append(m)
        cl.send({"type": "answer", "card": m["card"], "choice": "once"})

    fields = {"cwd": d}
    if env is not None:
        fields["env"] = env
    c.exec(code, **fields)
    out = c.until_end(on_card=on_card)
    c.close()
    text = (out["stdout"] + out["stderr"]).decode(errors="replace")
    return cards, out["end"], text


PROFILES = [pytest.param(True, id="approved"), pytest.param(False, id="unattended")]


@pytest.fixture
def planted(tmpdir_k):
    d = os.path.join(tmpdir_k, "work")
    os.mkdir(d)
    return hidden_files(d)


@pytest.mark.parametrize("variant", sorted(ENV_VARIANTS))
def test_control_payloads_are_real(planted, variant):
    env, code = ENV_VARIANTS[variant](planted)
    text = control(planted, env, code)
    if variant in CONTROL_SHOWS:
        assert "HIDDEN" in text, (variant, text)


@pytest.mark.parametrize("channel", PROFILES)
@pytest.mark.parametrize("variant", sorted(ENV_VARIANTS))
def test_interpreter_env_is_refused_before_any_card(broker, planted, variant, channel):
    env, code = ENV_VARIANTS[variant](planted)
    cards, end, text = through_broker(broker, planted, code, channel, env=dict(env, TZ="UTC"))
    assert cards == [], "a card was shown for a request that carries %s" % variant
    assert end["type"] == "error" and end["code"] == "bad-field", end
    assert any(name in end["message"] for name in env), end
    assert "HIDDEN" not in text and "snippet-ran" not in text


def test_control_cwd_files_are_real(planted):
    """Without -I the working directory is on sys.path: json.py shadows the
    standard library (sitecustomize.py there runs with PYTHONPATH, above)."""
    assert "HIDDEN-json" in control(planted, {}, "import json\nprint(json.dumps([1]))")


@pytest.mark.parametrize("channel", PROFILES)
def test_files_in_cwd_run_nothing(broker, planted, channel):
    code = ("import json, sys\n"
            "print(json.dumps([1]), json.__file__.startswith(sys.base_prefix))\n"
            "print(open('data.txt').read().strip())\n"
            "print('snippet-ran')\n")
    cards, end, text = through_broker(broker, planted, code, channel)
    assert (len(cards) == 1) == channel
    assert end["type"] == "exit" and end["code"] == 0, (end, text)
    assert "HIDDEN" not in text, text
    assert "[1] True" in text and "relative-read-ok" in text and "snippet-ran" in text


@pytest.mark.parametrize("channel", PROFILES)
def test_python_runs_isolated(broker, planted, channel):
    """-I: environment ignored, no user site; the working directory only at
    the end of sys.path, after the standard library and every package."""
    code = ("import os, site, sys\n"
            "f = sys.flags\n"
            "print(f.isolated, f.ignore_environment, f.no_user_site, site.ENABLE_USER_SITE)\n"
            "print(sys.path[-1] == os.getcwd(), sys.path.count(os.getcwd()), '' in sys.path)\n"
            "print(sorted(k for k in os.environ if k.startswith(('PYTHON', 'LD_'))))\n")
    cards, end, text = through_broker(broker, planted, code, channel)
    assert end["type"] == "exit" and end["code"] == 0, (end, text)
    assert text.splitlines()[:3] == ["1 1 1 False", "True 1 False", "[]"], text


@pytest.mark.parametrize("channel", PROFILES)
def test_a_snippet_opts_into_a_package_directory_in_its_own_code(broker, planted, channel):
    """What -I takes away, the snippet can add back, on the card: its own
    site directory (a venv's site-packages, ~/.local's) by name."""
    pkgs = os.path.join(planted, "pkgs")
    os.mkdir(pkgs)
    with open(os.path.join(pkgs, "agentlib.py"), "w") as f:
        f.write("VALUE = 42\n")
    os.chmod(pkgs, 0o755)
    os.chmod(os.path.join(pkgs, "agentlib.py"), 0o644)
    code = ("import site\nsite.addsitedir(%r)\nimport agentlib\nprint(agentlib.VALUE)\n" % pkgs)
    cards, end, text = through_broker(broker, planted, code, channel)
    assert end["type"] == "exit" and end["code"] == 0, (end, text)
    assert text.strip() == "42", text


def test_mplbackend_may_not_import_a_module(broker, planted):
    cards, end, _ = through_broker(broker, planted, SNIPPET, True,
                                   env={"MPLBACKEND": "module://hook"})
    assert cards == [] and end["code"] == "bad-field", end
    cards, end, text = through_broker(broker, planted, SNIPPET, False,
                                      env={"MPLBACKEND": "Agg", "TZ": "UTC"})
    assert end["type"] == "exit" and "snippet-ran" in text, (end, text)


def utf7_line(code):
    """code as UTF-7 does it in a comment: every character base64, so the
    card shows one '+...-' word and python3 a new line of code."""
    import base64
    return "+" + base64.b64encode(("\n" + code + "\n").encode("utf-16-be")).decode().rstrip("=") + "-"


HIDDEN_UTF7 = utf7_line('print("HIDDEN-utf7")')
# A coding line makes python3 decode the bytes otherwise than the card
# shows them (as UTF-8).
ENCODING_VARIANTS = {
    "utf-7": "# -*- coding: utf-7 -*-\n%s  # %s\n" % (SNIPPET, HIDDEN_UTF7),
    "utf-7 on line 2 after a CR": "#!/usr/bin/python3\r# coding=UTF_7\n%s  # %s\n"
                                  % (SNIPPET, HIDDEN_UTF7),
    "latin-1": "# vim: set fileencoding=latin-1 :\n%s\n" % SNIPPET,
}


def control_from_file(d, code):
    """python3 -I reads a coding line from a file on its stdin (as the
    worker gives it the code); from a pipe it cannot switch decoders."""
    path = os.path.join(d, "control-src.py")
    with open(path, "w") as f:
        f.write(code)
    with open(path, "rb") as src:
        p = subprocess.run([PYTHON, "-I", "-B", "-"], stdin=src, cwd=d, capture_output=True,
                           timeout=30)
    os.unlink(path)
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def test_control_encoding_payloads_are_real(planted):
    for name in ("utf-7", "utf-7 on line 2 after a CR"):
        text = control_from_file(planted, ENCODING_VARIANTS[name])
        assert "HIDDEN-utf7" in text and "snippet-ran" in text, (name, text)


@pytest.mark.parametrize("channel", PROFILES)
@pytest.mark.parametrize("variant", sorted(ENCODING_VARIANTS))
def test_foreign_source_encoding_is_refused_before_any_card(broker, planted, variant, channel):
    cards, end, text = through_broker(broker, planted, ENCODING_VARIANTS[variant], channel)
    assert cards == [], "a card was shown for a snippet declaring %s" % variant
    assert end["type"] == "error" and end["code"] == "bad-field", end
    assert "source encoding" in end["message"], end
    assert "HIDDEN" not in text and "snippet-ran" not in text


@pytest.mark.parametrize("channel", PROFILES)
def test_utf8_declarations_and_look_alikes_run(broker, planted, channel):
    """What python3 reads as UTF-8, or not as a declaration at all, runs."""
    for code in ("# -*- coding: utf-8 -*-\n" + SNIPPET,
                 "#!/usr/bin/python3\n# coding=UTF_8\n" + SNIPPET,
                 SNIPPET + "  # coding: utf-7\n",
                 "x = 1\n# coding: utf-7\n" + SNIPPET,
                 "open('data.txt', encoding='utf-7').close()\n" + SNIPPET):
        cards, end, text = through_broker(broker, planted, code, channel)
        assert end["type"] == "exit" and end["code"] == 0, (code, end, text)
        assert "snippet-ran" in text, (code, text)


# A lone carriage return is a line break to python3, shown inside one
# numbered line by a card: here the hidden line reads as the comment's rest.
LONE_CR = "%s  # say hello\rprint('HIDDEN-cr')\n" % SNIPPET


def test_control_lone_cr_payload_is_real(planted):
    text = control(planted, {}, LONE_CR)
    assert "HIDDEN-cr" in text and "snippet-ran" in text, text


@pytest.mark.parametrize("channel", PROFILES)
def test_a_lone_carriage_return_is_refused_before_any_card(broker, planted, channel):
    cards, end, text = through_broker(broker, planted, LONE_CR, channel)
    assert cards == [], "a card was shown for a snippet with a lone CR"
    assert end["type"] == "error" and end["code"] == "bad-field", end
    assert "carriage return" in end["message"] and "line 1" in end["message"], end
    assert "HIDDEN" not in text and "snippet-ran" not in text


@pytest.mark.parametrize("channel", PROFILES)
def test_crlf_line_ends_run(broker, planted, channel):
    """CR LF is one line break to python3 and to the card; a CR last is none."""
    for code in ("x = 1\r\n" + SNIPPET + "\r\n", SNIPPET + "\r"):
        cards, end, text = through_broker(broker, planted, code, channel)
        assert end["type"] == "exit" and end["code"] == 0, (code, end, text)
        assert "snippet-ran" in text, (code, text)
