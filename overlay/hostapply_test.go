package overlay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/posixtest"
)

// TestCommitHostSymlinkPlanted: a directory of the host directory that is
// replaced by a symlink to a directory outside, after the workspace changed
// paths below it, never leads a commit (forced, so that no conflict check
// stands in the way) to write, delete or change anything outside.
func TestCommitHostSymlinkPlanted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, v *cache.Volume)
	}{
		{"add", func(t *testing.T, v *cache.Volume) { write(t, v, "d/new.txt", []byte("new\n"), 0) }},
		{"modify", func(t *testing.T, v *cache.Volume) { write(t, v, "d/f", []byte("edited\n"), 0) }},
		{"mkdir", func(t *testing.T, v *cache.Volume) {
			d := must[cache.Attr](t)(lookupPath(context.Background(), v, "d"))
			if _, err := v.Mkdir(context.Background(), d.Ino, "sub", 0o700, cache.Cred{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete", func(t *testing.T, v *cache.Volume) {
			d := must[cache.Attr](t)(lookupPath(context.Background(), v, "d"))
			if err := v.Unlink(context.Background(), d.Ino, "f"); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename", func(t *testing.T, v *cache.Volume) {
			d := must[cache.Attr](t)(lookupPath(context.Background(), v, "d"))
			if err := v.Rename(context.Background(), d.Ino, "f", d.Ino, "f2", 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			host := t.TempDir()
			if err := os.Mkdir(filepath.Join(host, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for p, data := range map[string]string{"d/f": "f\n", "a.bin": strings.Repeat("a", 3<<20)} {
				if err := os.WriteFile(filepath.Join(host, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "f"), []byte("outside\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := hostTree(t, outside)
			repo := newRepo(t)
			branch, hd, err := Prepare(ctx, repo, "ws", Base{HostDir: host}, "testhost", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			// The host's d becomes a symlink to outside while the commit
			// stages a.bin, whose unchanged bytes it reads from the host:
			// after the diff, before anything is written.
			pl := &plantingLower{HostDir: hd, trigger: "a.bin", plant: func() {
				if err := os.Rename(filepath.Join(host, "d"), filepath.Join(host, "d.moved")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, filepath.Join(host, "d")); err != nil {
					t.Error(err)
				}
			}}
			v := openVol(t, repo, branch, "", pl)
			w := &Workspace{vol: v, repo: v.Repo(), host: hd}
			tc.change(t, v)
			write(t, v, "a.bin", []byte("b"), 1) // one byte: the rest is read from the host
			pl.armed.Store(true)
			_, err = w.Commit(ctx, nil, "accept", "", true)
			if !pl.planted.Load() {
				t.Fatalf("the symlink was not planted during the commit (commit: %v)", err)
			}
			if err == nil {
				t.Error("the commit succeeded through a symlink planted in the host directory")
			}
			if d := posixtest.Diff(before, hostTree(t, outside)); len(d) > 0 {
				t.Errorf("the commit changed the directory outside: %v", d)
			}
		})
	}
}

// plantingLower is a HostDir that calls plant once, the first time the file
// trigger is read once armed.
type plantingLower struct {
	*HostDir
	trigger        string
	plant          func()
	armed, planted atomic.Bool
}

func (p *plantingLower) Open(ctx context.Context, path string) (cache.LowerFile, error) {
	f, err := p.HostDir.Open(ctx, path)
	if err != nil || path != p.trigger {
		return f, err
	}
	return &plantingFile{LowerFile: f, p: p}, nil
}

type plantingFile struct {
	cache.LowerFile
	p *plantingLower
}

func (f *plantingFile) ReadAt(b []byte, off int64) (int, error) {
	if f.p.armed.Load() && f.p.planted.CompareAndSwap(false, true) {
		f.p.plant()
	}
	return f.LowerFile.ReadAt(b, off)
}
