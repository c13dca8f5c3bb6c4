#!/usr/bin/env bash
# Tests the TypeScript SDK (sdk/typescript): node and npm ci (TypeScript, its
# only dev dependency, from npm) by scripts/setup-node.sh, tsc --strict, then
# node --test against a real `agentfs serve` built from this tree once here
# (each test file starts its own daemon from it; AGENTFS_BIN names a prebuilt
# binary instead). scripts/test.sh calls it after
# the Python tests; `make test-typescript` runs it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

bash scripts/setup-node.sh

log "tsc --strict sdk/typescript"
(cd sdk/typescript && npx tsc -p tsconfig.json)

if [ -z "${AGENTFS_BIN:-}" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	log "go build ./cmd/agentfs"
	go build -o "$tmp/agentfs" ./cmd/agentfs
	export AGENTFS_BIN="$tmp/agentfs"
fi

log "node --test sdk/typescript"
(cd sdk/typescript && node --test test/*.test.mjs)
