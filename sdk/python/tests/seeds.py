"""The interfaces of the seed documents (../shared/seeds/), transcribed: for each class,
its methods' parameters (name, default or REQUIRED, kind) and properties, as the seeds
spell them. The shape tests compare the adapters with these."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

REQUIRED: Any = object()
KW = "KEYWORD_ONLY"
POS = "POSITIONAL_OR_KEYWORD"

Params = List[Tuple[str, Any, str]]

# omniagents: "Backends API Reference" (ExecutionBackend, StateManager, data classes).
OMNIAGENTS: Dict[str, Dict[str, Any]] = {
    "ExecutionBackend": {
        "properties": ["project_id", "status"],
        "methods": {
            "start": [], "shutdown": [], "get_status": [],
            "execute_command": [("command", REQUIRED, POS), ("timeout", None, POS)],
            "read_file": [("file_path", REQUIRED, POS)],
            "write_file": [("file_path", REQUIRED, POS), ("content", REQUIRED, POS)],
            "delete_file": [("path", REQUIRED, POS)],
            "copy_file": [("src", REQUIRED, POS), ("dst", REQUIRED, POS)],
            "move_file": [("src", REQUIRED, POS), ("dst", REQUIRED, POS)],
            "file_exists": [("path", REQUIRED, POS)],
            "get_working_directory": [],
            "list_directory": [("path", REQUIRED, POS), ("recursive", False, POS)],
            "create_directory": [("path", REQUIRED, POS), ("parents", False, POS)],
            "delete_directory": [("path", REQUIRED, POS)],
            "glob_files": [("pattern", REQUIRED, POS), ("path", None, POS)],
        },
    },
    "StateManager": {
        "properties": [],
        "methods": {
            "save_snapshot": [("backend", REQUIRED, POS), ("message", "", POS)],
            "load_latest": [("backend", REQUIRED, POS)],
            "list_snapshots": [("project_id", REQUIRED, POS)],
            "cleanup": [("project_id", REQUIRED, POS)],
        },
    },
}
OMNIAGENTS_ENUMS = {"BackendStatus": ["UNINITIALIZED", "RUNNING", "STOPPED"],
                    "FileType": ["FILE", "DIRECTORY", "SYMLINK", "OTHER"]}
OMNIAGENTS_DATA = {"FileInfo": ["name", "path", "type"], "CommandResult": ["output", "exit_code"]}

# OpenEnv: the sandbox backend protocol source.
OPENENV: Dict[str, Dict[str, Any]] = {
    "BgJob": {"properties": ["pid"], "methods": {
        "wait": [("timeout", None, POS)], "kill": []}},
    "SandboxHandle": {"properties": ["sandbox_id"], "methods": {
        "exec": [("cmd", REQUIRED, POS), ("envs", None, KW), ("cwd", None, KW), ("timeout", 60, KW)],
        "start_bg": [("cmd", REQUIRED, POS), ("envs", None, KW), ("cwd", None, KW)],
        "write_text": [("path", REQUIRED, POS), ("content", REQUIRED, POS)],
        "read_text": [("path", REQUIRED, POS)],
        "exists": [("path", REQUIRED, POS)],
        "kill": []}},
    "SandboxBackend": {"properties": [], "methods": {
        "create": [("timeout_s", 900, KW), ("envs", None, KW), ("metadata", None, KW)]}},
}
OPENENV_DATA = {"ExecResult": ["exit_code", "stdout", "stderr"]}

# pydantic-deep: "Backends" (BackendProtocol, SandboxProtocol).
PYDANTIC_DEEP: Dict[str, Dict[str, Any]] = {
    "BackendProtocol": {"properties": [], "methods": {
        "ls_info": [("path", REQUIRED, POS)],
        "read": [("path", REQUIRED, POS), ("offset", 0, POS), ("limit", 2000, POS)],
        "write": [("path", REQUIRED, POS), ("content", REQUIRED, POS)],
        "edit": [("path", REQUIRED, POS), ("old_string", REQUIRED, POS), ("new_string", REQUIRED, POS),
                 ("replace_all", False, POS)],
        "glob_info": [("pattern", REQUIRED, POS), ("path", "/", POS)],
        "grep_raw": [("pattern", REQUIRED, POS), ("path", None, POS), ("glob", None, POS)]}},
    "SandboxProtocol": {"properties": ["id"], "methods": {
        "execute": [("command", REQUIRED, POS), ("timeout", None, POS)]}},
}
PYDANTIC_DEEP_DATA = {"WriteResult": ["path"], "ExecuteResponse": ["output", "exit_code"]}

# agent-backend: the Python client's README (scope, ScopeConfig, ExecOptions, ReadOptions, errors).
AGENT_BACKEND_METHODS = ["exec", "read", "write", "rename", "rm", "readdir", "mkdir", "touch", "exists", "stat",
                         "destroy", "scope", "track_closeable"]
AGENT_BACKEND_ASYNC = ["exec", "read", "write", "rename", "rm", "readdir", "mkdir", "touch", "exists", "stat",
                       "destroy"]
AGENT_BACKEND_DATA = {"ScopeConfig": ["env", "operations_logger"], "ExecOptions": ["encoding"],
                      "ReadOptions": ["encoding"]}
AGENT_BACKEND_ERRORS = ["BackendError", "DangerousOperationError", "PathEscapeError", "NotImplementedBackendError"]
AGENT_BACKEND_ENUMS = {"BackendType": {"LOCAL_FILESYSTEM": "local-filesystem", "REMOTE_FILESYSTEM": "remote-filesystem",
                                       "MEMORY": "memory"}}
