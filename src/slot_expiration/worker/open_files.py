"""The worker's limit on open files, raised at start as Go's runtime raises it."""

from __future__ import annotations

import resource
from contextlib import suppress


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.

    The usual soft limit of 1024 only protects programs that wait with select(), which
    fails on descriptors above 1023; this process waits with epoll (asyncio) and poll
    (libpq), so it may use what the administrator allowed as the hard limit. The endpoint
    does not rely on it (its sockets are capped): it is room for the database sessions
    should anything else in the process hold descriptors. A limit that cannot be raised
    (a sandbox refusing it) is left as it was.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
