package mcp

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// ErrNoHistory: a history tool (snapshots, diff, commit, discard) was
// called on a workspace that is a plain directory, not an agentfs mount.
var ErrNoHistory = errors.New("this workspace is a plain directory, not an agentfs mount: it has no history")

// errTimeout: an execute call's command ran out of time and was killed.
var errTimeout = errors.New("command timed out")

// Error is a failed tool call as the client sees it: the structured
// content {"error": Error} of a result with isError set, and a text
// "CODE: MESSAGE".
type Error struct {
	// Code is the API error code (the table of the HTTP API: not_found,
	// path_escape, not_unique, timeout, ...).
	Code    string `json:"code"`
	Message string `json:"message"`
	// Path is the workspace path the failed call named, if it named one.
	Path string `json:"path,omitempty"`

	err error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the error that failed the call.
func (e *Error) Unwrap() error { return e.err }

// toolError classifies err for the client; path is the path the call
// named ("" for none).
func toolError(err error, path string) *Error {
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	return &Error{Code: errorCode(err), Message: err.Error(), Path: path, err: err}
}

// codes maps sentinel errors to API error codes, first match wins.
//
// It is the one place tool errors are classified; it gives way to the
// serve/apierr table, shared with the HTTP API, once that table exists.
var codes = []struct {
	err  error
	code string
}{
	{exec.ErrPathEscape, "path_escape"},
	{errTimeout, "timeout"},
	{context.DeadlineExceeded, "timeout"},
	{fs.ErrNotExist, "not_found"},
	{exec.ErrNoMatch, "not_found"},
	{exec.ErrUnknownJob, "not_found"},
	{snapshot.ErrNoSnapshot, "not_found"},
	{snapshot.ErrNoRef, "not_found"},
	{fs.ErrExist, "exists"},
	{snapshot.ErrSnapshotExists, "exists"},
	{syscall.ENOTDIR, "not_a_directory"},
	{syscall.EISDIR, "is_a_directory"},
	{syscall.ENOTEMPTY, "not_empty"},
	{exec.ErrNotUnique, "not_unique"},
	{snapshot.ErrAmbiguousRef, "not_unique"},
	{exec.ErrRefused, "policy_refused"},
	{overlay.ErrConflict, "conflict"},
	{overlay.ErrEntangled, "conflict"},
	{snapshot.ErrLeaseHeld, "busy"},
	{control.ErrBusy, "busy"},
	{exec.ErrInvalid, "invalid_argument"},
	{exec.ErrOutOfRange, "invalid_argument"},
	{exec.ErrBinary, "invalid_argument"},
	{snapshot.ErrBadName, "invalid_argument"},
	{control.ErrNotVirtual, "invalid_argument"},
	{overlay.ErrNeedParent, "invalid_argument"},
	{ErrNoHistory, "unavailable"},
	{exec.ErrClosed, "unavailable"},
	{control.ErrNotRunning, "unavailable"},
	{control.ErrNoHistory, "unavailable"},
}

// errorCode is the API error code of err: "internal" when no sentinel
// matches.
func errorCode(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "internal"
}
