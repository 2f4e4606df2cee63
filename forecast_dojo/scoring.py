"""Proper scoring rules for K-outcome forecasts: the one place where a forecast is scored.

The env's rewards (``info["scores"]``), the TRL reward functions (:mod:`forecast_dojo.training.rewards`),
the evaluation metrics (:mod:`forecast_dojo.evaluation.metrics`) and the synthetic oracle's table all
score with these functions. Two conventions, each defined once:

* **scores** (``*_score``, :data:`SCORING_RULES`): higher is better; the RL reward is one of them;
* **losses** (:func:`brier_loss`, :func:`log_loss`): the forecasting literature's convention, lower is
  better; each is exactly the negated score (``brier_loss == -brier_score``, ``log_loss == -log_score``).

The log score and the log loss floor the realized outcome's probability at :data:`LOG_FLOOR` (1e-3), so a
forecast that gave the realized outcome probability 0 costs ``-ln 1e-3`` (about 6.9), never infinity.
Rules are plain functions of ``(probabilities, outcome_index)`` in the TRL style, so they can be
reused as reward functions outside the environment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

LOG_FLOOR = 1e-3


def brier_loss(probabilities: Sequence[float], outcome: int) -> float:
    """Multiclass Brier loss ``sum_k (p_k - [k == outcome])^2``, in [0, 2]; lower is better.

    Args:
        probabilities: The forecast over the K outcomes.
        outcome: Index of the realized outcome.

    Returns:
        The loss (0 for a certain correct forecast, 2 for a certain wrong one).
    """
    return sum((p - (1.0 if k == outcome else 0.0)) ** 2 for k, p in enumerate(probabilities))


def log_loss(probabilities: Sequence[float], outcome: int, floor: float = LOG_FLOOR) -> float:
    """Log loss with a probability floor: ``-ln max(p_outcome, floor)``, in [0, -ln floor]; lower is better.

    Args:
        probabilities: The forecast over the K outcomes.
        outcome: Index of the realized outcome.
        floor: Smallest probability counted (:data:`LOG_FLOOR`, 1e-3, as the env's log reward).

    Returns:
        The loss (finite even when the realized outcome got probability 0).
    """
    return -math.log(max(probabilities[outcome], floor))


def brier_score(probabilities: Sequence[float], outcome: int) -> float:
    """Negative multiclass Brier score: ``-sum_k (p_k - y_k)^2``, in [-2, 0] (``-brier_loss``)."""
    return -brier_loss(probabilities, outcome)


def log_score(probabilities: Sequence[float], outcome: int, floor: float = LOG_FLOOR) -> float:
    """Log score with a probability floor: ``ln(max(p_outcome, floor))``, in [ln(floor), 0] (``-log_loss``)."""
    return -log_loss(probabilities, outcome, floor)


def spherical_score(probabilities: Sequence[float], outcome: int) -> float:
    """Spherical score: ``p_outcome / ||p||_2``, in [0, 1]."""
    norm = math.sqrt(sum(p * p for p in probabilities))
    return probabilities[outcome] / norm if norm > 0 else 0.0


SCORING_RULES: dict[str, Callable[[Sequence[float], int], float]] = {
    "brier": brier_score,
    "log": log_score,
    "spherical": spherical_score,
}


def all_scores(probabilities: Sequence[float], outcome: int) -> dict[str, float]:
    """Every scoring rule at once (what ``info["scores"]`` carries)."""
    return {name: rule(probabilities, outcome) for name, rule in SCORING_RULES.items()}


def uniform(k: int) -> tuple[float, ...]:
    """The uniform forecast over ``k`` outcomes."""
    return tuple(1.0 / k for _ in range(k))
