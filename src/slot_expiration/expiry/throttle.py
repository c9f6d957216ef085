"""A drain the calendar never feels: before each batch after a drain's first, whether and how
long to wait, from the calendar's own signals.

- **Replica lag.** A drain writes WAL (some 640 kB per 500 rows); a streaming standby that
  falls behind (or whose replay is paused for a report) would fall further behind while the
  drain goes on at full speed, and a failover to it would undo that much. Before each batch
  the worker reads pg_stat_replication (at most every REPLICA_POLL_SECONDS: a drain of
  quick batches shares a reading); while any streaming standby is further behind than
  --max-replica-lag-seconds, the drain waits, reading it again every REPLICA_POLL_SECONDS,
  and says so. PostgreSQL's own `replay_lag` goes stale while a standby's replay
  is paused (it is the lag of the last record replayed), so ReplicaWatch keeps its own lag
  tracker, as the walsender does: when the primary's WAL passed each position the worker
  saw; a standby's lag is how long ago the primary's WAL went past where its replay stands.
  The larger of the two is its lag.
- **Nice ratio.** After a batch of t seconds the drain rests --drain-nice-ratio times t: a
  slower batch (a busier database) rests longer, a share of the database left to the
  bookings whatever the load (pt-archiver's --sleep-coef, gh-ost's nice ratio).

- **The database's load as the drain sees it.** With no privilege at all: each batch's time
  per row against the fastest of the drain's recent batches (its unloaded baseline). A batch
  more than --drain-max-slowdown times slower says the database is busy with other work (the
  bookings, a report, a vacuum); the drain then rests (slowdown - 1) times the batch's time,
  so that it works at most 1/slowdown of the time while the database stays that busy.

Each wait is an event (DrainThrottled: why, how long, the lag), for the logs and the
metrics, and the time a cycle waited counts in its result (`throttled_seconds`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

# How often a drain held back by a standby reads pg_stat_replication again; a reading
# within the limit also serves the batches that start within this long of it.
REPLICA_POLL_SECONDS: Final = 0.25


class ThrottleReason(StrEnum):
    """Why a drain waited before its next batch (the metric's label, the log's reason)."""

    REPLICA_LAG = "replica_lag"  # a streaming standby further behind than allowed
    NICE = "nice"  # the rest after each batch, in proportion to its time
    LOAD = "load"  # a batch slower than its recent baseline by more than allowed


class StandbysUnseen(StrEnum):
    """Why a drain could not judge the standbys' lag (it goes on, and says so once)."""

    NOT_GRANTED = "not_granted"  # the role may not run slot_expiration_standbys(): grant
    OWNER_BLIND = "owner_blind"  # its owner cannot see their positions: pg_read_all_stats


@dataclass(frozen=True, slots=True)
class Standby:
    """One streaming standby as pg_stat_replication shows it (expiry.sql, replica_lag):
    where the primary's WAL is and where the standby's replay is, in bytes; its own
    `replay_lag`. None where the function's owner may not see them (pg_read_all_stats)."""

    name: str
    wal_bytes: int
    replay_bytes: int | None
    replay_lag_seconds: float | None

    @property
    def visible(self) -> bool:
        return self.replay_bytes is not None

    @property
    def caught_up(self) -> bool:
        return self.replay_bytes is not None and self.replay_bytes >= self.wal_bytes


# Samples of the primary's WAL position a watch keeps at most (some 40 minutes of a
# stalled standby polled every REPLICA_POLL_SECONDS); past it the oldest go, and a lag
# older than the oldest kept is read as at least that old.
MAX_SAMPLES: Final = 10_000


@dataclass(slots=True)
class ReplicaWatch:
    """Each standby's lag, from the primary's WAL positions seen over time (kept across
    batches and cycles): how long ago the primary's WAL went past the position where the
    standby's replay stands, or its own `replay_lag` if larger."""

    # (monotonic seconds, the primary's WAL position then), oldest first.
    _samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))

    def lag_seconds(self, standbys: Sequence[Standby], now: float) -> float | None:
        """The largest lag of the standbys (0.0: none behind, or none at all); None when
        the role cannot see where their replay is."""
        if not standbys:
            self._samples.clear()
            return 0.0
        if any(not standby.visible for standby in standbys):
            return None
        wal = max(standby.wal_bytes for standby in standbys)
        if not self._samples or self._samples[-1][1] != wal:
            self._samples.append((now, wal))
        lag = max(self._lag_of(standby, now) for standby in standbys)
        self._forget_replayed(min(s.replay_bytes or 0 for s in standbys))
        return lag

    def _lag_of(self, standby: Standby, now: float) -> float:
        if standby.caught_up or standby.replay_bytes is None:
            return 0.0
        # The first time the primary's WAL was seen past the standby's replay: what it
        # has not replayed was written by then (a lower bound of its lag).
        passed = next(t for t, wal in self._samples if wal > standby.replay_bytes)
        return max(standby.replay_lag_seconds or 0.0, now - passed)

    def _forget_replayed(self, replayed: int) -> None:
        """Drop the samples every standby has replayed past, but the last of them."""
        while len(self._samples) > 1 and self._samples[1][1] <= replayed:
            self._samples.popleft()


def nice_rest_seconds(batch_seconds: float, ratio: float) -> float:
    """The rest after a batch of `batch_seconds`: `ratio` times as long."""
    return max(batch_seconds, 0.0) * ratio


# How many of the drain's recent batches its baseline is the fastest of (kept across cycles).
BASELINE_BATCHES: Final = 50
# A slowdown past this counts as this much: one batch stalled by a lock for seconds must
# not rest the drain for minutes.
MAX_COUNTED_SLOWDOWN: Final = 10.0


@dataclass(slots=True)
class LatencyWatch:
    """A drain's batch latency against its recent baseline: the fastest time per row of
    its last BASELINE_BATCHES batches."""

    _per_row: deque[float] = field(default_factory=lambda: deque(maxlen=BASELINE_BATCHES))

    def rest_seconds(self, batch_seconds: float, rows: int, max_slowdown: float) -> float:
        """The rest after a batch of `rows` rows that took `batch_seconds`: none while it is
        at most `max_slowdown` times slower per row than the baseline (0: never rest),
        else (slowdown - 1) times the batch's time."""
        if max_slowdown <= 0 or rows <= 0 or batch_seconds <= 0:
            return 0.0
        per_row = batch_seconds / rows
        baseline = min(self._per_row, default=None)
        self._per_row.append(per_row)
        if baseline is None or per_row <= baseline * max_slowdown:
            return 0.0
        slowdown = min(per_row / baseline, MAX_COUNTED_SLOWDOWN)
        return batch_seconds * (slowdown - 1.0)
