/**
 * The change feed of a workspace: GET /v1/workspaces/{name}/changes, server-sent
 * events read by an async iterator that resumes after a dropped connection.
 */
import { Busy, ConnectionFailed, ProtocolError, Timeout, Unavailable } from "./errors.js";
import { pause, type Workspace } from "./client.js";
import { SSEParser, type SSEEvent } from "./sse.js";

/**
 * One event of a workspace's change feed. `op` is "created", "modified" or
 * "deleted" (a rename is a "deleted" of the old path then a "created" of the new
 * one, for a directory without events for what it holds; "modified" comes once
 * per written handle at its close, and for truncate, chmod, chown, utimes and
 * xattr changes), or "reset": events may have been missed; `reason` says why
 * ("unknown_id": the `since` id is older than the daemon's ring of 4096 events
 * or from before a remount; "overflow": the reader fell more than 4096 events
 * behind; "replaced": a snapshot restore or a virtual discard; "remounted"), and
 * a client that needs the full state lists the workspace again. `id` is opaque: pass it back as `since`
 * to resume after this event. `type` is "file", "dir", "symlink" or "other";
 * `time` is RFC 3339 (UTC).
 */
export interface ChangeEvent {
  id: string;
  op: "created" | "modified" | "deleted" | "reset";
  path: string;
  type: string;
  time: string;
  reason?: string;
}

/** Options of Workspace.changes. */
export interface ChangesOptions {
  /** Only the events at or below this workspace-relative path. */
  path?: string;
  /** Resume after the event with this id. */
  since?: string;
  /** Aborting it closes the connection; the iteration rejects with an AbortError (a DOMException). */
  signal?: AbortSignal;
  /** Failed reconnection attempts in a row before the iteration rejects (default: the client's maxRetries). */
  maxRetries?: number;
}

/**
 * Milliseconds without a byte from the daemon after which a feed's connection
 * counts as dropped and is opened again (the daemon sends a keepalive every 15 s).
 */
export const FEED_IDLE_TIMEOUT_MS = 45_000;

// backoff is the pause before reconnection attempt `failures` (1, 2, ...): 100 ms doubling, at most 2 s.
const backoff = (failures: number): number => Math.min(50 * 2 ** failures, 2000);

// transient tells the errors a reconnection may overcome: no answer, a broken
// or silent connection, a daemon that is busy or restarting.
const transient = (e: unknown): boolean =>
  e instanceof ConnectionFailed || e instanceof Timeout || e instanceof Unavailable || e instanceof Busy;

/** Why a connection of the feed was aborted by the feed itself: it stayed silent. */
class Idle extends Error {}

// A connection of the feed: its response, and the controller that ends it.
interface Conn { resp: Response; ctl: AbortController }

type Json = Record<string, unknown>;

/**
 * The change events of a workspace, in order, as they happen (see
 * Workspace.changes): iterate it once with `for await`. When the connection
 * drops (or stays silent for FEED_IDLE_TIMEOUT_MS), the feed opens it again with
 * the id of the last event it delivered (`lastId`), so nothing is missed or
 * repeated, after a pause of 100 ms doubling up to 2 s; after `maxRetries`
 * failed attempts in a row it rejects with ConnectionFailed (its message names
 * the `since` to resume with, its cause is the last error). Other errors (NotFound: the workspace is gone,
 * Unauthorized, PathEscape for `path`) reject at once. The iteration ends after
 * the daemon's `end` event (`endReason` says why: "deleted", "expired",
 * "shutdown", "unavailable"), when the loop is left, or on close().
 */
export class ChangeFeed implements AsyncIterable<ChangeEvent> {
  /** The id of the last event delivered (or `since`): where a new feed resumes. */
  lastId: string;
  /** Why the daemon ended the feed (its `end` event), once it did. */
  endReason: string | undefined;
  /** Resolves once the daemon accepted the subscription; rejects with the request's error (as the iteration does). */
  readonly ready: Promise<void>;
  readonly #ws: Workspace;
  readonly #path: string | undefined;
  readonly #signal: AbortSignal | undefined;
  readonly #maxRetries: number;
  readonly #closer = new AbortController();
  #first: Promise<Conn> | undefined;
  #failures = 0;
  #started = false;

  /** @internal Use Workspace.changes. */
  constructor(ws: Workspace, o: ChangesOptions) {
    this.#ws = ws;
    this.#path = o.path;
    this.#signal = o.signal;
    this.lastId = o.since ?? "";
    this.#maxRetries = o.maxRetries ?? ws.client.maxRetries;
    if (!Number.isInteger(this.#maxRetries) || this.#maxRetries < 0) throw new RangeError(`maxRetries ${o.maxRetries}: a whole number, 0 or more`);
    this.#first = this.#open();
    this.ready = this.#first.then(() => undefined);
    // Rejections are seen by whoever iterates or awaits ready.
    this.ready.catch(() => undefined);
  }

  /** Ends the feed and closes its connection; the iteration then ends. */
  close(): void {
    this.#closer.abort();
  }

  #abortError(): DOMException {
    return new DOMException(`the change feed of workspace ${this.#ws.name} was aborted by its AbortSignal`, "AbortError");
  }

  // open opens the stream from lastId, retrying transient failures (counted in
  // #failures). The connection ends when its controller aborts: the idle timer
  // (restarted by each read), the caller's signal, close().
  async #open(): Promise<Conn> {
    for (;;) {
      const ctl = new AbortController();
      const idle = setTimeout(() => ctl.abort(new Idle()), FEED_IDLE_TIMEOUT_MS);
      const signals = [this.#closer.signal, ctl.signal];
      if (this.#signal) signals.push(this.#signal);
      try {
        const resp = await this.#ws.client._send("GET", this.#ws._path("/changes"), {
          query: { path: this.#path || undefined, since: this.lastId || undefined },
          accept: "text/event-stream", timeout: null, retries: 0, signal: AbortSignal.any(signals),
        });
        return { resp, ctl };
      } catch (e) {
        if (this.#signal?.aborted) throw this.#abortError();
        if (this.#closer.signal.aborted) throw e;
        const err = ctl.signal.aborted
          ? new Timeout(`GET ${this.#ws._path("/changes")}: no answer within ${FEED_IDLE_TIMEOUT_MS / 1000} s`, { cause: e })
          : e;
        if (!transient(err) || this.#failures >= this.#maxRetries) throw err;
        this.#failures++;
        await this.#pause();
      } finally {
        clearTimeout(idle);
      }
    }
  }

  async #pause(): Promise<void> {
    const signal = this.#signal ? AbortSignal.any([this.#signal, this.#closer.signal]) : this.#closer.signal;
    await pause(backoff(this.#failures), signal);
    if (this.#signal?.aborted) throw this.#abortError();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ChangeEvent> {
    if (this.#started) throw new TypeError("a ChangeFeed is iterated once");
    this.#started = true;
    try {
      while (!this.#closer.signal.aborted) {
        let conn: Conn;
        const first = this.#first;
        try {
          conn = await (first ?? this.#open());
        } catch (e) {
          if (this.#closer.signal.aborted && !this.#signal?.aborted) return;
          throw first || !transient(e) ? e : this.#gaveUp(e);
        } finally {
          this.#first = undefined;
        }
        const { resp, ctl } = conn;
        if (!resp.body) throw new ProtocolError("change feed: the answer has no body");
        let heard = false;
        let err: unknown;
        const reader = resp.body.getReader();
        let idle = setTimeout(() => ctl.abort(new Idle()), FEED_IDLE_TIMEOUT_MS);
        try {
          const parser = new SSEParser(this.lastId);
          for (;;) {
            let chunk: ReadableStreamReadResult<Uint8Array>;
            try {
              chunk = await reader.read();
            } catch (e) {
              err = e;
              break;
            }
            if (chunk.done) break;
            heard = true;
            clearTimeout(idle);
            idle = setTimeout(() => ctl.abort(new Idle()), FEED_IDLE_TIMEOUT_MS);
            for (const ev of parser.feed(chunk.value)) {
              const out = this.#event(ev);
              if (this.endReason !== undefined) return;
              if (out) yield out;
            }
          }
        } finally {
          clearTimeout(idle);
          // Closes the connection (a no-op if the body was read to its end).
          ctl.abort();
          reader.cancel().catch(() => undefined);
        }
        if (this.#signal?.aborted) throw this.#abortError();
        if (this.#closer.signal.aborted) return;
        // The connection ended without `end`: open it again from lastId. A
        // connection that brought something counts as a success.
        if (heard) this.#failures = 0;
        if (this.#failures >= this.#maxRetries) throw this.#gaveUp(err);
        this.#failures++;
        await this.#pause();
      }
    } finally {
      this.#closer.abort();
    }
  }

  #gaveUp(err: unknown): ConnectionFailed {
    const why = err === undefined ? "" : ` (last: ${String(err)})`;
    return new ConnectionFailed(`the change feed of workspace ${this.#ws.name} at ${this.#ws.client.url} dropped and ` +
      `${this.#maxRetries} reconnection attempts in a row failed${why}; resume with since=${JSON.stringify(this.lastId)}`, { cause: err });
  }

  // event turns an SSE event into a ChangeEvent (undefined for `end`, which sets
  // endReason, and for unknown types).
  #event(ev: SSEEvent): ChangeEvent | undefined {
    if (ev.event !== "change" && ev.event !== "reset" && ev.event !== "end") return undefined;
    let d: Json;
    try {
      d = JSON.parse(ev.data) as Json;
    } catch (e) {
      throw new ProtocolError(`change feed: the data of a ${JSON.stringify(ev.event)} event is not JSON: ${ev.data.slice(0, 200)}`, { cause: e });
    }
    if (d === null || typeof d !== "object" || Array.isArray(d)) {
      throw new ProtocolError(`change feed: the data of a ${JSON.stringify(ev.event)} event is not an object: ${ev.data.slice(0, 200)}`);
    }
    if (ev.event === "end") {
      this.endReason = String(d.reason || "end");
      return undefined;
    }
    this.lastId = String(d.id || ev.id);
    if (ev.event === "reset") return { id: this.lastId, op: "reset", path: "", type: "", time: String(d.time ?? ""), reason: String(d.reason ?? "") };
    return {
      id: this.lastId, op: String(d.op ?? "") as ChangeEvent["op"], path: String(d.path ?? ""),
      type: String(d.type ?? ""), time: String(d.time ?? ""),
    };
  }
}
