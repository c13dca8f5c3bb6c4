"""The synchronous client of the agentfs serve HTTP API (/v1)."""

from __future__ import annotations

import base64
import json
import os
import ssl
from typing import Any, Dict, Generic, Iterator, List, Literal, Mapping, Optional, Sequence, Union, overload

from ._http import StreamResponse, Transport, quote_path
from .errors import NotFound, ProtocolError, error_from
from .feed import ChangeFeed
from .types import (
    AnyStr_, Backend, Branch, Changes, DiffResult, ExecResult, FileInfo, GrepMatch, GrepResult, Health, JobInfo, JobOutput,
    NumberedRead, OutputChunk, RestoreResult, Snapshot, TokenInfo, VirtualChange, VirtualCommitResult,
    VirtualDiffResult, VirtualDiscardResult, WorkspaceInfo, WriteResult, decode_output,
)

DEFAULT_URL = "http://127.0.0.1:7070"
"""Where `agentfs serve` listens by default."""

DEFAULT_EXEC_TIMEOUT = 120.0
"""The daemon's default command timeout, in seconds (as in the seeds)."""

# Time added to a command's own timeout for the HTTP answer to arrive
# (the sync barrier and the change list come after the command ends).
_EXEC_MARGIN = 60.0

Command = Union[str, Sequence[str]]
"""A shell line (run with sh -c) or an argv list (run without a shell)."""


def _exec_body(command: Command, env: Optional[Mapping[str, str]], cwd: Optional[str],
               stdin: Optional[Union[str, bytes]], timeout: Optional[float], output_limit: Optional[int],
               binary: bool) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if isinstance(command, str):
        body["command"] = command
    else:
        body["argv"] = list(command)
        if not body["argv"]:
            raise ValueError("argv is empty: give a program and its arguments, or a shell line as a str")
    if env:
        body["env"] = dict(env)
    if cwd:
        body["cwd"] = cwd
    if timeout is not None:
        if timeout <= 0:
            raise ValueError(f"timeout {timeout}: seconds, more than 0")
        body["timeout"] = timeout
    if output_limit is not None:
        body["output_limit"] = output_limit
    # base64 carries bytes both ways; it is needed for binary output and for
    # stdin that is not UTF-8.
    b64 = binary
    if isinstance(stdin, (bytes, bytearray)):
        try:
            stdin_text = bytes(stdin).decode("utf-8")
        except UnicodeDecodeError:
            b64 = True
            stdin_text = ""
        if b64:
            body["stdin"] = base64.b64encode(bytes(stdin)).decode("ascii")
        elif stdin_text:
            body["stdin"] = stdin_text
    elif stdin:
        body["stdin"] = base64.b64encode(stdin.encode("utf-8")).decode("ascii") if b64 else stdin
    if b64:
        body["encoding"] = "base64"
    return body


def _http_timeout(timeout: Optional[float]) -> float:
    return (DEFAULT_EXEC_TIMEOUT if timeout is None else timeout) + _EXEC_MARGIN


class Client:
    """A connection to an `agentfs serve` daemon.

    ``url`` defaults to $AGENTFS_URL (else http://127.0.0.1:7070) and ``token``
    to $AGENTFS_TOKEN (the admin token, or a workspace token). Connections are
    kept alive in a pool of ``pool_size``; requests that are safe to repeat are
    retried ``retries`` times on connection errors. ``timeout`` bounds every
    request that does not run a command (those get the command's timeout plus
    a margin). Thread-safe; use it as a context manager or call close().
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = 60.0,
                 pool_size: int = 8, retries: int = 2, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        url = url or os.environ.get("AGENTFS_URL") or DEFAULT_URL
        if token is None:
            token = os.environ.get("AGENTFS_TOKEN")
        if not token:
            raise ValueError("no agentfs token: pass token=... or set AGENTFS_TOKEN (the daemon's admin token "
                             "is in STATE_DIR/admin-token, e.g. ~/.local/state/agentfs/serve/admin-token)")
        self.url = url.rstrip("/")
        self._t = Transport(url, token, timeout=timeout, pool_size=pool_size, retries=retries, ssl_context=ssl_context)

    # The transport, for the workspace handles and the async client.
    @property
    def transport(self) -> Transport:
        return self._t

    def close(self) -> None:
        """Closes the pooled connections."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"agentfs.Client({self.url!r})"

    # -- daemon --

    def health(self) -> Health:
        """GET /healthz: the daemon is up (needs no token)."""
        d = self._t.request("GET", "/healthz").json()
        return Health(status=d.get("status", ""), version=d.get("version", ""))

    def openapi(self) -> Dict[str, Any]:
        """The daemon's OpenAPI document."""
        d: Dict[str, Any] = self._t.request("GET", "/v1/openapi.json").json()
        return d

    # -- workspaces --

    def create_workspace(self, name: str, *, from_snapshot: Optional[str] = None, fork_of: Optional[str] = None,
                         virtual_base: Optional[str] = None, lifetime: Optional[float] = None,
                         delete_on_expiry: bool = False, metadata: Optional[Mapping[str, str]] = None,
                         backend: Optional[Backend] = None) -> "Workspace":
        """Creates a workspace and returns its handle.

        Empty by default; ``from_snapshot="S"`` starts from snapshot S;
        ``fork_of="W"`` forks workspace W's head; ``virtual_base`` makes a
        virtual (copy-on-write) workspace over "snapshot:S" or an absolute host
        directory the daemon may read (diff, commit and discard apply).
        ``lifetime`` (seconds): when it ends the workspace's commands and jobs are
        killed and it is synced and unmounted (and deleted with
        ``delete_on_expiry``). ``backend`` chooses where its commands run, e.g.
        ``Backend("docker", image="python:3.12")`` (default: the daemon's
        ``--backend``). Raises Exists if the name is taken.
        """
        if from_snapshot is not None and fork_of is not None:
            raise ValueError("give from_snapshot or fork_of, not both")
        body: Dict[str, Any] = {"name": name}
        if from_snapshot is not None:
            body["from"] = "snapshot:" + from_snapshot
        if fork_of is not None:
            body["from"] = fork_of
        if virtual_base is not None:
            body["virtual"] = True
            body["base"] = virtual_base
        if lifetime is not None:
            body["lifetime"] = lifetime
        if delete_on_expiry:
            body["delete_on_expiry"] = True
        if metadata:
            body["metadata"] = dict(metadata)
        if backend is not None:
            body["backend"] = backend.to_json()
        info = WorkspaceInfo.from_json(self._t.request("POST", "/v1/workspaces", json_body=body, timeout=self._t.timeout + 60).json())
        return Workspace(self, info.name, info)

    def fork(self, source: str, name: str, **kwargs: Any) -> "Workspace":
        """Creates workspace ``name`` as a fork of workspace ``source``'s head (O(1): data is shared)."""
        return self.create_workspace(name, fork_of=source, **kwargs)

    def workspace(self, name: str) -> "Workspace":
        """The handle of workspace ``name`` (no request is made; use info() to check it exists)."""
        return Workspace(self, name, None)

    def get_workspace(self, name: str) -> WorkspaceInfo:
        """Describes workspace ``name``; NotFound if there is none."""
        return WorkspaceInfo.from_json(self._t.request("GET", "/v1/workspaces/" + quote_path(name)).json())

    def list_workspaces(self) -> List[WorkspaceInfo]:
        """Every workspace of the daemon (admin token)."""
        d = self._t.request("GET", "/v1/workspaces").json()
        return [WorkspaceInfo.from_json(w) for w in d.get("workspaces") or []]

    def delete_workspace(self, name: str, *, missing_ok: bool = False) -> None:
        """Deletes workspace ``name`` (its branch goes too); NotFound unless missing_ok."""
        try:
            self._t.request("DELETE", "/v1/workspaces/" + quote_path(name), timeout=self._t.timeout + 60)
        except NotFound:
            if not missing_ok:
                raise

    # -- tokens --

    def create_token(self, workspace: str, *, read_only: bool = False) -> TokenInfo:
        """Mints a token scoped to ``workspace`` (read-only tokens may only read); its secret is in ``.token``."""
        body: Dict[str, Any] = {"workspace": workspace}
        if read_only:
            body["read_only"] = True
        return TokenInfo.from_json(self._t.request("POST", "/v1/tokens", json_body=body).json())

    def list_tokens(self, workspace: Optional[str] = None) -> List[TokenInfo]:
        """The workspace tokens (of ``workspace`` only, if given), without their secrets."""
        d = self._t.request("GET", "/v1/tokens", query={"workspace": workspace}).json()
        return [TokenInfo.from_json(t) for t in d.get("tokens") or []]

    def revoke_token(self, token_id: str) -> None:
        """Revokes a workspace token by its id."""
        self._t.request("DELETE", "/v1/tokens/" + quote_path(token_id))


class ExecStream(Generic[AnyStr_]):
    """A running command's output as it happens: iterate it for OutputChunk's;
    once the iteration ends, ``result`` holds the ExecResult (its stdout, stderr
    and output are empty: they came as chunks). Use it as a context manager, or
    iterate to the end, to give the connection back."""

    def __init__(self, resp: StreamResponse, binary: bool, encoding: str) -> None:
        self._resp = resp
        self._binary = binary
        self._enc = encoding
        self._result: Optional[ExecResult[AnyStr_]] = None
        self._it: Iterator[OutputChunk[AnyStr_]] = self._events()

    def _events(self) -> Iterator[OutputChunk[AnyStr_]]:
        for line in self._resp.lines():
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise ProtocolError(f"exec stream: a line is not JSON: {line[:200]!r}") from e
            typ = ev.get("type")
            if typ in ("stdout", "stderr"):
                data = ev.get("data", "")
                chunk: OutputChunk[AnyStr_] = OutputChunk(typ, decode_output(data, self._enc, self._binary))
                yield chunk
            elif typ == "result":
                self._result = ExecResult.from_json(ev["result"], self._binary)
            elif typ == "error":
                err = ev.get("error") or {}
                raise error_from(str(err.get("code", "")), str(err.get("message", "")), str(err.get("path", "") or ""))
        if self._result is None:
            raise ProtocolError("exec stream ended without a result")

    def __iter__(self) -> Iterator[OutputChunk[AnyStr_]]:
        return self._it

    def __next__(self) -> OutputChunk[AnyStr_]:
        return next(self._it)

    @property
    def result(self) -> ExecResult[AnyStr_]:
        """The command's result; reading it drains the rest of the output first."""
        if self._result is None:
            for _ in self._it:
                pass
        assert self._result is not None
        return self._result

    def close(self) -> None:
        """Stops reading (the command keeps running to its end on the daemon) and frees the connection."""
        self._resp.close()

    def __enter__(self) -> "ExecStream[AnyStr_]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Job(Generic[AnyStr_]):
    """A background job of a workspace (see Workspace.start_job)."""

    def __init__(self, ws: "Workspace", job_id: str, binary: bool) -> None:
        self.workspace = ws
        self.id = job_id
        self._binary = binary

    def __repr__(self) -> str:
        return f"agentfs.Job({self.workspace.name!r}, {self.id!r})"

    def _path(self, suffix: str = "") -> str:
        return self.workspace._path("/jobs/" + quote_path(self.id) + suffix)

    def info(self) -> JobInfo[AnyStr_]:
        """The job: running, or its exit code and result."""
        r: JobInfo[AnyStr_] = JobInfo.from_json(self.workspace._t.request("GET", self._path()).json(), self._binary)
        return r

    def wait(self, timeout: Optional[float] = 30.0) -> JobInfo[AnyStr_]:
        """Waits for the job to end and returns it; raises agentfs.Timeout (a TimeoutError)
        if ``timeout`` seconds pass first (the job keeps running). None waits up to the daemon's
        maximum (24 h)."""
        secs = 24 * 3600.0 if timeout is None else timeout
        r = self.workspace._t.request("POST", self._path("/wait"), query={"timeout": secs}, idempotent=True,
                                      timeout=secs + _EXEC_MARGIN)
        out: JobInfo[AnyStr_] = JobInfo.from_json(r.json(), self._binary)
        return out

    def kill(self) -> JobInfo[AnyStr_]:
        """Kills the job's process tree and returns the ended job."""
        r = self.workspace._t.request("POST", self._path("/kill"), idempotent=True)
        out: JobInfo[AnyStr_] = JobInfo.from_json(r.json(), self._binary)
        return out

    def output(self, offset: int = 0) -> JobOutput[AnyStr_]:
        """The output so far (stdout and stderr interleaved) from byte ``offset``."""
        d = self.workspace._t.request("GET", self._path("/output"), query={"offset": offset}).json()
        return JobOutput(output=decode_output(d.get("output", ""), d.get("encoding", "utf-8"), self._binary),
                         offset=int(d.get("offset", 0)), next_offset=int(d.get("next_offset", 0)),
                         truncated=bool(d.get("truncated", False)), running=bool(d.get("running", False)))


class Workspace:
    """A workspace of the daemon: commands, jobs and files. Paths are relative to the
    workspace root; absolute paths and ".." that climb out raise PathEscape."""

    def __init__(self, client: Client, name: str, info: Optional[WorkspaceInfo] = None) -> None:
        self.client = client
        self.name = name
        self._info = info
        self._t = client.transport

    def __repr__(self) -> str:
        return f"agentfs.Workspace({self.name!r})"

    def _path(self, suffix: str) -> str:
        return "/v1/workspaces/" + quote_path(self.name) + suffix

    def _file(self, path: str) -> str:
        return self._path("/files/" + quote_path(path))

    def _fs(self, op: str) -> str:
        return self._path("/fs/" + op)

    # -- the workspace --

    def info(self) -> WorkspaceInfo:
        """Describes the workspace (status, head commit, bytes waiting, ...)."""
        self._info = self.client.get_workspace(self.name)
        return self._info

    def delete(self) -> None:
        """Deletes the workspace."""
        self.client.delete_workspace(self.name)

    def fork(self, name: str, *, snapshot: Optional[str] = None, **kwargs: Any) -> "Workspace":
        """Creates workspace ``name`` as a fork of this one's head, or of the volume's
        snapshot ``snapshot`` (O(1): the data is shared). Needs the admin token; other
        arguments as create_workspace."""
        if snapshot:
            return self.client.create_workspace(name, from_snapshot=snapshot, **kwargs)
        return self.client.fork(self.name, name, **kwargs)

    # -- history --

    def save_snapshot(self, name: str, message: str = "") -> Snapshot:
        """Saves the workspace's state now as snapshot ``name`` of the volume (every
        workspace can start from it: create_workspace(from_snapshot=name))."""
        body: Dict[str, Any] = {"name": name}
        if message:
            body["message"] = message
        return Snapshot.from_json(self._t.request("POST", self._path("/snapshots"), json_body=body,
                                                  timeout=self._t.timeout + 60).json())

    def list_snapshots(self, unique: bool = False) -> List[Snapshot]:
        """The volume's snapshots (``unique`` also computes what removing each would free)."""
        d = self._t.request("GET", self._path("/snapshots"), query={"unique": True} if unique else None,
                            timeout=self._t.timeout + 60).json()
        return [Snapshot.from_json(x) for x in d.get("snapshots") or []]

    def delete_snapshot(self, name: str) -> None:
        """Removes snapshot ``name``."""
        self._t.request("DELETE", self._path("/snapshots/" + quote_path(name)))

    def restore(self, snapshot: str, message: str = "") -> RestoreResult:
        """Makes the workspace's live state snapshot ``snapshot`` at once; the state
        before is kept as an automatic snapshot (``saved``)."""
        body: Dict[str, Any] = {"message": message} if message else {}
        d = self._t.request("POST", self._path("/snapshots/" + quote_path(snapshot) + "/restore"), json_body=body,
                            timeout=self._t.timeout + 60).json()
        return RestoreResult(commit=d.get("commit", ""), saved=d.get("saved", ""))

    def diff(self, from_: str, to: str = "live", *, path: str = "", patch: bool = False) -> DiffResult:
        """The changes from ``from_`` to ``to``: each a snapshot, a workspace (its head),
        BRANCH@SEQ or "live" (this workspace now); ``path`` restricts them to a
        directory; ``patch`` adds unified diffs of text files."""
        body: Dict[str, Any] = {"from": from_, "to": to}
        if path:
            body["path"] = path
        if patch:
            body["patch"] = True
        return DiffResult.from_json(self._t.request("POST", self._path("/diff"), json_body=body, idempotent=True,
                                                    timeout=self._t.timeout + 60).json())

    def branches(self) -> List[Branch]:
        """The branches of the daemon's volume (one a workspace)."""
        d = self._t.request("GET", self._path("/branches")).json()
        return [Branch(name=b["name"], head=b.get("head", ""), writer=bool(b.get("writer", False)))
                for b in d.get("branches") or []]

    # -- virtual workspaces --

    def virtual_diff(self, paths: Optional[Sequence[str]] = None, *, stat: bool = False,
                     patch: bool = False) -> VirtualDiffResult:
        """A virtual workspace's changes over its base (``paths`` limits them; ``stat``
        adds line counts, ``patch`` unified diffs)."""
        body: Dict[str, Any] = {}
        if paths:
            body["paths"] = list(paths)
        if stat:
            body["stat"] = True
        if patch:
            body["patch"] = True
        d = self._t.request("POST", self._path("/virtual/diff"), json_body=body, idempotent=True,
                            timeout=self._t.timeout + 60).json()
        return VirtualDiffResult(base=d.get("base", ""), changes=VirtualChange.list(d.get("changes")))

    def virtual_commit(self, paths: Optional[Sequence[str]] = None, *, message: str = "", snapshot: str = "",
                       force: bool = False) -> VirtualCommitResult:
        """Writes a virtual workspace's changes (all, or ``paths``) to its base; Conflict
        where the base changed the same paths, unless ``force``."""
        body: Dict[str, Any] = {}
        if paths:
            body["paths"] = list(paths)
        if message:
            body["message"] = message
        if snapshot:
            body["snapshot"] = snapshot
        if force:
            body["force"] = True
        d = self._t.request("POST", self._path("/virtual/commit"), json_body=body, timeout=self._t.timeout + 60).json()
        return VirtualCommitResult(commit=d.get("commit", ""), changes=VirtualChange.list(d.get("changes")),
                                   pending=int(d.get("pending", 0)))

    def virtual_discard(self, paths: Optional[Sequence[str]] = None) -> VirtualDiscardResult:
        """Drops a virtual workspace's changes (all, or ``paths``)."""
        body: Dict[str, Any] = {"paths": list(paths)} if paths else {}
        d = self._t.request("POST", self._path("/virtual/discard"), json_body=body, idempotent=True,
                            timeout=self._t.timeout + 60).json()
        return VirtualDiscardResult(discarded=VirtualChange.list(d.get("discarded")), pending=int(d.get("pending", 0)))

    # -- the change feed --

    def changes(self, path: Optional[str] = None, since: Optional[str] = None, *,
                max_retries: Optional[int] = None) -> ChangeFeed:
        """Subscribes to the workspace's changes and returns the feed: an iterator of
        ChangeEvent's, in order, as they happen (``with ws.changes() as feed: for ev in
        feed: ...``). The subscription is open when this returns; it mounts the workspace
        and keeps it mounted while open. ``path`` keeps the events at or below that
        directory or file (and the creations and deletions of its ancestors); ``since`` resumes after the event with that id (a "reset"
        event comes first if the daemon no longer knows it). A dropped connection is
        opened again from the last event's id, up to ``max_retries`` failed attempts in
        a row (default: the client's ``retries``). The iteration ends when the daemon
        ends the feed (workspace deleted or expired, daemon shutdown: see the feed's
        ``end_reason``) or on close(). NotFound if there is no such workspace."""
        return ChangeFeed(self._t, self._path("/changes"), path=path, since=since,
                          max_retries=self._t.retries if max_retries is None else max_retries)

    # -- commands --

    @overload
    def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
             stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
             output_limit: Optional[int] = ..., binary: Literal[False] = ...) -> ExecResult[str]: ...

    @overload
    def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
             stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
             output_limit: Optional[int] = ..., binary: Literal[True]) -> ExecResult[bytes]: ...

    @overload
    def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
             stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
             output_limit: Optional[int] = ..., binary: bool = ...) -> ExecResult[Any]: ...

    def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             stdin: Optional[Union[str, bytes]] = None, timeout: Optional[float] = None,
             output_limit: Optional[int] = None, binary: bool = False) -> ExecResult[Any]:
        """Runs ``command`` (a shell line, or an argv list run without a shell) in the
        workspace and returns its result once its process tree is gone and its writes
        are synced. ``env`` is added to the environment; ``cwd`` is relative to the
        root; ``timeout`` defaults to 120 s (then the tree is killed: timed_out, exit
        137); ``output_limit`` caps the bytes kept (default 1 MiB). With ``binary`` the
        output comes back as bytes, byte for byte (base64 on the wire).
        """
        body = _exec_body(command, env, cwd, stdin, timeout, output_limit, binary)
        r = self._t.request("POST", self._path("/exec"), json_body=body, timeout=_http_timeout(timeout))
        return ExecResult.from_json(r.json(), binary)

    @overload
    def exec_stream(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                    stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                    output_limit: Optional[int] = ..., binary: Literal[False] = ...) -> ExecStream[str]: ...

    @overload
    def exec_stream(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                    stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                    output_limit: Optional[int] = ..., binary: Literal[True]) -> ExecStream[bytes]: ...

    @overload
    def exec_stream(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                    stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                    output_limit: Optional[int] = ..., binary: bool = ...) -> ExecStream[Any]: ...

    def exec_stream(self, command: Command, *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    stdin: Optional[Union[str, bytes]] = None, timeout: Optional[float] = None,
                    output_limit: Optional[int] = None, binary: bool = False) -> ExecStream[Any]:
        """Runs ``command`` like exec, yielding its output as it happens (NDJSON on the wire);
        the result is the stream's ``result`` once iterated."""
        body = _exec_body(command, env, cwd, stdin, timeout, output_limit, binary)
        resp = self._t.stream("POST", self._path("/exec/stream"), json_body=body, timeout=_http_timeout(timeout))
        return ExecStream(resp, binary, body.get("encoding", "utf-8"))

    @overload
    def start_job(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                  stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                  output_limit: Optional[int] = ..., binary: Literal[False] = ...) -> Job[str]: ...

    @overload
    def start_job(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                  stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                  output_limit: Optional[int] = ..., binary: Literal[True]) -> Job[bytes]: ...

    @overload
    def start_job(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                  stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                  output_limit: Optional[int] = ..., binary: bool = ...) -> Job[Any]: ...

    def start_job(self, command: Command, *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                  stdin: Optional[Union[str, bytes]] = None, timeout: Optional[float] = None,
                  output_limit: Optional[int] = None, binary: bool = False) -> Job[Any]:
        """Starts ``command`` in the background and returns its Job at once. Without
        ``timeout`` it runs until it ends or is killed."""
        body = _exec_body(command, env, cwd, stdin, timeout, output_limit, binary)
        d = self._t.request("POST", self._path("/jobs"), json_body=body).json()
        return Job(self, d["id"], binary)

    def job(self, job_id: str, *, binary: bool = False) -> Job[Any]:
        """The handle of job ``job_id`` (no request is made)."""
        return Job(self, job_id, binary)

    def list_jobs(self) -> List[JobInfo[str]]:
        """The workspace's jobs, running and ended."""
        d = self._t.request("GET", self._path("/jobs")).json()
        return [JobInfo.from_json(j, False) for j in d.get("jobs") or []]

    # -- files --

    def read_bytes(self, path: str) -> bytes:
        """The file's content; NotFound, IsADirectory, PathEscape."""
        return self._t.request("GET", self._file(path)).body

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        """The file's content decoded as text."""
        return self.read_bytes(path).decode(encoding, errors)

    def read_numbered(self, path: str, offset: int = 0, limit: int = 2000) -> NumberedRead:
        """``limit`` lines after skipping ``offset``, numbered in ``cat -n`` style, and the total line count."""
        d = self._t.request("GET", self._file(path), query={"numbered": True, "offset": offset, "limit": limit}).json()
        return NumberedRead(path=d.get("path", path), content=d.get("content", ""), offset=int(d.get("offset", 0)),
                            lines=int(d.get("lines", 0)), total_lines=int(d.get("total_lines", 0)))

    def write(self, path: str, data: Union[str, bytes, bytearray, memoryview]) -> WriteResult:
        """Writes the file (str as UTF-8), creating missing parent directories."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        d = self._t.request("PUT", self._file(path), body=raw, timeout=self._t.timeout + len(raw) / (1 << 20)).json()
        return WriteResult(path=d.get("path", path), size=int(d.get("size", 0)))

    write_bytes = write
    write_text = write

    def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        """Replaces ``old`` by ``new`` and returns the occurrences replaced. ``old`` must occur
        exactly once unless replace_all (missing: NotFound; several: NotUnique)."""
        body: Dict[str, Any] = {"path": path, "old": old, "new": new}
        if replace_all:
            body["replace_all"] = True
        return int(self._t.request("POST", self._fs("edit"), json_body=body).json()["occurrences"])

    def list_dir(self, path: str = "", recursive: bool = False, max_entries: Optional[int] = None) -> List[FileInfo]:
        """The entries of directory ``path`` ("" the root), sorted by path; recursive lists
        every entry below (a directory's entries after it)."""
        q: Dict[str, Any] = {"path": path}
        if recursive:
            q["recursive"] = True
        if max_entries is not None:
            q["max_entries"] = max_entries
        d = self._t.request("GET", self._fs("list"), query=q).json()
        return [FileInfo.from_json(e) for e in d.get("entries") or []]

    def glob(self, pattern: str, path: str = "") -> List[str]:
        """Paths (relative to the root, sorted) under ``path`` that match ``pattern`` ("**" matches any directories)."""
        body: Dict[str, Any] = {"pattern": pattern}
        if path:
            body["path"] = path
        return list(self._t.request("POST", self._fs("glob"), json_body=body, idempotent=True).json().get("paths") or [])

    def grep(self, pattern: str, path: str = "", *, glob: str = "", literal: bool = False, ignore_case: bool = False,
             max_results: int = 0) -> GrepResult:
        """Lines matching ``pattern`` (RE2, or a plain string with literal) in files under
        ``path`` whose name matches ``glob``; ``max_results`` 0 means the daemon's 1000, negative no cap."""
        body: Dict[str, Any] = {"pattern": pattern}
        for k, v in (("path", path), ("glob", glob), ("literal", literal), ("ignore_case", ignore_case),
                     ("max_results", max_results)):
            if v:
                body[k] = v
        d = self._t.request("POST", self._fs("grep"), json_body=body, idempotent=True).json()
        return GrepResult(matches=[GrepMatch(path=m["path"], line=int(m["line"]), text=m.get("text", ""))
                                   for m in d.get("matches") or []], truncated=bool(d.get("truncated", False)))

    def stat(self, path: str) -> FileInfo:
        """Describes ``path`` (a final symlink is not followed); NotFound if missing."""
        return FileInfo.from_json(self._t.request("GET", self._fs("stat"), query={"path": path}).json())

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        return bool(self._t.request("GET", self._fs("exists"), query={"path": path}).json().get("exists"))

    def mkdir(self, path: str, parents: bool = False) -> None:
        """Creates directory ``path`` (and missing parents with ``parents``, where an existing directory is fine)."""
        body: Dict[str, Any] = {"path": path}
        if parents:
            body["parents"] = True
        self._t.request("POST", self._fs("mkdir"), json_body=body, idempotent=parents)

    def remove(self, path: str, recursive: bool = False) -> None:
        """Removes a file, or a directory (a non-empty one only with ``recursive``, else NotEmpty)."""
        self._t.request("DELETE", self._file(path), query={"recursive": True} if recursive else None)

    def rename(self, src: str, dst: str) -> None:
        """Renames (moves) ``src`` to ``dst``."""
        self._t.request("POST", self._fs("rename"), json_body={"from": src, "to": dst})

    def copy(self, src: str, dst: str) -> None:
        """Copies the regular file ``src`` to ``dst``."""
        self._t.request("POST", self._fs("copy"), json_body={"from": src, "to": dst}, idempotent=True)

    def download_tar(self, path: str = "") -> bytes:
        """Directory ``path`` ("" the root) as an uncompressed tar archive."""
        return self._t.request("GET", self._path("/tar/" + quote_path(path)), timeout=24 * 3600.0).body

    def upload_tar(self, data: Union[bytes, bytearray, memoryview], path: str = "") -> Optional[Changes]:
        """Extracts the tar archive ``data`` into directory ``path`` (created with its
        parents) and returns what it created and modified."""
        d = self._t.request("PUT", self._path("/tar/" + quote_path(path)), body=data,
                            headers={"Content-Type": "application/x-tar"}, timeout=24 * 3600.0).json()
        return Changes.from_json(d)

