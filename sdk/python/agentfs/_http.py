"""HTTP transport of the client: a small pool of keep-alive connections over
http.client, JSON bodies, error bodies turned into exceptions, and retries of
idempotent requests on connection errors."""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from .errors import AgentFSError, ConnectionFailed, ProtocolError, error_from

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

# Errors after which a request may be sent again on a new connection. A
# stale keep-alive connection the server closed shows up as one of these.
_RETRYABLE = (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine,
              http.client.CannotSendRequest, http.client.ResponseNotReady, socket.gaierror)

_STATUS_CODES = {400: "invalid_argument", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 409: "conflict", 410: "expired", 413: "too_large", 429: "busy", 503: "unavailable",
                 504: "timeout"}


def quote_path(path: str) -> str:
    """Percent-encodes a workspace path for the files/{path} route. "." and ".."
    segments are encoded too, so that they reach the daemon (which answers
    path_escape) instead of being cleaned away on the way."""
    segs = []
    lead = ""
    if path.startswith("/"):
        # An absolute path reaches the daemon as such (it answers path_escape)
        # rather than as "//" that a router cleans and redirects.
        lead, path = "%2F", path.lstrip("/")
    for seg in path.split("/"):
        if seg in (".", ".."):
            segs.append(seg.replace(".", "%2E"))
        else:
            segs.append(urllib.parse.quote(seg, safe=""))
    return lead + "/".join(segs)


class Response:
    """An answer of the daemon: ``status``, ``headers`` and the whole ``body``."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ProtocolError(f"the daemon's answer is not JSON: {self.body[:200]!r}", status=self.status) from e


class StreamResponse:
    """An answer read as it comes (NDJSON lines, or raw chunks). Close it (or read it
    to the end) to give the connection back."""

    def __init__(self, pool: "Transport", conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                 sock: Optional[socket.socket]) -> None:
        self._pool = pool
        self._conn: Optional[http.client.HTTPConnection] = conn
        self._resp = resp
        self._sock = sock
        # Guards the hand-off of _conn: interrupt() may come from another thread.
        self._mu = threading.Lock()
        self._done = False
        self.status = resp.status

    def lines(self) -> Iterator[bytes]:
        """Yields the answer's lines (without the newline) until its end."""
        try:
            while True:
                line = self._resp.readline()
                if not line:
                    self._done = True
                    break
                line = line.rstrip(b"\r\n")
                if line:
                    yield line
        except (OSError, ValueError, AttributeError, http.client.HTTPException) as e:
            # ValueError, AttributeError: the response was closed by interrupt()
            # meanwhile (http.client then fails inside its own read).
            self._discard()
            raise ConnectionFailed(f"the stream from {self._pool.base} broke: {e}") from e
        self.close()

    def chunks(self) -> Iterator[bytes]:
        """Yields the answer's bytes as they arrive (cut anywhere) until its end. A read
        that waits longer than the request's timeout raises agentfs.Timeout; a broken
        connection ConnectionFailed."""
        try:
            while True:
                data = self._resp.read1(65536)
                if not data:
                    self._done = True
                    break
                yield data
        except socket.timeout as e:
            self._discard()
            raise error_from("timeout", f"the stream from {self._pool.base} went quiet: {e}") from e
        except (OSError, ValueError, AttributeError, http.client.HTTPException) as e:
            # ValueError, AttributeError: the response was closed by interrupt()
            # meanwhile (http.client then fails inside its own read, e.g. closing
            # a file it has already dropped).
            self._discard()
            raise ConnectionFailed(f"the stream from {self._pool.base} broke: {e}") from e
        self.close()

    def interrupt(self) -> None:
        """Wakes a read blocked in another thread (it then ends with ConnectionFailed)
        and closes the connection. Safe to call from any thread, more than once."""
        conn = self._take()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if conn is not None:
            conn.close()

    def _take(self) -> Optional[http.client.HTTPConnection]:
        with self._mu:
            conn, self._conn = self._conn, None
        return conn

    def _discard(self) -> None:
        conn = self._take()
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Ends the stream: the connection goes back to the pool if the answer was read whole."""
        conn = self._take()
        if conn is None:
            return
        if self._done and not self._resp.will_close:
            self._pool._put_conn(conn)
        else:
            # Unread data: the connection cannot be reused.
            conn.close()


class Transport:
    """Sends requests to one daemon through a pool of keep-alive connections.

    At most ``pool_size`` idle connections are kept; more requests at once
    open more connections, which are closed after use. Thread-safe.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 60.0, pool_size: int = 8, retries: int = 2,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"agentfs URL {url!r}: want http://HOST:PORT or https://HOST:PORT")
        self.base = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self._pool_size = pool_size
        self.retries = retries
        self._ssl = ssl_context
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _new_conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._https:
            ctx = self._ssl or ssl.create_default_context()
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ctx)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _get_conn(self, timeout: Optional[float]) -> "tuple[http.client.HTTPConnection, bool]":
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn = self._idle.pop()
            if conn.sock is None or _dropped(conn.sock):
                # The server closed it while it was idle (its idle timeout,
                # a restart): never send on it.
                conn.close()
                continue
            conn.timeout = timeout
            conn.sock.settimeout(timeout)
            return conn, True
        return self._new_conn(timeout), False

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _put_conn(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections; requests after close open new ones and do not pool them."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _headers(self, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"Authorization": "Bearer " + self._token, "User-Agent": "agentfs-python/0.1"}
        if extra:
            h.update(extra)
        return h

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        """The request target of path (under the URL's prefix) with query (None values dropped)."""
        target = self._prefix + path
        if query:
            q = {k: _qv(v) for k, v in query.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        return target

    def _send(self, method: str, target: str, body: Optional[bytes], headers: Dict[str, str],
              timeout: Optional[float], idempotent: bool, retries: Optional[int] = None,
              ) -> "tuple[http.client.HTTPConnection, http.client.HTTPResponse, Optional[socket.socket]]":
        """Sends a request and reads the answer's head: the connection, the answer, and
        the connection's socket (the connection lets go of it when the answer ends
        with the connection). ``retries`` defaults to the transport's."""
        if retries is None:
            retries = self.retries
        attempt = 0
        while True:
            conn, reused = self._get_conn(timeout)
            try:
                conn.request(method, target, body=body, headers=headers)
                sock = conn.sock
                resp = conn.getresponse()
                return conn, resp, sock
            except socket.timeout as e:
                conn.close()
                raise error_from("timeout", f"{method} {self.base}{target}: no answer within {timeout} s", status=0) from e
            except _RETRYABLE as e:
                conn.close()
                if reused:
                    # The others were opened to the same server: likely as dead.
                    self._drop_idle()
                # A reused connection may have been closed by the server while
                # idle: the request did not reach it, try once more on a new one.
                # Nothing reached a server that refused the connection.
                refused = isinstance(e, ConnectionRefusedError)
                if (idempotent or refused) and attempt < retries:
                    attempt += 1
                    if not reused:
                        time.sleep(min(0.05 * 2 ** attempt, 1.0))
                    continue
                raise ConnectionFailed(f"{method} {self.base}{target}: {e or type(e).__name__} "
                                       "(is `agentfs serve` running at that address?)") from e
            except OSError as e:
                conn.close()
                raise ConnectionFailed(f"{method} {self.base}{target}: {e}") from e

    def request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                body: Optional[Union[bytes, bytearray, memoryview]] = None, json_body: Any = None,
                headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                idempotent: Optional[bool] = None) -> Response:
        """Sends a request and reads the whole answer; an error answer raises its AgentFSError."""
        hdrs = self._headers(headers)
        data: Optional[bytes] = None
        if json_body is not None:
            data = json.dumps(json_body, ensure_ascii=False).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            data = bytes(body) if not isinstance(body, bytes) else body
            hdrs.setdefault("Content-Type", "application/octet-stream")
        if idempotent is None:
            idempotent = method in _IDEMPOTENT
        target = self.url(path, query)
        to = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            conn, resp, _ = self._send(method, target, data, hdrs, to, idempotent)
            try:
                payload = resp.read()
            except socket.timeout as e:
                conn.close()
                raise error_from("timeout", f"{method} {self.base}{target}: no answer within {to} s") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if idempotent and attempt < self.retries:
                    attempt += 1
                    continue
                raise ConnectionFailed(f"{method} {self.base}{target}: the answer broke off: {e}") from e
            if resp.will_close:
                conn.close()
            else:
                self._put_conn(conn)
            r = Response(resp.status, dict(resp.getheaders()), payload)
            if resp.status >= 300:
                raise _error(r, method, self.base + target)
            return r

    def stream(self, method: str, path: str, *, json_body: Any = None, query: Optional[Mapping[str, Any]] = None,
               accept: str = "application/x-ndjson", timeout: Optional[float] = None,
               retries: Optional[int] = None) -> StreamResponse:
        """Sends a request whose answer is read as it comes (see StreamResponse); an
        error answer raises its AgentFSError. GET requests are retried on connection
        errors (``retries`` times, default the transport's), others only when refused.
        ``timeout`` bounds the wait for the answer's head and each read of its body."""
        hdrs = self._headers({"Accept": accept})
        data: Optional[bytes] = None
        if json_body is not None:
            hdrs["Content-Type"] = "application/json"
            data = json.dumps(json_body, ensure_ascii=False).encode("utf-8")
        target = self.url(path, query)
        conn, resp, sock = self._send(method, target, data, hdrs, self.timeout if timeout is None else timeout,
                                      method == "GET", retries)
        if resp.status >= 300:
            try:
                payload = resp.read()
            except (OSError, http.client.HTTPException):
                payload = b""
            conn.close()
            raise _error(Response(resp.status, dict(resp.getheaders()), payload), method, self.base + target)
        return StreamResponse(self, conn, resp, sock)


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle keep-alive socket was closed by the server (readable at EOF, or in error)."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _qv(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _error(r: Response, method: str, url: str) -> AgentFSError:
    try:
        e = json.loads(r.body)["error"]
        return error_from(str(e.get("code", "")), str(e.get("message", "")), str(e.get("path", "") or ""), r.status)
    except (ValueError, KeyError, TypeError, AttributeError):
        code = _STATUS_CODES.get(r.status, "internal")
        text = r.body[:300].decode("utf-8", errors="replace")
        return error_from(code, f"{method} {url}: HTTP {r.status}: {text}", status=r.status)
