"""The oracle: exact posterior vs brute-force enumeration, visibility boundary, calibration, files."""

from __future__ import annotations

import itertools
import json
import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from forecast_dojo.synthetic import (
    OracleError,
    SyntheticWorld,
    brier_loss,
    generate_world,
    load_oracle,
    log_loss,
    oracle_forecast,
    oracle_table,
    save_oracle,
)
from forecast_dojo.timeutil import to_micros

# The documented generative model, written out independently of the generator's code.
LIKELIHOOD_RATIO = {"weak": 1.5, "moderate": 3.0, "strong": 9.0}


def documented_signal_probability(tier: str, k: int, signal: int, outcome: int) -> float:
    q = LIKELIHOOD_RATIO[tier] / (LIKELIHOOD_RATIO[tier] + k - 1)
    return q if signal == outcome else (1.0 - q) / (k - 1)


def joint_table(world: SyntheticWorld, event_id: str) -> list[tuple[int, tuple[int, ...], float]]:
    """Every (outcome, signals of all evidence documents) with its probability under the documented
    model, by explicit enumeration: no log space, no factorization shortcuts."""
    event = world.event(event_id)
    k = len(event.outcomes)
    evidence = world.evidence[event_id]
    table = []
    for outcome in range(k):
        for signals in itertools.product(range(k), repeat=len(evidence)):
            joint = 1.0 / k  # the uniform prior the background states
            for ev, signal in zip(evidence, signals, strict=True):
                joint *= documented_signal_probability(ev.tier, k, signal, outcome)
            table.append((outcome, signals, joint))
    return table


def brute_force_posterior(
    world: SyntheticWorld, event_id: str, cutoff: datetime, table: list[tuple[int, tuple[int, ...], float]]
) -> list[float]:
    """Condition the enumerated joint on the signals visible before ``cutoff``; marginalize the rest."""
    evidence = world.evidence[event_id]
    observed = [
        (i, ev.signal) for i, ev in enumerate(evidence) if to_micros(ev.available_at) < to_micros(cutoff)
    ]
    mass = [0.0] * len(world.event(event_id).outcomes)
    for outcome, signals, joint in table:
        if all(signals[i] == s for i, s in observed):
            mass[outcome] += joint
    total = sum(mass)
    return [m / total for m in mass]


def small_world(seed: int) -> SyntheticWorld:
    return generate_world(
        seed,
        n_events=2,
        n_background=0,
        evidence_range=(1, 8),
        distractor_range=(0, 2),
        duration_range=(30, 60),
        multi_outcome_share=0.5,
    )


BRUTE_FORCE_SEEDS = range(13)
MAX_COMBINATIONS = 4**7  # signal combinations per outcome that the enumeration may visit


def brute_force_cases() -> list[tuple[int, int, int]]:
    """(seed, K, n evidence) of every small-world event the brute-force comparison covers."""
    cases = []
    for seed in BRUTE_FORCE_SEEDS:
        world = small_world(seed)
        for event in world.events:
            k, n = len(event.outcomes), len(world.evidence[event.id])
            if k**n <= MAX_COMBINATIONS:
                cases.append((seed, k, n))
    return cases


@pytest.mark.parametrize("seed", BRUTE_FORCE_SEEDS)
def test_oracle_equals_brute_force_posterior(seed: int) -> None:
    world = small_world(seed)
    for event in world.events:
        if len(event.outcomes) ** len(world.evidence[event.id]) > MAX_COMBINATIONS:
            continue
        table = joint_table(world, event.id)
        assert math.isclose(sum(joint for _, _, joint in table), 1.0, rel_tol=1e-12)
        probes = [event.open_at, *event.cutoffs, event.close_at, event.resolved_at]
        probes += [ev.available_at for ev in world.evidence[event.id]]  # exactly on a document's instant
        for cutoff in probes:
            oracle = oracle_forecast(world, event.id, cutoff)
            expected = brute_force_posterior(world, event.id, cutoff, table)
            assert oracle == pytest.approx(expected, abs=1e-12, rel=0), (event.id, cutoff)


def test_brute_force_covers_binary_and_multi_outcome_events() -> None:
    cases = brute_force_cases()
    assert len(cases) >= 20
    assert sum(k > 2 for _, k, _ in cases) >= 8
    assert any(k == 2 and n == 8 for _, k, n in cases)
    assert any(k == 4 and n >= 6 for _, k, n in cases)


def test_document_at_the_cutoff_does_not_count() -> None:
    world = small_world(3)
    event = next(e for e in world.events if len(world.evidence[e.id]) >= 2)
    item = world.evidence[event.id][-1]
    at = oracle_forecast(world, event.id, item.available_at)
    after = oracle_forecast(world, event.id, item.available_at + timedelta(microseconds=1))
    k = len(event.outcomes)
    expected_after = np.array(at) * np.array(item.likelihood)
    expected_after /= expected_after.sum()
    assert after == pytest.approx(tuple(expected_after), abs=1e-12)
    assert at != after
    # Before any evidence the oracle is the stated uniform prior.
    assert oracle_forecast(world, event.id, event.open_at) == pytest.approx((1.0 / k,) * k, abs=1e-15)


def test_oracle_table_rows(tmp_path) -> None:
    world = generate_world(4, n_events=5, n_background=0)
    rows = oracle_table(world)
    assert len(rows) == sum(e.n_steps for e in world.events)
    for row in rows:
        event = world.event(row["event_id"])
        cutoff = event.cutoffs[row["step"]]
        assert row["probabilities"] == list(oracle_forecast(world, event.id, cutoff))
        assert row["outcome_index"] == event.outcome_index
        truth = [1.0 if j == event.outcome_index else 0.0 for j in range(len(event.outcomes))]
        assert row["brier"] == pytest.approx(
            sum((p - t) ** 2 for p, t in zip(row["probabilities"], truth, strict=True))
        )
        assert row["log_loss"] == pytest.approx(
            -math.log(max(row["probabilities"][event.outcome_index], 1e-3))
        )
        assert row["n_evidence"] == sum(ev.available_at < cutoff for ev in world.evidence[event.id])
    loaded = load_oracle(save_oracle(rows, tmp_path / "oracle.jsonl"))
    assert loaded == {
        (r["event_id"], r["step"]): tuple(r["probabilities"]) for r in rows
    }  # floats survive exactly


def test_scores() -> None:
    assert brier_loss((1.0, 0.0), 0) == 0.0
    assert brier_loss((0.0, 1.0, 0.0), 0) == 2.0
    assert brier_loss((0.5, 0.5), 1) == 0.5
    assert log_loss((0.25, 0.75), 1) == pytest.approx(-math.log(0.75))
    # One log loss in the package (forecast_dojo.scoring): floored at 1e-3 as the reports and the env's log
    # score are, never infinite (issue 19: the oracle's copy returned inf at p = 0).
    assert log_loss((1.0, 0.0), 1) == pytest.approx(-math.log(1e-3))


def calibration_gaps(
    forecasts: np.ndarray, hits: np.ndarray, n_bins: int = 10, min_count: int = 200
) -> list[tuple[float, float]]:
    """Per populated bin: (|mean forecast - realized frequency|, allowed gap at 4 standard errors)."""
    bins = np.minimum((forecasts * n_bins).astype(int), n_bins - 1)
    out = []
    for b in range(n_bins):
        inside = bins == b
        n = int(inside.sum())
        if n >= min_count:
            p = float(forecasts[inside].mean())
            out.append(
                (abs(p - float(hits[inside].mean())), 4 * math.sqrt(max(p * (1 - p), 0.01) / n) + 0.01)
            )
    return out


@pytest.fixture(scope="module")
def calibration_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (step, outcome) pair per row: the oracle's forecast, a sharpened forecast, and the truth."""
    forecasts, sharpened, hits = [], [], []
    for seed in (101, 202):
        world = generate_world(seed, n_events=200, n_background=0)
        for row in oracle_table(world):
            p = np.array(row["probabilities"])
            over = p**2 / (p**2).sum()
            for j in range(len(p)):
                forecasts.append(p[j])
                sharpened.append(over[j])
                hits.append(float(j == row["outcome_index"]))
    return np.array(forecasts), np.array(sharpened), np.array(hits)


def test_oracle_is_calibrated(calibration_data) -> None:
    forecasts, _, hits = calibration_data
    gaps = calibration_gaps(forecasts, hits)
    assert len(gaps) >= 6
    assert all(gap <= allowed for gap, allowed in gaps), gaps


def test_calibration_check_catches_an_overconfident_forecaster(calibration_data) -> None:
    _, sharpened, hits = calibration_data
    assert any(gap > allowed for gap, allowed in calibration_gaps(sharpened, hits))


def test_oracle_beats_market_and_market_beats_uniform() -> None:
    world = generate_world(7, n_events=120, n_background=0)
    oracle, market, uniform = [], [], []
    for row in oracle_table(world):
        event = world.event(row["event_id"])
        k = len(event.outcomes)
        oracle.append(row["brier"])
        market.append(
            brier_loss(
                event.market_at(event.cutoffs[row["step"]] - timedelta(microseconds=1)), event.outcome_index
            )
        )
        uniform.append(brier_loss([1.0 / k] * k, event.outcome_index))
    assert np.mean(oracle) < np.mean(market) < np.mean(uniform)


def test_bad_requests_fail_clearly(tmp_path) -> None:
    world = small_world(0)
    event = world.events[0]
    with pytest.raises(KeyError, match="not in synthetic world"):
        oracle_forecast(world, "syn-0999", event.cutoffs[0])
    with pytest.raises(OracleError, match="timezone-aware"):
        oracle_forecast(world, event.id, event.cutoffs[0].replace(tzinfo=None))
    with pytest.raises(FileNotFoundError):
        load_oracle(tmp_path / "missing.jsonl")
    good = {"event_id": "e", "step": 0, "probabilities": [0.5, 0.5]}
    cases = {
        "not json": "{oops\n",
        "no probabilities": json.dumps({"event_id": "e", "step": 0}) + "\n",
        "duplicate": (json.dumps(good) + "\n") * 2,
        "not a distribution": json.dumps({**good, "probabilities": [0.9, 0.9]}) + "\n",
    }
    for name, text in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        path.write_text(text)
        with pytest.raises(OracleError):
            load_oracle(path)
