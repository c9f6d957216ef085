"""slot-expiration: moves past, unclaimed availability slots to Expired."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One version number, pyproject.toml's, read from the installed package's metadata.
    __version__ = version("slot-expiration")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
