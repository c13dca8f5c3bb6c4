package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/bench"
)

func TestObjbenchQuickJSON(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(t.TempDir(), "objbench.svg")
	out, stderr, err := runCLI(t, 2*time.Minute, "objbench", "file://"+dir, "--quick", "--json", "--svg", svg)
	if err != nil {
		t.Fatalf("agentfs objbench: %v\n%s", err, stderr)
	}
	var rep bench.ObjReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out)
	}
	q := bench.QuickObjConfig()
	if want := len(q.Sizes) * len(q.Concurrency); len(rep.Cells)+len(rep.Skipped) != want || len(rep.Cells) == 0 {
		t.Errorf("%d cells and %d skipped, want %d in all", len(rep.Cells), len(rep.Skipped), want)
	}
	for _, c := range rep.Cells {
		for _, op := range bench.ObjOps() {
			if r, ok := c.Op(op); !ok || r.Ops == 0 {
				t.Errorf("cell %d/%d: no %s result", c.Size, c.Concurrency, op)
			}
		}
	}
	if rep.URL != "file://"+dir || !strings.HasPrefix(rep.Prefix, "agentfs-objbench-") {
		t.Errorf("url %q prefix %q", rep.URL, rep.Prefix)
	}
	if _, err := os.Stat(filepath.Join(dir, rep.Prefix)); !os.IsNotExist(err) {
		t.Errorf("objbench left %s behind: %v", rep.Prefix, err)
	}
	doc, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(doc), "</svg>") {
		t.Errorf("--svg: %v\n%.200s", err, doc)
	}
}

func TestObjbenchRefusesVolume(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "volume.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, time.Minute, "objbench", "file://"+dir, "--quick")
	if err == nil || !strings.Contains(err.Error(), "volume.json") {
		t.Fatalf("objbench on a volume: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "agentfs-objbench-") {
			t.Errorf("objbench wrote %s into a volume", e.Name())
		}
	}
}

func TestObjbenchFlags(t *testing.T) {
	out, stderr, err := runCLI(t, time.Minute, "objbench", "mem://cli-flags", "--quick", "--sizes", "1KiB", "--concurrency", "1,3", "--max-objects", "5")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"1KiB", "put-if-absent", "3 simultaneous creates of one key, 1 won"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for name, args := range map[string][]string{
		"bad url":         {"objbench", "nosuch://x", "--quick"},
		"bad concurrency": {"objbench", "mem://x", "--concurrency", "1,zero"},
		"bad size":        {"objbench", "mem://x", "--sizes", "4XB"},
		"no url":          {"objbench"},
	} {
		if _, _, err := runCLI(t, time.Minute, args...); err == nil {
			t.Errorf("%s: agentfs %v succeeded", name, args)
		}
	}
}
