// The tests' daemon: a real `agentfs serve` built from this repository (or
// $AGENTFS_BIN), on a free loopback port, with a temporary store, state
// directory and token. Nothing is mocked.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync, openSync, closeSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const TOKEN = "tssdk-test-admin-token";

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts a daemon; resolves to { url, token, base, stop }. */
export async function startDaemon() {
  const base = mkdtempSync(join(tmpdir(), "agentfs-tssdk-"));
  let bin = process.env.AGENTFS_BIN;
  if (!bin) {
    bin = join(base, "agentfs");
    execFileSync("go", ["build", "-o", bin, "./cmd/agentfs"], { cwd: REPO, stdio: "inherit" });
  }
  writeFileSync(join(base, "token"), TOKEN);
  const env = { ...process.env, XDG_DATA_HOME: join(base, "data"), XDG_CACHE_HOME: join(base, "cache"), XDG_STATE_HOME: join(base, "xdg-state") };
  delete env.AGENTFS_TOKEN;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const logPath = join(base, "serve.log");
  const log = openSync(logPath, "w");
  const proc = spawn(bin, ["serve", "--listen", `127.0.0.1:${port}`, "--state-dir", join(base, "state"),
    "--token-file", join(base, "token"), "--log-level", "warn"], { env, stdio: ["ignore", log, log] });
  let exited = null;
  const done = new Promise((resolve) => proc.on("exit", (code, sig) => { exited = code ?? sig; resolve(exited); }));
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(url + "/healthz", { signal: AbortSignal.timeout(2000) });
      if (r.ok) break;
    } catch { /* not yet */ }
    if (exited !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`agentfs serve did not start; its log:\n${readFileSync(logPath, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url, token: TOKEN, base,
    async stop() {
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 120_000);
      const rc = await done;
      clearTimeout(t);
      closeSync(log);
      const text = readFileSync(logPath, "utf8");
      rmSync(base, { recursive: true, force: true });
      if (rc !== 0) throw new Error(`agentfs serve exited ${rc} on SIGTERM; its log:\n${text}`);
    },
  };
}

let n = 0;
/** A workspace name unique to this run. */
export function unique(prefix) {
  return `${prefix}-${process.pid}-${++n}`;
}

/**
 * A TCP proxy in front of the daemon at upstreamUrl, listening on 127.0.0.1:port
 * (0: a free one), to break connections the way networks do. For the n-th
 * connection (from 0), drop(n) true closes it when the daemon's answer begins
 * (the request reached the daemon; no byte of the answer reaches the client);
 * holdBodyMs delays what follows each answer's head; holdAnswerMs delays all
 * that the daemon sends on a connection (from its start). Resolves to
 * { url, connections(), open(), cut(), close() }: open() counts the connections
 * open through it, cut() closes them (new ones go through).
 */
export function startProxy(upstreamUrl, { port = 0, drop = () => false, holdBodyMs = 0, holdAnswerMs = 0 } = {}) {
  const up = new URL(upstreamUrl);
  let conns = 0;
  const sockets = new Set();
  const clients = new Set();
  const server = createServer((client) => {
    const n = conns++;
    clients.add(client);
    client.on("close", () => clients.delete(client));
    const upstream = connect(Number(up.port), up.hostname);
    if (holdAnswerMs) {
      upstream.pause();
      setTimeout(() => upstream.resume(), holdAnswerMs);
    }
    for (const s of [client, upstream]) { sockets.add(s); s.on("error", () => {}); s.on("close", () => sockets.delete(s)); }
    client.on("data", (d) => upstream.write(d));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    let head = Buffer.alloc(0);
    let held = false;
    upstream.on("data", (d) => {
      if (drop(n)) { client.destroy(); return; }
      if (!holdBodyMs) { client.write(d); return; }
      if (held) return; // the queued rest is written after the hold
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      client.write(head.subarray(0, end + 4));
      const rest = head.subarray(end + 4);
      head = Buffer.alloc(0);
      held = true;
      upstream.pause();
      setTimeout(() => {
        if (rest.length) client.write(rest);
        upstream.removeAllListeners("data");
        upstream.on("data", (x) => client.write(x));
        upstream.resume();
      }, holdBodyMs);
    });
  });
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(port, "127.0.0.1", () => resolve({
      url: `http://127.0.0.1:${server.address().port}`,
      connections: () => conns,
      open: () => clients.size,
      cut: () => { for (const s of sockets) s.destroy(); },
      close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
    }));
  });
}
