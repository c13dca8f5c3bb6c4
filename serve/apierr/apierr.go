// Package apierr is the error answer of agentfs serve: it turns the
// sentinel errors of the packages a request can meet into a stable API
// error code and an HTTP status, with agentfs's one error table
// (internal/errcode, as the control socket extends it in
// fs/control.Errors) extended by the daemon's own sentinels (exec,
// serve/workspace).
// The HTTP API and the MCP tools both classify errors here, so a client sees
// the same code for the same failure whichever door it came through.
//
// Codes are part of the API contract (serve/openapi.json): they are only
// ever added, never renamed or given another meaning. An error that matches
// no entry of the table is "internal" (500).
package apierr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/errcode"
	"github.com/agentfs/agentfs/serve/workspace"
)

// Code is a stable API error code, e.g. "not_found" (internal/errcode,
// where the codes and their HTTP statuses are defined).
type Code = errcode.Code

// The API error codes (see internal/errcode).
const (
	NotFound        = errcode.NotFound
	Exists          = errcode.Exists
	PathEscape      = errcode.PathEscape
	NotADirectory   = errcode.NotADirectory
	IsADirectory    = errcode.IsADirectory
	NotEmpty        = errcode.NotEmpty
	NotUnique       = errcode.NotUnique
	PolicyRefused   = errcode.PolicyRefused
	Timeout         = errcode.Timeout
	Conflict        = errcode.Conflict
	Busy            = errcode.Busy
	Unauthorized    = errcode.Unauthorized
	Forbidden       = errcode.Forbidden
	InvalidArgument = errcode.InvalidArgument
	TooLarge        = errcode.TooLarge
	Expired         = errcode.Expired
	Unavailable     = errcode.Unavailable
	Canceled        = errcode.Canceled
	Internal        = errcode.Internal
	NoMatch         = errcode.NoMatch
	OutOfRange      = errcode.OutOfRange
	BinaryFile      = errcode.BinaryFile
)

// Codes lists every code, in a stable order.
func Codes() []Code { return errcode.Codes() }

// table is the daemon's error table, first match wins: a path escape
// first (it is never reported as anything else), then the context errors,
// the daemon's own sentinels (serve/workspace, exec), and the control
// socket's table (fs/control.Errors: fs/control's sentinels and those of
// every layer below, the errno values last).
var table = errcode.Join(
	errcode.Table{{Name: "exec.ErrPathEscape", Err: exec.ErrPathEscape, Code: PathEscape}},
	errcode.Context,
	errcode.Table{
		{Name: "serve/workspace.ErrNotFound", Err: workspace.ErrNotFound, Code: NotFound},
		{Name: "serve/workspace.ErrExists", Err: workspace.ErrExists, Code: Exists},
		{Name: "serve/workspace.ErrInvalidName", Err: workspace.ErrInvalidName, Code: InvalidArgument},
		{Name: "serve/workspace.ErrInvalidArgument", Err: workspace.ErrInvalidArgument, Code: InvalidArgument},
		{Name: "serve/workspace.ErrBusy", Err: workspace.ErrBusy, Code: Busy},
		{Name: "serve/workspace.ErrExpired", Err: workspace.ErrExpired, Code: Expired},
		{Name: "serve/workspace.ErrClosed", Err: workspace.ErrClosed, Code: Unavailable},

		{Name: "exec.ErrRefused", Err: exec.ErrRefused, Code: PolicyRefused},
		{Name: "exec.ErrNotUnique", Err: exec.ErrNotUnique, Code: NotUnique},
		{Name: "exec.ErrNoMatch", Err: exec.ErrNoMatch, Code: NoMatch},
		{Name: "exec.ErrUnknownJob", Err: exec.ErrUnknownJob, Code: NotFound},
		{Name: "exec.ErrOutOfRange", Err: exec.ErrOutOfRange, Code: OutOfRange},
		{Name: "exec.ErrBinary", Err: exec.ErrBinary, Code: BinaryFile},
		{Name: "exec.ErrInvalid", Err: exec.ErrInvalid, Code: InvalidArgument},
		{Name: "exec.ErrClosed", Err: exec.ErrClosed, Code: Unavailable},
		{Name: "exec.ErrSync", Err: exec.ErrSync, Code: Unavailable},
		{Name: "exec.ErrChanges", Err: exec.ErrChanges, Code: Internal},
		{Name: "exec.ErrDockerUnavailable", Err: exec.ErrDockerUnavailable, Code: Unavailable},
		{Name: "exec.ErrImageMissing", Err: exec.ErrImageMissing, Code: Unavailable},
		{Name: "exec.ErrRootUser", Err: exec.ErrRootUser, Code: InvalidArgument},
	},
	control.Errors,
)

// Error is an API error: the body {"error": Error} of every failed request,
// and the structured content of a failed MCP tool call. It is also an error
// value that handlers return to choose the code themselves.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Path is the workspace path the failed request named, if any.
	Path string `json:"path,omitempty"`
	// Rule is the name of the policy rule that refused a command
	// (policy_refused), e.g. "rm-root".
	Rule string `json:"rule,omitempty"`

	err error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the error that was classified, if any.
func (e *Error) Unwrap() error { return e.err }

// Status is the HTTP status of e's code.
func (e *Error) Status() int { return e.Code.Status() }

// New returns an *Error with code and a message formatted as fmt.Sprintf.
// Handlers use it for failures that no sentinel describes (a missing
// token, a malformed field).
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf classifies err: the code of an *Error it wraps, else of the first
// table entry it matches with errors.Is, else an *http.MaxBytesError is
// too_large, else internal. A nil err has no code ("").
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	if e, ok := table.Lookup(err); ok {
		return e.Code
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge
	}
	return Internal
}

// From returns err as an *Error: err itself (its Path filled in from path
// when empty) if it is one, else a new one with err's code and message.
// path is the workspace path the request named, "" for none.
func From(err error, path string) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		if ae.Path == "" && path != "" {
			c := *ae
			c.Path = path
			return &c
		}
		return ae
	}
	e := &Error{Code: CodeOf(err), Message: err.Error(), Path: path, err: err}
	var pe *exec.PolicyError
	if e.Code == PolicyRefused && errors.As(err, &pe) {
		e.Rule = pe.Rule
	}
	return e
}

// Write answers err over HTTP as every agentfs serve door does: the status
// of its code and the body {"error": {"code", "message", "path"}} as JSON
// (with <, > and & not escaped). err is classified as From(err, "") does,
// so an *Error keeps its code and path. Headers that depend on the door
// (Retry-After, WWW-Authenticate) are the caller's to set first.
func Write(w http.ResponseWriter, err error) {
	e := From(err, "")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status())
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body{e})
}

// body is the JSON body of every failed HTTP request.
type body struct {
	Error *Error `json:"error"`
}
