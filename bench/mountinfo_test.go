package bench

import "testing"

// The parser's own tests are in internal/mountinfo.

func TestMountOfTempDir(t *testing.T) {
	m, err := mountOf(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.FSType == "" || m.MountPoint == "" {
		t.Errorf("mountOf(temp dir) = %+v", m)
	}
	fuse, err := isFUSEMountPoint(t.TempDir())
	if err != nil || fuse {
		t.Errorf("isFUSEMountPoint(temp dir) = %v, %v", fuse, err)
	}
}
