package bench

import (
	"strings"
	"testing"
)

const sampleMountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /proc rw,nosuid shared:5 - proc proc rw
41 22 0:40 / /tmp/with\040space rw,relatime shared:20 - tmpfs tmp\040fs rw
50 22 0:45 / /mnt/ws rw,nosuid,nodev,relatime shared:30 - fuse.loopback /var/src rw,user_id=0,group_id=0
51 50 0:46 / /mnt/ws/inner rw shared:31 - fuse.agentfs file:///vol rw
`

func TestParseMountinfo(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 {
		t.Fatalf("parsed %d entries, want 5", len(ms))
	}
	if ms[2].MountPoint != "/tmp/with space" || ms[2].Source != "tmp fs" || ms[2].FSType != "tmpfs" {
		t.Errorf("escaped entry parsed as %+v", ms[2])
	}
	cases := map[string]string{
		"/":                 "/",
		"/home/x":           "/",
		"/mnt/ws":           "/mnt/ws",
		"/mnt/ws/a/b":       "/mnt/ws",
		"/mnt/wsx":          "/",
		"/mnt/ws/inner/dir": "/mnt/ws/inner",
		"/tmp/with space/f": "/tmp/with space",
	}
	for p, want := range cases {
		m, ok := findMount(ms, p)
		if !ok || m.MountPoint != want {
			t.Errorf("findMount(%q) = %q, %v; want %q", p, m.MountPoint, ok, want)
		}
	}
	if _, err := parseMountinfo(strings.NewReader("garbage without separator\n")); err == nil {
		t.Error("a malformed line parsed without error")
	}
}

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
