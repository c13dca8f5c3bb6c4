// Package api holds the request and response bodies of the agentfs serve
// HTTP API (/v1), as Go types with their JSON names. The server (serve)
// and the Go client (serve/client) both use them, so they cannot drift;
// serve/openapi.json describes the same shapes for other languages.
//
// The package has no dependencies beyond the standard library, so that a
// client does not pull in the engine.
package api

import "time"

// Error is the body of every failed request: {"error": {...}}.
type Error struct {
	// Code is a stable error code (serve/apierr): not_found, exists,
	// path_escape, ...
	Code    string `json:"code"`
	Message string `json:"message"`
	// Path is the workspace path the request named, if any.
	Path string `json:"path,omitempty"`
	// Rule is the policy rule that refused a command (policy_refused).
	Rule string `json:"rule,omitempty"`
}

// ErrorBody wraps Error as the API sends it.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Health is the answer of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// CreateWorkspace is the body of POST /v1/workspaces.
type CreateWorkspace struct {
	Name string `json:"name"`
	// From: "" an empty workspace, "snapshot:S" a snapshot, or the name
	// of a workspace to fork.
	From string `json:"from,omitempty"`
	// Virtual: copy-on-write over Base ("snapshot:S" or an absolute host
	// directory the daemon may read); diff, commit and discard apply.
	Virtual bool   `json:"virtual,omitempty"`
	Base    string `json:"base,omitempty"`
	// Lifetime in seconds (0: none): when it ends, the workspace's
	// commands and jobs are killed and it is synced and unmounted (and
	// deleted with DeleteOnExpiry).
	Lifetime       float64           `json:"lifetime,omitempty"`
	DeleteOnExpiry bool              `json:"delete_on_expiry,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Backend chooses where the workspace's commands run; absent: the
	// daemon's default (agentfs serve --backend), whatever it is at each
	// mount.
	Backend *Backend `json:"backend,omitempty"`
}

// Backend types.
const (
	// BackendLocal runs commands on the daemon's host, as its user.
	BackendLocal = "local"
	// BackendDocker runs them in a container of the workspace (one per
	// mount), with the workspace at /workspace.
	BackendDocker = "docker"
)

// Backend is where a workspace's commands run. The docker options left
// out take the daemon's (agentfs serve --image, --user, --network,
// --memory, --cpus, --pids); they are refused with BackendLocal.
type Backend struct {
	// Type is BackendLocal or BackendDocker.
	Type string `json:"type"`
	// Image is the container's image; it must be present in the engine
	// (it is never pulled).
	Image string `json:"image,omitempty"`
	// User is the numeric "uid:gid" that runs the container and its
	// commands (default: the owner of the workspace's root; an empty
	// workspace's root belongs to User).
	User string `json:"user,omitempty"`
	// Network gives the container the engine's default network (none
	// otherwise: loopback only).
	Network bool `json:"network,omitempty"`
	// Memory is the container's memory limit in bytes (0: none).
	Memory int64 `json:"memory,omitempty"`
	// CPUs is its CPU limit (1.5: one and a half cores; 0: none).
	CPUs float64 `json:"cpus,omitempty"`
	// Pids is its process limit (0: 4096).
	Pids int64 `json:"pids,omitempty"`
}

// Workspace describes a workspace.
type Workspace struct {
	Name string `json:"name"`
	// Branch of the daemon's volume that holds it.
	Branch string `json:"branch"`
	// Status is "mounted" or "unmounted".
	Status       string     `json:"status"`
	HeadCommit   string     `json:"head_commit"`
	BytesWaiting int64      `json:"bytes_waiting"`
	Created      time.Time  `json:"created"`
	LastUsed     time.Time  `json:"last_used"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// DeleteOnExpiry and Expired describe the lifetime.
	DeleteOnExpiry bool              `json:"delete_on_expiry,omitempty"`
	Expired        bool              `json:"expired,omitempty"`
	Virtual        bool              `json:"virtual"`
	Base           string            `json:"base,omitempty"`
	From           string            `json:"from,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Backend is where its commands run: its creator's choice completed
	// with the daemon's defaults.
	Backend Backend `json:"backend"`
}

// WorkspaceList is the answer of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// CreateToken is the body of POST /v1/tokens.
type CreateToken struct {
	// Workspace the token is scoped to.
	Workspace string `json:"workspace"`
	// ReadOnly tokens may only read (files, stat, list, jobs' output).
	ReadOnly bool `json:"read_only,omitempty"`
}

// Token describes a workspace token; Token (the secret) is set only in
// the answer of POST /v1/tokens.
type Token struct {
	ID        string    `json:"id"`
	Workspace string    `json:"workspace"`
	ReadOnly  bool      `json:"read_only"`
	Created   time.Time `json:"created"`
	Token     string    `json:"token,omitempty"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Encodings of command input and output.
const (
	// EncodingUTF8 is the default: output is text, bytes that are not
	// UTF-8 become U+FFFD.
	EncodingUTF8 = "utf-8"
	// EncodingBase64 makes stdin and every output field base64, byte
	// for byte.
	EncodingBase64 = "base64"
)

// ExecRequest is the body of POST .../exec, .../exec/stream and .../jobs.
type ExecRequest struct {
	// Command is a shell line (sh -c); Argv a program and its arguments
	// run without a shell. Exactly one is set.
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Env is added to the command's environment: for the local backend
	// a base environment of the daemon's (PATH, HOME, locale, CA paths,
	// XDG_*; its whole environment with `agentfs serve --inherit-env`),
	// never agentfs's own secrets (AGENTFS_KEY, AGENTFS_TOKEN, ...) unless
	// Env sets them, and no proxy variables unless Env sets them or the
	// daemon inherits; for docker the image's.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory, relative to the workspace root.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is the standard input (base64 with EncodingBase64).
	Stdin string `json:"stdin,omitempty"`
	// Timeout in seconds; 0 means 120 s for exec, none for a job. The
	// whole process tree is killed when it passes (timed_out, exit 137).
	Timeout float64 `json:"timeout,omitempty"`
	// OutputLimit caps the bytes of output kept (stdout and stderr
	// together); 0 means 1 MiB.
	OutputLimit int64 `json:"output_limit,omitempty"`
	// Encoding is EncodingUTF8 ("" too) or EncodingBase64.
	Encoding string `json:"encoding,omitempty"`
	// Backend, admin token only, runs this command with a backend of its
	// own (a container started for it and removed when it ends, for
	// docker) instead of the workspace's; a workspace token gets
	// forbidden.
	Backend *Backend `json:"backend,omitempty"`
}

// Changes lists what a command created, modified and deleted, relative
// to the workspace root.
type Changes struct {
	Created  []string `json:"created"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// ExecResult is the result of a command.
type ExecResult struct {
	// ExitCode: 128+N for a command killed by signal N (137 on timeout),
	// 127 for a program not found.
	ExitCode int `json:"exit_code"`
	// Stdout, Stderr and Output (both, interleaved as received), in
	// Encoding.
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Output     string `json:"output"`
	Encoding   string `json:"encoding"`
	TimedOut   bool   `json:"timed_out"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	// Changes is null when change tracking failed.
	Changes *Changes `json:"changes"`
}

// StreamEvent is one line of POST .../exec/stream (NDJSON).
type StreamEvent struct {
	// Type is "stdout" or "stderr" (Data is output, in the request's
	// encoding), then "result" (the last line of a command that ran; its
	// stdout, stderr and output are empty: they came as events) or
	// "error" (the last line when it could not run or its result is not
	// valid).
	Type   string      `json:"type"`
	Data   string      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// Job describes a background job.
type Job struct {
	ID      string    `json:"id"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	// Running is true until the job's process tree is gone; then
	// ExitCode is set, and Result too in the answers of get, wait and
	// kill.
	Running  bool        `json:"running"`
	ExitCode *int        `json:"exit_code,omitempty"`
	Result   *ExecResult `json:"result,omitempty"`
	// Error is why a job that ended has no valid result.
	Error *Error `json:"error,omitempty"`
}

// JobList is the answer of GET .../jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// JobOutput is the answer of GET .../jobs/{id}/output.
type JobOutput struct {
	// Output is stdout and stderr interleaved, from byte Offset, in
	// Encoding.
	Output     string `json:"output"`
	Offset     int    `json:"offset"`
	NextOffset int    `json:"next_offset"`
	Encoding   string `json:"encoding"`
	Truncated  bool   `json:"truncated"`
	Running    bool   `json:"running"`
}

// FileInfo describes a directory entry (a final symlink not followed).
type FileInfo struct {
	// Path is relative to the workspace root.
	Path string `json:"path"`
	Name string `json:"name"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits (0o644 is 420).
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// NumberedRead is the answer of GET .../files/{path}?numbered=1.
type NumberedRead struct {
	Path string `json:"path"`
	// Content is the lines in cat -n style: the 1-based line number
	// right-aligned in six columns, a tab, the line, a newline.
	Content string `json:"content"`
	// Offset is the number of lines skipped, Lines the number returned,
	// TotalLines the file's.
	Offset     int `json:"offset"`
	Lines      int `json:"lines"`
	TotalLines int `json:"total_lines"`
}

// WriteResult is the answer of PUT .../files/{path}.
type WriteResult struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Exists is the answer of GET .../fs/exists.
type Exists struct {
	Exists bool `json:"exists"`
}

// Listing is the answer of GET .../fs/list.
type Listing struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// Mkdir is the body of POST .../fs/mkdir.
type Mkdir struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// Edit is the body of POST .../fs/edit: Old must occur exactly once
// unless ReplaceAll (not found: no_match; several: not_unique; a missing
// file is not_found, a binary one binary_file).
type Edit struct {
	Path       string `json:"path"`
	Old        string `json:"old"`
	New        string `json:"new"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// EditResult is the answer of POST .../fs/edit.
type EditResult struct {
	Occurrences int `json:"occurrences"`
}

// FromTo is the body of POST .../fs/rename and .../fs/copy.
type FromTo struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Glob is the body of POST .../fs/glob: Pattern ("**" matches any
// directories) under Path ("" the root).
type Glob struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

// GlobResult is the answer of POST .../fs/glob: paths relative to the
// workspace root, sorted.
type GlobResult struct {
	Paths []string `json:"paths"`
}

// Grep is the body of POST .../fs/grep.
type Grep struct {
	// Pattern is a regular expression (RE2), or a plain string with
	// Literal.
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"`
	Literal    bool   `json:"literal,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	// MaxResults caps the matches; 0 means 1000, negative no cap.
	MaxResults int `json:"max_results,omitempty"`
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// GrepResult is the answer of POST .../fs/grep.
type GrepResult struct {
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated"`
}

// SaveSnapshot is the body of POST .../snapshots.
type SaveSnapshot struct {
	// Name of the snapshot: snapshots are names of the whole volume, so
	// every workspace can start from one (from "snapshot:NAME").
	Name    string `json:"name"`
	Message string `json:"message,omitempty"`
}

// Snapshot describes a snapshot.
type Snapshot struct {
	Name string `json:"name"`
	// Commit is the commit it names (branch@seq).
	Commit  string    `json:"commit"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message,omitempty"`
	// UniqueBytes is what removing it would free (GET ...?unique=1 only).
	UniqueBytes *int64 `json:"unique_bytes,omitempty"`
}

// SnapshotList is the answer of GET .../snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// Restore is the (optional) body of POST .../snapshots/{snap}/restore.
type Restore struct {
	Message string `json:"message,omitempty"`
}

// RestoreResult is the answer of a restore: the workspace's new head, and
// the automatic snapshot of its state before ("" when it had none).
type RestoreResult struct {
	Commit string `json:"commit"`
	Saved  string `json:"saved,omitempty"`
}

// Diff is the body of POST .../diff: the changes from From to To, each a
// snapshot, a workspace (its head), BRANCH@SEQ, or "live" (the
// workspace's state now).
type Diff struct {
	From string `json:"from"`
	// To defaults to "live".
	To string `json:"to,omitempty"`
	// Path restricts the changes to a directory.
	Path string `json:"path,omitempty"`
	// Patch asks for unified diffs of text files.
	Patch bool `json:"patch,omitempty"`
}

// HistoryChange is one change of a Diff.
type HistoryChange struct {
	// Op is "added", "modified" or "deleted".
	Op   string `json:"op"`
	Path string `json:"path"`
	// Type is the newest side's type (file, dir, symlink, ...).
	Type    string `json:"type"`
	OldSize uint64 `json:"old_size"`
	NewSize uint64 `json:"new_size"`
	// What lists what a modification changed: content, type, mode, ...
	What  string `json:"what,omitempty"`
	Patch string `json:"patch,omitempty"`
}

// DiffResult is the answer of POST .../diff: the two commits compared
// and the changes, sorted by path.
type DiffResult struct {
	From    string          `json:"from"`
	To      string          `json:"to"`
	Changes []HistoryChange `json:"changes"`
}

// Fork is the body of POST .../fork: a new workspace from this one's
// head, or from one of the volume's snapshots.
type Fork struct {
	Name     string `json:"name"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Branch is a branch of the daemon's volume.
type Branch struct {
	Name string `json:"name"`
	// Head is its newest commit (branch@seq).
	Head string `json:"head"`
	// Writer: a mount holds the branch's writer lease now.
	Writer bool `json:"writer"`
}

// BranchList is the answer of GET .../branches.
type BranchList struct {
	Branches []Branch `json:"branches"`
}

// VirtualDiff is the body of POST .../virtual/diff.
type VirtualDiff struct {
	// Paths limits the answer to these paths and what is below them.
	Paths []string `json:"paths,omitempty"`
	// Stat asks for line counts; Patch for those and unified diffs.
	Stat  bool `json:"stat,omitempty"`
	Patch bool `json:"patch,omitempty"`
}

// VirtualChange is one change of a virtual workspace over its base.
type VirtualChange struct {
	// Op is "added", "modified", "deleted" or "renamed".
	Op   string `json:"op"`
	Path string `json:"path"`
	// From is a rename's source.
	From    string `json:"from,omitempty"`
	Type    string `json:"type"`
	Size    uint64 `json:"size"`
	OldSize uint64 `json:"old_size"`
	// Added and Deleted lines, and the unified diff, with stat or patch.
	Added   *int   `json:"added,omitempty"`
	Deleted *int   `json:"deleted,omitempty"`
	Binary  bool   `json:"binary,omitempty"`
	Patch   string `json:"patch,omitempty"`
}

// VirtualDiffResult is the answer of POST .../virtual/diff.
type VirtualDiffResult struct {
	// Base is what the changes are relative to.
	Base    string          `json:"base"`
	Changes []VirtualChange `json:"changes"`
}

// VirtualCommit is the body of POST .../virtual/commit.
type VirtualCommit struct {
	// Paths selects the changes (none: all).
	Paths   []string `json:"paths,omitempty"`
	Message string   `json:"message,omitempty"`
	// Snapshot names the new commit (snapshot bases only).
	Snapshot string `json:"snapshot,omitempty"`
	// Force commits even where the base changed the same paths.
	Force bool `json:"force,omitempty"`
}

// VirtualCommitResult is the answer of POST .../virtual/commit.
type VirtualCommitResult struct {
	// Commit is the new commit of the base branch (snapshot bases).
	Commit  string          `json:"commit,omitempty"`
	Changes []VirtualChange `json:"changes"`
	// Pending counts the changes left.
	Pending int `json:"pending"`
}

// VirtualDiscard is the body of POST .../virtual/discard.
type VirtualDiscard struct {
	Paths []string `json:"paths,omitempty"`
}

// VirtualDiscardResult is the answer of POST .../virtual/discard.
type VirtualDiscardResult struct {
	Discarded []VirtualChange `json:"discarded"`
	Pending   int             `json:"pending"`
}

// ChangeEvent is the data of an event of GET .../changes (server-sent
// events): a change ("change" events) or a reset ("reset" events).
type ChangeEvent struct {
	// ID is "EPOCH:SEQ", also the event's SSE id: pass it back as since
	// (or Last-Event-ID) to resume after it. Opaque to clients.
	ID string `json:"id"`
	// Op is "created", "modified" or "deleted"; "reset" for a reset
	// (events may have been missed: re-list the workspace if you need
	// its whole state).
	Op string `json:"op"`
	// Path is relative to the workspace's root (not for resets).
	Path string `json:"path,omitempty"`
	// Type is "file", "dir", "symlink" or "other" (not for resets).
	Type string    `json:"type,omitempty"`
	Time time.Time `json:"time"`
	// Reason says why a reset happened: "unknown_id", "overflow",
	// "replaced" or "remounted".
	Reason string `json:"reason,omitempty"`
}

// ChangeEnd is the data of the last event of GET .../changes ("end"),
// after which the server closes the stream.
type ChangeEnd struct {
	// Reason is "deleted", "expired", "shutdown" or "unavailable".
	Reason string `json:"reason"`
}
