"""An incremental parser of server-sent events (the text/event-stream format of the
HTML standard, section "Server-sent events"), for the change feed.

It takes the stream's bytes in chunks cut anywhere (inside a line, a CRLF or a
UTF-8 sequence) and returns the events each chunk completes. Lines end with
CRLF, LF or CR; a line starting with ":" is a comment; ``data`` lines of one
event are joined with "\\n"; an event is dispatched at a blank line, and only
if it has data; ``id`` sets the last event id (kept across events, ignored if
it holds a NUL); a leading byte order mark is skipped; an event cut off by the
end of the stream is not dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import List, Optional

_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    """A dispatched event: its type ("message" when no ``event`` field), its data, and
    the last event id when it was dispatched ("" if none was ever set)."""

    event: str
    data: str
    id: str


class SSEParser:
    """Feeds on bytes, returns events. One parser per connection; ``last_id`` and
    ``retry`` (milliseconds from a ``retry`` field, else None) survive it."""

    def __init__(self, last_id: str = "") -> None:
        self.last_id = last_id
        self.retry: Optional[int] = None
        self._buf = b""
        self._bom_checked = False
        # A CR ended the last line: an LF that comes next belongs to it.
        self._after_cr = False
        self._data: List[str] = []
        self._has_data = False
        self._event = ""

    def feed(self, chunk: bytes) -> List[SSEEvent]:
        """The events that ``chunk`` (the next bytes of the stream) completes."""
        out: List[SSEEvent] = []
        if not chunk:
            return out
        buf = self._buf + chunk
        if not self._bom_checked:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                self._buf = buf
                return out
            self._bom_checked = True
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
        start = 0
        if self._after_cr and buf[:1] == b"\n":
            start = 1
        self._after_cr = False
        for m in _EOL.finditer(buf, start):
            self._line(buf[start:m.start()], out)
            start = m.end()
        if buf.endswith(b"\r") and start == len(buf):
            # A CR at the end of the chunk: its LF may come in the next one.
            self._after_cr = True
        self._buf = buf[start:]
        return out

    def _line(self, raw: bytes, out: List[SSEEvent]) -> None:
        # A line is cut at CR or LF only, which never occur inside a UTF-8
        # sequence: decoding whole lines is exact.
        line = raw.decode("utf-8", errors="replace")
        if not line:
            if self._has_data:
                out.append(SSEEvent(self._event or "message", "\n".join(self._data), self.last_id))
            self._data = []
            self._has_data = False
            self._event = ""
            return
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_id = value
        elif name == "retry":
            if value.isdigit() and value.isascii():
                self.retry = int(value)
