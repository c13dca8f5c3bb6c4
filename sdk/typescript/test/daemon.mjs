// The tests' daemon: a real `agentfs serve` built from this repository (or
// $AGENTFS_BIN), on a free loopback port, with a temporary store, state
// directory and token. Nothing is mocked.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync, openSync, closeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const TOKEN = "tssdk-test-admin-token";

function freePort() {
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
