// Package mcp serves the operations of one agentfs workspace as Model
// Context Protocol tools, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): reading, writing, editing,
// listing and searching files, running commands (with a timeout, or in the
// background), and the workspace's history (snapshots, and the diff, commit
// and discard of a virtual workspace).
//
// The tools act on a Workspace, which yields an exec.Backend rooted at the
// workspace and, for an agentfs mount, the mount's control client. Two
// front ends use the package: `agentfs mcp MOUNTPOINT|URL` serves NewServer
// over stdio for one workspace, and the `agentfs serve` daemon mounts
// NewHandler at /mcp (streamable HTTP), with a resolver that picks the
// workspace of each request from its token.
//
// Every path a tool takes is relative to the workspace root; absolute
// paths, ".." that climbs out and symlinks that point out are refused with
// the path_escape code. A failed call is a tool error (isError) whose text
// starts with the API error code ("not_found: ...") and whose structured
// content is {"error": {"code", "message", "path"}}, the body the HTTP API
// uses.
//
// # What this package must never do
//
// It never serves a mount: commands run in the calling process through
// exec, with their working directory on a mount served by another process.
package mcp
