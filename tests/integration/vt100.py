"""A small terminal: enough of VT100/xterm to show what a person would see.

It interprets what a program writes the way a terminal does: printable
characters into cells with auto-wrap and scrolling, CR, LF, BS, TAB, the
cursor and erase sequences (CUU, CUD, CUF, CUB, CHA, CUP, VPA, ED, EL, ECH,
ICH, DCH, IL, DL, SU, SD, save/restore), concealed text (SGR 8), OSC and DCS
strings swallowed, and the 8-bit C1 forms (U+009B CSI, U+009D OSC) that a
terminal reading 8-bit controls obeys.  Format characters (bidirectional
controls, zero-width characters) occupy no cell, as on most terminals:
what they hide stays hidden here too.  A test that passes raw text through
this screen sees what the attack wanted the person to see.
"""
import codecs
import unicodedata


class Screen:
    def __init__(self, cols=80, rows=24):
        self.cols, self.rows = cols, rows
        self.grid = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0
        self.wrap_pending = False
        self.conceal = False
        self.saved = (0, 0)
        self.state = "text"
        self.seq = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

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
        self.grid[self.y][self.x] = " " if self.conceal else ch
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
                self.state = "text"
            elif ch == "\x1b":
                self.state = "string-esc"
        elif self.state == "string-esc":
            self.state = "text" if ch == "\\" else "string"
        elif self.state == "charset":
            self.state = "text"
        elif ch == "\x1b":
            self.state = "esc"
        elif o == 0x9b:
            self.state, self.seq = "csi", ""
        elif o in (0x9d, 0x90, 0x9e, 0x9f, 0x98):
            self.state = "string"
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
            self.state = "string"
        elif ch in "()*+":
            self.state = "charset"
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
                self.grid.insert(0, [" "] * self.cols)
                self.grid.pop()
            else:
                self.y -= 1
        elif ch == "c":
            self.__init__(self.cols, self.rows)

    def _csi(self, seq):
        final, body = seq[-1], seq[:-1]
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
        elif final == "P":
            row = self.grid[self.y]
            del row[self.x:self.x + n]
            row.extend([" "] * (self.cols - len(row)))
        elif final == "@":
            row = self.grid[self.y]
            for _ in range(n):
                row.insert(self.x, " ")
            del row[self.cols:]
        elif final == "L":
            for _ in range(n):
                self.grid.insert(self.y, [" "] * self.cols)
                self.grid.pop()
        elif final == "M":
            for _ in range(n):
                self.grid.pop(self.y)
                self.grid.append([" "] * self.cols)
        elif final == "S":
            self._scroll(n)
        elif final == "T":
            for _ in range(n):
                self.grid.insert(0, [" "] * self.cols)
                self.grid.pop()
        elif final == "s":
            self.saved = (self.x, self.y)
        elif final == "u":
            self.x, self.y = self.saved
        elif final == "m":
            for a in args or [0]:
                if a in (0, 28):
                    self.conceal = False
                elif a == 8:
                    self.conceal = True

    def _erase_line(self, mode):
        row = self.grid[self.y]
        lo, hi = {0: (self.x, self.cols), 1: (0, self.x + 1)}.get(mode, (0, self.cols))
        for i in range(lo, hi):
            row[i] = " "

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
