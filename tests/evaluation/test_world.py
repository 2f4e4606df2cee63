"""World-mode summaries: time-averaged skill per question, curves per day, coverage, regret."""

from __future__ import annotations

import math

import pytest

from forecast_dojo.evaluation.world import render_world_table, summarize_world


def test_means_are_within_question_then_across_questions():
    scores = {"a": {"d1": 1.0, "d2": 0.0, "d3": 0.5}, "b": {"d2": -1.0}}
    covered = {"a": {"d1": 1.0, "d2": 1.0, "d3": 1.0}, "b": {"d2": 0.0}}
    oracle = {"a": {"d1": 1.0, "d2": 1.0, "d3": 1.0}, "b": {"d2": 0.5}}
    s = summarize_world(scores, covered=covered, oracle=oracle, n_boot=200)
    assert s["questions"] == 2 and s["question_days"] == 4
    assert s["skill"][0] == pytest.approx((0.5 + -1.0) / 2)  # a's mean 0.5, b's -1
    assert s["coverage"][0] == pytest.approx(0.5)
    assert s["regret"][0] == pytest.approx(((0 + 1 + 0.5) / 3 + 1.5) / 2)
    assert [r["day"] for r in s["per_day"]] == ["d1", "d2", "d3"]
    low, high = s["per_day"][1].pop("skill_ci")  # over the day's two open questions (0 and -1)
    assert -1.0 <= low <= -0.5 <= high <= 0.0 and low < high
    assert s["per_day"][1] == {
        "day": "d2", "open": 2, "skill": -0.5, "accuracy": None, "coverage": 0.5, "updates": None, "tool_calls": None,
        "tokens": None,
    }  # fmt: skip
    assert all(math.isnan(v) for v in s["per_day"][0]["skill_ci"])  # one open question: no interval
    assert "skill" in render_world_table({"x": s}) and "-0.250" in render_world_table({"x": s})
