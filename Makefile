# agentfs — see README.md.
GO      ?= go
BIN     ?= bin/agentfs
WORKSPACE ?= ./workspace

.PHONY: all build test lint setup run clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/agentfs

# Installs what the tests need (fuse3, Docker engine, MinIO, golangci-lint) and runs every test.
test:
	bash scripts/test.sh

setup:
	bash scripts/setup.sh

lint:
	bash scripts/setup-lint.sh && PATH="$${AGENTFS_TOOLS:-$$HOME/.cache/agentfs/tools}:$$PATH" golangci-lint run ./...

clean:
	rm -rf bin
