package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
)

// Caller is who made a request, from its token.
type Caller struct {
	// Admin: the admin token; every route is allowed.
	Admin bool
	// Workspace is the one workspace a workspace token may use ("" for
	// the admin).
	Workspace string
	// ReadOnly: a workspace token that may only read.
	ReadOnly bool
	// TokenID is the workspace token's id ("" for the admin).
	TokenID string
}

type callerKey struct{}

func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller of a request served at /mcp (the handler's
// ctx); ok is false for a context that did not come through the server.
func CallerOf(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// authenticate finds the caller from the Authorization header.
func (s *Server) authenticate(r *http.Request) (Caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Caller{}, apierr.New(apierr.Unauthorized, "no Authorization header: send \"Authorization: Bearer TOKEN\" with the admin token or a workspace token")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return Caller{}, apierr.New(apierr.Unauthorized, "the Authorization header is not \"Bearer TOKEN\"")
	}
	c, ok := s.tokens.lookup(strings.TrimSpace(tok))
	if !ok {
		return Caller{}, apierr.New(apierr.Unauthorized, "unknown or revoked token")
	}
	return c, nil
}

// authorize checks that the caller may use a route of kind a on workspace
// name (the route's {name}, "" for none).
func authorize(a access, c Caller, name string) error {
	if c.Admin || a == anyToken {
		return nil
	}
	switch a {
	case adminOnly:
		return apierr.New(apierr.Forbidden, "this route needs the admin token; a workspace token (of %q) cannot use it", c.Workspace)
	case wsRead, wsWrite:
		if name != c.Workspace {
			return apierr.New(apierr.Forbidden, "this token is scoped to workspace %q, not %q", c.Workspace, name)
		}
		if a == wsWrite && c.ReadOnly {
			return apierr.New(apierr.Forbidden, "this token of workspace %q is read-only", name)
		}
	}
	return nil
}

// tokenRecord is a workspace token as stored: its SHA-256, never the token.
type tokenRecord struct {
	ID        string    `json:"id"`
	Workspace string    `json:"workspace"`
	ReadOnly  bool      `json:"read_only"`
	Created   time.Time `json:"created"`
	Hash      string    `json:"sha256"`
}

// tokenStore holds the admin token's hash and the workspace tokens, saved
// in STATE_DIR/tokens.json (0600) on every change.
type tokenStore struct {
	file  string
	admin [32]byte

	mu   sync.Mutex
	recs []tokenRecord // guarded by mu
}

func openTokens(stateDir, admin string) (*tokenStore, error) {
	t := &tokenStore{file: filepath.Join(stateDir, "tokens.json"), admin: sha256.Sum256([]byte(admin))}
	data, err := os.ReadFile(t.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("workspace tokens: %w", err)
	default:
		if err := json.Unmarshal(data, &t.recs); err != nil {
			return nil, fmt.Errorf("workspace tokens %s: %w (fix or remove the file: its tokens are then revoked)", t.file, err)
		}
	}
	return t, nil
}

// lookup finds the caller a token belongs to. It compares the token's
// SHA-256 with every stored hash in constant time, the admin's included.
func (t *tokenStore) lookup(tok string) (Caller, bool) {
	sum := sha256.Sum256([]byte(tok))
	admin := subtle.ConstantTimeCompare(sum[:], t.admin[:]) == 1
	hexSum := hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	var found *tokenRecord
	for i := range t.recs {
		if subtle.ConstantTimeCompare([]byte(hexSum), []byte(t.recs[i].Hash)) == 1 {
			found = &t.recs[i]
		}
	}
	switch {
	case admin:
		return Caller{Admin: true}, true
	case found != nil:
		return Caller{Workspace: found.Workspace, ReadOnly: found.ReadOnly, TokenID: found.ID}, true
	}
	return Caller{}, false
}

// mint makes a token for workspace ws and stores its hash.
func (t *tokenStore) mint(ws string, readOnly bool, now time.Time) (tokenRecord, string, error) {
	id := make([]byte, 6)
	secret := make([]byte, 24)
	if _, err := rand.Read(id); err != nil {
		return tokenRecord{}, "", err
	}
	if _, err := rand.Read(secret); err != nil {
		return tokenRecord{}, "", err
	}
	rec := tokenRecord{ID: "tok-" + hex.EncodeToString(id), Workspace: ws, ReadOnly: readOnly, Created: now.UTC()}
	tok := "afs_" + hex.EncodeToString(id) + "_" + hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(tok))
	rec.Hash = hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	recs := append(slices.Clone(t.recs), rec)
	if err := t.saveLocked(recs); err != nil {
		return tokenRecord{}, "", err
	}
	return rec, tok, nil
}

// revoke removes the tokens for which drop is true and reports how many.
func (t *tokenStore) revoke(drop func(tokenRecord) bool) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := slices.DeleteFunc(slices.Clone(t.recs), drop)
	n := len(t.recs) - len(keep)
	if n == 0 {
		return 0, nil
	}
	return n, t.saveLocked(keep)
}

func (t *tokenStore) list() []tokenRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.recs)
}

// saveLocked writes recs (atomically: a temporary file renamed) and makes
// them current.
func (t *tokenStore) saveLocked(recs []tokenRecord) error {
	if recs == nil {
		recs = []tokenRecord{}
	}
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	tmp := t.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("save workspace tokens: %w", err)
	}
	if err := os.Rename(tmp, t.file); err != nil {
		return fmt.Errorf("save workspace tokens: %w", err)
	}
	t.recs = recs
	return nil
}

func (r tokenRecord) info() api.Token {
	return api.Token{ID: r.ID, Workspace: r.Workspace, ReadOnly: r.ReadOnly, Created: r.Created}
}

// createToken answers POST /v1/tokens.
func (s *Server) createToken(c *call) error {
	var req api.CreateToken
	if err := decode(c.r, &req); err != nil {
		return err
	}
	if req.Workspace == "" {
		return invalid("workspace: required (the workspace the token is scoped to)")
	}
	if _, err := s.mgr.Get(c.r.Context(), req.Workspace); err != nil {
		return err
	}
	rec, tok, err := s.tokens.mint(req.Workspace, req.ReadOnly, time.Now())
	if err != nil {
		return err
	}
	in := rec.info()
	in.Token = tok
	writeJSON(c.w, http.StatusCreated, in)
	return nil
}

// listTokens answers GET /v1/tokens (?workspace= filters).
func (s *Server) listTokens(c *call) error {
	ws := c.r.URL.Query().Get("workspace")
	out := []api.Token{}
	for _, r := range s.tokens.list() {
		if ws == "" || r.Workspace == ws {
			out = append(out, r.info())
		}
	}
	writeJSON(c.w, http.StatusOK, api.TokenList{Tokens: out})
	return nil
}

// deleteToken answers DELETE /v1/tokens/{id}.
func (s *Server) deleteToken(c *call) error {
	id := c.r.PathValue("id")
	n, err := s.tokens.revoke(func(r tokenRecord) bool { return r.ID == id })
	if err != nil {
		return err
	}
	if n == 0 {
		return apierr.New(apierr.NotFound, "no token %q", id)
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
