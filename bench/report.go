package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ReportSchema is the version of the JSON report of `agentfs bench`; it
// changes when a field changes meaning or goes away.
const ReportSchema = 1

// Report is the result of Run, and the JSON `agentfs bench --json` prints.
type Report struct {
	Schema    int           `json:"schema"`
	Tool      string        `json:"tool"`
	Started   time.Time     `json:"started"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Machine   Machine       `json:"machine"`
	Params    Params        `json:"params"`
	Repeats   int           `json:"repeats"`
	Targets   []Target      `json:"targets"`
	Workloads []Workload    `json:"workloads"`
	// Results has one entry per workload phase and target that completed,
	// workload by workload, phase by phase, target by target.
	Results []Result `json:"results"`
	// Mounts has one entry per workload and agentfs mount target.
	Mounts   []MountResult `json:"mounts,omitempty"`
	Failures []Failure     `json:"failures,omitempty"`
}

// Target is one directory bench ran in.
type Target struct {
	Dir        string `json:"dir"`  // as given on the command line
	Path       string `json:"path"` // absolute, symlinks resolved
	FSType     string `json:"fstype,omitempty"`
	MountPoint string `json:"mount_point,omitempty"`
	Source     string `json:"source,omitempty"`
	// Agentfs describes the agentfs mount the directory is in, as the
	// MountProbe reported it; empty for anything else.
	Agentfs string `json:"agentfs,omitempty"`
}

// Result is one phase of one workload in one target, over every repeat.
type Result struct {
	Workload string `json:"workload"`
	Phase    string `json:"phase"`
	Target   int    `json:"target"` // index into Report.Targets
	Repeats  int    `json:"repeats"`
	Ops      int64  `json:"ops"`   // operations over all repeats
	Bytes    int64  `json:"bytes"` // payload bytes over all repeats
	// OpsPerSec summarises operations per second, one value per repeat.
	OpsPerSec Summary `json:"ops_per_sec"`
	// MiBPerSec summarises payload throughput; nil for phases that move
	// no data.
	MiBPerSec *Summary `json:"mib_per_sec,omitempty"`
	// Latency holds percentiles over every operation of every repeat; nil
	// where operations are not timed one by one.
	Latency *Latency `json:"latency,omitempty"`
	// Ratio is the median ops/s divided by the first target's (1 for the
	// first target; above 1 is faster); nil when the first target has no
	// result for this phase.
	Ratio *float64 `json:"ratio_to_first,omitempty"`
	// Cold says which caches were dropped before the phase; empty when
	// none were meant to be.
	Cold string `json:"cold,omitempty"`
	// RequestsPerOp is, for an agentfs mount, the FUSE requests it served
	// per operation of the phase (over every repeat), by kind: the round
	// trips one operation costs.
	RequestsPerOp map[string]float64 `json:"fuse_requests_per_op,omitempty"`
}

// MountResult is what an agentfs mount did during one workload, from just
// before it to the end of the sync after it, summarised over repeats.
type MountResult struct {
	Workload      string   `json:"workload"`
	Target        int      `json:"target"`
	Repeats       int      `json:"repeats"`
	BlobPuts      Summary  `json:"blob_puts"`
	BlobGets      Summary  `json:"blob_gets"`
	MiBUploaded   Summary  `json:"mib_uploaded"`
	MiBDownloaded Summary  `json:"mib_downloaded"`
	CacheHitRatio *Summary `json:"cache_hit_ratio,omitempty"` // nil when no read reached the cache
	SyncSeconds   Summary  `json:"sync_seconds"`
}

// Failure is a workload that failed in a target.
type Failure struct {
	Workload string `json:"workload"`
	Target   int    `json:"target"`
	Error    string `json:"error"`
}

// Machine describes where a benchmark ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Go        string `json:"go"`
}

// ReadMachine describes this machine. Fields it cannot read stay empty.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		var kib int64
		if _, err := fmt.Sscanf(v, "%d kB", &kib); err == nil {
			m.MemoryMiB = kib / 1024
		}
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc
// file, or "".
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// String describes the machine in one line, for reports.
func (m Machine) String() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	if m.CPUModel != "" {
		parts = append(parts, m.CPUModel)
	}
	if m.MemoryMiB > 0 {
		parts = append(parts, fmt.Sprintf("%.0f GiB RAM", float64(m.MemoryMiB)/1024))
	}
	k := m.OS + "/" + m.Arch
	if m.Kernel != "" {
		k = "Linux " + m.Kernel + " " + m.Arch
	}
	parts = append(parts, k, m.Go)
	return strings.Join(parts, ", ")
}

// WriteJSON writes v (a *Report or *ObjReport) as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
