"""The benchmark's statements live beside it (benchmarks/), not in the product's SQL files;
the batch it measures is the worker's own."""

from __future__ import annotations

from benchmarks.store import bench_query

from slot_expiration.db.statements import load_queries, query


def test_the_benchmarks_statements_live_beside_it_not_in_the_product() -> None:
    assert "FOR UPDATE SKIP LOCKED" in bench_query("bench_bare_batch")
    assert "bench_bare_batch" not in load_queries()
    assert bench_query("expire_batch") == query("expire_batch")  # it measures the worker's
