#!/usr/bin/env bash
# Installs what the TypeScript SDK's tests need (sdk/typescript): Node >= 20
# with npm (Debian's nodejs and npm when node is missing), then the SDK's dev
# dependencies (TypeScript only) from npm with `npm ci`. Idempotent.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/lib.sh"
command -v node >/dev/null || apt_install nodejs npm
command -v npm >/dev/null || apt_install npm
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old for sdk/typescript (needs >= 20: built-in fetch, AbortSignal.any); install a newer nodejs"
log "npm ci sdk/typescript"
(cd "$dir/../sdk/typescript" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
