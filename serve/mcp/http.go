package mcp

import (
	"context"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/serve/apierr"
)

// Resolver picks the workspace of an HTTP request to the MCP endpoint. It
// runs for every request, after the daemon has authenticated it; an error
// (an *apierr.Error, or any error apierr classifies) is answered as the
// HTTP API answers errors: the code's status and {"error": {...}}.
type Resolver func(r *http.Request) (Workspace, error)

type workspaceKey struct{}

// NewHandler serves the tools over MCP's streamable HTTP transport, for
// the workspace resolve picks for each request. The handler is stateless:
// every POST is authenticated and resolved on its own, with no session to
// steal or to lose when the daemon restarts (GET and DELETE, which only
// sessions use, answer 405). Answers are JSON, not event streams. One MCP
// server serves every request; the tools find the request's workspace in
// their context, which the SDK derives from the request's.
func NewHandler(resolve Resolver, opts Options) http.Handler {
	s := newServer(func(ctx context.Context) Workspace {
		ws, _ := ctx.Value(workspaceKey{}).(Workspace)
		return ws
	}, opts)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: opts.Logger,
			PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := resolve(r)
		if err != nil {
			apierr.Write(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), workspaceKey{}, ws)))
	})
}
