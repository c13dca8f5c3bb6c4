# agentfs — see README.md.
GO      ?= go
BIN     ?= bin/agentfs
WORKSPACE ?= ./workspace

.PHONY: all build test test-python test-typescript lint setup run clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/agentfs

# Installs what the tests need (fuse3, Docker engine, MinIO, golangci-lint) and runs every test.
test:
	bash scripts/test.sh

# The Python SDK alone (sdk/python): mypy --strict and pytest against a real agentfs serve.
test-python:
	bash scripts/test-python.sh

# The TypeScript SDK alone (sdk/typescript): npm ci, tsc --strict and node --test against a real agentfs serve.
test-typescript:
	bash scripts/test-typescript.sh

setup:
	bash scripts/setup.sh

# Builds agentfs, mounts $(WORKSPACE) on the embedded default store (a local
# file:// store in ~/.local/share/agentfs/default, created on first use) with
# a server in the background, uses it, and leaves it mounted for you to play
# with. Running it again reuses the mount. `bin/agentfs umount ./workspace`
# syncs and unmounts it.
run: build
	@command -v fusermount3 >/dev/null || bash scripts/setup-fuse.sh
	@$(BIN) status $(WORKSPACE) >/dev/null 2>&1 || $(BIN) mount -d $(WORKSPACE)
	@echo '$$ echo "hello from agentfs" > $(WORKSPACE)/hello.txt' && echo "hello from agentfs ($$(date -u +%FT%TZ))" > $(WORKSPACE)/hello.txt
	@echo '$$ mkdir -p $(WORKSPACE)/notes && cp README.md $(WORKSPACE)/notes/' && mkdir -p $(WORKSPACE)/notes && cp README.md $(WORKSPACE)/notes/
	@echo '$$ ls -l $(WORKSPACE)' && ls -l $(WORKSPACE)
	@echo '$$ cat $(WORKSPACE)/hello.txt' && cat $(WORKSPACE)/hello.txt
	@echo '$$ $(BIN) sync $(WORKSPACE)' && $(BIN) sync $(WORKSPACE)
	@echo '$$ $(BIN) status $(WORKSPACE)' && $(BIN) status $(WORKSPACE)
	@echo
	@echo "$(WORKSPACE) stays mounted: use it like any directory, or from a container with"
	@echo "  docker run --rm -v $$(cd $(WORKSPACE) && pwd):/workspace IMAGE ..."
	@echo "Unmount it (everything is synced to the store first) with:"
	@echo "  $(BIN) umount $(WORKSPACE)"

lint:
	bash scripts/setup-lint.sh && PATH="$${AGENTFS_TOOLS:-$$HOME/.cache/agentfs/tools}:$$PATH" golangci-lint run ./... && bash scripts/depguard-probes.sh

clean:
	rm -rf bin
