package errcode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/snapshot"
)

// TestEverySentinelMapped fails for any sentinel error of the layers below
// fs/control that Below does not list (fs/control's own are checked by
// its tests, exec's and serve's by serve/apierr's). blobstore's
// subpackages are test support (blobstoretest, faulty), not scanned.
func TestEverySentinelMapped(t *testing.T) {
	missing, found, err := Unmapped(Below, "../..", "blobstore", "snapshot/...", "cache/...", "overlay/...", "fs", "fs/changefeed")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range missing {
		t.Errorf("%s is a sentinel error that internal/errcode does not map: add it to Engine with its code", n)
	}
	if found < 45 {
		t.Fatalf("found only %d sentinels: the source scan is broken", found)
	}
}

func TestEveryEntryHasACode(t *testing.T) {
	if len(statuses) != len(Codes()) {
		t.Errorf("%d statuses for %d codes", len(statuses), len(Codes()))
	}
	for _, e := range Below {
		if _, ok := statuses[e.Code]; !ok {
			t.Errorf("%s maps to unknown code %q", e.Name, e.Code)
		}
	}
}

func TestLookup(t *testing.T) {
	withContext := Join(Context, Below)
	if e, _ := withContext.Lookup(fmt.Errorf("x: %w: %w", snapshot.ErrMissing, context.Canceled)); e.Name != "context.Canceled" {
		t.Errorf("a cancellation wrapped in a sentinel is %q in Join(Context, Below)", e.Name)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("fsck: %w", snapshot.ErrCorrupt), "snapshot.ErrCorrupt"},
		{fmt.Errorf("x: %w", syscall.ENOENT), "io/fs.ErrNotExist"},
		{fmt.Errorf("x: %w", cache.ErrReadOnly), "cache.ErrReadOnly"},
		// A full file:// store: its kind's sentinel, not the errno below it.
		{&blobstore.Error{Op: "put", URL: "file:///s", Kind: blobstore.KindNoSpace, Err: &os.PathError{Op: "write", Path: "/s/x", Err: syscall.ENOSPC}}, "blobstore.ErrNoSpace"},
	} {
		e, ok := Below.Lookup(tc.err)
		if !ok || e.Name != tc.want {
			t.Errorf("Lookup(%v) = %q, %v; want %q", tc.err, e.Name, ok, tc.want)
		}
	}
	if _, ok := Below.Lookup(errors.New("other")); ok {
		t.Error("an unknown error matched an entry")
	}
	if _, ok := Below.Lookup(nil); ok {
		t.Error("nil matched an entry")
	}
}

func TestJoinDropsRepeatsAndRefusesConflicts(t *testing.T) {
	j := Join(Engine, Below)
	if len(j) != len(Below) {
		t.Errorf("Join(Engine, Below) has %d entries, Below %d", len(j), len(Below))
	}
	defer func() {
		if recover() == nil {
			t.Error("Join of two different entries of one name did not panic")
		}
	}()
	Join(Context, Table{{"context.Canceled", context.Canceled, Internal}})
}

// TestDecodeOldNames checks that the names the namespace's error kinds had
// before they moved to cache/ns (6b53d8c), which a mount server of that
// time still sends, decode to the same sentinels as their names now.
func TestDecodeOldNames(t *testing.T) {
	for old, sentinel := range map[string]error{
		"cache.ErrNotFound":     cache.ErrNotFound,
		"cache.ErrExists":       cache.ErrExists,
		"cache.ErrNotEmpty":     cache.ErrNotEmpty,
		"cache.ErrNotDir":       cache.ErrNotDir,
		"cache.ErrIsDir":        cache.ErrIsDir,
		"cache.ErrInvalid":      cache.ErrInvalid,
		"cache.ErrNameTooLong":  cache.ErrNameTooLong,
		"cache.ErrNoAttr":       cache.ErrNoAttr,
		"cache.ErrRange":        cache.ErrRange,
		"cache.ErrNotSupported": cache.ErrNotSupported,
		"cache.ErrPermission":   cache.ErrPermission,
		"cache.ErrNoSpace":      cache.ErrNoSpace,
		"cache.ErrIO":           cache.ErrIO,
	} {
		e, ok := Below.Decode(old)
		if !ok || !errors.Is(e.Err, sentinel) {
			t.Errorf("Decode(%q) = %q, %v; want the entry of %v", old, e.Name, ok, sentinel)
			continue
		}
		if now, _ := Below.Lookup(sentinel); now.Name != e.Name {
			t.Errorf("Decode(%q) = %q, but the sentinel is sent as %q", old, e.Name, now.Name)
		}
	}
	for old, now := range renamed {
		if _, ok := Below.ByName(old); ok {
			t.Errorf("old name %s is the name of an entry too", old)
		}
		if _, ok := Below.ByName(now); !ok {
			t.Errorf("old name %s stands for %s, which no entry is called", old, now)
		}
	}
	if _, ok := Below.Decode("cache.ErrNoSuchThing"); ok {
		t.Error("an unknown name decoded")
	}
}
