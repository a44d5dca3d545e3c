"""Exceptions: one class per broker error code, each carrying the code and
the broker's sentence.

    KotobaError
    ├── BrokerUnavailable        no broker at the socket (connect failed)
    │   └── ConnectionLost       the broker went away mid-conversation
    ├── ProtocolError            a frame this package cannot read
    ├── DidNotRun                the gate stopped the snippet (CLI status 126)
    │   ├── Denied               the person answered deny
    │   ├── Expired              nobody answered the card in time
    │   ├── Refused              no approval channel and the snippet is labelled
    │   ├── NotOffered           sandbox mode none: execute_code is not offered
    │   ├── Cancelled            the run was cancelled
    │   └── SnippetTooLarge      over the broker's max_snippet
    ├── SetupFailed              the sandbox could not be set up (step, errno)
    │   └── BadCwd               the working directory is missing or not one
    ├── Busy, WorkerLost, AuditUnavailable, AuditBroken, NoSuchRun,
    │   NoSuchCard, InternalError
    └── BadRequest               bad-field, bad-msgpack, bad-utf8, bad-state,
                                 unknown-type, too-large, version
"""
from typing import Any, Dict, Mapping, Optional, Type

__all__ = [
    "KotobaError", "BrokerUnavailable", "ConnectionLost", "ProtocolError", "DidNotRun",
    "Denied", "Expired", "Refused", "NotOffered", "Cancelled", "SnippetTooLarge",
    "SetupFailed", "BadCwd", "Busy", "WorkerLost", "AuditUnavailable", "AuditBroken",
    "NoSuchRun", "NoSuchCard", "InternalError", "BadRequest", "error_from_frame",
]


class KotobaError(Exception):
    """Base class.  `code` is the protocol's code ("denied", "setup-failed"...)
    or a local word ("unreachable", "disconnected", "protocol"); `message` is
    a sentence for a person; `step` and `errno` say where a sandbox setup
    failed (else "" and None)."""

    code = "error"

    def __init__(self, message: str, code: Optional[str] = None, step: str = "",
                 errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.step = step
        self.errno = errno

    def __repr__(self) -> str:
        return "%s(code=%r, message=%r)" % (type(self).__name__, self.code, self.message)


class BrokerUnavailable(KotobaError):
    code = "unreachable"


class ConnectionLost(BrokerUnavailable):
    code = "disconnected"


class ProtocolError(KotobaError):
    code = "protocol"


class DidNotRun(KotobaError):
    pass


class Denied(DidNotRun):
    code = "denied"


class Expired(DidNotRun):
    code = "expired"


class Refused(DidNotRun):
    code = "refused"


class NotOffered(DidNotRun):
    code = "not-offered"


class Cancelled(DidNotRun):
    code = "cancelled"


class SnippetTooLarge(DidNotRun):
    code = "snippet-too-large"


class SetupFailed(KotobaError):
    code = "setup-failed"


class BadCwd(SetupFailed):
    code = "bad-cwd"


class Busy(KotobaError):
    code = "busy"


class WorkerLost(KotobaError):
    code = "worker-lost"


class AuditUnavailable(KotobaError):
    code = "audit-unavailable"


class AuditBroken(KotobaError):
    code = "audit-broken"


class NoSuchRun(KotobaError):
    code = "no-such-run"


class NoSuchCard(KotobaError):
    code = "no-such-card"


class InternalError(KotobaError):
    code = "internal"


class BadRequest(KotobaError):
    code = "bad-field"


_BY_CODE: Dict[str, Type[KotobaError]] = {cls.code: cls for cls in (
    Denied, Expired, Refused, NotOffered, Cancelled, SnippetTooLarge, SetupFailed, BadCwd,
    Busy, WorkerLost, AuditUnavailable, AuditBroken, NoSuchRun, NoSuchCard, InternalError)}
for _code in ("bad-field", "bad-msgpack", "bad-utf8", "bad-state", "unknown-type",
              "too-large", "version"):
    _BY_CODE[_code] = BadRequest


def error_from_frame(m: Mapping[str, Any]) -> KotobaError:
    """The exception for a broker `error` frame (a dict)."""
    code = str(m.get("code", "error"))
    cls = _BY_CODE.get(code, KotobaError)
    return cls(str(m.get("message") or "the broker answered " + code), code=code,
               step=str(m.get("step", "")), errno=m.get("errno"))
