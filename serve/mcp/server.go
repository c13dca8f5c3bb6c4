package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/serve/apierr"
)

// Options configure NewServer.
type Options struct {
	// Version is the server version reported to clients; "" means "dev".
	Version string
	// Logger receives the SDK's log of server activity; nil means none.
	Logger *slog.Logger
}

// instructions tell a model what it is talking to.
const instructions = `These tools work on one agentfs workspace: a directory whose files live in blob storage, with snapshots.
All paths are relative to the workspace root ("src/main.go", "" or "." for the root); absolute paths and paths that leave the workspace are refused (error code path_escape).
Read a file before editing it; edit_file replaces an exact string. Commands run with their working directory in the workspace (sh -c); what they write is durable when execute returns.
A failed call returns an error whose text starts with a code: not_found, exists, path_escape, not_a_directory, is_a_directory, not_empty, not_unique, invalid_argument, timeout, policy_refused, conflict, busy, forbidden, too_large, unavailable or internal.`

// schemas caches the tools' schemas across servers.
var schemas = sdk.NewSchemaCache()

// NewServer returns an MCP server whose tools act on ws. The server is safe
// for concurrent use; serve it with Run over a transport (stdio).
func NewServer(ws Workspace, opts Options) *sdk.Server {
	return newServer(func(context.Context) Workspace { return ws }, opts)
}

// source yields the workspace of a tool call from the call's context; nil
// when there is none.
type source func(ctx context.Context) Workspace

func newServer(ws source, opts Options) *sdk.Server {
	v := opts.Version
	if v == "" {
		v = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "agentfs", Title: "agentfs workspace", Version: v},
		&sdk.ServerOptions{Instructions: instructions, Logger: opts.Logger, SchemaCache: schemas})
	s.AddReceivingMiddleware(edge)
	addFileTools(s, ws)
	addExecTools(s, ws)
	addHistoryTools(s, ws)
	return s
}

// edge is the middleware around every request: it turns absent or null
// tool arguments into {} (the SDK's default-filling panics on null), turns
// a panic into an internal error instead of a crash of the whole server,
// and gives a failed tool call the structured content {"error": {...}}, as
// the HTTP API's error bodies (invalid_argument for arguments the SDK
// refused against the input schema).
func edge(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				res, err = nil, fmt.Errorf("internal error in %s: %v", method, p)
			}
		}()
		if ct, ok := req.(*sdk.CallToolRequest); ok && ct.Params != nil {
			if raw := ct.Params.Arguments; len(raw) == 0 || string(raw) == "null" {
				ct.Params.Arguments = json.RawMessage("{}")
			}
		}
		res, err = next(ctx, method, req)
		if r, ok := res.(*sdk.CallToolResult); ok && r.IsError {
			var te *apierr.Error
			if !errors.As(r.GetError(), &te) {
				// The SDK refused the arguments (schema validation) before
				// any tool ran.
				te = apierr.New(apierr.InvalidArgument, "%v", r.GetError())
				r.Content = []sdk.Content{&sdk.TextContent{Text: te.Error()}}
			}
			r.StructuredContent = map[string]*apierr.Error{"error": te}
		}
		return res, err
	}
}

// call is one tool call's pinned workspace.
type call struct {
	Target
	release func()
	held    bool
}

// hold keeps the workspace pinned after the call returns; the caller must
// call the function it returns exactly once.
func (c *call) hold() func() {
	c.held = true
	return c.release
}

// admit asks the workspace's Admit to run a command and returns the
// function to call when it has ended.
func (c *call) admit(job bool) (func(), error) {
	if c.Admit == nil {
		return func() {}, nil
	}
	return c.Admit(job)
}

// handler is a tool's implementation.
type handler[In, Out any] func(ctx context.Context, c *call, in In) (Out, error)

// texter is an output whose text content, for the model, is better than
// its JSON.
type texter interface{ text() string }

// pathArg is an input that names a path, for the error's path field.
type pathArg interface{ errPath() string }

// addTool registers a tool: it pins the workspace for the call, runs h,
// and renders its error or its output.
func addTool[In, Out any](s *sdk.Server, ws source, t *sdk.Tool, h handler[In, Out]) {
	sdk.AddTool(s, t, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		var zero Out
		path := ""
		if p, ok := any(in).(pathArg); ok {
			path = p.errPath()
		}
		w := ws(ctx)
		if w == nil {
			return nil, zero, apierr.New(apierr.Internal, "no workspace for this request")
		}
		tgt, release, err := w.Acquire(ctx)
		if err != nil {
			return nil, zero, toolError(err, path)
		}
		c := &call{Target: tgt, release: release}
		defer func() {
			if !c.held {
				c.release()
			}
		}()
		if tgt.ReadOnly && (t.Annotations == nil || !t.Annotations.ReadOnlyHint) {
			return nil, zero, apierr.New(apierr.Forbidden, "%s changes the workspace, and this token is read-only", t.Name)
		}
		out, err := h(ctx, c, in)
		if err != nil {
			return nil, zero, toolError(err, path)
		}
		var res *sdk.CallToolResult
		if tx, ok := any(out).(texter); ok {
			res = &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tx.text()}}}
		}
		return res, out, nil
	})
}

// inputSchema is the schema inferred from In (descriptions from the
// jsonschema tags), with the given defaults. It panics on a default for a
// property In does not have: tool definitions are static.
func inputSchema[In any](defaults map[string]any) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err)
	}
	for name, v := range defaults {
		p, ok := s.Properties[name]
		if !ok {
			panic(fmt.Sprintf("default for %q: no such property", name))
		}
		if p.Default, err = json.Marshal(v); err != nil {
			panic(err)
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// Annotations of the tools.
var (
	readOnly    = &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	writes      = &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}
	destructive = &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}
	additive    = &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	runs        = &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}
)
