#!/usr/bin/env bash
# Measures an agentfs mount against the plain local directory on the same
# disk, in one run: builds agentfs, creates a fresh file:// volume in the
# work directory, mounts it, and runs `agentfs bench PLAIN MOUNT` (every
# workload, median of 3 repeats unless told otherwise; the ×[1] column is
# each phase's ratio to the plain directory). With --loopback, go-fuse's
# loopback filesystem (`agentfs loopback`, FUSE passthrough where the kernel
# has it) is measured as a third target. Issue 17's targets are ratios to the
# plain directory; BENCHMARKS.md records the runs.
#
# usage: scripts/mount-perf.sh [--workdir DIR] [--loopback] [--mount-args "..."] [agentfs bench flags]
#   --workdir DIR        scratch space on the disk under test (default /var/tmp/agentfs-perf; emptied)
#   --loopback           also measure `agentfs loopback` of a directory on the same disk
#   --mount-args "..."   extra flags for agentfs mount, e.g. "--tune writeback=1" to
#                        measure an alternative FUSE setting (see go doc ./fs Tuning)
#   anything else        goes to agentfs bench, e.g. --workloads tree,git --repeats 5
#                        --threads 1 --bigfile-size 1GiB (see agentfs bench --help)
#
# Run it on an otherwise idle machine (the server competes for CPU with the
# workloads) and note the load (uptime) with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fusermount3 >/dev/null || bash scripts/setup-fuse.sh
work=/var/tmp/agentfs-perf
loopback=0
mount_args=""
bench_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--workdir) work=$2; shift 2 ;;
	--loopback) loopback=1; shift ;;
	--mount-args) mount_args=$2; shift 2 ;;
	*) bench_args+=("$1"); shift ;;
	esac
done
bin=$(mktemp -d)
mnt="$work/agentfs"
cleanup() {
	"$bin/agentfs" umount --force "$mnt" 2>/dev/null || true
	if [ -n "${loop_pid:-}" ]; then kill "$loop_pid" 2>/dev/null || true; wait "$loop_pid" 2>/dev/null || true; fi
	rm -rf "$bin"
}
trap cleanup EXIT
go build -o "$bin/agentfs" ./cmd/agentfs
rm -rf "$work"
mkdir -p "$work/plain" "$mnt" "$work/cache" "$work/loopback-src" "$work/loopback"
url="file://$work/store"
"$bin/agentfs" init "$url" >/dev/null
# shellcheck disable=SC2086 # mount_args is a list of flags
"$bin/agentfs" mount -d --cache-dir "$work/cache" $mount_args "$url" "$mnt"
targets=("$work/plain" "$mnt")
if [ "$loopback" = 1 ]; then
	"$bin/agentfs" loopback "$work/loopback-src" "$work/loopback" &
	loop_pid=$!
	for _ in $(seq 100); do mountpoint -q "$work/loopback" && break; sleep 0.1; done
	targets+=("$work/loopback")
fi
echo "kernel $(uname -r); load: $(uptime)" >&2
"$bin/agentfs" bench "${bench_args[@]}" "${targets[@]}"
