"""The worker as the commands run it: options wired to store, cycle, loop and sinks."""

from slot_expiration.worker.assembly import (
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
    "build_cycle",
    "build_loop",
    "check_ready",
    "cycle_limits",
    "run_once",
    "run_worker",
    "store_factory",
    "transaction_limits",
]
