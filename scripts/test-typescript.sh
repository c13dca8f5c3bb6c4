#!/usr/bin/env bash
# Tests the TypeScript SDK (sdk/typescript): npm ci (TypeScript, its only dev
# dependency, from npm), tsc --strict, then node --test against a real
# `agentfs serve` built from this tree (test/daemon.mjs builds and starts it;
# AGENTFS_BIN names a prebuilt binary instead). scripts/test.sh calls it after
# the Python tests; `make test-typescript` runs it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

command -v node >/dev/null || die "node (>= 20) is not installed: apt-get install nodejs npm"
log "npm ci sdk/typescript"
(cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)

log "tsc --strict sdk/typescript"
(cd sdk/typescript && npx tsc -p tsconfig.json)

log "node --test sdk/typescript"
(cd sdk/typescript && node --test test/*.test.mjs)
