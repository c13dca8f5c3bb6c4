"""The asyncio client: the same surface as agentfs.Client, with coroutines.

It is thread-backed: each call runs the synchronous client's request on a
thread pool of its own (``max_workers``, default 32) and awaits it. The
standard library has no asyncio HTTP client, and a hand-written HTTP/1.1 over
asyncio streams (chunked answers, TLS, keep-alive, retries) would be a second
implementation of the transport to keep in step with the first; the calls wait
on the network and the daemon, not on Python, so a thread each costs little,
and both clients share one connection pool and one set of semantics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any, AsyncIterator, Callable, Generic, List, Literal, Mapping, Optional, Sequence, TypeVar, Union, overload

from .client import Client, Command, ExecStream, Job, Workspace
from .feed import ChangeFeed
from .types import (
    AnyStr_, Branch, ChangeEvent, Changes, DiffResult, RestoreResult, Snapshot, VirtualCommitResult, VirtualDiffResult,
    VirtualDiscardResult, ExecResult, FileInfo, GrepResult, Health, JobInfo, JobOutput, NumberedRead, OutputChunk, TokenInfo,
    WorkspaceInfo, WriteResult,
)

R = TypeVar("R")


class _Runner:
    def __init__(self, max_workers: int) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agentfs")

    async def run(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


class AsyncClient:
    """asyncio twin of agentfs.Client (same arguments, plus ``max_workers``; or wrap an
    existing ``client``, sharing its connections); use it with ``async with`` or await aclose()."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = 60.0,
                 pool_size: int = 8, retries: int = 2, max_workers: int = 32, client: Optional[Client] = None) -> None:
        self._owned = client is None
        self.sync = client or Client(url, token, timeout=timeout, pool_size=pool_size, retries=retries)
        self._r = _Runner(max_workers)

    async def aclose(self) -> None:
        """Closes the thread pool, and the connections unless the Client was given (its owner closes it)."""
        if self._owned:
            self.sync.close()
        self._r.pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def health(self) -> Health:
        return await self._r.run(self.sync.health)

    async def create_workspace(self, name: str, **kwargs: Any) -> "AsyncWorkspace":
        """See Client.create_workspace."""
        ws = await self._r.run(self.sync.create_workspace, name, **kwargs)
        return AsyncWorkspace(self, ws)

    async def fork(self, source: str, name: str, **kwargs: Any) -> "AsyncWorkspace":
        ws = await self._r.run(self.sync.fork, source, name, **kwargs)
        return AsyncWorkspace(self, ws)

    def workspace(self, name: str) -> "AsyncWorkspace":
        return AsyncWorkspace(self, self.sync.workspace(name))

    async def get_workspace(self, name: str) -> WorkspaceInfo:
        return await self._r.run(self.sync.get_workspace, name)

    async def list_workspaces(self) -> List[WorkspaceInfo]:
        return await self._r.run(self.sync.list_workspaces)

    async def delete_workspace(self, name: str, *, missing_ok: bool = False) -> None:
        await self._r.run(self.sync.delete_workspace, name, missing_ok=missing_ok)

    async def create_token(self, workspace: str, *, read_only: bool = False) -> TokenInfo:
        return await self._r.run(self.sync.create_token, workspace, read_only=read_only)

    async def list_tokens(self, workspace: Optional[str] = None) -> List[TokenInfo]:
        return await self._r.run(self.sync.list_tokens, workspace)

    async def revoke_token(self, token_id: str) -> None:
        await self._r.run(self.sync.revoke_token, token_id)


class AsyncExecStream(Generic[AnyStr_]):
    """asyncio twin of ExecStream: ``async for chunk in stream``, then ``await stream.result()``."""

    def __init__(self, r: _Runner, s: ExecStream[AnyStr_]) -> None:
        self._r = r
        self.sync: ExecStream[AnyStr_] = s

    def __aiter__(self) -> AsyncIterator[OutputChunk[AnyStr_]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[OutputChunk[AnyStr_]]:
        it = iter(self.sync)
        end = object()
        while True:
            c = await self._r.run(next, it, end)
            if c is end:
                return
            assert isinstance(c, OutputChunk)
            yield c

    async def result(self) -> ExecResult[AnyStr_]:
        """The result, once the output is drained."""

        def get() -> ExecResult[AnyStr_]:
            return self.sync.result

        return await self._r.run(get)

    async def aclose(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncExecStream[AnyStr_]":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncChangeFeed(AsyncIterator[ChangeEvent]):
    """asyncio twin of ChangeFeed: ``async for ev in ws.changes()``, or ``async with
    ws.changes() as feed: async for ev in feed`` (entering subscribes: changes made
    after it are delivered; without it, the subscription opens at the first
    ``__anext__``). Thread-backed like the rest of AsyncClient: the synchronous feed
    reads on a pool thread. Canceling the task that awaits an event, aclose() and
    leaving the ``async with`` close the connection (waking that thread)."""

    def __init__(self, r: _Runner, open_feed: Callable[[], ChangeFeed]) -> None:
        self._r = r
        self._open = open_feed
        self._feed: Optional[ChangeFeed] = None
        self._starting: Optional["asyncio.Future[ChangeFeed]"] = None
        self._closed = False

    @property
    def sync(self) -> Optional[ChangeFeed]:
        """The synchronous feed, once subscribed."""
        return self._feed

    @property
    def last_id(self) -> str:
        """See ChangeFeed.last_id ("" before the subscription)."""
        return self._feed.last_id if self._feed is not None else ""

    @property
    def end_reason(self) -> Optional[str]:
        """See ChangeFeed.end_reason."""
        return self._feed.end_reason if self._feed is not None else None

    async def _start(self) -> Optional[ChangeFeed]:
        if self._feed is None and not self._closed:
            if self._starting is None:
                self._starting = asyncio.ensure_future(self._r.run(self._open))
            fut = self._starting
            try:
                feed = await asyncio.shield(fut)
            except asyncio.CancelledError:
                # The connection still arrives on its thread: close it then.
                self._closed = True
                fut.add_done_callback(_close_feed)
                raise
            if self._closed:
                feed.close()
                return None
            self._feed = feed
        return self._feed

    def __aiter__(self) -> "AsyncChangeFeed":
        return self

    async def __anext__(self) -> ChangeEvent:
        feed = await self._start()
        if feed is None:
            raise StopAsyncIteration
        try:
            ev = await self._r.run(_next_event, feed)
        except asyncio.CancelledError:
            feed.close()
            raise
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def aclose(self) -> None:
        """Ends the feed and closes its connection; a pending ``__anext__`` then stops the iteration."""
        self._closed = True
        if self._feed is not None:
            self._feed.close()

    async def __aenter__(self) -> "AsyncChangeFeed":
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _next_event(feed: ChangeFeed) -> Optional[ChangeEvent]:
    return next(feed, None)


def _close_feed(fut: "asyncio.Future[ChangeFeed]") -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().close()


class AsyncJob(Generic[AnyStr_]):
    """asyncio twin of Job."""

    def __init__(self, r: _Runner, job: Job[AnyStr_]) -> None:
        self._r = r
        self.sync: Job[AnyStr_] = job
        self.id = job.id

    async def info(self) -> JobInfo[AnyStr_]:
        return await self._r.run(self.sync.info)

    async def wait(self, timeout: Optional[float] = 30.0) -> JobInfo[AnyStr_]:
        return await self._r.run(self.sync.wait, timeout)

    async def kill(self) -> JobInfo[AnyStr_]:
        return await self._r.run(self.sync.kill)

    async def output(self, offset: int = 0) -> JobOutput[AnyStr_]:
        return await self._r.run(self.sync.output, offset)


class AsyncWorkspace:
    """asyncio twin of Workspace (same methods, same arguments)."""

    def __init__(self, client: AsyncClient, ws: Workspace) -> None:
        self.client = client
        self.sync = ws
        self.name = ws.name
        self._r = client._r

    def __repr__(self) -> str:
        return f"agentfs.AsyncWorkspace({self.name!r})"

    async def info(self) -> WorkspaceInfo:
        return await self._r.run(self.sync.info)

    async def delete(self) -> None:
        await self._r.run(self.sync.delete)

    async def fork(self, name: str, *, snapshot: Optional[str] = None, **kwargs: Any) -> "AsyncWorkspace":
        return AsyncWorkspace(self.client, await self._r.run(self.sync.fork, name, snapshot=snapshot, **kwargs))

    async def save_snapshot(self, name: str, message: str = "") -> Snapshot:
        return await self._r.run(self.sync.save_snapshot, name, message)

    async def list_snapshots(self, unique: bool = False) -> List[Snapshot]:
        return await self._r.run(self.sync.list_snapshots, unique)

    async def delete_snapshot(self, name: str) -> None:
        await self._r.run(self.sync.delete_snapshot, name)

    async def restore(self, snapshot: str, message: str = "") -> RestoreResult:
        return await self._r.run(self.sync.restore, snapshot, message)

    async def diff(self, from_: str, to: str = "live", *, path: str = "", patch: bool = False) -> DiffResult:
        return await self._r.run(self.sync.diff, from_, to, path=path, patch=patch)

    async def branches(self) -> List[Branch]:
        return await self._r.run(self.sync.branches)

    async def virtual_diff(self, paths: Optional[Sequence[str]] = None, *, stat: bool = False,
                           patch: bool = False) -> VirtualDiffResult:
        return await self._r.run(self.sync.virtual_diff, paths, stat=stat, patch=patch)

    async def virtual_commit(self, paths: Optional[Sequence[str]] = None, *, message: str = "",
                             snapshot: str = "", force: bool = False) -> VirtualCommitResult:
        return await self._r.run(self.sync.virtual_commit, paths, message=message, snapshot=snapshot, force=force)

    async def virtual_discard(self, paths: Optional[Sequence[str]] = None) -> VirtualDiscardResult:
        return await self._r.run(self.sync.virtual_discard, paths)

    async def download_tar(self, path: str = "") -> bytes:
        return await self._r.run(self.sync.download_tar, path)

    async def upload_tar(self, data: Union[bytes, bytearray, memoryview], path: str = "") -> Optional[Changes]:
        return await self._r.run(self.sync.upload_tar, data, path)

    def changes(self, path: Optional[str] = None, since: Optional[str] = None, *,
                max_retries: Optional[int] = None) -> AsyncChangeFeed:
        """See Workspace.changes; the subscription opens on ``async with`` or at the first event awaited."""
        return AsyncChangeFeed(self._r, functools.partial(self.sync.changes, path, since, max_retries=max_retries))

    @overload
    async def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                   stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                   output_limit: Optional[int] = ..., binary: Literal[False] = ...) -> ExecResult[str]: ...

    @overload
    async def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                   stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                   output_limit: Optional[int] = ..., binary: Literal[True]) -> ExecResult[bytes]: ...

    @overload
    async def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = ..., cwd: Optional[str] = ...,
                   stdin: Optional[Union[str, bytes]] = ..., timeout: Optional[float] = ...,
                   output_limit: Optional[int] = ..., binary: bool = ...) -> ExecResult[Any]: ...

    async def exec(self, command: Command, *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                   stdin: Optional[Union[str, bytes]] = None, timeout: Optional[float] = None,
                   output_limit: Optional[int] = None, binary: bool = False) -> ExecResult[Any]:
        """See Workspace.exec."""
        return await self._r.run(self.sync.exec, command, env=env, cwd=cwd, stdin=stdin, timeout=timeout,
                                 output_limit=output_limit, binary=binary)

    async def exec_stream(self, command: Command, *, env: Optional[Mapping[str, str]] = None,
                          cwd: Optional[str] = None, stdin: Optional[Union[str, bytes]] = None,
                          timeout: Optional[float] = None, output_limit: Optional[int] = None,
                          binary: bool = False) -> AsyncExecStream[Any]:
        """See Workspace.exec_stream."""
        s = await self._r.run(self.sync.exec_stream, command, env=env, cwd=cwd, stdin=stdin, timeout=timeout,
                              output_limit=output_limit, binary=binary)
        return AsyncExecStream(self._r, s)

    async def start_job(self, command: Command, *, env: Optional[Mapping[str, str]] = None,
                        cwd: Optional[str] = None, stdin: Optional[Union[str, bytes]] = None,
                        timeout: Optional[float] = None, output_limit: Optional[int] = None,
                        binary: bool = False) -> AsyncJob[Any]:
        """See Workspace.start_job."""
        j = await self._r.run(self.sync.start_job, command, env=env, cwd=cwd, stdin=stdin, timeout=timeout,
                              output_limit=output_limit, binary=binary)
        return AsyncJob(self._r, j)

    def job(self, job_id: str, *, binary: bool = False) -> AsyncJob[Any]:
        return AsyncJob(self._r, self.sync.job(job_id, binary=binary))

    async def list_jobs(self) -> List[JobInfo[str]]:
        return await self._r.run(self.sync.list_jobs)

    async def read_bytes(self, path: str) -> bytes:
        return await self._r.run(self.sync.read_bytes, path)

    async def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return await self._r.run(self.sync.read_text, path, encoding, errors)

    async def read_numbered(self, path: str, offset: int = 0, limit: int = 2000) -> NumberedRead:
        return await self._r.run(self.sync.read_numbered, path, offset, limit)

    async def write(self, path: str, data: Union[str, bytes, bytearray, memoryview]) -> WriteResult:
        return await self._r.run(self.sync.write, path, data)

    write_bytes = write
    write_text = write

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        return await self._r.run(self.sync.edit, path, old, new, replace_all)

    async def list_dir(self, path: str = "", recursive: bool = False,
                       max_entries: Optional[int] = None) -> List[FileInfo]:
        return await self._r.run(self.sync.list_dir, path, recursive, max_entries)

    async def glob(self, pattern: str, path: str = "") -> List[str]:
        return await self._r.run(self.sync.glob, pattern, path)

    async def grep(self, pattern: str, path: str = "", *, glob: str = "", literal: bool = False,
                   ignore_case: bool = False, max_results: int = 0) -> GrepResult:
        return await self._r.run(self.sync.grep, pattern, path, glob=glob, literal=literal, ignore_case=ignore_case,
                                 max_results=max_results)

    async def stat(self, path: str) -> FileInfo:
        return await self._r.run(self.sync.stat, path)

    async def exists(self, path: str) -> bool:
        return await self._r.run(self.sync.exists, path)

    async def mkdir(self, path: str, parents: bool = False) -> None:
        await self._r.run(self.sync.mkdir, path, parents)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await self._r.run(self.sync.remove, path, recursive)

    async def rename(self, src: str, dst: str) -> None:
        await self._r.run(self.sync.rename, src, dst)

    async def copy(self, src: str, dst: str) -> None:
        await self._r.run(self.sync.copy, src, dst)
