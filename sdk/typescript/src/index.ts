/** @agentfs/client: the TypeScript client of `agentfs serve`. */
export * from "./errors.js";
export * from "./client.js";
export * from "./feed.js";
