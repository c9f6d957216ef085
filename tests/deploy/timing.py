"""How long a graceful stop of `slot-expiration run` may take at worst, from the worker's own
defaults: what a termination grace period (Kubernetes) or TimeoutStopSec (systemd) must exceed."""

from __future__ import annotations

import math

from opentelemetry.exporter.otlp.proto.http.trace_exporter import DEFAULT_TIMEOUT

from slot_expiration.history.sink import DRAIN_TIMEOUT_SECONDS
from slot_expiration.options import WorkerOptions


def worst_graceful_stop_seconds() -> int:
    """--shutdown-grace-seconds + --max-cycle-seconds + the last cycle's history row + the
    OTLP exporter's flush timeout (OTEL_EXPORTER_OTLP_TIMEOUT): 10 + 30 + 6 + 10 = 56 with
    the defaults."""
    fields = WorkerOptions.model_fields
    grace = float(fields["shutdown_grace_seconds"].default)
    budget = float(fields["max_cycle_seconds"].default)
    return math.ceil(grace + budget + DRAIN_TIMEOUT_SECONDS + DEFAULT_TIMEOUT)
