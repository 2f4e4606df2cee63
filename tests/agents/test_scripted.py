"""Scripted agents complete whole episodes in both memory modes and beat the no-skill floor."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents import EvidenceAgent, UniformAgent
from forecast_dojo.evaluation.runner import run_episode, run_episodes


@pytest.mark.parametrize("memory", ["none", "notebook"])
def test_evidence_agent_completes_every_step_validly(make_synthetic_env, memory):
    env = make_synthetic_env(memory=memory)
    events = sorted(env.events, key=lambda e: e.id)[:6]
    for event in events:
        rows = run_episode(env, EvidenceAgent(), event.id)
        assert [r["step"] for r in rows] == list(range(event.n_steps))
        assert all(r["valid"] for r in rows)
        expected_flags = [] if memory == "none" else []
        assert all(r["flags"] == expected_flags for r in rows)


def test_notebook_agent_reuses_its_notebook(make_synthetic_env, tmp_path):
    env = make_synthetic_env(memory="notebook", log_dir=tmp_path)
    event = sorted(env.events, key=lambda e: e.id)[0]
    run_episode(env, EvidenceAgent(), event.id)
    env.close()
    records = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert records[0]["notebook_in"] is None
    for before, after in zip(records, records[1:], strict=False):
        assert after["notebook_in"] == before["notebook_out"]


def test_evidence_agent_beats_uniform(make_synthetic_env):
    env = make_synthetic_env()
    ids = [e.id for e in sorted(env.events, key=lambda e: e.id)]
    evidence = run_episodes(env, EvidenceAgent, ids, progress=False)
    uniform = run_episodes(env, UniformAgent, ids, progress=False)
    mean = lambda rows: sum(r["score_brier"] for r in rows) / len(rows)  # noqa: E731
    assert len(evidence) == len(uniform) > 100
    assert mean(evidence) > mean(uniform) + 0.03
