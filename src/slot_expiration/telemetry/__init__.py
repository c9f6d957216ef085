"""Telemetry recorded around the cycle through hooks."""

from slot_expiration.telemetry.hooks import CycleHooks, FanOutHooks, NoHooks
from slot_expiration.telemetry.logs import Event, LogHooks, configure_logging

__all__ = ["CycleHooks", "Event", "FanOutHooks", "LogHooks", "NoHooks", "configure_logging"]
