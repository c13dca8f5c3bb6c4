#!/usr/bin/env bash
# Measures virtual mounts against baselines measured in the same run (issue 8):
# cold reads of untouched host files against go-fuse's loopback of the same
# directory (target >= 0.9x), `git status` in a 5,000-file checkout against a
# normal mount (target <= 1.0x), and `agentfs diff` of 10 changed files in a
# 50,000-file base (target <= 100 ms; against a 500-file base for the ratio).
#
# usage: scripts/virtual-perf.sh [virtualperf flags]
#   --workdir DIR      scratch space on the disk under test (default /var/tmp/agentfs-virtual-perf; emptied)
#   --repeats N        runs per measurement (default 3)
#   --workloads LIST   read,git-status,diff
#   --diff-files N     files of the large diff base (default 50000)
#
# Run it on an otherwise idle machine: the servers compete for CPU with anything else.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fusermount3 >/dev/null || bash scripts/setup-fuse.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/agentfs" ./cmd/agentfs
go build -o "$bin/virtualperf" ./fs/internal/virtualperf
"$bin/virtualperf" --agentfs "$bin/agentfs" "$@"
