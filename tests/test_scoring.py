"""Scoring rules against hand-computed values, and their propriety."""

import math

import numpy as np
import pytest

from forecast_dojo.scoring import all_scores, brier_score, log_score, round_distribution, spherical_score


def test_brier_hand_computed():
    assert brier_score([0.7, 0.2, 0.1], 0) == pytest.approx(-(0.09 + 0.04 + 0.01))
    assert brier_score([1.0, 0.0], 1) == pytest.approx(-2.0)
    assert brier_score([1.0, 0.0], 0) == 0.0


def test_log_hand_computed_with_floor():
    assert log_score([0.25, 0.75], 1) == pytest.approx(math.log(0.75))
    assert log_score([1.0, 0.0], 1) == pytest.approx(math.log(1e-3))
    assert log_score([0.9995, 0.0005], 1) == pytest.approx(math.log(1e-3))


def test_spherical_hand_computed():
    assert spherical_score([0.6, 0.8 - 0.4], 0) == pytest.approx(0.6 / math.sqrt(0.36 + 0.16))
    assert spherical_score([1 / 3] * 3, 2) == pytest.approx(1 / math.sqrt(3))


@pytest.mark.parametrize("rule", [brier_score, spherical_score, lambda p, o: log_score(p, o, floor=1e-12)])
def test_rules_are_proper(rule):
    """The expected score under a belief q is maximized by reporting q."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = rng.dirichlet([1, 1, 1])
        expected = lambda p, q=q: sum(q[o] * rule(p, o) for o in range(3))  # noqa: E731
        truthful = expected(list(q))
        for _ in range(20):
            assert truthful >= expected(list(rng.dirichlet([1, 1, 1]))) - 1e-12


def test_all_scores_keys():
    assert set(all_scores([0.5, 0.5], 0)) == {"brier", "log", "spherical"}


def test_one_log_loss_and_one_brier_everywhere():
    """The env, the metrics, the oracle and the rewards score with the same functions (issue 19)."""
    from forecast_dojo import scoring
    from forecast_dojo.evaluation import metrics
    from forecast_dojo.synthetic import oracle

    assert metrics.log_loss is scoring.log_loss is oracle.log_loss
    assert metrics.brier_loss is scoring.brier_loss is oracle.brier_loss
    assert metrics.LOG_FLOOR == scoring.LOG_FLOOR == 1e-3
    # At p = 0 every copy used to disagree: one floored at 1e-3, the oracle's returned infinity.
    assert scoring.log_loss([1.0, 0.0], 1) == pytest.approx(-math.log(1e-3))
    assert oracle.log_loss([1.0, 0.0], 1) == metrics.log_loss([1.0, 0.0], 1)


@pytest.mark.parametrize("forecast", [[0.7, 0.2, 0.1], [1.0, 0.0, 0.0], [0.0, 0.0005, 0.9995], [1 / 3] * 3])
def test_losses_are_the_negated_scores_exactly(forecast):
    from forecast_dojo.scoring import brier_loss, log_loss

    for outcome in range(3):
        assert brier_loss(forecast, outcome) == -brier_score(forecast, outcome)
        assert log_loss(forecast, outcome) == -log_score(forecast, outcome)
        assert all_scores(forecast, outcome)["log"] == -log_loss(forecast, outcome)


def test_round_distribution():
    assert round_distribution([0.996, 0.004]) == [0.99, 0.01]
    assert round_distribution([1 / 3] * 3) == [0.34, 0.33, 0.33]
    assert sum(round_distribution([0.123, 0.456, 0.421])) == pytest.approx(1.0)
    many = round_distribution([1 / 80] * 80)  # 80 outcomes: two decimals' floor alone would sum to 0.8
    assert sum(many) == pytest.approx(1.0) and min(many) > 0
