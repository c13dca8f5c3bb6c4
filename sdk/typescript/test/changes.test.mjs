// The change feed (Workspace.changes) against the real daemon: events of the
// SDK's file calls and of commands, in order; the path filter; resuming with
// since; the end when the workspace is deleted; reconnection after a dropped
// connection (through a proxy that cuts it); abort, close and break without
// leaking connections.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startDaemon, startProxy, unique } from "./daemon.mjs";
import { Client, ChangeFeed, ConnectionFailed, NotFound, PathEscape } from "../dist/index.js";

let daemon, client;
before(async () => {
  daemon = await startDaemon();
  client = new Client({ url: daemon.url, token: daemon.token });
});
after(async () => { await daemon?.stop(); });

async function withWs(fn) {
  const ws = await client.createWorkspace(unique("feed"));
  try { return await fn(ws); } finally { await client.deleteWorkspace(ws.name, { missingOk: true }); }
}

const WAIT_MS = 30_000;

// collect gathers the feed's events up to the first that `until` accepts
// (included); the feed is closed after WAIT_MS so that a missing event fails the
// test instead of hanging it. The iterator is kept open for more.
async function collect(it, until) {
  const out = [];
  const timer = setTimeout(() => it.feed.close(), WAIT_MS);
  try {
    for (;;) {
      const { value, done } = await it.next();
      if (done) break;
      out.push(value);
      if (until(value)) return out;
    }
  } finally { clearTimeout(timer); }
  throw new Error(`the feed ended before the awaited event; it gave ${JSON.stringify(ops(out))}`);
}

function iterate(feed) {
  const it = feed[Symbol.asyncIterator]();
  it.feed = feed;
  return it;
}

const ops = (evs) => evs.map((e) => [e.op, e.path]);
const stopAt = (path) => (ev) => ev.op === "created" && ev.path === path;

function isSubsequence(want, got) {
  let i = 0;
  for (const g of got) if (i < want.length && g[0] === want[i][0] && g[1] === want[i][1]) i++;
  return i === want.length;
}

async function waitFor(cond, what, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("changes: events of file calls and commands, in order", async () => withWs(async (ws) => {
  const feed = ws.changes();
  assert.ok(feed instanceof ChangeFeed);
  await feed.ready;
  await ws.write("a.txt", "one");
  await ws.write("a.txt", "two");
  await ws.mkdir("d");
  await ws.exec("echo x > d/x.txt && mv d/x.txt d/y.txt && rm a.txt");
  await ws.rename("d/y.txt", "z.txt");
  await ws.remove("z.txt");
  await ws.write("stop", "");
  const it = iterate(feed);
  const evs = await collect(it, stopAt("stop"));
  await it.return();
  const got = ops(evs);
  assert.ok(isSubsequence([["created", "a.txt"], ["modified", "a.txt"], ["created", "d"], ["created", "d/x.txt"],
    ["deleted", "d/x.txt"], ["created", "d/y.txt"], ["deleted", "a.txt"], ["deleted", "d/y.txt"], ["created", "z.txt"],
    ["deleted", "z.txt"], ["created", "stop"]], got), JSON.stringify(got));
  for (const [, p] of got) assert.ok(["a.txt", "d", "d/x.txt", "d/y.txt", "z.txt", "stop"].includes(p), p);
  for (const ev of evs) {
    assert.ok(["created", "modified", "deleted"].includes(ev.op) && ev.id && ev.time && ev.reason === undefined, JSON.stringify(ev));
  }
  assert.equal(evs.find((e) => e.path === "d").type, "dir");
  assert.equal(evs.find((e) => e.path === "a.txt").type, "file");
  assert.equal(new Set(evs.map((e) => e.id)).size, evs.length);
  assert.equal(feed.lastId, evs.at(-1).id);
}));

test("changes: the path filter", async () => withWs(async (ws) => {
  await ws.mkdir("keep/in", { parents: true });
  const feed = ws.changes({ path: "keep" });
  await feed.ready;
  await ws.write("other/a.txt", "no");
  await ws.write("keep/in/b.txt", "yes");
  await ws.write("keeper.txt", "no: a sibling whose name starts alike");
  await ws.exec("touch other/c.txt keep/c.txt");
  await ws.write("keep/stop", "");
  const it = iterate(feed);
  const evs = await collect(it, stopAt("keep/stop"));
  await it.return();
  assert.ok(evs.every((e) => e.path === "keep" || e.path.startsWith("keep/")), JSON.stringify(ops(evs)));
  assert.ok(isSubsequence([["created", "keep/in/b.txt"], ["created", "keep/c.txt"], ["created", "keep/stop"]], ops(evs)));
  await assert.rejects(ws.changes({ path: "../x" }).ready, PathEscape);
}));

test("changes: resume with since; an unknown id gives a reset first", async () => withWs(async (ws) => {
  let feed = ws.changes();
  await feed.ready;
  await ws.write("one", "");
  await ws.write("two", "");
  let it = iterate(feed);
  const first = await collect(it, stopAt("two"));
  await it.return();
  const one = first.find((e) => e.path === "one");
  await ws.write("three", "");
  it = iterate(ws.changes({ since: one.id }));
  const again = await collect(it, stopAt("three"));
  await it.return();
  const afterOne = first.slice(first.indexOf(one) + 1);
  assert.deepEqual(again.slice(0, afterOne.length), afterOne);
  assert.ok(ops(again.slice(afterOne.length)).some(([op, p]) => op === "created" && p === "three"));
  feed = ws.changes({ since: "no-such-epoch:1" });
  await feed.ready;
  await ws.write("four", "");
  it = iterate(feed);
  const evs = await collect(it, stopAt("four"));
  await it.return();
  assert.equal(evs[0].op, "reset");
  assert.ok(evs[0].reason);
  assert.equal(evs[0].path, "");
}));

test("changes: the feed ends when the workspace is deleted", async () => {
  const ws = await client.createWorkspace(unique("feed-end"));
  const feed = ws.changes();
  await feed.ready;
  await ws.write("a", "");
  const got = [];
  const done = (async () => { for await (const ev of feed) got.push(ev); })();
  await waitFor(() => got.length > 0, "the first event");
  await client.deleteWorkspace(ws.name);
  const timer = setTimeout(() => feed.close(), WAIT_MS);
  await done;
  clearTimeout(timer);
  assert.equal(feed.endReason, "deleted");
  assert.ok(ops(got).some(([op, p]) => op === "created" && p === "a"));
  await assert.rejects(ws.changes().ready, NotFound);
  await assert.rejects((async () => { for await (const _ of ws.changes()) { /* none */ } })(), NotFound);
});

test("changes: abort, close and break close the connection", async () => withWs(async (ws) => {
  const proxy = await startProxy(daemon.url);
  try {
    const via = new Client({ url: proxy.url, token: daemon.token }).workspace(ws.name);
    // abort: the pending iteration rejects with an AbortError, the connection closes.
    const ac = new AbortController();
    const feed = via.changes({ signal: ac.signal });
    await feed.ready;
    assert.equal(proxy.open(), 1);
    const pending = (async () => { for await (const _ of feed) { /* none */ } })();
    setTimeout(() => ac.abort(), 200);
    const t0 = Date.now();
    await assert.rejects(pending, (e) => e.name === "AbortError");
    assert.ok(Date.now() - t0 < 3000);
    await waitFor(() => proxy.open() === 0, "the aborted feed's connection to close");
    // close(): the pending iteration ends.
    const feed2 = via.changes();
    await feed2.ready;
    const ended = (async () => { const got = []; for await (const ev of feed2) got.push(ev); return got; })();
    setTimeout(() => feed2.close(), 200);
    assert.deepEqual(await ended, []);
    await waitFor(() => proxy.open() === 0, "the closed feed's connection to close");
    // break: leaving the loop closes it.
    const feed3 = via.changes();
    await feed3.ready;
    await ws.write("x", "");
    for await (const ev of feed3) { assert.equal(ev.path, "x"); break; }
    await waitFor(() => proxy.open() === 0, "the feed's connection to close after break");
    // an already aborted signal.
    await assert.rejects(via.changes({ signal: AbortSignal.abort() }).ready, (e) => e.name === "AbortError");
  } finally { await proxy.close(); }
}));

test("changes: a dropped connection is resumed from the last id; gives up after maxRetries", async () => withWs(async (ws) => {
  const proxy = await startProxy(daemon.url);
  try {
    const via = new Client({ url: proxy.url, token: daemon.token }).workspace(ws.name);
    const feed = via.changes();
    await feed.ready;
    await ws.write("before", "");
    const it = iterate(feed);
    const evs = await collect(it, stopAt("before"));
    proxy.cut();
    // Made while the feed is disconnected: delivered after it reconnects.
    await ws.write("during", "");
    await ws.write("after", "");
    evs.push(...await collect(it, stopAt("after")));
    await it.return();
    assert.ok(proxy.connections() >= 2);
    const got = ops(evs);
    assert.ok(isSubsequence([["created", "before"], ["created", "during"], ["created", "after"]], got), JSON.stringify(got));
    assert.equal(new Set(evs.map((e) => e.id)).size, evs.length, "an event came twice");
    // The daemon gone for good: the feed gives up after maxRetries failed attempts.
    const gone = via.changes({ maxRetries: 2 });
    await gone.ready;
    await proxy.close();
    const t0 = Date.now();
    await assert.rejects((async () => { for await (const _ of gone) { /* none */ } })(),
      (e) => e instanceof ConnectionFailed && /2 reconnection attempts.*since=/.test(e.message));
    assert.ok(Date.now() - t0 < 5000);
  } finally { await proxy.close(); }
}));
