"""The package's one base error: every error class of forecast_dojo derives from :class:`ForecastDojoError`.

Each concrete error also keeps the built-in base it always had (``ValueError``, ``RuntimeError``,
``AssertionError``), so existing ``except`` clauses keep working; a command-line front end catches
``ForecastDojoError`` alone.
"""

from __future__ import annotations


class ForecastDojoError(Exception):
    """Base of every error this library raises on purpose (bad input, data, configuration or leakage)."""
