"""What the endpoint's pages take and give: a request and its reply, plain data.

Apart from `http_server`, which carries them over aiohttp: the pages (`endpoints`,
`ui/server.py`) are imported with every command, the server only when one starts
serving (aiohttp's import is 11 MB of resident memory and about 0.2 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    # Lower-case names; a repeated header's values joined with ", " (RFC 9110 5.3).
    headers: Mapping[str, str]
    query: str = ""  # what followed the path's `?`, as sent


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
