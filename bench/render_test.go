package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./bench -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./bench -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

var fixedMachine = Machine{CPUs: 2, CPUModel: "Test CPU", MemoryMiB: 24576, Kernel: "6.1.0", OS: "linux", Arch: "amd64", Go: "go1.26.8"}

// fixedReport is a report built by hand, so that rendering is tested on
// known numbers.
func fixedReport() *Report {
	sm := func(med, lo, hi float64) Summary {
		return Summary{N: 3, Median: med, Min: lo, Max: hi, Spread: (hi - lo) / med}
	}
	lat := func(p50, p99 time.Duration) *Latency {
		return &Latency{N: 300, P50: p50, P90: (p50 + p99) / 2, P99: p99, Max: 2 * p99}
	}
	ws, _ := SelectWorkloads([]string{"bigfile", "metadata", "git"})
	return &Report{
		Schema: ReportSchema, Tool: "agentfs bench",
		Started: time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC), Elapsed: 154 * time.Second,
		Machine: fixedMachine, Params: DefaultParams(), Repeats: 3,
		Targets: []Target{
			{Dir: "/tmp/plain", Path: "/tmp/plain", FSType: "ext4", MountPoint: "/", Source: "/dev/vda"},
			{Dir: "/mnt/loop", Path: "/mnt/loop", FSType: "fuse.loopback", MountPoint: "/mnt/loop", Source: "/tmp/src"},
			{Dir: "/mnt/ws", Path: "/mnt/ws", FSType: "fuse.agentfs", MountPoint: "/mnt/ws", Source: "file:///vol", Agentfs: "agentfs file:///vol (branch main)"},
		},
		Workloads: ws,
		Results: []Result{
			{Workload: "bigfile", Phase: "write", Target: 0, Repeats: 3, Ops: 1536, Bytes: 1536 << 20, OpsPerSec: sm(812, 790, 840), MiBPerSec: ptr(sm(812, 790, 840)), Latency: lat(1100*time.Microsecond, 3200*time.Microsecond), Ratio: ptr(1.0)},
			{Workload: "bigfile", Phase: "write", Target: 1, Repeats: 3, Ops: 1536, Bytes: 1536 << 20, OpsPerSec: sm(431, 400, 450), MiBPerSec: ptr(sm(431, 400, 450)), Latency: lat(2100*time.Microsecond, 9*time.Millisecond), Ratio: ptr(431.0 / 812)},
			{Workload: "bigfile", Phase: "read", Target: 0, Repeats: 3, Ops: 1536, Bytes: 1536 << 20, OpsPerSec: sm(1500, 1400, 1650), MiBPerSec: ptr(sm(1500, 1400, 1650)), Latency: lat(600*time.Microsecond, 2*time.Millisecond), Ratio: ptr(1.0), Cold: noteDrop},
			{Workload: "bigfile", Phase: "read", Target: 1, Repeats: 3, Ops: 1536, Bytes: 1536 << 20, OpsPerSec: sm(980, 900, 1000), MiBPerSec: ptr(sm(980, 900, 1000)), Latency: lat(900*time.Microsecond, 4*time.Millisecond), Ratio: ptr(980.0 / 1500), Cold: noteDrop},
			{Workload: "bigfile", Phase: "read", Target: 2, Repeats: 3, Ops: 1536, Bytes: 1536 << 20, OpsPerSec: sm(640, 600, 700), MiBPerSec: ptr(sm(640, 600, 700)), Latency: lat(1500*time.Microsecond, 8*time.Millisecond), Ratio: ptr(640.0 / 1500), Cold: noteDrop},
			{Workload: "metadata", Phase: "mkdir", Target: 0, Repeats: 3, Ops: 6000, OpsPerSec: sm(48200, 47000, 50100), Latency: lat(19*time.Microsecond, 61*time.Microsecond), Ratio: ptr(1.0)},
			{Workload: "metadata", Phase: "mkdir", Target: 1, Repeats: 3, Ops: 6000, OpsPerSec: sm(9120, 8800, 9900), Latency: lat(101*time.Microsecond, 390*time.Microsecond), Ratio: ptr(9120.0 / 48200)},
			{Workload: "metadata", Phase: "mkdir", Target: 2, Repeats: 3, Ops: 6000, OpsPerSec: Summary{N: 3, Median: 0, Min: 0, Max: 5, Spread: math.NaN()}, Latency: lat(4*time.Second, 9*time.Second), Ratio: ptr(0.0)},
			{Workload: "git", Phase: "commit", Target: 0, Repeats: 1, Ops: 3000, Bytes: 9 << 20, OpsPerSec: Summary{N: 1, Median: 1250, Min: 1250, Max: 1250}, MiBPerSec: ptr(Summary{N: 1, Median: 3.75, Min: 3.75, Max: 3.75}), Ratio: ptr(1.0)},
		},
		Mounts: []MountResult{
			{Workload: "bigfile", Target: 2, Repeats: 3, BlobPuts: sm(130, 128, 131), BlobGets: sm(4, 3, 6), MiBUploaded: sm(512, 512, 513), MiBDownloaded: sm(0.5, 0.4, 0.6), CacheHitRatio: ptr(sm(0.975, 0.97, 0.98)), SyncSeconds: sm(1.8, 1.6, 2.3)},
			{Workload: "metadata", Target: 2, Repeats: 3, BlobPuts: sm(12, 11, 12), BlobGets: Summary{N: 3}, MiBUploaded: sm(0.2, 0.2, 0.3), MiBDownloaded: Summary{N: 3}, SyncSeconds: sm(0.4, 0.3, 0.5)},
		},
		Failures: []Failure{{Workload: "git", Target: 1, Error: `git init -q: exit status 128: fatal: cannot mkdir .git`}},
	}
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, fixedReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench_table.golden", b.Bytes())
}

func TestWriteJSONGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, fixedReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench_report.json.golden", b.Bytes())
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the JSON report does not decode: %v", err)
	}
	if len(back.Results) != len(fixedReport().Results) || back.Targets[2].Agentfs == "" || !math.IsNaN(back.Results[7].OpsPerSec.Spread) {
		t.Errorf("decoded report lost data: %+v", back)
	}
}

func TestWriteSVGGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, fixedReport()); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes())
	golden(t, "bench_chart.svg.golden", b.Bytes())
}

// checkSVG checks that doc is a well-formed XML document whose root is an
// svg element with a width and a height, and that it holds bars.
func checkSVG(t *testing.T, doc []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root *xml.StartElement
	rects := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == nil {
				c := se.Copy()
				root = &c
			}
			if se.Name.Local == "rect" {
				rects++
			}
		}
	}
	if root == nil || root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root element: %+v", root)
	}
	attrs := map[string]string{}
	for _, a := range root.Attr {
		attrs[a.Name.Local] = a.Value
	}
	if attrs["width"] == "" || attrs["height"] == "" || attrs["viewBox"] == "" {
		t.Errorf("svg element lacks a size: %v", attrs)
	}
	if rects < 3 {
		t.Errorf("only %d rect elements: no bars drawn", rects)
	}
}

func fixedObjReport() *ObjReport {
	op := func(name string, ops, bytes int64, el time.Duration, p50, p99 time.Duration, retries int64) ObjOpResult {
		return ObjOpResult{Op: name, Ops: ops, Bytes: bytes, Elapsed: el, OpsPerSec: float64(ops) / el.Seconds(),
			MiBPerSec: float64(bytes) / (1 << 20) / el.Seconds(), Latency: Latency{N: int(ops), P50: p50, P90: p99 / 2, P99: p99, Max: 2 * p99}, Retries: retries}
	}
	cell := func(size int64, conc, objects int, scale time.Duration, race int) ObjCell {
		n := int64(objects)
		return ObjCell{Size: size, Concurrency: conc, Objects: objects, RaceWinners: race, Ops: []ObjOpResult{
			op(ObjPut, n, n*size, scale*time.Duration(n)/time.Duration(conc), scale, 3*scale, 0),
			op(ObjStat, n, 0, scale/10*time.Duration(n)/time.Duration(conc), scale/10, scale/3, 0),
			op(ObjGet, n, n*size, scale/2*time.Duration(n)/time.Duration(conc), scale/2, 2*scale, 1),
			op(ObjList, min(n, 64), 0, scale*time.Duration(min(n, 64)), scale, 2*scale, 0),
			op(ObjPutIfAbsent, n, n*size, scale*time.Duration(n)/time.Duration(conc), scale, 4*scale, 0),
			op(ObjDelete, 2*n, 0, scale/5*time.Duration(2*n)/time.Duration(conc), scale/5, scale, 0),
		}}
	}
	cfg := QuickObjConfig()
	return &ObjReport{
		Schema: ObjReportSchema, Tool: "agentfs objbench", Started: time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC),
		Elapsed: 41 * time.Second, Machine: fixedMachine, URL: "file:///var/tmp/objbench", Prefix: "agentfs-objbench-20261121T110000-0123456789ab",
		Config: cfg,
		Cells: []ObjCell{
			cell(4<<10, 1, 64, 400*time.Microsecond, 0),
			cell(4<<10, 8, 64, 900*time.Microsecond, 1),
			cell(1<<20, 1, 8, 3*time.Millisecond, 0),
			cell(1<<20, 8, 8, 8*time.Millisecond, 0),
		},
		Skipped: []ObjSkip{{Size: 64 << 20, Concurrency: 8, Reason: "64MiB × 8 in flight exceeds --max-inflight 64MiB"}},
		Cleaned: 1,
	}
}

func TestWriteObjGolden(t *testing.T) {
	var tb, jb, sb bytes.Buffer
	if err := WriteObjTable(&tb, fixedObjReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "objbench_table.golden", tb.Bytes())
	if err := WriteJSON(&jb, fixedObjReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "objbench_report.json.golden", jb.Bytes())
	var back ObjReport
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back.Cells) != 4 {
		t.Fatalf("decoded %d cells: %v", len(back.Cells), err)
	}
	if err := WriteObjSVG(&sb, fixedObjReport()); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, sb.Bytes())
	golden(t, "objbench_chart.svg.golden", sb.Bytes())
}

func TestSVGEscapesText(t *testing.T) {
	r := fixedReport()
	r.Targets[0].Dir = `/tmp/<a & "b">`
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes())
	if !strings.Contains(b.String(), "&lt;a &amp;") {
		t.Error("markup in a directory name was not escaped")
	}
}

func TestFormatters(t *testing.T) {
	cases := map[string]string{
		fmtNum(0.5): "0.50", fmtNum(12.34): "12.3", fmtNum(4321.6): "4322", fmtNum(2.5e6): "2.50M", fmtNum(math.NaN()): "-",
		fmtDur(500): "500ns", fmtDur(1500): "1.50µs", fmtDur(25 * time.Millisecond): "25.0ms", fmtDur(2500 * time.Millisecond): "2.50s",
		fmtSpread(Summary{N: 1}): "-", fmtSpread(Summary{N: 2, Spread: 0.123}): "12%", fmtSpread(Summary{N: 2, Spread: math.NaN()}): "?",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestWriteTableReportsWriteErrors(t *testing.T) {
	if err := WriteTable(failWriter{}, fixedReport()); err == nil {
		t.Error("WriteTable ignored a failing writer")
	}
	if err := WriteSVG(failWriter{}, fixedReport()); err == nil {
		t.Error("WriteSVG ignored a failing writer")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTruncateMiddle(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"[2] /var/tmp/agentfs-bench/loopback (fuse.loopback)", 25, "[2] /var… (fuse.loopback)"},
		{"abcdefghij", 4, "abcdefghij"},
	}
	for _, c := range cases {
		if got := truncateMiddle(c.in, c.n); got != c.want || (len([]rune(c.in)) > c.n && c.n >= 5 && len([]rune(got)) != c.n) {
			t.Errorf("truncateMiddle(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	long := barChart{Series: []string{strings.Repeat("x", 100), "b"}}
	if got := long.legendPerRow(); got != 1 {
		t.Errorf("legendPerRow with a 100-rune label = %d, want 1", got)
	}
	short := barChart{Series: []string{"a", "b"}}
	if got := short.legendPerRow(); got != 4 {
		t.Errorf("legendPerRow with short labels = %d, want 4", got)
	}
}
