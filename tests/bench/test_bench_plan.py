"""The sizes of a run, the shape of its table and where its sessions point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest
from benchmarks.database import (
    BENCH_SERVER_SETTINGS,
    bench_url,
    reported_settings,
    server_settings,
)
from benchmarks.dataset import (
    HISTORY_SHARE,
    coprime_stride,
    reference_time,
    table_spec,
)
from benchmarks.partition_section import calendar_spec, first_month
from benchmarks.plan import DrainRatePlan, Mode, TableShape, plan_for
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.options.settings import DEFAULT_DRAIN_BATCH_SIZE


@pytest.mark.parametrize("mode", list(Mode))
def test_the_backlog_outlasts_section_a_so_every_timed_batch_is_full(mode: Mode) -> None:
    plan = plan_for(mode)

    assert plan.batch_section_rows <= plan.backlog


@pytest.mark.parametrize("mode", list(Mode))
def test_each_growth_table_has_due_rows_for_its_wave_and_a_round_and_a_batch_more(
    mode: Mode,
) -> None:
    plan = plan_for(mode)
    growth = plan.growth
    for slots in growth.sizes:
        shape = growth.shape(slots, plan.batch_size)
        left_after_wave = shape.due - round(slots * growth.dead_share)
        # Every timed batch full, and rows left for a plan; between rounds the phase's
        # rows are put back when the next round would run out.
        assert left_after_wave >= growth.round_rows(plan.batch_size) + plan.batch_size
        assert shape.due <= slots * growth.max_due_share


def test_the_large_growth_tables_hold_every_phase_without_putting_rows_back() -> None:
    plan = plan_for(Mode.FULL)
    whole = 3 * plan.growth.rounds * plan.growth.round_rows(plan.batch_size) + plan.batch_size

    for slots in (1_000_000, 10_000_000):
        shape = plan.growth.shape(slots, plan.batch_size)
        assert shape.due - round(slots * plan.growth.dead_share) == whole


@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.FULL])
def test_growth_phases_take_fifty_batches_and_side_by_side_figures_five_rounds(
    mode: Mode,
) -> None:
    plan = plan_for(mode)

    assert plan.growth.samples_per_phase >= 50
    assert plan.partitioned.growth().samples_per_phase >= 50
    assert plan.booking.rounds >= 5
    assert plan.drain_rounds >= 5
    assert plan.drain_rate.rounds >= 5
    assert plan.booking.paced_pause_seconds == 0.02
    assert plan.drain_rate.batch_sizes == (500, 2_000, 5_000)
    assert plan.drain_rate.bare_sizes == (DEFAULT_DRAIN_BATCH_SIZE,)


def test_the_bare_loop_runs_only_at_sizes_the_worker_runs_at() -> None:
    with pytest.raises(ValueError, match="among the worker's"):
        DrainRatePlan(batch_sizes=(500,), bare_sizes=(2_000,), rounds=1)


def test_the_partitioned_tables_reach_ten_million_slots_only_in_the_full_run() -> None:
    assert plan_for(Mode.FULL).partitioned.sizes == (100_000, 10_000_000)
    assert plan_for(Mode.DEFAULT).partitioned.sizes == (100_000, 1_000_000)
    assert max(plan_for(Mode.QUICK).partitioned.sizes) < 100_000


@pytest.mark.parametrize("mode", list(Mode))
def test_each_partitioned_table_has_due_rows_for_a_round_and_its_drain(mode: Mode) -> None:
    plan = plan_for(mode)
    partitioned = plan.partitioned
    for slots in partitioned.sizes:
        due = partitioned.due(slots, plan.batch_size)
        assert due >= partitioned.growth().round_rows(plan.batch_size) + plan.batch_size
        assert due >= partitioned.drain_rows
        assert due <= slots * partitioned.max_due_share


@pytest.mark.parametrize("slots", [20_000, 100_000, 10_000_000])
def test_a_partitioned_calendar_spans_its_months_up_to_now_and_four_weeks_ahead(
    slots: int,
) -> None:
    plan = plan_for(Mode.FULL).partitioned
    as_of = datetime(2026, 12, 3, 7, 30, tzinfo=UTC)

    spec = calendar_spec(plan, slots, 500, as_of)

    # Where bench_load_slots puts the earliest history slot and the latest future one.
    def steps(rows: int) -> int:
        return -(-rows // spec.consultants)

    first = as_of - (steps(spec.history) + steps(spec.due)) * spec.step
    future = slots - spec.due - spec.history
    last = as_of + timedelta(days=1) + (steps(future) - 1) * spec.step
    assert first_month(as_of, plan.months) == datetime(2025, 1, 1, tzinfo=UTC)
    assert datetime(2025, 1, 1, tzinfo=UTC) <= first < datetime(2025, 1, 3, tzinfo=UTC)
    assert last <= as_of + timedelta(days=plan.future_days + 2)
    assert spec.due == plan.due(slots, 500)


def test_growth_reaches_ten_million_slots_only_in_the_full_run() -> None:
    assert max(plan_for(Mode.FULL).growth.sizes) == 10_000_000
    assert plan_for(Mode.DEFAULT).growth.sizes == (100_000, 1_000_000)
    assert max(plan_for(Mode.QUICK).growth.sizes) < 100_000


def test_the_default_run_drains_a_backlog_of_200_000_on_a_table_of_a_million() -> None:
    plan = plan_for(Mode.DEFAULT)

    assert (plan.table.slots, plan.backlog, plan.processes) == (1_000_000, 200_000, (1, 2, 4))
    assert plan.batch_size == 500


def test_the_quick_run_is_smaller_than_the_default_in_every_part() -> None:
    quick, default = plan_for(Mode.QUICK), plan_for(Mode.DEFAULT)

    assert quick.table.slots < default.table.slots
    assert quick.booking.seconds < default.booking.seconds
    assert quick.booking.rounds <= default.booking.rounds
    assert quick.growth.samples_per_phase < default.growth.samples_per_phase
    assert quick.batch_section_rows < default.batch_section_rows


@given(st.integers(min_value=1, max_value=3_000))
def test_the_stride_permutes_the_row_numbers(total: int) -> None:
    stride = coprime_stride(total)

    assert sorted(p * stride % total for p in range(total)) == list(range(total))


def test_the_stride_scatters_neighbouring_rows_far_apart() -> None:
    stride = coprime_stride(1_000_000)

    assert 500_000 < stride < 700_000


def test_the_reference_time_is_now_down_to_the_half_hour_in_utc() -> None:
    now = datetime(2026, 12, 3, 9, 47, 31, 123, tzinfo=timezone(timedelta(hours=2)))

    assert reference_time(now) == datetime(2026, 12, 3, 7, 30, tzinfo=UTC)


def test_the_table_spec_splits_what_is_not_backlog_into_history_and_future() -> None:
    as_of = datetime(2026, 12, 3, 7, 30, tzinfo=UTC)

    spec = table_spec(TableShape(slots=1_000, due=200, consultants=10, tenants=2), as_of)

    assert (spec.total, spec.due, spec.history) == (1_000, 200, round(800 * HISTORY_SHARE))
    assert (spec.consultants, spec.tenants, spec.as_of) == (10, 2, as_of)


def test_bench_url_puts_the_benchmark_schema_first_on_the_search_path() -> None:
    url = bench_url("postgresql://u:pw@h:5432/calendar")

    parts = urlsplit(url)
    assert parts.netloc == "u:pw@h:5432"
    assert parse_qs(parts.query) == {"options": ["-c search_path=slot_expiration_bench"]}


def test_a_server_setting_given_replaces_the_benchmarks_own_of_that_name() -> None:
    settings = server_settings(("max_wal_size=1GB", "wal_compression=on"))

    assert "max_wal_size=8GB" not in settings
    assert settings[-2:] == ("max_wal_size=1GB", "wal_compression=on")
    assert "shared_buffers=1GB" in settings
    assert server_settings() == BENCH_SERVER_SETTINGS


def test_the_report_names_the_settings_given_beside_its_own() -> None:
    names = reported_settings(("commit_siblings=10",))

    assert {"commit_siblings", "wal_compression", "full_page_writes"} <= set(names)
    assert list(names) == sorted(names)


def test_bench_url_keeps_the_other_parameters_and_options() -> None:
    url = bench_url("postgresql://h/db?sslmode=require&options=-c%20statement_timeout%3D5s")

    query = parse_qs(urlsplit(url).query)
    assert query["sslmode"] == ["require"]
    assert query["options"] == ["-c statement_timeout=5s -c search_path=slot_expiration_bench"]
