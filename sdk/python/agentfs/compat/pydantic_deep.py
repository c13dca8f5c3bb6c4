"""pydantic-deep's backend protocol on agentfs.

``AgentFSBackend`` implements ``BackendProtocol`` and ``SandboxProtocol`` (file
storage with execution) over an agentfs workspace, a drop-in for
FilesystemBackend / DockerSandbox:

    backend = AgentFSBackend("my-agent")                      # a persistent workspace
    backend = AgentFSBackend("try-1", virtual_mode=True,      # copy-on-write over a base
                             base="snapshot:release")
    deps = DeepAgentDeps(backend=backend)

Paths are absolute within the workspace ("/src/app.py") or relative; "..",
"~" and Windows paths fail (agentfs.PathEscape). As in pydantic-deep, read
answers a missing file with an "Error: ..." string, write and edit report
failures in the result's ``error``; other failures raise agentfs errors.

The seed names FileInfo, WriteResult, EditResult, GrepMatch and
ExecuteResponse (WriteResult(path=...), ExecuteResponse's output and
exit_code); the other fields follow pydantic-deep's types.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import List, Optional, Protocol, Union, runtime_checkable

from ..client import Client, Workspace
from ..errors import AgentFSError, InvalidArgument, IsADirectory, NotFound, NotUnique
from ._paths import relative

DEFAULT_READ_LIMIT = 2000
"""read's default line limit."""

DEFAULT_EXEC_TIMEOUT = 120
"""execute's timeout when none is given, in seconds."""


@dataclass
class FileInfo:
    """A file or directory: its name, absolute path in the workspace, kind and size."""

    name: str
    path: str
    is_dir: bool
    size: Optional[int] = None


@dataclass
class WriteResult:
    """The result of write: the path written, or the error."""

    path: Optional[str] = None
    error: Optional[str] = None


@dataclass
class EditResult:
    """The result of edit: the path and the occurrences replaced, or the error."""

    path: Optional[str] = None
    error: Optional[str] = None
    occurrences: Optional[int] = None


@dataclass
class GrepMatch:
    """A matching line: its file's absolute path, 1-based line number and text."""

    path: str
    line_number: int
    line: str


@dataclass
class ExecuteResponse:
    """A command's combined output, exit code, and whether the output was truncated."""

    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@runtime_checkable
class BackendProtocol(Protocol):
    """pydantic-deep's file storage protocol."""

    def ls_info(self, path: str) -> List[FileInfo]:
        """List directory contents."""
        ...

    def read(self, path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read file contents with line numbers."""
        ...

    def write(self, path: str, content: str) -> WriteResult:
        """Write file contents."""
        ...

    def edit(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Edit file by replacing strings."""
        ...

    def glob_info(self, pattern: str, path: str = "/") -> List[FileInfo]:
        """Find files matching glob pattern."""
        ...

    def grep_raw(self, pattern: str, path: Optional[str] = None,
                 glob: Optional[str] = None) -> Union[List[GrepMatch], str]:
        """Search file contents with regex."""
        ...


@runtime_checkable
class SandboxProtocol(BackendProtocol, Protocol):
    """BackendProtocol with execution."""

    def execute(self, command: str, timeout: Optional[int] = None) -> ExecuteResponse:
        """Execute a shell command."""
        ...

    @property
    def id(self) -> str:
        """Unique identifier for this sandbox."""
        ...


def _abs(rel: str) -> str:
    return "/" + rel


class AgentFSBackend:
    """A pydantic-deep backend (BackendProtocol and SandboxProtocol) on the agentfs
    workspace ``workspace`` (a name, created if missing, or a Workspace).

    With ``virtual_mode=True`` the workspace is virtual: copy-on-write over
    ``base`` ("snapshot:NAME" or an absolute host directory the daemon may
    read); writes stay in the workspace, reads fall through to the base, and
    ``virtual_files`` lists what changed (commit or discard them with
    ``workspace.virtual_commit()`` / ``virtual_discard()``).
    """

    def __init__(self, workspace: Union[str, Workspace], *, virtual_mode: bool = False, base: Optional[str] = None,
                 client: Optional[Client] = None) -> None:
        if isinstance(workspace, Workspace):
            self.workspace = workspace
        else:
            c = client or Client()
            try:
                info = c.get_workspace(workspace)
                if virtual_mode and not info.virtual:
                    raise InvalidArgument(f"workspace {workspace!r} exists and is not virtual; pick another name",
                                          status=400)
                self.workspace = c.workspace(workspace)
            except NotFound:
                if virtual_mode and not base:
                    raise ValueError("virtual_mode=True needs base=\"snapshot:NAME\" or an absolute host directory")
                self.workspace = c.create_workspace(workspace, virtual_base=base if virtual_mode else None)
        self.virtual_mode = virtual_mode

    @property
    def id(self) -> str:
        """The workspace's name."""
        return self.workspace.name

    @property
    def virtual_files(self) -> List[str]:
        """The absolute paths a virtual workspace changed over its base (added, modified,
        deleted or renamed)."""
        return [_abs(c.path) for c in self.workspace.virtual_diff().changes]

    def ls_info(self, path: str) -> List[FileInfo]:
        return [FileInfo(name=e.name, path=_abs(e.path), is_dir=e.is_dir, size=None if e.is_dir else e.size)
                for e in self.workspace.list_dir(relative(path))]

    def read(self, path: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> str:
        """``limit`` lines from line ``offset`` (0-based), numbered ``cat -n`` style."""
        try:
            return self.workspace.read_numbered(relative(path), offset=offset, limit=limit).content
        except NotFound:
            return f"Error: File '{path}' not found"
        except IsADirectory:
            return f"Error: '{path}' is a directory"

    def write(self, path: str, content: str) -> WriteResult:
        try:
            self.workspace.write(relative(path), content)
        except (NotFound, IsADirectory, InvalidArgument) as e:
            return WriteResult(error=f"Error: {e.message}")
        return WriteResult(path=path)

    def edit(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        try:
            n = self.workspace.edit(relative(path), old_string, new_string, replace_all)
        except (NotFound, NotUnique, IsADirectory) as e:
            return EditResult(error=f"Error: {e.message}")
        return EditResult(path=path, occurrences=n)

    def glob_info(self, pattern: str, path: str = "/") -> List[FileInfo]:
        base = relative(path)
        out = []
        for p in self.workspace.glob(pattern.lstrip("/"), base):
            st = self.workspace.stat(p)
            out.append(FileInfo(name=posixpath.basename(p), path=_abs(p), is_dir=st.is_dir,
                                size=None if st.is_dir else st.size))
        return out

    def grep_raw(self, pattern: str, path: Optional[str] = None,
                 glob: Optional[str] = None) -> Union[List[GrepMatch], str]:
        """Matches of the regular expression ``pattern``; an invalid pattern is an error string."""
        try:
            res = self.workspace.grep(pattern, relative(path) if path else "", glob=glob or "")
        except InvalidArgument as e:
            return f"Error: {e.message}"
        return [GrepMatch(path=_abs(m.path), line_number=m.line, line=m.text) for m in res.matches]

    def execute(self, command: str, timeout: Optional[int] = None) -> ExecuteResponse:
        r = self.workspace.exec(command, timeout=DEFAULT_EXEC_TIMEOUT if timeout is None else timeout)
        return ExecuteResponse(output=r.output, exit_code=r.exit_code, truncated=r.truncated)


__all__ = ["AgentFSBackend", "BackendProtocol", "EditResult", "ExecuteResponse", "FileInfo", "GrepMatch",
           "SandboxProtocol", "WriteResult", "AgentFSError"]
