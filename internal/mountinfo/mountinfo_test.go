package mountinfo

import "testing"

const sample = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /proc rw,nosuid shared:5 - proc proc rw
41 22 0:40 / /tmp/with\040space rw,relatime shared:20 - tmpfs tmp\040fs rw
50 22 0:45 / /mnt/ws rw,nosuid,nodev,relatime shared:30 - fuse.loopback /var/src rw,user_id=0,group_id=0
51 50 0:46 / /mnt/ws/inner rw shared:31 - fuse.agentfs file:///vol rw
`

func TestParseAndFind(t *testing.T) {
	ms := Parse([]byte(sample))
	if len(ms) != 5 {
		t.Fatalf("parsed %d entries, want 5", len(ms))
	}
	if ms[2].MountPoint != "/tmp/with space" || ms[2].Source != "tmp fs" || ms[2].FSType != "tmpfs" || ms[2].Dev != "0:40" {
		t.Errorf("escaped entry parsed as %+v", ms[2])
	}
	if ms[0].IsFUSE() || !ms[3].IsFUSE() || !ms[4].IsFUSE() {
		t.Errorf("IsFUSE wrong on %+v", ms)
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
		m, ok := Find(ms, p)
		if !ok || m.MountPoint != want {
			t.Errorf("Find(%q) = %q, %v; want %q", p, m.MountPoint, ok, want)
		}
	}
	if got := Parse([]byte("garbage without separator\n")); len(got) != 0 {
		t.Errorf("a malformed line parsed as %+v", got)
	}
	if _, ok := Find(ms[1:2], "/home"); ok {
		t.Error("Find found a mount that does not hold the path")
	}
}

func TestOfTempDir(t *testing.T) {
	m, err := Of(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.FSType == "" || m.MountPoint == "" {
		t.Errorf("Of(temp dir) = %+v", m)
	}
}
