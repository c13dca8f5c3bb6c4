// Package serve is the HTTP API of `agentfs serve`: one daemon that serves
// many workspaces (serve/workspace) to agent platforms over JSON on HTTP,
// versioned under /v1 and described by the OpenAPI 3.1 document
// openapi.json (embedded, served at GET /v1/openapi.json; a test keeps the
// document and the routes equal).
//
// # Requests
//
// Every route but GET /healthz needs an "Authorization: Bearer TOKEN"
// header with the admin token (Options.AdminToken) or a workspace token
// minted by the admin (scoped to one workspace, optionally read-only,
// stored hashed under Options.StateDir, revocable). Tokens are compared in
// constant time. A missing or unknown token is 401 unauthorized; a
// workspace token used on another workspace, on an admin route, or a
// read-only token on a route that writes, is 403 forbidden.
//
// A request that names a workspace pins it (workspace.Manager.Acquire:
// mounted on first use) for its duration; a background job pins it until
// the job ends. Commands and file operations run through the workspace's
// exec.Backend, so every path is confined to the workspace: absolute paths,
// ".." climbing out and symlinks pointing out fail with path_escape.
//
// Every failure is a JSON body {"error": {"code", "message", "path"}} whose
// code and HTTP status come from the one table of serve/apierr.
//
// # Limits
//
// Bodies are capped (Options.MaxBodyBytes for file and tar uploads,
// Options.MaxJSONBytes for JSON requests), every request has a deadline
// (Options.RequestTimeout; a command's is its own timeout plus that), each
// workspace runs at most Options.MaxCommands commands at once and the
// server at most Options.MaxJobs background jobs. A client that goes away
// cancels its request: a command it was waiting for is killed. Writes to a
// slow client have a deadline, so no client can hold the daemon.
//
// # MCP
//
// Options.MCP, when set, is served at /mcp behind the same authentication:
// the MCP handler reads the caller's scope with CallerOf and pins
// workspaces through Options.Manager itself.
//
// # What this package must never do
//
// It never serves a mount (mount servers are processes of their own,
// started by serve/workspace) and never runs a command in a process that
// serves a mount.
package serve
