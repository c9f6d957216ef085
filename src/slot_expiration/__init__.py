"""slot-expiration: moves past, unclaimed availability slots to Expired."""

__version__ = "0.1.0"
