"""Drop-in adapters: agentfs behind the interfaces of other agent backends.

- agentfs.compat.omniagents: omniagents' ExecutionBackend and StateManager
- agentfs.compat.openenv: OpenEnv's SandboxBackend / SandboxHandle / BgJob
- agentfs.compat.pydantic_deep: pydantic-deep's BackendProtocol / SandboxProtocol
- agentfs.compat.agent_backend: agent-backend's async backend (scope, exec, read, ...)

Each module is shaped like its seed's interface (names, parameters and
defaults, result fields, exceptions), so a user swaps one constructor.
"""
