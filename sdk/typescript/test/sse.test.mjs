// The server-sent events parser of the change feed (src/sse.ts), on byte streams
// cut at every offset: the events must not depend on where the chunks end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SSEParser } from "../dist/sse.js";

const enc = (s) => new Uint8Array(Buffer.from(s, "latin1"));
// Every feature of the format, with LF, CRLF and CR line ends mixed, a byte
// order mark, and multi-byte UTF-8 (cut inside a sequence by some of the splits).
const STREAM = enc(
  "\xef\xbb\xbf" +
  ": keepalive\n" +
  "id: 7f3a9c:1\r\n" +
  "event: change\r\n" +
  'data: {"id":"7f3a9c:1","op":"created","path":"s\xc3\xa9/\xe2\x82\xac.go"}\r\n' +
  "\r\n" +
  "event:reset\r" +
  "data:  two spaces\r" +
  "data\r" +
  "data: third\r" +
  "\r" +
  ":comment with data: inside\n" +
  "retry: 2500\n" +
  "id: bad\x00id\n" +
  "unknown: field\n" +
  "data: \xf0\x9f\x98\x80\n" +
  "\n" +
  "event: nodata\n" +
  "id: 7f3a9c:2\n" +
  "\n" +
  "data: after\r\n" +
  "\r\n" +
  "id\n" +
  "data: id cleared\n" +
  "\n" +
  "event: end\n" +
  "data: cut off by the end of the stream",
);

const WANT = [
  { event: "change", data: '{"id":"7f3a9c:1","op":"created","path":"s\u00e9/\u20ac.go"}', id: "7f3a9c:1" },
  { event: "reset", data: " two spaces\n\nthird", id: "7f3a9c:1" },
  { event: "message", data: "\u{1F600}", id: "7f3a9c:1" },
  { event: "message", data: "after", id: "7f3a9c:2" },
  { event: "message", data: "id cleared", id: "" },
];

function parse(chunks, p = new SSEParser()) {
  const out = [];
  for (const c of chunks) out.push(...p.feed(c));
  return { out, p };
}

test("sse: the whole stream", () => {
  const { out, p } = parse([STREAM]);
  assert.deepEqual(out, WANT);
  assert.equal(p.retry, 2500);
  assert.equal(p.lastId, "");
});

test("sse: cut at every offset", () => {
  for (let i = 0; i <= STREAM.length; i++) {
    assert.deepEqual(parse([STREAM.subarray(0, i), STREAM.subarray(i)]).out, WANT, `cut at ${i}`);
  }
});

test("sse: cut at every pair of offsets", () => {
  const n = STREAM.length;
  for (let i = 0; i <= n; i++) {
    for (let j = i; j <= n; j++) {
      const { out } = parse([STREAM.subarray(0, i), STREAM.subarray(i, j), STREAM.subarray(j)]);
      assert.deepEqual(out, WANT, `cuts at ${i}, ${j}`);
    }
  }
});

test("sse: byte by byte, into a reused buffer", () => {
  // The parser must copy what it keeps: the caller may reuse its chunk's memory.
  const p = new SSEParser();
  const out = [];
  const one = new Uint8Array(1);
  for (const b of STREAM) { one[0] = b; out.push(...p.feed(one)); }
  assert.deepEqual(out, WANT);
  assert.equal(p.retry, 2500);
});

test("sse: a CRLF split between chunks is one line end", () => {
  assert.deepEqual(parse([enc("data: a\r"), enc("\n"), enc("data: b\r"), enc("\n\r\n")]).out, [{ event: "message", data: "a\nb", id: "" }]);
  assert.deepEqual(parse([enc("data: a\r"), enc("\r")]).out, [{ event: "message", data: "a", id: "" }]);
});

test("sse: the last id carries over; empty data dispatches; no data does not", () => {
  const p = new SSEParser("e:5");
  assert.deepEqual(p.feed(enc("data:\n\n")), [{ event: "message", data: "", id: "e:5" }]);
  assert.deepEqual(p.feed(enc("id: e:6\nevent: change\n\n")), []);
  assert.equal(p.lastId, "e:6");
  assert.deepEqual(p.feed(enc("data: x\n\n")), [{ event: "message", data: "x", id: "e:6" }]);
});

test("sse: a byte order mark is skipped only at the start", () => {
  const { out } = parse([enc("\xef"), enc("\xbb"), enc("\xbfdata: a\n\n"), enc("\xef\xbb\xbfdata: b\n\n")]);
  assert.deepEqual(out, [{ event: "message", data: "a", id: "" }]);
});
