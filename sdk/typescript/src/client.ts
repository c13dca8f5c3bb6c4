/**
 * The client of the agentfs serve HTTP API (/v1), mirroring the Python SDK
 * (sdk/python/agentfs/client.py) in TypeScript idiom: camelCase methods, the
 * same operations, results with camelCase fields, errors keyed by API code.
 */
import { AgentFSError, Canceled, ConnectionFailed, NotFound, ProtocolError, Timeout, errorFrom } from "./errors.js";
import { ChangeFeed, type ChangesOptions } from "./feed.js";

/** Where `agentfs serve` listens by default. */
export const DEFAULT_URL = "http://127.0.0.1:7070";
/** The daemon's default command timeout, in seconds. */
export const DEFAULT_EXEC_TIMEOUT = 120;
// Time added to a command's own timeout for the HTTP answer to arrive.
const EXEC_MARGIN = 60;

/** A shell line (run with sh -c) or an argv array (run without a shell). */
export type Command = string | readonly string[];

/** Bytes as the client takes them. */
export type Bytes = Uint8Array | ArrayBuffer;

export interface Health { status: string; version: string }
/**
 * Where a workspace's commands run: "local" (on the daemon's host, as its user)
 * or "docker" (in a container of the workspace, one per mount, the workspace at
 * /workspace). Docker options left out take the daemon's (`agentfs serve --image
 * --user --network --memory --cpus --pids`); the image must be present in the
 * engine (never pulled). memory is in bytes; pids 0 means 4096.
 */
export interface Backend {
  type: "local" | "docker"; image?: string; /** numeric "uid:gid" */ user?: string; network?: boolean;
  memory?: number; cpus?: number; pids?: number;
}
export interface WorkspaceInfo {
  name: string; branch: string; status: string; headCommit: string; bytesWaiting: number; virtual: boolean;
  expiresAt?: string; deleteOnExpiry?: boolean; expired?: boolean; base?: string; from?: string;
  metadata?: Record<string, string>;
  /** Where its commands run: its creator's choice completed with the daemon's defaults. */
  backend?: Backend; [key: string]: unknown;
}
export interface TokenInfo { id: string; workspace: string; readOnly: boolean; token?: string; [key: string]: unknown }
export interface Changes { created: string[]; modified: string[]; deleted: string[] }
/** A command's result; T is string, or Uint8Array with `binary: true`. */
export interface ExecResult<T extends string | Uint8Array = string> {
  exitCode: number; stdout: T; stderr: T; output: T; timedOut: boolean; truncated: boolean; durationMs: number;
  changes: Changes | null;
}
/** A piece of a streamed command's output. */
export interface OutputChunk<T extends string | Uint8Array = string> { stream: "stdout" | "stderr"; data: T }
export interface JobInfo<T extends string | Uint8Array = string> {
  id: string; command: string; started: string; running: boolean; exitCode?: number; result?: ExecResult<T>;
  error?: AgentFSError;
}
export interface JobOutput<T extends string | Uint8Array = string> {
  output: T; offset: number; nextOffset: number; truncated: boolean; running: boolean;
}
export interface FileInfo { path: string; name: string; type: string; size: number; mode: number; modTime: string; target?: string; [key: string]: unknown }
export interface NumberedRead { path: string; content: string; offset: number; lines: number; totalLines: number }
export interface WriteResult { path: string; size: number }
export interface GrepMatch { path: string; line: number; text: string }
export interface GrepResult { matches: GrepMatch[]; truncated: boolean }
export interface Snapshot { name: string; commit: string; kind: string; message?: string; uniqueBytes?: number; [key: string]: unknown }
export interface RestoreResult { commit: string; saved: string }
export interface HistoryChange { op: string; path: string; type: string; oldSize: number; newSize: number; what?: string; patch?: string }
export interface DiffResult { from: string; to: string; changes: HistoryChange[] }
export interface Branch { name: string; head: string; writer: boolean }
export interface VirtualChange {
  op: string; path: string; type: string; size: number; oldSize: number; from?: string; added?: number;
  deleted?: number; binary?: boolean; patch?: string;
}
export interface VirtualDiffResult { base: string; changes: VirtualChange[] }
export interface VirtualCommitResult { commit: string; changes: VirtualChange[]; pending: number }
export interface VirtualDiscardResult { discarded: VirtualChange[]; pending: number }

/** Options of every request. */
export interface RequestOptions {
  /** Aborts the request: it rejects with Canceled (a running command is killed by the daemon when its request goes away). */
  signal?: AbortSignal;
}

/** Options of exec, execStream and startJob. */
export interface ExecOptions extends RequestOptions {
  /** Added to the command's environment. */
  env?: Record<string, string>;
  /** The working directory, relative to the workspace root. */
  cwd?: string;
  /** The command's standard input. */
  stdin?: string | Bytes;
  /** Seconds; default 120 (then the process tree is killed: timedOut, exit 137). */
  timeout?: number;
  /**
   * Seconds that bound exec's and execStream's HTTP request, the reading of its
   * answer included (default: `timeout` + 60): past them the call rejects with
   * Timeout and the daemon kills the command, its request gone.
   */
  requestTimeout?: number;
  /** Bytes of output kept (default 1 MiB). */
  outputLimit?: number;
  /** Output as Uint8Array, byte for byte (base64 on the wire). */
  binary?: boolean;
}

type Json = Record<string, unknown>;

// readErrors tells, for a response of Client._send, the error of a failed read
// of its body: Canceled or Timeout when the caller's signal or the client's
// timer fired, else ConnectionFailed.
const readErrors = new WeakMap<Response, (e: unknown) => AgentFSError>();

// readBody reads resp's body with read, failing with the error readErrors tells.
async function readBody<T>(resp: Response, read: (r: Response) => Promise<T>): Promise<T> {
  try {
    return await read(resp);
  } catch (e) {
    throw (readErrors.get(resp) ?? ((x: unknown) => new ConnectionFailed("the answer broke off", { cause: x })))(e);
  }
}

const env = (name: string): string | undefined =>
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];

/**
 * Percent-encodes a workspace path (or a name) for a URL. fetch's URL parser
 * removes "." and ".." segments (even percent-encoded ones), so a path with
 * such segments, or an absolute one, travels as a single segment with its
 * slashes encoded: it reaches the daemon as written (which answers
 * path_escape where it climbs out) instead of being cleaned on the way.
 */
export function quotePath(path: string): string {
  const segs = path.split("/");
  if (!path.startsWith("/") && !segs.some((s) => s === "." || s === "..")) return segs.map(encodeURIComponent).join("/");
  const one = encodeURIComponent(path);
  return one === "." || one === ".." ? one + "%2F" : one;
}

function camel(k: string): string {
  return k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

// camelize turns the API's snake_case keys into camelCase (maps the user
// owns, metadata and env, keep their keys).
function camelize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(camelize);
  if (v === null || typeof v !== "object") return v;
  const out: Json = {};
  for (const [k, x] of Object.entries(v as Json)) {
    out[camel(k)] = k === "metadata" || k === "env" ? x : camelize(x);
  }
  return out;
}

function toBytes(b: Bytes): Uint8Array {
  return b instanceof Uint8Array ? b : new Uint8Array(b);
}

function b64encode(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

function b64decode(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function decodeOutput(v: unknown, encoding: string, binary: boolean): string | Uint8Array {
  const s = typeof v === "string" ? v : "";
  if (encoding === "base64") {
    const b = b64decode(s);
    return binary ? b : new TextDecoder().decode(b);
  }
  return binary ? new TextEncoder().encode(s) : s;
}

function execResult(d: Json, binary: boolean): ExecResult<string | Uint8Array> {
  const enc = typeof d.encoding === "string" ? d.encoding : "utf-8";
  const ch = d.changes as Json | null | undefined;
  return {
    exitCode: Number(d.exit_code), stdout: decodeOutput(d.stdout, enc, binary), stderr: decodeOutput(d.stderr, enc, binary),
    output: decodeOutput(d.output, enc, binary), timedOut: Boolean(d.timed_out), truncated: Boolean(d.truncated),
    durationMs: Number(d.duration_ms ?? 0),
    changes: ch ? { created: (ch.created as string[]) ?? [], modified: (ch.modified as string[]) ?? [], deleted: (ch.deleted as string[]) ?? [] } : null,
  };
}

function jobInfo(d: Json, binary: boolean): JobInfo<string | Uint8Array> {
  const j: JobInfo<string | Uint8Array> = { id: String(d.id), command: String(d.command ?? ""), started: String(d.started ?? ""), running: Boolean(d.running) };
  if (d.exit_code !== undefined && d.exit_code !== null) j.exitCode = Number(d.exit_code);
  if (d.result) j.result = execResult(d.result as Json, binary);
  if (d.error) {
    const e = d.error as Json;
    j.error = errorFrom(String(e.code ?? ""), String(e.message ?? ""), String(e.path ?? ""));
  }
  return j;
}

// execTimeout is the seconds that bound an exec's HTTP request.
function execTimeout(o: ExecOptions): number {
  if (o.requestTimeout === undefined) return (o.timeout ?? DEFAULT_EXEC_TIMEOUT) + EXEC_MARGIN;
  if (!(o.requestTimeout > 0)) throw new RangeError(`requestTimeout ${o.requestTimeout}: seconds, more than 0`);
  return o.requestTimeout;
}

function execBody(command: Command, o: ExecOptions): Json {
  const body: Json = {};
  if (typeof command === "string") body.command = command;
  else {
    if (command.length === 0) throw new TypeError("argv is empty: give a program and its arguments, or a shell line as a string");
    body.argv = [...command];
  }
  if (o.env && Object.keys(o.env).length) body.env = { ...o.env };
  if (o.cwd) body.cwd = o.cwd;
  if (o.timeout !== undefined) {
    if (!(o.timeout > 0)) throw new RangeError(`timeout ${o.timeout}: seconds, more than 0`);
    body.timeout = o.timeout;
  }
  if (o.outputLimit !== undefined) body.output_limit = o.outputLimit;
  // base64 carries bytes both ways: binary output, and stdin that is not UTF-8.
  let b64 = Boolean(o.binary);
  if (o.stdin !== undefined && typeof o.stdin !== "string") {
    const raw = toBytes(o.stdin);
    let text = "";
    try { text = new TextDecoder("utf-8", { fatal: true }).decode(raw); } catch { b64 = true; }
    if (b64) body.stdin = b64encode(raw);
    else if (text) body.stdin = text;
  } else if (o.stdin) {
    body.stdin = b64 ? b64encode(new TextEncoder().encode(o.stdin)) : o.stdin;
  }
  if (b64) body.encoding = "base64";
  return body;
}

interface Req extends RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  json?: unknown;
  body?: Uint8Array;
  headers?: Record<string, string>;
  /** Seconds that bound the request, the reading of its answer included (default: the client's); null: no bound. */
  timeout?: number | null;
  /** How many times a request that got no answer is sent again (default: the client's maxRetries). */
  retries?: number;
  accept?: string;
  /** Whether sending the request twice does what sending it once does (default: GET, HEAD, PUT, DELETE, OPTIONS). */
  idempotent?: boolean;
}

/** The methods whose requests are retried on connection errors unless told otherwise. */
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

// refused tells whether a fetch failed because the connection was refused:
// then nothing reached the daemon and any request may be sent again.
function refused(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x && typeof x === "object" && depth < 8; x = (x as { cause?: unknown }).cause, depth++) {
    if ((x as { code?: unknown }).code === "ECONNREFUSED") return true;
    const errs = (x as { errors?: unknown }).errors;
    if (Array.isArray(errs) && errs.some(refused)) return true;
  }
  return false;
}

/** @internal pause waits ms milliseconds, or less if signal aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => { clearTimeout(t); signal.removeEventListener("abort", done); resolve(); };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Options of the Client. */
export interface ClientOptions {
  /** The daemon's URL: default $AGENTFS_URL, else http://127.0.0.1:7070. */
  url?: string;
  /** The admin token or a workspace token: default $AGENTFS_TOKEN. */
  token?: string;
  /** Seconds that bound every request that does not run a command (default 60). */
  timeout?: number;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /**
   * How many times a request that got no answer is sent again (default 2), after
   * 100 ms, 200 ms, 400 ms... (at most 1 s): idempotent requests (GET, PUT,
   * DELETE, and the POSTs glob, grep, diff, virtualDiff, virtualDiscard, copy,
   * mkdir with parents, job wait and kill) on any connection error, every
   * request when the connection was refused (nothing reached the daemon). A
   * request that got an answer (even a broken one) is never sent again.
   */
  maxRetries?: number;
}

/** Options of createWorkspace. */
export interface CreateWorkspaceOptions extends RequestOptions {
  /** Start from this snapshot of the volume. */
  fromSnapshot?: string;
  /** Fork this workspace's head. */
  forkOf?: string;
  /** Make a virtual (copy-on-write) workspace over "snapshot:S" or an absolute host directory. */
  virtualBase?: string;
  /** Seconds; when they end the workspace is synced and unmounted (and deleted with deleteOnExpiry). */
  lifetime?: number;
  deleteOnExpiry?: boolean;
  metadata?: Record<string, string>;
  /** Where its commands run (default: the daemon's `--backend`), e.g. `{ type: "docker", image: "python:3.12" }`. */
  backend?: Backend;
}

/**
 * A connection to an `agentfs serve` daemon. Every method returns a promise and
 * takes an optional AbortSignal; failures reject with an AgentFSError subclass
 * chosen by the API's error code.
 */
export class Client {
  /** The daemon's URL, without a trailing slash. */
  readonly url: string;
  /** Seconds that bound a request that does not run a command. */
  readonly timeout: number;
  /** How many times a request that got no answer is sent again (see ClientOptions.maxRetries). */
  readonly maxRetries: number;
  readonly #token: string;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? env("AGENTFS_URL") ?? DEFAULT_URL;
    const token = options.token ?? env("AGENTFS_TOKEN");
    if (!token) {
      throw new TypeError("no agentfs token: pass { token } or set AGENTFS_TOKEN (the daemon's admin token is in " +
        "STATE_DIR/admin-token, e.g. ~/.local/state/agentfs/serve/admin-token)");
    }
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.timeout = options.timeout ?? 60;
    this.maxRetries = options.maxRetries ?? 2;
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0) throw new RangeError(`maxRetries ${options.maxRetries}: a whole number, 0 or more`);
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** @internal Sends one request and returns its response, or throws the API's error. */
  async _send(method: string, path: string, r: Req = {}): Promise<Response> {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(r.query ?? {})) {
      if (v !== undefined && v !== false) u.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { Authorization: "Bearer " + this.#token, "User-Agent": "agentfs-typescript/0.1", ...r.headers };
    let body: BodyInit | undefined;
    if (r.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(r.json);
    } else if (r.body !== undefined) {
      headers["Content-Type"] ??= "application/octet-stream";
      body = r.body as Uint8Array<ArrayBuffer>;
    }
    if (r.accept) headers.Accept = r.accept;
    const secs = r.timeout === undefined ? this.timeout : r.timeout;
    const timer = secs === null ? undefined : AbortSignal.timeout(Math.ceil(secs * 1000));
    const signals = [r.signal, timer].filter((x): x is AbortSignal => x !== undefined);
    const signal = signals.length === 1 ? signals[0] : AbortSignal.any(signals);
    const target = `${method} ${u.pathname}`;
    const idempotent = r.idempotent ?? IDEMPOTENT.has(method);
    const retries = r.retries ?? this.maxRetries;
    let resp: Response;
    for (let attempt = 0; ; attempt++) {
      try {
        // fetch resolves once the answer's head arrived: what fails later is
        // the body's read, which is never retried.
        resp = await this.#fetch(u, { method, headers, body, signal });
        break;
      } catch (e) {
        const why = aborted(e, r.signal, timer, target, secs);
        if (why) throw why;
        if (attempt < retries && (idempotent || refused(e))) {
          await pause(Math.min(100 * 2 ** attempt, 1000), signal);
          if (signal.aborted) throw aborted(e, r.signal, timer, target, secs) as AgentFSError;
          continue;
        }
        const tries = attempt > 0 ? ` after ${attempt + 1} tries` : "";
        throw new ConnectionFailed(`${target}: no answer from ${this.url}${tries} (${String((e as Error)?.cause ?? e)}); is agentfs serve running there?`, { cause: e });
      }
    }
    readErrors.set(resp, (e) => aborted(e, r.signal, timer, target, secs) ??
      new ConnectionFailed(`${target}: the answer from ${this.url} broke off (${String((e as Error)?.cause ?? e)})`, { cause: e }));
    if (resp.ok) return resp;
    const text = await resp.text().catch(() => "");
    let err: Json | undefined;
    try { err = (JSON.parse(text) as Json).error as Json; } catch { /* not JSON */ }
    if (!err || typeof err.code !== "string") {
      throw new ProtocolError(`${target}: HTTP ${resp.status} without an agentfs error body: ${text.slice(0, 200)}`, { status: resp.status });
    }
    throw errorFrom(err.code, String(err.message ?? ""), String(err.path ?? ""), resp.status);
  }

  /** @internal Sends one request and returns its JSON answer. */
  async _json(method: string, path: string, r: Req = {}): Promise<Json> {
    const resp = await this._send(method, path, r);
    const text = await readBody(resp, (x) => x.text());
    try {
      return JSON.parse(text) as Json;
    } catch (e) {
      throw new ProtocolError(`${method} ${path}: the answer is not JSON: ${text.slice(0, 200)}`, { cause: e, status: resp.status });
    }
  }

  /** GET /healthz: the daemon is up. */
  async health(o: RequestOptions = {}): Promise<Health> {
    const d = await this._json("GET", "/healthz", o);
    return { status: String(d.status ?? ""), version: String(d.version ?? "") };
  }

  /** The daemon's OpenAPI document. */
  async openapi(o: RequestOptions = {}): Promise<Json> {
    return this._json("GET", "/v1/openapi.json", o);
  }

  /**
   * Creates workspace `name` and returns its handle: empty by default, from a
   * snapshot (`fromSnapshot`), a fork of a workspace (`forkOf`) or virtual over a
   * base (`virtualBase`). Rejects with Exists if the name is taken.
   */
  async createWorkspace(name: string, o: CreateWorkspaceOptions = {}): Promise<Workspace> {
    if (o.fromSnapshot !== undefined && o.forkOf !== undefined) throw new TypeError("give fromSnapshot or forkOf, not both");
    const body: Json = { name };
    if (o.fromSnapshot !== undefined) body.from = "snapshot:" + o.fromSnapshot;
    if (o.forkOf !== undefined) body.from = o.forkOf;
    if (o.virtualBase !== undefined) { body.virtual = true; body.base = o.virtualBase; }
    if (o.lifetime !== undefined) body.lifetime = o.lifetime;
    if (o.deleteOnExpiry) body.delete_on_expiry = true;
    if (o.metadata) body.metadata = { ...o.metadata };
    if (o.backend) body.backend = { ...o.backend };
    const d = await this._json("POST", "/v1/workspaces", { json: body, timeout: this.timeout + 60, signal: o.signal });
    const info = camelize(d) as WorkspaceInfo;
    return new Workspace(this, info.name);
  }

  /** Creates workspace `name` as a fork of workspace `source`'s head (O(1): data is shared). */
  async fork(source: string, name: string, o: Omit<CreateWorkspaceOptions, "forkOf" | "fromSnapshot"> = {}): Promise<Workspace> {
    return this.createWorkspace(name, { ...o, forkOf: source });
  }

  /** The handle of workspace `name` (no request is made). */
  workspace(name: string): Workspace {
    return new Workspace(this, name);
  }

  /** Describes workspace `name`; NotFound if there is none. */
  async getWorkspace(name: string, o: RequestOptions = {}): Promise<WorkspaceInfo> {
    return camelize(await this._json("GET", "/v1/workspaces/" + quotePath(name), o)) as WorkspaceInfo;
  }

  /** Every workspace of the daemon (admin token). */
  async listWorkspaces(o: RequestOptions = {}): Promise<WorkspaceInfo[]> {
    const d = await this._json("GET", "/v1/workspaces", o);
    return camelize(d.workspaces ?? []) as WorkspaceInfo[];
  }

  /** Deletes workspace `name` (its branch goes too); NotFound unless `missingOk`. */
  async deleteWorkspace(name: string, o: RequestOptions & { missingOk?: boolean } = {}): Promise<void> {
    try {
      await this._send("DELETE", "/v1/workspaces/" + quotePath(name), { timeout: this.timeout + 60, signal: o.signal });
    } catch (e) {
      if (!(e instanceof NotFound && o.missingOk)) throw e;
    }
  }

  /** Mints a token scoped to `workspace` (read-only tokens may only read); its secret is in `.token`. */
  async createToken(workspace: string, o: RequestOptions & { readOnly?: boolean } = {}): Promise<TokenInfo> {
    const body: Json = { workspace };
    if (o.readOnly) body.read_only = true;
    return camelize(await this._json("POST", "/v1/tokens", { json: body, signal: o.signal })) as TokenInfo;
  }

  /** The workspace tokens (of `workspace` only, if given), without their secrets. */
  async listTokens(workspace?: string, o: RequestOptions = {}): Promise<TokenInfo[]> {
    const d = await this._json("GET", "/v1/tokens", { query: { workspace }, signal: o.signal });
    return camelize(d.tokens ?? []) as TokenInfo[];
  }

  /** Revokes a workspace token by its id. */
  async revokeToken(tokenId: string, o: RequestOptions = {}): Promise<void> {
    await this._send("DELETE", "/v1/tokens/" + quotePath(tokenId), o);
  }
}

// aborted tells why a fetch or a read failed when a signal fired: the caller's
// signal gives Canceled, the timeout Timeout; undefined if neither fired.
function aborted(e: unknown, caller: AbortSignal | undefined, timer: AbortSignal | undefined, target: string, secs: number | null): AgentFSError | undefined {
  if (caller?.aborted) return new Canceled(`${target}: canceled by the caller's AbortSignal`, { cause: e });
  if (timer?.aborted) return new Timeout(`${target}: no answer within ${secs} s (raise the timeout option)`, { cause: e });
  if (e instanceof AgentFSError) return e;
  return undefined;
}

/**
 * A running command's output as it happens: an async iterable of OutputChunk's;
 * once iterated to the end, `result()` resolves to the ExecResult (its stdout,
 * stderr and output are empty: they came as chunks). Breaking out of the loop
 * closes the connection.
 */
export class ExecStream<T extends string | Uint8Array = string> implements AsyncIterable<OutputChunk<T>> {
  #resp: Promise<Response>;
  #binary: boolean;
  #enc: string;
  #result: ExecResult<T> | undefined;
  #started = false;

  /** @internal */
  constructor(resp: Promise<Response>, binary: boolean, encoding: string) {
    this.#resp = resp;
    this.#binary = binary;
    this.#enc = encoding;
    // The rejection is seen by whoever iterates.
    resp.catch(() => undefined);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<OutputChunk<T>> {
    if (this.#started) throw new TypeError("an ExecStream is iterated once");
    this.#started = true;
    const resp = await this.#resp;
    if (!resp.body) throw new ProtocolError("exec stream: the answer has no body");
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    try {
      for (;;) {
        let chunk: ReadableStreamReadResult<string>;
        try {
          chunk = await reader.read();
        } catch (e) {
          throw (readErrors.get(resp) ?? ((x: unknown) => new ConnectionFailed("exec stream: the connection broke", { cause: x })))(e);
        }
        if (chunk.done) break;
        buf += chunk.value;
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) yield* this.#event(line);
        }
      }
      if (buf.trim()) yield* this.#event(buf.trim());
      if (!this.#result) throw new ProtocolError("exec stream ended without a result");
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }

  *#event(line: string): Generator<OutputChunk<T>> {
    let ev: Json;
    try { ev = JSON.parse(line) as Json; } catch { throw new ProtocolError(`exec stream: a line is not JSON: ${line.slice(0, 200)}`); }
    if (ev.type === "stdout" || ev.type === "stderr") {
      yield { stream: ev.type, data: decodeOutput(ev.data, this.#enc, this.#binary) as T };
    } else if (ev.type === "result") {
      this.#result = execResult(ev.result as Json, this.#binary) as ExecResult<T>;
    } else if (ev.type === "error") {
      const e = (ev.error ?? {}) as Json;
      throw errorFrom(String(e.code ?? ""), String(e.message ?? ""), String(e.path ?? ""));
    }
  }

  /** The command's result; drains the rest of the output first if the iteration did not end. */
  async result(): Promise<ExecResult<T>> {
    if (!this.#result) {
      if (!this.#started) for await (const _ of this) { /* drain */ }
      if (!this.#result) throw new ProtocolError("exec stream: the iteration stopped before the result");
    }
    return this.#result;
  }
}

/** A background job of a workspace (see Workspace.startJob). */
export class Job<T extends string | Uint8Array = string> {
  constructor(readonly workspace: Workspace, readonly id: string, private readonly binary: boolean = false) {}

  #path(suffix = ""): string {
    return this.workspace._path("/jobs/" + quotePath(this.id) + suffix);
  }

  /** The job: running, or its exit code and result. */
  async info(o: RequestOptions = {}): Promise<JobInfo<T>> {
    return jobInfo(await this.workspace.client._json("GET", this.#path(), o), this.binary) as JobInfo<T>;
  }

  /**
   * Waits for the job to end; rejects with Timeout if `timeout` seconds (default 30)
   * pass first (the job keeps running). null waits up to the daemon's maximum (24 h).
   */
  async wait(timeout: number | null = 30, o: RequestOptions = {}): Promise<JobInfo<T>> {
    const secs = timeout ?? 24 * 3600;
    const d = await this.workspace.client._json("POST", this.#path("/wait"), { query: { timeout: secs }, timeout: secs + EXEC_MARGIN, signal: o.signal, idempotent: true });
    return jobInfo(d, this.binary) as JobInfo<T>;
  }

  /** Kills the job's process tree and returns the ended job. */
  async kill(o: RequestOptions = {}): Promise<JobInfo<T>> {
    return jobInfo(await this.workspace.client._json("POST", this.#path("/kill"), { signal: o.signal, idempotent: true }), this.binary) as JobInfo<T>;
  }

  /** The output so far (stdout and stderr interleaved) from byte `offset`. */
  async output(offset = 0, o: RequestOptions = {}): Promise<JobOutput<T>> {
    const d = await this.workspace.client._json("GET", this.#path("/output"), { query: { offset }, signal: o.signal });
    return {
      output: decodeOutput(d.output, String(d.encoding ?? "utf-8"), this.binary) as T, offset: Number(d.offset ?? 0),
      nextOffset: Number(d.next_offset ?? 0), truncated: Boolean(d.truncated), running: Boolean(d.running),
    };
  }
}

type Out<B> = B extends true ? Uint8Array : string;

/**
 * A workspace of the daemon: commands, jobs, files, history. Paths are relative
 * to the workspace root; absolute paths and ".." that climb out reject with PathEscape.
 */
export class Workspace {
  constructor(readonly client: Client, readonly name: string) {}

  /** @internal */
  _path(suffix: string): string {
    return "/v1/workspaces/" + quotePath(this.name) + suffix;
  }

  #file(path: string): string {
    return this._path("/files/" + quotePath(path));
  }

  #fs(op: string): string {
    return this._path("/fs/" + op);
  }

  #long(): number {
    return this.client.timeout + 60;
  }

  // -- the workspace --

  /** Describes the workspace (status, head commit, bytes waiting, ...). */
  async info(o: RequestOptions = {}): Promise<WorkspaceInfo> {
    return this.client.getWorkspace(this.name, o);
  }

  /** Deletes the workspace. */
  async delete(o: RequestOptions = {}): Promise<void> {
    return this.client.deleteWorkspace(this.name, o);
  }

  /** Creates workspace `name` as a fork of this one's head, or of snapshot `snapshot` (admin token). */
  async fork(name: string, o: Omit<CreateWorkspaceOptions, "forkOf" | "fromSnapshot"> & { snapshot?: string } = {}): Promise<Workspace> {
    const { snapshot, ...rest } = o;
    if (snapshot) return this.client.createWorkspace(name, { ...rest, fromSnapshot: snapshot });
    return this.client.fork(this.name, name, rest);
  }

  // -- history --

  /** Saves the workspace's state now as snapshot `name` of the volume. */
  async saveSnapshot(name: string, message = "", o: RequestOptions = {}): Promise<Snapshot> {
    const body: Json = { name };
    if (message) body.message = message;
    return camelize(await this.client._json("POST", this._path("/snapshots"), { json: body, timeout: this.#long(), signal: o.signal })) as Snapshot;
  }

  /** The volume's snapshots (`unique` also computes what removing each would free). */
  async listSnapshots(o: RequestOptions & { unique?: boolean } = {}): Promise<Snapshot[]> {
    const d = await this.client._json("GET", this._path("/snapshots"), { query: { unique: o.unique }, timeout: this.#long(), signal: o.signal });
    return camelize(d.snapshots ?? []) as Snapshot[];
  }

  /** Removes snapshot `name`. */
  async deleteSnapshot(name: string, o: RequestOptions = {}): Promise<void> {
    await this.client._send("DELETE", this._path("/snapshots/" + quotePath(name)), o);
  }

  /** Makes the workspace's live state snapshot `snapshot`; the state before is kept as snapshot `saved`. */
  async restore(snapshot: string, message = "", o: RequestOptions = {}): Promise<RestoreResult> {
    const d = await this.client._json("POST", this._path("/snapshots/" + quotePath(snapshot) + "/restore"),
      { json: message ? { message } : {}, timeout: this.#long(), signal: o.signal });
    return { commit: String(d.commit ?? ""), saved: String(d.saved ?? "") };
  }

  /** The changes from `from` to `to` (a snapshot, a workspace, BRANCH@SEQ or "live"). */
  async diff(from: string, to = "live", o: RequestOptions & { path?: string; patch?: boolean } = {}): Promise<DiffResult> {
    const body: Json = { from, to };
    if (o.path) body.path = o.path;
    if (o.patch) body.patch = true;
    const d = await this.client._json("POST", this._path("/diff"), { json: body, timeout: this.#long(), signal: o.signal, idempotent: true });
    return { from: String(d.from ?? from), to: String(d.to ?? to), changes: camelize(d.changes ?? []) as HistoryChange[] };
  }

  /** The branches of the daemon's volume (one a workspace). */
  async branches(o: RequestOptions = {}): Promise<Branch[]> {
    const d = await this.client._json("GET", this._path("/branches"), o);
    return camelize(d.branches ?? []) as Branch[];
  }

  // -- virtual workspaces --

  /** A virtual workspace's changes over its base (`paths` limits them; `stat` adds line counts, `patch` unified diffs). */
  async virtualDiff(paths?: string[], o: RequestOptions & { stat?: boolean; patch?: boolean } = {}): Promise<VirtualDiffResult> {
    const body: Json = {};
    if (paths?.length) body.paths = paths;
    if (o.stat) body.stat = true;
    if (o.patch) body.patch = true;
    const d = await this.client._json("POST", this._path("/virtual/diff"), { json: body, timeout: this.#long(), signal: o.signal, idempotent: true });
    return { base: String(d.base ?? ""), changes: camelize(d.changes ?? []) as VirtualChange[] };
  }

  /** Writes a virtual workspace's changes (all, or `paths`) to its base; Conflict where the base changed the same paths, unless `force`. */
  async virtualCommit(paths?: string[], o: RequestOptions & { message?: string; snapshot?: string; force?: boolean } = {}): Promise<VirtualCommitResult> {
    const body: Json = {};
    if (paths?.length) body.paths = paths;
    if (o.message) body.message = o.message;
    if (o.snapshot) body.snapshot = o.snapshot;
    if (o.force) body.force = true;
    const d = await this.client._json("POST", this._path("/virtual/commit"), { json: body, timeout: this.#long(), signal: o.signal });
    return { commit: String(d.commit ?? ""), changes: camelize(d.changes ?? []) as VirtualChange[], pending: Number(d.pending ?? 0) };
  }

  /** Drops a virtual workspace's changes (all, or `paths`). */
  async virtualDiscard(paths?: string[], o: RequestOptions = {}): Promise<VirtualDiscardResult> {
    const d = await this.client._json("POST", this._path("/virtual/discard"), { json: paths?.length ? { paths } : {}, timeout: this.#long(), signal: o.signal, idempotent: true });
    return { discarded: camelize(d.discarded ?? []) as VirtualChange[], pending: Number(d.pending ?? 0) };
  }

  // -- the change feed --

  /**
   * Subscribes to the workspace's changes: an async iterable of ChangeEvent's, in
   * order, as they happen (`for await (const ev of ws.changes()) ...`). The request
   * starts at once; `await feed.ready` to know the subscription is open (changes
   * made after it are delivered). `path` keeps the events at or below that path
   * (and the creations and deletions of its ancestors);
   * `since` resumes after the event with that id. A dropped connection is opened
   * again from the last event's id (see ChangeFeed). The iteration ends after the
   * daemon's `end` event (workspace deleted or expired, daemon shutdown), rejects
   * with an AbortError when `signal` aborts, and ends when the loop is left or
   * close() is called (the connection is closed).
   */
  changes(o: ChangesOptions = {}): ChangeFeed {
    return new ChangeFeed(this, o);
  }

  // -- commands --

  /**
   * Runs `command` (a shell line, or an argv array run without a shell) and
   * resolves to its result once its process tree is gone and its writes are synced.
   * Aborting `signal` rejects with Canceled and the daemon kills the command.
   */
  async exec<O extends ExecOptions>(command: Command, o?: O): Promise<ExecResult<Out<O["binary"]>>> {
    const opts = o ?? ({} as ExecOptions);
    const body = execBody(command, opts);
    const d = await this.client._json("POST", this._path("/exec"), { json: body, timeout: execTimeout(opts), signal: opts.signal });
    return execResult(d, Boolean(opts.binary)) as ExecResult<Out<O["binary"]>>;
  }

  /** Runs `command` like exec, its output as an async iterable as it happens (NDJSON on the wire). */
  execStream<O extends ExecOptions>(command: Command, o?: O): ExecStream<Out<O["binary"]>> {
    const opts = o ?? ({} as ExecOptions);
    const body = execBody(command, opts);
    const resp = this.client._send("POST", this._path("/exec/stream"), {
      json: body, accept: "application/x-ndjson", timeout: execTimeout(opts), signal: opts.signal,
    });
    return new ExecStream(resp, Boolean(opts.binary), String(body.encoding ?? "utf-8"));
  }

  /** Starts `command` in the background and resolves to its Job at once (without `timeout` it runs until it ends or is killed). */
  async startJob<O extends ExecOptions>(command: Command, o?: O): Promise<Job<Out<O["binary"]>>> {
    const opts = o ?? ({} as ExecOptions);
    const d = await this.client._json("POST", this._path("/jobs"), { json: execBody(command, opts), signal: opts.signal });
    return new Job(this, String(d.id), Boolean(opts.binary));
  }

  /** The handle of job `id` (no request is made). */
  job<B extends boolean = false>(id: string, binary?: B): Job<Out<B>> {
    return new Job(this, id, Boolean(binary));
  }

  /** The workspace's jobs, running and ended. */
  async listJobs(o: RequestOptions = {}): Promise<JobInfo[]> {
    const d = await this.client._json("GET", this._path("/jobs"), o);
    return ((d.jobs ?? []) as Json[]).map((j) => jobInfo(j, false) as JobInfo);
  }

  // -- files --

  /** The file's content; NotFound, IsADirectory, PathEscape. */
  async readBytes(path: string, o: RequestOptions = {}): Promise<Uint8Array> {
    const resp = await this.client._send("GET", this.#file(path), o);
    return new Uint8Array(await readBody(resp, (x) => x.arrayBuffer()));
  }

  /** The file's content decoded as UTF-8. */
  async readText(path: string, o: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.readBytes(path, o));
  }

  /** `limit` lines after skipping `offset`, numbered in `cat -n` style, and the total line count. */
  async readNumbered(path: string, offset = 0, limit = 2000, o: RequestOptions = {}): Promise<NumberedRead> {
    const d = await this.client._json("GET", this.#file(path), { query: { numbered: true, offset, limit }, signal: o.signal });
    return camelize(d) as NumberedRead;
  }

  /** Writes the file (a string as UTF-8), creating missing parent directories. */
  async write(path: string, data: string | Bytes, o: RequestOptions = {}): Promise<WriteResult> {
    const raw = typeof data === "string" ? new TextEncoder().encode(data) : toBytes(data);
    const d = await this.client._json("PUT", this.#file(path), { body: raw, timeout: this.client.timeout + raw.length / (1 << 20), signal: o.signal });
    return { path: String(d.path ?? path), size: Number(d.size ?? 0) };
  }

  /** Replaces `old` by `new` and resolves to the occurrences replaced (missing: NotFound; several without replaceAll: NotUnique). */
  async edit(path: string, old: string, replacement: string, o: RequestOptions & { replaceAll?: boolean } = {}): Promise<number> {
    const body: Json = { path, old, new: replacement };
    if (o.replaceAll) body.replace_all = true;
    return Number((await this.client._json("POST", this.#fs("edit"), { json: body, signal: o.signal })).occurrences);
  }

  /** The entries of directory `path` ("" the root), sorted by path; `recursive` lists every entry below. */
  async listDir(path = "", o: RequestOptions & { recursive?: boolean; maxEntries?: number } = {}): Promise<FileInfo[]> {
    const d = await this.client._json("GET", this.#fs("list"), { query: { path, recursive: o.recursive, max_entries: o.maxEntries }, signal: o.signal });
    return camelize(d.entries ?? []) as FileInfo[];
  }

  /** Paths under `path` that match `pattern` ("**" matches any directories). */
  async glob(pattern: string, path = "", o: RequestOptions = {}): Promise<string[]> {
    const body: Json = { pattern };
    if (path) body.path = path;
    return ((await this.client._json("POST", this.#fs("glob"), { json: body, signal: o.signal, idempotent: true })).paths ?? []) as string[];
  }

  /** Lines matching `pattern` (RE2, or a plain string with `literal`) in files under `path` whose name matches `glob`. */
  async grep(pattern: string, path = "", o: RequestOptions & { glob?: string; literal?: boolean; ignoreCase?: boolean; maxResults?: number } = {}): Promise<GrepResult> {
    const body: Json = { pattern };
    if (path) body.path = path;
    if (o.glob) body.glob = o.glob;
    if (o.literal) body.literal = true;
    if (o.ignoreCase) body.ignore_case = true;
    if (o.maxResults) body.max_results = o.maxResults;
    const d = await this.client._json("POST", this.#fs("grep"), { json: body, signal: o.signal, idempotent: true });
    return { matches: camelize(d.matches ?? []) as GrepMatch[], truncated: Boolean(d.truncated) };
  }

  /** Describes `path` (a final symlink is not followed); NotFound if missing. */
  async stat(path: string, o: RequestOptions = {}): Promise<FileInfo> {
    return camelize(await this.client._json("GET", this.#fs("stat"), { query: { path }, signal: o.signal })) as FileInfo;
  }

  /** Whether `path` exists. */
  async exists(path: string, o: RequestOptions = {}): Promise<boolean> {
    return Boolean((await this.client._json("GET", this.#fs("exists"), { query: { path }, signal: o.signal })).exists);
  }

  /** Creates directory `path` (and missing parents with `parents`, where an existing directory is fine). */
  async mkdir(path: string, o: RequestOptions & { parents?: boolean } = {}): Promise<void> {
    const body: Json = { path };
    if (o.parents) body.parents = true;
    await this.client._send("POST", this.#fs("mkdir"), { json: body, signal: o.signal, idempotent: Boolean(o.parents) });
  }

  /** Removes a file, or a directory (a non-empty one only with `recursive`, else NotEmpty). */
  async remove(path: string, o: RequestOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.client._send("DELETE", this.#file(path), { query: { recursive: o.recursive }, signal: o.signal });
  }

  /** Renames (moves) `src` to `dst`. */
  async rename(src: string, dst: string, o: RequestOptions = {}): Promise<void> {
    await this.client._send("POST", this.#fs("rename"), { json: { from: src, to: dst }, signal: o.signal });
  }

  /** Copies the regular file `src` to `dst`. */
  async copy(src: string, dst: string, o: RequestOptions = {}): Promise<void> {
    await this.client._send("POST", this.#fs("copy"), { json: { from: src, to: dst }, signal: o.signal, idempotent: true });
  }

  /** Directory `path` ("" the root) as an uncompressed tar archive. */
  async downloadTar(path = "", o: RequestOptions = {}): Promise<Uint8Array> {
    const resp = await this.client._send("GET", this._path("/tar/" + quotePath(path)), { timeout: 24 * 3600, signal: o.signal });
    return new Uint8Array(await readBody(resp, (x) => x.arrayBuffer()));
  }

  /** Extracts the tar archive `data` into directory `path` (created with its parents); what it created and modified. */
  async uploadTar(data: Bytes, path = "", o: RequestOptions = {}): Promise<Changes | null> {
    const d = await this.client._json("PUT", this._path("/tar/" + quotePath(path)), {
      body: toBytes(data), headers: { "Content-Type": "application/x-tar" }, timeout: 24 * 3600, signal: o.signal,
    });
    return d ? { created: (d.created as string[]) ?? [], modified: (d.modified as string[]) ?? [], deleted: (d.deleted as string[]) ?? [] } : null;
  }
}
