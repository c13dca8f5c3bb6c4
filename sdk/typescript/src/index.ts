/**
 * @agentfs/client: the TypeScript client of `agentfs serve`.
 *
 * ```ts
 * const ws = await new Client().createWorkspace("demo");   // $AGENTFS_URL, $AGENTFS_TOKEN
 * await ws.write("hello.py", "print('hi')");
 * console.log((await ws.exec("python3 hello.py")).stdout);
 * const feed = ws.changes();                                // the change feed: events as they happen
 * await feed.ready;
 * await ws.write("a.txt", "x");
 * for await (const ev of feed) { console.log(ev.op, ev.path); break; } // created a.txt
 * ```
 */
export * from "./errors.js";
export * from "./client.js";
export * from "./feed.js";
