"""Exceptions of the agentfs client, one class per API error code.

Every failed request raises an :class:`AgentFSError` (or a subclass chosen by
the ``code`` of the API's error body ``{"error": {"code", "message", "path"}}``).
A request that never got an answer (connection refused, reset, DNS) raises
:class:`ConnectionFailed`.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class AgentFSError(Exception):
    """An error answered by the agentfs daemon (or met on the way to it).

    ``code`` is the API's stable error code (``not_found``, ``path_escape``,
    ...), ``message`` the daemon's explanation, ``path`` the workspace path
    the request named ("" if none) and ``status`` the HTTP status (0 when
    the request got no answer).
    """

    code: str = "internal"

    def __init__(self, message: str, *, code: Optional[str] = None, path: str = "", status: int = 0) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.path = path
        self.status = status

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class NotFound(AgentFSError):
    """The workspace, file, job or snapshot does not exist (404)."""

    code = "not_found"


class NoMatch(NotFound):
    """An edit's old string does not occur in the file (404). A NotFound, as it was before it had its code."""

    code = "no_match"


class Exists(AgentFSError):
    """The name is taken (409)."""

    code = "exists"


class PathEscape(AgentFSError):
    """A path is absolute, climbs out with "..", or a symlink points out (400)."""

    code = "path_escape"


class NotADirectory(AgentFSError):
    """A directory was expected (400)."""

    code = "not_a_directory"


class IsADirectory(AgentFSError):
    """A file was expected (400)."""

    code = "is_a_directory"


class NotEmpty(AgentFSError):
    """A directory is not empty: remove it recursively (409)."""

    code = "not_empty"


class NotUnique(AgentFSError):
    """An edit's old string matches more than once (409)."""

    code = "not_unique"


class PolicyRefused(AgentFSError):
    """The daemon's command policy refused the command (403)."""

    code = "policy_refused"


class Timeout(AgentFSError, TimeoutError):
    """The request (or a job wait) ran out of time (504). Also a builtin TimeoutError."""

    code = "timeout"


class Conflict(AgentFSError):
    """Concurrent changes collide: a commit's base moved, a lease was lost (409)."""

    code = "conflict"


class Busy(AgentFSError):
    """A cap is reached or the resource is in use; retry later (429)."""

    code = "busy"


class Unauthorized(AgentFSError):
    """No valid token (401)."""

    code = "unauthorized"


class Forbidden(AgentFSError):
    """The token may not do this: another workspace's, or read-only (403)."""

    code = "forbidden"


class InvalidArgument(AgentFSError):
    """The request is malformed (400)."""

    code = "invalid_argument"


class OutOfRange(InvalidArgument):
    """A numbered read's line offset is at or past the end of the file (400)."""

    code = "out_of_range"


class BinaryFile(InvalidArgument):
    """A text operation (numbered read, edit) met a binary file: read it as bytes (400)."""

    code = "binary_file"


class TooLarge(AgentFSError):
    """The request body is over the daemon's limit (413)."""

    code = "too_large"


class Expired(AgentFSError):
    """The workspace's lifetime ended: fork it or delete it (410)."""

    code = "expired"


class Unavailable(AgentFSError):
    """A service below the daemon (mount server, docker, store) is not available (503)."""

    code = "unavailable"


class Canceled(AgentFSError):
    """The request was canceled."""

    code = "canceled"


class Internal(AgentFSError):
    """A bug or a corruption in the daemon; see its log (500)."""

    code = "internal"


class ConnectionFailed(AgentFSError):
    """The request got no answer: the daemon is unreachable or the connection broke."""

    code = "connection_failed"


class ProtocolError(AgentFSError):
    """The daemon's answer is not what the API describes (a proxy in the way, or a version skew)."""

    code = "protocol_error"


ERRORS: Dict[str, Type[AgentFSError]] = {
    cls.code: cls
    for cls in (
        NotFound, Exists, PathEscape, NotADirectory, IsADirectory, NotEmpty, NotUnique, PolicyRefused,
        Timeout, Conflict, Busy, Unauthorized, Forbidden, InvalidArgument, TooLarge, Expired,
        Unavailable, Canceled, Internal, ConnectionFailed, ProtocolError, NoMatch, OutOfRange, BinaryFile,
    )
}
"""Maps an API error code to its exception class."""


def error_from(code: str, message: str, path: str = "", status: int = 0) -> AgentFSError:
    """Returns the exception for an API error body; an unknown code gives a plain AgentFSError."""
    cls = ERRORS.get(code, AgentFSError)
    return cls(message, code=code, path=path, status=status)
