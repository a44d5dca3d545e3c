"""The wire protocol (proto/PROTOCOL.md): frames are a 4-byte big-endian
length and one msgpack map, encoded with Debian's python3-msgpack."""
import math
import os
import struct
from typing import Any, Dict, Mapping, Optional, Union

import msgpack

from .errors import ProtocolError
from .types import Frame

# What names a working directory: a path as str, or os.PathLike.
PathArg = Union[str, "os.PathLike[str]"]

__all__ = ["default_socket_path", "encode", "decode", "header_length", "exec_frame",
           "FRAME_MAX", "VERSION"]

VERSION = 1
HEADER = struct.Struct(">I")
FRAME_MAX = 4 << 20  # the broker's default; raised to its welcome's max_frame


SYSTEM_SOCKET = "/run/kotoba/broker.sock"


def default_socket_path() -> str:
    """Where the broker listens when nobody says, by the same rule as the C
    clients (proto/paths.c): $KOTOBA_SOCKET; /run/kotoba/broker.sock as
    root; $XDG_RUNTIME_DIR/kotoba/broker.sock, else /tmp/kotoba-UID/broker.sock,
    for an ordinary user, who falls back to the system broker's socket when
    no per-user broker is running."""
    env = os.environ.get("KOTOBA_SOCKET")
    if env:
        return env
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    rt = os.environ.get("XDG_RUNTIME_DIR", "")
    if rt.startswith("/"):
        own = os.path.join(rt, "kotoba", "broker.sock")
    else:
        own = "/tmp/kotoba-%d/broker.sock" % os.geteuid()
    if not os.path.exists(own) and os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return own


def encode(msg: Mapping[str, Any]) -> bytes:
    payload: bytes = msgpack.packb(msg, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


def header_length(header: bytes, limit: int) -> int:
    n: int = HEADER.unpack(header)[0]
    if n > limit:
        raise ProtocolError("the broker announced a %d-byte frame, over the %d-byte limit"
                            % (n, limit))
    return n


def decode(payload: bytes) -> Frame:
    try:
        m = msgpack.unpackb(payload, raw=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise ProtocolError("the broker sent a frame this client cannot read: %s" % e) from None
    if not isinstance(m, dict) or not isinstance(m.get("type"), str):
        raise ProtocolError("the broker sent a frame that is not a message")
    return m


def hello_frame(channel: bool, client: str, escalate: bool = False) -> bytes:
    """escalate: the client can show escalation cards too (with a channel
    only); sent only when true, so a hello without it is as before."""
    msg: Frame = {"type": "hello", "version": VERSION, "channel": bool(channel)}
    if escalate:
        if not channel:
            raise ValueError("escalation cards need an approval channel (channel=True)")
        msg["escalate"] = True
    msg["client"] = client
    return encode(msg)


def exec_frame(run_id: int, code: str, cwd: Optional[PathArg], timeout: Optional[float],
               env: Optional[Mapping[str, str]]) -> bytes:
    """cwd None: the caller's working directory (as the `kotoba` CLI);
    timeout in seconds, None: the broker's default."""
    if not isinstance(code, str):
        raise TypeError("code must be str, not %s" % type(code).__name__)
    msg: Frame = {"type": "exec", "id": run_id, "code": code,
           "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())}
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout must be positive seconds, or None")
        msg["timeout_ms"] = max(1, math.ceil(timeout * 1000))
    if env:
        msg["env"] = {str(k): str(v) for k, v in env.items()}
    return encode(msg)


def answer_frame(card_id: str, choice: str, for_: Optional[float] = None,
                 scope: Optional[PathArg] = None) -> bytes:
    """An answer; with "always", the grant may last `for_` seconds (the
    broker cuts it to its [gate] grant_ttl) and cover only runs in the
    directory `scope` or below."""
    if choice not in ("once", "always", "deny", "rerun", "leave"):
        raise ValueError("a card is answered 'once', 'always' or 'deny' (an escalation card "
                         "'rerun' or 'leave'), not %r" % (choice,))
    msg: Dict[str, Any] = {"type": "answer", "card": card_id, "choice": choice}
    if (for_ is not None or scope is not None) and choice != "always":
        raise ValueError("for_ and scope go with 'always' only")
    if for_ is not None:
        if for_ <= 0:
            raise ValueError("for_ must be positive seconds, or None")
        msg["for_ms"] = max(1, math.ceil(for_ * 1000))
    if scope is not None:
        path = os.fsdecode(scope)
        if not os.path.isabs(path):
            raise ValueError("scope must be an absolute directory, not %r" % (path,))
        msg["scope"] = path
    return encode(msg)
