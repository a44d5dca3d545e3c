"""kotoba_broker: run Python snippets through kotoba-brokerd's approval gate.

    from kotoba_broker import Broker

    with Broker() as broker:                       # default socket, with a channel
        result = broker.run("print(6*7)", on_card=lambda card: "once")
        print(result.stdout, result.exit_code)

Broker is blocking; AsyncBroker is the same API for asyncio.  With
Broker(escalate=True) on_card may also get an escalation card (card.kind
"escalate", answered RERUN or LEAVE) after a run under a grant that the
sandbox stopped; the Result's `escalation` and `first` say how it ended.  Errors from
the broker raise KotobaError subclasses carrying `code` and `message`.
The wire protocol is proto/PROTOCOL.md; msgpack comes from python3-msgpack.
"""
from .aio import AsyncBroker
from .client import Broker
from .errors import (AuditBroken, AuditUnavailable, BadCwd, BadRequest, BrokerUnavailable,
                     Busy, Cancelled, ConnectionLost, Denied, DidNotRun, Expired,
                     InternalError, KotobaError, NoSuchCard, NoSuchRun, NotOffered,
                     ProtocolError, Refused, SetupFailed, SnippetTooLarge, WorkerLost)
from .render import card_text, receipt_text, show
from .types import (ALWAYS, DEFER, DENY, LEAVE, ONCE, RERUN, AuditRow, Blocked, Card, Grant,
                    Label, NetUse, OutputFile, Result, Welcome, mime_type_of,
                    safe_file_name)
from ._version import __version__
from .wire import default_socket_path

__all__ = [
    "Broker", "AsyncBroker", "Result", "OutputFile", "mime_type_of", "safe_file_name", "Blocked", "Card", "Label", "Grant", "AuditRow", "NetUse", "Welcome",
    "ONCE", "ALWAYS", "DENY", "RERUN", "LEAVE", "DEFER", "default_socket_path", "show", "card_text",
    "receipt_text",
    "KotobaError", "BrokerUnavailable", "ConnectionLost", "ProtocolError", "DidNotRun",
    "Denied", "Expired", "Refused", "NotOffered", "Cancelled", "SnippetTooLarge",
    "SetupFailed", "BadCwd", "Busy", "WorkerLost", "AuditUnavailable", "AuditBroken",
    "NoSuchRun", "NoSuchCard", "InternalError", "BadRequest", "__version__",
]
