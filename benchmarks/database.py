"""Where a benchmark runs: a private embedded server, or a database the user names.

Either way the benchmark works in a schema of its own, `slot_expiration_bench`,
put first on the search path of every session it opens (its own, the worker
processes', pgbench's) through the URL's `options`. It creates the schema,
migrates it like a calendar database, and drops it at the end: a database the
user names gets that schema for the duration of the run and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from benchmarks.store import BENCH_SCHEMA, BenchStore, with_server_option
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.options import redact_url
from slot_expiration.schema.migrate import upgrade

# A server like a modest production one: durable (PostgreSQL's own defaults for
# fsync, synchronous_commit and full_page_writes), with room in shared memory.
# The benchmark checkpoints before each measured part itself (see bench_checkpoint);
# timed checkpoints are spaced out so that none lands in the middle of a section,
# where it would weigh on whatever ran then.
BENCH_SERVER_SETTINGS = (
    "shared_buffers=1GB",
    "maintenance_work_mem=256MB",
    "max_wal_size=8GB",
    "checkpoint_timeout=30min",
    # pg_cron (Debian's postgresql-15-cron), section g's peer: its scheduler runs the jobs
    # of the benchmark's database, connecting to it over the loopback.
    "shared_preload_libraries=pg_cron",
    "cron.database_name=postgres",
    "cron.host=127.0.0.1",
)
# What the report records of the server it ran on.
REPORTED_SETTINGS = (
    "autovacuum",
    "checkpoint_timeout",
    "commit_delay",
    "fsync",
    "full_page_writes",
    "max_wal_size",
    "plan_cache_mode",
    "random_page_cost",
    "shared_buffers",
    "synchronous_commit",
    "wal_buffers",
    "wal_compression",
    "wal_level",
    "wal_writer_delay",
    "work_mem",
)


def server_settings(overrides: Sequence[str] = ()) -> tuple[str, ...]:
    """The benchmark's server settings, each `name=value` of `overrides` in place of the
    benchmark's own of that name."""
    names = {setting.partition("=")[0] for setting in overrides}
    kept = [setting for setting in BENCH_SERVER_SETTINGS if setting.partition("=")[0] not in names]
    return (*kept, *overrides)


def reported_settings(overrides: Sequence[str] = ()) -> tuple[str, ...]:
    given = (setting.partition("=")[0] for setting in overrides)
    return tuple(sorted({*REPORTED_SETTINGS, *given}))


def bench_url(url: str) -> str:
    """The URL with the benchmark's schema first on the search path (other options kept)."""
    return with_server_option(url, f"-c search_path={BENCH_SCHEMA}")


@dataclass(frozen=True, slots=True)
class BenchDatabase:
    """The benchmark's database: `url` reaches its schema; `where` says it for people."""

    url: str
    where: str
    embedded: bool


@asynccontextmanager
async def bench_database(
    database_url: str | None, overrides: Sequence[str] = ()
) -> AsyncIterator[BenchDatabase]:
    """Start (or reach) the server, create and migrate the schema; drop it on the way out."""
    async with AsyncExitStack() as stack:
        if database_url is None:
            server = EmbeddedPostgres(settings=server_settings(overrides))
            await asyncio.to_thread(server.start)
            stack.callback(server.close)
            base, where, embedded = server.url, f"embedded PostgreSQL on port {server.port}", True
        else:
            base, where, embedded = database_url, redact_url(database_url), False
        async with BenchStore.connect(base) as store:
            await store.create_schema()
            if embedded:
                await store.create_cron_extension()
        try:
            url = bench_url(base)
            # A calendar of its own beside the user's (whose table is in another schema).
            await asyncio.to_thread(upgrade, url, sandbox=True)
            async with BenchStore.connect(url) as store:
                await store.require_bench_schema()
            yield BenchDatabase(url=url, where=where, embedded=embedded)
        finally:
            async with BenchStore.connect(base) as store:
                await store.drop_schema()
