"""The run figure and its reliability bins."""

import pytest

from forecast_dojo.evaluation.plots import plot_run, reliability


def row(agent, memory, event_id, forecast):
    return {
        "agent": agent,
        "memory": memory,
        "event_id": event_id,
        "step": 0,
        "valid": True,
        "forecast": forecast,
        "score_brier": -0.1,
        "outcome_index": 0,
        "score_log": -0.1,
        "score_spherical": 0.9,
    }


def test_reliability_bins_by_forecast_probability():
    rows = [row("a", "none", "e1", [0.95, 0.05]), row("a", "none", "e2", [0.95, 0.05])]
    bins = reliability(rows, {"e1": 0, "e2": 1})
    assert bins == [(pytest.approx(0.05), 0.5, 2), (pytest.approx(0.95), 0.5, 2)]


def test_plot_writes_a_png(tmp_path):
    rows = [row("a", "none", f"e{i}", [0.7, 0.3]) for i in range(3)] + [
        row("oracle", "-", f"e{i}", [0.6, 0.4]) for i in range(3)
    ]
    path = plot_run(rows, {"e0": 0, "e1": 1, "e2": 0}, tmp_path / "scores.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
