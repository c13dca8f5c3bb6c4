"""pydantic-deep on agentfs: a backend with files and execution (BackendProtocol + SandboxProtocol)."""

from __future__ import annotations

import os

import agentfs
from agentfs.compat.pydantic_deep import AgentFSBackend


def main() -> None:
    name = f"pd-example-{os.getpid()}"
    backend = AgentFSBackend(name)  # deps = DeepAgentDeps(backend=backend)
    try:
        backend.write("/src/app.py", "def greet():\n    return 'hello'\n\nprint(greet())\n")
        print(backend.read("/src/app.py", offset=0, limit=2))
        print(backend.edit("/src/app.py", "'hello'", "'hello, agentfs'"))
        print([f.path for f in backend.glob_info("**/*.py")])
        print(backend.grep_raw(r"def \w+\(", path="/src"))
        response = backend.execute("python3 src/app.py", timeout=30)
        print(response.output.strip(), response.exit_code)
    finally:
        agentfs.Client().delete_workspace(name)


if __name__ == "__main__":
    main()
