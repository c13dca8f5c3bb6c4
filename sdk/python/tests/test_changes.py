"""The change feed (Workspace.changes, AsyncWorkspace.changes) against the real daemon:
events of the SDK's file calls and of commands, in order; the path filter; resuming
with since; the end when the workspace is deleted; reconnection after a dropped
connection (through a TCP proxy that cuts it); close and cancel without leaking
connections."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import pytest

import agentfs
from conftest import Daemon, unique

WAIT = 30.0


def collect(feed: Iterable[agentfs.ChangeEvent], until: Callable[[agentfs.ChangeEvent], bool],
            closer: Optional[Callable[[], None]] = None) -> List[agentfs.ChangeEvent]:
    """The feed's events up to the first that ``until`` accepts (included); the feed is
    closed after WAIT seconds so that a missing event fails the test instead of hanging it."""
    close = closer or getattr(feed, "close")
    timer = threading.Timer(WAIT, close)
    timer.start()
    out: List[agentfs.ChangeEvent] = []
    try:
        for ev in feed:
            out.append(ev)
            if until(ev):
                return out
    finally:
        timer.cancel()
    raise AssertionError(f"the feed ended before the awaited event; it gave {ops(out)}")


def ops(evs: Sequence[agentfs.ChangeEvent]) -> List[Tuple[str, str]]:
    return [(e.op, e.path) for e in evs]


def is_subsequence(want: Sequence[Tuple[str, str]], got: Sequence[Tuple[str, str]]) -> bool:
    it = iter(got)
    return all(any(w == g for g in it) for w in want)


def stop_at(path: str) -> Callable[[agentfs.ChangeEvent], bool]:
    return lambda ev: ev.op == "created" and ev.path == path


def feed_sockets(port: int) -> int:
    """How many TCP connections of this process to ``port`` are established (Linux /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            remote_port = int(cols[2].split(":")[1], 16)
            if remote_port == port and cols[3] == "01" and cols[9] in inodes:
                n += 1
    return n


def wait_for(cond: Callable[[], bool], what: str, secs: float = 10.0) -> None:
    deadline = time.monotonic() + secs
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {secs} s for {what}")
        time.sleep(0.02)


def test_events_of_file_calls_and_commands_in_order(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    with ws.changes() as feed:
        ws.write("a.txt", "one")
        ws.write("a.txt", "two")
        ws.mkdir("d")
        ws.exec("echo x > d/x.txt && mv d/x.txt d/y.txt && rm a.txt")
        ws.rename("d/y.txt", "z.txt")
        ws.remove("z.txt")
        ws.write("stop", "")
        evs = collect(feed, stop_at("stop"))
    got = ops(evs)
    want = [("created", "a.txt"), ("modified", "a.txt"), ("created", "d"), ("created", "d/x.txt"),
            ("deleted", "d/x.txt"), ("created", "d/y.txt"), ("deleted", "a.txt"), ("deleted", "d/y.txt"),
            ("created", "z.txt"), ("deleted", "z.txt"), ("created", "stop")]
    assert is_subsequence(want, got), got
    # Every event is one of the changes made, and each of its fields is set.
    assert {p for _, p in got} <= {"a.txt", "d", "d/x.txt", "d/y.txt", "z.txt", "stop"}, got
    for ev in evs:
        assert ev.op in ("created", "modified", "deleted") and ev.id and ev.time and ev.reason is None, ev
    assert next(e for e in evs if e.path == "d").type == "dir"
    assert next(e for e in evs if e.path == "a.txt").type == "file"
    assert len({e.id for e in evs}) == len(evs)
    assert feed.last_id == evs[-1].id
    assert feed.closed


def test_path_filter(ws: agentfs.Workspace) -> None:
    ws.mkdir("keep/in", parents=True)
    with ws.changes(path="keep") as feed:
        ws.write("other/a.txt", "no")
        ws.write("keep/in/b.txt", "yes")
        ws.write("keeper.txt", "no: a sibling whose name starts alike")
        ws.exec("touch other/c.txt keep/c.txt")
        ws.write("keep/stop", "")
        evs = collect(feed, stop_at("keep/stop"))
    assert all(e.path == "keep" or e.path.startswith("keep/") for e in evs), ops(evs)
    assert is_subsequence([("created", "keep/in/b.txt"), ("created", "keep/c.txt"), ("created", "keep/stop")],
                          ops(evs)), ops(evs)
    with pytest.raises(agentfs.PathEscape):
        ws.changes(path="../x")


def test_resume_with_since(ws: agentfs.Workspace) -> None:
    with ws.changes() as feed:
        ws.write("one", "")
        ws.write("two", "")
        first = collect(feed, stop_at("two"))
    one = next(e for e in first if e.path == "one")
    ws.write("three", "")
    # After the event of "one": the events of "two" (all of them, again) then of "three".
    with ws.changes(since=one.id) as feed:
        again = collect(feed, stop_at("three"))
    after_one = first[first.index(one) + 1:]
    assert ops(again[:len(after_one)]) == ops(after_one)
    assert [e.id for e in again[:len(after_one)]] == [e.id for e in after_one]
    assert ("created", "three") in ops(again[len(after_one):])
    # An id the daemon never gave: a reset first, then the live events.
    with ws.changes(since="no-such-epoch:1") as feed:
        ws.write("four", "")
        evs = collect(feed, stop_at("four"))
    assert evs[0].op == "reset" and evs[0].reason, evs[0]
    assert evs[0].path == ""


def test_end_when_the_workspace_is_deleted(client: agentfs.Client) -> None:
    ws = client.create_workspace(unique("feed-end"))
    feed = ws.changes()
    ws.write("a", "")
    got: List[agentfs.ChangeEvent] = []
    t = threading.Thread(target=lambda: got.extend(feed))
    t.start()
    wait_for(lambda: bool(got), "the first event")
    client.delete_workspace(ws.name)
    t.join(WAIT)
    assert not t.is_alive(), "the feed did not end when its workspace was deleted"
    assert feed.end_reason == "deleted"
    assert ("created", "a") in ops(got)
    with pytest.raises(agentfs.NotFound):
        ws.changes()


def test_close_from_another_thread_frees_the_connection(daemon: Daemon, ws: agentfs.Workspace) -> None:
    port = int(daemon.url.rsplit(":", 1)[1])
    # The feed's client keeps no idle connection (pool_size 0): its connections are
    # the feed's. The writes go through the session's client, its pool warmed.
    ws.write("warm", "")
    with daemon.client(pool_size=0) as c:
        before = feed_sockets(port)
        feed = c.workspace(ws.name).changes()
        assert feed_sockets(port) == before + 1
        got: List[agentfs.ChangeEvent] = []
        t = threading.Thread(target=lambda: got.extend(feed))
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        feed.close()
        t.join(5)
        assert not t.is_alive(), "close() did not wake the iterating thread"
        assert time.monotonic() - t0 < 2
        assert got == []
        assert feed_sockets(port) == before
        # Leaving a loop early and dropping the feed frees its connection at once too.
        feed2 = c.workspace(ws.name).changes()
        ws.write("x", "")
        for _ in feed2:
            break
        assert feed_sockets(port) == before + 1
        del feed2
        assert feed_sockets(port) == before


class CuttingProxy:
    """A TCP proxy in front of the daemon whose cut() closes every connection open
    through it, the way a network drops them (new connections go through)."""

    def __init__(self, upstream_port: int) -> None:
        self._up = upstream_port
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._socks: List[socket.socket] = []
        self._mu = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._srv.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self._up))
            with self._mu:
                self.connections += 1
                self._socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._mu:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        # shutdown wakes the accept() blocked in _accept: a mere close() would not,
        # and the socket would listen (and accept) until that accept returns.
        try:
            self._srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._srv.close()
        self.cut()


def test_resumes_after_a_dropped_connection(daemon: Daemon, ws: agentfs.Workspace) -> None:
    proxy = CuttingProxy(int(daemon.url.rsplit(":", 1)[1]))
    try:
        with agentfs.Client(proxy.url, daemon.token) as c:
            with c.workspace(ws.name).changes() as feed:
                ws.write("before", "")
                evs = collect(feed, stop_at("before"))
                proxy.cut()
                # Made while the feed is disconnected: delivered after it reconnects.
                ws.write("during", "")
                ws.write("after", "")
                evs += collect(feed, stop_at("after"))
                assert proxy.connections >= 2
                got = ops(evs)
                assert is_subsequence([("created", "before"), ("created", "during"), ("created", "after")], got), got
                assert len({e.id for e in evs}) == len(evs), "an event came twice"
                assert got.count(("created", "during")) == 1
            # The daemon gone for good: the feed gives up after max_retries attempts.
            feed = c.workspace(ws.name).changes(max_retries=2)
            proxy.close()
            t0 = time.monotonic()
            with pytest.raises(agentfs.ConnectionFailed, match="2 reconnection attempts.*since="):
                next(feed)
            assert time.monotonic() - t0 < 5
    finally:
        proxy.close()


def test_async_feed(daemon: Daemon, ws: agentfs.Workspace) -> None:
    port = int(daemon.url.rsplit(":", 1)[1])

    async def until(cond: Callable[[], bool], what: str) -> None:
        await asyncio.get_running_loop().run_in_executor(None, wait_for, cond, what)

    async def main() -> None:
        # No idle connections (pool_size 0): the client's open connections are its calls'.
        async with agentfs.AsyncClient(daemon.url, daemon.token, pool_size=0) as c:
            aws = c.workspace(ws.name)
            before = feed_sockets(port)
            async with aws.changes() as feed:
                await aws.write("a.txt", "1")
                await aws.exec("mkdir d && echo > d/b")
                got = []
                async for ev in feed:
                    got.append(ev)
                    if ev.path == "d/b" and ev.op == "created":
                        break
                assert is_subsequence([("created", "a.txt"), ("created", "d"), ("created", "d/b")], ops(got))
                assert feed.last_id == got[-1].id
            assert feed_sockets(port) == before
            # Canceling the task that waits for an event closes the connection.
            feed2 = aws.changes()
            task = asyncio.ensure_future(feed2.__anext__())
            await until(lambda: feed_sockets(port) == before + 1, "the feed's connection")
            await asyncio.sleep(0.2)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await until(lambda: feed_sockets(port) == before, "the canceled feed's connection to close")
            # aclose from another task ends a pending iteration.
            feed3 = aws.changes()
            pending = asyncio.ensure_future(feed3.__anext__())
            await asyncio.sleep(0.3)
            await feed3.aclose()
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(pending, 5)
            with pytest.raises(agentfs.NotFound):
                async for _ in c.workspace(unique("missing")).changes():
                    pass

    asyncio.run(main())


def test_stream_closed_under_a_read_is_connection_failed() -> None:
    """http.client, its response closed by interrupt() while another thread reads, fails
    inside its own read (AttributeError on the file it dropped, or ValueError); the
    stream reports that as a broken connection, which the feed takes as closed or retries."""
    from types import SimpleNamespace

    from agentfs._http import StreamResponse

    class ClosedUnderRead:
        status = 200

        def __init__(self, exc: Exception) -> None:
            self.exc = exc

        def read1(self, n: int) -> bytes:
            raise self.exc

        def readline(self) -> bytes:
            raise self.exc

    for exc in (AttributeError("'NoneType' object has no attribute 'close'"), ValueError("I/O operation on closed file")):
        for read in ("chunks", "lines"):
            closed: List[bool] = []
            conn = SimpleNamespace(close=lambda: closed.append(True))
            s = StreamResponse(SimpleNamespace(base="http://x"), conn, ClosedUnderRead(exc), None)  # type: ignore[arg-type]
            with pytest.raises(agentfs.ConnectionFailed):
                next(getattr(s, read)())
            assert closed == [True], f"{read} after {exc!r}: the connection was not discarded"
