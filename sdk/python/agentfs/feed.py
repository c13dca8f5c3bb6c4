"""The change feed of a workspace: GET /v1/workspaces/{name}/changes, server-sent
events read by an iterator that resumes after a dropped connection."""

from __future__ import annotations

import collections
import json
import threading
import time
from typing import Any, Deque, Dict, Iterator, Optional

from ._http import StreamResponse, Transport
from ._sse import SSEEvent, SSEParser
from .errors import Busy, ConnectionFailed, ProtocolError, Timeout, Unavailable
from .types import ChangeEvent

FEED_IDLE_TIMEOUT = 45.0
"""Seconds without a byte from the daemon after which a feed's connection counts as
dropped and is opened again (the daemon sends a keepalive every 15 s)."""

# What a reconnection may overcome: no answer, a broken or silent connection,
# a daemon that is busy or restarting.
_TRANSIENT = (ConnectionFailed, Timeout, Unavailable, Busy)


def _backoff(failures: int) -> float:
    """The pause before reconnection attempt ``failures`` (1, 2, ...): 0.1 s doubling, at most 2 s."""
    return float(min(0.05 * 2 ** failures, 2.0))


class ChangeFeed(Iterator[ChangeEvent]):
    """The change events of a workspace, in order, as they happen (see Workspace.changes).

    Iterate it for ChangeEvent's. The subscription is open once the feed is built:
    changes made after that are delivered. When the connection drops, the feed opens
    it again with the id of the last event it delivered (``last_id``), so nothing is
    missed or repeated, after a pause of 0.1 s doubling up to 2 s; after ``max_retries``
    failed attempts in a row it raises ConnectionFailed (its message names the
    ``since`` to resume with, its cause is the last error). Other errors (NotFound: the workspace is gone, Unauthorized,
    PathEscape for ``path``) are raised at once. The iteration ends after the daemon's
    ``end`` event (``end_reason`` then says why: "deleted", "expired", "shutdown", "unavailable") or
    after close(). Use it as a context manager, or call close(), to free its
    connection; close() may be called from another thread, and wakes a read blocked there.
    """

    def __init__(self, transport: Transport, route: str, *, path: Optional[str] = None, since: Optional[str] = None,
                 max_retries: int = 2, idle_timeout: float = FEED_IDLE_TIMEOUT) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries {max_retries}: 0 or more")
        self._t = transport
        self._route = route
        self._path = path
        self._max_retries = max_retries
        self._idle = idle_timeout
        self.last_id: str = since or ""
        """The id of the last event delivered (or ``since``): where a new feed resumes."""
        self.end_reason: Optional[str] = None
        """Why the daemon ended the feed (its ``end`` event), once it did."""
        self._mu = threading.Lock()
        self._closed = False
        self._failures = 0
        self._resp: Optional[StreamResponse] = None
        self._chunks: Optional[Iterator[bytes]] = None
        self._parser = SSEParser()
        self._heard = False
        self._pending: Deque[ChangeEvent] = collections.deque()
        self._resp = self._connect()

    def _connect(self) -> StreamResponse:
        """Opens the stream from last_id, retrying transient failures (counted in _failures)."""
        while True:
            try:
                q: Dict[str, Any] = {"path": self._path or None, "since": self.last_id or None}
                resp = self._t.stream("GET", self._route, query=q, accept="text/event-stream", timeout=self._idle,
                                      retries=0)
            except _TRANSIENT:
                if self._closed or self._failures >= self._max_retries:
                    raise
                self._failures += 1
                time.sleep(_backoff(self._failures))
                continue
            with self._mu:
                if self._closed:
                    resp.interrupt()
                    raise ConnectionFailed("the change feed was closed")
                self._resp = resp
            return resp

    def __next__(self) -> ChangeEvent:
        # A state machine rather than a generator: a generator would hold the feed
        # in a reference cycle, and a feed dropped after `break` must close its
        # connection at once (__del__), not at the next garbage collection.
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._closed or self.end_reason is not None:
                self._drop()
                raise StopIteration
            if self._chunks is None:
                try:
                    resp = self._resp or self._connect()
                except _TRANSIENT as e:
                    if self._closed:
                        raise StopIteration from None
                    raise self._gave_up(e) from e
                except Exception:
                    if self._closed:
                        raise StopIteration from None
                    raise
                self._chunks = resp.chunks()
                self._parser = SSEParser(self.last_id)
                self._heard = False
            err: Optional[Exception] = None
            try:
                chunk = next(self._chunks)
            except StopIteration:
                pass
            except _TRANSIENT as e:
                err = e
            else:
                self._heard = True
                for ev in self._parser.feed(chunk):
                    out = self._event(ev)
                    if self.end_reason is not None:
                        break
                    if out is not None:
                        self._pending.append(out)
                continue
            # The connection ended without `end`: open it again from last_id. A
            # connection that brought something counts as a success.
            self._drop()
            if self._closed:
                continue
            if self._heard:
                self._failures = 0
            if self._failures >= self._max_retries:
                raise self._gave_up(err) from err
            self._failures += 1
            time.sleep(_backoff(self._failures))

    def _gave_up(self, err: Optional[Exception]) -> ConnectionFailed:
        why = f" (last: {err})" if err is not None else ""
        return ConnectionFailed(f"the change feed of {self._t.base}{self._route} dropped and {self._max_retries} "
                                f"reconnection attempts in a row failed{why}; resume with since={self.last_id!r}")

    def _event(self, ev: SSEEvent) -> Optional[ChangeEvent]:
        """The ChangeEvent of an SSE event (None for the end and unknown types)."""
        if ev.event not in ("change", "reset", "end"):
            return None
        try:
            d = json.loads(ev.data)
        except ValueError as e:
            raise ProtocolError(f"change feed: the data of a {ev.event!r} event is not JSON: {ev.data[:200]!r}") from e
        if not isinstance(d, dict):
            raise ProtocolError(f"change feed: the data of a {ev.event!r} event is not an object: {ev.data[:200]!r}")
        if ev.event == "end":
            self.end_reason = str(d.get("reason") or "end")
            return None
        self.last_id = str(d.get("id") or ev.id)
        if ev.event == "reset":
            return ChangeEvent(id=self.last_id, op="reset", path="", type="", time=str(d.get("time", "")),
                               reason=str(d.get("reason", "")))
        return ChangeEvent.from_json(d, ev.id)

    def _drop(self) -> None:
        with self._mu:
            resp, self._resp = self._resp, None
        self._chunks = None
        if resp is not None:
            resp.interrupt()

    def __iter__(self) -> "ChangeFeed":
        return self

    def close(self) -> None:
        """Ends the feed and closes its connection; the iteration then stops. Any thread."""
        with self._mu:
            self._closed = True
            resp, self._resp = self._resp, None
        if resp is not None:
            resp.interrupt()

    @property
    def closed(self) -> bool:
        """Whether close() was called or the feed ended."""
        return self._closed or self.end_reason is not None

    def __del__(self) -> None:
        # A feed dropped before its iteration started still holds its connection.
        if getattr(self, "_mu", None) is not None:
            self.close()

    def __enter__(self) -> "ChangeFeed":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
