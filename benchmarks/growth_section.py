"""Section e: one batch on ever larger tables, clean, with dead tuples, and vacuumed.

For each size a fresh table is loaded (the same shape, scaled), and batches are
timed, worker and bare alternately, in three states: just loaded and vacuumed;
after a wave of expiries (a share of the table expired in one statement, as
many dead tuples as the default autovacuum lets pile up before it acts: 20%),
analyzed as autoanalyze would but not vacuumed; and after VACUUM. Autovacuum is
off for the table meanwhile, so that it cannot change the state being measured;
each phase starts after a CHECKPOINT, like every section.
The first worker batch after the wave is shown by itself: it meets the dead
index entries before any scan has marked them dead.

A phase is several rounds (a worker cycle of N batches, N bare ones, turn
about), so that its median rests on 50 batches or more, and the growth figure
has a spread: each round's median at the largest table / the same round's at
the smallest. A small table cannot hold the due rows of every phase: when the
next round would run out, the rows the phase's batches expired are put back
first (the wave's stay expired, being stamped before AsOf): vacuumed and after
a CHECKPOINT in the clean and vacuumed phases, as they were; only after a
CHECKPOINT in the dead-tuple phase, whose dead tuples then grow by those rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import timedelta

from benchmarks.batch_section import alternate
from benchmarks.context import BenchContext
from benchmarks.dataset import load_table, restore_backlog
from benchmarks.stats import Distribution, Spread, ratio
from benchmarks.timing import BatchRecorder

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    worker: Distribution  # ms per worker batch
    bare: Distribution  # ms per bare batch
    worker_round_medians: tuple[float, ...] = ()  # each round's median worker batch
    restores: int = 0  # times the phase put its expired rows back between rounds


@dataclass(frozen=True, slots=True)
class GrowthPoint:
    slots: int
    load_seconds: float
    table_mib: float
    indexes_mib: float
    clean: PhaseTiming
    expired_wave: int  # rows expired in one statement before the dead-tuple phase
    first_batch_after_wave_ms: float  # the worker's first batch after it
    dead: PhaseTiming  # the batches after that first one
    vacuumed: PhaseTiming


@dataclass(frozen=True, slots=True)
class Growth:
    dead_share: float
    points: tuple[GrowthPoint, ...]

    @property
    def largest_vs_smallest(self) -> float | None:
        """Worker batch median on the largest table / on the smallest, both clean."""
        if len(self.points) < 2:
            return None
        return ratio(self.points[-1].clean.worker.median, self.points[0].clean.worker.median)

    @property
    def round_ratios(self) -> Spread | None:
        """Each round's median worker batch on the largest table / on the smallest, clean."""
        if len(self.points) < 2:
            return None
        largest, smallest = self.points[-1].clean, self.points[0].clean
        pairs = zip(largest.worker_round_medians, smallest.worker_round_medians, strict=False)
        return Spread.of([ratio(a, b) for a, b in pairs])


@dataclass(slots=True)
class DueRows:
    """Due rows left on the table, and how many there are once the phase's batches' rows
    are put back (the wave's stay expired)."""

    left: int
    restored: int
    restores: int = 0


async def measure_growth(ctx: BenchContext) -> Growth:
    growth = ctx.plan.growth
    return Growth(growth.dead_share, tuple([await _point(ctx, size) for size in growth.sizes]))


async def _point(ctx: BenchContext, slots: int) -> GrowthPoint:
    store, growth = ctx.store, ctx.plan.growth
    ctx.progress(f"e. loading {slots:,} slots")
    loaded = await load_table(store, growth.shape(slots, ctx.plan.batch_size), ctx.as_of)
    await store.autovacuum(enabled=False)
    rows = DueRows(left=loaded.due, restored=loaded.due)
    try:
        ctx.progress(f"e. {slots:,} slots: clean")
        clean = await timed_phase(ctx, rows, vacuum=True)
        wave = await _wave(ctx, rows, round(slots * growth.dead_share))
        await store.analyze()
        await store.checkpoint()
        ctx.progress(f"e. {slots:,} slots: {wave:,} rows just expired, not vacuumed")
        first, dead = await _dead_phase(ctx, rows)
        for statement in ("expire_batch", "bench_bare_batch"):
            await ctx.explain(f"{slots:,} slots, {wave:,} just expired, not vacuumed", statement)
        await store.vacuum_analyze()
        await store.checkpoint()
        ctx.progress(f"e. {slots:,} slots: vacuumed")
        vacuumed = await timed_phase(ctx, rows, vacuum=True)
        for statement in ("expire_batch", "bench_bare_batch"):
            await ctx.explain(f"{slots:,} slots, after VACUUM", statement)
    finally:
        await store.autovacuum(enabled=True)
    return GrowthPoint(
        slots=slots,
        load_seconds=loaded.load_seconds,
        table_mib=loaded.stats.table_bytes / _MIB,
        indexes_mib=loaded.stats.index_bytes / _MIB,
        clean=clean,
        expired_wave=wave,
        first_batch_after_wave_ms=first,
        dead=dead,
        vacuumed=vacuumed,
    )


async def _wave(ctx: BenchContext, rows: DueRows, count: int) -> int:
    """Expire `count` rows in one statement, after putting back the clean phase's rows if
    too few would be left for a round. Stamped before AsOf, the wave stays expired when a
    phase puts its rows back."""
    if rows.left < count + ctx.plan.growth.round_rows(ctx.plan.batch_size) + ctx.plan.batch_size:
        await _put_back(ctx, rows, vacuum=True)
    stamp = ctx.as_of - timedelta(seconds=1)
    wave = await ctx.store.expire_oldest(ctx.as_of, count, stamp)
    rows.left -= wave
    rows.restored -= wave
    return wave


async def _dead_phase(ctx: BenchContext, rows: DueRows) -> tuple[float, PhaseTiming]:
    """The phase after the wave; its first worker batch set apart."""
    restores = rows.restores
    recorder, bare_ms, medians = await _rounds(ctx, rows, vacuum=False)
    first, *rest = recorder.batch_ms()
    per_round = ctx.plan.growth.batches
    if per_round > 1:  # the first round's median without its first batch
        medians[0] = statistics.median(rest[: per_round - 1])
    timing = PhaseTiming(
        Distribution.of(rest or [first]),
        Distribution.of(bare_ms),
        tuple(medians),
        rows.restores - restores,
    )
    return first, timing


async def timed_phase(ctx: BenchContext, rows: DueRows, *, vacuum: bool) -> PhaseTiming:
    restores = rows.restores
    recorder, bare_ms, medians = await _rounds(ctx, rows, vacuum=vacuum)
    return PhaseTiming(
        Distribution.of(recorder.batch_ms()),
        Distribution.of(bare_ms),
        tuple(medians),
        rows.restores - restores,
    )


async def _rounds(
    ctx: BenchContext, rows: DueRows, *, vacuum: bool
) -> tuple[BatchRecorder, list[float], list[float]]:
    """The phase's rounds, the rows put back first whenever the next round would run out
    (one batch more is kept for the plans read after the phase)."""
    growth, size = ctx.plan.growth, ctx.plan.batch_size
    need = growth.round_rows(size) + size
    recorder, bare_ms, medians = BatchRecorder(), [], []
    for number in range(growth.rounds):
        if rows.left < need:
            await _put_back(ctx, rows, vacuum=vacuum)
        round_recorder, round_bare = await alternate(ctx, 1, growth.batches, first=number)
        recorder.batches += round_recorder.batches
        recorder.cycles += round_recorder.cycles
        bare_ms += round_bare
        medians.append(statistics.median(round_recorder.batch_ms()))
        rows.left -= growth.round_rows(size)
    return recorder, bare_ms, medians


async def _put_back(ctx: BenchContext, rows: DueRows, *, vacuum: bool) -> None:
    if vacuum:
        await restore_backlog(ctx.store, ctx.as_of)
    else:
        await ctx.store.reset_backlog(ctx.as_of)
        await ctx.store.checkpoint()
    rows.left = rows.restored
    rows.restores += 1
