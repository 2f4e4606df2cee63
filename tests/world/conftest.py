"""World-mode fixtures: envs over the default synthetic world (hashing embedder, python off)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def make_world_env(synthetic_cache: Path, monkeypatch: pytest.MonkeyPatch):
    """Factory for world envs over the synthetic world (all 40 events unless ``split`` says otherwise)."""
    from forecast_dojo.world import make_world

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))

    def make(**kwargs):
        kwargs.setdefault("python_runner", None)
        kwargs.setdefault("split", "all")
        return make_world("Synthetic-v0", embedder="hashing", **kwargs)

    return make


@pytest.fixture
def synthetic_world():
    """The generator's in-memory world (seed 0), for the oracle."""
    from forecast_dojo.synthetic import generate_world

    return generate_world(0)
