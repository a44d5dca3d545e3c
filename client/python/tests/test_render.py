"""kotoba_broker.render: nothing from a snippet, a client or the broker
reaches a terminal as a control or an invisible code point, and the card
shows every line of the snippet with its number.  The same cases as
libkotoba-client's tests/unit/test_render.c."""
import re

import pytest

from kotoba_broker import Card, Label, card_text, show
from kotoba_broker.render import TERMINAL_RESET


@pytest.mark.parametrize("text,want", [
    ("print('hello')", "print('hello')"),
    ("caf\u00e9 \u65e5\u672c \U0001f600", "caf\u00e9 \u65e5\u672c \U0001f600"),
    ("'\\x1b'", "'\\x1b'"),  # a backslash in code stays as it is
    ("a\x1b[1A\x1b[2Kb", "a\\x1b[1A\\x1b[2Kb"),
    ("\x1b]52;c;aWQ=\x07", "\\x1b]52;c;aWQ=\\x07"),
    ("x\ry", "x\\x0dy"),
    ("\x7f\x01\b", "\\x7f\\x01\\x08"),
    ("a\nb", "a\\x0ab"),
    ("\u009b1A\u0085", "<U+009B>1A<U+0085>"),
    ("a\u202eb\u2066c\u2069\u200f\u061c", "a<U+202E>b<U+2066>c<U+2069><U+200F><U+061C>"),
    ("\u200b\u200c\u200d\u2060\ufeff\u00ad", "<U+200B><U+200C><U+200D><U+2060><U+FEFF><U+00AD>"),
    ("\u2028\u2029\u180e", "<U+2028><U+2029><U+180E>"),
    ("\ufe0f\U000e0041\u3164", "<U+FE0F><U+E0041><U+3164>"),
    ("a\tb", "a       b"),
    ("e\u0301\u0301\u0301", "e\u0301\u0301<U+0301>"),
])
def test_show(text, want):
    assert show(text) == want


@pytest.mark.parametrize("raw,want", [
    (b"\xff", "\\xff"),
    (b"\xc0\xaf", "\\xc0\\xaf"),                  # overlong '/'
    (b"\xed\xa0\x80", "\\xed\\xa0\\x80"),         # a surrogate
    (b"\xe2\x80", "\\xe2\\x80"),                  # cut short
    (b"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"),  # past U+10FFFF
    (b"ok \xe2\x80\xae", "ok <U+202E>"),
])
def test_show_bytes(raw, want):
    assert show(raw) == want


def test_show_lines_and_colour():
    assert show("a\nb", lines=True) == "a\nb"
    assert show("\x1b", colour=True) == "\033[7m\\x1b\033[27m"


def card(snippet, **kw):
    fields = dict(id="c-1", snippet=snippet, labels=(Label("shell-spawn", 1, 0, 9),),
                  options=("once", "always", "deny"), family="execute_code",
                  button="Always allow her to run Python",
                  detail="Any code she writes then runs on this computer without asking, "
                         "until you revoke it in Settings.",
                  expires=300, reason="the snippet matches the pre-screen",
                  cwd="/home/ada/project", timeout=60.0,
                  env=(("TZ", "Europe/Paris\x1b[2J"), ("LANG", "C.UTF-8")),
                  limits=(("cpu_s", 600), ("memory_bytes", 4294967296),
                          ("output_bytes", 200000)))
    fields.update(kw)
    return Card(**fields)


def assert_rows_fit(text, width):
    for row in text.split("\n"):
        assert len(row) <= width, row


def test_card_shows_every_line_numbered():
    code = 'import os; os.system("id > card_pwned")\n' + "".join(
        "print(%d)\n" % i for i in range(2, 201))
    text = card(code).text(80)
    assert '\n   1  import os; os.system("id > card_pwned")   <- shell-spawn\n' in text
    for i in range(2, 201):
        assert "\n%4d  print(%d)\n" % (i, i) in text
    assert "The snippet: 200 lines," in text
    assert "this snippet contains" not in text
    assert_rows_fit(text, 80)


def test_card_shows_what_the_client_set():
    text = card("print(1)\n").text(80)
    assert "Runs in:     /home/ada/project\n" in text
    assert "Imports:     the working directory's modules can be imported," in text
    assert "Time limit:  60.000 s wall clock\n" in text
    assert "Limits:      cpu 600 s, memory 4 GiB, output 200000 bytes\n" in text
    assert "             TZ=Europe/Paris\\x1b[2J\n" in text
    assert "             LANG=C.UTF-8\n" in text
    assert "the lines above contain 1 invisible or control character," in text
    assert "\x1b" not in text


def test_card_wraps_long_lines_and_counts_escapes():
    code = "x = 1" + " " * 300 + "; os.system('id')\n#\x1b[1A\x1b[2K\u202e\n\tif x:\n"
    c = card(code)
    text = c.text(60)
    assert "\n    +  " in text and " ; os.system('id')" in text
    assert "\n   2  #\\x1b[1A\\x1b[2K<U+202E>\n" in text
    assert "\n   3          if x:\n" in text
    assert "this snippet contains 3 invisible" in text
    assert "\x1b" not in text
    assert_rows_fit(text, 60)
    coloured = c.text(60, colour=True)
    # for a terminal: the reset first, then only the card's own attributes
    assert coloured.startswith(TERMINAL_RESET)
    coloured = coloured[len(TERMINAL_RESET):]
    for esc in re.findall(r"\x1b\[[0-9;]*m", coloured):
        assert esc in ("\x1b[7m", "\x1b[27m", "\x1b[0m", "\x1b[1m", "\x1b[1;33m"), esc
    assert len(re.findall("\x1b", coloured)) == len(re.findall(r"\x1b\[[0-9;]*m", coloured))


def test_card_of_an_empty_snippet():
    assert "(the snippet is empty)" in card("").text()


def test_card_from_an_older_broker_says_what_it_lacks():
    c = Card.from_frame({"card": "c-1", "snippet": "print(1)", "labels": [],
                         "reason": "no grant", "expires_ms": 1000})
    text = c.text()
    assert "Runs in:     (the broker did not say)" in text
    assert "Time limit:  (the broker did not say)" in text
    assert "Environment: nothing from the client" in text


def test_card_text_is_the_module_function():
    c = card("print(1)\n")
    assert c.text(70) == card_text(c, 70)
