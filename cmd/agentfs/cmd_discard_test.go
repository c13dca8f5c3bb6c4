package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiscard: discarding one path (named from a working directory inside
// the mount) shows the base there at once and leaves the rest pending;
// discarding a rename by its old name brings the directory back;
// discarding everything leaves nothing to discard; the host directory is
// never written.
func TestDiscard(t *testing.T) {
	m, host := virtualHostMount(t)
	wantOutput(t, m, m.Dir, "discarded 1 change:\n  M  README.md  (10 B -> 15 B)\n4 changes still pending (agentfs diff "+m.Dir+")\n",
		"discard", m.Dir, "README.md")
	if b, err := os.ReadFile(filepath.Join(m.Dir, "README.md")); err != nil || string(b) != "# project\n" {
		t.Fatalf("README.md after its discard: %q, %v", b, err)
	}
	wantOutput(t, m, "/", "discarded 1 change:\n  R  src/ -> lib/\n3 changes still pending (agentfs diff "+m.Dir+")\n",
		"discard", m.Dir, "src")
	if b, err := os.ReadFile(filepath.Join(m.Dir, "src", "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("src/main.go after discarding the rename: %q, %v", b, err)
	}
	wantOutput(t, m, "/", "discarded 3 changes:\n  M  data.bin  (3 B -> 4 B)\n  D  docs/guide.md  (6 B)\n  A  notes.txt  (6 B)\n", "discard", m.Dir)
	wantOutput(t, m, "/", "nothing to discard\n", "discard", m.Dir)
	if _, err := os.Stat(filepath.Join(host, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("host notes.txt: %v", err)
	}
	wantOutput(t, m, "/", "", "diff", m.Dir)
}
