package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/bench"
)

// runCLI runs agentfs with args and returns its stdout and stderr.
func runCLI(t *testing.T, timeout time.Duration, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestBenchQuickJSON(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	svg := filepath.Join(t.TempDir(), "bench.svg")
	out, stderr, err := runCLI(t, 3*time.Minute, "bench", a, b, "--quick", "--json", "--svg", svg)
	if err != nil {
		t.Fatalf("agentfs bench: %v\n%s", err, stderr)
	}
	var rep bench.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out)
	}
	if len(rep.Targets) != 2 || rep.Repeats != 1 || rep.Params != bench.QuickParams() {
		t.Errorf("targets %+v, repeats %d, params %+v", rep.Targets, rep.Repeats, rep.Params)
	}
	got := map[string]int{}
	for _, r := range rep.Results {
		got[r.Workload+"/"+r.Phase+"@"+rep.Targets[r.Target].Dir]++
		if r.OpsPerSec.Median <= 0 || r.Ratio == nil {
			t.Errorf("result %+v", r)
		}
	}
	for _, w := range bench.Workloads() {
		for _, ph := range w.Phases {
			for _, d := range []string{a, b} {
				if k := w.Name + "/" + ph.Name + "@" + d; got[k] != 1 {
					t.Errorf("%d results for %s, want 1", got[k], k)
				}
			}
		}
	}
	if len(rep.Failures) != 0 {
		t.Errorf("failures: %+v", rep.Failures)
	}
	doc, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(doc, []byte("<?xml")) || !bytes.Contains(doc, []byte("<svg")) || !bytes.HasSuffix(doc, []byte("</svg>\n")) {
		t.Errorf("--svg wrote no SVG document:\n%.300s", doc)
	}
	if stderr != "" {
		t.Errorf("stderr is not a terminal but got output: %q", stderr)
	}
}

func TestBenchTableAndFlags(t *testing.T) {
	a := t.TempDir()
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	out, stderr, err := runCLI(t, time.Minute, "bench", a, "--quick", "--workloads", "metadata,editloop", "--json-out", jsonFile,
		"--repeats", "2", "--meta-ops", "20", "--readdir-entries", "30", "--edit-files", "10", "--cold", "fadvise")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"2 repeat(s)", "metadata", "rename-dir", "editloop", "ops/s", "p99", "[1] " + a} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "bigfile") {
		t.Errorf("--workloads ignored:\n%s", out)
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil || rep.Repeats != 2 || len(rep.Workloads) != 2 || rep.Params.MetaOps != 20 {
		t.Errorf("--json-out wrote %d bytes: %v, repeats %d, %d workloads, meta ops %d", len(data), err, rep.Repeats, len(rep.Workloads), rep.Params.MetaOps)
	}
}

func TestBenchErrors(t *testing.T) {
	d := t.TempDir()
	cases := map[string][]string{
		"no dirs":          {"bench"},
		"missing dir":      {"bench", filepath.Join(d, "missing"), "--quick"},
		"unknown workload": {"bench", d, "--workloads", "nope"},
		"bad size":         {"bench", d, "--bigfile-size", "lots"},
		"bad cold":         {"bench", d, "--quick", "--cold", "tepid", "--workloads", "metadata"},
	}
	for name, args := range cases {
		if _, _, err := runCLI(t, time.Minute, args...); err == nil {
			t.Errorf("%s: agentfs %v succeeded", name, args)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	out, _, err := runCLI(t, time.Minute, "bench", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--quick", "--json", "--svg", "--repeats", "--cold", "node_modules", "drop_caches", "agentfs mount"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench --help lacks %q", want)
		}
	}
}
