"""The package version, read from the installed distribution's metadata (one source: pyproject.toml)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("forecast-dojo")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
