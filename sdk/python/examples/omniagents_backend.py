"""omniagents on agentfs: swap LocalBackend/DockerBackend/E2BBackend for AgentFSBackend."""

from __future__ import annotations

import os

import agentfs
from agentfs.compat.omniagents import AgentFSBackend, FileType, NoOpStateManager


def main() -> None:
    project = f"omni-example-{os.getpid()}"
    backend = AgentFSBackend(project_id=project, state_manager=NoOpStateManager())
    backend.start()
    try:
        backend.write_file("hello.py", "print('hello')")
        result = backend.execute_command("python3 hello.py", timeout=120)
        print(result.output.strip(), result.exit_code)
        assert backend.file_exists("hello.py") is FileType.FILE
        backend.create_directory("src/utils", parents=True)
        for f in backend.list_directory(backend.get_working_directory(), recursive=True):
            print(f"{f.name} ({f.type.value})")
        print(backend.glob_files("**/*.py"))
    finally:
        backend.shutdown()
        agentfs.Client().delete_workspace(project)


if __name__ == "__main__":
    main()
