package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/internal/mountproc"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "512M": 512 << 20, "10G": 10 << 30, "1.5GiB": 3 << 29, "2t": 2 << 40, "64KB": 64 << 10, "7B": 7} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "ten", "1X"} {
		if _, err := parseByteSize(bad); err == nil {
			t.Errorf("parseByteSize(%q) succeeded", bad)
		}
	}
}

func TestDefaultDirs(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if u, err := mountproc.DefaultStoreURL(); err != nil || u != "file:///data/agentfs/default" {
		t.Errorf("defaultStoreURL: %q, %v", u, err)
	}
	a, err := defaultCacheDir("s3://k:secret@b/p?region=x", "main")
	if err != nil || !strings.HasPrefix(a, filepath.Join("/cache", "agentfs", "mounts")+"/") {
		t.Fatalf("defaultCacheDir: %q, %v", a, err)
	}
	if b, _ := defaultCacheDir("s3://other:creds@b/p", "main"); b != a {
		t.Errorf("the cache dir depends on credentials: %q vs %q", a, b)
	}
	if b, _ := defaultCacheDir("s3://b/p", "topic"); b == a {
		t.Errorf("two branches share cache dir %q", a)
	}
	if b, _ := defaultCacheDir("s3://b/q", "main"); b == a {
		t.Errorf("two volumes share cache dir %q", a)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, err := mountproc.DefaultStoreDir(); err != nil || d != "/home/u/.local/share/agentfs/default" {
		t.Errorf("defaultStoreDir without XDG_DATA_HOME: %q, %v", d, err)
	}
}

func TestBlobDisplayAndWithin(t *testing.T) {
	for in, want := range map[string]string{
		"s3://key:secret@bucket/p?endpoint=http://x&region=y": "s3://bucket/p",
		"file:///a/b": "file:///a/b",
	} {
		if got := blobDisplay(in); got != want {
			t.Errorf("blobDisplay(%q) = %q", in, got)
		}
	}
	for _, c := range []struct {
		p, d string
		ok   bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/a/b", "/a/", true}} {
		if within(c.p, c.d) != c.ok {
			t.Errorf("within(%q, %q) = %v", c.p, c.d, !c.ok)
		}
	}
}
