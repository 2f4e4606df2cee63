"""forecast-dojo: replayable RL environments for LLM forecasting agents.

Importing the package registers the gymnasium ids ``forecast_dojo/Synthetic-v0`` (the embedded
synthetic world) and ``forecast_dojo/<name>`` for every spec in the repository's ``envs/`` folder
and in the folders listed in ``FORECAST_DOJO_ENVS`` (``os.pathsep``-separated).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

__version__ = "0.1.0"

ENVS_DIR = Path(__file__).resolve().parent.parent / "envs"


def _register() -> None:
    import gymnasium as gym

    if "forecast_dojo/Synthetic-v0" not in gym.registry:
        gym.register("forecast_dojo/Synthetic-v0", entry_point="forecast_dojo.spec:make_synthetic_env")
    folders = [ENVS_DIR] + [Path(p) for p in os.environ.get("FORECAST_DOJO_ENVS", "").split(os.pathsep) if p]
    for folder in folders:
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
            try:
                name = tomllib.loads(path.read_text()).get("name")
            except tomllib.TOMLDecodeError:
                continue  # reported with a clear error when someone makes it
            env_id = f"forecast_dojo/{name}"
            if name and env_id not in gym.registry:
                gym.register(
                    env_id,
                    entry_point="forecast_dojo.spec:make_from_spec_file",
                    kwargs={"spec_path": str(path)},
                )


_register()

from forecast_dojo.env import ForecastDojoEnv  # noqa: E402
from forecast_dojo.schema import Document, Event, MarketPoint, load_events, save_events  # noqa: E402

__all__ = ["Document", "Event", "ForecastDojoEnv", "MarketPoint", "__version__", "load_events", "save_events"]
