"""OpenEnv's sandbox protocol on agentfs.

``AgentFSSandboxBackend().create(timeout_s=900, envs=None, metadata=None)``
returns a ``SandboxHandle`` over a new agentfs workspace whose lifetime is
``timeout_s``: when it ends, the daemon kills its commands and jobs and
deletes it. ``kill()`` deletes it at once.

The seed's ``sandbox_id`` and ``pid`` are written ``def sandbox_id(self) -> str:
...`` in the transcribed source, whose decorators were lost in transcription
(its ``@dataclass`` on ExecResult too, with ``dataclass`` imported); they are
properties here, as in OpenEnv.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import Dict, Optional, Protocol, runtime_checkable

from ..client import Client, Job, Workspace
from ..errors import NotFound, Timeout
from ._paths import relative

MAX_TIMEOUT = 24 * 3600.0
"""The longest command timeout the daemon takes; exec(timeout=None) uses it."""


@dataclass
class ExecResult:
    """Result of a synchronous command inside a sandbox."""

    exit_code: int
    stdout: str
    stderr: str


@runtime_checkable
class BgJob(Protocol):
    """Handle to a background process running inside a sandbox."""

    @property
    def pid(self) -> int: ...

    def wait(self, timeout: Optional[float] = None) -> int:
        """Block until the process exits, returning its exit code; TimeoutError if timeout elapses."""
        ...

    def kill(self) -> None:
        """Terminate the process."""
        ...


@runtime_checkable
class SandboxHandle(Protocol):
    """Opaque handle to one live sandbox."""

    @property
    def sandbox_id(self) -> str: ...

    def exec(self, cmd: str, *, envs: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             timeout: Optional[float] = 60) -> ExecResult:
        """Run a shell command synchronously and return its result."""
        ...

    def start_bg(self, cmd: str, *, envs: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> BgJob:
        """Launch a background process and return a handle."""
        ...

    def write_text(self, path: str, content: str) -> None:
        """Write text to ``path`` inside the sandbox (parent dirs auto-created)."""
        ...

    def read_text(self, path: str) -> str:
        """Read ``path`` as text from the sandbox."""
        ...

    def exists(self, path: str) -> bool:
        """Return whether ``path`` exists in the sandbox."""
        ...

    def kill(self) -> None:
        """Terminate the sandbox and release resources."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """Factory for fresh sandbox instances."""

    def create(self, *, timeout_s: int = 900, envs: Optional[Dict[str, str]] = None,
               metadata: Optional[Dict[str, str]] = None) -> SandboxHandle:
        """Create and return a new, ready-to-use sandbox."""
        ...


class AgentFSBgJob:
    """A background job of an agentfs sandbox (a BgJob). ``pid`` is the job's number
    on the daemon (job-N), not a process id of the host."""

    def __init__(self, job: Job[str]) -> None:
        self.job = job

    @property
    def pid(self) -> int:
        return int(self.job.id.rsplit("-", 1)[-1])

    def wait(self, timeout: Optional[float] = None) -> int:
        """Blocks until the job exits and returns its exit code; TimeoutError (agentfs.Timeout) if
        ``timeout`` seconds pass first (None: wait without end)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 3600.0 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                info = self.job.wait(timeout=left)
            except Timeout:
                if deadline is None:
                    continue
                raise
            return -1 if info.exit_code is None else info.exit_code

    def kill(self) -> None:
        self.job.kill()


_ids = itertools.count(1)


class AgentFSSandbox:
    """One agentfs workspace as an OpenEnv sandbox (a SandboxHandle)."""

    def __init__(self, workspace: Workspace, envs: Optional[Dict[str, str]] = None) -> None:
        self.workspace = workspace
        self.envs = dict(envs or {})

    @property
    def sandbox_id(self) -> str:
        return self.workspace.name

    def _env(self, envs: Optional[Dict[str, str]]) -> Dict[str, str]:
        e = dict(self.envs)
        e.update(envs or {})
        return e

    def exec(self, cmd: str, *, envs: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             timeout: Optional[float] = 60) -> ExecResult:
        r = self.workspace.exec(cmd, env=self._env(envs), cwd=None if cwd is None else relative(cwd),
                                timeout=MAX_TIMEOUT if timeout is None else timeout)
        return ExecResult(exit_code=r.exit_code, stdout=r.stdout, stderr=r.stderr)

    def start_bg(self, cmd: str, *, envs: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> AgentFSBgJob:
        return AgentFSBgJob(self.workspace.start_job(cmd, env=self._env(envs),
                                                     cwd=None if cwd is None else relative(cwd)))

    def write_text(self, path: str, content: str) -> None:
        self.workspace.write(relative(path), content)

    def read_text(self, path: str) -> str:
        return self.workspace.read_text(relative(path))

    def exists(self, path: str) -> bool:
        return self.workspace.exists(relative(path))

    def kill(self) -> None:
        """Deletes the sandbox's workspace (its commands and jobs are killed)."""
        try:
            self.workspace.delete()
        except NotFound:
            pass


class AgentFSSandboxBackend:
    """Creates agentfs sandboxes (a SandboxBackend). ``client`` defaults to
    agentfs.Client(); sandbox names are ``prefix`` plus a unique suffix."""

    def __init__(self, client: Optional[Client] = None, *, prefix: str = "openenv") -> None:
        self.client = client or Client()
        self.prefix = prefix

    def create(self, *, timeout_s: int = 900, envs: Optional[Dict[str, str]] = None,
               metadata: Optional[Dict[str, str]] = None) -> AgentFSSandbox:
        """A new empty workspace that lives ``timeout_s`` seconds (then its commands are
        killed and it is deleted); ``envs`` apply to every command."""
        name = f"{self.prefix}-{os.getpid()}-{int(time.time() * 1000)}-{next(_ids)}"
        ws = self.client.create_workspace(name, lifetime=float(timeout_s), delete_on_expiry=True,
                                          metadata=metadata)
        return AgentFSSandbox(ws, envs)
