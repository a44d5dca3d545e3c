"""The blocking client: one connection, one request at a time; cancel()
and answer() may be called from other threads while run() waits."""
import dataclasses
import itertools
import socket as _socket
import threading
import warnings
from types import TracebackType
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type,
                    TypeVar)

from . import wire
from ._version import __version__
from .errors import (BrokerUnavailable, ConnectionLost, Denied, KotobaError, NoSuchRun,
                     ProtocolError)
from .errors import error_from_frame
from .types import (DEFER, DENY, LEAVE, RERUN, AuditRow, Card, Frame, Grant, OutputFile,
                    Result, Welcome)

__all__ = ["Broker", "CardCallback", "OutputCallback"]

CLIENT_NAME = "kotoba_broker.py/" + __version__

# run()'s callbacks: on_card(card) returns "once", "always", "deny" or
# DEFER ("rerun", "leave" or DEFER for an escalation card); on_output(stream,
# data) gets "stdout" or "stderr" and the bytes.
CardCallback = Callable[[Card], str]
OutputCallback = Callable[[str, bytes], None]

_T = TypeVar("_T")


def _renamed(old: Dict[str, Any], old_name: str, new_name: str, value: _T) -> _T:
    """A keyword argument under its former name (one that shadowed a
    builtin or module): still accepted, with a DeprecationWarning."""
    if old_name not in old:
        return value
    warnings.warn("%s= is deprecated; pass %s=" % (old_name, new_name), DeprecationWarning,
                  stacklevel=3)
    if value is not None:
        raise TypeError("pass %s= or %s=, not both" % (new_name, old_name))
    v: _T = old.pop(old_name)
    return v


def _no_more(old: Dict[str, Any]) -> None:
    if old:
        raise TypeError("unexpected keyword argument %r" % next(iter(old)))


def _unanswered(m: Frame) -> Denied:
    """The denial of a card nobody was given to answer: say so, rather than
    the broker's "You denied this snippet"."""
    return Denied("the broker asked for approval (card %s) and run() was given no on_card "
                  "callback, so it was answered deny; pass on_card, or connect with "
                  "channel=False" % m.get("card", "?"), code="denied")


def _answer_of(choice: str, card: Optional[Card] = None) -> str:
    if card is not None and card.escalate:
        if choice == DEFER or choice in (RERUN, LEAVE):
            return choice
        raise ValueError("on_card must return 'rerun', 'leave' or DEFER for an escalation "
                         "card (kind 'escalate'), not %r" % (choice,))
    if choice == DEFER or choice in ("once", "always", "deny"):
        return choice
    raise ValueError("on_card must return 'once', 'always', 'deny' or DEFER, not %r"
                     % (choice,))


def _safe_answer(card: Card) -> str:
    """The answer to a card nobody was given to answer: nothing runs."""
    return LEAVE if card.escalate else DENY


# An escalation card's end, as the broker's error says it, when nothing ran again.
_LEFT_BY = {"denied": "left", "expired": "expired", "cancelled": "cancelled"}


class _Escalation:
    """One run's escalation, as its frames tell it: the first run's Result
    once its exit said `escalate`, and whether the re-run was asked for or
    began.  Shared by Broker and AsyncBroker."""

    def __init__(self, declared: bool) -> None:
        self.declared = declared
        self.first: Optional[Result] = None
        self.card: Optional[str] = None
        self.rerun = False

    def first_exit(self, m: Frame, out: bytes, err: bytes,
                   files: Tuple[OutputFile, ...] = ()) -> bool:
        """True when `m` is the first run's exit of an escalation: the run goes on."""
        if not (self.declared and m["type"] == "exit" and m.get("escalate")
                and self.first is None):
            return False
        self.first = Result.from_frames(m, out, err, files)
        return True

    def frame(self, m: Frame) -> None:
        if self.first is not None and m["type"] in ("started", "queued"):
            self.rerun = True

    def answered(self, card_id: str, choice: str) -> None:
        if choice == RERUN and self.first is not None and card_id == self.card:
            self.rerun = True

    def result(self, r: Result) -> Result:
        """The run's end: the re-run's Result, marked, after an escalation."""
        if self.first is None:
            return r
        return dataclasses.replace(r, escalation="rerun", first=self.first)

    def error(self, m: Frame) -> Optional[Result]:
        """The first run's Result when the error ends an escalation in which
        nothing ran again (left, expired, withdrawn); None otherwise."""
        end = _LEFT_BY.get(m.get("code", ""))
        if self.first is None or end is None or (end != "left" and self.rerun):
            return None
        return dataclasses.replace(self.first, escalation=end, first=self.first)

    def raised(self, e: KotobaError) -> KotobaError:
        """An error that ended the re-run carries the first run's Result."""
        if self.first is not None:
            setattr(e, "first", self.first)
        return e


class Broker:
    """A connection to kotoba-brokerd.

    socket_path: the broker's socket (None: wire.default_socket_path());
        `socket=` is its former name, still accepted with a warning.
    channel: True when this program can show an approval card to a person
        and return the answer (run()'s on_card).  Without a channel the
        broker never sends a card: plain snippets run unattended and
        labelled ones raise Refused.
    escalate: True when on_card can also show an escalation card to a
        person (Card.kind "escalate"; with a channel only): after a run
        under a saved grant that the sandbox stopped, the broker may then
        offer to run the same snippet again under the approved profile.
        False (the default): it never does, and runs end as before.  Ask
        for it only where a person answers the cards.

    Raises BrokerUnavailable when nothing listens at the socket, or the
    broker's refusal (Refused, Busy, BadRequest for a version mismatch).
    Use it as a context manager, or call close().
    """

    def __init__(self, socket_path: Optional[str] = None, channel: bool = True,
                 client_name: str = CLIENT_NAME, *, escalate: bool = False,
                 **old: Any) -> None:
        socket_path = _renamed(old, "socket", "socket_path", socket_path)
        _no_more(old)
        if escalate and not channel:
            raise ValueError("escalation cards need an approval channel (channel=True)")
        self.socket_path: str = socket_path or wire.default_socket_path()
        self.channel = bool(channel)
        self.escalate = bool(escalate)
        self._esc: Optional[_Escalation] = None
        self.notices: List[KotobaError] = []  # broker errors that belonged to no request
        self._ids: Iterator[int] = itertools.count(1)
        self._lock = threading.Lock()   # one request at a time
        self._wlock = threading.Lock()  # whole frames on the socket
        self._running: Optional[int] = None
        self._in_frame = False  # a read was interrupted mid-frame: framing is lost
        self._limit = wire.FRAME_MAX
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self._sock.connect(self.socket_path)
        except OSError as e:
            self._sock.close()
            raise BrokerUnavailable(
                "cannot reach the broker at %s: %s (is kotoba-brokerd running?)"
                % (self.socket_path, e.strerror or e), errno=e.errno) from None
        try:
            self.welcome = self._hello(client_name)
        except BaseException:
            self._sock.close()
            raise

    # ---- plumbing ---------------------------------------------------------

    def _send(self, data: bytes) -> None:
        with self._wlock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise ConnectionLost("lost the broker while sending: %s" % (e.strerror or e),
                                     errno=e.errno) from None

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(n - len(buf))
            except OSError as e:
                raise ConnectionLost("lost the broker: %s" % (e.strerror or e),
                                     errno=e.errno) from None
            if not chunk:
                raise ConnectionLost("lost the broker: connection closed")
            buf += chunk
        return bytes(buf)

    def _recv(self) -> Frame:
        self._in_frame = True
        n = wire.header_length(self._read(4), self._limit)
        payload = self._read(n)
        self._in_frame = False
        return wire.decode(payload)

    def _hello(self, client_name: str) -> Welcome:
        try:
            self._send(wire.hello_frame(self.channel, client_name, self.escalate))
        except ConnectionLost as lost:
            # a broker that refuses this peer says why and closes without
            # reading hello: its sentence is still there to read
            try:
                m = self._recv()
            except KotobaError:
                raise lost from None
            if m["type"] != "error":
                raise
        else:
            m = self._recv()
        if m["type"] == "error":
            raise error_from_frame(m)
        if m["type"] != "welcome":
            raise ProtocolError("the broker answered hello with %r" % m["type"])
        welcome = Welcome.from_frame(m)
        self._limit = max(self._limit, welcome.max_frame)
        return welcome

    def _stray(self, m: Frame) -> None:
        """A frame for no live request: kept when it is an id-less error."""
        if m["type"] == "error" and m.get("id") is None:
            self.notices.append(error_from_frame(m))

    def _request(self, msg: Frame) -> Frame:
        with self._lock:
            msg["id"] = rid = next(self._ids)
            self._send(wire.encode(msg))
            while True:
                m = self._recv()
                if m.get("id") == rid:
                    if m["type"] == "error":
                        raise error_from_frame(m)
                    return m
                self._stray(m)

    # ---- running a snippet -------------------------------------------------

    def run(self, code: str, cwd: Optional[wire.PathArg] = None,
            timeout: Optional[float] = None, on_card: Optional[CardCallback] = None,
            on_output: Optional[OutputCallback] = None,
            env: Optional[Mapping[str, str]] = None) -> Result:
        """Runs one snippet and returns its Result once it has ended.

        code: Python source (str).
        cwd: absolute or relative directory; None: the current directory.
        timeout: wall-clock limit in seconds; None: the broker's default.
        on_card(card): called when a person must decide; returns "once",
            "always" or "deny" (or DEFER, then answer(card.id, ...) later
            from another thread).  None: every card is answered "deny".
            With escalate=True it may also get an escalation card
            (card.kind "escalate", after the first run's output), answered
            "rerun" or "leave" (or DEFER); another answer to it is a
            ValueError, which cancels the run.  None: it is left.
        on_output(stream, data): each chunk as it arrives, stream "stdout"
            or "stderr", data bytes (a chunk may end mid-character).
        env: optional dict; the broker keeps only its allowlist.

        Raises why it did not run: Denied, Expired, Refused, NotOffered,
        Cancelled, SetupFailed/BadCwd, Busy...  Any exception from a
        callback (or KeyboardInterrupt) cancels the run, then propagates.

        After an escalation card the Result says how it ended (`escalation`,
        `first`): "rerun" returns the re-run's Result; "left", "expired" and
        "cancelled" (nothing ran again) the first run's.  An error that ends
        the re-run is raised with the first run's Result as its `first`.
        """
        with self._lock:
            rid = next(self._ids)
            frame = wire.exec_frame(rid, code, cwd, timeout, env)
            with self._wlock:
                self._running = rid
                self._esc = _Escalation(self.escalate)
            try:
                self._send(frame)
                return self._follow(rid, on_card, on_output)
            except KotobaError:
                raise
            except BaseException:
                self._abandon(rid)
                raise
            finally:
                with self._wlock:
                    self._running = None
                    self._esc = None

    def _follow(self, rid: int, on_card: Optional[CardCallback],
                on_output: Optional[OutputCallback]) -> Result:
        out, err = bytearray(), bytearray()
        files: List[OutputFile] = []
        unanswered = None
        esc = self._esc
        assert esc is not None
        while True:
            m = self._recv()
            if m.get("id") != rid:
                self._stray(m)
                continue
            esc.frame(m)
            if m["type"] == "output":
                (err if m["stream"] == "stderr" else out).extend(m["data"])
                if on_output:
                    on_output(m["stream"], m["data"])
            elif m["type"] == "file":
                files.append(OutputFile.from_frame(m))
            elif m["type"] == "card":
                card = Card.from_frame(m)
                if card.escalate:
                    esc.card = card.id
                unanswered = None if on_card or card.escalate else _unanswered(m)
                choice = _answer_of(on_card(card) if on_card else _safe_answer(card), card)
                if choice != DEFER:
                    self.answer(card.id, choice)
            elif m["type"] == "queued":
                pass  # waits for a free slot; then it runs and ends as any other
            elif esc.first_exit(m, bytes(out), bytes(err), tuple(files)):
                out, err, files = bytearray(), bytearray(), []  # the re-run's, if any
            elif m["type"] == "exit":
                return esc.result(Result.from_frames(m, bytes(out), bytes(err), tuple(files)))
            elif m["type"] == "error":
                left = esc.error(m)
                if left is not None:
                    return left
                raise unanswered if unanswered and m.get("code") == "denied" else \
                    esc.raised(error_from_frame(m))

    def _abandon(self, rid: int) -> None:
        """Cancels a run the caller gave up on and reads up to its end, so
        the connection stays usable; gives up after 5 s.  Interrupted in the
        middle of a frame, the connection cannot be resynchronised: it is
        closed, which cancels the run too."""
        if self._in_frame:
            self.close()
            return
        try:
            self._send(wire.encode({"type": "cancel", "id": rid}))
            self._sock.settimeout(5)
            while True:
                m = self._recv()
                if m.get("id") == rid and m["type"] in ("exit", "error") and \
                        not m.get("escalate"):
                    return
        except (KotobaError, OSError):
            pass
        finally:
            self._sock.settimeout(None)

    def answer(self, card_id: str, choice: str, for_: Optional[float] = None,
               scope: Optional[wire.PathArg] = None) -> None:
        """Answers a card whose on_card returned DEFER (or from inside
        on_card, which then returns DEFER).  Thread-safe.  If the card
        expired meanwhile, run() raises Expired.  With "always", the grant
        lasts `for_` seconds at most (cut to the broker's [gate] grant_ttl)
        and covers only runs whose cwd is in `scope` or below (a directory
        the broker resolves to its real path).  An escalation card is
        answered "rerun" or "leave"."""
        self._send(wire.answer_frame(card_id, choice, for_, scope))
        with self._wlock:
            if self._esc is not None:
                self._esc.answered(card_id, choice)

    def cancel(self) -> None:
        """Cancels the run in flight (from another thread, or a callback):
        run() then raises Cancelled.  Raises NoSuchRun when nothing runs."""
        with self._wlock:
            rid = self._running
        if rid is None:
            raise NoSuchRun("no snippet is running on this connection")
        self._send(wire.encode({"type": "cancel", "id": rid}))

    # ---- grants and audit --------------------------------------------------

    def grants(self) -> List[Grant]:
        """The caller's saved grants, a list of Grant."""
        return [Grant.from_frame(g) for g in self._request({"type": "grants"})["grants"]]

    def revoke(self, family: str = "execute_code") -> str:
        """Revokes the caller's grant; returns the broker's sentence, which
        says whether there was one."""
        return str(self._request({"type": "revoke", "family": family})["message"])

    def audit_tail(self, count: Optional[int] = None, **old: Any) -> List[AuditRow]:
        """The caller's newest `count` audit rows (default 20, at most 256),
        oldest first.  `max=` is its former name, accepted with a warning."""
        count = _renamed(old, "max", "count", count)
        _no_more(old)
        m = self._request({"type": "audit", "op": "tail",
                           "max": 20 if count is None else int(count)})
        return [AuditRow.from_frame(r) for r in m["rows"]]

    def audit_show(self, seq: int) -> Optional[AuditRow]:
        """The caller's audit row `seq` (as audit_tail gives it) with, for a
        run's exit, its receipt listed in `blocked`; None when there is no
        such row of the caller's."""
        m = self._request({"type": "audit", "op": "show", "max": 1, "seq": int(seq)})
        rows = [AuditRow.from_frame(r) for r in m["rows"]]
        return rows[0] if rows else None

    def audit_verify(self) -> str:
        """Walks the audit hash chain; returns the broker's sentence, or
        raises AuditBroken naming the first bad row."""
        return str(self._request({"type": "audit", "op": "verify"})["message"])

    # ---- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection; the broker cancels anything still running."""
        self._sock.close()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()
