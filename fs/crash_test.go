package fs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
)

// TestKillDuringWriteStorm kills the mount server with SIGKILL while
// writers are busy, remounts with the same cache directory (which cleans
// up the stale mount), and checks that every file whose fsync returned is
// intact, that the mount works, that `agentfs status` is sane and that
// after a sync everything fsynced is in the store (read back through a
// fresh cache directory).
func TestKillDuringWriteStorm(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=200ms"}})

	type synced struct {
		path string
		sum  [32]byte
		size int
	}
	var (
		mu   sync.Mutex
		done []synced
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			dir := filepath.Join(m.Dir, fmt.Sprintf("w%d", w))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := make([]byte, rng.IntN(3<<20)+1)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				p := filepath.Join(dir, fmt.Sprintf("f%05d", i))
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return // the server is gone
				}
				// Several writes per file, some rewriting earlier bytes.
				if _, err := f.Write(data); err != nil {
					f.Close()
					return
				}
				if _, err := f.WriteAt(data[:len(data)/3], 0); err != nil {
					f.Close()
					return
				}
				if err := f.Sync(); err != nil {
					f.Close()
					return
				}
				mu.Lock()
				done = append(done, synced{p, sha256.Sum256(data), len(data)})
				mu.Unlock()
				f.Close()
			}
		})
	}
	// Kill once the storm is under way: 3 s in and at least 10 files
	// fsynced (a loaded machine may take longer to get there).
	start := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= 10 && time.Since(start) >= 3*time.Second {
			break
		}
		if time.Since(start) > 2*time.Minute {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d files were fsynced in 2 minutes; the storm did not get going", n)
		}
	}
	m.Kill(t)
	close(stop)
	wg.Wait()
	if !fstest.WaitDisconnected(m.Dir, 10*time.Second) {
		t.Fatalf("the mount of a killed server is not reported disconnected")
	}

	// Remount on the same mount point and cache directory.
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	if !bytes.Contains([]byte(m2.Log()), []byte("recovering")) {
		t.Logf("note: the engine did not log a recovery:\n%s", m2.Log())
	}
	check := func(root string) {
		t.Helper()
		bad := 0
		for _, s := range done {
			p := filepath.Join(root, mustRel(t, m.Dir, s.path))
			b, err := os.ReadFile(p)
			if err != nil || len(b) != s.size || sha256.Sum256(b) != s.sum {
				bad++
				if bad <= 5 {
					t.Errorf("fsynced file %s: %d bytes, want %d, error %v", p, len(b), s.size, err)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d fsynced files are damaged under %s", bad, len(done), root)
		}
	}
	check(m2.Dir)

	// The mount works and status is sane.
	if err := os.WriteFile(filepath.Join(m2.Dir, "after-crash"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := m2.Agentfs("status", "--json", m2.Dir)
	if err != nil {
		t.Fatalf("agentfs status: %v\n%s", err, out)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	if st.Info.PID != m2.PID || st.Info.MountPoint != m2.Dir || st.Volume.Lease == nil || st.Volume.Lease.PID != m2.PID || st.Volume.ReadOnly {
		t.Errorf("status after the crash: %+v", st)
	}
	m2.Sync(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st2, err := m2.Client(t).Status(ctx)
	if err != nil || st2.Volume.DirtyFiles != 0 || st2.Volume.DirtyDirs != 0 || st2.Volume.HeadSeq < st.Volume.HeadSeq {
		t.Errorf("status after sync: %+v, %v", st2.Volume, err)
	}
	m2.Unmount(t)

	// Everything fsynced reached the store.
	m3 := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "fresh")})
	check(m3.Dir)
	if b, err := os.ReadFile(filepath.Join(m3.Dir, "after-crash")); err != nil || string(b) != "ok" {
		t.Errorf("file written after the crash: %q, %v", b, err)
	}
}

func mustRel(t *testing.T, base, p string) string {
	t.Helper()
	r, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKillWithTmpfileOpen kills the mount server with SIGKILL while an
// O_TMPFILE file with data is open, remounts with the same cache
// directory, and checks that the unnamed file left no trace (no name, no
// data file in the cache directory), while an O_TMPFILE file linked into
// place and fsynced before the kill is intact, and reaches the store.
func TestKillWithTmpfileOpen(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	unnamed, err := unix.Open(m.Dir, unix.O_TMPFILE|unix.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	lost := bytes.Repeat([]byte("lost"), 1<<20) // a data file, not inline
	if _, err := unix.Pwrite(unnamed, lost, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fsync(unnamed); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(unnamed, &st); err != nil {
		t.Fatal(err)
	}
	ino := st.Ino
	dataFile := filepath.Join(m.CacheDir, "data", fmt.Sprintf("%02x", ino&0xff), fmt.Sprint(ino))
	if _, err := os.Stat(dataFile); err != nil {
		t.Fatalf("the unnamed file's data file is not where this test looks: %v", err)
	}

	kept := bytes.Repeat([]byte("kept"), 1<<20)
	linked, err := unix.Open(m.Dir, unix.O_TMPFILE|unix.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(linked, kept, 0); err != nil {
		t.Fatal(err)
	}
	keptPath := filepath.Join(m.Dir, "kept")
	if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", linked), unix.AT_FDCWD, keptPath, unix.AT_SYMLINK_FOLLOW); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fsync(linked); err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(linked)

	m.Kill(t)
	_ = unix.Close(unnamed)
	if !fstest.WaitDisconnected(m.Dir, 10*time.Second) {
		t.Fatalf("%s still answers after its server was killed", m.Dir)
	}
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	names, err := os.ReadDir(m2.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "kept" {
		t.Errorf("after the crash the mount holds %v, want only kept", names)
	}
	if _, err := os.Stat(dataFile); !os.IsNotExist(err) {
		t.Errorf("the unnamed file's data file %s survived the crash (%v)", dataFile, err)
	}
	if b, err := os.ReadFile(filepath.Join(m2.Dir, "kept")); err != nil || !bytes.Equal(b, kept) {
		t.Errorf("the linked O_TMPFILE file after the crash: %d bytes, %v", len(b), err)
	}
	m2.Sync(t)
	m2.Unmount(t)
	m3 := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "fresh")})
	if b, err := os.ReadFile(filepath.Join(m3.Dir, "kept")); err != nil || !bytes.Equal(b, kept) {
		t.Errorf("the linked O_TMPFILE file in the store: %d bytes, %v", len(b), err)
	}
}

// TestKillAfterCloseWithoutFlush kills the mount server with SIGKILL after
// files were written and closed without fsync: a writer's close sends no
// FLUSH while nobody reads the change feed, so what persists a closed file
// (an inline one's bytes too) is the writer's RELEASE, even while another
// descriptor keeps the file open. Once the RELEASEs were served, the
// files survive the kill (README's "Durability": without fsync, a kill
// loses at most the last few milliseconds).
func TestKillAfterCloseWithoutFlush(t *testing.T) {
	// No checkpoint between the writes and the kill persists them instead.
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=1h"}})
	c := m.Client(t)
	files := map[string][]byte{
		"inline":      []byte("a small file, kept inline"),
		"large":       bytes.Repeat([]byte("0123456789abcdef"), 40<<10),
		"inline-open": []byte("written while a reader has it open"),
	}
	// A reader holds "inline-open" open across its writer's close: the
	// file's last release comes only after the kill.
	if err := os.WriteFile(filepath.Join(m.Dir, "inline-open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(filepath.Join(m.Dir, "inline-open"))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	released := servedCalls(t, c, "release")
	flushed := servedCalls(t, c, "flush")
	for name, data := range files {
		f, err := os.OpenFile(filepath.Join(m.Dir, name), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := servedCalls(t, c, "flush") - flushed; n != 0 {
		t.Errorf("closing %d written files sent %d FLUSH requests, want 0", len(files), n)
	}
	for deadline := time.Now().Add(time.Minute); servedCalls(t, c, "release")-released < int64(len(files)); {
		if time.Now().After(deadline) {
			t.Fatalf("the RELEASEs of %d closed files were not served in a minute", len(files))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the database's write-behind flush (5 ms)
	m.Kill(t)
	if !fstest.WaitDisconnected(m.Dir, 10*time.Second) {
		t.Fatalf("the mount of a killed server is not reported disconnected")
	}
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	for name, data := range files {
		if b, err := os.ReadFile(filepath.Join(m2.Dir, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s after the kill: %d bytes (%v), want %d", name, len(b), err, len(data))
		}
	}
}
