package volkey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// TestOrder: the key file, then the key variable, then the passphrase
// variable; nothing at all is an error naming every place looked at.
func TestOrder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(file, []byte("  file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	s := Default(file)
	s.Terminal = nil
	s.Getenv = func(k string) string { return env[k] }
	env[EnvKey], env[EnvPassphrase] = " env-key\n", "pass phrase "
	if k, err := s.Get(true); err != nil || string(k.Key) != "file-key" || k.IsPassphrase() {
		t.Fatalf("key file: %q %v", k.Key, err)
	}
	s.KeyFile = ""
	if k, err := s.Get(true); err != nil || string(k.Key) != "env-key" {
		t.Fatalf("AGENTFS_KEY: %q %v", k.Key, err)
	}
	env[EnvKey] = ""
	if k, err := s.Get(false); err != nil || !k.IsPassphrase() || string(k.Passphrase) != "pass phrase " {
		t.Fatalf("AGENTFS_PASSPHRASE: %+v %v", k, err)
	}
	env[EnvPassphrase] = ""
	_, err := s.Get(true)
	for _, want := range []string{"--key-file FILE", EnvKey, EnvPassphrase, "terminal"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no key: %v, want it to mention %s", err, want)
		}
	}
	s.KeyFile = filepath.Join(t.TempDir(), "missing")
	if _, err := s.Get(false); err == nil || !strings.Contains(err.Error(), "--key-file") {
		t.Errorf("missing key file: %v", err)
	}
	if e := Assignment(snapshot.UserKey{Key: []byte("k")}); len(e) != 1 || e[0] != EnvKey+"=k" {
		t.Errorf("Assignment = %v", e)
	}
}
