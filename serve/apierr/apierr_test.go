package apierr

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/internal/errcode"
	"github.com/agentfs/agentfs/snapshot"
)

// sentinelPackages are the packages (directories relative to the module
// root; "/..." for a tree) whose sentinel errors a request can meet: the
// daemon's own, and every package below it (blobstore's subpackages are
// test support).
var sentinelPackages = []string{"exec", "serve/workspace", "snapshot/...", "overlay/...", "cache/...", "fs/...", "blobstore"}

// TestEverySentinelMapped parses the packages' sources and fails for any
// exported sentinel error (a package-level Err* variable made by
// errors.New or fmt.Errorf) that the table does not list, so that a new
// sentinel cannot silently become "internal".
func TestEverySentinelMapped(t *testing.T) {
	missing, found, err := errcode.Unmapped(table, filepath.Join("..", ".."), sentinelPackages...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range missing {
		t.Errorf("%s is a sentinel error that serve/apierr does not map: add it to the table in apierr.go (or internal/errcode, for a package below serve) with its API code", n)
	}
	if found < 70 {
		t.Fatalf("found only %d sentinels: the source scan is broken", found)
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Code
	}{
		{&exec.PathError{Op: "read", Path: "../x", Reason: "climbs"}, PathEscape},
		{fmt.Errorf("read %q: %w", "a", fs.ErrNotExist), NotFound},
		{fmt.Errorf("x: %w", syscall.ENOENT), NotFound},
		{fmt.Errorf("x: %w", syscall.ENOTDIR), NotADirectory},
		{fmt.Errorf("x: %w", syscall.EISDIR), IsADirectory},
		{fmt.Errorf("x: %w", syscall.ENOTEMPTY), NotEmpty},
		{fmt.Errorf("x: %w", syscall.EEXIST), Exists},
		{fmt.Errorf("edit: %w: 3 occurrences", exec.ErrNotUnique), NotUnique},
		{&exec.PolicyError{Rule: "rm-root"}, PolicyRefused},
		{fmt.Errorf("edit %q: %w", "a", exec.ErrNoMatch), NoMatch},
		{fmt.Errorf("read %q: %w", "a", exec.ErrOutOfRange), OutOfRange},
		{fmt.Errorf("read %q: %w", "a", exec.ErrBinary), BinaryFile},
		{fmt.Errorf("save: %w", snapshot.ErrSnapshotExists), Exists},
		{New(Unauthorized, "no token"), Unauthorized},
		{fmt.Errorf("wrapped: %w", New(Forbidden, "read-only token")), Forbidden},
		{&http.MaxBytesError{Limit: 10}, TooLarge},
		{errors.New("something else"), Internal},
		{nil, ""},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestStatuses pins the statuses the issue fixes and checks that every
// code has one.
func TestStatuses(t *testing.T) {
	for c, want := range map[Code]int{NotFound: 404, Exists: 409, Unauthorized: 401, Forbidden: 403,
		PathEscape: 400, InvalidArgument: 400, Internal: 500, Unavailable: 503} {
		if got := c.Status(); got != want {
			t.Errorf("%s: status %d, want %d", c, got, want)
		}
	}
	known := map[Code]bool{}
	for _, c := range Codes() {
		known[c] = true
	}
	for _, e := range table {
		if !known[e.Code] {
			t.Errorf("%s maps to unknown code %q", e.Name, e.Code)
		}
	}
}

func TestFromKeepsPath(t *testing.T) {
	e := From(fmt.Errorf("read %q: %w", "a/b", fs.ErrNotExist), "a/b")
	if e.Code != NotFound || e.Path != "a/b" || !errors.Is(e, fs.ErrNotExist) {
		t.Errorf("From = %+v", e)
	}
	orig := New(Busy, "too many commands")
	if got := From(orig, "x"); got.Code != Busy || got.Path != "x" || orig.Path != "" {
		t.Errorf("From(*Error) = %+v, original %+v", got, orig)
	}
}

// TestWrite checks the one HTTP error answer: the code's status, JSON, the
// body {"error": {...}} with the path kept and nothing HTML-escaped.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		body   string
	}{
		{From(fmt.Errorf("read %q: %w", "a<b", fs.ErrNotExist), "a<b"), 404,
			`{"error":{"code":"not_found","message":"read \"a<b\": file does not exist","path":"a<b"}}`},
		{New(Busy, "too many commands"), 429, `{"error":{"code":"busy","message":"too many commands"}}`},
		{errors.New("boom"), 500, `{"error":{"code":"internal","message":"boom"}}`},
		{fmt.Errorf("exec: %w", &exec.PolicyError{Rule: "rm-root", Command: "rm -rf /", Reason: "no"}), 403,
			`{"error":{"code":"policy_refused","message":"exec: command refused by policy: rule rm-root: no: \"rm -rf /\"","rule":"rm-root"}}`},
	} {
		rec := httptest.NewRecorder()
		Write(rec, tc.err)
		if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" ||
			strings.TrimSpace(rec.Body.String()) != tc.body {
			t.Errorf("Write(%v): %d %q %s, want %d application/json %s", tc.err, rec.Code,
				rec.Header().Get("Content-Type"), rec.Body.String(), tc.status, tc.body)
		}
	}
}
