"""`slot-expiration status [--json]`: what the on-call engineer runs first."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.schema.grants import grant_privileges
from slot_expiration.schema.migrate import head_revision
from tests.e2e.command import PASSWORD, Running, run_command, started
from tests.support.database import SlotDatabase
from tests.support.history import cycle_record, history_rows
from tests.support.roles import password_role
from tests.support.slots import DUE_BACKLOG, make_slot

pytestmark = pytest.mark.e2e


async def _seed_backlog_and_a_poison_slot(db: SlotDatabase, now: datetime) -> str:
    """Three due slots, one of which the database refuses to expire, and a future one."""
    poison = make_slot(timedelta(hours=-3), as_of=now)
    await db.insert(
        [
            poison,
            make_slot(timedelta(minutes=-10), as_of=now),
            make_slot(timedelta(minutes=-5), as_of=now),
            make_slot(timedelta(hours=-1), SlotStatus.BOOKED, as_of=now),
            make_slot(timedelta(hours=4), as_of=now),
        ]
    )
    await db.install_poison_trigger([poison.id], "P0001")
    return str(poison.id)


async def test_status_json_reports_counts_backlog_oldest_sessions_failures_and_index(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    poison = await _seed_backlog_and_a_poison_slot(db, now)
    once = await run_command("once", "--batch-size", "1", "--database-url", secret_url)
    assert once.returncode == 0, once.describe()

    done = await run_command("status", "--json", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert report["schema"] == {
        "revision": head_revision(),
        "latest": head_revision(),
        "up_to_date": True,
        "ahead": False,
        "never_migrated": False,
        "contract_mismatches": [],
        "missing_tables": [],
        "worker_mismatches": [],
    }
    assert report["counts"] == {"Available": 3, "Booked": 1, "Expired": 1, "Archived": 0}
    assert report["backlog"] == {"count": 2, "capped": False, "cap": 100_000}
    oldest = report["oldest_overdue"]
    assert (oldest["slot_id"], oldest["quarantined"]) == (poison, True)
    assert 3 * 3600 <= oldest["age_seconds"] < 3 * 3600 + 120
    assert report["worker_sessions"]["count"] == 0
    (failed,) = report["failed_slots"]["shown"]
    assert report["failed_slots"]["total"] == 1
    assert (failed["slot_id"], failed["attempts"], failed["sqlstate"]) == (poison, 1, "P0001")
    assert failed["message"] == "slot refuses to expire"
    assert report["index"]["name"] == "ix_availability_slots_status_start"
    assert (report["index"]["exists"], report["index"]["valid"]) == (True, True)
    assert (report["index"]["too_small_to_judge"], report["index"]["table_rows_counted"]) == (
        True,
        5,
    )
    cycles = report["cycles"]
    assert cycles["last_success"]["expired_count"] == 1
    assert cycles["last_failure"] is None
    assert cycles["last_hour"]["by_outcome"] == {"success": 1}
    assert PASSWORD not in done.stdout


async def test_status_text_shows_each_section_on_its_own_line(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    poison = await _seed_backlog_and_a_poison_slot(db, now)
    await run_command("once", "--batch-size", "1", "--database-url", secret_url)

    done = await run_command("status", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    lines = done.stdout.splitlines()
    labels = [line[:15].strip() for line in lines[1:] if not line.startswith(" ")]
    assert labels == [
        "pause",
        "last success",
        "last failure",
        "last hour",
        "schema",
        "slots",
        "backlog",
        "drain",
        "oldest overdue",
        "worker",
        "failed slots",
        "index",
    ]
    text = done.stdout
    assert text.splitlines()[1] == "pause          none: every replica expires at each tick"
    assert text.splitlines()[2].startswith("last success   ")
    assert text.splitlines()[2].endswith(": expired 1, backlog 2")
    assert "last failure   none in the history" in text
    assert "last hour      1 cycle: success 1" in text
    assert "worker         0 sessions connected now (normal between cycles)" in text
    assert "1 attempt, last" in text
    assert "slots          Available 3, Booked 1, Expired 1, Archived 0" in text
    assert "backlog        2 Available slots have started" in text
    # The one cycle's pace: 1 row over its own duration, the 2 left at that rate.
    assert re.search(
        r"^drain          [\d,.]+ rows/s over the last 15m 0s, 2 left, ETA ", text, re.M
    )
    assert f"ago: slot {poison} of tenant" in text
    assert "failed slots   1 in quarantine, still Available" in text
    assert f"  slot {poison} of tenant" in text
    assert "SQLSTATE P0001: slot refuses to expire" in text
    assert "index          ix_availability_slots_status_start: present, valid" in text


async def test_status_lists_the_worker_sessions_connected_now(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    await db.insert([make_slot(timedelta(minutes=-1), as_of=now) for _ in range(3)])
    await db.install_gate_trigger()
    await db.close_gate()

    async with started("run", "--interval-seconds", "3600", "--database-url", secret_url) as worker:
        await _cycle_waiting_on_the_gate(db, worker)
        done = await run_command("status", "--json", "--database-url", secret_url)
        await db.open_gate()
        worker.send_signal(signal.SIGTERM)
        await worker.wait()

    sessions = json.loads(done.stdout)["worker_sessions"]
    assert sessions["count"] == 1
    (session,) = sessions["sessions"]
    assert session["state"] == "active"
    assert (session["wait_event_type"], session["wait_event"]) == ("Lock", "advisory")
    assert session["xact_start"] is not None


async def _cycle_waiting_on_the_gate(db: SlotDatabase, worker: Running) -> None:
    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    await worker.until(waiting, "the cycle waiting on the gate")


async def test_status_on_a_database_never_migrated_says_to_migrate_and_exits_1(
    empty_database_url: str,
) -> None:
    done = await run_command("status", "--database-url", empty_database_url)

    assert done.returncode == 1, done.describe()
    assert done.stdout == ""
    assert done.stderr == (
        "slot-expiration: error: table availability_slots does not exist: the schema is "
        "missing or out of date: run `slot-expiration migrate` first (SQLSTATE 42P01)\n"
    )


async def test_check_on_a_database_never_migrated_is_critical_run_migrate(
    empty_database_url: str,
) -> None:
    """It was UNKNOWN (exit 3), as if the check could not read the database."""
    done = await run_command("status", "--check", "--database-url", empty_database_url)
    as_json = await run_command("status", "--check", "--json", "--database-url", empty_database_url)

    assert done.returncode == 2, done.describe()
    assert done.stdout == (
        "CRITICAL: the database was never migrated: run `slot-expiration migrate` (it creates "
        "availability_slots and the worker's tables)\n"
    )
    assert done.stderr == ""
    (finding,) = json.loads(as_json.stdout)["check"]["findings"]
    assert finding["runbook_section"] == "the-worker-is-misconfigured"


async def test_status_on_an_unreachable_database_is_one_line_exit_1_without_the_password(
    closed_port: int,
) -> None:
    url = f"postgresql://calendar:{PASSWORD}@127.0.0.1:{closed_port}/calendar"

    done = await run_command("status", "--json", "--database-url", url)

    assert done.returncode == 1, done.describe()
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("slot-expiration: error: cannot connect to the database")
    assert PASSWORD not in done.stderr


async def test_status_without_a_database_url_is_a_usage_error() -> None:
    done = await run_command("status")

    assert done.returncode == 2, done.describe()
    assert "no database URL" in done.stderr
    assert len(done.stderr.splitlines()) == 1


# --- status --check: the alerts' thresholds, one line, exit 0 / 1 / 2 ------------------


async def test_check_on_a_healthy_worker_says_ok_and_exits_0(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert([make_slot(timedelta(minutes=-m), as_of=datetime.now(UTC)) for m in (1, 2)])
    once = await run_command("once", "--instance-id", "worker-a", "--database-url", secret_url)
    assert once.returncode == 0, once.describe()

    done = await run_command("status", "--check", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    (line,) = done.stdout.splitlines()
    assert line.startswith("OK: last success ")
    assert line.endswith(" ago by worker-a; backlog 0; quarantine empty")
    assert done.stderr == ""


async def test_check_on_a_stuck_worker_is_critical_and_exits_2(
    db: SlotDatabase, secret_url: str
) -> None:
    await record_cycle(
        Housekeeping(db.url, timedelta(days=14)),
        cycle_record(datetime.now(UTC) - timedelta(minutes=45), instance="worker-a"),
    )

    stuck = await run_command("status", "--check", "--database-url", secret_url)
    hourly = await run_command(
        "status", "--check", "--interval-seconds", "1200", "--database-url", secret_url
    )

    assert stuck.returncode == 2, stuck.describe()
    (line,) = stuck.stdout.splitlines()
    assert line.startswith("CRITICAL: no successful cycle for 45m")
    assert "(limit 30m 0s; the last by worker-a)" in line
    assert hourly.returncode == 0, hourly.describe()  # 3 intervals of 20 minutes: not yet


async def test_check_on_a_misconfigured_worker_is_critical_and_exits_2(
    db: SlotDatabase, pg_server: EmbeddedPostgres
) -> None:
    await db.insert([make_slot(timedelta(minutes=-5), as_of=datetime.now(UTC))])
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name)
        url = role.url_for(db.url)
        run = ("run", "--interval-seconds", "1", "--instance-id", "worker-b")
        async with started(*run, "--database-url", url) as worker:
            await worker.until(lambda: worker.logged("cycle.completed"), "a first cycle")
            await db.execute(f'REVOKE UPDATE ON availability_slots FROM "{role.name}"')
            await worker.until(_misconfigured_cycle_recorded(db), "a misconfigured cycle")
            done = await run_command("status", "--check", "--database-url", url)
            worker.send_signal(signal.SIGTERM)
            await worker.wait()

    assert done.returncode == 2, done.describe()
    (line,) = done.stdout.splitlines()
    assert line.startswith("CRITICAL: worker-b is misconfigured: role ")
    assert "no UPDATE (status) on availability_slots" in line


def _misconfigured_cycle_recorded(db: SlotDatabase) -> Callable[[], Awaitable[bool]]:
    async def recorded() -> bool:
        return any(row.outcome.value == "misconfigured" for row in await history_rows(db))

    return recorded


async def test_check_warns_of_a_backlog_above_5000_not_coming_down_and_of_an_hour_in_quarantine(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    poison = await _seed_backlog_and_a_poison_slot(db, now)
    await run_command("once", "--batch-size", "1", "--database-url", secret_url)
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 5_001})  # a wave, then stuck
    for minutes_ago in (10, 5):  # two successes of one worker in a row, expiring none
        await record_cycle(
            Housekeeping(db.url, timedelta(days=14)),
            cycle_record(now - timedelta(minutes=minutes_ago), instance="w", backlog=5_003),
        )
    fresh = await run_command("status", "--check", "--database-url", secret_url)
    await db.conn.execute(QUARANTINED_AN_HOUR_AGO)

    done = await run_command("status", "--check", "--database-url", secret_url)
    as_json = await run_command("status", "--check", "--json", "--database-url", secret_url)

    backlog = "WARNING: backlog 5003 > 5000, not down over 30m 0s"
    assert fresh.stdout.strip() == backlog, fresh.describe()  # quarantined minutes ago
    assert done.returncode == 1, done.describe()
    assert re.fullmatch(
        f"{backlog}; 1 slot in quarantine, the oldest for 1h 0m", done.stdout.strip()
    )
    check = json.loads(as_json.stdout)["check"]
    assert (check["level"], check["exit_code"]) == ("WARNING", 1)
    assert [f["runbook_section"] for f in check["findings"]] == [
        "worker-hung-or-backlog-growing",
        "a-poison-slot-that-never-expires",
    ]
    assert as_json.returncode == 1
    parked = await run_command("quarantine", "park", poison, "--database-url", secret_url)
    assert parked.returncode == 0, parked.describe()
    again = await run_command("status", "--check", "--database-url", secret_url)
    assert again.stdout.strip() == backlog, again.describe()  # parked: left out


async def test_check_is_quiet_on_a_backlog_above_5000_coming_down(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    await record_cycle(
        Housekeeping(db.url, timedelta(days=14)),
        cycle_record(now - timedelta(minutes=35), instance="worker-a", backlog=7_000),
    )
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 5_003})
    once = await run_command(
        "once", "--batch-size", "1", "--instance-id", "worker-a", "--database-url", secret_url
    )
    assert once.returncode == 0, once.describe()

    done = await run_command("status", "--check", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()  # 5,002 left, 7,000 half an hour before
    assert done.stdout.strip().endswith("; backlog 5002; quarantine empty")


async def test_check_is_quiet_on_a_drain_where_every_other_cycle_fails(
    db: SlotDatabase, secret_url: str
) -> None:
    """Stuck at 8,000 for an hour (the trend 0), then draining 500 a success while every
    other cycle fails: no two successes in a row, so the stuck hour's trend is held. 0.3.0
    warned for as long as the flaky drain lasted; the count itself comes down."""
    now = datetime.now(UTC)
    history = Housekeeping(db.url, timedelta(days=14))
    for step in range(24, 0, -1):  # a cycle every 5 minutes, the last 5 minutes ago
        ended = now - timedelta(minutes=5 * step)
        flaky, success = step <= 12, step % 2 == 1
        if not flaky:
            await record_cycle(history, cycle_record(ended, instance="w", backlog=8_000))
        elif success:
            left = 8_000 - 500 * (13 - step) // 2
            await record_cycle(history, cycle_record(ended, instance="w", backlog=left))
        else:
            await record_cycle(
                history, cycle_record(ended, CycleOutcome.FAILED, instance="w", backlog=None)
            )
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 5_000 + 1_000})

    done = await run_command("status", "--check", "--database-url", secret_url)
    page = await run_command("status", "--json", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert done.stdout.strip().endswith("; backlog 6000; quarantine empty")
    change = json.loads(page.stdout)["cycles"]["backlog_change"]["change"]
    assert change == 5_000 - 6_500, change  # the counts of 5 and of 35 minutes ago


# The poison slot's entry, failing since an hour ago: SlotExpirationItemErrors' `for: 1h`.
QUARANTINED_AN_HOUR_AGO = """
UPDATE slot_expiration_failures SET first_failed_at = now() - interval '1 hour'
"""


async def test_check_on_an_unreachable_database_is_unknown_exit_3_on_one_line_without_the_password(
    closed_port: int,
) -> None:
    url = f"postgresql://calendar:{PASSWORD}@127.0.0.1:{closed_port}/calendar"

    done = await run_command("status", "--check", "--database-url", url)

    assert done.returncode == 3, done.describe()
    (line,) = done.stdout.splitlines()
    assert line.startswith("UNKNOWN: cannot connect to the database")
    assert PASSWORD not in done.stdout + done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        ([], {}, "UNKNOWN: no database URL: pass --database-url or set "),
        (
            ["--interval-seconds", "0", "--database-url", "postgresql://u@127.0.0.1/db"],
            {},
            "UNKNOWN: --interval-seconds / SLOT_EXPIRATION_INTERVAL_SECONDS: ",
        ),
        (["--no-such-flag"], {}, "UNKNOWN: No such option '--no-such-flag'."),
        (
            ["--database-url", "mysql://u@127.0.0.1/db"],
            {},
            "UNKNOWN: --database-url / SLOT_EXPIRATION_DATABASE_URL: ",
        ),
    ],
    ids=["no URL", "an interval of 0", "an unknown flag", "not a PostgreSQL URL"],
)
async def test_check_with_a_wrong_option_is_unknown_exit_3_one_line_on_stdout(
    args: list[str], env: dict[str, str], line: str
) -> None:
    done = await run_command("status", "--check", *args, env=env)

    assert done.returncode == 3, done.describe()
    (printed,) = done.stdout.splitlines()
    assert printed.startswith(line), printed
    assert done.stderr == ""


async def test_without_check_a_wrong_option_stays_a_usage_error_on_stderr() -> None:
    done = await run_command("status", "--no-such-flag")

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("slot-expiration: error: No such option '--no-such-flag'.")


async def test_check_no_longer_counts_an_instance_gone_since_another_cycled(
    db: SlotDatabase, secret_url: str
) -> None:
    """A misconfigured replica replaced by a healthy one (or an ad-hoc `once` on a fast clock
    beside a worker that succeeds every second): the deployment's cycles since decide."""
    now = datetime.now(UTC)
    history = Housekeeping(db.url, timedelta(days=14))
    await record_cycle(
        history,
        cycle_record(
            now - timedelta(minutes=3),
            CycleOutcome.MISCONFIGURED,
            instance="old:1",
            sqlstate="42501",
            error="role slot_worker cannot run a cycle: no UPDATE (status) on availability_slots",
        ),
    )
    for seconds_ago in range(120, 0, -1):  # the new replica, every second since
        await record_cycle(history, cycle_record(now - timedelta(seconds=seconds_ago)))

    done = await run_command(
        "status", "--check", "--interval-seconds", "1", "--database-url", secret_url
    )
    slow = await run_command("status", "--check", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith("OK: last success ")
    # Told nothing of the interval (5 minutes), the old one is still within two of them.
    assert slow.returncode == 2, slow.describe()
    assert slow.stdout.startswith("CRITICAL: old:1 is misconfigured: role slot_worker")


async def test_status_measures_on_the_databases_clock_whatever_the_workers(
    db: SlotDatabase, secret_url: str
) -> None:
    """A worker two hours slow succeeds, one two hours fast is refused: neither writes its
    cycle two hours away from the database's time."""
    await db.insert([make_slot(timedelta(minutes=-5), as_of=datetime.now(UTC))])
    slow = await run_command("once", "--database-url", secret_url, prefix=("faketime", "-f", "-2h"))
    fast = await run_command("once", "--database-url", secret_url, prefix=("faketime", "-f", "+2h"))
    assert (slow.returncode, fast.returncode) == (0, 1), slow.describe() + fast.describe()

    check = await run_command("status", "--check", "--database-url", secret_url)
    report = await run_command("status", "--json", "--database-url", secret_url)

    cycles = json.loads(report.stdout)["cycles"]
    for last in (cycles["last_success"], cycles["last_failure"]):
        assert 0 <= last["age_seconds"] < 60, last
    assert cycles["last_failure"]["outcome"] == "clock_skew"
    assert check.stdout.startswith("CRITICAL: "), check.describe()  # the fast one, a person
    assert "no successful cycle" not in check.stdout
