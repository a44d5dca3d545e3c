"""The asyncio client: several runs and requests may be in flight on one
connection; cancelling the task that awaits run() cancels the snippet."""
import asyncio
import inspect
import itertools
import socket as _socket
from dataclasses import dataclass, field
from types import TracebackType
from typing import (Any, Awaitable, Callable, Dict, Iterator, List, Mapping, Optional, Set,
                    Tuple, Type, TypeVar, Union, cast)

from . import wire
from .client import (CLIENT_NAME, _Escalation, _answer_of, _no_more, _renamed, _safe_answer,
                     _unanswered)
from .errors import BrokerUnavailable, ConnectionLost, Denied, KotobaError, ProtocolError
from .errors import error_from_frame
from .types import DEFER, AuditRow, Card, Frame, Grant, OutputFile, Result, Welcome

__all__ = ["AsyncBroker", "AsyncCardCallback", "AsyncOutputCallback"]

_T = TypeVar("_T")
# run()'s callbacks, as Broker's, or coroutine functions.
AsyncCardCallback = Callable[[Card], Union[str, Awaitable[str]]]
AsyncOutputCallback = Callable[[str, bytes], Optional[Awaitable[None]]]
# What a run's queue carries: its frames, or the error that ended the connection.
_Item = Union[Frame, BaseException]


async def _call(fn: Callable[..., Union[_T, Awaitable[_T]]], *args: Any) -> _T:
    """Calls a callback that may be a plain function or a coroutine function."""
    r = fn(*args)
    if inspect.isawaitable(r):
        return cast(_T, await r)
    return cast(_T, r)


async def _ask(on_card: Optional[AsyncCardCallback], card: Card) -> str:
    """The answer to a card: without a callback, every card is denied (an
    escalation card left)."""
    return _safe_answer(card) if on_card is None else await _call(on_card, card)


@dataclass
class _RunState:
    """One run's output so far, its card, and how it ended."""
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    files: List[OutputFile] = field(default_factory=list)
    card: Optional[Card] = None
    ended: bool = False
    unanswered: Optional[Denied] = None
    esc: _Escalation = field(default_factory=lambda: _Escalation(False))


class AsyncBroker:
    """A connection to kotoba-brokerd for asyncio programs.

        async with AsyncBroker(socket_path=None, channel=True) as broker:
            result = await broker.run("print(6*7)", on_card=ask_person)

    The arguments and methods are Broker's, as coroutines.  Callbacks
    (on_card, on_output) may be plain or async functions; an on_card
    coroutine may take its time (the output of other runs keeps flowing),
    and is cancelled if the card expires first (run() then raises Expired).
    Cancelling the task awaiting run() sends `cancel`, waits up to 5 s for
    the broker to confirm the snippet is gone, and raises CancelledError.
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
        self._escs: Dict[str, _Escalation] = {}  # open escalation cards, by card id
        self.client_name = client_name
        self.welcome: Optional[Welcome] = None
        self.notices: List[KotobaError] = []
        self._ids: Iterator[int] = itertools.count(1)
        self._pending: Dict[int, "asyncio.Queue[_Item]"] = {}
        self._dead: Optional[KotobaError] = None
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional["asyncio.Future[None]"] = None
        self._wlock: asyncio.Lock  # made by open(), in the loop it runs in
        self._limit = wire.FRAME_MAX

    async def open(self) -> "AsyncBroker":
        """Connects and says hello; raises BrokerUnavailable, or the broker's refusal."""
        loop = asyncio.get_running_loop()
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, self.socket_path)
        except OSError as e:
            sock.close()
            raise BrokerUnavailable(
                "cannot reach the broker at %s: %s (is kotoba-brokerd running?)"
                % (self.socket_path, e.strerror or e), errno=e.errno) from None
        try:
            m = await self._handshake(loop, sock)
            self._reader, self._writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        self._wlock = asyncio.Lock()
        self.welcome = Welcome.from_frame(m)
        self._limit = max(self._limit, self.welcome.max_frame)
        self._task = asyncio.ensure_future(self._read_loop())
        return self

    async def _handshake(self, loop: asyncio.AbstractEventLoop,
                         sock: _socket.socket) -> Frame:
        """hello and welcome on the bare socket: a broker that refuses this
        peer says why and closes without reading hello, and its sentence
        must still be read after the EPIPE (a stream transport drops it)."""
        async def read(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = await loop.sock_recv(sock, n - len(buf))
                if not chunk:
                    raise ConnectionLost("lost the broker: connection closed")
                buf += chunk
            return buf

        try:
            await loop.sock_sendall(sock, wire.hello_frame(self.channel, self.client_name,
                                                           self.escalate))
        except OSError:
            pass  # the reason, if any, is read below
        try:
            m = wire.decode(await read(wire.header_length(await read(4), self._limit)))
        except OSError as e:
            raise ConnectionLost("lost the broker: %s" % (e.strerror or e)) from None
        if m["type"] == "error":
            raise error_from_frame(m)
        if m["type"] != "welcome":
            raise ProtocolError("the broker answered hello with %r" % m["type"])
        return m

    # ---- plumbing ---------------------------------------------------------

    async def _send(self, data: bytes) -> None:
        if self._dead:
            raise self._dead
        if self._writer is None:
            raise KotobaError("call open() (or use `async with`) first", code="invalid")
        async with self._wlock:
            try:
                self._writer.write(data)
                await self._writer.drain()
            except OSError as e:
                raise ConnectionLost("lost the broker while sending: %s" % (e.strerror or e),
                                     errno=e.errno) from None

    async def _recv(self) -> Frame:
        assert self._reader is not None  # the read loop starts after open()
        try:
            n = wire.header_length(await self._reader.readexactly(4), self._limit)
            return wire.decode(await self._reader.readexactly(n))
        except asyncio.IncompleteReadError:
            raise ConnectionLost("lost the broker: connection closed") from None
        except OSError as e:
            raise ConnectionLost("lost the broker: %s" % (e.strerror or e)) from None

    async def _read_loop(self) -> None:
        """Hands each frame to the request or run with its id."""
        try:
            while True:
                m = await self._recv()
                rid = m.get("id")
                q = self._pending.get(rid) if isinstance(rid, int) else None
                if q is not None:
                    q.put_nowait(m)
                elif m["type"] == "error" and m.get("id") is None:
                    self.notices.append(error_from_frame(m))
        except KotobaError as e:
            self._dead = e
        except asyncio.CancelledError:
            self._dead = ConnectionLost("the connection was closed")
        for q in self._pending.values():
            q.put_nowait(self._dead)

    async def _get(self, q: "asyncio.Queue[_Item]") -> Frame:
        m = await q.get()
        if isinstance(m, BaseException):
            raise m
        return m

    def _register(self) -> Tuple[int, "asyncio.Queue[_Item]"]:
        if self._dead:
            raise self._dead
        if self._task is None:
            raise KotobaError("call open() (or use `async with`) first", code="invalid")
        rid = next(self._ids)
        self._pending[rid] = asyncio.Queue()
        return rid, self._pending[rid]

    async def _request(self, msg: Frame) -> Frame:
        rid, q = self._register()
        try:
            msg["id"] = rid
            await self._send(wire.encode(msg))
            m = await self._get(q)
            if m["type"] == "error":
                raise error_from_frame(m)
            return m
        finally:
            self._pending.pop(rid, None)

    # ---- running a snippet ---------------------------------------------------

    async def run(self, code: str, cwd: Optional[wire.PathArg] = None,
                  timeout: Optional[float] = None,
                  on_card: Optional[AsyncCardCallback] = None,
                  on_output: Optional[AsyncOutputCallback] = None,
                  env: Optional[Mapping[str, str]] = None) -> Result:
        """As Broker.run()."""
        frame = None
        rid, q = self._register()
        state = _RunState(esc=_Escalation(self.escalate))
        getter: Optional["asyncio.Future[Frame]"] = None
        card_task: Optional["asyncio.Future[str]"] = None
        try:
            frame = wire.exec_frame(rid, code, cwd, timeout, env)
            await self._send(frame)
            while True:
                if getter is None:
                    getter = asyncio.ensure_future(self._get(q))
                waits: Set["asyncio.Future[Any]"] = {getter}
                if card_task is not None:
                    waits.add(card_task)
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if card_task is not None and card_task in done:
                    choice, card_task = _answer_of(card_task.result(), state.card), None
                    if choice != DEFER and state.card is not None:
                        await self.answer(state.card.id, choice)
                if getter in done:
                    m, getter = getter.result(), None
                    result = await self._frame(m, state, on_output)
                    if result is not None:
                        return result
                    if m["type"] == "card":
                        state.card = card = Card.from_frame(m)
                        if card.escalate:
                            state.esc.card = card.id
                            self._escs[card.id] = state.esc
                        state.unanswered = None if on_card or card.escalate else _unanswered(m)
                        card_task = asyncio.ensure_future(_ask(on_card, card))
        except BaseException:
            for t in (getter, card_task):
                if t is not None:
                    t.cancel()
            getter = card_task = None
            if frame is not None and not state.ended:
                await self._abandon(rid, q)
            raise
        finally:
            for t in (getter, card_task):
                if t is not None:
                    t.cancel()
            self._pending.pop(rid, None)
            if state.esc.card is not None:
                self._escs.pop(state.esc.card, None)

    async def _frame(self, m: Frame, state: _RunState,
                     on_output: Optional[AsyncOutputCallback]) -> Optional[Result]:
        """One frame of a run: its Result at the end, an exception for its
        error, None otherwise (`queued` among them: the run waits for a free
        slot, then runs and ends as any other)."""
        state.esc.frame(m)
        if m["type"] == "output":
            (state.err if m["stream"] == "stderr" else state.out).extend(m["data"])
            if on_output:
                await _call(on_output, m["stream"], m["data"])
        elif m["type"] == "file":
            state.files.append(OutputFile.from_frame(m))
        elif state.esc.first_exit(m, bytes(state.out), bytes(state.err), tuple(state.files)):
            state.out, state.err, state.files = bytearray(), bytearray(), []  # the re-run's
        elif m["type"] == "exit":
            state.ended = True
            return state.esc.result(Result.from_frames(m, bytes(state.out), bytes(state.err),
                                                       tuple(state.files)))
        elif m["type"] == "error":
            state.ended = True
            left = state.esc.error(m)
            if left is not None:
                return left
            if state.unanswered and m.get("code") == "denied":
                raise state.unanswered
            raise state.esc.raised(error_from_frame(m))
        return None

    async def _abandon(self, rid: int, q: "asyncio.Queue[_Item]") -> None:
        """Cancels a run whose caller gave up and waits (5 s at most) for
        the broker to confirm it ended."""
        async def until_end() -> None:
            while True:
                m = await self._get(q)
                if m["type"] in ("exit", "error") and not m.get("escalate"):
                    return
        try:
            await self._send(wire.encode({"type": "cancel", "id": rid}))
            await asyncio.wait_for(until_end(), 5)
        except (Exception, asyncio.CancelledError):
            pass

    async def answer(self, card_id: str, choice: str, for_: Optional[float] = None,
                     scope: Optional[wire.PathArg] = None) -> None:
        """Answers a card whose on_card returned DEFER; `for_` and `scope`
        as in Broker.answer()."""
        await self._send(wire.answer_frame(card_id, choice, for_, scope))
        esc = self._escs.get(card_id)
        if esc is not None:
            esc.answered(card_id, choice)

    # ---- grants and audit ------------------------------------------------------

    async def grants(self) -> List[Grant]:
        m = await self._request({"type": "grants"})
        return [Grant.from_frame(g) for g in m["grants"]]

    async def revoke(self, family: str = "execute_code") -> str:
        return str((await self._request({"type": "revoke", "family": family}))["message"])

    async def audit_tail(self, count: Optional[int] = None, **old: Any) -> List[AuditRow]:
        count = _renamed(old, "max", "count", count)
        _no_more(old)
        m = await self._request({"type": "audit", "op": "tail",
                                 "max": 20 if count is None else int(count)})
        return [AuditRow.from_frame(r) for r in m["rows"]]

    async def audit_show(self, seq: int) -> Optional[AuditRow]:
        m = await self._request({"type": "audit", "op": "show", "max": 1, "seq": int(seq)})
        rows = [AuditRow.from_frame(r) for r in m["rows"]]
        return rows[0] if rows else None

    async def audit_verify(self) -> str:
        return str((await self._request({"type": "audit", "op": "verify"}))["message"])

    # ---- lifetime -----------------------------------------------------------------

    async def close(self) -> None:
        """Closes the connection; the broker cancels anything still running."""
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def __aenter__(self) -> "AsyncBroker":
        return await self.open()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()
