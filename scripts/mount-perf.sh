#!/usr/bin/env bash
# Measures an agentfs mount against go-fuse's loopback filesystem and the
# plain local directory, in one run, over the same disk: create/stat/read/
# delete of 10,000 files of 4 KiB, `git status` in a 5,000-file repository,
# and a sequential 1 GiB write (with fsync) and cold read. Prints the median
# of each phase per target and the ratios agentfs/loopback (time: lower is
# better) and agentfs/plain. Targets (issue 4): small files <= 1.0x,
# git status <= 0.5x, sequential >= 0.9x loopback's throughput.
#
# usage: scripts/mount-perf.sh [mountperf flags]
#   --workdir DIR        scratch space on the disk under test (default /var/tmp/agentfs-perf; emptied)
#   --repeats N          runs per workload and target (default 3)
#   --files N --git-files N --seq-mib N   workload sizes
#   --workloads LIST     smallfiles,git-status,seq
#   --mount-args "..."   extra flags for agentfs mount, e.g. "--tune writeback=1" to
#                        measure an alternative FUSE setting (see go doc ./fs Tuning)
#
# Cold reads drop the page cache (root) or the file's pages (fadvise). Run it on
# an otherwise idle machine: the servers compete for CPU with anything else.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fusermount3 >/dev/null || bash scripts/setup-fuse.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/agentfs" ./cmd/agentfs
go build -o "$bin/mountperf" ./fs/internal/mountperf
"$bin/mountperf" --agentfs "$bin/agentfs" "$@"
