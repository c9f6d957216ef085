"""The benchmark (`./scripts/bench`, `python -m benchmarks`): the quick smoke run CI does, its
database mode, and bad options. It measures the installed worker; it is not part of it.

A benchmark measures and reports; these tests check that it runs, shows every
section and writes sane figures, never how fast anything was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.command import (
    BENCH,
    BENCH_ENV,
    PASSWORD,
    public_relations,
    run_command,
    started,
)

QUICK_SECONDS = 420.0  # a smoke run of about two minutes, on a busy machine too
VERDICTS = {"met", "not met", "not measured"}
BENCHMARK: dict[str, Any] = {"program": BENCH, "env": BENCH_ENV}


def _written(folder: Path) -> list[Path]:
    return list(folder.iterdir())


def _tables(stdout: str) -> list[list[list[str]]]:
    """Each Markdown table printed: its rows (header and separator left out), cell by cell."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*stdout.splitlines(), ""]:
        if line.startswith("| "):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return [
        [[cell.strip() for cell in row.strip("|").split(" | ")] for row in table[2:]]
        for table in tables
    ]


def _table_rows(stdout: str) -> list[list[str]]:
    return _tables(stdout)[0]


@pytest.mark.timeout(QUICK_SECONDS + 30)
async def test_bench_quick_prints_a_table_of_every_section_and_writes_the_same_as_json(
    tmp_path: Path,
) -> None:
    out = tmp_path / "bench.json"

    done = await run_command(
        "--quick", "--json-out", str(out), timeout_seconds=QUICK_SECONDS, **BENCHMARK
    )

    assert done.returncode == 0, done.describe()
    assert (
        "| section | measure | result | compared with | ratio | target | verdict |" in done.stdout
    )
    rows, targets = _tables(done.stdout)
    assert {row[0][:2] for row in rows} == {"a.", "b.", "c.", "d.", "e.", "f.", "g.", "h.", "i."}
    assert all(len(row) == 7 for row in rows)
    assert "| section | target | limit | result | verdict |" in done.stdout
    assert [row[0] for row in targets] == ["a", "a", "b", "d", "e", "h", "f", "g", "i"]
    assert {row[4].split(" (")[0] for row in targets} <= VERDICTS
    assert f"Figures written to {out}." in done.stdout
    _assert_sane(json.loads(out.read_text()))


def _assert_sane_throttle(i: dict[str, Any], backlog: int) -> None:
    """Flat out, each nice ratio and each adaptive setting of the quick plan, every one a
    whole drain beside bookings, flat out its own yardstick."""
    settings = [(p["nice_ratio"], p["max_slowdown"]) for p in i["points"]]
    assert settings == [(0.0, 0.0), (1.0, 0.0), (0.0, 1.5)]
    for point in i["points"]:
        assert point["drain"]["rows"] == backlog
        assert point["drain"]["latency"]["bookings"] > 0
        assert len(point["p99_vs_none"]["values"]) == i["rounds"]
    assert i["points"][0]["share_of_flat"]["values"] == [1.0] * i["rounds"]
    assert i["bare_flat"]["rows"] == backlog


def _assert_sane(document: dict[str, Any]) -> None:
    assert set(document) == {"run", "sections", "targets", "plans"}
    run, sections = document["run"], document["sections"]
    assert run["mode"] == "quick"
    assert run["embedded"] is True
    assert run["table"]["slots"] == sum(run["table"]["by_status"].values())
    backlog = run["table"]["due"]
    assert set(sections) == set("abcdefghi")
    a = sections["a"]
    assert a["worker"]["count"] == a["bare"]["count"] == a["rounds"] * a["batches_per_round"]
    assert a["median_ratio"] > 0
    b = sections["b"]
    assert b["backlog"] == backlog
    for name in ("worker", "worker_synchronous", "bare", "bare_asynchronous"):
        assert [run["rows"] for run in b[name]["runs"]] == [backlog] * b["rounds"]
    assert len(b["time_ratio"]["values"]) == b["rounds"]
    assert [c["processes"] for c in sections["c"]] == [1, 2, 4]
    for c in sections["c"]:
        assert c["exactly_once"] is True
        assert sum(c["expired_counts"]) == c["rows_expired"] == backlog
    d = sections["d"]
    assert d["no_drain"]["latency"]["bookings"] > 0
    for name in ("worker_flat", "bare_flat", "worker_paced", "bare_paced", "worker_synchronous"):
        assert d[name]["rows"] == backlog
        assert d[name]["latency"]["bookings"] > 0
        assert len(d[name]["p99_vs_none"]["values"]) == d["rounds"]
    assert d["worker_paced"]["pause_seconds"] == 0.02
    assert len(d["flat_p99_ratio"]["values"]) == len(d["paced_p99_ratio"]["values"]) == d["rounds"]
    assert len(d["synchronous_p99_ratio"]["values"]) == d["rounds"]
    assert d["slots_booked"] > 0  # the bookings really booked
    _assert_sane_rates(sections["g"], backlog)
    e = sections["e"]
    assert [p["slots"] for p in e["points"]] == [20_000, 50_000]
    assert all(p["expired_wave"] == p["slots"] // 5 for p in e["points"])
    f = sections["f"]
    assert f["drained_rows"] == backlog
    assert 0 < f["idle_mb"] <= f["lifetime_peak_mb"]
    _assert_sane_partitions(sections["h"])
    _assert_sane_throttle(sections["i"], backlog)
    assert [t["section"] for t in document["targets"]] == [
        "a",
        "a",
        "b",
        "d",
        "e",
        "h",
        "f",
        "g",
        "i",
    ]
    assert {t["verdict"] for t in document["targets"]} <= VERDICTS
    assert any("ix_availability_slots_status_start" in plan for plan in document["plans"].values())


def _assert_sane_rates(g: dict[str, Any], backlog: int) -> None:
    assert g["peer_is_cron"] is True  # the embedded server runs pg_cron
    assert g["single"]["kind"] == "pg_cron job"
    assert g["single"]["rows"] == backlog
    assert g["single"]["rows_per_second"]["median"] > 0
    assert [size["batch_size"] for size in g["sizes"]] == [500, 2_000]
    for size in g["sizes"]:
        assert size["worker"]["rows"] == backlog
        assert size["worker"]["batch_ms"]["count"] >= backlog // size["batch_size"]
        assert size["worker_vs_single"]["median"] > 0
    assert [size["bare"] is not None for size in g["sizes"]] == [False, True]
    assert g["sizes"][1]["bare"]["rows"] == backlog
    assert g["best_batch_size"] in {500, 2_000}
    assert g["default_vs_single"]["median"] > 0


def _assert_sane_partitions(h: dict[str, Any]) -> None:
    assert h["not_measured"] == ""
    points = h["points"]
    assert [(p["slots"], p["layout"]) for p in points] == [
        (20_000, "unpartitioned"),
        (20_000, "partitioned by month"),
        (50_000, "unpartitioned"),
        (50_000, "partitioned by month"),
    ]
    for point in points:
        monthly = point["layout"] == "partitioned by month"
        assert (point["partitions"] > 24) is monthly  # 24 months, premade ones, the default
        for drain in ("worker_drain", "bare_drain", "worker_drain_again"):
            assert point[drain]["rows"] == 4_000
            assert point[drain]["wal_mb"] > 0
    assert h["monthly_growth"] > 0


async def test_bench_on_a_given_database_says_it_writes_there_and_leaves_only_what_was(
    secret_url: str, database_url: str, tmp_path: Path
) -> None:
    before = await public_relations(database_url)
    out = tmp_path / "a.json"

    done = await run_command(
        "--quick",
        "--sections",
        "a",
        "--database-url",
        secret_url,
        "--json-out",
        str(out),
        timeout_seconds=QUICK_SECONDS,
        **BENCHMARK,
    )

    assert done.returncode == 0, done.describe()
    assert "bench: writing to postgresql://postgres:***@" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr + out.read_text()
    assert {row[0][:2] for row in _table_rows(done.stdout)} == {"a."}
    assert await public_relations(database_url) == before
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'slot_expiration_bench'"
        )
        assert await cursor.fetchone() == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quick", "--full"], "--quick and --full exclude each other"),
        (["--sections", "a,z"], "--sections: unknown section 'z'"),
        (["--server-setting", "wal_compression"], "--server-setting: 'wal_compression' is not"),
        (["--json-out", "missing/out.json"], "--json-out: folder 'missing' does not exist"),
        (["--json-out", "."], "--json-out: '.' is a folder"),
        ([f"--database-url=http://u:{PASSWORD}@h/db"], "--database-url: must be a postgresql"),
        (["--no-such-option"], "No such option '--no-such-option'"),
    ],
)
async def test_a_bad_option_is_one_line_exit_2_and_nothing_runs_or_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    async with started(*args, cwd=tmp_path, **BENCHMARK) as command:
        done = await command.wait()

    assert done.returncode == 2, done.describe()
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
    assert PASSWORD not in done.stderr
    assert _written(tmp_path) == []


async def test_an_unreachable_database_is_one_line_exit_1_without_the_password(
    closed_port: int, tmp_path: Path
) -> None:
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{closed_port}/calendar"

    async with started("--quick", "--database-url", url, cwd=tmp_path, **BENCHMARK) as command:
        done = await command.wait()

    assert done.returncode == 1, done.describe()
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("slot-expiration: error: cannot connect to the database")
    assert PASSWORD not in done.stderr
    assert _written(tmp_path) == []
