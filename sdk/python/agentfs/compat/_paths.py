"""Path helpers shared by the adapters."""

from __future__ import annotations

import posixpath
from pathlib import PurePath
from typing import Union

from ..errors import PathEscape


def relative(path: Union[str, PurePath], root: str = "/") -> str:
    """Maps a path of an adapter's world to a workspace path.

    An absolute path under ``root`` (the working directory the adapter
    presents) becomes relative to it; "" and the root itself are the
    workspace root (""). Other absolute paths, "~" and ".." climbing out
    raise PathEscape, as the daemon would.
    """
    p = str(path)
    if p.startswith("~"):
        raise PathEscape(f"{p!r}: home directory expansion is not allowed in a workspace", path=p, status=400)
    if "\\" in p or (len(p) > 1 and p[1] == ":"):
        raise PathEscape(f"{p!r}: Windows paths are not workspace paths", path=p, status=400)
    if p.startswith("/"):
        r = root.rstrip("/") or "/"
        norm = posixpath.normpath(p)
        if r == "/":
            p = norm.lstrip("/")
        elif norm == r:
            p = ""
        elif norm.startswith(r + "/"):
            p = norm[len(r) + 1:]
        else:
            raise PathEscape(f"{p!r} is outside the workspace {root!r}", path=str(path), status=400)
    if p in ("", "."):
        return ""
    norm = posixpath.normpath(p)
    if norm == ".." or norm.startswith("../"):
        raise PathEscape(f"{p!r}: '..' climbs out of the workspace", path=str(path), status=400)
    return "" if norm == "." else norm
