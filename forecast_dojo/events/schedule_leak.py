"""How much an episode's schedule tells about its outcome: cross-validated AUC of a logistic model.

A schedule leaks when the forecast dates themselves predict the outcome: questions that resolve
early (usually "Yes") used to end long before their stated deadline. This module measures it two
ways, each as the out-of-fold AUC of an L2-regularized logistic regression (standardized features,
stratified ``folds``-fold cross-validation) with a percentile bootstrap interval over events:

* ``episode``: features of the whole schedule, what an agent would learn if it knew where its
  episode ends: number of steps, days from the last forecast date to the stated deadline, days from
  the open to the last date, the last date's position between open and deadline, and the mean and
  spread of the gaps between dates. The agent is not told the number of steps or which step is last,
  so this is an upper bound.
* ``step``: what the agent sees at one step (one row per step): the step's index, its date's
  position between open and deadline, days to the deadline and the gap since the previous date (a
  notebook carries earlier dates forward).

The binary label is "the realized outcome is the first label" (Yes for Yes/No questions). An AUC
near 0.5 means the schedule says nothing; 1.0 means it gives the answer away. With fewer than
``min_events`` events, or only one class, the AUC is reported as None with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from forecast_dojo.errors import ConfigError
from forecast_dojo.events.schedule import stated_deadline
from forecast_dojo.schema import Event

EPISODE_FEATURES = (
    "n_steps",
    "days_last_to_deadline",
    "days_open_to_last",
    "last_position",
    "mean_gap_days",
    "gap_spread_days",
)
STEP_FEATURES = ("step_index", "position", "days_to_deadline", "gap_days")
DAY = 86400.0


def _days(a: Any, b: Any) -> float:
    return (b - a).total_seconds() / DAY


def episode_features(event: Event) -> list[float]:
    """The :data:`EPISODE_FEATURES` of one scheduled event."""
    deadline = stated_deadline(event)
    span = max(_days(event.open_at, deadline), 1.0)
    cutoffs = event.cutoffs
    gaps = [_days(a, b) for a, b in zip(cutoffs, cutoffs[1:], strict=False)] or [0.0]
    return [
        float(len(cutoffs)),
        _days(cutoffs[-1], deadline),
        _days(event.open_at, cutoffs[-1]),
        _days(event.open_at, cutoffs[-1]) / span,
        float(np.mean(gaps)),
        float(np.std(gaps)),
    ]


def step_features(event: Event) -> list[list[float]]:
    """The :data:`STEP_FEATURES` of every step of one scheduled event."""
    deadline = stated_deadline(event)
    span = max(_days(event.open_at, deadline), 1.0)
    rows = []
    for k, cutoff in enumerate(event.cutoffs):
        gap = _days(event.cutoffs[k - 1], cutoff) if k else _days(event.open_at, cutoff)
        rows.append([float(k), _days(event.open_at, cutoff) / span, _days(cutoff, deadline), gap])
    return rows


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count one half), by ranks."""
    from scipy.stats import rankdata

    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50) -> np.ndarray:
    """Weights (last one the intercept) of an L2-regularized logistic regression, by Newton's method."""
    design = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ w, -30, 30)))
        grad = design.T @ (p - y) + penalty * w
        hess = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _standardize(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = train.mean(axis=0), train.std(axis=0)
    std[std == 0] = 1.0
    return (train - mean) / std, (test - mean) / std


def out_of_fold_scores(x: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Out-of-fold logistic scores; rows of one group (event) always share a fold, folds stratified by label."""
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    group_label = {g: int(y[groups == g][0]) for g in unique}
    fold_of: dict[Any, int] = {}
    for label in (0, 1):
        members = [g for g in unique if group_label[g] == label]
        rng.shuffle(members)
        for i, g in enumerate(members):
            fold_of[g] = i % folds
    fold = np.array([fold_of[g] for g in groups])
    scores = np.zeros(len(y))
    for f in range(folds):
        test = fold == f
        train = ~test
        if not test.any() or len(np.unique(y[train])) < 2:
            scores[test] = y[train].mean() if train.any() else 0.5
            continue
        xtr, xte = _standardize(x[train], x[test])
        w = _fit_logistic(xtr, y[train])
        scores[test] = np.hstack([xte, np.ones((len(xte), 1))]) @ w
    return scores


def measure(
    events: Sequence[Event],
    *,
    level: str = "episode",
    folds: int = 5,
    bootstrap: int = 1000,
    seed: int = 0,
    min_events: int = 10,
) -> dict[str, Any]:
    """Cross-validated AUC of schedule features for the outcome, with a 95 % bootstrap interval.

    ``level`` is ``"episode"`` (one row per event) or ``"step"`` (one row per step; folds and the
    bootstrap resample whole events). Returns ``{"auc", "ci95", "events", "positives", "rows",
    "features", "level"}`` and ``"reason"`` when the AUC could not be computed.
    """
    if level not in ("episode", "step"):
        raise ConfigError(f"level must be 'episode' or 'step', got {level!r}")
    names = EPISODE_FEATURES if level == "episode" else STEP_FEATURES
    rows: list[list[float]] = []
    labels: list[int] = []
    groups: list[int] = []
    for i, event in enumerate(events):
        label = int(event.outcome_index == 0)
        per_event = [episode_features(event)] if level == "episode" else step_features(event)
        rows.extend(per_event)
        labels.extend([label] * len(per_event))
        groups.extend([i] * len(per_event))
    positives = sum(int(e.outcome_index == 0) for e in events)
    out: dict[str, Any] = {
        "level": level,
        "features": list(names),
        "events": len(events),
        "positives": positives,
        "rows": len(rows),
        "auc": None,
        "ci95": None,
    }
    if len(events) < min_events or positives < 2 or len(events) - positives < 2:
        out["reason"] = f"needs >= {min_events} events and >= 2 of each outcome class"
        return out
    x, y, g = np.asarray(rows, dtype=float), np.asarray(labels, dtype=float), np.asarray(groups)
    k = min(folds, positives, len(events) - positives)
    scores = out_of_fold_scores(x, y, g, max(2, k), seed)
    out["auc"] = round(auc(scores, y), 3)
    rng = np.random.default_rng(seed + 1)
    by_event = [np.flatnonzero(g == i) for i in range(len(events))]
    samples = []
    for _ in range(bootstrap):
        picked = rng.integers(0, len(events), len(events))
        idx = np.concatenate([by_event[i] for i in picked])
        if 0 < y[idx].sum() < len(idx):
            samples.append(auc(scores[idx], y[idx]))
    if samples:
        lo, hi = np.percentile(samples, [2.5, 97.5])
        out["ci95"] = [round(float(lo), 3), round(float(hi), 3)]
    return out


def schedule_leak_report(
    events: Sequence[Event], splits: dict[str, Sequence[Event]], *, seed: int = 0
) -> dict[str, Any]:
    """Both measures for the whole set and for each split: ``{name: {"episode": ..., "step": ...}}``."""
    groups = {"all": events, **splits}
    return {
        name: {level: measure(group, level=level, seed=seed) for level in ("episode", "step")}
        for name, group in groups.items()
    }


def describe(result: dict[str, Any]) -> str:
    """One line: ``AUC 0.53 [0.41, 0.66] (n=31, 9 positive)`` or why there is none."""
    if result["auc"] is None:
        return f"n/a (n={result['events']}: {result.get('reason', '')})"
    lo, hi = result["ci95"] or (float("nan"), float("nan"))
    return f"AUC {result['auc']:.2f} [{lo:.2f}, {hi:.2f}] (n={result['events']}, {result['positives']} first-outcome)"
