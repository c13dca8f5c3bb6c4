"""The server-sent events parser of the change feed (agentfs._sse), on byte streams
cut at every offset: the events must not depend on where the chunks end."""

from __future__ import annotations

from typing import List, Sequence

from agentfs._sse import SSEEvent, SSEParser

# Every feature of the format, with LF, CRLF and CR line ends mixed, a byte order
# mark, and multi-byte UTF-8 (cut inside a sequence by some of the splits).
STREAM = (
    b"\xef\xbb\xbf"
    b": keepalive\n"
    b"id: 7f3a9c:1\r\n"
    b"event: change\r\n"
    b'data: {"id":"7f3a9c:1","op":"created","path":"s\xc3\xa9/\xe2\x82\xac.go"}\r\n'
    b"\r\n"
    b"event:reset\r"
    b"data:  two spaces\r"
    b"data\r"
    b"data: third\r"
    b"\r"
    b":comment with data: inside\n"
    b"retry: 2500\n"
    b"id: bad\x00id\n"
    b"unknown: field\n"
    b"data: \xf0\x9f\x98\x80\n"
    b"\n"
    b"event: nodata\n"
    b"id: 7f3a9c:2\n"
    b"\n"
    b"data: after\r\n"
    b"\r\n"
    b"id\n"
    b"data: id cleared\n"
    b"\n"
    b"event: end\n"
    b"data: cut off by the end of the stream"
)

WANT = [
    SSEEvent("change", '{"id":"7f3a9c:1","op":"created","path":"s\u00e9/\u20ac.go"}', "7f3a9c:1"),
    SSEEvent("reset", " two spaces\n\nthird", "7f3a9c:1"),
    SSEEvent("message", "\U0001F600", "7f3a9c:1"),
    SSEEvent("message", "after", "7f3a9c:2"),
    SSEEvent("message", "id cleared", ""),
]


def parse(chunks: Sequence[bytes]) -> "tuple[List[SSEEvent], SSEParser]":
    p = SSEParser()
    out: List[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    return out, p


def test_whole_stream() -> None:
    got, p = parse([STREAM])
    assert got == WANT
    assert p.retry == 2500
    assert p.last_id == ""


def test_every_single_cut() -> None:
    for i in range(len(STREAM) + 1):
        got, _ = parse([STREAM[:i], STREAM[i:]])
        assert got == WANT, f"cut at {i}"


def test_every_pair_of_cuts() -> None:
    n = len(STREAM)
    for i in range(n + 1):
        for j in range(i, n + 1):
            got, _ = parse([STREAM[:i], STREAM[i:j], STREAM[j:]])
            assert got == WANT, f"cuts at {i}, {j}"


def test_byte_by_byte() -> None:
    got, p = parse([STREAM[i:i + 1] for i in range(len(STREAM))])
    assert got == WANT
    assert p.retry == 2500


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    # "data: a\r" + "\n\r\n": the LF after the CR is not a blank line.
    got, _ = parse([b"data: a\r", b"\n", b"data: b\r", b"\n\r\n"])
    assert got == [SSEEvent("message", "a\nb", "")]
    # A CR then a lone CR: a blank line.
    got, _ = parse([b"data: a\r", b"\r"])
    assert got == [SSEEvent("message", "a", "")]


def test_last_id_carries_over_and_empty_data_dispatches() -> None:
    p = SSEParser(last_id="e:5")
    assert p.feed(b"data:\n\n") == [SSEEvent("message", "", "e:5")]
    # No data field: nothing dispatched, but the id is kept.
    assert p.feed(b"id: e:6\nevent: change\n\n") == []
    assert p.last_id == "e:6"
    assert p.feed(b"data: x\n\n") == [SSEEvent("message", "x", "e:6")]


def test_bom_only_at_the_start() -> None:
    got, _ = parse([b"\xef", b"\xbb", b"\xbfdata: a\n\n", b"\xef\xbb\xbfdata: b\n\n"])
    # The second BOM is part of a field name: not "data", so ignored.
    assert got == [SSEEvent("message", "a", "")]
