"""Default locations: the real shared data (one definition for every command and test)."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "FORECAST_DOJO_DATA"


def default_data_root() -> Path:
    """Where the shared real data lives: ``$FORECAST_DOJO_DATA``, else ``../shared/data`` beside the repository."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"
