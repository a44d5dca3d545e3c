"""The two card renderers agree: libkotoba-client's kotoba_card_text() and
kotoba_show() (C, called here through ctypes on the built shared library)
and kotoba_broker.render (Python) turn the same hostile cards into the
same text, byte for byte, at several widths and with colour on and off."""
import ctypes
import dataclasses
import os
import sys

import pytest

from conftest import BUILD, ROOT

sys.path.insert(0, os.path.join(ROOT, "client", "python"))
from kotoba_broker import Blocked, Card, Label, card_text, show  # noqa: E402

SO = os.path.join(BUILD, "libkotoba-client.so")
with open(SO, "rb") as _f:
    if b"libasan.so" in _f.read():
        # ASan must be the first library of a process: loaded into this
        # python it aborts.  The plain build's check-client runs this test.
        pytest.skip("the library is built with AddressSanitizer, which cannot be loaded "
                    "into an uninstrumented python", allow_module_level=True)
LIB = ctypes.CDLL(SO)
LIBC = ctypes.CDLL(None)


class CLabel(ctypes.Structure):
    _fields_ = [("label", ctypes.c_char_p), ("start", ctypes.c_uint64),
                ("end", ctypes.c_uint64), ("line", ctypes.c_uint64)]


class CEnv(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class CLimit(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_uint64)]


class CBlocked(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char * 16), ("target", ctypes.c_char * 256),
                ("count", ctypes.c_uint64), ("by", ctypes.c_char * 16),
                ("seen_by", ctypes.c_char * 16), ("inferred", ctypes.c_bool)]


class CCard(ctypes.Structure):
    """struct kotoba_card, field for field (client/kotoba-client.h): the
    library reads every field, those appended later too."""
    _fields_ = [("id", ctypes.c_char_p), ("snippet", ctypes.c_char_p),
                ("snippet_len", ctypes.c_size_t), ("labels", ctypes.POINTER(CLabel)),
                ("n_labels", ctypes.c_size_t), ("options", ctypes.c_void_p),
                ("family", ctypes.c_char_p), ("family_button", ctypes.c_char_p),
                ("family_detail", ctypes.c_char_p), ("expires_ms", ctypes.c_uint64),
                ("reason", ctypes.c_char_p), ("cwd", ctypes.c_char_p),
                ("timeout_ms", ctypes.c_uint64), ("env", ctypes.POINTER(CEnv)),
                ("n_env", ctypes.c_size_t), ("limits", ctypes.POINTER(CLimit)),
                ("n_limits", ctypes.c_size_t), ("grant_ttl_ms", ctypes.c_uint64),
                ("escalate", ctypes.c_bool), ("blocked", ctypes.POINTER(CBlocked)),
                ("n_blocked", ctypes.c_size_t), ("blocked_total", ctypes.c_uint64),
                ("after_seq", ctypes.c_uint64)]


LIB.kotoba_card_text.restype = ctypes.c_void_p
LIB.kotoba_card_text.argtypes = [ctypes.POINTER(CCard), ctypes.c_uint, ctypes.c_uint]
LIBC.free.argtypes = [ctypes.c_void_p]


def c_card_text(card, width, colour):
    b = lambda s: s.encode() if s is not None else None  # noqa: E731
    labels = (CLabel * max(1, len(card.labels)))(
        *[CLabel(b(l.label), l.start, l.end, l.line) for l in card.labels])
    env = (CEnv * max(1, len(card.env)))(*[CEnv(b(n), b(v)) for n, v in card.env])
    limits = (CLimit * max(1, len(card.limits)))(*[CLimit(b(n), v) for n, v in card.limits])
    blocked = (CBlocked * max(1, len(card.blocked)))(
        *[CBlocked(x.kind.encode(), x.target.encode(), x.count, x.by.encode(),
                   x.seen_by.encode(), x.inferred) for x in card.blocked])
    snippet = card.snippet.encode()
    c = CCard(b(card.id), snippet, len(snippet), labels, len(card.labels), None,
              b(card.family), b(card.button), b(card.detail), int(card.expires * 1000),
              b(card.reason), b(card.cwd), int(round(card.timeout * 1000)), env,
              len(card.env), limits, len(card.limits), card.grant_ttl_ms, card.escalate,
              blocked, len(card.blocked), card.blocked_total, card.after_seq)
    p = LIB.kotoba_card_text(ctypes.byref(c), width, 1 if colour else 0)
    assert p
    try:
        return ctypes.string_at(p).decode()
    finally:
        LIBC.free(p)


def c_show(text, flags=0):
    buf, size = ctypes.c_char_p(), ctypes.c_size_t()
    LIBC.open_memstream.restype = ctypes.c_void_p
    f = LIBC.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    LIB.kotoba_show.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
    LIB.kotoba_show(f, text, len(text), flags)
    LIBC.fclose.argtypes = [ctypes.c_void_p]
    LIBC.fclose(f)
    out = ctypes.string_at(buf, size.value).decode()
    LIBC.free(ctypes.cast(buf, ctypes.c_void_p))
    return out


SNIPPETS = [
    'import os; os.system("id > card_pwned")\n#\x1b[2K\x1b[1A\x1b[2K\x1b[1G   1 print("hello")\n',
    "x = 1" + " " * 300 + "; os.system('id')\n\tif x:\n\t\tpass\r\n",
    'access = "user"\nif access != "none\u202e \u2066# admin only\u2069 \u2066":\n    pass\n',
    "s = '\u200b\ufeff\u00ad\u2028\u180e\ufe0f\U000e0041\u3164\u009b\u0085'\n",
    "t = '\u65e5\u672c\u8a9e' * 40 + 'e\u0301\u0301\u0301\u0301' + '\U0001f600' * 50\n",
    "".join("print(%d)\n" % i for i in range(1, 120)),
    "",
    "no newline at the end",
]


def card_of(snippet, i):
    return Card(
        id="c-%d" % i, snippet=snippet,
        labels=(Label("shell-spawn", 1, 0, 9), Label("fs-write", 2, 10, 20),
                Label("data-out", 99, 0, 1)),
        options=("once", "always", "deny"), family="execute_code",
        button="Always allow her to run Python",
        detail="Any code she writes then runs on this computer without asking, until you "
               "revoke it in Settings.",
        expires=300, reason="arbitrary Python is never auto-safe on the host, and no "
                            "execute_code grant is saved",
        cwd="/home/ada/a directory with spaces/\x1b]0;x\x07/" + "deep/" * 20,
        timeout=12.345, env=(("VIRTUAL_ENV", "/opt/venv \u202e x" + "y" * 150), ("LANG", "C")),
        limits=(("cpu_s", 600), ("memory_bytes", 4 << 30), ("processes", 512),
                ("file_size_bytes", 1 << 30), ("open_files", 256), ("output_bytes", 200000)))


@pytest.mark.parametrize("i", range(len(SNIPPETS)))
@pytest.mark.parametrize("width", [0, 40, 80, 132])
@pytest.mark.parametrize("colour", [False, True])
def test_c_and_python_cards_are_the_same(i, width, colour):
    card = card_of(SNIPPETS[i], i)
    assert c_card_text(card, width, colour) == card_text(card, width, colour)


def test_a_card_from_an_older_broker():
    card = Card(id="c", snippet="print(1)\n", labels=(), options=(), family="", button="b",
                detail="d", expires=1, reason="r")
    assert c_card_text(card, 80, False) == card_text(card, 80, False)


@pytest.mark.parametrize("raw", [
    b"plain", b"\x1b[2J\x07\x7f\r\n\t", b"\xff\xc0\xaf\xed\xa0\x80\xe2\x80", b"\xf4\x90\x80\x80",
    "\u202e\u2066\u200b\u009b".encode(), "e\u0301\u0301\u0301".encode(),
    b"e\xcc\x81\xcc\x81\xff\xcc\x81\xcc\x81\xcc\x81", b"a\tb\t\tc",
    "\ufffe\uffff\U0001fffe\U0010ffff\ufdd0".encode(),
])
@pytest.mark.parametrize("lines", [False, True])
def test_c_and_python_show_the_same(raw, lines):
    assert c_show(raw, 2 if lines else 0) == show(raw, lines=lines)


def escalation_of(snippet, i, blocked, total):
    return dataclasses.replace(
        card_of(snippet, i), kind="escalate", options=("rerun", "leave"), family="",
        button="", detail="", labels=(),
        reason="This snippet already ran once under your execute_code grant, and the sandbox "
               "stopped %d operations in it; what that run did stays done. Run it again "
               "with your permissions (the approved profile)?" % total,
        blocked=blocked, blocked_total=total, after_seq=41 + i)


RECEIPT = (
    Blocked("write", "/home/ada/project/notes.md", 1, "landlock", "python", True),
    Blocked("exec", "/bin/sh (argv[0] \x1b[2Jsh)", 1, "exec gate", "worker", False),
    Blocked("secret-read", "/home/ada/.ssh/id_ed25519", 3, "mount mask", "worker", False),
    Blocked("create", "/home/ada/\u202e" + "long/" * 40 + "\u200bfile", 2, "landlock",
            "python", True),
)


# A request the egress proxy refused: its sentence, with no kind word.
REQUEST = Blocked("request", "POST https://api.example.org/upload?q=\x1b[2J refused: a grant "
                  "covers plain GET requests", 2, "egress proxy", "proxy", False)


@pytest.mark.parametrize("i", [0, 2, 3, 5, 6])
@pytest.mark.parametrize("width", [0, 40, 80])
@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("receipt", [(RECEIPT, 7), (RECEIPT[:1], 1), ((), 300),
                                     ((REQUEST,) + RECEIPT[1:2], 4)])
def test_c_and_python_escalation_cards_are_the_same(i, width, colour, receipt):
    card = escalation_of(SNIPPETS[i], i, *receipt)
    assert c_card_text(card, width, colour) == card_text(card, width, colour)


def test_an_escalation_card_says_what_the_first_run_was_stopped_doing():
    text = card_text(escalation_of("open('notes.md', 'w')\n", 0, RECEIPT, 9), 80, False)
    assert "== The sandbox stopped this snippet: run it again? ==" in text
    assert ("First run:   audit row #41; the sandbox stopped 6 operations in it, and the\n"
            "             snippet claims 3 more\n") in text
    assert ("Stopped:     write /home/ada/project/notes.md (landlock, the snippet's own\n"
            "             claim: no witness outside it saw this)\n") in text
    assert "exec /bin/sh (argv[0] \\x1b[2Jsh) (exec gate)\n" in text
    assert "read /home/ada/.ssh/id_ed25519 x3 (secret)\n" in text
    assert "<U+202E>" in text and "<U+200B>" in text and "\x1b" not in text
    assert "and 2 more" in text
    assert "(the approved profile)?\n" in text  # no full stop after its own question mark
    assert text.endswith("  [r] Run it again with your permissions (the approved profile)\n"
                         "  [l] Leave it: nothing runs again\n")
    assert "[o]" not in text and "Always allow" not in text


def test_an_escalation_card_shows_a_refused_request_as_the_proxys_sentence():
    text = card_text(escalation_of("import payload\n", 0, (REQUEST,), 2), 200, False)
    assert ("Stopped:     POST https://api.example.org/upload?q=\\x1b[2J refused: a grant "
            "covers plain GET requests x2 (egress proxy)\n") in text, text
