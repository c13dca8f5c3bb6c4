/**
 * agent-backend's backend interface on agentfs: `AgentFSBackend` is shaped like
 * agent-backend's remote filesystem backend, its storage an agentfs workspace.
 *
 * The seed that describes agent-backend (its README) gives the Python shape only,
 * so this follows the Python adapter (sdk/python/agentfs/compat/agent_backend.py)
 * in TypeScript idiom: every method returns a promise; `scope(path, { env,
 * operationsLogger })` gives a backend rooted in a subdirectory with its own
 * environment and logging; `exec(cmd, { encoding: "buffer" })` and
 * `read(path, { encoding: "buffer" })` give a Uint8Array; errors are
 * BackendError (`code`), PathEscapeError and DangerousOperationError (the
 * daemon's command policy refused the command).
 *
 *     const backend = new AgentFSBackend({ workspace: "org1" });
 *     const user = backend.scope("users/user1", { env: { NODE_ENV: "test" } });
 *     await user.write("script.js", code);
 *     console.log(await user.exec("node script.js"));
 *
 * Like agent-backend, exec resolves to the command's stdout and rejects with
 * ExecError (code "EXEC_FAILED", with exitCode, stdout and stderr) when it exits
 * non-zero. Paths are relative to the scope: absolute ones and ".." that climbs
 * out of it reject with PathEscapeError.
 */
import { Client, type Workspace } from "./client.js";
import { AgentFSError, NotFound } from "./errors.js";

/** How exec and read return data: a string (UTF-8) or a Uint8Array. */
export type Encoding = "utf8" | "buffer";

/** A backend operation failed; `code` says how (the API's error code, EXEC_FAILED, EXEC_TIMEOUT or DESTROYED). */
export class BackendError extends Error {
  constructor(message: string, readonly code: string = "BACKEND_ERROR", readonly operation?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** A path tried to escape the backend's scope. */
export class PathEscapeError extends BackendError {}
/** A command was blocked by safety validation (the daemon's command policy). */
export class DangerousOperationError extends BackendError {}
/** A command exited non-zero (code EXEC_FAILED): its exit code and output. */
export class ExecError extends BackendError {
  constructor(message: string, readonly exitCode: number, readonly stdout: string | Uint8Array, readonly stderr: string | Uint8Array, operation?: string) {
    super(message, "EXEC_FAILED", operation);
  }
}

/** One logged operation: its name, target (path or command), duration and outcome. */
export interface OperationLog {
  operation: string; target: string; durationMs: number; success: boolean; error?: string; timestamp: Date;
}
/** Receives every operation of a (scoped) backend. */
export interface OperationsLogger { log(entry: OperationLog): void }
/** Prints each operation as "[AgentBackend] exec: COMMAND". */
export class ConsoleOperationsLogger implements OperationsLogger {
  log(e: OperationLog): void {
    console.log(`[AgentBackend] ${e.operation}: ${e.target}${e.success ? "" : ` (failed: ${e.error})`}`);
  }
}

/** A scope's environment (added to every command's) and operations logger. */
export interface ScopeConfig { env?: Record<string, string>; operationsLogger?: OperationsLogger }
export interface ExecOptions { encoding?: Encoding; env?: Record<string, string>; cwd?: string; timeoutMs?: number; signal?: AbortSignal }
export interface ReadOptions { encoding?: Encoding }
export interface RmOptions { recursive?: boolean; force?: boolean }
export interface MkdirOptions { recursive?: boolean }

/** What stat tells of a path, with node:fs.Stats' predicates. */
export interface Stats {
  size: number; mode: number; mtime: Date;
  isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean;
}

/**
 * The backend's workspace (created if missing) on the daemon at `host` (default
 * $AGENTFS_URL) with `authToken` (default $AGENTFS_TOKEN). `rootDir` is a
 * directory inside the workspace that is the backend's root. `operationTimeoutMs`
 * bounds a command; `maxOutputLength` caps the bytes of output kept.
 */
export interface AgentFSBackendConfig {
  workspace: string; host?: string; authToken?: string; rootDir?: string; operationTimeoutMs?: number;
  maxOutputLength?: number; env?: Record<string, string>; client?: Client;
}

/** Maps a path of the backend's world to a workspace path ("" the root); PathEscapeError where it climbs out. */
function relative(p: string, op: string): string {
  if (p.startsWith("/")) throw new PathEscapeError(`${op} ${JSON.stringify(p)}: absolute path; paths are relative to the backend's scope`, "path_escape", op);
  if (p.startsWith("~")) throw new PathEscapeError(`${op} ${JSON.stringify(p)}: home directory expansion is not allowed in a workspace`, "path_escape", op);
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (!out.length) throw new PathEscapeError(`${op} ${JSON.stringify(p)}: '..' climbs out of the backend's scope`, "path_escape", op);
      out.pop();
    } else out.push(seg);
  }
  return out.join("/");
}

function convert(e: AgentFSError, op: string): BackendError {
  if (e.code === "path_escape") return new PathEscapeError(e.message, e.code, op, { cause: e });
  if (e.code === "policy_refused") return new DangerousOperationError(e.message, e.code, op, { cause: e });
  return new BackendError(e.message, e.code, op, { cause: e });
}

/** agent-backend's backend on an agentfs workspace (see the module's doc). */
export class AgentFSBackend {
  readonly type = "remote-filesystem";
  /** The backend's root inside the workspace ("" the workspace root). */
  readonly rootDir: string;
  readonly config: AgentFSBackendConfig;
  readonly client: Client;
  #parent: AgentFSBackend | undefined;
  #scope: ScopeConfig;
  #ws: Promise<Workspace> | undefined;
  #rootReady: boolean;
  #closeables: Array<{ close?: () => unknown; destroy?: () => unknown }> = [];
  #destroyed = false;

  constructor(config: AgentFSBackendConfig, scope?: { parent: AgentFSBackend; root: string; config: ScopeConfig }) {
    this.config = config;
    this.#parent = scope?.parent;
    this.client = scope?.parent.client ?? config.client ?? new Client({ url: config.host, token: config.authToken });
    this.rootDir = scope ? scope.root : relative(config.rootDir ?? "", "config");
    this.#scope = scope?.config ?? {};
    this.#rootReady = this.rootDir === "";
  }

  #workspace(): Promise<Workspace> {
    if (this.#parent) return this.#parent.#workspace();
    this.#ws ??= (async () => {
      const ws = this.client.workspace(this.config.workspace);
      try {
        await ws.info();
        return ws;
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;
        return this.client.createWorkspace(this.config.workspace);
      }
    })();
    this.#ws.catch(() => { this.#ws = undefined; });
    return this.#ws;
  }

  #path(p: string, op: string): string {
    const rel = relative(p, op);
    return this.rootDir && rel ? this.rootDir + "/" + rel : this.rootDir || rel;
  }

  #env(extra?: Record<string, string>): Record<string, string> {
    const chain: AgentFSBackend[] = [];
    for (let b: AgentFSBackend | undefined = this; b; b = b.#parent) chain.unshift(b);
    return Object.assign({}, this.config.env, ...chain.map((b) => b.#scope.env ?? {}), extra);
  }

  async #run<T>(op: string, target: string, fn: (ws: Workspace) => Promise<T>): Promise<T> {
    if (this.#destroyed) throw new BackendError(`${op} ${target}: the backend was destroyed`, "DESTROYED", op);
    const t0 = performance.now();
    let err: string | undefined;
    try {
      const ws = await this.#workspace();
      if (!this.#rootReady) {
        await ws.mkdir(this.rootDir, { parents: true });
        this.#rootReady = true;
      }
      return await fn(ws);
    } catch (e) {
      err = String((e as Error)?.message ?? e);
      throw e instanceof AgentFSError ? convert(e, op) : e;
    } finally {
      this.#scope.operationsLogger?.log({ operation: op, target, durationMs: performance.now() - t0, success: err === undefined, error: err, timestamp: new Date() });
    }
  }

  /** Runs the shell line `command` in the backend's root; its stdout (a Uint8Array with encoding "buffer"). ExecError if it exits non-zero. */
  exec(command: string, options: ExecOptions & { encoding: "buffer" }): Promise<Uint8Array>;
  exec(command: string, options?: ExecOptions): Promise<string>;
  async exec(command: string, o: ExecOptions = {}): Promise<string | Uint8Array> {
    const binary = o.encoding === "buffer";
    const cwd = o.cwd ? this.#path(o.cwd, "exec") : this.rootDir;
    return this.#run("exec", command, async (ws) => {
      const timeout = (o.timeoutMs ?? this.config.operationTimeoutMs ?? 120_000) / 1000;
      const r = await ws.exec(command, { env: this.#env(o.env), cwd: cwd || undefined, timeout, outputLimit: this.config.maxOutputLength ?? 10 << 20, binary, signal: o.signal });
      if (r.timedOut) throw new BackendError(`exec ${JSON.stringify(command)}: timed out after ${timeout} s`, "EXEC_TIMEOUT", "exec");
      if (r.exitCode !== 0) {
        const stderr = typeof r.stderr === "string" ? r.stderr : new TextDecoder().decode(r.stderr);
        throw new ExecError(`exec ${JSON.stringify(command)} exited ${r.exitCode}: ${stderr}`, r.exitCode, r.stdout, r.stderr, "exec");
      }
      return r.stdout;
    });
  }

  /** The file's content (a Uint8Array with encoding "buffer"). */
  read(path: string, options: ReadOptions & { encoding: "buffer" }): Promise<Uint8Array>;
  read(path: string, options?: ReadOptions): Promise<string>;
  async read(path: string, o: ReadOptions = {}): Promise<string | Uint8Array> {
    const p = this.#path(path, "read");
    return this.#run("read", path, async (ws) => (o.encoding === "buffer" ? ws.readBytes(p) : ws.readText(p)));
  }

  /** Writes the file (creating missing parent directories). */
  async write(path: string, content: string | Uint8Array): Promise<void> {
    const p = this.#path(path, "write");
    await this.#run("write", path, (ws) => ws.write(p, content));
  }

  async rename(oldPath: string, newPath: string): Promise<void> {
    const a = this.#path(oldPath, "rename"), b = this.#path(newPath, "rename");
    await this.#run("rename", `${oldPath} -> ${newPath}`, (ws) => ws.rename(a, b));
  }

  /** Removes a file or (with `recursive`) a directory tree; `force` ignores a missing path. */
  async rm(path: string, o: RmOptions = {}): Promise<void> {
    const p = this.#path(path, "rm");
    await this.#run("rm", path, async (ws) => {
      try {
        await ws.remove(p, { recursive: o.recursive });
      } catch (e) {
        if (!(e instanceof NotFound && o.force)) throw e;
      }
    });
  }

  /** The names in directory `path`. */
  async readdir(path = "."): Promise<string[]> {
    const p = this.#path(path, "readdir");
    return this.#run("readdir", path, async (ws) => (await ws.listDir(p)).map((e) => e.name));
  }

  /** Creates directory `path` (with its parents unless `recursive: false`). */
  async mkdir(path: string, o: MkdirOptions = {}): Promise<void> {
    const p = this.#path(path, "mkdir");
    await this.#run("mkdir", path, (ws) => ws.mkdir(p, { parents: o.recursive ?? true }));
  }

  /** Creates an empty file if `path` does not exist (else leaves its content). */
  async touch(path: string): Promise<void> {
    const p = this.#path(path, "touch");
    await this.#run("touch", path, async (ws) => {
      if (!(await ws.exists(p))) await ws.write(p, "");
    });
  }

  async exists(path: string): Promise<boolean> {
    const p = this.#path(path, "exists");
    return this.#run("exists", path, (ws) => ws.exists(p));
  }

  async stat(path: string): Promise<Stats> {
    const p = this.#path(path, "stat");
    return this.#run("stat", path, async (ws) => {
      const st = await ws.stat(p);
      return {
        size: st.size, mode: st.mode, mtime: new Date(st.modTime),
        isFile: () => st.type === "file", isDirectory: () => st.type === "dir", isSymbolicLink: () => st.type === "symlink",
      };
    });
  }

  /** A backend rooted at `path` under this one's root, its env added to every command's, its logger (or this one's). */
  scope(path: string, config: ScopeConfig = {}): AgentFSBackend {
    return new AgentFSBackend(this.config, {
      parent: this, root: this.#path(path, "scope"),
      config: { env: config.env, operationsLogger: config.operationsLogger ?? this.#scope.operationsLogger },
    });
  }

  /** Closes `closeable` (close() or destroy()) when the backend is destroyed; scoped backends hand it to their parent. */
  trackCloseable(closeable: { close?: () => unknown; destroy?: () => unknown }): void {
    if (this.#parent) this.#parent.trackCloseable(closeable);
    else this.#closeables.push(closeable);
  }

  /** Closes what was tracked; later calls reject with code DESTROYED (the workspace's data stays). */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    if (this.#parent) return;
    for (const c of this.#closeables.reverse()) await (c.close ?? c.destroy)?.call(c);
    this.#closeables = [];
  }
}
