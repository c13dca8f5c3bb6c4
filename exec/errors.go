package exec

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package. Every error a Backend returns for one of
// these conditions satisfies errors.Is with the matching sentinel; callers
// never look at message text.
var (
	// ErrPathEscape: a path (a file operation's argument, a Request.Cwd, a
	// Scope) is absolute, climbs out with "..", starts with "~", or
	// resolves through a symlink to a place outside the backend's root. The
	// concrete error is a *PathError.
	ErrPathEscape = errors.New("path escapes the workspace")

	// ErrRefused: the command policy refused a command. The concrete error
	// is a *PolicyError.
	ErrRefused = errors.New("command refused by policy")

	// ErrNotUnique: Edit found the old string more than once and replace-all
	// was not asked for.
	ErrNotUnique = errors.New("old string is not unique")

	// ErrNoMatch: Edit did not find the old string.
	ErrNoMatch = errors.New("old string not found")

	// ErrOutOfRange: Read was asked for a line offset at or past the end of
	// the file.
	ErrOutOfRange = errors.New("line offset past the end of the file")

	// ErrBinary: a text operation (Read, Edit) was applied to a file that
	// looks binary (it has a NUL byte in its first 8 KiB). ReadFile and
	// WriteFile handle any bytes.
	ErrBinary = errors.New("file is binary")

	// ErrInvalid: an argument is malformed (an empty command, both Command
	// and Argv set, an empty old string, removing the workspace root, ...).
	ErrInvalid = errors.New("invalid argument")

	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("backend closed")

	// ErrSync: the command ran, but the sync barrier (Syncer.Sync) failed
	// afterwards, so what it wrote may not be durable. Exec and Job.Wait
	// still return the Result alongside this error.
	ErrSync = errors.New("sync barrier failed")

	// ErrChanges: the command ran, but the change list could not be
	// computed. Exec and Job.Wait still return the Result (with Changes
	// nil) alongside this error.
	ErrChanges = errors.New("change list failed")

	// ErrUnknownJob: no job with that id exists in this backend.
	ErrUnknownJob = errors.New("unknown job")
)

// PathError reports a path refused because it leaves the backend's root.
// It satisfies errors.Is(err, ErrPathEscape).
type PathError struct {
	Op     string // the operation, e.g. "read", "cwd", "scope"
	Path   string // the path as the caller gave it
	Reason string // why it escapes, e.g. "absolute path", "symlink a -> /etc"
}

func (e *PathError) Error() string {
	return fmt.Sprintf("%s %q: %s: %s (paths are relative to the workspace root and must stay inside it)",
		e.Op, e.Path, ErrPathEscape, e.Reason)
}

// Is reports whether target is ErrPathEscape.
func (e *PathError) Is(target error) bool { return target == ErrPathEscape }

// PolicyError reports a command refused by a Policy. It satisfies
// errors.Is(err, ErrRefused).
type PolicyError struct {
	Rule    string // the name of the rule that matched, e.g. "rm-root"
	Command string // the command text that was checked
	Reason  string // a human-readable explanation
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s: rule %s: %s: %q", ErrRefused, e.Rule, e.Reason, e.Command)
}

// Is reports whether target is ErrRefused.
func (e *PolicyError) Is(target error) bool { return target == ErrRefused }
