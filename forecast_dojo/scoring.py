"""Proper scoring rules for K-outcome forecasts. Higher is better for every score returned here.

Rewards are plain functions of ``(probabilities, outcome_index)`` in the TRL style, so they can be
reused as reward functions outside the environment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

LOG_FLOOR = 1e-3


def brier_score(probabilities: Sequence[float], outcome: int) -> float:
    """Negative multiclass Brier score: ``-sum_k (p_k - y_k)^2``, in [-2, 0]."""
    return -sum((p - (1.0 if k == outcome else 0.0)) ** 2 for k, p in enumerate(probabilities))


def log_score(probabilities: Sequence[float], outcome: int, floor: float = LOG_FLOOR) -> float:
    """Log score with a probability floor: ``ln(max(p_outcome, floor))``, in [ln(floor), 0]."""
    return math.log(max(probabilities[outcome], floor))


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
