"""Result types of the agentfs client: dataclasses mirroring the API's JSON."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Generic, List, Mapping, Optional, TypeVar

AnyStr_ = TypeVar("AnyStr_", str, bytes)

JSON = Dict[str, Any]


def parse_time(v: Any) -> Optional[datetime]:
    """Parses an RFC 3339 time of the API (nanoseconds cut to microseconds); None stays None."""
    if not v:
        return None
    s = str(v)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    # Python 3.9's fromisoformat takes at most 6 fractional digits.
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac = rest[:i][:6].ljust(6, "0")
        s = head + "." + frac + rest[i:]
    return datetime.fromisoformat(s)


def _time(v: Any) -> datetime:
    t = parse_time(v)
    if t is None:
        return datetime.fromtimestamp(0).astimezone()
    return t


@dataclass(frozen=True)
class Health:
    """The answer of GET /healthz."""

    status: str
    version: str


@dataclass(frozen=True)
class Backend:
    """Where a workspace's commands run.

    ``type`` is "local" (on the daemon's host, as its user) or "docker" (in a
    container of the workspace, one per mount, with the workspace at
    /workspace). The docker options left out take the daemon's (``agentfs
    serve --image --user --network --memory --cpus --pids``); the image must
    be present in the engine (it is never pulled). ``memory`` is in bytes,
    ``cpus`` may be fractional, ``pids`` 0 means 4096.
    """

    type: str = "local"
    image: str = ""
    user: str = ""
    """Numeric "uid:gid" running the container and its commands."""
    network: bool = False
    memory: int = 0
    cpus: float = 0.0
    pids: int = 0

    def to_json(self) -> JSON:
        d: JSON = {"type": self.type}
        for k in ("image", "user", "network", "memory", "cpus", "pids"):
            v = getattr(self, k)
            if v:
                d[k] = v
        return d

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> "Backend":
        d = d or {}
        return cls(type=d.get("type", "local"), image=d.get("image", ""), user=d.get("user", ""),
                   network=bool(d.get("network", False)), memory=int(d.get("memory", 0)),
                   cpus=float(d.get("cpus", 0.0)), pids=int(d.get("pids", 0)))


@dataclass(frozen=True)
class WorkspaceInfo:
    """A workspace as the daemon describes it."""

    name: str
    branch: str
    status: str
    """"mounted" or "unmounted"."""
    head_commit: str
    bytes_waiting: int
    created: datetime
    last_used: datetime
    virtual: bool
    expires_at: Optional[datetime] = None
    delete_on_expiry: bool = False
    expired: bool = False
    base: str = ""
    from_: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    backend: Backend = field(default_factory=Backend)
    """Where its commands run: its creator's choice completed with the daemon's defaults."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WorkspaceInfo":
        return cls(
            name=d["name"], branch=d.get("branch", ""), status=d.get("status", ""),
            head_commit=d.get("head_commit", ""), bytes_waiting=int(d.get("bytes_waiting", 0)),
            created=_time(d.get("created")), last_used=_time(d.get("last_used")),
            virtual=bool(d.get("virtual", False)), expires_at=parse_time(d.get("expires_at")),
            delete_on_expiry=bool(d.get("delete_on_expiry", False)), expired=bool(d.get("expired", False)),
            base=d.get("base", ""), from_=d.get("from", ""), metadata=dict(d.get("metadata") or {}),
            backend=Backend.from_json(d.get("backend")),
        )


@dataclass(frozen=True)
class TokenInfo:
    """A workspace token; ``token`` (the secret) is set only when it was just created."""

    id: str
    workspace: str
    read_only: bool
    created: datetime
    token: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TokenInfo":
        return cls(id=d["id"], workspace=d.get("workspace", ""), read_only=bool(d.get("read_only", False)),
                   created=_time(d.get("created")), token=d.get("token", ""))


@dataclass(frozen=True)
class Changes:
    """What a command created, modified and deleted (paths relative to the workspace root)."""

    created: List[str]
    modified: List[str]
    deleted: List[str]

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> Optional["Changes"]:
        if d is None:
            return None
        return cls(created=list(d.get("created") or []), modified=list(d.get("modified") or []),
                   deleted=list(d.get("deleted") or []))


def decode_output(v: str, encoding: str, binary: bool) -> Any:
    """Turns an output field of the API (in ``encoding``) into bytes (binary) or text."""
    if encoding == "base64":
        raw = base64.b64decode(v)
        return raw if binary else raw.decode("utf-8", errors="replace")
    return v.encode("utf-8") if binary else v


@dataclass(frozen=True)
class ExecResult(Generic[AnyStr_]):
    """The result of a command: ``ExecResult[str]`` by default, ``ExecResult[bytes]`` with ``binary=True``.

    ``output`` is stdout and stderr interleaved as they came. ``exit_code`` is
    128+N for a command killed by signal N (137 on timeout, with ``timed_out``),
    127 for a program not found. ``changes`` is None when change tracking failed.
    """

    exit_code: int
    stdout: AnyStr_
    stderr: AnyStr_
    output: AnyStr_
    timed_out: bool
    truncated: bool
    duration_ms: int
    changes: Optional[Changes]

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any], binary: bool) -> "ExecResult[Any]":
        enc = d.get("encoding", "utf-8")
        return ExecResult(
            exit_code=int(d["exit_code"]),
            stdout=decode_output(d.get("stdout", ""), enc, binary),
            stderr=decode_output(d.get("stderr", ""), enc, binary),
            output=decode_output(d.get("output", ""), enc, binary),
            timed_out=bool(d.get("timed_out", False)), truncated=bool(d.get("truncated", False)),
            duration_ms=int(d.get("duration_ms", 0)), changes=Changes.from_json(d.get("changes")),
        )


@dataclass(frozen=True)
class OutputChunk(Generic[AnyStr_]):
    """A piece of a streamed command's output: ``stream`` is "stdout" or "stderr"."""

    stream: str
    data: AnyStr_


@dataclass(frozen=True)
class JobInfo(Generic[AnyStr_]):
    """A background job. ``exit_code`` and ``result`` are set once it ended (``result`` only
    in the answers of get, wait and kill); ``error`` is why an ended job has no valid result."""

    id: str
    command: str
    started: datetime
    running: bool
    exit_code: Optional[int] = None
    result: Optional[ExecResult[AnyStr_]] = None
    error: Optional[Exception] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any], binary: bool) -> "JobInfo[Any]":
        from .errors import error_from

        res = d.get("result")
        err = d.get("error")
        return JobInfo(
            id=d["id"], command=d.get("command", ""), started=_time(d.get("started")),
            running=bool(d.get("running", False)),
            exit_code=None if d.get("exit_code") is None else int(d["exit_code"]),
            result=None if res is None else ExecResult.from_json(res, binary),
            error=None if err is None else error_from(err.get("code", ""), err.get("message", ""), err.get("path", "")),
        )


@dataclass(frozen=True)
class JobOutput(Generic[AnyStr_]):
    """A job's output (stdout and stderr interleaved) from byte ``offset``; ask for
    ``next_offset`` next."""

    output: AnyStr_
    offset: int
    next_offset: int
    truncated: bool
    running: bool


@dataclass(frozen=True)
class FileInfo:
    """A directory entry (a final symlink is not followed). ``type`` is "file", "dir",
    "symlink" or "other"; ``path`` is relative to the workspace root."""

    path: str
    name: str
    type: str
    size: int
    mode: int
    mod_time: datetime

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileInfo":
        return cls(path=d["path"], name=d.get("name", ""), type=d.get("type", ""), size=int(d.get("size", 0)),
                   mode=int(d.get("mode", 0)), mod_time=_time(d.get("mod_time")))


@dataclass(frozen=True)
class NumberedRead:
    """Lines of a file in ``cat -n`` style (number right-aligned in six columns, a tab, the line):
    ``lines`` lines after skipping ``offset``, of ``total_lines``."""

    path: str
    content: str
    offset: int
    lines: int
    total_lines: int


@dataclass(frozen=True)
class WriteResult:
    """The answer of a write: the path and the bytes written."""

    path: str
    size: int


@dataclass(frozen=True)
class GrepMatch:
    """One matching line (``line`` is 1-based)."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class GrepResult:
    """The matches of a grep; ``truncated`` when max_results cut them."""

    matches: List[GrepMatch]
    truncated: bool


@dataclass(frozen=True)
class Snapshot:
    """A snapshot: a name of the volume's state at ``commit`` (BRANCH@SEQ). ``unique_bytes``
    (what removing it would free) is set only when listed with unique=True."""

    name: str
    commit: str
    time: datetime
    kind: str
    message: str = ""
    unique_bytes: Optional[int] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Snapshot":
        ub = d.get("unique_bytes")
        return cls(name=d["name"], commit=d.get("commit", ""), time=_time(d.get("time")), kind=d.get("kind", ""),
                   message=d.get("message", ""), unique_bytes=None if ub is None else int(ub))


@dataclass(frozen=True)
class RestoreResult:
    """A restore's new head ``commit`` and the automatic snapshot of the state before
    (``saved``, "" when there was none)."""

    commit: str
    saved: str = ""


@dataclass(frozen=True)
class HistoryChange:
    """One change between two states: ``op`` is "added", "modified" or "deleted"; ``what``
    lists what a modification changed (content, type, mode, ...); ``patch`` a unified diff."""

    op: str
    path: str
    type: str
    old_size: int
    new_size: int
    what: str = ""
    patch: str = ""


@dataclass(frozen=True)
class DiffResult:
    """The commits compared and the changes between them, sorted by path."""

    from_: str
    to: str
    changes: List[HistoryChange]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "DiffResult":
        return cls(from_=d.get("from", ""), to=d.get("to", ""), changes=[
            HistoryChange(op=c["op"], path=c["path"], type=c.get("type", ""), old_size=int(c.get("old_size", 0)),
                          new_size=int(c.get("new_size", 0)), what=c.get("what", ""), patch=c.get("patch", ""))
            for c in d.get("changes") or []])


@dataclass(frozen=True)
class Branch:
    """A branch of the daemon's volume; ``writer`` when a mount holds its writer lease."""

    name: str
    head: str
    writer: bool


@dataclass(frozen=True)
class VirtualChange:
    """A change of a virtual workspace over its base: ``op`` is "added", "modified",
    "deleted" or "renamed" (``from_`` its source); line counts and ``patch`` with stat/patch."""

    op: str
    path: str
    type: str
    size: int
    old_size: int
    from_: str = ""
    added: Optional[int] = None
    deleted: Optional[int] = None
    binary: bool = False
    patch: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "VirtualChange":
        return cls(op=d["op"], path=d["path"], type=d.get("type", ""), size=int(d.get("size", 0)),
                   old_size=int(d.get("old_size", 0)), from_=d.get("from", ""), added=d.get("added"),
                   deleted=d.get("deleted"), binary=bool(d.get("binary", False)), patch=d.get("patch", ""))

    @staticmethod
    def list(v: Any) -> "List[VirtualChange]":
        return [VirtualChange.from_json(c) for c in v or []]


@dataclass(frozen=True)
class VirtualDiffResult:
    """A virtual workspace's changes relative to ``base``."""

    base: str
    changes: List[VirtualChange]


@dataclass(frozen=True)
class VirtualCommitResult:
    """What a commit wrote: the base branch's new ``commit`` (snapshot bases), the changes
    committed and the count left ``pending``."""

    commit: str
    changes: List[VirtualChange]
    pending: int


@dataclass(frozen=True)
class VirtualDiscardResult:
    """The changes discarded and the count left ``pending``."""

    discarded: List[VirtualChange]
    pending: int


@dataclass(frozen=True)
class ChangeEvent:
    """One event of a workspace's change feed (Workspace.changes).

    ``op`` is "created", "modified" or "deleted" (a rename is a "deleted" of the old
    path then a "created" of the new one, for a directory without events for what
    it holds; "modified" comes once per written handle at its close, and for
    truncate, chmod, chown, utimes and xattr changes), or "reset": events may have
    been missed; ``reason`` says why ("unknown_id": the ``since`` id is older than
    the daemon's ring of 4096 events or from before a remount; "overflow": the
    reader fell more than 4096 events behind; "replaced": a snapshot restore or a
    virtual discard; "remounted"), and a client that needs the full state lists the
    workspace again.
    ``id`` is opaque: pass it back as ``since`` to resume after this event.
    ``type`` is "file", "dir", "symlink" or "other"; ``time`` is RFC 3339 (UTC).
    """

    id: str
    op: str
    path: str
    type: str
    time: str
    reason: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any], id: str = "") -> "ChangeEvent":
        return cls(id=str(d.get("id") or id), op=str(d.get("op", "")), path=str(d.get("path", "")),
                   type=str(d.get("type", "")), time=str(d.get("time", "")))
