package mountproc

import "strings"

// freePagesLazily is the Go runtime setting a mount server runs with
// (ServerEnv): heap pages the runtime returns to the kernel are released
// with MADV_FREE, which the kernel reclaims only under memory pressure,
// instead of MADV_DONTNEED, which unmaps them at once.
//
// Why: a mount server's load comes in bursts (a checkpoint, a tree
// unpacked, a tree searched). Between bursts the runtime hands free heap
// back to the kernel: its background scavenger, and go-fuse's
// debug.FreeOSMemory when the kernel forgets almost every inode at once
// (a cache drop). With MADV_DONTNEED the next burst takes a page fault
// for each page it touches again, in the request that allocates.
// Measured (BENCHMARKS.md, run W): in the bench's tree sequence (tar -x,
// sync, drop caches, ls -lR twice, grep -r) a mount server took
// 6,000–9,000 minor faults during grep -r's 10,000 OPENs, and a server
// OPEN cost 37–54 µs instead of 20–24; with MADV_FREE it took none and
// 21 µs. A page handed back still costs more to touch than one the
// runtime kept (run X, in a Firecracker VM: 10.6 µs with MADV_FREE, 18
// with MADV_DONTNEED, 0.36 for a kept page). The cost: the freed pages
// count in the server's RSS until the kernel needs them (they are
// reclaimed before anything is swapped or killed, in a memory cgroup
// too).
const freePagesLazily = "madvdontneed=0"

// ServerEnv returns env, the environment of a process about to become a
// mount server, with the Go runtime setting the server runs with
// (freePagesLazily) added to GODEBUG. A GODEBUG in env that already sets
// madvdontneed is kept as it is: the user's choice wins. env itself is not
// changed.
func ServerEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		val, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			out = append(out, kv)
			continue
		}
		found = true
		if !setsMadv(val) {
			if val == "" {
				kv = "GODEBUG=" + freePagesLazily
			} else {
				kv += "," + freePagesLazily
			}
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "GODEBUG="+freePagesLazily)
	}
	return out
}

// HasServerEnv reports whether env already carries what ServerEnv adds (or
// the user's own madvdontneed setting).
func HasServerEnv(env []string) bool {
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, "GODEBUG="); ok && setsMadv(val) {
			return true
		}
	}
	return false
}

// setsMadv reports whether the GODEBUG value godebug sets madvdontneed.
func setsMadv(godebug string) bool {
	for _, s := range strings.Split(godebug, ",") {
		if name, _, _ := strings.Cut(strings.TrimSpace(s), "="); name == "madvdontneed" {
			return true
		}
	}
	return false
}
