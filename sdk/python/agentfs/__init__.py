"""agentfs: the Python client of `agentfs serve`, durable, snapshottable and forkable
workspaces for AI agents on blob storage.

    import agentfs
    with agentfs.Client() as c:            # $AGENTFS_URL, $AGENTFS_TOKEN
        ws = c.create_workspace("demo")
        ws.write("hello.py", "print('hi')")
        print(ws.exec("python3 hello.py").stdout)
        with ws.changes() as feed:         # the change feed: events as they happen
            ws.write("a.txt", "x")
            print(next(feed))              # ChangeEvent(id=..., op='created', path='a.txt', ...)

The asyncio client is agentfs.AsyncClient; adapters for other agent backends
are in agentfs.compat.
"""

from .aio import AsyncChangeFeed, AsyncClient, AsyncExecStream, AsyncJob, AsyncWorkspace
from .feed import FEED_IDLE_TIMEOUT, ChangeFeed
from .client import DEFAULT_URL, Client, Command, ExecStream, Job, Workspace
from .errors import (
    AgentFSError, BinaryFile, Busy, Canceled, Conflict, ConnectionFailed, Exists, Expired, Forbidden, Internal,
    InvalidArgument, IsADirectory, NoMatch, NotADirectory, NotEmpty, NotFound, NotUnique, OutOfRange, PathEscape,
    PolicyRefused, ProtocolError, Timeout, TooLarge, Unauthorized, Unavailable,
)
from .types import (
    Backend, Branch, ChangeEvent, DiffResult, HistoryChange, RestoreResult, Snapshot, VirtualChange, VirtualCommitResult,
    VirtualDiffResult, VirtualDiscardResult, Changes, ExecResult, FileInfo, GrepMatch, GrepResult, Health, JobInfo, JobOutput, NumberedRead,
    OutputChunk, TokenInfo, WorkspaceInfo, WriteResult,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncChangeFeed", "Backend", "Branch", "ChangeEvent", "ChangeFeed", "DiffResult", "FEED_IDLE_TIMEOUT", "HistoryChange", "RestoreResult", "Snapshot", "VirtualChange", "VirtualCommitResult",
    "VirtualDiffResult", "VirtualDiscardResult", "AgentFSError", "AsyncClient", "AsyncExecStream", "AsyncJob", "AsyncWorkspace", "Busy", "Canceled", "Changes",
    "BinaryFile", "Client", "Command", "Conflict", "ConnectionFailed", "DEFAULT_URL", "ExecResult", "ExecStream", "Exists",
    "Expired", "FileInfo", "Forbidden", "GrepMatch", "GrepResult", "Health", "Internal", "InvalidArgument",
    "IsADirectory", "Job", "JobInfo", "JobOutput", "NoMatch", "NotADirectory", "NotEmpty", "NotFound", "NotUnique",
    "NumberedRead", "OutOfRange", "OutputChunk", "PathEscape", "PolicyRefused", "ProtocolError", "Timeout", "TokenInfo",
    "TooLarge", "Unauthorized", "Unavailable", "Workspace", "WorkspaceInfo", "WriteResult",
]
