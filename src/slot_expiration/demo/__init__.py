"""The demo command: a private database, seeded, and the worker running on it."""

from slot_expiration.demo.runner import DemoPlan, run_demo
from slot_expiration.demo.seed import DemoMix, demo_slots

__all__ = ["DemoMix", "DemoPlan", "demo_slots", "run_demo"]
