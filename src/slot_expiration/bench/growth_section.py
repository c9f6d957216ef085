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
"""

from __future__ import annotations

from dataclasses import dataclass

from slot_expiration.bench.batch_section import alternate
from slot_expiration.bench.context import BenchContext
from slot_expiration.bench.dataset import load_table
from slot_expiration.bench.stats import Distribution, ratio

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    worker: Distribution  # ms per worker batch
    bare: Distribution  # ms per bare batch


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


async def measure_growth(ctx: BenchContext) -> Growth:
    growth = ctx.plan.growth
    return Growth(growth.dead_share, tuple([await _point(ctx, size) for size in growth.sizes]))


async def _point(ctx: BenchContext, slots: int) -> GrowthPoint:
    store, growth = ctx.store, ctx.plan.growth
    ctx.progress(f"e. loading {slots:,} slots")
    loaded = await load_table(store, growth.shape(slots, ctx.plan.batch_size), ctx.as_of)
    await store.autovacuum(enabled=False)
    try:
        ctx.progress(f"e. {slots:,} slots: clean")
        clean = await _phase(ctx)
        wave = await store.expire_oldest(ctx.as_of, round(slots * growth.dead_share))
        await store.analyze()
        await store.checkpoint()
        ctx.progress(f"e. {slots:,} slots: {wave:,} rows just expired, not vacuumed")
        recorder, bare_ms = await alternate(ctx, growth.rounds, growth.batches)
        first, *rest = recorder.batch_ms()
        dead = PhaseTiming(Distribution.of(rest or [first]), Distribution.of(bare_ms))
        for statement in ("expire_batch", "bench_bare_batch"):
            await ctx.explain(f"{slots:,} slots, {wave:,} just expired, not vacuumed", statement)
        await store.vacuum_analyze()
        await store.checkpoint()
        ctx.progress(f"e. {slots:,} slots: vacuumed")
        vacuumed = await _phase(ctx)
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


async def _phase(ctx: BenchContext) -> PhaseTiming:
    recorder, bare_ms = await alternate(ctx, ctx.plan.growth.rounds, ctx.plan.growth.batches)
    return PhaseTiming(Distribution.of(recorder.batch_ms()), Distribution.of(bare_ms))
