"""Silence is a finding: `status --check` and the page never say OK while no worker can write.

On real processes with a one-second interval. A worker whose login is refused (its password
changed while it runs) can record nothing in the history, not even its failures; workers
killed record nothing either. Both read healthy on the history alone until the no-success
limit (30 minutes) in 0.3.0. Now the history's silence is a WARNING after three intervals
and a minute, and the replicas' own /readyz, when the check and the page are told where
they are (`--replicas`), says at once which it is. The check judges on the database's clock,
which a test cannot move: the history is moved back in time instead (age_history), so the
minute of silence is reached without waiting it."""

from __future__ import annotations

import html
import re
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import pytest
from psycopg import sql

from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.schema.grants import grant_privileges
from slot_expiration.status.check import silence_threshold
from tests.e2e.command import Finished, Running, run_command, started
from tests.e2e.endpoint import endpoint_url, get
from tests.e2e.test_ui import serving
from tests.support.database import SlotDatabase
from tests.support.history import age_history, history_rows
from tests.support.roles import password_role
from tests.support.slots import make_slot

pytestmark = pytest.mark.e2e

INTERVAL = ("--interval-seconds", "1")
# The history falls silent at three intervals and a minute (63 s here): moved back past it, by
# less than the no-success limit (30 minutes), whose finding would be another.
SILENT_FOR = silence_threshold(1.0) + timedelta(minutes=1)


class Replica(NamedTuple):
    worker: Running
    address: str  # host:port of its endpoint


@asynccontextmanager
async def _replicas(url: str, *names: str) -> AsyncIterator[list[Replica]]:
    """`run` as each of `names`, a tick a second, each on its own endpoint."""
    async with AsyncExitStack() as stack:
        replicas = []
        for name in names:
            worker = await stack.enter_async_context(
                started(
                    "run",
                    *INTERVAL,
                    "--instance-id",
                    name,
                    "--metrics-addr",
                    "127.0.0.1:0",
                    "--database-url",
                    url,
                )
            )
            base = await endpoint_url(worker)
            replicas.append(Replica(worker, base.removeprefix("http://")))
        yield replicas


async def _check(url: str, *extra: str) -> Finished:
    return await run_command("status", "--check", *INTERVAL, *extra, "--database-url", url)


async def _verdict_on_the_page(url: str, *extra: str) -> str:
    """The verdict's line on the page `ui` serves (its HTML read, not a browser)."""
    async with serving(url, args=(*INTERVAL, *extra)) as page:
        status, body = await get(page)
    assert status == 200, body[:500]
    found = re.search(r'<p id="verdict-summary" class="summary">(.*?)</p>', body, re.DOTALL)
    assert found is not None, body[:500]
    return html.unescape(found.group(1))


def _same_line(page: str, check: str) -> bool:
    """A verdict's line with its durations' numbers left out: the two read a moment apart."""
    return re.sub(r"\b\d+([dhms])\b", r"#\1", page) == re.sub(r"\b\d+([dhms])\b", r"#\1", check)


def _lost_a_misconfigured_cycle(worker: Running) -> bool:
    """A cycle failed as misconfigured, and its row could not be written either. (The row of
    the success before the change may be the first refused: that alone is not enough.)"""
    return any(
        event["event"] == "history.write_failed" and event["outcome"] == "misconfigured"
        for event in worker.log_events()
    )


async def _cycled(db: SlotDatabase, *instances: str) -> bool:
    return {row.instance for row in await history_rows(db)} >= set(instances)


async def test_a_refused_login_reads_critical_from_readyz_and_a_warning_from_the_history(
    db: SlotDatabase, secret_url: str, pg_server: EmbeddedPostgres
) -> None:
    await db.insert([make_slot(timedelta(minutes=-5), as_of=datetime.now(UTC))])
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name)
        async with _replicas(role.url_for(db.url), "worker-a") as (replica,):
            await replica.worker.until(lambda: _cycled(db, "worker-a"), "a first cycle recorded")
            before = await _check(secret_url)
            await db.execute(
                sql.SQL("ALTER ROLE {} PASSWORD 'changed'").format(sql.Identifier(role.name))
            )
            await replica.worker.until(
                lambda: _lost_a_misconfigured_cycle(replica.worker),
                "a cycle refused its login, and its row in the history too",
            )
            told = await _check(secret_url, "--replicas", replica.address)
            page = await _verdict_on_the_page(secret_url, "--replicas", replica.address)
            not_yet = await _check(secret_url)
            await age_history(db, SILENT_FOR)
            silent = await _check(secret_url)
            silent_page = await _verdict_on_the_page(secret_url)
            replica.worker.send_signal(signal.SIGTERM)
            await replica.worker.wait()

    assert before.returncode == 0, before.describe()
    # Told where the replica is, the check reads its /readyz: critical within seconds.
    assert told.returncode == 2, told.describe()
    assert told.stdout.startswith(
        f"CRITICAL: replica {replica.address} cannot work until a person acts: the last cycle "
        "failed, misconfigured (SQLSTATE 28P01): "
    ), told.stdout
    refusal = f'password authentication failed for user "{role.name}"'
    assert told.stdout.count(refusal) == 2, told.stdout  # the cycle's, and its row's write
    assert "(misconfigured) is not in the history: " in told.stdout
    # The history alone does not see it yet: the replica's /readyz is what told.
    assert not_yet.returncode == 0, not_yet.describe()
    (line,) = told.stdout.splitlines()
    assert _same_line(page, line), (page, line)
    # From the history alone: silence, a warning, after three intervals and a minute.
    assert silent.stdout.startswith("WARNING: no cycle recorded for "), silent.describe()
    assert silent.returncode == 1, silent.describe()
    assert "(limit 1m 3s; the last, success, by worker-a): no replica is running, or none can " in (
        silent.stdout
    )
    assert silent_page.startswith("WARNING: no cycle recorded for "), silent_page


async def test_every_replica_killed_reads_a_warning_at_once_from_readyz_and_from_the_history(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert([make_slot(timedelta(minutes=-5), as_of=datetime.now(UTC))])
    async with _replicas(secret_url, "worker-a", "worker-b") as replicas:
        await replicas[0].worker.until(
            lambda: _cycled(db, "worker-a", "worker-b"), "both replicas' cycles recorded"
        )
        before = await _check(secret_url)
        for replica in replicas:
            replica.worker.send_signal(signal.SIGKILL)
            await replica.worker.wait()
        addresses = ",".join(replica.address for replica in replicas)
        told = await _check(secret_url, "--replicas", addresses)
        page = await _verdict_on_the_page(secret_url, "--replicas", addresses)
        not_yet = await _check(secret_url)
        await age_history(db, SILENT_FOR)
        silent = await _check(secret_url)

    assert before.returncode == 0, before.describe()
    assert told.returncode == 1, told.describe()
    a, b = (replica.address for replica in replicas)
    assert told.stdout == (
        f"WARNING: replica {a} does not answer /readyz: [Errno 111] Connection "
        f"refused; replica {b} does not answer /readyz: [Errno 111] Connection "
        "refused\n"
    )
    assert page == told.stdout.rstrip("\n")
    assert not_yet.returncode == 0, not_yet.describe()  # /readyz told, not the history
    assert silent.returncode == 1, silent.describe()
    assert silent.stdout.startswith("WARNING: no cycle recorded for "), silent.describe()
    assert "(limit 1m 3s; the last, success, by worker-" in silent.stdout
