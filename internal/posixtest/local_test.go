package posixtest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/internal/testenv"
)

// TestLocal runs the whole read-write suite against a local directory: the
// reference every mount variant is measured against must pass it.
func TestLocal(t *testing.T) {
	Run(t, t.TempDir(), Options{})
}

// TestLocalParallel runs the cheap checks again in parallel, to prove they
// are independent of each other.
func TestLocalParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the sequential run covers the same checks")
	}
	Run(t, t.TempDir(), Options{Parallel: true, Exclude: map[string]string{
		"WorkloadGit":    "covered by TestLocal; too slow to repeat",
		"WorkloadVenv":   "covered by TestLocal; too slow to repeat",
		"WorkloadTar":    "covered by TestLocal; too slow to repeat",
		"WorkloadCp":     "covered by TestLocal; too slow to repeat",
		"WorkloadSQLite": "covered by TestLocal; too slow to repeat",
		"ReaddirLarge":   "covered by TestLocal; too slow to repeat",
		"WorkloadRmRf":   "covered by TestLocal; too slow to repeat",
	}})
}

// TestLocalReadOnly populates a local directory, bind-mounts it read-only
// and runs the read-only suite over the bind mount.
func TestLocalReadOnly(t *testing.T) {
	src := t.TempDir()
	if err := Populate(src); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	if err := unix.Mount(src, ro, "", unix.MS_BIND, ""); err != nil {
		testenv.Missing(t, "a read-only bind mount (needs root/CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(ro, 0); err != nil {
			t.Errorf("unmount %s: %v", ro, err)
		}
	})
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", ro, err)
	}
	Run(t, ro, Options{ReadOnly: true})
}

// TestPopulateRefusesExisting: Populate never writes over an existing tree.
func TestPopulateRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/"+PopulatedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Populate(dir); err == nil {
		t.Errorf("Populate over an existing tree succeeded")
	}
}

// TestRegistry: every listed check exists, and the root-only list names
// real checks.
func TestRegistry(t *testing.T) {
	for name, fn := range Checks {
		if fn == nil {
			t.Errorf("check %q has no function", name)
		}
	}
	for name, fn := range ReadOnlyChecks {
		if fn == nil {
			t.Errorf("read-only check %q has no function", name)
		}
	}
	for _, name := range RootChecks {
		if _, ok := Checks[name]; !ok {
			t.Errorf("RootChecks names %q, which is not a check", name)
		}
	}
}

// TestLocalFreeSpace runs FreeSpace on a small local ext4 filesystem, the
// reference for the mounts' free space.
func TestLocalFreeSpace(t *testing.T) {
	FreeSpace(t, SmallExt4(t, 256<<20))
}
