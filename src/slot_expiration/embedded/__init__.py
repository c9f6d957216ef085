"""A private PostgreSQL server for the demo and the test suite."""

from slot_expiration.embedded.postgres import EmbeddedPostgres, EmbeddedPostgresError, find_bindir

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError", "find_bindir"]
