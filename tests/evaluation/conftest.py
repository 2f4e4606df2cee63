"""Fixtures of the evaluation tests: a log of the compact honest teacher."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def teacher_steps(make_synthetic_env, tmp_path: Path) -> Path:
    """The compact honest teacher on three held-out events, memory-free; returns its log directory."""
    from forecast_dojo.agents.honest import HonestEvidenceAgent, fit_cue_model
    from forecast_dojo.evaluation.runner import run_episode

    fitting = make_synthetic_env(prompt="compact")  # fitting plays the training events: not in the log
    ids = sorted(e.id for e in fitting.events)
    agent = HonestEvidenceAgent(fit_cue_model(fitting, ids[0::2]), compact=True)
    fitting.close()
    log = tmp_path / "teacher"
    env = make_synthetic_env(prompt="compact", log_dir=log, run_metadata={"agent": "honest"})
    for event_id in ids[1:6:2]:
        run_episode(env, agent, event_id)
    env.close()
    return log
