"""A drain the calendar never feels: before each batch after a drain's first, whether and how
long to wait, from the calendar's own signals.

- **Replica lag.** A drain writes WAL (some 640 kB per 500 rows); a streaming standby that
  falls behind (or whose replay is paused for a report) would fall further behind while the
  drain goes on at full speed, and a failover to it would undo that much. Before each batch
  the worker reads pg_stat_replication; while any streaming standby is further behind than
  --max-replica-lag-seconds, the drain waits, reading it again every REPLICA_POLL_SECONDS,
  and says so. PostgreSQL's own `replay_lag` goes stale while a standby's replay is paused
  (it is the lag of the last record replayed), so ReplicaWatch also times how long a
  standby's `replay_lsn` has stood still behind the primary's WAL: the larger of the two is
  its lag.
- **Nice ratio.** After a batch of t seconds the drain rests --drain-nice-ratio times t: a
  slower batch (a busier database) rests longer, a share of the database left to the
  bookings whatever the load (pt-archiver's --sleep-coef, gh-ost's nice ratio).

Each wait is an event (DrainThrottled: why, how long, the lag), for the logs and the
metrics, and the time a cycle waited counts in its result (`throttled_seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

# How often a drain held back by a standby reads pg_stat_replication again.
REPLICA_POLL_SECONDS: Final = 0.25


class ThrottleReason(StrEnum):
    """Why a drain waited before its next batch (the metric's label, the log's reason)."""

    REPLICA_LAG = "replica_lag"  # a streaming standby further behind than allowed
    NICE = "nice"  # the rest after each batch, in proportion to its time


@dataclass(frozen=True, slots=True)
class Standby:
    """One streaming standby as pg_stat_replication shows it (expiry.sql, replica_lag):
    where the primary's WAL is and where the standby's replay is, in bytes; its own
    `replay_lag`. None where the role may not see it (pg_read_all_stats)."""

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


@dataclass(slots=True)
class ReplicaWatch:
    """Each standby's lag, from what pg_stat_replication showed over time: its own
    `replay_lag`, or, where its replay stands still behind the primary's WAL, how long it
    has stood still (`replay_lag` is stale then). Kept across batches and cycles."""

    # standby -> (the replay position seen standing still, since when: monotonic seconds)
    _still: dict[str, tuple[int, float]] = field(default_factory=dict)

    def lag_seconds(self, standbys: Sequence[Standby], now: float) -> float | None:
        """The largest lag of the standbys (0.0: none behind, or none at all); None when
        the role cannot see where their replay is."""
        if any(not standby.visible for standby in standbys):
            return None
        lags = [self._lag_of(standby, now) for standby in standbys]
        names = {standby.name for standby in standbys}
        self._still = {name: seen for name, seen in self._still.items() if name in names}
        return max(lags, default=0.0)

    def _lag_of(self, standby: Standby, now: float) -> float:
        if standby.caught_up or standby.replay_bytes is None:
            self._still.pop(standby.name, None)
            return 0.0
        seen = self._still.get(standby.name)
        if seen is None or seen[0] != standby.replay_bytes:  # its replay moved on
            self._still[standby.name] = (standby.replay_bytes, now)
            return standby.replay_lag_seconds or 0.0
        return max(standby.replay_lag_seconds or 0.0, now - seen[1])


def nice_rest_seconds(batch_seconds: float, ratio: float) -> float:
    """The rest after a batch of `batch_seconds`: `ratio` times as long."""
    return max(batch_seconds, 0.0) * ratio
