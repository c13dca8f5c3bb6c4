#!/usr/bin/env bash
# Builds the pinned MinIO server into the tools folder (about 3 minutes, once)
# and checks that it runs. The S3 tests find it through $AGENTFS_MINIO, else
# $AGENTFS_TOOLS/minio (see internal/testservices). The GCS emulator needs no
# set-up: fake-gcs-server runs inside the test process.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
go_tool minio github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
"$AGENTFS_TOOLS/minio" --version >/dev/null 2>&1 || die "$AGENTFS_TOOLS/minio does not run; delete it and rerun $0"
log "minio ready: $AGENTFS_TOOLS/minio"
