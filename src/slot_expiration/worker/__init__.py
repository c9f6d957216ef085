"""The worker as the commands run it: options wired to store, cycle, loop and hooks."""

from slot_expiration.worker.assembly import (
    CycleCutShortError,
    build_cycle,
    build_loop,
    check_ready,
    cycle_limits,
    run_once,
    run_worker,
    store_factory,
    transaction_limits,
)

__all__ = [
    "CycleCutShortError",
    "build_cycle",
    "build_loop",
    "check_ready",
    "cycle_limits",
    "run_once",
    "run_worker",
    "store_factory",
    "transaction_limits",
]
