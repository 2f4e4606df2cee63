"""Default locations: the real shared data and the cache (one definition for every command and test).

The data folder is ``$FORECAST_DOJO_DATA`` when set; otherwise ``../shared/data`` relative to the
working directory (run commands from the repository root, whose sibling ``shared/data`` holds the
data); in a source checkout, ``shared/data`` beside the checkout is also found from any directory.
A wheel install has no checkout, so only the variable and the working directory count there (the
folder beside ``site-packages`` never does).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "FORECAST_DOJO_DATA"
CACHE_ENV = "FORECAST_DOJO_CACHE"


def cache_root() -> Path:
    """Where derived files are cached (worlds, distilled models, tool schemas): ``$FORECAST_DOJO_CACHE`` or ``~/.cache/forecast_dojo``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "forecast_dojo"


def _source_checkout() -> Path | None:
    """The repository this package runs from (an editable or in-place install), None for a wheel install."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "forecast_dojo").is_dir() else None


def data_root_candidates() -> list[Path]:
    """Where the data is looked for when ``$FORECAST_DOJO_DATA`` is unset, in order (absolute paths)."""
    candidates = [Path.cwd().parent / "shared" / "data"]
    checkout = _source_checkout()
    if checkout is not None:
        beside = checkout.parent / "shared" / "data"
        if beside not in candidates:
            candidates.append(beside)
    return candidates


def default_data_root() -> Path:
    """Where the shared real data lives: ``$FORECAST_DOJO_DATA``, else the first existing candidate.

    The candidates are ``../shared/data`` from the working directory, then (in a source checkout)
    ``shared/data`` beside the repository; when none exists, the first (see :func:`missing_data_message`).
    """
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    candidates = data_root_candidates()
    return next((path for path in candidates if path.is_dir()), candidates[0])


def missing_data_message(path: Path) -> str:
    """What to say when the default data folder (or a folder in it) ``path`` does not exist."""
    if os.environ.get(DATA_ENV):
        where = f"${DATA_ENV} is {os.environ[DATA_ENV]!r}"
    else:
        looked = ", ".join(str(p) for p in data_root_candidates())
        where = f"${DATA_ENV} is unset and no data folder was found at {looked} (../shared/data from the working directory)"
    return f"{path} not found: {where}; set {DATA_ENV}=/path/to/shared/data or pass the folder explicitly"
