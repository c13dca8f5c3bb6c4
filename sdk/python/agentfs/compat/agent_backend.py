"""agent-backend's (async) backend interface on agentfs.

``AgentFSBackend`` is shaped like agent-backend's RemoteFilesystemBackend, its
storage an agentfs workspace: every method is a coroutine, ``scope(path,
ScopeConfig(env=..., operations_logger=...))`` gives a backend rooted in a
subdirectory with its own environment and logging, ``exec(..., ExecOptions(
encoding="buffer"))`` and ``read(..., ReadOptions(encoding="buffer"))`` give
bytes, errors are BackendError (``code``), PathEscapeError and
DangerousOperationError (the daemon's command policy refused the command).

    backend = AgentFSBackend(AgentFSBackendConfig(workspace="org1"))
    user = backend.scope("users/user1", ScopeConfig(operations_logger=ConsoleOperationsLogger()))
    await user.write("script.py", code)
    print(await user.exec("python3 script.py"))
    tarball = await user.exec("tar -czf - .", ExecOptions(encoding="buffer"))

Like agent-backend, exec returns the command's stdout and raises BackendError
(code "EXEC_FAILED", with exit_code, stdout and stderr) when it exits non-zero.
Paths are relative to the scope: absolute ones and ".." that climbs out of it
raise PathEscapeError.
The seed does not spell out the operations logger's interface: here it is an
object with ``log(entry: OperationLog)``.
"""

from __future__ import annotations

import inspect
import posixpath
import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Awaitable, Callable, Dict, List, Literal, Optional, Protocol, TypeVar, Union, runtime_checkable

from ..aio import AsyncClient, AsyncWorkspace
from ..client import Client
from ..errors import AgentFSError, NotFound
from ._paths import relative

T = TypeVar("T")

Encoding = Literal["utf8", "buffer"]


class BackendType(Enum):
    LOCAL_FILESYSTEM = "local-filesystem"
    REMOTE_FILESYSTEM = "remote-filesystem"
    MEMORY = "memory"


class BackendError(Exception):
    """A backend operation failed; ``code`` says how (the agentfs API's error code, or
    EXEC_FAILED for a command that exited non-zero)."""

    def __init__(self, message: str, code: str = "BACKEND_ERROR", operation: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.operation = operation


class PathEscapeError(BackendError):
    """A path tried to escape the backend's scope."""


class DangerousOperationError(BackendError):
    """A command was blocked by safety validation (the daemon's command policy)."""


class NotImplementedBackendError(BackendError):
    """The backend does not support the operation."""


class ExecError(BackendError):
    """A command exited non-zero (code EXEC_FAILED): its exit code and output."""

    def __init__(self, message: str, exit_code: int, stdout: Union[str, bytes], stderr: Union[str, bytes],
                 operation: Optional[str] = None) -> None:
        super().__init__(message, "EXEC_FAILED", operation)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


@dataclass
class OperationLog:
    """One logged operation: its name, target (path or command), duration and outcome."""

    operation: str
    target: str
    duration_ms: float
    success: bool
    error: Optional[str] = None
    timestamp: datetime = field(default_factory=datetime.now)


@runtime_checkable
class OperationsLogger(Protocol):
    """Receives every operation of a scoped backend."""

    def log(self, entry: OperationLog) -> None: ...


class ConsoleOperationsLogger:
    """Prints each operation as "[AgentBackend] exec: COMMAND"."""

    def log(self, entry: OperationLog) -> None:
        suffix = "" if entry.success else f" (failed: {entry.error})"
        print(f"[AgentBackend] {entry.operation}: {entry.target}{suffix}")


@dataclass
class ScopeConfig:
    """A scope's environment (added to every command's) and operations logger."""

    env: Optional[Dict[str, str]] = None
    operations_logger: Optional[OperationsLogger] = None


@dataclass
class ExecOptions:
    """exec's options: "buffer" encoding returns bytes; env and cwd add to the scope's."""

    encoding: Encoding = "utf8"
    env: Optional[Dict[str, str]] = None
    cwd: Optional[str] = None
    timeout_ms: Optional[int] = None


@dataclass
class ReadOptions:
    """read's options: "buffer" encoding returns bytes."""

    encoding: Encoding = "utf8"


@dataclass
class RmOptions:
    recursive: bool = False
    force: bool = False


@dataclass
class MkdirOptions:
    recursive: bool = True


@dataclass
class Stats:
    """What stat tells of a path."""

    size: int
    mode: int
    mtime: datetime
    is_file: bool
    is_directory: bool
    is_symlink: bool


@dataclass
class AgentFSBackendConfig:
    """The backend's workspace (created if missing) on the daemon at ``host`` (default
    $AGENTFS_URL) with ``auth_token`` (default $AGENTFS_TOKEN). ``root_dir`` is a
    directory inside the workspace that is the backend's root ("" the workspace root).
    ``operation_timeout_ms`` bounds a command; ``max_output_length`` caps the bytes of
    output kept."""

    workspace: str
    host: Optional[str] = None
    auth_token: Optional[str] = None
    root_dir: str = ""
    operation_timeout_ms: int = 120_000
    max_output_length: int = 10 * 1024 * 1024
    env: Optional[Dict[str, str]] = None


def _convert(e: AgentFSError, operation: str) -> BackendError:
    if e.code == "path_escape":
        return PathEscapeError(str(e), e.code, operation)
    if e.code == "policy_refused":
        return DangerousOperationError(str(e), e.code, operation)
    return BackendError(str(e), e.code, operation)


class AgentFSBackend:
    """agent-backend's async backend on an agentfs workspace (see the module's doc)."""

    type = BackendType.REMOTE_FILESYSTEM

    def __init__(self, config: AgentFSBackendConfig, *, client: Optional[AsyncClient] = None,
                 _parent: Optional["AgentFSBackend"] = None, _root: str = "",
                 _scope: Optional[ScopeConfig] = None) -> None:
        self.config = config
        self._parent = _parent
        self._ws: Optional[AsyncWorkspace] = None
        self._client: AsyncClient = (_parent._client if _parent is not None
                                     else client or AsyncClient(config.host, config.auth_token))
        self.root_dir = _root if _parent is not None else relative(config.root_dir)
        self._scope = _scope or ScopeConfig()
        self._closeables: List[Any] = []
        self._root_ready = self.root_dir == ""
        self._destroyed = False

    async def _workspace(self) -> AsyncWorkspace:
        if self._parent is not None:
            return await self._parent._workspace()
        if self._ws is None:
            ws = self._client.workspace(self.config.workspace)
            try:
                await ws.info()
            except NotFound:
                ws = await self._client.create_workspace(self.config.workspace)
            self._ws = ws
        return self._ws

    def _path(self, path: str, op: str) -> str:
        if path.startswith("/"):
            raise PathEscapeError(f"{op} {path!r}: absolute path; paths are relative to the backend's scope",
                                  "path_escape", op)
        try:
            rel = relative(path)
        except AgentFSError as e:
            raise _convert(e, op) from e
        return posixpath.join(self.root_dir, rel) if self.root_dir else rel

    def _env(self, extra: Optional[Dict[str, str]]) -> Dict[str, str]:
        env: Dict[str, str] = {}
        chain: List[AgentFSBackend] = []
        b: Optional[AgentFSBackend] = self
        while b is not None:
            chain.append(b)
            b = b._parent
        env.update(self.config.env or {})
        for b in reversed(chain):
            env.update(b._scope.env or {})
        env.update(extra or {})
        return env

    async def _run(self, op: str, target: str, fn: Callable[[AsyncWorkspace], Awaitable[T]]) -> T:
        if self._destroyed:
            raise BackendError(f"{op} {target}: the backend was destroyed", "DESTROYED", op)
        logger = self._scope.operations_logger
        t0 = time.monotonic()
        err: Optional[str] = None
        try:
            ws = await self._workspace()
            return await fn(ws)
        except AgentFSError as e:
            err = str(e)
            raise _convert(e, op) from e
        except BackendError as e:
            err = str(e)
            raise
        finally:
            if logger is not None:
                logger.log(OperationLog(operation=op, target=target, duration_ms=(time.monotonic() - t0) * 1000,
                                        success=err is None, error=err))

    async def _ensure_root(self, ws: AsyncWorkspace) -> None:
        if not self._root_ready:
            await ws.mkdir(self.root_dir, parents=True)
            self._root_ready = True

    # -- commands --

    async def exec(self, command: str, options: Optional[ExecOptions] = None) -> Union[str, bytes]:
        """Runs the shell line ``command`` in the backend's root; its stdout (bytes with
        encoding "buffer"). ExecError (BackendError, code EXEC_FAILED) if it exits non-zero."""
        opts = options or ExecOptions()
        binary = opts.encoding == "buffer"
        cwd = self._path(opts.cwd, "exec") if opts.cwd else self.root_dir

        async def run(ws: AsyncWorkspace) -> Union[str, bytes]:
            await self._ensure_root(ws)
            timeout = (opts.timeout_ms or self.config.operation_timeout_ms) / 1000
            r = await ws.exec(command, env=self._env(opts.env), cwd=cwd or None, timeout=timeout,
                                   output_limit=self.config.max_output_length, binary=binary)
            if r.timed_out:
                raise BackendError(f"exec {command!r}: timed out after {timeout} s", "EXEC_TIMEOUT", "exec")
            if r.exit_code != 0:
                raise ExecError(f"exec {command!r} exited {r.exit_code}: {r.stderr!r}", r.exit_code, r.stdout,
                                r.stderr, "exec")
            out: Union[str, bytes] = r.stdout
            return out

        return await self._run("exec", command, run)

    # -- files --

    async def read(self, path: str, options: Optional[ReadOptions] = None) -> Union[str, bytes]:
        p = self._path(path, "read")
        binary = (options or ReadOptions()).encoding == "buffer"

        async def run(ws: AsyncWorkspace) -> Union[str, bytes]:
            data = await ws.read_bytes(p)
            return data if binary else data.decode("utf-8")

        return await self._run("read", path, run)

    async def write(self, path: str, content: Union[str, bytes]) -> None:
        p = self._path(path, "write")

        async def run(ws: AsyncWorkspace) -> None:
            await ws.write(p, content)

        await self._run("write", path, run)

    async def rename(self, old_path: str, new_path: str) -> None:
        a, b = self._path(old_path, "rename"), self._path(new_path, "rename")

        async def run(ws: AsyncWorkspace) -> None:
            await ws.rename(a, b)

        await self._run("rename", f"{old_path} -> {new_path}", run)

    async def rm(self, path: str, options: Optional[RmOptions] = None) -> None:
        opts = options or RmOptions()
        p = self._path(path, "rm")

        async def run(ws: AsyncWorkspace) -> None:
            try:
                await ws.remove(p, recursive=opts.recursive)
            except NotFound:
                if not opts.force:
                    raise

        await self._run("rm", path, run)

    async def readdir(self, path: str = ".") -> List[str]:
        """The names in directory ``path``."""
        p = self._path(path, "readdir")

        async def run(ws: AsyncWorkspace) -> List[str]:
            return [e.name for e in await ws.list_dir(p)]

        return await self._run("readdir", path, run)

    async def mkdir(self, path: str, options: Optional[MkdirOptions] = None) -> None:
        p = self._path(path, "mkdir")
        recursive = (options or MkdirOptions()).recursive

        async def run(ws: AsyncWorkspace) -> None:
            await ws.mkdir(p, parents=recursive)

        await self._run("mkdir", path, run)

    async def touch(self, path: str) -> None:
        """Creates an empty file if ``path`` does not exist (else leaves its content)."""
        p = self._path(path, "touch")

        async def run(ws: AsyncWorkspace) -> None:
            if not await ws.exists(p):
                await ws.write(p, b"")

        await self._run("touch", path, run)

    async def exists(self, path: str) -> bool:
        p = self._path(path, "exists")

        async def run(ws: AsyncWorkspace) -> bool:
            return await ws.exists(p)

        return await self._run("exists", path, run)

    async def stat(self, path: str) -> Stats:
        p = self._path(path, "stat")

        async def run(ws: AsyncWorkspace) -> Stats:
            st = await ws.stat(p)
            return Stats(size=st.size, mode=st.mode, mtime=st.mod_time, is_file=st.type == "file",
                         is_directory=st.type == "dir", is_symlink=st.type == "symlink")

        return await self._run("stat", path, run)

    # -- scopes and lifetime --

    def scope(self, path: str, config: Optional[ScopeConfig] = None, *, env: Optional[Dict[str, str]] = None,
              operations_logger: Optional[OperationsLogger] = None) -> "AgentFSBackend":
        """A backend rooted at ``path`` under this one's root, with the scope's env added to
        every command's and its operations logger (or this one's)."""
        cfg = config or ScopeConfig()
        merged = ScopeConfig(env=dict(cfg.env or {}, **(env or {})) or None,
                             operations_logger=operations_logger or cfg.operations_logger
                             or self._scope.operations_logger)
        return AgentFSBackend(self.config, _parent=self, _root=self._path(path, "scope"), _scope=merged)

    def track_closeable(self, closeable: Any) -> None:
        """Closes ``closeable`` (close() or aclose()) when the backend is destroyed;
        scoped backends hand it to their parent."""
        if self._parent is not None:
            self._parent.track_closeable(closeable)
        else:
            self._closeables.append(closeable)

    async def destroy(self) -> None:
        """Closes what was tracked and the connections (the workspace's data stays)."""
        if self._parent is not None:
            self._destroyed = True
            return
        for c in reversed(self._closeables):
            for name in ("aclose", "close"):
                fn = getattr(c, name, None)
                if fn is not None:
                    res = fn()
                    if inspect.isawaitable(res):
                        await res
                    break
        self._closeables.clear()
        self._destroyed = True
        await self._client.aclose()


def from_client(client: Client, workspace: str, **config: Any) -> AgentFSBackend:
    """An AgentFSBackend on ``workspace`` sharing the synchronous ``client``'s connections."""
    return AgentFSBackend(AgentFSBackendConfig(workspace=workspace, **config), client=AsyncClient(client=client))


