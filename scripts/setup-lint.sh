#!/usr/bin/env bash
# Builds the pinned golangci-lint into the tools folder (once).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
go_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
log "golangci-lint ready"
