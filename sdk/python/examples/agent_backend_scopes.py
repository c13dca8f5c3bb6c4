"""agent-backend on agentfs: async scoped backends with env, operations logging and binary data."""

from __future__ import annotations

import asyncio
import os

import agentfs
from agentfs.compat.agent_backend import (
    AgentFSBackend, AgentFSBackendConfig, ConsoleOperationsLogger, ExecOptions, PathEscapeError, ReadOptions,
    ScopeConfig,
)


async def main() -> None:
    name = f"ab-example-{os.getpid()}"
    backend = AgentFSBackend(AgentFSBackendConfig(workspace=name))
    user = backend.scope("users/user1", ScopeConfig(env={"GREETING": "hi"},
                                                   operations_logger=ConsoleOperationsLogger()))
    await user.write("script.py", "import os; print(os.environ['GREETING'])")
    print(await user.exec("python3 script.py"))
    tarball = await user.exec("tar -czf - .", ExecOptions(encoding="buffer"))
    print("tarball", len(tarball), "bytes")
    data = await user.read("script.py", ReadOptions(encoding="buffer"))
    print("read", len(data), "bytes;", await user.readdir("."))
    try:
        await user.read("../../../etc/passwd")
    except PathEscapeError as e:
        print("refused:", e.code)
    await backend.destroy()
    agentfs.Client().delete_workspace(name)


if __name__ == "__main__":
    asyncio.run(main())
