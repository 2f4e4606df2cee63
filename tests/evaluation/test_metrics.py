"""Summaries and paired comparisons against hand-computed values."""

import pytest

from forecast_dojo.evaluation.metrics import format_table, paired_difference, summarize
from forecast_dojo.evaluation.runner import baseline_rows
from tests.conftest import tiny_events


def row(agent, memory, event_id, step, brier, valid=True):
    return {
        "agent": agent,
        "memory": memory,
        "event_id": event_id,
        "step": step,
        "valid": valid,
        "score_brier": brier,
        "score_log": 0.0,
        "score_spherical": 1.0,
    }


def test_summary_means_are_step_weighted_and_deterministic():
    rows = [
        row("a", "none", "e1", 0, -0.2),
        row("a", "none", "e1", 1, -0.4),
        row("a", "none", "e2", 0, -0.9, valid=False),
    ]
    table = summarize(rows)
    assert table[0]["brier"] == pytest.approx(-0.5) and table[0]["steps"] == 3 and table[0]["events"] == 2
    assert table[0]["invalid"] == pytest.approx(1 / 3)
    low, high = table[0]["brier_ci"]
    assert low <= -0.5 <= high and summarize(rows) == table
    assert "brier" in format_table(table)


def test_paired_difference_matches_steps():
    rows = [
        row("a", "notebook", "e1", 0, -0.1),
        row("a", "none", "e1", 0, -0.3),
        row("a", "notebook", "e2", 0, -0.5),
        row("a", "none", "e2", 0, -0.4),
        row("a", "none", "e3", 0, -1.0),
    ]
    result = paired_difference(rows, ("a", "notebook"), ("a", "none"))
    assert result["steps"] == 2 and result["mean"] == pytest.approx((0.2 - 0.1) / 2)
    with pytest.raises(ValueError):
        paired_difference(rows, ("b", "none"), ("a", "none"))


def test_baselines_use_market_at_or_before_cutoff():
    rows = baseline_rows(tiny_events(), oracle={("harbor", 0): (0.9, 0.1)})
    market = [r for r in rows if r["agent"] == "market"]
    assert {r["event_id"] for r in market} == {"harbor"}  # the mayor event has no market series
    harbor0 = next(r for r in market if r["step"] == 0)
    assert harbor0["forecast"] == pytest.approx(
        [0.5 + 10 / 100, 0.5 - 10 / 100]
    )  # point at day 10 <= cutoff day 10
    oracle = [r for r in rows if r["agent"] == "oracle"]
    assert len(oracle) == 1 and oracle[0]["score_brier"] == pytest.approx(-0.02)
