import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startDaemon, startProxy, freePort, unique } from "./daemon.mjs";
import * as agentfs from "../dist/index.js";
import {
  Client, Workspace, AgentFSError, NotFound, Exists, PathEscape, IsADirectory, NotEmpty, NotUnique, Unauthorized,
  Forbidden, Canceled, Timeout, ConnectionFailed, InvalidArgument, ERRORS, errorFrom,
} from "../dist/index.js";

let daemon, client;
before(async () => {
  daemon = await startDaemon();
  client = new Client({ url: daemon.url, token: daemon.token });
});
after(async () => { await daemon?.stop(); });

async function withWs(fn, prefix = "t") {
  const ws = await client.createWorkspace(unique(prefix));
  try { return await fn(ws); } finally { await deleteSoon(ws.name); }
}

// deleteSoon deletes a workspace, waiting (up to 20 s) while a canceled
// command's process tree is still being killed (Busy).
async function deleteSoon(name) {
  for (let i = 0; ; i++) {
    try { return await client.deleteWorkspace(name, { missingOk: true }); } catch (e) {
      if (!(e instanceof agentfs.Busy) || i >= 200) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

test("health and openapi", async () => {
  const h = await client.health();
  assert.equal(h.status, "ok");
  const doc = await client.openapi();
  assert.ok(doc.paths["/v1/workspaces"]);
});

test("workspaces: create, get, list, delete", async () => {
  const name = unique("ws");
  const ws = await client.createWorkspace(name, { metadata: { owner_id: "me" } });
  assert.ok(ws instanceof Workspace);
  const info = await ws.info();
  assert.equal(info.name, name);
  assert.equal(typeof info.headCommit, "string");
  assert.equal(info.virtual, false);
  assert.deepEqual(info.metadata, { owner_id: "me" });
  assert.ok((await client.listWorkspaces()).some((w) => w.name === name));
  await assert.rejects(client.createWorkspace(name), Exists);
  await ws.delete();
  await assert.rejects(client.getWorkspace(name), NotFound);
  await assert.rejects(client.deleteWorkspace(name), NotFound);
  await client.deleteWorkspace(name, { missingOk: true });
});

test("workspaces: the backend chosen at creation is reported; docker options with local are refused", async () => {
  const ws = await client.createWorkspace(unique("be"), { backend: { type: "local" } });
  try {
    assert.equal((await ws.info()).backend.type, "local");
    assert.equal((await ws.exec("echo hi")).stdout, "hi\n");
  } finally { await deleteSoon(ws.name); }
  await assert.rejects(client.createWorkspace(unique("be"), { backend: { type: "local", image: "busybox" } }), InvalidArgument);
});

test("exec: text, argv, env, cwd, stdin, exit codes, changes", async () => withWs(async (ws) => {
  const r = await ws.exec("echo hi; echo err >&2; exit 3");
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.timedOut, false);
  const a = await ws.exec(["printf", "%s|", "a b", "c"]);
  assert.equal(a.stdout, "a b|c|");
  await ws.mkdir("sub");
  const e = await ws.exec("echo $FOO; pwd; cat", { env: { FOO: "bar" }, cwd: "sub", stdin: "in" });
  assert.match(e.stdout, /^bar\n.*\/sub\nin$/s);
  const c = await ws.exec("echo x > made.txt");
  assert.deepEqual(c.changes?.created, ["made.txt"]);
  const t = await ws.exec("sleep 5", { timeout: 0.5 });
  assert.equal(t.timedOut, true);
  assert.equal(t.exitCode, 137);
  await assert.rejects(ws.exec([]), TypeError);
}));

test("exec: binary round trip both ways (base64 on the wire)", async () => withWs(async (ws) => {
  const all = new Uint8Array(256).map((_, i) => i);
  const r = await ws.exec("cat", { stdin: all, binary: true });
  assert.ok(r.stdout instanceof Uint8Array);
  assert.deepEqual(r.stdout, all);
  const nonUtf8 = new Uint8Array([0xff, 0xfe, 0x00, 0x80]);
  const r2 = await ws.exec("od -An -tx1 | tr -d ' \\n'", { stdin: nonUtf8 });
  assert.equal(r2.stdout, "fffe0080");
}));

test("exec: AbortSignal cancels a running command", async () => withWs(async (ws) => {
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort(), 300);
  await assert.rejects(ws.exec("sleep 30", { signal: ac.signal }), Canceled);
  assert.ok(Date.now() - t0 < 10_000);
  // The daemon kills the command whose request went away: it never gets to its end.
  const ac2 = new AbortController();
  setTimeout(() => ac2.abort(), 500);
  await assert.rejects(ws.exec("touch started; sleep 2; touch finished", { signal: ac2.signal }), Canceled);
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(await ws.exists("started"), true);
  assert.equal(await ws.exists("finished"), false);
  // An already aborted signal never sends.
  await assert.rejects(ws.exec("true", { signal: AbortSignal.abort() }), Canceled);
}));

test("timeouts: a job wait that runs out rejects with the daemon's Timeout (504); the client's timeout before the answer's head with Timeout (0)", async () => withWs(async (ws) => {
  const j = await ws.startJob("sleep 30");
  // The wait's own timeout (not the client's 0.3 s: a wait's request is bounded by
  // its timeout + 60 s) runs out on the daemon, which answers 504.
  const c = new Client({ url: daemon.url, token: daemon.token, timeout: 0.3 });
  const t0 = Date.now();
  await assert.rejects(c.workspace(ws.name).job(j.id).wait(0.5), (e) => e instanceof Timeout && e.status === 504);
  const took = Date.now() - t0;
  assert.ok(took >= 450 && took < 10_000, `the wait answered after ${took} ms, not after its 0.5 s`);
  assert.equal((await j.info()).running, true, "a wait that times out leaves the job running");
  await j.kill();
  // No byte of the answer within the client's timeout: Timeout, status 0, at once.
  const proxy = await startProxy(daemon.url, { holdAnswerMs: 3000 });
  try {
    const via = new Client({ url: proxy.url, token: daemon.token, timeout: 0.3 }).workspace(ws.name);
    const t1 = Date.now();
    await assert.rejects(via.exists("x"), (e) => e instanceof Timeout && e.status === 0 && /within 0.3 s/.test(e.message));
    assert.ok(Date.now() - t1 < 2500, "rejected when the client's timeout fired");
  } finally { await proxy.close(); }
}));

test("execStream: chunks as they come, then the result", async () => withWs(async (ws) => {
  const s = ws.execStream("echo one; echo two >&2; sleep 0.2; echo three; exit 4");
  const chunks = [];
  for await (const ch of s) chunks.push(ch);
  const out = chunks.filter((c) => c.stream === "stdout").map((c) => c.data).join("");
  const err = chunks.filter((c) => c.stream === "stderr").map((c) => c.data).join("");
  assert.equal(out, "one\nthree\n");
  assert.equal(err, "two\n");
  const r = await s.result();
  assert.equal(r.exitCode, 4);
  // binary streaming, and result() draining by itself
  const all = new Uint8Array(256).map((_, i) => 255 - i);
  const b = ws.execStream("cat", { stdin: all, binary: true });
  const parts = [];
  for await (const ch of b) parts.push(ch.data);
  assert.deepEqual(Buffer.concat(parts), Buffer.from(all));
  assert.equal((await ws.execStream("exit 0").result()).exitCode, 0);
}));

test("execStream: AbortSignal stops the stream", async () => withWs(async (ws) => {
  const ac = new AbortController();
  const s = ws.execStream("while true; do echo tick; sleep 0.05; done", { signal: ac.signal });
  let n = 0;
  await assert.rejects((async () => {
    for await (const ch of s) {
      assert.equal(ch.stream, "stdout");
      if (++n === 3) ac.abort();
    }
  })(), Canceled);
  assert.ok(n >= 3);
}));

test("execStream: errors of the request reject the iteration", async () => {
  const s = client.workspace(unique("missing")).execStream("true");
  await assert.rejects(async () => { for await (const _ of s) { /* none */ } }, NotFound);
});

test("jobs: start, info, output, wait, kill, list", async () => withWs(async (ws) => {
  const j = await ws.startJob("echo started; sleep 0.3; echo done; exit 2");
  const first = await j.info();
  assert.equal(first.id, j.id);
  const w = await j.wait(30);
  assert.equal(w.running, false);
  assert.equal(w.exitCode, 2);
  assert.equal(w.result.stdout, "started\ndone\n");
  const o = await j.output();
  assert.equal(o.output, "started\ndone\n");
  assert.equal(o.nextOffset, 13);
  assert.equal((await j.output(8)).output, "done\n");
  const long = await ws.startJob("sleep 60");
  await assert.rejects(long.wait(0.2), Timeout);
  const k = await long.kill();
  assert.equal(k.running, false);
  const ids = (await ws.listJobs()).map((x) => x.id);
  assert.ok(ids.includes(j.id) && ids.includes(long.id));
  const bj = await ws.startJob("printf '\\377\\000'", { binary: true });
  assert.deepEqual((await bj.wait()).result.stdout, new Uint8Array([255, 0]));
  await assert.rejects(ws.job("nope").info(), NotFound);
}));

test("files: write, read, numbered, edit, stat, exists, list, glob, grep, mkdir, rename, copy, remove", async () => withWs(async (ws) => {
  const wr = await ws.write("a/b/c.txt", "line1\nline2\nline3\n");
  assert.deepEqual(wr, { path: "a/b/c.txt", size: 18 });
  assert.equal(await ws.readText("a/b/c.txt"), "line1\nline2\nline3\n");
  const nr = await ws.readNumbered("a/b/c.txt", 1, 1);
  assert.equal(nr.totalLines, 3);
  assert.match(nr.content, /2\tline2/);
  assert.equal(await ws.edit("a/b/c.txt", "line2", "LINE2"), 1);
  await assert.rejects(ws.edit("a/b/c.txt", "line", "x"), NotUnique);
  assert.equal(await ws.edit("a/b/c.txt", "line", "L", { replaceAll: true }), 2);
  await assert.rejects(ws.edit("a/b/c.txt", "absent", "x"), NotFound);
  const st = await ws.stat("a/b/c.txt");
  assert.equal(st.type, "file");
  assert.equal(st.name, "c.txt");
  assert.equal(typeof st.modTime, "string");
  assert.equal(await ws.exists("a/b/c.txt"), true);
  assert.equal(await ws.exists("nope"), false);
  await ws.mkdir("d");
  await ws.mkdir("x/y/z", { parents: true });
  assert.deepEqual((await ws.listDir()).map((e) => e.name), ["a", "d", "x"]);
  assert.ok((await ws.listDir("", { recursive: true })).some((e) => e.path === "x/y/z"));
  assert.deepEqual(await ws.glob("**/*.txt"), ["a/b/c.txt"]);
  const g = await ws.grep("LINE2", "", { literal: true });
  assert.deepEqual(g.matches, [{ path: "a/b/c.txt", line: 2, text: "LINE2" }]);
  assert.equal((await ws.grep("line2", "", { ignoreCase: true })).matches.length, 1);
  await ws.copy("a/b/c.txt", "d/copy.txt");
  await ws.rename("d/copy.txt", "d/moved.txt");
  assert.equal(await ws.exists("d/copy.txt"), false);
  assert.equal(await ws.readText("d/moved.txt"), await ws.readText("a/b/c.txt"));
  await assert.rejects(ws.remove("a"), NotEmpty);
  await ws.remove("a", { recursive: true });
  await ws.remove("d/moved.txt");
  await assert.rejects(ws.readBytes("a/b/c.txt"), NotFound);
  await assert.rejects(ws.readBytes("d"), IsADirectory);
  for (const p of ["../etc/passwd", "..", "/etc/passwd", "a/../../x"]) await assert.rejects(ws.readBytes(p), PathEscape, p);
  await assert.rejects(ws.write("../out.txt", "x"), PathEscape);
  await ws.write("x/../inside.txt", "in");
  assert.equal(await ws.readText("./inside.txt"), "in");
  // names that need percent-encoding
  await ws.write("sp ace/ü #?.txt", "q");
  assert.equal(await ws.readText("sp ace/ü #?.txt"), "q");
}));

test("files: binary round trip and tar", async () => withWs(async (ws) => {
  const data = new Uint8Array(70_000).map((_, i) => (i * 7 + 3) & 255);
  await ws.write("bin/data", data);
  assert.deepEqual(await ws.readBytes("bin/data"), data);
  await ws.write("bin/ab", data.buffer);
  assert.equal((await ws.stat("bin/ab")).size, 70_000);
  const tar = await ws.downloadTar("bin");
  assert.ok(tar.length > 70_000);
  const ch = await ws.uploadTar(tar, "copy");
  assert.ok(ch.created.includes("copy/data"));
  assert.deepEqual(await ws.readBytes("copy/data"), data);
}));

test("snapshots, restore, diff, branches, forks", async () => withWs(async (ws) => {
  await ws.write("f.txt", "v1");
  const snap = unique("snap");
  const s = await ws.saveSnapshot(snap, "first");
  assert.equal(s.name, snap);
  assert.ok((await ws.listSnapshots()).some((x) => x.name === snap));
  await ws.write("f.txt", "v2");
  await ws.write("g.txt", "new");
  const d = await ws.diff(snap);
  assert.deepEqual(d.changes.map((c) => [c.op, c.path]).sort(), [["added", "g.txt"], ["modified", "f.txt"]].sort());
  assert.equal(typeof d.changes[0].newSize, "number");
  const r = await ws.restore(snap);
  assert.ok(r.commit);
  assert.equal(await ws.readText("f.txt"), "v1");
  assert.equal(await ws.exists("g.txt"), false);
  const info = await ws.info();
  assert.ok((await ws.branches()).some((b) => b.name === info.branch && typeof b.head === "string"));

  const fromSnap = await client.createWorkspace(unique("fs"), { fromSnapshot: snap });
  const fork = await ws.fork(unique("fk"));
  const fork2 = await client.fork(ws.name, unique("fk"));
  const fork3 = await ws.fork(unique("fk"), { snapshot: snap });
  try {
    for (const w of [fromSnap, fork, fork2, fork3]) assert.equal(await w.readText("f.txt"), "v1");
    await fork.write("f.txt", "fork");
    assert.equal(await ws.readText("f.txt"), "v1");
  } finally {
    for (const w of [fromSnap, fork, fork2, fork3]) await w.delete();
  }
  await ws.deleteSnapshot(snap);
  await assert.rejects(ws.deleteSnapshot(snap), NotFound);
}));

test("virtual workspaces: diff, commit, discard", async () => withWs(async (base) => {
  await base.write("src/a.txt", "a\n");
  const snap = unique("vbase");
  await base.saveSnapshot(snap);
  const v = await client.createWorkspace(unique("v"), { virtualBase: "snapshot:" + snap });
  try {
    assert.equal((await v.info()).virtual, true);
    await v.write("src/a.txt", "a2\n");
    await v.write("src/b.txt", "b\n");
    await v.write("junk.txt", "junk");
    const d = await v.virtualDiff(undefined, { stat: true, patch: true });
    assert.deepEqual(d.changes.map((c) => c.path).sort(), ["junk.txt", "src/a.txt", "src/b.txt"]);
    const mod = d.changes.find((c) => c.path === "src/a.txt");
    assert.equal(typeof mod.oldSize, "number");
    assert.match(mod.patch, /\+a2/);
    const disc = await v.virtualDiscard(["junk.txt"]);
    assert.deepEqual(disc.discarded.map((c) => c.path), ["junk.txt"]);
    assert.equal(disc.pending, 2);
    const c = await v.virtualCommit(undefined, { message: "from ts", snapshot: unique("vc") });
    assert.ok(c.commit);
    assert.equal(c.pending, 0);
    assert.deepEqual((await v.virtualDiff()).changes, []);
  } finally {
    await v.delete();
  }
}));

test("tokens: scoped, read-only, revoked", async () => withWs(async (ws) => {
  const t = await client.createToken(ws.name);
  assert.ok(t.token && t.id && t.readOnly === false);
  const ro = await client.createToken(ws.name, { readOnly: true });
  assert.ok((await client.listTokens(ws.name)).map((x) => x.id).includes(ro.id));
  const scoped = new Client({ url: daemon.url, token: t.token }).workspace(ws.name);
  await scoped.write("x", "1");
  const reader = new Client({ url: daemon.url, token: ro.token }).workspace(ws.name);
  assert.equal(await reader.readText("x"), "1");
  await assert.rejects(reader.write("x", "2"), Forbidden);
  await assert.rejects(new Client({ url: daemon.url, token: t.token }).listWorkspaces(), Forbidden);
  await client.revokeToken(t.id);
  await assert.rejects(scoped.readText("x"), Unauthorized);
}));

test("errors: classes keyed by code, status, path; connection failures", async () => {
  assert.equal(ERRORS.not_found, NotFound);
  assert.equal(Object.keys(ERRORS).length, 24);
  const e = errorFrom("path_escape", "m", "p", 400);
  assert.ok(e instanceof PathEscape && e instanceof AgentFSError && e instanceof Error);
  assert.equal(e.code, "path_escape");
  assert.equal(errorFrom("brand_new", "m").constructor, AgentFSError);
  await withWs(async (ws) => {
    const err = await ws.readBytes("missing.txt").catch((x) => x);
    assert.ok(err instanceof NotFound);
    assert.equal(err.status, 404);
    assert.equal(err.path, "missing.txt");
    assert.equal(err.name, "NotFound");
    await assert.rejects(ws.exec("true", { timeout: -1 }).catch((x) => { throw x; }), RangeError);
    await assert.rejects(client.createWorkspace("bad/name"), InvalidArgument);
  });
  await assert.rejects(new Client({ url: daemon.url, token: "wrong" }).listWorkspaces(), Unauthorized);
  await assert.rejects(new Client({ url: "http://127.0.0.1:1", token: "x" }).health(), ConnectionFailed);
  assert.throws(() => new Client({ url: daemon.url, token: "" }), TypeError);
  assert.ok(agentfs.DEFAULT_URL.startsWith("http://"));
});

test("retries: a refused connection is retried for every call, until the daemon listens", async () => withWs(async (ws) => {
  const port = await freePort();
  const late = new Client({ url: `http://127.0.0.1:${port}`, token: daemon.token, maxRetries: 5 });
  let proxy;
  const listening = new Promise((r) => setTimeout(async () => { proxy = await startProxy(daemon.url, { port }); r(); }, 250));
  try {
    // exec is not idempotent, but a refused connection carried nothing to the daemon.
    const r = await late.workspace(ws.name).exec("echo ran >> log; cat log");
    assert.equal(r.stdout, "ran\n");
    await listening;
    assert.equal(proxy.connections(), 1);
  } finally { await listening; await proxy.close(); }
  const never = new Client({ url: `http://127.0.0.1:${await freePort()}`, token: daemon.token, maxRetries: 0 });
  const t0 = Date.now();
  await assert.rejects(never.health(), ConnectionFailed);
  assert.ok(Date.now() - t0 < 90, "maxRetries 0 does not wait");
  assert.throws(() => new Client({ url: daemon.url, token: "x", maxRetries: -1 }), RangeError);
}));

test("retries: an idempotent call whose connection broke is sent again; exec is not", async () => withWs(async (ws) => {
  await ws.write("a.txt", "A");
  // Every connection's first answer is dropped after the daemon made it.
  const proxy = await startProxy(daemon.url, { drop: (n) => n === 0 });
  try {
    const via = new Client({ url: proxy.url, token: daemon.token }).workspace(ws.name);
    assert.deepEqual(await via.glob("*.txt"), ["a.txt"]);
    assert.equal(proxy.connections(), 2);
  } finally { await proxy.close(); }
  const proxy2 = await startProxy(daemon.url, { drop: () => true });
  try {
    const via = new Client({ url: proxy2.url, token: daemon.token, maxRetries: 5 }).workspace(ws.name);
    await assert.rejects(via.exec("echo ran >> log"), ConnectionFailed);
    assert.equal(proxy2.connections(), 1, "the exec was sent once");
    await assert.rejects(via.readText("a.txt"), (e) => e instanceof ConnectionFailed && /after 6 tries/.test(e.message));
    assert.equal(proxy2.connections(), 7);
  } finally { await proxy2.close(); }
  // The daemon ran the command (its answer was dropped), once.
  assert.equal(await ws.readText("log"), "ran\n");
}));

test("timeouts: the client's timeout firing while the answer is read rejects with Timeout", async () => withWs(async (ws) => {
  // A streamed command prints once, then sleeps past the request's timeout.
  const t0 = Date.now();
  const s = ws.execStream("echo once; sleep 5; echo late", { requestTimeout: 1 });
  const seen = [];
  await assert.rejects((async () => { for await (const c of s) seen.push(c.data); })(),
    (e) => e instanceof Timeout && !(e instanceof ConnectionFailed) && /within 1 s/.test(e.message));
  assert.deepEqual(seen, ["once\n"]);
  assert.ok(Date.now() - t0 < 4000, "rejected when the timeout fired, before the command's end");
  assert.throws(() => ws.execStream("true", { requestTimeout: 0 }), RangeError);
  // A JSON answer and a file's bytes whose body is held past the client's timeout.
  await ws.write("a.txt", "A");
  const proxy = await startProxy(daemon.url, { holdBodyMs: 3000 });
  try {
    const via = new Client({ url: proxy.url, token: daemon.token, timeout: 1 }).workspace(ws.name);
    await assert.rejects(via.stat("a.txt"), Timeout);
    await assert.rejects(via.readBytes("a.txt"), Timeout);
  } finally { await proxy.close(); }
}));
