/**
 * An incremental parser of server-sent events (the text/event-stream format of
 * the HTML standard, section "Server-sent events"), for the change feed.
 *
 * It takes the stream's bytes in chunks cut anywhere (inside a line, a CRLF or a
 * UTF-8 sequence) and returns the events each chunk completes. Lines end with
 * CRLF, LF or CR; a line starting with ":" is a comment; `data` lines of one
 * event are joined with "\n"; an event is dispatched at a blank line, and only
 * if it has data; `id` sets the last event id (kept across events, ignored if it
 * holds a NUL); a leading byte order mark is skipped; an event cut off by the
 * end of the stream is not dispatched.
 */

/** A dispatched event: its type ("message" when no `event` field), its data, and the last event id then ("" if none was set). */
export interface SSEEvent { event: string; data: string; id: string }

const CR = 0x0d;
const LF = 0x0a;
const BOM = [0xef, 0xbb, 0xbf];

/** Feeds on bytes, returns events. One parser per connection; `lastId` and `retry` (milliseconds, from a `retry` field) survive it. */
export class SSEParser {
  lastId: string;
  retry: number | undefined;
  #buf: Uint8Array = new Uint8Array(0);
  #bomChecked = false;
  // A CR ended the last line: an LF that comes next belongs to it.
  #afterCR = false;
  #data: string[] = [];
  #hasData = false;
  #event = "";
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  constructor(lastId = "") {
    this.lastId = lastId;
  }

  /** The events that `chunk` (the next bytes of the stream) completes. */
  feed(chunk: Uint8Array): SSEEvent[] {
    const out: SSEEvent[] = [];
    if (chunk.length === 0) return out;
    let buf = chunk;
    if (this.#buf.length) {
      buf = new Uint8Array(this.#buf.length + chunk.length);
      buf.set(this.#buf);
      buf.set(chunk, this.#buf.length);
    }
    if (!this.#bomChecked) {
      const k = Math.min(buf.length, 3);
      let prefix = true;
      for (let i = 0; i < k; i++) if (buf[i] !== BOM[i]) prefix = false;
      if (prefix && buf.length < 3) {
        this.#buf = buf;
        return out;
      }
      this.#bomChecked = true;
      if (prefix) buf = buf.subarray(3);
    }
    let start = 0;
    if (this.#afterCR && buf[0] === LF) start = 1;
    this.#afterCR = false;
    for (let i = start; i < buf.length; i++) {
      const c = buf[i];
      if (c !== LF && c !== CR) continue;
      this.#line(buf.subarray(start, i), out);
      if (c === CR) {
        if (i + 1 === buf.length) this.#afterCR = true;
        else if (buf[i + 1] === LF) i++;
      }
      start = i + 1;
    }
    // Copied: the caller may reuse its chunk's memory.
    this.#buf = buf.slice(start);
    return out;
  }

  #line(raw: Uint8Array, out: SSEEvent[]): void {
    // A line is cut at CR or LF only, which never occur inside a UTF-8
    // sequence: decoding whole lines is exact.
    const line = this.#decoder.decode(raw);
    if (line === "") {
      if (this.#hasData) out.push({ event: this.#event || "message", data: this.#data.join("\n"), id: this.lastId });
      this.#data = [];
      this.#hasData = false;
      this.#event = "";
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (name) {
      case "data": this.#data.push(value); this.#hasData = true; break;
      case "event": this.#event = value; break;
      case "id": if (!value.includes("\0")) this.lastId = value; break;
      case "retry": if (/^[0-9]+$/.test(value)) this.retry = Number(value); break;
    }
  }
}
