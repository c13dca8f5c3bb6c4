import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { startDaemon, unique } from "./daemon.mjs";
import { Client } from "../dist/index.js";
import { AgentFSBackend, BackendError, PathEscapeError, ExecError } from "../dist/agentBackend.js";

let daemon, client;
before(async () => {
  daemon = await startDaemon();
  client = new Client({ url: daemon.url, token: daemon.token });
});
after(async () => { await daemon?.stop(); });

test("agent-backend adapter: every method, scopes with env, errors, destroy", async () => {
  const name = unique("ab");
  const logs = [];
  const backend = new AgentFSBackend({ workspace: name, host: daemon.url, authToken: daemon.token, rootDir: "root", env: { A: "1" } });
  try {
    // The workspace is created on first use, the root directory too.
    await backend.write("f.txt", "hello");
    assert.equal((await client.getWorkspace(name)).name, name);
    assert.equal(await client.workspace(name).readText("root/f.txt"), "hello");
    assert.equal(await backend.read("f.txt"), "hello");
    assert.deepEqual(await backend.read("f.txt", { encoding: "buffer" }), new TextEncoder().encode("hello"));
    assert.equal(await backend.exec("cat f.txt; echo $A"), "hello1\n");
    const bin = await backend.exec("printf '\\377\\000\\001'", { encoding: "buffer" });
    assert.deepEqual(bin, new Uint8Array([255, 0, 1]));

    const user = backend.scope("users/u1", { env: { B: "2" }, operationsLogger: { log: (e) => logs.push(e) } });
    assert.equal(user.rootDir, "root/users/u1");
    assert.equal(await user.exec("echo $A$B$C; pwd", { env: { C: "3" } }).then((s) => s.split("\n")[0]), "123");
    assert.match(await user.exec("pwd"), /\/root\/users\/u1\n$/);
    const nested = user.scope("deep", { env: { B: "override" } });
    assert.equal(await nested.exec("echo $A$B"), "1override\n");
    assert.deepEqual(await backend.readdir("users/u1"), ["deep"]);

    await user.mkdir("d/e");
    await user.touch("d/e/t");
    await user.write("d/x", "x");
    await user.touch("d/x");
    assert.equal(await user.read("d/x"), "x");
    assert.deepEqual((await user.readdir("d")).sort(), ["e", "x"]);
    await user.rename("d/x", "d/y");
    assert.equal(await user.exists("d/x"), false);
    assert.equal(await user.exists("d/y"), true);
    const st = await user.stat("d/y");
    assert.equal(st.size, 1);
    assert.ok(st.isFile() && !st.isDirectory() && !st.isSymbolicLink());
    assert.ok(st.mtime instanceof Date && !isNaN(st.mtime.getTime()));
    assert.ok((await user.stat("d")).isDirectory());
    await assert.rejects(user.rm("d"), (e) => e instanceof BackendError && e.code === "not_empty");
    await user.rm("d", { recursive: true });
    await user.rm("gone", { force: true });
    await assert.rejects(user.rm("gone"), (e) => e instanceof BackendError && e.code === "not_found" && e.operation === "rm");

    await assert.rejects(user.read("../../../etc/passwd"), PathEscapeError);
    await assert.rejects(user.read("/etc/passwd"), PathEscapeError);
    assert.throws(() => user.scope(".."), PathEscapeError);
    const ex = await user.exec("echo out; echo bad >&2; exit 5").catch((e) => e);
    assert.ok(ex instanceof ExecError);
    assert.equal(ex.code, "EXEC_FAILED");
    assert.equal(ex.exitCode, 5);
    assert.equal(ex.stdout, "out\n");
    assert.equal(ex.stderr, "bad\n");
    await assert.rejects(user.exec("sleep 5", { timeoutMs: 300 }), (e) => e.code === "EXEC_TIMEOUT");

    assert.ok(logs.some((e) => e.operation === "exec" && e.success));
    assert.ok(logs.some((e) => e.operation === "rm" && !e.success && e.error));

    let closed = 0;
    user.trackCloseable({ close: () => { closed++; } });
    await user.destroy();
    await assert.rejects(user.exists("x"), (e) => e.code === "DESTROYED");
    assert.equal(closed, 0);
    await backend.destroy();
    assert.equal(closed, 1);
    await assert.rejects(backend.exists("x"), (e) => e.code === "DESTROYED");
  } finally {
    await client.deleteWorkspace(name, { missingOk: true });
  }
});

test("the example runs against the daemon", async () => {
  const ex = fileURLToPath(new URL("../examples/quickstart.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [ex], {
    env: { ...process.env, AGENTFS_URL: daemon.url, AGENTFS_TOKEN: daemon.token }, timeout: 120_000,
  });
  assert.match(stdout, /exec: 0 hello from agentfs/);
  assert.match(stdout, /stream: 1 2 3/);
  assert.match(stdout, /fork diff: \[ 'modified hello.sh' \]/);
  assert.match(stdout, /agent-backend: hi\nnote.txt\n \[ 'note.txt' \]/);
  assert.match(stdout, /error: true not_found/);
});
