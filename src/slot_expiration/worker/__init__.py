"""The worker as the commands run it: options wired to store, cycle, loop and hooks."""

from slot_expiration.worker.assembly import (
    build_cycle,
    build_loop,
    check_ready,
    cycle_limits,
    run_once,
    run_worker,
    session_limits,
    store_factory,
)

__all__ = [
    "build_cycle",
    "build_loop",
    "check_ready",
    "cycle_limits",
    "run_once",
    "run_worker",
    "session_limits",
    "store_factory",
]
