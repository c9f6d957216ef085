"""Fail loudly, never pretend: each case an operator met, tried again through the real
command (a misconfigured role, a revoked grant, a fast clock, a stray variable, an
interrupted drain), with what it now prints."""

from __future__ import annotations

import glob
import json
import signal

import pytest
from psycopg import sql

from slot_expiration.domain import SlotStatus
from tests.e2e.command import event_names, parse_log_lines, run_command, started
from tests.e2e.endpoint import endpoint_url, get, get_json, sample
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e


async def test_run_as_a_role_that_may_not_update_exits_1_at_start_naming_the_fix(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await run_command("grant", "--role", role.name, "--read-only", "--database-url", db.url)

    done = await run_command("run", "--database-url", role.url_for(db.url))

    assert done.returncode == 1, done.describe()
    (line,) = done.stderr.splitlines()[-1:]
    assert line.startswith(f"slot-expiration: error: role {role.name} cannot run a cycle: no ")
    assert "no UPDATE (version) on availability_slots" in line
    assert line.endswith(f"run `slot-expiration grant --role {role.name}` (SQLSTATE 42501)")
    assert role.password not in done.stderr


async def test_a_grant_revoked_while_running_makes_it_unready_counted_and_it_recovers(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await run_command("grant", "--role", role.name, "--database-url", db.url)
    await db.insert(past_slots(4))
    revoke = sql.SQL("REVOKE UPDATE ON availability_slots FROM {}").format(
        sql.Identifier(role.name)
    )

    async with started(
        "run", "--interval-seconds", "1", "--database-url", role.url_for(db.url)
    ) as worker:
        url = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a first cycle")
        await db.execute(revoke)
        await db.insert(past_slots(3))
        await worker.until(lambda: worker.logged("cycle.failed"), "a misconfigured cycle")
        status, unready = await get_json(f"{url}/readyz")
        misconfigured = await _metric(url, "calendar_slot_expiration_misconfigured")
        failures = await _metric(
            url, "calendar_slot_expiration_cycles_total", outcome="misconfigured"
        )
        backlog = await _metric(url, "calendar_slot_expiration_backlog")

        await run_command("grant", "--role", role.name, "--database-url", db.url)

        async def recovered() -> bool:
            return (await get_json(f"{url}/readyz"))[0] == 200

        await worker.until(recovered, "ready again once the grant is back")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert (status, unready["ready"]) == (503, False)
    assert "misconfigured (SQLSTATE 42501)" in unready["detail"]
    assert "no UPDATE (status) on availability_slots" in unready["detail"]
    assert (misconfigured, backlog) == (1.0, 3.0)
    assert failures is not None
    assert failures >= 1
    failed = [e for e in done.log_events() if e["event"] == "cycle.failed"]
    assert failed[0]["level"] == "error"
    assert (failed[0]["reason"], failed[0]["sqlstate"]) == ("misconfigured", "42501")
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}  # it caught up


async def test_once_on_a_clock_two_hours_fast_expires_nothing_and_says_why(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(3))

    done = await run_command("once", "--database-url", db.url, prefix=("faketime", "-f", "+2h"))

    assert done.returncode == 1, done.describe()
    line = done.stderr.splitlines()[-1]
    assert line.startswith("slot-expiration: error: the worker's clock is 7")
    assert "s ahead of the database's (tolerance 30 s, --max-clock-skew-seconds)" in line
    events = parse_log_lines(done.stderr.splitlines()[:-1])  # the last line is the error
    failed = [e for e in events if e.get("event") == "cycle.failed"]
    assert failed[0]["reason"] == "clock_skew"
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_run_on_a_clock_two_hours_fast_is_unready_counts_clock_skew_and_expires_nothing(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(3))

    async with started(
        "run", "--interval-seconds", "1", "--database-url", db.url, prefix=_clock_ahead("+2h")
    ) as worker:
        url = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.failed"), "a cycle refused for the clock")
        status, unready = await get_json(f"{url}/readyz")
        refused = await _metric(url, "calendar_slot_expiration_cycles_total", outcome="clock_skew")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert (status, unready["ready"]) == (503, False)
    assert "clock_skew" in unready["detail"]
    assert refused is not None
    assert refused >= 1
    failed = [e for e in done.log_events() if e["event"] == "cycle.failed"]
    assert failed[0]["reason"] == "clock_skew"
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_run_on_a_clock_two_hours_slow_stamps_its_last_success_on_the_databases_clock(
    db: SlotDatabase,
) -> None:
    """Stamped on its own clock, the last success of a host two hours slow would look two
    hours old to the no-success alert while the worker succeeds every second."""
    await db.insert(past_slots(3))

    async with started(
        "run", "--interval-seconds", "1", "--database-url", db.url, prefix=_clock_ahead("-2h")
    ) as worker:
        url = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a completed cycle")
        stamped = await _metric(url, "calendar_slot_expiration_last_success_timestamp_seconds")
        cursor = await db.conn.execute("SELECT extract(epoch FROM now())::float8")
        (database_now,) = await cursor.fetchone() or (None,)
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert stamped is not None
    assert database_now is not None
    assert abs(database_now - stamped) < 60  # its own clock would be 7,200 s off


def _clock_ahead(offset: str) -> tuple[str, ...]:
    """libfaketime preloaded by `env`, which execs: the worker keeps the pid that signals
    reach (the `faketime` wrapper forks, and a SIGTERM to it would miss the worker)."""
    (library,) = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    return ("env", f"LD_PRELOAD={library}", f"FAKETIME={offset}")


async def test_once_on_a_clock_two_hours_slow_runs_and_reports_it(db: SlotDatabase) -> None:
    await db.insert(past_slots(3))

    done = await run_command(
        "once",
        "--json",
        "--as-of",
        AS_OF.isoformat(),
        "--database-url",
        db.url,
        prefix=("faketime", "-f", "-2h"),
    )

    assert done.returncode == 0, done.describe()
    result = json.loads(done.stdout)
    assert result["expired_count"] == 3
    assert result["clock_skew_seconds"] < -7_000
    assert "clock.behind" in event_names(done.log_events())


@pytest.mark.parametrize(
    "command",
    [["status"], ["migrate"], ["quarantine", "list"], ["once", "--as-of", AS_OF.isoformat()]],
    ids=lambda c: " ".join(c[:2]),
)
async def test_a_bad_value_in_a_run_only_variable_breaks_no_other_command(
    db: SlotDatabase, command: list[str]
) -> None:
    done = await run_command(
        *command, "--database-url", db.url, env={"SLOT_EXPIRATION_INTERVAL_SECONDS": "abc"}
    )

    assert done.returncode == 0, done.describe()


async def test_a_misspelled_variable_is_one_warning_naming_the_real_one(db: SlotDatabase) -> None:
    env = {"SLOT_EXPIRATION_BATCHSIZE": "5"}

    status = await run_command("status", "--database-url", db.url, env=env)
    once = await run_command(
        "once", "--as-of", AS_OF.isoformat(), "--database-url", db.url, env=env
    )

    warning = (
        "SLOT_EXPIRATION_BATCHSIZE is not a variable of slot-expiration (ignored); "
        "did you mean SLOT_EXPIRATION_BATCH_SIZE?"
    )
    assert status.returncode == 0, status.describe()
    assert status.stderr == f"slot-expiration: warning: {warning}\n"
    assert once.returncode == 0, once.describe()
    (logged,) = [e for e in once.log_events() if e["event"] == "options.unknown_variable"]
    assert (logged["level"], logged["detail"]) == ("warning", warning)


async def test_an_interval_below_one_second_is_refused_at_start(db: SlotDatabase) -> None:
    done = await run_command("run", "--interval-seconds", "0.001", "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    assert done.stderr.splitlines() == [
        "slot-expiration: error: --interval-seconds / SLOT_EXPIRATION_INTERVAL_SECONDS: "
        "Input should be greater than or equal to 1"
    ]


async def test_sigint_during_a_drain_reports_what_its_committed_batches_did(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(40))
    # The third batch (slots 21..30, oldest first) waits at the gate; two batches commit.
    await db.install_gate_for([slot.id for slot in slots[20:30]])
    await db.close_gate()

    async with started(
        "once",
        "--json",
        "--max-batches-per-cycle",
        "0",
        "--batch-size",
        "10",
        "--drain-batch-size",
        "10",
        "--as-of",
        AS_OF.isoformat(),
        "--database-url",
        db.url,
    ) as once:

        async def third_batch_waits() -> bool:
            return await db.worker_sessions(waiting_on_gate=True) == 1

        await once.until(third_batch_waits, "the third batch at the gate")
        once.send_signal(signal.SIGINT)
        done = await once.wait()
    await db.open_gate()

    assert done.returncode == 130, done.describe()
    assert done.stderr.splitlines()[-1] == (
        "slot-expiration: error: interrupted: 20 rows expired in 2 committed batches; "
        "the batch in flight was rolled back; about 20 left: run again to go on"
    )
    partial = json.loads(done.stdout)
    assert (partial["expired_count"], partial["batches"]) == (20, 2)
    assert (partial["outcome"], partial["stop_reason"], partial["backlog"]) == (
        "interrupted",
        None,
        None,
    )
    statuses = await db.statuses()
    assert [statuses[slot.id] for slot in slots[:20]] == [SlotStatus.EXPIRED] * 20
    assert {statuses[slot.id] for slot in slots[20:]} == {SlotStatus.AVAILABLE}
    assert await db.worker_locks() == 0


async def _metric(url: str, name: str, **labels: str) -> float | None:
    _, exposition = await get(f"{url}/metrics")
    return sample(exposition, name, **labels)
