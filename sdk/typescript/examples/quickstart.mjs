// A tour of @agentfs/client against a running `agentfs serve`:
//   AGENTFS_URL=http://127.0.0.1:7070 AGENTFS_TOKEN=$(cat ~/.local/state/agentfs/serve/admin-token) \
//     node sdk/typescript/examples/quickstart.mjs
// (build first: cd sdk/typescript && npm install). It creates, uses and deletes
// one workspace and its fork, and prints what it does.
import { Client, NotFound } from "@agentfs/client";
import { AgentFSBackend } from "@agentfs/client/agent-backend";

const client = new Client();
const name = `quickstart-${process.pid}`;
const ws = await client.createWorkspace(name);
try {
  await ws.write("hello.sh", "echo hello from $WHO\n");
  const r = await ws.exec("sh hello.sh", { env: { WHO: "agentfs" } });
  console.log("exec:", r.exitCode, r.stdout.trim(), "changes:", r.changes);

  process.stdout.write("stream:");
  for await (const chunk of ws.execStream("for i in 1 2 3; do echo $i; sleep 0.1; done")) {
    process.stdout.write(" " + chunk.data.trim());
  }
  console.log();

  // The change feed: subscribe, make changes, watch them arrive in order.
  const feed = ws.changes({ path: "src" });
  await feed.ready;
  await ws.exec("mkdir -p src && echo 1 > src/a.txt && mv src/a.txt src/b.txt && touch notes.txt");
  for await (const ev of feed) {
    console.log("change:", ev.op, ev.type, ev.path); // notes.txt is outside src: not delivered
    if (ev.op === "created" && ev.path === "src/b.txt") break; // leaving the loop closes the feed
  }

  await ws.saveSnapshot(`${name}-v1`, "hello.sh");
  const fork = await ws.fork(`${name}-fork`);
  await fork.write("hello.sh", "echo changed\n");
  console.log("fork diff:", (await fork.diff(`${name}-v1`)).changes.map((c) => `${c.op} ${c.path}`));
  await fork.delete();
  await ws.deleteSnapshot(`${name}-v1`);

  const backend = new AgentFSBackend({ workspace: name, client });
  const user = backend.scope("users/alice", { env: { GREETING: "hi" } });
  await user.write("note.txt", "alice's note");
  console.log("agent-backend:", await user.exec("echo $GREETING; ls"), await user.readdir("."));
  await backend.destroy();

  await ws.readText("missing").catch((e) => console.log("error:", e instanceof NotFound, e.code));
} finally {
  await ws.delete();
}
