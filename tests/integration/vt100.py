"""A small terminal: enough of VT100/xterm to show what a person would see.

It interprets what a program writes the way a terminal does: printable
characters into cells with auto-wrap and scrolling, CR, LF, BS, TAB, the
cursor and erase sequences (CUU, CUD, CUF, CUB, CHA, CUP, VPA, ED, EL, ECH,
ICH, DCH, IL, DL, SU, SD, save/restore), concealed text (SGR 8), OSC and DCS
strings swallowed, and the 8-bit C1 forms (U+009B CSI, U+009D OSC) that a
terminal reading 8-bit controls obeys.  It also keeps what decides whether a
drawn character can be seen: each cell's colours (SGR 30-49, 90-107, 38/48
with 5 or 2, reverse video), the palette (OSC 4, reset by OSC 104), the
default foreground and background (OSC 10 and 11, reset by 110 and 111),
screen-wide reverse video (DECSCNM), the alternate screens (47, 1047,
1049), the cursor's visibility (DECTCEM) and the character sets (ESC ( 0
draws letters as lines; SO and SI switch between G0 and G1); DECSTR
resets the attributes and shows the cursor, as xterm's does.
visible_lines() is what a person can read: a cell drawn in its own
background colour, or concealed, is blank there, and so is the whole main
screen while an alternate one is shown.  Format characters (bidirectional
controls, zero-width characters) occupy no cell, as on most terminals:
what they hide stays hidden here too.  A test that passes raw text through
this screen sees what the attack wanted the person to see.
"""
import codecs
import unicodedata

# xterm's default 16 colours; 16-255 as xterm computes them.
_BASE16 = [(0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205),
           (0, 205, 205), (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0),
           (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255)]


def _default_palette():
    pal = list(_BASE16)
    steps = [0, 95, 135, 175, 215, 255]
    pal += [(steps[r], steps[g], steps[b]) for r in range(6) for g in range(6) for b in range(6)]
    pal += [(8 + 10 * i,) * 3 for i in range(24)]
    return pal


DEFAULT_FG, DEFAULT_BG = (229, 229, 229), (0, 0, 0)
# DEC special graphics: what ESC ( 0 makes of the letters a card is written in
_DEC_GRAPHICS = dict(zip("`abcdefghijklmnopqrstuvwxyz{|}~",
                         "◆▒␉␌␍␊°±␤␋┘"
                         "┐┌└┼⎺⎻─⎼⎽├┤"
                         "┴┬│≤≥π≠£·"))
_PLAIN = (None, None, False, False)  # fg, bg, reverse, conceal


def _colour_spec(spec):
    """#rrggbb, #rgb or rgb:r/g/b (1 to 4 hex digits each) as (r, g, b)."""
    try:
        if spec.startswith("#") and len(spec) in (4, 7):
            n = (len(spec) - 1) // 3
            return tuple(int(spec[1 + i * n:1 + (i + 1) * n], 16) * (17 if n == 1 else 1)
                         for i in range(3))
        if spec.startswith("rgb:"):
            parts = spec[4:].split("/")
            if len(parts) == 3:
                return tuple(int(x, 16) * 255 // (16 ** len(x) - 1) for x in parts)
    except ValueError:
        pass
    return None


class Screen:
    def __init__(self, cols=80, rows=24):
        self.cols, self.rows = cols, rows
        self.grid = [[" "] * cols for _ in range(rows)]
        self.attrs = [[_PLAIN] * cols for _ in range(rows)]
        self.x = self.y = 0
        self.wrap_pending = False
        self.conceal = False
        self.saved = (0, 0)
        self.state = "text"
        self.seq = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.fg = self.bg = None  # None: the default colour; an int: the palette's
        self.reverse = False      # ... or an (r, g, b) tuple
        self.palette = _default_palette()
        self.default_fg, self.default_bg = DEFAULT_FG, DEFAULT_BG
        self.screen_reverse = False
        self.cursor_visible = True
        self.main = None          # the main screen's (grid, attrs) while an alternate is shown
        self.charsets = ["B", "B", "B", "B"]
        self.shifted = False      # SO: G1 in use
        self.charset_slot = 0
        self.string = ""

    # ---- what a person can see --------------------------------------------
    def _rgb(self, c, default):
        if c is None:
            return default
        return self.palette[c] if isinstance(c, int) else c

    def cell_visible(self, y, x):
        fg, bg, reverse, conceal = self.attrs[y][x]
        dfg, dbg = self.default_fg, self.default_bg
        if self.screen_reverse:
            dfg, dbg = dbg, dfg
        f, b = self._rgb(fg, dfg), self._rgb(bg, dbg)
        if reverse:
            f, b = b, f
        return not conceal and f != b

    def visible_lines(self):
        """The rows as a person reads them: hidden cells blank; nothing of
        the main screen while an alternate one is shown."""
        if self.main is not None:
            return [""] * self.rows
        return ["".join(ch if self.cell_visible(y, x) else " " * len(ch)
                        for x, ch in enumerate(row)).rstrip()
                for y, row in enumerate(self.grid)]

    # ---- cells ------------------------------------------------------------
    def lines(self):
        return ["".join(r).rstrip() for r in self.grid]

    def text(self):
        return "\n".join(self.lines())

    def cursor_line(self):
        return "".join(self.grid[self.y]).rstrip()

    def _scroll(self, n=1):
        for _ in range(n):
            self.grid.pop(0)
            self.grid.append([" "] * self.cols)
            self.attrs.pop(0)
            self.attrs.append([_PLAIN] * self.cols)

    def _linefeed(self):
        if self.y == self.rows - 1:
            self._scroll()
        else:
            self.y += 1

    def _put(self, ch):
        if unicodedata.category(ch) == "Cf":
            return  # drawn as nothing
        if unicodedata.combining(ch):
            px = max(self.x - 1, 0)
            self.grid[self.y][px] += ch
            return
        w = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        if self.wrap_pending or self.x + w > self.cols:
            self.x = 0
            self._linefeed()
            self.wrap_pending = False
        if self.charsets[1 if self.shifted else 0] == "0":
            ch = _DEC_GRAPHICS.get(ch, ch)
        self.grid[self.y][self.x] = " " if self.conceal else ch
        self.attrs[self.y][self.x] = (self.fg, self.bg, self.reverse, self.conceal)
        if w == 2 and self.x + 1 < self.cols:
            self.grid[self.y][self.x + 1] = ""
        self.x += w
        if self.x >= self.cols:
            self.x = self.cols - 1
            self.wrap_pending = True

    # ---- input ------------------------------------------------------------
    def feed(self, data):
        for ch in self.decoder.decode(data):
            self._char(ch)

    def _char(self, ch):
        o = ord(ch)
        if self.state == "esc":
            self._esc(ch)
        elif self.state == "csi":
            self.seq += ch
            if 0x40 <= o <= 0x7e:
                self._csi(self.seq)
                self.state = "text"
        elif self.state == "string":  # OSC, DCS, APC, PM, SOS: up to BEL or ST
            if ch == "\x07" or o == 0x9c:
                self._string_end()
            elif ch == "\x1b":
                self.state = "string-esc"
            else:
                self.string += ch
        elif self.state == "string-esc":
            if ch == "\\":
                self._string_end()
            else:
                self.string += "\x1b" + ch
                self.state = "string"
        elif self.state == "charset":
            self.charsets[self.charset_slot] = ch
            self.state = "text"
        elif ch == "\x0e":
            self.shifted = True
        elif ch == "\x0f":
            self.shifted = False
        elif ch == "\x1b":
            self.state = "esc"
        elif o == 0x9b:
            self.state, self.seq = "csi", ""
        elif o in (0x9d, 0x90, 0x9e, 0x9f, 0x98):
            self.state, self.string = "string", ("]" if o == 0x9d else "P")
        elif ch == "\r":
            self.x, self.wrap_pending = 0, False
        elif ch in "\n\x0b\x0c":
            self._linefeed()
            self.wrap_pending = False
        elif ch == "\b":
            self.x, self.wrap_pending = max(self.x - 1, 0), False
        elif ch == "\t":
            self.x = min((self.x // 8 + 1) * 8, self.cols - 1)
        elif o < 0x20 or o == 0x7f or 0x80 <= o < 0xa0:
            pass
        else:
            self._put(ch)

    def _esc(self, ch):
        self.state = "text"
        if ch == "[":
            self.state, self.seq = "csi", ""
        elif ch in "]P^_X":
            self.state, self.string = "string", ch
        elif ch in "()*+":
            self.state, self.charset_slot = "charset", "()*+".index(ch)
        elif ch == "7":
            self.saved = (self.x, self.y)
        elif ch == "8":
            self.x, self.y = self.saved
        elif ch == "D":
            self._linefeed()
        elif ch == "E":
            self.x = 0
            self._linefeed()
        elif ch == "M":
            if self.y == 0:
                self._insert_row(0)
                self.grid.pop()
                self.attrs.pop()
            else:
                self.y -= 1
        elif ch == "c":
            self.__init__(self.cols, self.rows)

    def _string_end(self):
        """An OSC that sets or resets a colour; other strings do nothing here."""
        self.state = "text"
        if not self.string.startswith("]"):
            return
        num, _, rest = self.string[1:].partition(";")
        if num == "4":
            args = rest.split(";")
            for i in range(0, len(args) - 1, 2):
                rgb = _colour_spec(args[i + 1])
                if args[i].isdigit() and int(args[i]) < 256 and rgb:
                    self.palette[int(args[i])] = rgb
        elif num in ("10", "11"):
            rgb = _colour_spec(rest.split(";")[0])
            if rgb and num == "10":
                self.default_fg = rgb
            elif rgb:
                self.default_bg = rgb
        elif num == "104":
            fresh = _default_palette()
            for i in ([int(a) for a in rest.split(";") if a.isdigit() and int(a) < 256]
                      or range(256)):
                self.palette[i] = fresh[i]
        elif num == "110":
            self.default_fg = DEFAULT_FG
        elif num == "111":
            self.default_bg = DEFAULT_BG

    def _mode(self, body, on):
        for m in body[1:].split(";"):
            if m == "25":
                self.cursor_visible = on
            elif m == "5":
                self.screen_reverse = on
            elif m in ("47", "1047", "1049"):
                if m == "1049" and on:  # 1049 saves the cursor, and restores it
                    self.saved = (self.x, self.y)
                elif m == "1049" and self.main is not None:
                    self.x, self.y = self.saved
                if on and self.main is None:
                    self.main = (self.grid, self.attrs)
                    self.grid = [[" "] * self.cols for _ in range(self.rows)]
                    self.attrs = [[_PLAIN] * self.cols for _ in range(self.rows)]
                elif not on and self.main is not None:
                    self.grid, self.attrs = self.main
                    self.main = None

    def _sgr(self, args):
        i = 0
        while i < len(args):
            a = args[i]
            if a == 0:
                self.fg = self.bg = None
                self.reverse = self.conceal = False
            elif a == 7:
                self.reverse = True
            elif a == 27:
                self.reverse = False
            elif a == 8:
                self.conceal = True
            elif a == 28:
                self.conceal = False
            elif 30 <= a <= 37 or 90 <= a <= 97:
                self.fg = a - 30 if a < 90 else a - 82
            elif 40 <= a <= 47 or 100 <= a <= 107:
                self.bg = a - 40 if a < 100 else a - 92
            elif a == 39:
                self.fg = None
            elif a == 49:
                self.bg = None
            elif a in (38, 48) and i + 1 < len(args):
                if args[i + 1] == 5 and i + 2 < len(args):
                    c, i = args[i + 2] % 256, i + 2
                elif args[i + 1] == 2 and i + 4 < len(args):
                    c, i = tuple(args[i + 2:i + 5]), i + 4
                else:
                    c = None
                if a == 38:
                    self.fg = c
                else:
                    self.bg = c
            i += 1

    def _csi(self, seq):
        final, body = seq[-1], seq[:-1]
        if body.startswith("?") and final in "hl":
            self._mode(body, final == "h")
            return
        if body == "!" and final == "p":  # DECSTR, as xterm's
            self.fg = self.bg = None
            self.reverse = self.conceal = False
            self.cursor_visible = True
            return
        private = body[:1] in ("?", ">", "!", "=")
        if private:
            return
        try:
            args = [int(a) if a else 0 for a in body.split(";")] if body else []
        except ValueError:
            return
        n = args[0] if args and args[0] else 1
        self.wrap_pending = False
        if final == "A":
            self.y = max(self.y - n, 0)
        elif final in "Be":
            self.y = min(self.y + n, self.rows - 1)
        elif final in "Ca":
            self.x = min(self.x + n, self.cols - 1)
        elif final == "D":
            self.x = max(self.x - n, 0)
        elif final in "G`":
            self.x = min(n - 1, self.cols - 1)
        elif final == "d":
            self.y = min(n - 1, self.rows - 1)
        elif final in "Hf":
            r = args[0] if args and args[0] else 1
            c = args[1] if len(args) > 1 and args[1] else 1
            self.y, self.x = min(r - 1, self.rows - 1), min(c - 1, self.cols - 1)
        elif final == "J":
            self._erase_display(args[0] if args else 0)
        elif final == "K":
            self._erase_line(args[0] if args else 0)
        elif final == "X":
            for i in range(self.x, min(self.x + n, self.cols)):
                self.grid[self.y][i] = " "
                self.attrs[self.y][i] = _PLAIN
        elif final == "P":
            for row, blank in ((self.grid[self.y], " "), (self.attrs[self.y], _PLAIN)):
                del row[self.x:self.x + n]
                row.extend([blank] * (self.cols - len(row)))
        elif final == "@":
            for row, blank in ((self.grid[self.y], " "), (self.attrs[self.y], _PLAIN)):
                for _ in range(n):
                    row.insert(self.x, blank)
                del row[self.cols:]
        elif final == "L":
            for _ in range(n):
                self._insert_row(self.y)
                self.grid.pop()
                self.attrs.pop()
        elif final == "M":
            for _ in range(n):
                self.grid.pop(self.y)
                self.attrs.pop(self.y)
                self.grid.append([" "] * self.cols)
                self.attrs.append([_PLAIN] * self.cols)
        elif final == "S":
            self._scroll(n)
        elif final == "T":
            for _ in range(n):
                self._insert_row(0)
                self.grid.pop()
                self.attrs.pop()
        elif final == "s":
            self.saved = (self.x, self.y)
        elif final == "u":
            self.x, self.y = self.saved
        elif final == "m":
            self._sgr(args or [0])

    def _insert_row(self, at):
        self.grid.insert(at, [" "] * self.cols)
        self.attrs.insert(at, [_PLAIN] * self.cols)

    def _erase_line(self, mode):
        row = self.grid[self.y]
        lo, hi = {0: (self.x, self.cols), 1: (0, self.x + 1)}.get(mode, (0, self.cols))
        for i in range(lo, hi):
            row[i] = " "
            self.attrs[self.y][i] = _PLAIN

    def _erase_display(self, mode):
        if mode == 0:
            self._erase_line(0)
            rows = range(self.y + 1, self.rows)
        elif mode == 1:
            self._erase_line(1)
            rows = range(0, self.y)
        else:
            rows = range(self.rows)
        for r in rows:
            self.grid[r] = [" "] * self.cols
            self.attrs[r] = [_PLAIN] * self.cols
