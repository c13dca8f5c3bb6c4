/**
 * Errors of the agentfs client, one class per API error code (the `code` of the
 * API's error body `{"error": {"code", "message", "path"}}`), as in the Python SDK.
 * A request that got no answer throws ConnectionFailed; an answer that is not what
 * the API describes throws ProtocolError.
 */

/** An error answered by the agentfs daemon (or met on the way to it). */
export class AgentFSError extends Error {
  /** The API's stable error code (`not_found`, `path_escape`, ...). */
  readonly code: string;
  /** The workspace path the request named ("" if none). */
  readonly path: string;
  /** The HTTP status (0 when the request got no answer). */
  readonly status: number;

  constructor(message: string, options: { code?: string; path?: string; status?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? (new.target as unknown as { code?: string }).code ?? "internal";
    this.path = options.path ?? "";
    this.status = options.status ?? 0;
  }

  override toString(): string {
    return `${this.name} ${this.code}: ${this.message}`;
  }
}

/** The workspace, file, job or snapshot does not exist (404). */
export class NotFound extends AgentFSError { static readonly code: string = "not_found"; }
/** An edit's old string does not occur in the file (404); a NotFound, as it was before it had its code. */
export class NoMatch extends NotFound { static override readonly code = "no_match"; }
/** The name is taken (409). */
export class Exists extends AgentFSError { static readonly code = "exists"; }
/** A path is absolute, climbs out with "..", or a symlink points out (400). */
export class PathEscape extends AgentFSError { static readonly code = "path_escape"; }
/** A directory was expected (400). */
export class NotADirectory extends AgentFSError { static readonly code = "not_a_directory"; }
/** A file was expected (400). */
export class IsADirectory extends AgentFSError { static readonly code = "is_a_directory"; }
/** A directory is not empty: remove it recursively (409). */
export class NotEmpty extends AgentFSError { static readonly code = "not_empty"; }
/** An edit's old string matches more than once (409). */
export class NotUnique extends AgentFSError { static readonly code = "not_unique"; }
/** The daemon's command policy refused the command (403). */
export class PolicyRefused extends AgentFSError { static readonly code = "policy_refused"; }
/** The request ran out of time: a job wait on the daemon (504), or the client's timeout, while waiting for the answer or reading it (status 0). */
export class Timeout extends AgentFSError { static readonly code = "timeout"; }
/** Concurrent changes collide: a commit's base moved, a lease was lost (409). */
export class Conflict extends AgentFSError { static readonly code = "conflict"; }
/** A cap is reached or the resource is in use; retry later (429). */
export class Busy extends AgentFSError { static readonly code = "busy"; }
/** No valid token (401). */
export class Unauthorized extends AgentFSError { static readonly code = "unauthorized"; }
/** The token may not do this: another workspace's, or read-only (403). */
export class Forbidden extends AgentFSError { static readonly code = "forbidden"; }
/** The request is malformed (400). */
export class InvalidArgument extends AgentFSError { static readonly code: string = "invalid_argument"; }
/** A numbered read's line offset is at or past the end of the file (400). */
export class OutOfRange extends InvalidArgument { static override readonly code = "out_of_range"; }
/** A text operation (numbered read, edit) met a binary file: read it as bytes (400). */
export class BinaryFile extends InvalidArgument { static override readonly code = "binary_file"; }
/** The request body is over the daemon's limit (413). */
export class TooLarge extends AgentFSError { static readonly code = "too_large"; }
/** The workspace's lifetime ended: fork it or delete it (410). */
export class Expired extends AgentFSError { static readonly code = "expired"; }
/** A service below the daemon (mount server, docker, store) is not available (503). */
export class Unavailable extends AgentFSError { static readonly code = "unavailable"; }
/** The request was canceled (by the daemon, or by the caller's AbortSignal). */
export class Canceled extends AgentFSError { static readonly code = "canceled"; }
/** A bug or a corruption in the daemon; see its log (500). */
export class Internal extends AgentFSError { static readonly code = "internal"; }
/** The request got no answer: the daemon is unreachable or the connection broke. */
export class ConnectionFailed extends AgentFSError { static readonly code = "connection_failed"; }
/** The daemon's answer is not what the API describes (a proxy in the way, or a version skew). */
export class ProtocolError extends AgentFSError { static readonly code = "protocol_error"; }

type ErrorClass = new (message: string, options?: { code?: string; path?: string; status?: number; cause?: unknown }) => AgentFSError;

/** Maps an API error code to its error class. */
export const ERRORS: Readonly<Record<string, ErrorClass>> = Object.freeze(Object.fromEntries(
  [NotFound, Exists, PathEscape, NotADirectory, IsADirectory, NotEmpty, NotUnique, PolicyRefused, Timeout,
    Conflict, Busy, Unauthorized, Forbidden, InvalidArgument, TooLarge, Expired, Unavailable, Canceled, Internal,
    ConnectionFailed, ProtocolError, NoMatch, OutOfRange, BinaryFile].map((c) => [c.code, c as ErrorClass]),
));

/** The error for an API error body; an unknown code gives a plain AgentFSError. */
export function errorFrom(code: string, message: string, path = "", status = 0): AgentFSError {
  const cls = ERRORS[code] ?? AgentFSError;
  return new cls(message, { code, path, status });
}
