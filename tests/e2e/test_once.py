"""`slot-expiration once`: one cycle, its report on stdout, its writes in the database."""

from __future__ import annotations

import json
import re
import signal
from datetime import timedelta

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import (
    PASSWORD,
    event_names,
    eventually,
    parse_log_lines,
    run_command,
    started,
)
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF, make_slot, past_slots
from tests.support.tcp_proxy import FreezableProxy

pytestmark = pytest.mark.e2e

SCRIPTED_KEYS = {"expired_count", "skipped_locked_count", "duration_ms"}


async def test_once_json_prints_one_object_and_expires_exactly_the_past_available_slots(
    db: SlotDatabase, secret_url: str
) -> None:
    due = await db.insert(past_slots(7))
    others = await db.insert(
        [
            *past_slots(2, SlotStatus.BOOKED),
            *(make_slot(timedelta(hours=h)) for h in (1, 2, 3)),
            make_slot(timedelta(days=-1), SlotStatus.EXPIRED),
            make_slot(timedelta(days=-1), SlotStatus.ARCHIVED),
        ]
    )
    before = await db.rows()

    done = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    )

    assert done.returncode == 0, done.describe()
    assert done.stdout.count("\n") == 1, done.describe()
    summary = json.loads(done.stdout)
    assert isinstance(summary, dict)
    assert summary.keys() >= SCRIPTED_KEYS
    assert summary["expired_count"] == 7
    assert summary["skipped_locked_count"] == 0
    assert isinstance(summary["duration_ms"], int | float)
    assert summary["duration_ms"] >= 0
    events = done.log_events()  # stderr: JSON log lines only
    assert event_names(events) == ["cycle.started", "batch.selected", "cycle.completed"]
    assert events[0]["as_of"] == AS_OF.isoformat()
    assert events[1]["count"] == 7
    assert events[2]["expired_count"] == 7
    assert len({event["run_id"] for event in events}) == 1
    after = await db.rows()
    for slot in due:
        assert after[slot.id].status is SlotStatus.EXPIRED
        assert after[slot.id].version == before[slot.id].version + 1
        assert after[slot.id].updated_at == AS_OF
    for slot in others:
        assert after[slot.id] == before[slot.id]  # same xmin: not even rewritten

    again = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    )

    assert again.returncode == 0, again.describe()
    assert json.loads(again.stdout)["expired_count"] == 0
    assert await db.rows() == after


@pytest.mark.parametrize(
    "as_of",
    ["2026-12-02T12:00:00", "2026-12-02T15:00:00+03:00"],
    ids=["no-offset-is-utc", "plus-three-hours"],
)
async def test_once_as_of_is_the_cutoff_whatever_its_notation(
    db: SlotDatabase, secret_url: str, as_of: str
) -> None:
    on_the_dot = make_slot(timedelta(0))
    a_second_later = make_slot(timedelta(seconds=1))
    await db.insert([on_the_dot, a_second_later])

    done = await run_command("once", "--json", "--as-of", as_of, "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert json.loads(done.stdout)["expired_count"] == 1
    rows = await db.rows()
    assert rows[on_the_dot.id].status is SlotStatus.EXPIRED
    assert rows[on_the_dot.id].updated_at == AS_OF
    assert rows[a_second_later.id].status is SlotStatus.AVAILABLE


async def test_once_reads_its_options_from_the_environment_and_prints_what_it_did_and_left(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(3))

    done = await run_command(
        "once",
        "--as-of",
        AS_OF.isoformat(),
        env={"SLOT_EXPIRATION_DATABASE_URL": secret_url, "SLOT_EXPIRATION_BATCH_SIZE": "2"},
    )

    assert done.returncode == 0, done.describe()
    did, stopped = done.stdout.splitlines()
    assert did.startswith("expired 2, skipped (locked) 0, failed 0, ")
    assert did.endswith(" ms")
    assert stopped == (
        "stopped at the batch limit (1 batch): 1 left; run again or raise --max-batches-per-cycle"
    )
    assert list((await db.statuses()).values()).count(SlotStatus.EXPIRED) == 2


async def test_once_past_its_budget_rolls_back_and_exits_1_with_one_error_line(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(5))
    before = await db.rows()
    await db.install_gate_trigger()
    await db.close_gate()  # the batch's UPDATE waits until long past the budget

    done = await run_command(
        "once",
        "--json",
        "--as-of",
        AS_OF.isoformat(),
        "--max-cycle-seconds",
        "0.5",
        "--database-url",
        secret_url,
    )

    assert done.returncode == 1, done.describe()
    partial = json.loads(done.stdout)  # what committed: nothing
    assert (partial["expired_count"], partial["batches"]) == (0, 0)
    assert (partial["outcome"], partial["stop_reason"]) == ("budget_exceeded", None)
    *logs, error = done.stderr.splitlines()
    assert error == (
        "slot-expiration: error: the cycle ran past its budget of 0.5 s: 0 rows expired in 0 "
        "committed batches; the batch in flight was rolled back"
    ), done.describe()
    events = parse_log_lines(logs)
    assert event_names(events) == ["cycle.started", "cycle.failed"], done.describe()
    assert events[1]["reason"] == "budget_exceeded"
    assert await db.rows() == before

    async def no_locks_left() -> bool:
        return await db.worker_locks() == 0

    await eventually(no_locks_left, "the worker's row locks released")


async def test_once_leaves_a_poison_row_available_and_names_it(
    db: SlotDatabase, secret_url: str
) -> None:
    slots = await db.insert(past_slots(5))
    poison = slots[2]
    await db.install_poison_trigger([poison.id], "23514")

    done = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    )

    assert done.returncode == 0, done.describe()
    summary = json.loads(done.stdout)
    assert summary["expired_count"] == 4
    assert summary["failed_count"] == 1
    assert summary["failed_slot_ids_sample"] == [str(poison.id)]
    failures = [e for e in done.log_events() if e["event"] == "item.failed"]
    assert [(e["slot_id"], e["level"]) for e in failures] == [(str(poison.id), "error")]
    statuses = await db.statuses()
    assert statuses.pop(poison.id) is SlotStatus.AVAILABLE
    assert set(statuses.values()) == {SlotStatus.EXPIRED}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_once_stopped_by_a_signal_mid_batch_rolls_back_and_releases_its_locks(
    db: SlotDatabase, secret_url: str, sig: signal.Signals
) -> None:
    await db.insert(past_slots(5))
    before = await db.rows()
    await db.install_gate_trigger()
    await db.close_gate()  # stays closed: the batch can only be rolled back

    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    async def released() -> bool:
        return await db.worker_locks() == 0 and await db.worker_sessions() == 0

    async with started(
        "once", "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    ) as worker:
        await worker.until(waiting, "the batch waiting on the gate")
        worker.send_signal(sig)
        done = await worker.wait()

    # It handled the signal (cron and Kubernetes stop a job with SIGTERM) ...
    assert done.returncode > 0, f"killed by the signal, not stopped: {done.describe()}"
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("slot-expiration: "), done.describe()
    # ... and its session let go of the row locks now, not at the statement timeout.
    await eventually(released, "the worker's locks released", timeout_seconds=3)
    assert await db.rows() == before


async def test_an_interrupted_drain_says_what_is_left_of_its_count_and_how_to_go_on(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(5))
    await db.install_gate_trigger()
    await db.close_gate()  # its first batch waits: the drain has counted 5, expired none

    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    drain = ("--max-batches-per-cycle", "0", "--batch-size", "2")
    async with started(
        "once", *drain, "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    ) as worker:
        await worker.until(waiting, "the drain's first batch waiting on the gate")
        worker.send_signal(signal.SIGINT)
        done = await worker.wait()

    assert done.returncode == 130, done.describe()
    assert done.stderr.splitlines()[-1] == (
        "slot-expiration: error: interrupted: 0 rows expired in 0 committed batches; the batch "
        "in flight was rolled back; about 5 left: run again to go on"
    ), done.describe()


async def test_once_accepts_a_future_as_of_only_with_the_explicit_flag(
    db: SlotDatabase, secret_url: str
) -> None:
    bookable = await db.insert([make_slot(timedelta(days=400)), make_slot(timedelta(days=800))])
    far = (AS_OF + timedelta(days=500)).isoformat()

    refused = await run_command("once", "--as-of", far, "--database-url", secret_url)
    allowed = await run_command(
        "once", "--json", "--as-of", far, "--allow-future-as-of", "--database-url", secret_url
    )

    assert refused.returncode == 2, refused.describe()
    assert allowed.returncode == 0, allowed.describe()
    assert json.loads(allowed.stdout)["expired_count"] == 1
    statuses = await db.statuses()
    assert (statuses[bookable[0].id], statuses[bookable[1].id]) == (
        SlotStatus.EXPIRED,
        SlotStatus.AVAILABLE,
    )


async def test_once_output_stays_bounded_however_many_rows_fail(
    db: SlotDatabase, secret_url: str
) -> None:
    slots = await db.insert(past_slots(90))
    poison = slots[:75]
    await db.install_poison_trigger([p.id for p in poison], "P0001")

    done = await run_command(
        "once",
        "--json",
        "--batch-size",
        "10",
        "--as-of",
        AS_OF.isoformat(),
        "--database-url",
        secret_url,
    )

    assert done.returncode == 0, done.describe()
    summary = json.loads(done.stdout)
    assert (summary["expired_count"], summary["failed_count"]) == (10, 75)
    assert summary["failed_slot_ids_sample"] == [str(p.id) for p in poison[:10]]
    assert len(done.stdout) < 1_000
    failed = [e for e in done.log_events() if e["event"] == "item.failed"]
    assert sorted(e["slot_id"] for e in failed) == sorted(str(p.id) for p in poison)
    assert {e["attempts"] for e in failed} == {1}


async def test_once_on_a_frozen_network_exits_1_after_its_budget_with_json_logs_only(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(5))
    before = await db.rows()
    await db.install_gate_trigger()
    await db.close_gate()

    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    async with FreezableProxy.serving(secret_url) as proxy:
        through = proxy.url_through(secret_url)
        async with started(
            "once",
            "--as-of",
            AS_OF.isoformat(),
            "--max-cycle-seconds",
            "1",
            "--database-url",
            through,
        ) as worker:
            await worker.until(waiting, "the batch waiting on the gate")
            proxy.freeze()
            await db.open_gate()
            done = await worker.wait()
        assert proxy.frozen  # it ended without the network coming back

    assert done.returncode == 1, done.describe()
    *logs, error = done.stderr.splitlines()
    assert error.startswith("slot-expiration: error: "), done.describe()
    assert "budget" in error
    # Its COMMIT went with the batch, in one round trip: whether it ran is the server's to say.
    assert "may or may not have committed" in error
    events = parse_log_lines(logs)  # every other line is a JSON record
    assert event_names(events)[0] == "cycle.started"
    # The cycle's row in the history cannot be written either, on the same frozen network:
    # said, and given up at its own deadline.
    assert event_names(events)[-2:] == ["cycle.failed", "history.write_failed"]
    assert PASSWORD not in done.stderr

    async def released() -> bool:
        return await db.worker_locks() == 0

    await eventually(released, "the batch ended at the server")
    after = await db.rows()
    # Whole or nothing, each row once: all as before, or all Expired one version up.
    changed = {slot_id for slot_id, row in after.items() if row != before[slot_id]}
    assert changed in (set(), set(before))
    assert all(after[i].version == before[i].version + 1 for i in changed)


async def test_once_in_drain_mode_reports_the_totals_of_all_its_batches(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(23))

    done = await run_command(
        "once",
        "--json",
        "--batch-size",
        "5",
        "--drain-batch-size",
        "5",
        "--max-batches-per-cycle",
        "0",
        "--as-of",
        AS_OF.isoformat(),
        "--database-url",
        secret_url,
    )

    assert done.returncode == 0, done.describe()
    summary = json.loads(done.stdout)
    assert (summary["expired_count"], summary["batches"]) == (23, 5)
    assert (summary["stop_reason"], summary["backlog"]) == ("drained", 0)
    events = done.log_events()
    assert [e["count"] for e in events if e["event"] == "batch.selected"] == [5, 5, 5, 5, 3]
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}


# A trigger that refuses every expiry with a message of a megabyte (`sqlstate`: a row
# rejection, P0001, or a failure of the whole cycle, XX000).
MEGABYTE_REFUSAL = """
CREATE FUNCTION refuse_loudly() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    RAISE EXCEPTION 'slot refuses to expire: %', repeat('x', 1000000) USING ERRCODE = '{code}';
END $$;
CREATE TRIGGER refuse_loudly BEFORE UPDATE ON availability_slots
    FOR EACH ROW EXECUTE FUNCTION refuse_loudly();
"""
MEGABYTE_MESSAGE_CHARS = len("slot refuses to expire: ") + 1_000_000
LOG_LINE_CHARS = 2_000  # a log line: its event's fields, and at most 500 of a message


async def test_once_logs_a_megabyte_rejection_on_each_of_200_rows_in_500_characters(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(200))
    await db.execute(MEGABYTE_REFUSAL.format(code="P0001"))

    done = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", secret_url
    )

    assert done.returncode == 0, done.describe()[:2_000]
    failed = [e for e in done.log_events() if e["event"] == "item.failed"]
    assert len(failed) == 200
    for event in failed:
        assert len(event["exception"]) <= 500
        assert event["exception"].startswith("slot refuses to expire: xxx")
        assert event["exception"].endswith(f"\u2026 ({MEGABYTE_MESSAGE_CHARS} characters)")
    assert max(len(line) for line in done.stderr.splitlines()) < LOG_LINE_CHARS
    assert len(done.stderr) < 200 * LOG_LINE_CHARS  # 0.3.0 logged 200 MB here


async def test_once_failing_on_a_megabyte_message_logs_and_prints_500_characters_of_it(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(3))
    await db.execute(MEGABYTE_REFUSAL.format(code="XX000"))  # the server's, not the row's

    done = await run_command("once", "--as-of", AS_OF.isoformat(), "--database-url", secret_url)

    assert done.returncode == 1, done.describe()[:2_000]
    *logged, last = done.stderr.splitlines()
    (failed,) = [e for e in parse_log_lines(logged) if e["event"] == "cycle.failed"]
    assert len(failed["exception"]) <= 500
    assert failed["exception"].endswith(f"\u2026 ({MEGABYTE_MESSAGE_CHARS} characters)")
    # The line says what failed, then what the history keeps of the message.
    assert last.startswith("slot-expiration: error: database error, transient (SQLSTATE XX000)")
    assert re.search(r"xxx\u2026 \(10000\d\d characters\)$", last), last[-100:]
    assert len(last) <= 500 + len("slot-expiration: error: ")
    assert len(done.stderr) < 5 * LOG_LINE_CHARS
