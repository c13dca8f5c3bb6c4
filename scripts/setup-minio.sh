#!/usr/bin/env bash
# Builds the pinned MinIO server into the tools folder (about 3 minutes, once).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
go_tool minio github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
log "minio ready: $AGENTFS_TOOLS/minio"
