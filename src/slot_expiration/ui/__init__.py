"""`slot-expiration ui`: one read-only page, server-rendered, for the on-call engineer.

Its own failure lives here, importable without loading the page's template engine."""


class UiServeError(Exception):
    """The page could not start listening: its port is taken, or the host is not ours."""
