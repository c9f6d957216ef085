"""The run's figures: a Markdown table for people (stdout) and the same as JSON (a file)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.batch_section import BatchComparison
from benchmarks.beside import Condition
from benchmarks.booking_section import BookingInterference
from benchmarks.dataset import LoadedTable
from benchmarks.drain_rate_section import BatchSizeDrains, DrainRates
from benchmarks.drain_section import DrainComparison, DrainSeries
from benchmarks.growth_section import Growth, GrowthPoint
from benchmarks.memory_section import MemoryProfile
from benchmarks.options import WorkerTuning
from benchmarks.parallel_section import ParallelDrain
from benchmarks.partition_section import Layout, Partitioned, PartitionPoint
from benchmarks.stats import Distribution, Spread, ratio
from benchmarks.targets import (
    BATCH_RATIO,
    BOOKING_P99,
    DRAIN_RATE,
    DRAIN_RATIO,
    GROWTH_RATIO,
    GROWTH_REFERENCE_SLOTS,
    GROWTH_TARGET_SLOTS,
    IDLE_MEMORY,
    PARTITIONED_GROWTH,
    STATEMENT_RATIO,
    THROTTLED_P99,
    Target,
    TargetCheck,
)
from benchmarks.throttle_section import TARGET_SHARE, ThrottleCurve, ThrottlePoint

HEADER = ("section", "measure", "result", "compared with", "ratio", "target", "verdict")
TARGETS_HEADER = ("section", "target", "limit", "result", "verdict")
DASH = "-"


@dataclass(frozen=True, slots=True)
class Conditions:
    """What else went on while a section ran: a busy machine or server shows here."""

    load_before: float  # 1-minute load average (the run's own processes count too)
    load_after: float
    checkpoints: int  # during the section, besides the benchmark's own
    autovacuum_runs: int  # autovacuum and autoanalyze runs on the benchmark's tables
    seconds: float


@dataclass(frozen=True, slots=True)
class RunFacts:
    mode: str
    command: str  # what reproduces the run (a password in a URL shown as ***)
    database: str
    embedded: bool
    started_at: str
    seconds: float
    cpus: int
    as_of: str
    server_version: str
    server_settings: dict[str, str]
    table: LoadedTable | None  # the table of sections a-d and f, as loaded
    worker: WorkerTuning  # the worker's own tuning options in this run
    checkpoint_before_sections: bool  # False: the role may not CHECKPOINT (a given database)
    load_before_run: tuple[float, float, float]  # 1, 5, 15 minutes: the machine's own load
    cpu_busy_before_run: float  # share of all CPUs busy (others' work) just before the run
    conditions: dict[str, Conditions]  # per section
    server_overrides: tuple[str, ...] = ()  # --server-setting NAME=VALUE, as given


@dataclass(frozen=True, slots=True)
class BenchResults:
    batch: BatchComparison | None = None
    drain: DrainComparison | None = None
    parallel: tuple[ParallelDrain, ...] | None = None
    booking: BookingInterference | None = None
    drain_rate: DrainRates | None = None
    memory: MemoryProfile | None = None
    growth: Growth | None = None
    partitioned: Partitioned | None = None
    throttle: ThrottleCurve | None = None
    plans: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BenchReport:
    facts: RunFacts
    results: BenchResults

    def checks(self) -> list[TargetCheck]:
        r = self.results
        absent = "section not run"
        a, b, d, g = r.batch, r.drain, r.booking, r.drain_rate
        statement = ratio(a.statement_only.median, a.statement_bare.median) if a else None
        return [
            BATCH_RATIO.check(a.median_ratio if a else None, absent),
            STATEMENT_RATIO.check(statement, absent),
            DRAIN_RATIO.of_rounds(b.time_ratio if b else None, absent),
            BOOKING_P99.of_rounds(d.flat_p99_ratio if d else None, absent),
            growth_check(r.growth),
            partitioned_check(r.partitioned),
            IDLE_MEMORY.check(r.memory.idle_mb if r.memory else None, absent),
            drain_rate_check(g),
            throttle_check(r.throttle),
        ]


def growth_check(growth: Growth | None) -> TargetCheck:
    """One batch at 10 million slots / at 100 thousand, clean, with the samples behind it."""
    if growth is None:
        return GROWTH_RATIO.check(None, "section not run")
    by_size = {point.slots: point for point in growth.points}
    reference, target = by_size.get(GROWTH_REFERENCE_SLOTS), by_size.get(GROWTH_TARGET_SLOTS)
    if reference is None or target is None:
        return GROWTH_RATIO.check(None, "needs --full for 10 million slots")
    samples = min(target.clean.worker.count, reference.clean.worker.count)
    value = ratio(target.clean.worker.median, reference.clean.worker.median)
    return GROWTH_RATIO.check(value, "no time at 100 thousand slots", samples, growth.round_ratios)


def partitioned_check(partitioned: Partitioned | None) -> TargetCheck:
    """One batch at 10 million slots / at 100 thousand, partitioned by month."""
    if partitioned is None:
        return PARTITIONED_GROWTH.check(None, "section not run")
    if partitioned.not_measured:
        return PARTITIONED_GROWTH.check(None, partitioned.not_measured)
    by_size = {p.slots: p for p in partitioned.of(Layout.MONTHLY)}
    reference, target = by_size.get(GROWTH_REFERENCE_SLOTS), by_size.get(GROWTH_TARGET_SLOTS)
    if reference is None or target is None:
        return PARTITIONED_GROWTH.check(None, "needs --full for 10 million slots")
    samples = min(target.clean.worker.count, reference.clean.worker.count)
    value = ratio(target.clean.worker.median, reference.clean.worker.median)
    spread = partitioned.round_ratios(Layout.MONTHLY)
    return PARTITIONED_GROWTH.check(value, "no time at 100 thousand slots", samples, spread)


def drain_rate_check(g: DrainRates | None) -> TargetCheck:
    if g is None:
        return DRAIN_RATE.check(None, "section not run")
    if g.at_default is None:
        return DRAIN_RATE.check(None, f"the default drain batch ({g.default_batch_size:,}) not run")
    return DRAIN_RATE.of_rounds(g.default_vs_single, "no rate measured")


def throttle_check(i: ThrottleCurve | None) -> TargetCheck:
    """The bookings' p99 beside the worker at its default setting, if it kept the share
    of flat out the target asks for."""
    if i is None:
        return THROTTLED_P99.check(None, "section not run")
    default = i.at_default
    if default is None:
        return THROTTLED_P99.check(None, "the default setting not run")
    share = default.share_of_flat
    if default.nice_ratio and (share is None or share.median < TARGET_SHARE):
        kept = "no rate" if share is None else f"{share.median:.0%} of flat out"
        return THROTTLED_P99.check(None, f"the default drains at {kept}")
    return THROTTLED_P99.of_rounds(default.p99_vs_none, "no p99 measured")


# --- Markdown -----------------------------------------------------------------------------


def render_markdown(report: BenchReport) -> str:
    facts = report.facts
    prepared = "on" if facts.worker.prepared_statements else "off"
    pause = facts.worker.batch_pause_seconds
    paced = f"a pause of {pause:g} s between batches" if pause else "no pause between batches"
    lines = [
        f"## ./scripts/bench ({facts.mode})",
        "",
        f"`{facts.command}` on {facts.database} (PostgreSQL {facts.server_version}), "
        f"{facts.cpus} CPUs, {facts.seconds:.0f} s, started {facts.started_at}; the worker's "
        f"server-side prepared statements {prepared}, {paced}"
        + (
            f"; server settings given: {', '.join(facts.server_overrides)}."
            if facts.server_overrides
            else "."
        ),
        "",
        _row(HEADER),
        _row(tuple("---" for _ in HEADER)),
        *(_row(row) for row in table_rows(report)),
        "",
        "Targets (a figure measured in rounds is judged on their median; its range beside it):",
        "",
        _row(TARGETS_HEADER),
        _row(tuple("---" for _ in TARGETS_HEADER)),
        *(_row(row) for row in target_rows(report)),
        "",
        (
            "Each section, and each phase of e, starts after a CHECKPOINT; autovacuum is off "
            "for the table while sections measure (they VACUUM it themselves). "
            if facts.checkpoint_before_sections
            else "The role may not CHECKPOINT: sections start without one. "
        )
        + f"Before the run the CPUs were {facts.cpu_busy_before_run:.0%} busy with other work; "
        "load average (1, 5, 15 min): "
        f"{' / '.join(f'{v:.2f}' for v in facts.load_before_run)}. Per section: 1-min load "
        "before -> after (the run's own processes count too), other checkpoints, autovacuum runs, "
        "seconds: "
        + "; ".join(
            f"{name} {c.load_before:.2f} -> {c.load_after:.2f}, {c.checkpoints}, "
            f"{c.autovacuum_runs}, {c.seconds:.0f} s"
            for name, c in facts.conditions.items()
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def target_rows(report: BenchReport) -> list[tuple[str, str, str, str, str]]:
    """Each target with its limit, the figure (and its rounds' range) and the verdict."""
    return [
        (
            check.target.section,
            check.target.what,
            check.target.describe(),
            check.result(),
            check.describe(),
        )
        for check in report.checks()
    ]


Row = tuple[str, str, str, str, str, str, str]


def table_rows(report: BenchReport) -> list[Row]:
    checks: dict[Target, TargetCheck] = {check.target: check for check in report.checks()}
    r = report.results
    rows: list[Row] = []
    if r.batch:
        rows += _batch_rows(r.batch, checks[BATCH_RATIO], checks[STATEMENT_RATIO])
    if r.drain:
        rows += _drain_rows(r.drain, checks[DRAIN_RATIO])
    if r.parallel:
        rows += _parallel_rows(r.parallel)
    if r.booking:
        rows += _booking_rows(r.booking, checks[BOOKING_P99])
    if r.drain_rate:
        rows += _drain_rate_rows(r.drain_rate, checks[DRAIN_RATE])
    if r.growth:
        rows += _growth_rows(r.growth, checks[GROWTH_RATIO])
    if r.partitioned:
        rows += _partitioned_rows(r.partitioned, checks[PARTITIONED_GROWTH])
    if r.memory:
        rows += _memory_rows(r.memory, checks[IDLE_MEMORY])
    if r.throttle:
        rows += _throttle_rows(r.throttle, checks[THROTTLED_P99])
    return rows


def _throttle_rows(i: ThrottleCurve, check: TargetCheck) -> Iterator[Row]:
    label, none = "i. bookings' p99 against the drain rate", i.no_drain.latency.latency_ms
    yield _beside_row(
        label,
        i.bare_flat,
        f"{i.bare_flat.label}: p99 / no drain (the floor)",
        f"no drain p99 {none.p99:.2f} ms",
    )
    for point in i.points:
        yield _throttle_point_row(label, point, none)
    chosen, floor = i.chosen, i.floor
    verdict = (
        f"{_setting(chosen)} meets it"
        if chosen is not None
        else "no setting meets it; the floor: "
        + (
            f"{_setting(floor)}, p99 {_spread(floor.p99_vs_none)}"
            if floor is not None
            else f"no setting kept {TARGET_SHARE:.0%} of flat out"
        )
    )
    yield (
        label,
        f"the default (nice ratio {i.default_ratio:g}, max slowdown {i.default_slowdown:g}): "
        "p99 / no drain",
        verdict,
        f"no drain p99 {none.p99:.2f} ms",
        check.result(),
        check.target.describe(),
        check.describe(),
    )


def _setting(p: ThrottlePoint) -> str:
    if p.nice_ratio:
        return f"nice ratio {p.nice_ratio:g}"
    return f"adaptive, max slowdown {p.max_slowdown:g}" if p.max_slowdown else "flat out"


def _throttle_point_row(label: str, p: ThrottlePoint, none: Distribution) -> Row:
    setting = _setting(p)
    return (
        label,
        f"worker, {setting}: drain rate / flat out; bookings p99 / no drain",
        f"{_rate(p.drain)} rows/s, {_spread(p.share_of_flat)} of flat out",
        f"no drain p99 {none.p99:.2f} ms",
        f"p99 {_spread(p.p99_vs_none)}",
        DASH,
        DASH,
    )


def _ms(d: Distribution) -> str:
    return f"{d.median:.2f} ms median, {d.p95:.2f} p95"


def _x(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else DASH


def _rounds(count: int) -> str:
    return f"{count} round{'s' if count != 1 else ''}"


def _spread(spread: Spread | None) -> str:
    return spread.describe() if spread is not None else DASH


def _batch_rows(
    a: BatchComparison, check: TargetCheck, statement_check: TargetCheck
) -> Iterator[Row]:
    yield (
        "a. one batch of 500",
        f"inside drain cycles ({a.worker.count} batches each)",
        f"worker {_ms(a.worker)}",
        f"bare {_ms(a.bare)}",
        f"{_x(a.median_ratio)} (p95 {_x(a.p95_ratio)})",
        check.target.describe(),
        check.describe(),
    )
    yield (
        "a. one batch of 500",
        f"the worker's statement alone, one round trip ({a.statement_only.count}, "
        "each beside a bare one)",
        f"statement {_ms(a.statement_only)}",
        f"bare {_ms(a.statement_bare)}",
        _x(ratio(a.statement_only.median, a.statement_bare.median)),
        statement_check.target.describe(),
        statement_check.describe(),
    )
    later = f" / {a.later_batches.median:.2f}" if a.later_batches else ""
    yield (
        "a. one batch of 500",
        "worker batch by place in its cycle: 1st / later (median ms)",
        f"{a.first_batches.median:.2f}{later}",
        f"opening a session {a.session_open.median:.2f} ms",
        DASH,
        DASH,
        DASH,
    )
    yield (
        "a. one batch of 500",
        f"default mode: one batch per cycle ({a.single_batch.count} cycles)",
        f"batch {_ms(a.single_batch)}",
        f"whole cycle {_ms(a.single_cycle)}",
        DASH,
        DASH,
        DASH,
    )


def _drain_rows(b: DrainComparison, check: TargetCheck) -> Iterator[Row]:
    label = f"b. drain {b.backlog:,}"
    worker, bare = b.worker, b.bare
    yield (
        label,
        f"time to drain, median of {_rounds(b.rounds)}: worker (synchronous commit off, "
        "the default) / bare loop (the server's synchronous commit)",
        f"worker {_series(worker)}",
        f"bare loop {_series(bare)}",
        _spread(b.time_ratio),
        check.target.describe(),
        check.describe(),
    )
    for series, spread, against in (
        (b.worker_synchronous, b.synchronous_ratio, "bare loop"),
        (b.bare_asynchronous, b.asynchronous_floor_ratio, "worker / it"),
    ):
        yield (
            label,
            f"{series.kind}: time, median of rounds",
            _series(series),
            against,
            _spread(spread),
            DASH,
            DASH,
        )
    for series in (worker, b.worker_synchronous, bare, b.bare_asynchronous):
        run = series.median_run
        yield (
            label,
            f"{series.kind}: batch ms first 10 / last 10; WAL; client CPU per batch "
            "(the median round)",
            f"{run.first_batches_ms:.2f} / {run.last_batches_ms:.2f} ms; {run.wal_mb:,.0f} MB; "
            f"{run.cpu_ms_per_batch:.2f} ms",
            f"{run.batches} batches",
            DASH,
            DASH,
            DASH,
        )


def _series(series: DrainSeries) -> str:
    rate, seconds = series.rows_per_second, series.seconds
    if rate is None or seconds is None:
        return DASH
    return f"{rate.median:,.0f} rows/s ({seconds.median:.2f} s)"


def _parallel_rows(drains: tuple[ParallelDrain, ...]) -> Iterator[Row]:
    single = drains[0]
    for c in drains:
        yield (
            f"c. drain {c.backlog:,}",
            f"{c.processes} worker process{'es' if c.processes > 1 else ''}",
            f"{c.rows_per_second:,.0f} rows/s ({c.seconds:.2f} s, {c.batches} batches, "
            f"{c.skipped_locked:,} skipped locked)",
            f"{single.processes} process: {single.rows_per_second:,.0f} rows/s",
            f"{c.rows_per_second / single.rows_per_second:.2f}" if single.rows_per_second else DASH,
            "every row expired exactly once",
            "yes" if c.exactly_once else "NO",
        )


def _booking_rows(d: BookingInterference, check: TargetCheck) -> Iterator[Row]:
    none = d.no_drain.latency.latency_ms
    label = "d. bookings beside a drain"
    yield (
        label,
        f"no drain ({d.rate_per_second}/s, {d.clients} clients, {_rounds(d.rounds)})",
        f"p50 {none.median:.2f} ms, p99 {none.p99:.2f} ms ({none.count:,} bookings)",
        f"p99 by round {_spread(d.no_drain.p99_ms)} ms",
        DASH,
        DASH,
        DASH,
    )
    for c in d.drains:
        yield _beside_row(label, c, f"{c.label}: p99 / no drain", f"no drain p99 {none.p99:.2f} ms")
    for pace, spread, worker, bare in (
        ("flat out", d.flat_p99_ratio, d.worker_flat, d.bare_flat),
        (f"paced {d.pause_seconds:g} s", d.paced_p99_ratio, d.worker_paced, d.bare_paced),
        (
            "flat out, the worker with synchronous commit on",
            d.synchronous_p99_ratio,
            d.worker_synchronous,
            d.bare_flat,
        ),
    ):
        flat = pace == "flat out"
        yield (
            label,
            f"p99 beside the worker / beside the bare loop, {pace}",
            f"worker p99 {worker.p99_ms.median:.2f} ms (median of rounds)",
            f"bare loop p99 {bare.p99_ms.median:.2f} ms",
            _spread(spread),
            check.target.describe() if flat else DASH,
            check.describe() if flat else DASH,
        )


def _beside_row(label: str, c: Condition, measure: str, compared: str) -> Row:
    """A drain beside the bookings: the bookings' latency, the drain's rate and batches."""
    lat = c.latency.latency_ms
    rate = f"; drain {c.rows_per_second.median:,.0f} rows/s" if c.rows_per_second else ""
    batches = f"; batches {_p99_max(c.batch_ms)}" if c.batch_ms else ""
    p50 = c.p50_vs_none.median if c.p50_vs_none else None
    return (
        label,
        measure,
        f"p50 {lat.median:.2f} ms, p99 {lat.p99:.2f} ms{rate}{batches}",
        compared,
        f"p99 {_spread(c.p99_vs_none)}; p50 {_x(p50)}",
        DASH,
        DASH,
    )


def _drain_rate_rows(g: DrainRates, check: TargetCheck) -> Iterator[Row]:
    label, single = "g. drain rate", g.single
    none = g.no_drain.latency.latency_ms
    peer = (
        "the pg_cron job (timed by pg_cron)"
        if g.peer_is_cron
        else "the single statement (sent and timed by the benchmark: no pg_cron)"
    )
    yield _beside_row(
        label,
        single,
        f"{peer}, {g.backlog:,} rows in one UPDATE: bookings p99 / no drain",
        f"no drain p99 {none.p99:.2f} ms",
    )
    for size in g.sizes:
        yield _size_row(label, size)
    default = g.at_default
    if default is not None:
        yield (
            label,
            f"the default drain batch ({default.batch_size:,} rows) / {single.kind}",
            f"worker {_rate(default.worker)} rows/s",
            f"{single.kind} {_rate(single)} rows/s",
            _spread(g.default_vs_single),
            check.target.describe(),
            check.describe(),
        )
    best = g.best
    yield (
        label,
        f"best drain batch ({best.batch_size:,} rows) / {single.kind}",
        f"worker {_rate(best.worker)} rows/s",
        f"{single.kind} {_rate(single)} rows/s",
        _spread(g.best_vs_single),
        DASH,
        DASH,
    )


def _size_row(label: str, s: BatchSizeDrains) -> Row:
    w, b = s.worker, s.bare
    batch = f", batches {_p99_max(w.batch_ms)}" if w.batch_ms else ""
    bare = f"bare loop {_rate(b)} rows/s; p99 {_spread(b.p99_vs_none)}" if b else DASH
    bare_ratio = f"; bare {_spread(s.bare_vs_single)}" if b else ""
    return (
        label,
        f"{s.batch_size:,} rows a batch: rate / the peer's; bookings p99 / no drain",
        f"worker {_rate(w)} rows/s{batch}; p99 {_spread(w.p99_vs_none)}",
        bare,
        f"worker {_spread(s.worker_vs_single)}{bare_ratio}",
        DASH,
        DASH,
    )


def _p99_max(d: Distribution) -> str:
    return f"p99 {d.p99:.0f} ms, max {d.maximum:.0f} ms"


def _rate(c: Condition) -> str:
    return f"{c.rows_per_second.median:,.0f}" if c.rows_per_second else DASH


def _growth_rows(e: Growth, check: TargetCheck) -> Iterator[Row]:
    reference = e.points[0]
    for point in e.points:
        yield from _growth_point_rows(point, reference)
    largest = e.points[-1]
    rounds = e.round_ratios
    spread = f" (rounds {rounds.minimum:.2f}-{rounds.maximum:.2f})" if rounds else ""
    yield (
        "e. growth",
        "largest vs smallest table, clean worker batch (median)",
        f"{largest.slots:,} slots ({largest.clean.worker.count} batches)",
        f"{reference.slots:,} slots ({reference.clean.worker.count} batches)",
        _x(e.largest_vs_smallest) + spread,
        check.target.describe(),
        check.describe(),
    )


def _growth_point_rows(p: GrowthPoint, reference: GrowthPoint) -> Iterator[Row]:
    label, base = f"e. {p.slots:,} slots", reference.clean.worker.median
    yield (
        label,
        "one batch, clean (ms)",
        f"worker {_ms(p.clean.worker)}",
        f"bare {_ms(p.clean.bare)}",
        f"{p.clean.worker.median / base:.2f} (vs {reference.slots:,} clean)",
        DASH,
        DASH,
    )
    yield (
        label,
        f"after {p.expired_wave:,} expiries, not vacuumed (ms)",
        f"worker: first {p.first_batch_after_wave_ms:.2f}, then {_ms(p.dead.worker)}",
        f"bare {_ms(p.dead.bare)}",
        f"{p.dead.worker.median / p.clean.worker.median:.2f} (vs clean)",
        DASH,
        DASH,
    )
    yield (
        label,
        "after VACUUM (ms)",
        f"worker {_ms(p.vacuumed.worker)}",
        f"bare {_ms(p.vacuumed.bare)}",
        f"{p.vacuumed.worker.median / p.clean.worker.median:.2f} (vs clean)",
        DASH,
        DASH,
    )


def _partitioned_rows(h: Partitioned, check: TargetCheck) -> Iterator[Row]:
    if h.not_measured:
        yield ("h. partitioned", h.not_measured, DASH, DASH, DASH, DASH, DASH)
        return
    for point in h.points:
        yield from _partition_point_rows(point)
    for layout in Layout:
        points = h.of(layout)
        if len(points) < 2:
            continue
        monthly = layout is Layout.MONTHLY
        yield (
            "h. growth",
            f"{layout.value}: largest vs smallest table, worker batch (median)",
            f"{points[-1].slots:,} slots ({points[-1].clean.worker.count} batches)",
            f"{points[0].slots:,} slots ({points[0].clean.worker.count} batches)",
            f"{_x(h.growth(layout))} (rounds {_spread(h.round_ratios(layout))})",
            check.target.describe() if monthly else DASH,
            check.describe() if monthly else DASH,
        )


def _partition_point_rows(p: PartitionPoint) -> Iterator[Row]:
    label = f"h. {p.slots:,} slots, {p.layout}"
    parts = f", {p.partitions} partitions" if p.partitions else ""
    yield (
        label,
        f"one batch (ms); table {p.table_mib:,.0f} MiB, indexes {p.indexes_mib:,.0f} MiB{parts}",
        f"worker {_ms(p.clean.worker)}",
        f"bare {_ms(p.clean.bare)}",
        _x(ratio(p.clean.worker.median, p.clean.bare.median)),
        DASH,
        DASH,
    )
    w, bare, again = p.worker_drain, p.bare_drain, p.worker_drain_again
    yield (
        label,
        f"drain of {w.rows:,} after a CHECKPOINT: rate; WAL per batch",
        f"worker {w.rows_per_second:,.0f} rows/s; {p.wal_kb_per_batch:,.0f} kB",
        f"bare loop {bare.rows_per_second:,.0f} rows/s; {p.bare_wal_kb_per_batch:,.0f} kB",
        _x(ratio(bare.seconds, w.seconds)),
        DASH,
        DASH,
    )
    yield (
        label,
        "the worker's same drain again before the next checkpoint: rate; WAL per batch",
        f"worker {again.rows_per_second:,.0f} rows/s; {p.wal_kb_per_batch_again:,.0f} kB",
        f"after the CHECKPOINT {p.wal_kb_per_batch:,.0f} kB",
        _x(ratio(p.wal_kb_per_batch_again, p.wal_kb_per_batch)),
        DASH,
        DASH,
    )


def _memory_rows(f: MemoryProfile, check: TargetCheck) -> Iterator[Row]:
    yield (
        "f. worker memory",
        "resident, idle (`run`)",
        f"{f.idle_mb:.1f} MB",
        DASH,
        DASH,
        check.target.describe(),
        check.describe(),
    )
    yield (
        "f. worker memory",
        f"resident, draining {f.drained_rows:,} rows (peak)",
        f"{f.draining_peak_mb:.1f} MB",
        f"idle {f.idle_mb:.1f} MB",
        DASH,
        DASH,
        DASH,
    )
    yield (
        "f. worker memory",
        "resident, idle after the drain",
        f"{f.idle_after_drain_mb:.1f} MB",
        f"lifetime peak {f.lifetime_peak_mb:.1f} MB",
        DASH,
        DASH,
        DASH,
    )


# --- JSON ---------------------------------------------------------------------------------


def to_json(report: BenchReport) -> dict[str, Any]:
    """Every figure of the table, as numbers, plus the run's facts and the plans."""
    r = report.results
    sections = {
        "a": r.batch,
        "b": r.drain,
        "c": list(r.parallel) if r.parallel else None,
        "d": r.booking,
        "e": r.growth,
        "f": r.memory,
        "g": r.drain_rate,
        "h": r.partitioned,
        "i": r.throttle,
    }
    return {
        "run": _plain(report.facts),
        "sections": {key: _plain(value) for key, value in sections.items() if value is not None},
        "targets": [
            {
                "section": check.target.section,
                "what": check.target.what,
                "limit": check.target.limit,
                "at_least": check.target.at_least,
                "min_samples": check.target.min_samples,
                "condition": check.target.condition,
                "goal": check.target.goal,
                "value": check.value,
                "spread": _plain(check.spread),
                "verdict": check.verdict.value,
                "note": check.why_not_measured,
            }
            for check in report.checks()
        ],
        "plans": r.plans,
    }


def _plain(value: Any) -> Any:
    """Dataclasses to dicts (with their derived figures), tuples to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in _DERIVED.get(type(value).__name__, ()):
            plain[name] = _plain(getattr(value, name))
        return plain
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


_DERIVED = {
    "ParallelDrain": ("exactly_once",),
    "Growth": ("largest_vs_smallest", "round_ratios"),
    "BookingInterference": ("slots_booked",),
    "ThrottleCurve": ("default_ratio", "default_slowdown"),
    "ThrottlePoint": ("p99_vs_none",),
    "DrainRates": ("best_batch_size", "best_vs_single", "default_vs_single", "peer_is_cron"),
    "DrainSeries": ("seconds", "rows_per_second"),
    "Partitioned": ("monthly_growth", "plain_growth"),
    "PartitionPoint": ("wal_kb_per_batch", "bare_wal_kb_per_batch", "wal_kb_per_batch_again"),
}
