"""The honest scripted agent: cue weights fitted on training events only, written rationale, rounded forecasts."""

from __future__ import annotations

import json
import math

import pytest

from forecast_dojo.agents.honest import (
    NO_CUE,
    CueModel,
    HonestEvidenceAgent,
    Reading,
    cue_signature,
    fit_cue_model,
    fit_from_readings,
    round_distribution,
)
from forecast_dojo.agents.scripted import CUE_WEIGHTS
from forecast_dojo.evaluation.runner import run_episodes


def test_cue_signature_uses_the_generic_vocabulary():
    assert cue_signature("Officials with direct knowledge confirmed that X will win.") == "confirm+officials"
    assert cue_signature("Unconfirmed rumours suggest X.") == "rumour+unconfirmed"
    assert cue_signature("X will win.") == NO_CUE


def test_fit_recovers_a_known_likelihood_ratio():
    # binary: a signature right 90 times out of 100 -> LR near 9; K = 3 right 60 of 100 -> LR = q (K-1) / (1-q) = 3
    readings = [Reading(f"b{i}", "d", 0 if i < 90 else 1, "strong", 2) for i in range(100)]
    readings += [Reading(f"t{i}", "d", 0 if i < 60 else 1, "moderate", 3) for i in range(100)]
    readings += [Reading("b0", "d", 1, "strong", 2)]  # the same (event, doc) again: counted once
    readings += [Reading(f"r{i}", "d", 0, "rare", 2) for i in range(3)]
    outcomes = (
        {f"b{i}": 0 for i in range(100)} | {f"t{i}": 0 for i in range(100)} | {f"r{i}": 0 for i in range(3)}
    )
    model = fit_from_readings(readings, outcomes, {'["Yes", "No"]': [60, 40]})
    assert math.exp(model.llr["strong"]) == pytest.approx(9.0, rel=0.15)
    assert math.exp(model.llr["moderate"]) == pytest.approx(3.0, rel=0.2)
    assert "rare" not in model.llr  # fewer than min_count readings: no weight
    assert model.counts["strong"][2] == [90, 100]
    assert model.prior_for(["Yes", "No"]) == pytest.approx([62 / 104, 42 / 104])
    assert model.prior_for(["No", "Yes"]) == [0.5, 0.5]
    assert model.prior_for(["A", "B", "C"]) == pytest.approx([1 / 3] * 3)
    assert CueModel.from_json(model.to_json()) == model


def test_round_distribution():
    assert round_distribution([0.996, 0.004]) == [0.99, 0.01]
    assert round_distribution([1 / 3] * 3) == [0.34, 0.33, 0.33]
    assert sum(round_distribution([0.123, 0.456, 0.421])) == pytest.approx(1.0)


def test_honest_agent_learns_from_training_events_and_writes_its_reasoning(make_synthetic_env):
    env = make_synthetic_env()
    ids = sorted(e.id for e in env.events)
    train, test = ids[0::2], ids[1::2]
    model = fit_cue_model(env, train)
    assert model.n_events == len(train) and model.llr
    # learned, not copied: the generator's tiers are 1.5 / 3 / 9; no learned weight is exactly one of them
    copied = {round(math.log(ratio), 6) for _, ratio, _ in CUE_WEIGHTS}
    assert not copied & {round(v, 6) for v in model.llr.values()}
    honest = run_episodes(env, lambda: HonestEvidenceAgent(model), test, progress=False)
    uniform = [
        -sum((1 / len(r["forecast"]) - (k == r["outcome_index"])) ** 2 for k in range(len(r["forecast"])))
        for r in honest
    ]
    assert sum(r["score_brier"] for r in honest) > sum(uniform) + 0.1 * len(honest)  # clearly beats uniform
    assert all(r["valid"] for r in honest)
    assert all(abs(p - round(p, 2)) < 1e-9 for r in honest for p in r["forecast"])  # env renormalizes 1 ulp
    # the submission turn states the evidence and the arithmetic
    agent = HonestEvidenceAgent(model)
    observation, _ = env.reset(test[0])
    while True:
        action = agent.act(observation)
        observation, _, _, _, info = env.step(action)
        if info["step_ended"]:
            break
    assert action["content"].startswith("Prior (training events)") and "Forecast:" in action["content"]
    assert len(action["content"]) < 600  # a few short sentences: a small student imitates them cheaply
    arguments = json.loads(action["tool_calls"][0]["function"]["arguments"])
    assert arguments["rationale"].startswith("prior times the likelihood ratios of")  # not the text twice
