"""omniagents' backend interface on agentfs.

``AgentFSBackend`` is an ``ExecutionBackend`` (like LocalBackend, DockerBackend
and E2BBackend) whose environment is an agentfs workspace named after the
project; ``AgentFSStateManager`` is a ``StateManager`` whose snapshots are
agentfs snapshots (O(1), sharing data). Swap the constructor:

    backend = AgentFSBackend(project_id="my-project", state_manager=AgentFSStateManager())
    backend.start()
    result = backend.execute_command("echo 'Hello'")
    print(result.output)   # "Hello"
    backend.shutdown()

Paths may be relative to the working directory or absolute under it
(``get_working_directory()``); others raise agentfs.PathEscape.
"""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import List, Optional, Union

from ..client import Client, Workspace
from ..errors import NotFound
from ._paths import relative

PathLike = Union[str, Path]


class BackendStatus(Enum):
    """A backend's lifecycle state."""

    UNINITIALIZED = "uninitialized"
    RUNNING = "running"
    STOPPED = "stopped"


class FileType(Enum):
    """What a path is."""

    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


@dataclass
class FileInfo:
    """A directory entry: its name, full path and type."""

    name: str
    path: str
    type: FileType


@dataclass
class CommandResult:
    """A command's combined stdout + stderr and exit code (0 for success)."""

    output: str
    exit_code: int


@dataclass
class SnapshotInfo:
    """A saved snapshot of a project.

    The seed does not list SnapshotInfo's fields; these are agentfs's:
    the id save_snapshot returned, the project, the message and the time.
    """

    snapshot_id: str
    project_id: str
    message: str
    created_at: datetime


_TYPES = {"file": FileType.FILE, "dir": FileType.DIRECTORY, "symlink": FileType.SYMLINK}


class StateManager(ABC):
    """Persists a backend's workspace between runs (omniagents' interface)."""

    @abstractmethod
    def save_snapshot(self, backend: "ExecutionBackend", message: str = "") -> str:
        """Save workspace state. Returns snapshot ID."""

    @abstractmethod
    def load_latest(self, backend: "ExecutionBackend") -> bool:
        """Load latest snapshot. Returns True if found."""

    @abstractmethod
    def list_snapshots(self, project_id: str) -> List[SnapshotInfo]:
        """List all snapshots for project."""

    @abstractmethod
    def cleanup(self, project_id: str) -> None:
        """Delete all snapshots for project."""


class NoOpStateManager(StateManager):
    """No persistence beyond what the workspace itself keeps."""

    def save_snapshot(self, backend: "ExecutionBackend", message: str = "") -> str:
        return ""

    def load_latest(self, backend: "ExecutionBackend") -> bool:
        return False

    def list_snapshots(self, project_id: str) -> List[SnapshotInfo]:
        return []

    def cleanup(self, project_id: str) -> None:
        return None


class ExecutionBackend(ABC):
    """omniagents' abstract backend: lifecycle, commands, files and directories."""

    def __init__(self, state_manager: StateManager) -> None:
        self.state_manager = state_manager

    @property
    @abstractmethod
    def project_id(self) -> str:
        """Unique identifier for this project/workspace."""

    @property
    @abstractmethod
    def status(self) -> BackendStatus:
        """Current status: UNINITIALIZED, RUNNING, or STOPPED."""

    @abstractmethod
    def start(self) -> None:
        """Start the execution environment (and load the latest state)."""

    @abstractmethod
    def shutdown(self) -> None:
        """Save the state and shut the environment down."""

    @abstractmethod
    def get_status(self) -> BackendStatus:
        """Get current backend status."""

    @abstractmethod
    def execute_command(self, command: str, timeout: Optional[int] = None) -> CommandResult:
        """Execute a bash command (timeout in seconds, default 120)."""

    @abstractmethod
    def read_file(self, file_path: PathLike) -> str:
        """Read file contents as string."""

    @abstractmethod
    def write_file(self, file_path: PathLike, content: str) -> None:
        """Write content to file. Creates parent directories."""

    @abstractmethod
    def delete_file(self, path: PathLike) -> None:
        """Delete a file."""

    @abstractmethod
    def copy_file(self, src: PathLike, dst: PathLike) -> None:
        """Copy file from src to dst."""

    @abstractmethod
    def move_file(self, src: PathLike, dst: PathLike) -> None:
        """Move file from src to dst."""

    @abstractmethod
    def file_exists(self, path: PathLike) -> Optional[FileType]:
        """The path's FileType, or None if it doesn't exist."""

    @abstractmethod
    def get_working_directory(self) -> str:
        """Get the workspace root directory path."""

    @abstractmethod
    def list_directory(self, path: PathLike, recursive: bool = False) -> List[FileInfo]:
        """List directory contents as FileInfo(name, path, type)."""

    @abstractmethod
    def create_directory(self, path: PathLike, parents: bool = False) -> None:
        """Create directory. If parents=True, creates parent dirs."""

    @abstractmethod
    def delete_directory(self, path: PathLike) -> None:
        """Delete directory and contents."""

    @abstractmethod
    def glob_files(self, pattern: str, path: Optional[PathLike] = None) -> List[str]:
        """Find files matching glob pattern."""


DEFAULT_TIMEOUT = 120
"""execute_command's timeout when none is given, in seconds (as omniagents')."""


class AgentFSBackend(ExecutionBackend):
    """An ExecutionBackend on an agentfs workspace named ``project_id``.

    start() creates the workspace if it does not exist (its data persists
    across runs on the daemon's store), then calls state_manager.load_latest;
    shutdown() calls state_manager.save_snapshot and stops the backend (the
    workspace is kept; it is synced and unmounted by the daemon when idle).
    Commands run with bash in the workspace root. ``client`` defaults to
    agentfs.Client() ($AGENTFS_URL, $AGENTFS_TOKEN).
    """

    def __init__(self, project_id: str, state_manager: StateManager, *, client: Optional[Client] = None) -> None:
        super().__init__(state_manager)
        self._project_id = project_id
        self.client = client or Client()
        self.workspace: Workspace = self.client.workspace(project_id)
        self._status = BackendStatus.UNINITIALIZED
        self._cwd = ""

    @property
    def project_id(self) -> str:
        return self._project_id

    @property
    def status(self) -> BackendStatus:
        return self._status

    def get_status(self) -> BackendStatus:
        return self._status

    def start(self) -> None:
        try:
            self.workspace.info()
        except NotFound:
            self.workspace = self.client.create_workspace(self._project_id)
        self._cwd = self.workspace.exec(["pwd"]).stdout.strip()
        self._status = BackendStatus.RUNNING
        self.state_manager.load_latest(self)

    def shutdown(self) -> None:
        if self._status is BackendStatus.RUNNING:
            self.state_manager.save_snapshot(self)
        self._status = BackendStatus.STOPPED

    def _rel(self, path: PathLike) -> str:
        return relative(path, self._cwd or "/")

    def _full(self, rel: str) -> str:
        return posixpath.join(self._cwd, rel) if self._cwd else rel

    def execute_command(self, command: str, timeout: Optional[int] = None) -> CommandResult:
        r = self.workspace.exec(["bash", "-c", command], timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
        return CommandResult(output=r.output, exit_code=r.exit_code)

    def read_file(self, file_path: PathLike) -> str:
        return self.workspace.read_text(self._rel(file_path))

    def write_file(self, file_path: PathLike, content: str) -> None:
        self.workspace.write(self._rel(file_path), content)

    def delete_file(self, path: PathLike) -> None:
        self.workspace.remove(self._rel(path))

    def copy_file(self, src: PathLike, dst: PathLike) -> None:
        self.workspace.copy(self._rel(src), self._rel(dst))

    def move_file(self, src: PathLike, dst: PathLike) -> None:
        self.workspace.rename(self._rel(src), self._rel(dst))

    def file_exists(self, path: PathLike) -> Optional[FileType]:
        try:
            st = self.workspace.stat(self._rel(path))
        except NotFound:
            return None
        return _TYPES.get(st.type, FileType.OTHER)

    def get_working_directory(self) -> str:
        if not self._cwd:
            self._cwd = self.workspace.exec(["pwd"]).stdout.strip()
        return self._cwd

    def list_directory(self, path: PathLike, recursive: bool = False) -> List[FileInfo]:
        return [FileInfo(name=e.name, path=self._full(e.path), type=_TYPES.get(e.type, FileType.OTHER))
                for e in self.workspace.list_dir(self._rel(path), recursive=recursive)]

    def create_directory(self, path: PathLike, parents: bool = False) -> None:
        self.workspace.mkdir(self._rel(path), parents=parents)

    def delete_directory(self, path: PathLike) -> None:
        self.workspace.remove(self._rel(path), recursive=True)

    def glob_files(self, pattern: str, path: Optional[PathLike] = None) -> List[str]:
        return self.workspace.glob(pattern, "" if path is None else self._rel(path))


class AgentFSStateManager(StateManager):
    """A StateManager whose snapshots are agentfs snapshots of the project's workspace.

    save_snapshot names a snapshot "PROJECT.YYYYmmddTHHMMSSffffff" (O(1): the
    data is shared with the workspace) and returns that name; load_latest
    restores the newest one in place (the state before is kept as an automatic
    snapshot by the daemon); list_snapshots lists the project's, oldest first;
    cleanup deletes them. ``client`` defaults to the backend's (or Client()).
    """

    def __init__(self, client: Optional[Client] = None) -> None:
        self._client = client

    def _c(self, backend: Optional[ExecutionBackend] = None) -> Client:
        if self._client is None:
            self._client = backend.client if isinstance(backend, AgentFSBackend) else Client()
        return self._client

    @staticmethod
    def _ws(backend: ExecutionBackend, client: Client) -> Workspace:
        return backend.workspace if isinstance(backend, AgentFSBackend) else client.workspace(backend.project_id)

    def save_snapshot(self, backend: ExecutionBackend, message: str = "") -> str:
        c = self._c(backend)
        name = f"{backend.project_id}.{datetime.utcnow().strftime('%Y%m%dT%H%M%S%f')}"
        return self._ws(backend, c).save_snapshot(name, message).name

    def _snapshots(self, ws: Workspace, project_id: str) -> List[SnapshotInfo]:
        out = [SnapshotInfo(snapshot_id=s.name, project_id=project_id, message=s.message, created_at=s.time)
               for s in ws.list_snapshots() if s.name.startswith(project_id + ".")]
        out.sort(key=lambda s: (s.created_at, s.snapshot_id))
        return out

    def load_latest(self, backend: ExecutionBackend) -> bool:
        c = self._c(backend)
        ws = self._ws(backend, c)
        snaps = self._snapshots(ws, backend.project_id)
        if not snaps:
            return False
        ws.restore(snaps[-1].snapshot_id, f"omniagents: load {snaps[-1].snapshot_id}")
        return True

    def list_snapshots(self, project_id: str) -> List[SnapshotInfo]:
        try:
            return self._snapshots(self._c().workspace(project_id), project_id)
        except NotFound:
            return []

    def cleanup(self, project_id: str) -> None:
        ws = self._c().workspace(project_id)
        for s in self.list_snapshots(project_id):
            ws.delete_snapshot(s.snapshot_id)
