#!/usr/bin/env bash
# Installs and starts everything the test suite needs: fuse3, a Docker engine
# with the local test image, MinIO, golangci-lint, pytest and mypy for the
# Python SDK, and node with the TypeScript SDK's dev dependencies. Idempotent; safe to rerun.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/lib.sh"
bash "$dir/setup-fuse.sh"
bash "$dir/setup-docker.sh"
bash "$dir/setup-minio.sh"
bash "$dir/setup-lint.sh"
bash "$dir/setup-python.sh"
bash "$dir/setup-node.sh"
