"""The sizes of a run, the shape of its table and where its sessions point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.bench.database import bench_url
from slot_expiration.bench.dataset import (
    HISTORY_SHARE,
    coprime_stride,
    reference_time,
    table_spec,
)
from slot_expiration.bench.plan import Mode, TableShape, plan_for


@pytest.mark.parametrize("mode", list(Mode))
def test_the_backlog_outlasts_section_a_so_every_timed_batch_is_full(mode: Mode) -> None:
    plan = plan_for(mode)

    assert plan.batch_section_rows <= plan.backlog


@pytest.mark.parametrize("mode", list(Mode))
def test_each_growth_table_has_due_rows_for_its_dead_tuples_and_its_timed_batches(
    mode: Mode,
) -> None:
    plan = plan_for(mode)
    for slots in plan.growth.sizes:
        shape = plan.growth.shape(slots, plan.batch_size)
        timed = 3 * plan.growth.rounds * 2 * plan.growth.batches * plan.batch_size
        left_after_wave = shape.due - round(slots * plan.growth.dead_share)
        assert left_after_wave > timed  # every timed batch full, and rows left for a plan
        assert shape.due < slots


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


def test_bench_url_keeps_the_other_parameters_and_options() -> None:
    url = bench_url("postgresql://h/db?sslmode=require&options=-c%20statement_timeout%3D5s")

    query = parse_qs(urlsplit(url).query)
    assert query["sslmode"] == ["require"]
    assert query["options"] == ["-c statement_timeout=5s -c search_path=slot_expiration_bench"]
