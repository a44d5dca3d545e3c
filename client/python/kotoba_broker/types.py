"""What the broker answers, as plain frozen dataclasses."""
import dataclasses
import datetime
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .errors import ProtocolError

# A decoded frame: a msgpack map, its values as msgpack gives them.
Frame = Dict[str, Any]

__all__ = ["Result", "Blocked", "Card", "Label", "Grant", "AuditRow", "Welcome", "ONCE", "ALWAYS",
           "DENY", "RERUN", "LEAVE", "DEFER"]

# A card's answers (the strings the protocol uses), and DEFER: returned by
# a blocking on_card callback to answer later with Broker.answer().  A run
# card takes ONCE, ALWAYS or DENY; an escalation card RERUN or LEAVE.
ONCE, ALWAYS, DENY = "once", "always", "deny"
RERUN, LEAVE = "rerun", "leave"
DEFER = "defer"


def _time(ms: int) -> Optional[datetime.datetime]:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc) if ms else None


@dataclasses.dataclass(frozen=True)
class Blocked:
    """One operation the sandbox refused in a run (PROTOCOL.md, "exit").

    `kind` is "write", "create", "delete", "rename", "exec", "secret-read",
    "connect-unix", "bind", "listen", "signal", "syscall" or "request" (a
    network request the egress proxy refused); `target` the path, program,
    address, pid or call, a request's the proxy's sentence ("POST URL
    refused: WHY") (the snippet's choice: show it with render.show()); `by`
    "landlock", "seccomp", "exec gate", "mount mask" or "egress proxy".
    `seen_by` is "worker" (the exec gate, a fact), "proxy" (the broker's
    egress proxy, a fact) or "python" (the snippet's own interpreter
    reported it: the snippet can forge or hide such entries),
    and `inferred` says that `by` follows from the profile rather than from
    the kernel's word."""
    kind: str
    target: str
    count: int
    by: str
    seen_by: str
    inferred: bool

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> "Blocked":
        return cls(kind=m["kind"], target=m["target"], count=m["count"], by=m["by"],
                   seen_by=m["seen_by"], inferred=bool(m["inferred"]))


# A file's type by its first bytes, never by its name (the snippet chose it).
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))


def _is_svg(data: bytes) -> bool:
    head = data[:4096].lstrip()
    if head.startswith(b"<?xml"):
        head = head[head.find(b"?>") + 2:].lstrip() if b"?>" in head else b""
        while head.startswith(b"<!--") or head.startswith(b"<!DOCTYPE"):
            end = b"-->" if head.startswith(b"<!--") else b">"
            head = head[head.find(end) + len(end):].lstrip() if end in head else b""
    return head.startswith(b"<svg")


def mime_type_of(data: bytes) -> str:
    """PNG, JPEG, GIF, WebP or SVG by magic bytes; else application/octet-stream."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/svg+xml" if _is_svg(data) else "application/octet-stream"


def safe_file_name(name: Any) -> bool:
    """The protocol's rule for a `file` name: 1-255 bytes of UTF-8, no '/',
    no control character, not '.' or '..'.  A name that breaks it is
    refused (ProtocolError), never rewritten."""
    return (isinstance(name, str) and 0 < len(name.encode("utf-8", "surrogatepass")) <= 255
            and name not in (".", "..") and "/" not in name
            and not any(ord(c) < 0x20 or ord(c) == 0x7f for c in name))


@dataclasses.dataclass(frozen=True)
class OutputFile:
    """A regular file the snippet left in $KOTOBA_OUTPUT_DIR: its `name`
    (checked by safe_file_name: it stays in any directory it is saved
    into) and its bytes.  `mime_type` is read from the bytes."""
    name: str
    data: bytes

    @classmethod
    def from_frame(cls, m: Mapping[str, Any]) -> "OutputFile":
        if not safe_file_name(m.get("name")) or not isinstance(m.get("data"), bytes):
            raise ProtocolError("the broker sent a file whose name is no plain file name: %r"
                                % (m.get("name"),))
        return cls(m["name"], m["data"])

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def mime_type(self) -> str:
        return mime_type_of(self.data)

    def save(self, directory: str) -> str:
        """Writes it into directory as a new file (O_EXCL, O_NOFOLLOW:
        never over an existing file or through a symlink); returns its path."""
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "wb") as f:
            f.write(self.data)
        return os.path.join(directory, self.name)


@dataclasses.dataclass(frozen=True)
class Result:
    """How a snippet that ran ended.  A snippet that did not run raises
    instead (Denied, Expired, Refused, SetupFailed...).

    `duration` and `cpu_time` are in seconds (float); `exit_code` is None
    when the snippet was killed by `signal`; `stdout`/`stderr` are the
    bytes decoded as UTF-8 with invalid sequences replaced (the raw bytes
    are in `stdout_bytes`/`stderr_bytes`).  `where` is "host" or
    "container" (sandbox mode docker), and then `container` is the
    container's name; it is None on the host.  `truncated`: the broker cut
    a stream at its cap; then `output_limit` says where, in bytes per
    stream (the broker's `[limits] output` setting raises it; 0 from a
    broker that does not say).  `blocked` is the receipt:
    what the sandbox refused (at most 16 entries), and `blocked_total` how
    many refusals in all; empty and 0 when nothing was refused.
    `files` are the regular files the snippet left in $KOTOBA_OUTPUT_DIR
    (OutputFile, in name order), `files_left_out` how many entries there
    were not sent (over a cap: 16 files, 2 MiB each, 8 MiB in all; not a
    regular file; a name refused).

    On a connection opened with escalate=True, a run under a grant that
    the sandbox stopped may be offered again on an escalation card; then
    `escalation` says how that ended: "rerun" (this is the re-run's result),
    "left", "expired" or "cancelled" (nothing ran again: this is the first
    run's result), and `first` is the first run's Result.  Both are None
    for a run that was not escalated."""
    stdout: str
    stderr: str
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    truncated: bool
    decision: str
    approver: str
    labels: Tuple[str, ...]
    duration: float
    profile: str = ""
    limit: str = ""
    cpu_time: float = 0.0
    max_rss_kb: int = 0
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    where: str = "host"
    container: Optional[str] = None
    blocked: Tuple[Blocked, ...] = ()
    blocked_total: int = 0
    output_limit: int = 0
    escalation: Optional[str] = None
    first: Optional["Result"] = None
    files: Tuple[OutputFile, ...] = ()
    files_left_out: int = 0

    @property
    def ok(self) -> bool:
        """It ran to the end and exited 0."""
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_frames(cls, end: Mapping[str, Any], out: bytes, err: bytes,
                    files: Tuple[OutputFile, ...] = ()) -> "Result":
        exited = end.get("status") == "exited"
        # A broker from before `where` ran everything on the host.
        where = end.get("where", "host")
        return cls(
            stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
            exit_code=end.get("code") if exited else None,
            signal=None if exited else end.get("signal"),
            timed_out=bool(end.get("timed_out")), truncated=bool(end.get("truncated")),
            decision=end.get("decision", ""), approver=end.get("approver", ""),
            labels=tuple(end.get("labels", ())), duration=end.get("duration_us", 0) / 1e6,
            profile=end.get("profile", ""), limit=end.get("limit", ""),
            cpu_time=end.get("cpu_us", 0) / 1e6, max_rss_kb=end.get("max_rss_kb", 0),
            stdout_bytes=out, stderr_bytes=err, where=where,
            container=end.get("container") if where == "container" else None,
            blocked=tuple(Blocked.from_wire(b) for b in end.get("blocked", ())),
            blocked_total=end.get("blocked_total", 0),
            output_limit=end.get("output_limit", 0) if end.get("truncated") else 0,
            files=files, files_left_out=end.get("files_left_out", 0))


@dataclasses.dataclass(frozen=True)
class Label:
    """A pre-screen label on a card: its first match, 1-based line and byte span."""
    label: str
    line: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Card:
    """An approval card: a person must decide before the snippet runs.

    Show the whole `snippet` (nothing is approved unseen), the `labels` at
    their lines, `reason`, and the options in the spec's words: "once" runs
    it; "always" (`button`, `detail`) saves the `family` grant for this user
    and runs it; "deny" does not.  `expires` is in seconds.

    What else decides what runs is on the card too, as the run gets it:
    `cwd`, the `timeout` in seconds, each `env` entry the run keeps and the
    other `limits`, as (name, value) pairs.  From a broker that predates
    them, `cwd` is None and the rest empty.  `grant_ttl_ms` is the longest
    an "always" grant lasts on this broker ([gate] grant_ttl), 0 when it
    lasts until revoked.  `text()` is the whole card made
    safe for a terminal (see kotoba_broker.render).

    `kind` is "run", or "escalate" for an escalation card (only on a
    connection opened with escalate=True): the snippet already ran once
    under the user's grant and the sandbox stopped what `blocked` lists
    (`blocked_total` in all; an entry whose seen_by is "python" is the
    snippet's own report, which it can forge); what that run did stays
    done.  Its options are "rerun" (run it again under the approved
    profile) and "leave"; `after_seq` is the first run's exit row in the
    audit trail; `family`, `button` and `detail` are empty; `cwd`,
    `timeout`, `env` and `limits` are what the re-run would get."""
    id: str
    snippet: str
    labels: Tuple[Label, ...]
    options: Tuple[str, ...]
    family: str
    button: str
    detail: str
    expires: float
    reason: str
    run_id: int = 0
    cwd: Optional[str] = None
    timeout: float = 0.0
    env: Tuple[Tuple[str, str], ...] = ()
    limits: Tuple[Tuple[str, int], ...] = ()
    grant_ttl_ms: int = 0
    kind: str = "run"
    blocked: Tuple[Blocked, ...] = ()
    blocked_total: int = 0
    after_seq: int = 0

    @property
    def escalate(self) -> bool:
        """An escalation card: answer "rerun" or "leave"."""
        return self.kind == "escalate"

    def text(self, width: int = 80, colour: bool = False) -> str:
        """The card for a terminal `width` columns wide, every character
        shown visibly and every line numbered (kotoba_broker.render)."""
        from .render import card_text
        return card_text(self, width, colour)

    @classmethod
    def from_frame(cls, m: Mapping[str, Any]) -> "Card":
        text = m.get("family_text") or {}
        if m.get("kind") == "escalate":
            return cls(
                id=m["card"], snippet=m["snippet"],
                labels=tuple(Label(l["label"], l["line"], l["start"], l["end"])
                             for l in m.get("labels", ())),
                options=tuple(m.get("options", (RERUN, LEAVE))), family="", button="",
                detail="", expires=m.get("expires_ms", 0) / 1000, reason=m.get("reason", ""),
                run_id=m.get("id", 0), cwd=m.get("cwd"), timeout=m.get("timeout_ms", 0) / 1000,
                env=tuple((m.get("env") or {}).items()),
                limits=tuple((m.get("limits") or {}).items()), kind="escalate",
                blocked=tuple(Blocked.from_wire(b) for b in m.get("blocked", ())),
                blocked_total=m.get("blocked_total", 0), after_seq=m.get("after_seq", 0))
        return cls(
            id=m["card"], snippet=m["snippet"],
            labels=tuple(Label(l["label"], l["line"], l["start"], l["end"])
                         for l in m.get("labels", ())),
            options=tuple(m.get("options", (ONCE, ALWAYS, DENY))),
            family=m.get("family", "execute_code"), button=text.get("button", ""),
            detail=text.get("detail", ""), expires=m.get("expires_ms", 0) / 1000,
            reason=m.get("reason", ""), run_id=m.get("id", 0), cwd=m.get("cwd"),
            timeout=m.get("timeout_ms", 0) / 1000, env=tuple((m.get("env") or {}).items()),
            limits=tuple((m.get("limits") or {}).items()),
            grant_ttl_ms=m.get("grant_ttl_ms", 0))

    def annotated_lines(self) -> List[Tuple[int, str, List[str]]]:
        """(line number, text, [labels first matched on that line]) for each line.
        The text is the snippet's own, raw: to put it on a terminal, pass it
        through kotoba_broker.show() (or show the whole card with text())."""
        by_line: Dict[int, List[str]] = {}
        for l in self.labels:
            by_line.setdefault(l.line, []).append(l.label)
        lines = self.snippet.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()  # the newline that ends the last line starts no new one
        return [(i, text, by_line.get(i, [])) for i, text in enumerate(lines, 1)]


@dataclasses.dataclass(frozen=True)
class Grant:
    """A saved grant of the calling user.  `expires_ms` is 0 when it lasts
    until revoked; `expired` says it has passed (by the broker's clock) and
    covers nothing.  `scope` is the directory whose tree it covers, None
    for any."""
    family: str
    saved_at_ms: int
    card: str
    use_count: int
    last_used_ms: int
    expires_ms: int = 0
    expired: bool = False
    scope: Optional[str] = None

    @property
    def expires(self) -> Optional[datetime.datetime]:
        """None when it lasts until revoked."""
        return _time(self.expires_ms)

    @property
    def saved_at(self) -> Optional[datetime.datetime]:
        return _time(self.saved_at_ms)

    @property
    def last_used(self) -> Optional[datetime.datetime]:
        """None when never used."""
        return _time(self.last_used_ms)

    @classmethod
    def from_frame(cls, g: Mapping[str, Any]) -> "Grant":
        return cls(g["family"], g["saved_at_ms"], g["card"], g["use_count"], g["last_used_ms"],
                   g.get("expires_ms", 0), bool(g.get("expired", False)), g.get("scope"))


@dataclasses.dataclass(frozen=True)
class NetUse:
    """One host and port an unattended run reached through the egress proxy
    (AUDIT.md, `network`): `host` is "host:port" ("*" for every host past
    the first 15; the snippet's choice: show it with render.show()),
    `methods` each method once ("GET,HEAD"; "CONNECT" for a tunnel)."""
    host: str
    methods: str
    requests: int
    bytes_out: int
    bytes_in: int

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> "NetUse":
        return cls(host=m["host"], methods=m["methods"], requests=m["requests"],
                   bytes_out=m["bytes_out"], bytes_in=m["bytes_in"])


@dataclasses.dataclass(frozen=True)
class AuditRow:
    """One row of the caller's audit trail; the exit fields are None on
    rows without an exit.  `blocked_total` counts what the sandbox refused
    in an exit row's run (0: nothing); `blocked` lists it on the row that
    Broker.audit_show() asked for, and is empty on any other.  `after` is,
    on the rows of an escalation (its card, how it ended, the re-run's
    exit), the seq of the first run's exit row; None on any other row.
    `net_hosts`, `net_bytes_out` and `net_bytes_in` sum an exit row's
    traffic through the egress proxy (0: none); `network` lists it host by
    host on the row that Broker.audit_show() asked for."""
    seq: int
    time_ms: int
    run: int
    pid: int
    event: str
    sha256: str
    labels: Tuple[str, ...]
    mode: str
    decision: str
    approver: str
    profile: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: Optional[bool] = None
    duration_ms: Optional[int] = None
    blocked_total: int = 0
    blocked: Tuple[Blocked, ...] = ()
    after: Optional[int] = None
    net_hosts: int = 0
    net_bytes_out: int = 0
    net_bytes_in: int = 0
    network: Tuple[NetUse, ...] = ()

    @property
    def time(self) -> Optional[datetime.datetime]:
        return _time(self.time_ms)

    @classmethod
    def from_frame(cls, r: Mapping[str, Any]) -> "AuditRow":
        ex = r.get("has_exit")
        return cls(
            seq=r["seq"], time_ms=r["time_ms"], run=r["run"], pid=r["pid"], event=r["event"],
            sha256=r["sha256"], labels=tuple(x for x in r.get("labels", "").split(",") if x),
            mode=r["mode"], decision=r["decision"], approver=r["approver"],
            profile=r["profile"], exit_code=r.get("exit_code") if ex else None,
            signal=r.get("signal") if ex else None,
            timed_out=r.get("timed_out") if ex else None,
            duration_ms=r.get("duration_ms") if ex else None,
            blocked_total=r.get("blocked_total", 0),
            blocked=tuple(Blocked.from_wire(b) for b in r.get("blocked", ())),
            after=r.get("after"), net_hosts=r.get("net_hosts", 0),
            net_bytes_out=r.get("net_bytes_out", 0), net_bytes_in=r.get("net_bytes_in", 0),
            network=tuple(NetUse.from_wire(u) for u in r.get("network", ())))


@dataclasses.dataclass(frozen=True)
class Welcome:
    """What the broker said at hello.  `max_timeout` is in seconds."""
    version: int
    broker: str
    mode: str
    tools: Tuple[str, ...]
    max_frame: int
    max_snippet: int
    max_timeout: float

    @property
    def offers_execute_code(self) -> bool:
        return "execute_code" in self.tools

    @classmethod
    def from_frame(cls, m: Mapping[str, Any]) -> "Welcome":
        return cls(m["version"], m["broker"], m["mode"], tuple(m.get("tools", ())),
                   m["max_frame"], m["max_snippet"], m["max_timeout_ms"] / 1000)
