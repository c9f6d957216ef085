"""The benchmark's count of what autovacuum did during a section, whose tables may be
dropped and made anew within it (sections e and h)."""

from __future__ import annotations

from benchmarks.store import ActivityCounters


def test_runs_on_a_table_present_before_and_after_are_its_difference() -> None:
    before = ActivityCounters(checkpoints=3, autovacuum_runs={16384: 2})
    after = ActivityCounters(checkpoints=3, autovacuum_runs={16384: 5})

    assert after.autovacuum_runs_since(before) == 3


def test_a_table_dropped_and_made_anew_never_counts_negative_runs() -> None:
    # The slot table of 2 runs dropped; its successor and two partitions made since.
    before = ActivityCounters(checkpoints=0, autovacuum_runs={16384: 2})
    after = ActivityCounters(checkpoints=0, autovacuum_runs={20000: 0, 20010: 1, 20020: 0})

    assert after.autovacuum_runs_since(before) == 1
