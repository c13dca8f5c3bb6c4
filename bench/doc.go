// Package bench holds the workloads, statistics and reports behind
// `agentfs bench` (filesystem workloads run side by side in several
// directories) and `agentfs objbench` (blob store throughput and latency),
// and the helper that serves go-fuse's loopback filesystem, the baseline
// every agentfs performance target is a ratio against.
//
// What it owns: generating work, timing it, honest statistics (median and
// spread over repeats, latency percentiles over every operation), and
// rendering (terminal table, JSON, SVG bar chart). What it must never do:
// import the engine layers (cache/, overlay/, fs/, exec/), fake numbers for
// what it cannot measure, or run commands inside a mount served by its own
// process — the loopback server always runs as a separate process.
//
// agentfs mounts are recognised through the MountProbe seam, which the mount
// implements over its control socket; without a probe, bench reports only
// what it measures itself.
package bench
