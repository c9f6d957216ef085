"""Telemetry recorded from the cycle's and the loop's events: each sink a callable."""

from slot_expiration.telemetry.logs import LogEvent, LogSink, configure_logging

__all__ = ["LogEvent", "LogSink", "configure_logging"]
