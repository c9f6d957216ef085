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

pytestmark = pytest.mark.e2e

QUICK_SECONDS = 300.0  # a smoke run of about a minute, on a busy machine too
VERDICTS = {"met", "not met", "not measured"}
BENCHMARK: dict[str, Any] = {"program": BENCH, "env": BENCH_ENV}


def _written(folder: Path) -> list[Path]:
    return list(folder.iterdir())


def _table_rows(stdout: str) -> list[list[str]]:
    rows = [line for line in stdout.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


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
    rows = _table_rows(done.stdout)
    assert {row[0][:2] for row in rows} == {"a.", "b.", "c.", "d.", "e.", "f.", "g."}
    assert all(len(row) == 7 for row in rows)
    assert f"Figures written to {out}." in done.stdout
    _assert_sane(json.loads(out.read_text()))


def _assert_sane(document: dict[str, Any]) -> None:
    assert set(document) == {"run", "sections", "targets", "plans"}
    run, sections = document["run"], document["sections"]
    assert run["mode"] == "quick"
    assert run["embedded"] is True
    assert run["table"]["slots"] == sum(run["table"]["by_status"].values())
    backlog = run["table"]["due"]
    assert set(sections) == set("abcdefg")
    a = sections["a"]
    assert a["worker"]["count"] == a["bare"]["count"] == a["rounds"] * a["batches_per_round"]
    assert a["median_ratio"] > 0
    b = sections["b"]
    assert b["worker"]["rows"] == b["bare"]["rows"] == b["backlog"] == backlog
    assert [c["processes"] for c in sections["c"]] == [1, 2, 4]
    for c in sections["c"]:
        assert c["exactly_once"] is True
        assert sum(c["expired_counts"]) == c["rows_expired"] == backlog
    d = sections["d"]
    assert d["no_drain"]["latency"]["bookings"] > 0
    for name in ("worker_flat", "bare_flat", "worker_paced", "bare_paced"):
        assert d[name]["rows"] == backlog
        assert d[name]["latency"]["bookings"] > 0
        assert len(d[name]["p99_vs_none"]["values"]) == d["rounds"]
    assert d["worker_paced"]["pause_seconds"] == 0.02
    assert len(d["flat_p99_ratio"]["values"]) == len(d["paced_p99_ratio"]["values"]) == d["rounds"]
    assert d["slots_booked"] > 0  # the bookings really booked
    _assert_sane_rates(sections["g"], backlog)
    e = sections["e"]
    assert [p["slots"] for p in e["points"]] == [20_000, 50_000]
    assert all(p["expired_wave"] == p["slots"] // 5 for p in e["points"])
    f = sections["f"]
    assert f["drained_rows"] == backlog
    assert 0 < f["idle_mb"] <= f["lifetime_peak_mb"]
    assert [t["section"] for t in document["targets"]] == ["a", "a", "b", "d", "e", "f", "g"]
    assert {t["verdict"] for t in document["targets"]} <= VERDICTS
    assert any("ix_availability_slots_status_start" in plan for plan in document["plans"].values())


def _assert_sane_rates(g: dict[str, Any], backlog: int) -> None:
    assert g["single"]["rows"] == backlog
    assert g["single"]["rows_per_second"]["median"] > 0
    assert [size["batch_size"] for size in g["sizes"]] == [500, 2_000]
    for size in g["sizes"]:
        assert size["worker"]["rows"] == size["bare"]["rows"] == backlog
        assert size["worker"]["batch_ms"]["count"] >= backlog // size["batch_size"]
        assert size["worker_vs_single"]["median"] > 0
    assert g["best_batch_size"] in {500, 2_000}
    assert g["best_vs_single"]["median"] > 0


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
