"""The `ui` command's own failure, importable without loading the page's template engine."""

from __future__ import annotations


class UiServeError(Exception):
    """The page could not start listening: its port is taken, or the host is not ours."""
