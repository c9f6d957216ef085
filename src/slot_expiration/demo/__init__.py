"""The demo command: a private database, seeded, and the worker running on it."""

from slot_expiration.demo.runner import DemoPlan, run_demo
from slot_expiration.demo.seed import DemoMix, DemoSlot, demo_slots, publications

__all__ = ["DemoMix", "DemoPlan", "DemoSlot", "demo_slots", "publications", "run_demo"]
