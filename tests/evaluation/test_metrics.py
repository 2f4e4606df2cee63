"""The field's metrics against hand-computed values (ties, K > 2, failures, bootstrap determinism)."""

import json
import math

import pytest

from forecast_dojo.errors import DataError
from forecast_dojo.evaluation.metrics import (
    accuracy,
    brier_index,
    brier_loss,
    by_life_third,
    contamination_split,
    event_bootstrap,
    event_mean,
    expected_calibration_error,
    format_table,
    horizon_bucket,
    life_third,
    log_loss,
    market_coverage,
    paired_difference,
    paired_values_by_event,
    reliability_bins,
    replicate_bootstrap,
    replicate_difference,
    summarize,
)


def row(agent, memory, event_id, step, forecast, outcome=0, rollout=0, **extra):
    return {
        "agent": agent,
        "memory": memory,
        "event_id": event_id,
        "step": step,
        "rollout": rollout,
        "forecast": forecast,
        "outcome_index": outcome,
        "flags": [],
        **extra,
    }


def test_brier_loss_binary_and_multiclass():
    assert brier_loss([0.7, 0.3], 0) == pytest.approx(0.09 + 0.09)
    assert brier_loss([0.5, 0.5], 1) == pytest.approx(0.5)
    # K = 3: (0.2-0)^2 + (0.5-1)^2 + (0.3-0)^2 = 0.04 + 0.25 + 0.09
    assert brier_loss([0.2, 0.5, 0.3], 1) == pytest.approx(0.38)
    assert brier_loss([0.0, 1.0, 0.0], 0) == pytest.approx(2.0)


def test_log_loss_floor():
    assert log_loss([0.25, 0.75], 1) == pytest.approx(-math.log(0.75))
    assert log_loss([1.0, 0.0], 1) == pytest.approx(-math.log(1e-3))
    assert log_loss([0.9995, 0.0005], 1) == pytest.approx(-math.log(1e-3))


def test_accuracy_fractional_ties():
    assert accuracy([0.6, 0.4], 0) == 1.0
    assert accuracy([0.6, 0.4], 1) == 0.0
    assert accuracy([0.5, 0.5], 1) == 0.5
    assert accuracy([0.4, 0.4, 0.2], 0) == 0.5
    assert accuracy([0.4, 0.4, 0.2], 2) == 0.0
    assert accuracy([1 / 3] * 3, 2) == pytest.approx(1 / 3)


def test_brier_index_matches_fabench_on_binary():
    assert brier_index(0.5) == pytest.approx(50.0)  # uniform binary: binary Brier 0.25
    assert brier_index(0.0) == 100.0
    assert brier_index(2.0) == pytest.approx(0.0)
    assert brier_index(0.18) == pytest.approx(100 * (1 - math.sqrt(0.09)))


def test_ece_hand_computed():
    # confidences 0.9 (correct), 0.9 (wrong), 0.6 (correct): bins 9 and 6
    forecasts = [[0.9, 0.1], [0.9, 0.1], [0.4, 0.6]]
    outcomes = [0, 1, 1]
    # bin 9: acc 0.5 conf 0.9 -> 0.4 * 2/3 ; bin 6: acc 1 conf 0.6 -> 0.4 * 1/3
    assert expected_calibration_error(forecasts, outcomes) == pytest.approx(0.4)
    # uniform binary: confidence 0.5, fractional accuracy 0.5 -> perfectly calibrated
    assert expected_calibration_error([[0.5, 0.5]] * 4, [0, 1, 0, 0]) == pytest.approx(0.0)
    # weights: only the first forecast counts
    assert expected_calibration_error(forecasts, outcomes, weights=[1, 0, 0]) == pytest.approx(0.1)
    assert math.isnan(expected_calibration_error([], []))


def test_reliability_bins():
    bins = reliability_bins([[0.95, 0.05], [0.95, 0.05]], [0, 1])
    assert [(b["bin"], b["count"]) for b in bins] == [(0, 2), (9, 2)]
    assert bins[0]["mean_forecast"] == pytest.approx(0.05) and bins[0]["observed"] == 0.5


def test_event_mean_weighs_events_equally():
    assert event_mean({"a": [0.0, 0.0, 0.0], "b": [1.0]}) == pytest.approx(0.5)


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    values = {f"e{i}": [i / 10, i / 20] for i in range(10)}
    first = event_bootstrap(values, seed=3)
    assert first == event_bootstrap(dict(reversed(list(values.items()))), seed=3)
    assert first != event_bootstrap(values, seed=4)
    mean, low, high = first
    assert low <= mean <= high
    assert math.isnan(event_bootstrap({"e": [1.0]})[1])


def test_summarize_hand_computed_with_failures():
    rows = [
        row(
            "a",
            "none",
            "e1",
            0,
            [0.8, 0.2],
            market=[0.6, 0.4],
            tokens={"prompt_tokens": 10, "completion_tokens": 5},
        ),
        row("a", "none", "e1", 1, [0.6, 0.4], tool_calls_by_kind={"search": 2, "submit_forecast": 1}),
        row("a", "none", "e2", 0, [0.5, 0.5], outcome=1, flags=["no_submission"]),
    ]
    (line,) = summarize(rows)
    e1 = (brier_loss([0.8, 0.2], 0) + brier_loss([0.6, 0.4], 0)) / 2  # (0.08 + 0.32) / 2 = 0.2
    assert line["brier"] == pytest.approx((e1 + 0.5) / 2)
    assert line["brier_index"] == pytest.approx(brier_index((e1 + 0.5) / 2))
    assert line["accuracy"] == pytest.approx((1.0 + 0.5) / 2)
    assert line["failure_no_submission"] == pytest.approx(1 / 3)
    assert line["failure_invalid_forecast"] == 0.0 and line["failure_any"] == pytest.approx(1 / 3)
    assert line["market_steps"] == 1
    assert line["vs_market"] == pytest.approx(0.08 - 0.32)
    assert line["skill_vs_market"] == pytest.approx(1 - 0.08 / 0.32)
    assert line["tokens"] == pytest.approx((15 / 2 + 0) / 2)
    assert line["tool_calls"] == pytest.approx((2 / 2 + 0) / 2)
    assert json.dumps(summarize(rows)) == json.dumps(summarize(rows))  # NaN != NaN, text is equal
    text = format_table(summarize(rows))
    assert "lower is better" in text and "%%" not in text


def test_regret_against_oracle():
    rows = [row("a", "none", "e1", 0, [0.5, 0.5], oracle=[0.9, 0.1])]
    (line,) = summarize(rows)
    assert line["regret"] == pytest.approx(0.5 - 0.02)


def test_paired_difference_on_identical_keys_and_reference_rows():
    rows = [
        row("a", "notebook", "e1", 0, [0.9, 0.1], rollout=0),
        row("a", "none", "e1", 0, [0.7, 0.3], rollout=0),
        row("a", "notebook", "e1", 0, [0.5, 0.5], rollout=1),  # rollout 1 has no memory-free partner
        row("a", "notebook", "e2", 0, [0.5, 0.5], rollout=0),
        row("a", "none", "e2", 0, [0.6, 0.4], rollout=0),
        row("uniform", "-", "e1", 0, [0.5, 0.5], rollout=None),
    ]
    d = paired_difference(rows, ("a", "notebook"), ("a", "none"))
    assert d["steps"] == 2
    assert d["mean"] == pytest.approx(((0.02 - 0.18) + (0.5 - 0.32)) / 2)
    vs_uniform = paired_difference(rows, ("a", "notebook"), ("uniform", "-"))
    assert vs_uniform["steps"] == 2 and vs_uniform["events"] == 1  # both e1 rollouts pair with the reference
    assert vs_uniform["mean"] == pytest.approx(((0.02 - 0.5) + 0.0) / 2)
    with pytest.raises(ValueError):
        paired_difference(rows, ("b", "none"), ("a", "none"))
    cost = paired_difference(
        [
            row("a", "notebook", "e1", 0, [0.5, 0.5], tool_calls_by_kind={"search": 1}),
            row("a", "none", "e1", 0, [0.5, 0.5], tool_calls_by_kind={"search": 3, "read": 1}),
        ],
        ("a", "notebook"),
        ("a", "none"),
        "tool_calls",
    )
    assert cost["mean"] == pytest.approx(-3.0)


def test_paired_values_by_event_are_what_the_paired_difference_bootstraps():
    rows = [
        row("a", "none", "e1", 0, [0.9, 0.1]),
        row("a", "none", "e1", 1, [0.4, 0.6]),
        row("a", "none", "e2", 0, [0.5, 0.5]),
        row("uniform", "-", "e1", 0, [0.5, 0.5], rollout=None),
        row("uniform", "-", "e1", 1, [0.5, 0.5], rollout=None),
        row("uniform", "-", "e2", 0, [0.5, 0.5], rollout=None),
        row("uniform", "-", "e3", 0, [0.5, 0.5], rollout=None),  # no partner: absent
    ]
    by_event = paired_values_by_event(rows, ("a", "none"), ("uniform", "-"))
    assert by_event == pytest.approx({"e1": [0.02 - 0.5, 0.72 - 0.5], "e2": [0.0]})
    diff = paired_difference(rows, ("a", "none"), ("uniform", "-"))
    assert (diff["mean"], *diff["ci"]) == event_bootstrap(by_event)
    assert paired_values_by_event(rows, ("b", "none"), ("uniform", "-")) == {}


def test_replicate_bootstrap_pools_runs_of_the_same_events():
    events = [f"e{i}" for i in range(8)]
    a = {e: -0.2 + 0.02 * i for i, e in enumerate(events)}
    b = {e: 0.05 * (-1) ** i for i, e in enumerate(events)}
    pooled = replicate_bootstrap([a, b], seed=1)
    mean_a, mean_b = sum(a.values()) / 8, sum(b.values()) / 8
    assert pooled["runs"] == 2 and pooled["events"] == 8
    assert pooled["per_run"] == pytest.approx([mean_a, mean_b])
    assert pooled["mean"] == pytest.approx((mean_a + mean_b) / 2)
    assert pooled["between_run_sd"] == pytest.approx(abs(mean_a - mean_b) / math.sqrt(2))
    for low, high in (pooled["ci_events"], pooled["ci_runs_and_events"]):
        assert low < pooled["mean"] < high
    # Resampling the runs adds their spread: the recipe's interval reaches both runs' means.
    low, high = pooled["ci_runs_and_events"]
    assert low <= mean_a + 1e-12 and high >= mean_b - 1e-12
    reordered = dict(reversed(list(a.items())))
    assert replicate_bootstrap([reordered, b], seed=1) == pooled  # key order is irrelevant
    assert replicate_bootstrap([a, b], seed=2) != pooled

    alone = replicate_bootstrap([a], seed=1)
    assert math.isnan(alone["between_run_sd"]) and alone["ci_events"] == alone["ci_runs_and_events"]
    assert alone["ci_events"] == pytest.approx(event_bootstrap({e: [v] for e, v in a.items()}, seed=1)[1:])
    single = replicate_bootstrap([{"e0": 0.1}, {"e0": 0.3}])
    assert single["mean"] == pytest.approx(0.2) and all(math.isnan(v) for v in single["ci_events"])


def test_replicate_difference_is_paired_on_events_and_resamples_each_sides_runs():
    events = [f"e{i}" for i in range(10)]
    first = {e: 0.3 * math.sin(i) for i, e in enumerate(events)}  # large differences between events
    second = {e: v + 0.05 for e, v in first.items()}
    shifted = {e: v + 0.1 for e, v in first.items()}
    one = replicate_difference([first], [shifted])
    assert one["runs"] == 1 and one["against"] == 1 and one["events"] == 10
    # Paired on events: the same draw for both sides, so a constant shift has no event noise at all.
    assert one["mean"] == pytest.approx(-0.1)
    assert one["ci_events"] == pytest.approx((-0.1, -0.1)) and one["ci_runs_and_events"] == pytest.approx(
        (-0.1, -0.1)
    )
    two = replicate_difference([first, second], [shifted], seed=5)
    assert two["mean"] == pytest.approx(-0.075)
    assert two["ci_events"] == pytest.approx((-0.075, -0.075))
    low, high = two["ci_runs_and_events"]  # the first side's two runs differ by 0.05: resampled, they show
    assert low == pytest.approx(-0.1) and high == pytest.approx(-0.05)
    with pytest.raises(DataError, match="no runs"):
        replicate_difference([first], [])
    with pytest.raises(DataError, match="run 2 holds other events"):
        replicate_difference([first], [{"e0": 0.0}])


def test_replicate_bootstrap_refuses_runs_of_other_events():
    with pytest.raises(DataError, match="missing \\['e2'\\], extra \\['e9'\\]"):
        replicate_bootstrap([{"e1": 0.0, "e2": 0.1}, {"e1": 0.0, "e9": 0.1}])
    with pytest.raises(DataError, match="no runs"):
        replicate_bootstrap([])
    with pytest.raises(DataError, match="no event"):
        replicate_bootstrap([{}])


def test_life_thirds_horizon_and_contamination():
    assert [life_third(s, 6) for s in range(6)] == ["first", "first", "middle", "middle", "last", "last"]
    assert [life_third(s, 5) for s in range(5)] == [
        "first",
        "first",
        "middle",
        "middle",
        "last",
    ]  # floor(3 s / n)
    assert life_third(0, 1) == "first"
    assert horizon_bucket(3) == "<=7d" and horizon_bucket(30) == "8-30d" and horizon_bucket(400) == ">90d"
    rows = [row("a", "none", "e1", s, [0.5, 0.5], n_steps=3) for s in range(3)]
    # the natural order (issue 20), not the string order
    assert [c["slice"] for c in by_life_third(rows)] == ["first", "middle", "last"]
    split = contamination_split(
        [
            row("a", "none", "old", 0, [0.5, 0.5], open_at="2023-05-01T00:00:00Z"),
            row("a", "none", "new", 0, [0.5, 0.5], open_at="2025-01-02T00:00:00Z"),
        ],
        "2024-06-01",
    )
    assert [r["event_id"] for r in split["before"]] == ["old"] and [
        r["event_id"] for r in split["after"]
    ] == ["new"]


def test_market_coverage_and_table_marker():
    rows = [
        row("market", "-", "e1", 0, [0.6, 0.4], market=[0.6, 0.4], rollout=None),
        row("uniform", "-", "e1", 0, [0.5, 0.5], market=[0.6, 0.4], rollout=None),
        row("uniform", "-", "e1", 1, [0.5, 0.5], rollout=None),
    ]
    coverage = market_coverage(rows)
    assert coverage == {"steps": 2, "with_market": 1, "share": 0.5}
    text = format_table(summarize(rows), market=coverage)
    assert "market (1/2 steps)" in text and text.count("\nuniform") == 1
