"""Text for a person's terminal: the approval card, and any string from a
snippet, a client or the broker.

Such text is input to the terminal that shows it: one escape sequence moves
the cursor over a line of the card, one U+202E reverses what follows, one
U+200B hides.  So every character that is not plainly visible text is shown
as what it is: C0 controls (except newline and tab), DEL, C1 controls and
bytes that are not UTF-8 as ``\\xNN``; bidirectional controls, zero-width,
format and other invisible code points as ``<U+XXXX>``.  Tabs become spaces;
long lines wrap onto rows marked ``+``, never cut; every line of a snippet
has its number.  These are the rules of libkotoba-client's kotoba_show() and
kotoba_card_text() (client/lib/render.c), and the card reads the same.
"""
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    from .types import Blocked, Card, Result

__all__ = ["show", "card_text", "receipt_text", "TERMINAL_RESET"]

# What puts a terminal back into a state in which text drawn next is seen
# as written, whatever a snippet printed before: the main screen, a soft
# reset, attributes and modes off, the cursor shown, ASCII character sets,
# mouse, bracketed paste and extended keyboard modes off, an open
# hyperlink closed, the palette and
# the dynamic colours reset, and the rest of the screen erased, where the
# card is drawn.  KOTOBA_TERMINAL_RESET in kotoba-client.h,
# where each sequence is named, is the same string.  card_text() with
# colour starts with it; a client that draws its own writes it first, and
# again when it is done with the terminal.
TERMINAL_RESET = (
    "\033[?1049l\033[?1047l\033[?47l\033[!p\033[0m\033[4l\033[?6l\033[?7h\033[?5l"
    "\033[?25h\033[r\033(B\033)B\033*B\033+B\017\033[?1000l\033[?1002l\033[?1003l"
    "\033[?1005l\033[?1006l\033[?1015l\033[?2004l\033[?1l\033>\033[<u\033[<u\033[<u"
    "\033[<u\033[>4m\033]8;;\033\\"
    "\033]104\033\\\033]110\033\\\033]111\033\\\033]112\033\\\033]117\033\\"
    "\033]119\033\\\033[J")

# Text to show: str, or bytes that may not be UTF-8.
Text = Union[str, bytes, bytearray]
# Inclusive ranges of code points.
Ranges = Tuple[Tuple[int, int], ...]

TAB_STOP = 8
# CARD_IMPORTS of proto/proto.h: python3 appends the working directory to
# the end of sys.path, so the code may import what is there.
CARD_IMPORTS = ("the working directory's modules can be imported, after the standard library "
                "and installed packages")
MARKS_MAX = 2  # combining marks on one character; more could paint over other rows

# Shown as <U+XXXX>: C1 controls, format characters (bidirectional controls,
# zero-width characters, the BOM, invisible operators, tags...), variation
# selectors, fillers that draw blank but are letters to Python, line and
# paragraph separators, private use and noncharacters (these and U+xFFFE,
# U+xFFFF of every plane).  With the C0 controls this covers Unicode's
# default-ignorable code points.
_HIDDEN: Ranges = (
    (0x0080, 0x009f), (0x00ad, 0x00ad), (0x034f, 0x034f), (0x0600, 0x0605),
    (0x061c, 0x061c), (0x06dd, 0x06dd), (0x070f, 0x070f), (0x0890, 0x0891),
    (0x08e2, 0x08e2), (0x115f, 0x1160), (0x17b4, 0x17b5), (0x180b, 0x180f),
    (0x200b, 0x200f), (0x2028, 0x202e), (0x2060, 0x206f), (0x3164, 0x3164),
    (0xe000, 0xf8ff), (0xfdd0, 0xfdef), (0xfe00, 0xfe0f), (0xfeff, 0xfeff),
    (0xffa0, 0xffa0), (0xfff0, 0xfffb), (0x110bd, 0x110bd), (0x110cd, 0x110cd),
    (0x13430, 0x1343f), (0x1bca0, 0x1bca3), (0x1d173, 0x1d17a), (0xe0000, 0xe0fff),
    (0xf0000, 0x10ffff),
)
# Zero columns (the common blocks of combining marks).
_COMBINING: Ranges = (
    (0x0300, 0x036f), (0x0483, 0x0489), (0x0591, 0x05bd), (0x0610, 0x061a),
    (0x064b, 0x065f), (0x0e31, 0x0e31), (0x0e34, 0x0e3a), (0x0e47, 0x0e4e),
    (0x1ab0, 0x1aff), (0x1dc0, 0x1dff), (0x20d0, 0x20ff), (0xfe20, 0xfe2f),
)
# Two columns: East Asian wide and fullwidth characters, emoji.
_WIDE: Ranges = (
    (0x1100, 0x115e), (0x2e80, 0x303e), (0x3041, 0x3163), (0x3165, 0x33ff),
    (0x3400, 0x4dbf), (0x4e00, 0x9fff), (0xa000, 0xa4cf), (0xac00, 0xd7a3),
    (0xf900, 0xfaff), (0xfe30, 0xfe4f), (0xff00, 0xff60), (0xffe0, 0xffe6),
    (0x1f300, 0x1f64f), (0x1f900, 0x1f9ff), (0x20000, 0x3fffd),
)


def _in(table: Ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in table)


def _chars(text: Text) -> Iterator[Tuple[Optional[int], Union[str, int]]]:
    """(code point, the character), or (None, the undecodable byte or lone
    surrogate's number), for str or bytes."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    for ch in text:
        cp = ord(ch)
        if 0xdc80 <= cp <= 0xdcff:  # a byte that was not UTF-8
            yield None, cp - 0xdc00
        elif 0xd800 <= cp <= 0xdfff:  # a lone surrogate in a str: not text
            yield None, cp
        else:
            yield cp, ch


class _Pen:
    """Rows being written: the column, how a continuation row begins, and
    how many characters were shown escaped."""

    def __init__(self, width: int = 0, colour: bool = False) -> None:
        self.out: List[str] = []
        self.width = width
        self.col = 0
        self.cont = ""
        self.origin = 0  # the column tab stops count from
        self.colour = colour
        self.marks = 0
        self.escaped = 0

    def write(self, s: str, cols: int = 0) -> None:
        self.out.append(s)
        self.col += cols

    def room(self, cols: int) -> None:
        if self.width and self.col + cols > self.width and self.col > len(self.cont):
            self.out.append("\n" + self.cont)
            self.col = len(self.cont)

    def put(self, s: str, cols: int) -> None:
        self.room(cols)
        self.write(s, cols)

    def escape(self, s: str) -> None:
        self.room(len(s))
        self.write("\033[7m%s\033[27m" % s if self.colour else s, len(s))
        self.escaped += 1

    def text(self, s: Text, lines: bool = False, words: bool = False) -> None:
        """Writes s; a newline ends the row when `lines`; prose (`words`)
        wraps at a space rather than inside a word."""
        chars = list(_chars(s))
        for i, (cp, ch) in enumerate(chars):
            if words and cp == 0x20:
                n = 0
                while i + 1 + n < len(chars) and chars[i + 1 + n][0] not in (0x20, 0x0a):
                    n += 1
                if self.width and self.col + 1 + n > self.width and n < self.width // 2:
                    self.room(self.width)
                    continue
            if isinstance(ch, int):  # cp is None: not text
                self.escape("\\x%02x" % ch if ch < 0x100 else "<U+%04X>" % ch)
                self.marks = 0
                continue
            assert cp is not None
            if 0x20 <= cp < 0x7f:  # printable ASCII: most of any code
                self.put(ch, 1)
                self.marks = 0
                continue
            elif cp == 0x0a and lines:
                self.write("\n")
                self.col = 0
            elif cp == 0x09:
                n = TAB_STOP - (self.col - self.origin) % TAB_STOP
                self.put(" " * n, n)
            elif cp < 0x20 or cp == 0x7f:
                self.escape("\\x%02x" % cp)
            elif (_in(_HIDDEN, cp) or cp & 0xfffe == 0xfffe
                  or (_in(_COMBINING, cp) and self.marks >= MARKS_MAX)):
                self.escape("<U+%04X>" % cp)
            elif _in(_COMBINING, cp):
                self.marks += 1
                self.write(ch)
            else:
                self.put(ch, 2 if _in(_WIDE, cp) else 1)
            if not _in(_COMBINING, cp):
                self.marks = 0

    def value(self) -> str:
        return "".join(self.out)


def show(text: Text, lines: bool = False, colour: bool = False) -> str:
    """`text` (str or bytes) made safe for a terminal, on one line unless
    `lines` (then a newline ends a row)."""
    p = _Pen(colour=colour)
    p.text(text, lines)
    return p.value()


def _claimed(b: "Blocked") -> bool:
    """An entry only the snippet's own interpreter reported: the snippet
    could have made it up, or left out what it did not want said."""
    return b.seen_by == "python"


def _kind_word(b: "Blocked") -> str:
    """The word an entry starts with (and its space): its kind, `read` for
    a masked secret's, none for a request the egress proxy refused (its
    target is the proxy's sentence, which starts with the method)."""
    if b.kind == "request":
        return ""
    return ("read" if b.kind == "secret-read" else b.kind) + " "


def receipt_text(result: "Result") -> str:
    """What the sandbox refused in `result`, as the CLI prints it (`kotoba:
    the sandbox stopped 2 operations: exec /bin/sh (exec gate), read
    /home/ada/.ssh/id_ed25519 (secret)`), every string made safe by show();
    what only the snippet's interpreter reported on a line of its own, as
    the snippet's claim; then how many refusals a capped receipt left out.
    After a run that exited 0 the first line is a note: the program handled
    what was refused.
    One line each, without the last newline; "" when nothing was refused."""
    if not result.blocked_total:
        return ""
    blocked = list(result.blocked)[:16]

    def entries(claims: bool) -> Tuple[str, int]:
        parts, count = [], 0
        for b in blocked:
            if _claimed(b) != claims:
                continue
            secret = b.kind == "secret-read"
            by = "secret" if secret and b.by == "mount mask" else b.by
            parts.append("%s%s%s (%s)" % (show(_kind_word(b)), show(b.target),
                                          " x%d" % b.count if b.count > 1 else "", show(by)))
            count += b.count
        return ", ".join(parts), count

    (seen_text, seen), (claim_text, claims) = entries(False), entries(True)
    unlisted = max(result.blocked_total - seen - claims, 0)
    lines = []
    if seen and result.exit_code == 0:
        # A run that succeeded handled what was refused: said as a note.
        lines.append("kotoba: note: the run succeeded; the sandbox refused %d operation%s, "
                     "which the program handled: %s" % (seen, "" if seen == 1 else "s",
                                                         seen_text))
    elif seen:
        lines.append("kotoba: the sandbox stopped %d operation%s: %s"
                     % (seen, "" if seen == 1 else "s", seen_text))
    if claims:
        lines.append("kotoba: the snippet itself claims %d operation%s %s refused (its own "
                     "report, which no witness outside it saw): %s"
                     % (claims, "" if claims == 1 else "s", "was" if claims == 1 else "were",
                        claim_text))
    if unlisted:
        lines.append("kotoba: and %d more refusal%s, past what a receipt lists"
                     % (unlisted, "" if unlisted == 1 else "s"))
    return "\n".join(lines)


def _line_count(snippet: str) -> int:
    n = snippet.count("\n")
    return n + (1 if snippet and not snippet.endswith("\n") else 0)


def _snippet(p: _Pen, card: "Card") -> None:
    """Every line, numbered as the broker numbers them (at each newline)."""
    labels: Dict[int, str] = {}
    for l in card.labels:
        labels.setdefault(l.line, l.label)
    w = max(4, len(str(_line_count(card.snippet))))
    lines = card.snippet.split("\n")
    if card.snippet.endswith("\n"):
        lines.pop()  # the newline that ends the last line starts no new one
    for no, text in enumerate(lines if card.snippet else [], 1):
        label = labels.get(no)
        warn = "\033[1;33m" if p.colour and label else ""
        p.cont = " " * w + "+ "
        p.origin = w + 2
        p.write("%*d  %s" % (w, no, warn), w + 2)
        p.marks = 0
        p.text(text)
        if label:
            p.room(6 + len(label))
            p.write("   <- ", 6)
            p.text(label)
        p.write("\033[0m\n" if warn else "\n")
        p.col = 0
    if not card.snippet:
        p.write("      (the snippet is empty)\n")


def _field(p: _Pen, name: str, value: Optional[str] = None, words: bool = True) -> None:
    """`Name: value`, wrapped under itself: at words for prose, anywhere for
    a value shown exactly (a path, an env value), so that no space of it is
    taken for the row's end."""
    p.write("%-13s" % name, max(13, len(name)))
    p.cont = " " * 13
    p.origin = 13
    if value is not None:
        p.text(value, words=words)


def _size(v: int) -> str:
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    u = 0
    while u < 4 and v and v % 1024 == 0:
        v //= 1024
        u += 1
    return "%d %s" % (v, units[u])


def _limits(p: _Pen, limits: Sequence[Tuple[str, int]]) -> None:
    for i, (name, value) in enumerate(limits):
        if name.endswith("_bytes") and len(name) > 6:
            s = "%s %s" % (name[:-6], _size(value))
        elif name.endswith("_s") and len(name) > 2:
            s = "%s %d s" % (name[:-2], value)
        else:
            s = "%s %d" % (name, value)
        p.text((", " if i else "") + s.replace("_", " "), words=True)


def _settings(p: _Pen, card: "Card") -> None:
    _field(p, "Runs in:", card.cwd if card.cwd is not None else "(the broker did not say)",
           words=card.cwd is None)
    p.write("\n")
    p.col = 0
    _field(p, "Imports:", CARD_IMPORTS)
    p.write("\n")
    p.col = 0
    ms = int(round(card.timeout * 1000)) if card.timeout else 0
    _field(p, "Time limit:", "%d.%03d s wall clock" % (ms // 1000, ms % 1000) if ms
           else "(the broker did not say)")
    p.write("\n")
    p.col = 0
    if card.limits:
        _field(p, "Limits:")
        _limits(p, card.limits)
        p.write("\n")
        p.col = 0
    _field(p, "Environment:", None if card.env else "nothing from the client")
    p.write("\n")
    p.col = 0
    for name, value in card.env:
        _field(p, "", name, words=False)
        p.text("=")
        p.text(value)
        p.write("\n")
        p.col = 0


def _blocked_entry(p: _Pen, b: "Blocked") -> None:
    """`write /w/notes.md x2 (landlock)`; a masked secret's read as `read
    PATH (secret)`; an entry the snippet's own interpreter reported marked
    as such (the snippet could have forged it)."""
    secret = b.kind == "secret-read"
    p.text(_kind_word(b))
    p.text(b.target)
    if b.count > 1:
        p.text(" x%d" % b.count)
    p.text(" (")
    p.text("secret" if secret and b.by == "mount mask" else b.by)
    if _claimed(b):
        p.text(", the snippet's own claim: no witness outside it saw this",
               words=True)  # the card's own words
    p.text(")")


def _first_run(p: _Pen, card: "Card") -> None:
    """An escalation card's first run: its audit row, its receipt one entry a row."""
    n = card.blocked_total
    claims = sum(b.count for b in card.blocked[:16] if _claimed(b))
    _field(p, "First run:", "audit row #%d; the sandbox stopped %d operation%s in it%s"
           % (card.after_seq, n - claims, "" if n - claims == 1 else "s",
              ", and the snippet claims %d more" % claims if claims else ""))
    p.write("\n")
    p.col = 0
    listed = 0
    for i, b in enumerate(card.blocked[:16]):
        _field(p, "" if i else "Stopped:", None, words=False)
        _blocked_entry(p, b)
        p.write("\n")
        p.col = 0
        listed += b.count
    if listed < n:
        _field(p, "" if card.blocked else "Stopped:", "and %d more" % (n - listed))
        p.write("\n")
        p.col = 0


def _head(p: _Pen, card: "Card") -> None:
    bold, off = ("\033[1m", "\033[0m") if p.colour else ("", "")
    if card.kind == "escalate":
        p.write("\n%s== The sandbox stopped this snippet: run it again? ==%s\n" % (bold, off))
        _field(p, "Why:", card.reason)
        p.write("\n" if card.reason and card.reason[-1] in ".?!" else ".\n")
        p.col = 0
        _first_run(p, card)
        _settings(p, card)
        return
    p.write("\n%s== Approval needed: run this Python snippet? ==%s\n" % (bold, off))
    _field(p, "Why:", card.reason)
    p.write(".\n")
    p.col = 0
    if card.labels:
        _field(p, "Pre-screen:")
        for i, l in enumerate(card.labels):
            p.text((", " if i else "") + l.label + " (line %d)" % l.line, words=True)
        p.write("\n")
        p.col = 0
    _settings(p, card)


def card_text(card: "Card", width: int = 80, colour: bool = False) -> str:
    """The whole card for a terminal `width` columns wide (0: never wrap):
    why, labels, working directory, time limit, limits, kept environment, a
    note counting what is shown escaped, every line of the snippet
    numbered, and the three options in the spec's words.  An escalation
    card (kind "escalate") shows the first run's audit row and receipt
    after why, an entry seen_by "python" marked as the snippet's own claim,
    and its two options, rerun and leave.  With colour it starts with
    TERMINAL_RESET."""
    s = _Pen(width, colour)
    _snippet(s, card)
    p = _Pen(width, colour)
    if colour:  # for a terminal: drawn on one that nothing earlier restyled
        p.write(TERMINAL_RESET)
    _head(p, card)
    p.cont, p.origin = "", 0
    if p.escaped:
        p.text("\nNote: the lines above contain %d invisible or control character%s, "
               "shown as \\xNN or <U+XXXX>.\n" % (p.escaped, "" if p.escaped == 1 else "s"),
               lines=True, words=True)
    if s.escaped:
        p.text("\nNote: this snippet contains %d invisible or control character%s, "
               "shown as \\xNN or <U+XXXX>%s.\n"
               % (s.escaped, "" if s.escaped == 1 else "s",
                  " in reverse video" if colour else ""), lines=True, words=True)
    n = _line_count(card.snippet)
    p.text("\nThe snippet: %d line%s, %d bytes, every line shown.\n"
           % (n, "" if n == 1 else "s", len(card.snippet.encode("utf-8", "surrogatepass"))),
           lines=True, words=True)
    p.write(s.value())
    if card.kind == "escalate":
        p.write("\n  [r] ")
        p.cont, p.col, p.origin = " " * 6, 6, 6
        p.text("Run it again with your permissions (the approved profile)", words=True)
        p.write("\n  [l] ")
        p.col = 6
        p.text("Leave it: nothing runs again", words=True)
        p.write("\n")
        return p.value()
    p.write("\n  [o] Run once\n  [a] ")
    p.cont, p.col, p.origin = " " * 6, 6, 6
    p.text(card.button, words=True)
    p.write("\n      ")
    p.col = 6
    p.text(card.detail, words=True)
    p.write("\n  [d] Deny\n")
    return p.value()
