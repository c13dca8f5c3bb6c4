package cache

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// The crash test runs a writer in a child process (this test binary,
// re-executed) that writes, fsyncs and reports each fsynced file, while
// checkpoints run every few milliseconds. The parent kills it with SIGKILL
// at a random point, reopens the same cache directory and checks every
// fsynced byte; then it syncs and checks again from a fresh cache directory.

const crashChildEnv = "AGENTFS_CACHE_CRASH_CHILD"

func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashChildEnv)
	if spec == "" {
		t.Skip("helper process for TestCrash; runs only when re-executed by it")
	}
	var url, dir string
	var seed uint64
	if _, err := fmt.Sscanf(spec, "%s %s %d", &url, &dir, &seed); err != nil {
		t.Fatal(err)
	}
	v := openVolume(t, url, dir, func(o *Options) { o.CheckpointInterval = 20 * time.Millisecond })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		_, _ = fmt.Fprintf(out, format+"\n", args...)
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, data []byte) uint64 {
		a, err := v.Create(ctx, RootIno, name, 0o644, Cred{}, false, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Write(ctx, a.Ino, data, 0); err != nil {
			t.Fatal(err)
		}
		if err := v.Fsync(ctx, a.Ino, false); err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("f%03d", rng.IntN(200))
		data := make([]byte, rng.IntN(3*4096+100))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(data)
		hexsum := hex.EncodeToString(sum[:])
		if rng.IntN(2) == 0 {
			// Replace atomically, as editors do: write a temporary file,
			// fsync it, rename it over the target.
			tmp := fmt.Sprintf("tmp%d", i)
			ino := write(tmp, data)
			say("pending %s %s", name, hexsum)
			if err := v.Rename(ctx, RootIno, tmp, RootIno, name, 0); err != nil {
				t.Fatal(err)
			}
			say("fsynced %s %s", name, hexsum)
			_ = v.Release(ctx, ino)
		} else {
			// Overwrite in place: until the fsync, any content is allowed.
			say("pending %s *", name)
			ino := write(name, data)
			say("fsynced %s %s", name, hexsum)
			_ = v.Release(ctx, ino)
		}
	}
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Run("plain", func(t *testing.T) { runCrash(t) })
	t.Run("encrypted", func(t *testing.T) { runCrash(t, encrypted) })
}

// runCrash kills a writer process 6 times at random points and checks,
// after each, that every fsynced byte is there and every commit readable.
func runCrash(t *testing.T, cfg ...func(*snapshot.Config)) {
	store := "file://" + t.TempDir()
	initVolume(t, store, append([]func(*snapshot.Config){func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 }}, cfg...)...)
	dir := t.TempDir()
	want := map[string]string{}    // the last fsynced content
	pending := map[string]string{} // a change under way: its content, or "*" for any
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", crashChildEnv, store, dir, round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 100 + rand.IntN(400)
		// A child that stops making progress is a bug: dump its goroutines
		// (SIGQUIT) and fail. The bound is generous: on a loaded machine a
		// single ftruncate or fsync of the child was seen to take most of
		// a minute.
		stuck := time.AfterFunc(3*time.Minute, func() {
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(2 * time.Second)
			_ = cmd.Process.Kill()
		})
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "pending" {
				pending[f[1]] = f[2]
			}
			if len(f) == 3 && f[0] == "fsynced" {
				want[f[1]] = f[2]
				delete(pending, f[1])
				n++
				if n == killAfter {
					_ = cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		}
		_ = cmd.Wait()
		stuck.Stop()
		if n < killAfter {
			t.Fatalf("round %d: child stopped after %d files:\n%s", round, n, stderr.String())
		}
		// The same cache dir: every fsynced file is there.
		v := openVolume(t, store, dir)
		checkFiles(t, v, want, pending)
		// What the next round expects: what this one found.
		for name := range pending {
			if got, ok := fileSum(t, v, name); ok {
				want[name] = got
			} else {
				delete(want, name)
			}
		}
		clear(pending)
		if err := v.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Everything reaches the store: a fresh cache dir sees the same.
	v := openVolume(t, store, dir)
	if err := v.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, openVolume(t, store, ""), want, nil)
	checkAllCommits(t, store)
}

// checkFiles checks that each file has its last fsynced content, or the
// content of a change that was under way (any content for "*").
func checkFiles(t *testing.T, v *Volume, want, pending map[string]string) {
	t.Helper()
	for name, sum := range want {
		got, ok := fileSum(t, v, name)
		if !ok {
			t.Fatalf("fsynced file %s is missing", name)
		}
		p, isPending := pending[name]
		if allowed := got == sum || isPending && (p == "*" || p == got); !allowed {
			t.Fatalf("fsynced file %s: content differs", name)
		}
	}
}

// fileSum returns the SHA-256 of file name in the root, or false if absent.
func fileSum(t *testing.T, v *Volume, name string) (string, bool) {
	t.Helper()
	a, err := v.Lookup(context.Background(), RootIno, name)
	if errors.Is(err, ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	sum := sha256.Sum256(readFile(t, v, a.Ino))
	return hex.EncodeToString(sum[:]), true
}

// checkAllCommits reads every commit of main and every tree and chunk they
// reference: no commit references a missing object.
func checkAllCommits(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.OpenWithKey(ctx, s, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := r.ListCommits(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[snapshot.Hash]bool{}
	var walk func(ref snapshot.BlobRef)
	walk = func(ref snapshot.BlobRef) {
		if seen[ref.Hash] {
			return
		}
		seen[ref.Hash] = true
		b, err := r.ReadBlob(ctx, ref)
		if err != nil {
			t.Fatalf("tree %s: %v", ref.Hash, err)
		}
		entries, err := snapshot.DecodeTree(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Type == snapshot.TypeDir {
				walk(e.Tree)
			}
			for _, c := range e.Chunks {
				if !seen[c.Ref.Hash] {
					seen[c.Ref.Hash] = true
					if _, err := r.ReadBlob(ctx, c.Ref); err != nil {
						t.Fatalf("chunk of %s: %v", e.Name, err)
					}
				}
			}
		}
	}
	for _, seq := range seqs {
		c, err := r.ReadCommit(ctx, snapshot.CommitID{Branch: "main", Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		walk(c.Root.Tree)
		if c.Links != nil {
			walk(*c.Links)
		}
	}
	t.Logf("%d commits, %d objects verified", len(seqs), len(seen))
}
