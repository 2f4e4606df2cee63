"""forecast-dojo: replayable RL environments for LLM forecasting agents.

Importing the package registers a gymnasium id ``forecast_dojo/<name>`` for every shipped spec (the
repository's ``envs/``, ``forecast_dojo/envs/`` in a wheel: ``Synthetic-v0``, ``SyntheticNotebook-v0``,
``ForecastBench-WCE-v0``) and
for every spec in the folders listed in ``FORECAST_DOJO_ENVS`` (``os.pathsep``-separated).
``forecast_dojo.make(name_or_spec, **overrides)`` builds the same envs without gymnasium's wrappers.
"""

from __future__ import annotations

from forecast_dojo._version import __version__
from forecast_dojo.errors import ForecastDojoError
from forecast_dojo.registration import DojoSpec, make, register, register_specs

register_specs()

from forecast_dojo.world.registration import register_world_envs  # noqa: E402

register_world_envs()  # forecast_dojo/SyntheticSim-v0 and forecast_dojo/ForecastBench-WCE-Sim-v0

from forecast_dojo.env import ForecastDojoEnv  # noqa: E402
from forecast_dojo.records import StepRecord  # noqa: E402
from forecast_dojo.schema import Document, Event, MarketPoint, load_events, save_events  # noqa: E402

__all__ = [
    "Document",
    "DojoSpec",
    "Event",
    "ForecastDojoEnv",
    "ForecastDojoError",
    "MarketPoint",
    "StepRecord",
    "__version__",
    "load_events",
    "make",
    "register",
    "save_events",
]
