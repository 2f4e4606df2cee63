"""The field's forecasting metrics, as pure functions over evaluation rows.

Conventions (those of the forecasting literature, not of RL):

* **Brier** is the multiclass Brier *loss* ``sum_k (p_k - y_k)^2`` in [0, 2]: lower is better. The
  env's RL reward is its negative (``forecast_dojo.scoring.brier_score``).
* **Brier Index** (ForecastBench / FABench) is ``100 * (1 - sqrt(B / 2))`` of a mean Brier loss
  ``B``: ``B / 2`` is exactly the binary Brier score on binary questions, so the index equals
  FABench's there (uniform = 50, perfect = 100) and is the same normalization for K > 2.
* **Log loss** is ``-ln max(p_outcome, 1e-3)`` (both losses are :mod:`forecast_dojo.scoring`'s); **accuracy** is top-1 with fractional ties (1 / the
  number of tied top outcomes when the realized one is among them); **ECE** is the top-label
  expected calibration error over 10 equal-width bins.

A *row* is one scored forecast step: a dict with at least ``agent``, ``memory`` (the mode: ``none``,
``notebook``, ``no-tools``, a notebook control, or ``-`` for a reference forecaster), ``event_id``,
``step``, ``forecast`` and ``outcome_index``; optional ``rollout`` (None for deterministic
references), ``n_steps``, ``market``, ``oracle``, ``flags``, ``source``, ``horizon_days``,
``open_at``, ``tokens``, ``tool_calls_by_kind``, ``wall_s``, and for evidence quality ``seen_docs``,
``cited_docs`` and ``reference_docs`` (the step's reference set, :mod:`forecast_dojo.evaluation.evidence`).

Beyond the outcome scores (see :func:`step_metrics`): **info_alpha** (Forecast-Dojo's Information-alpha)
is the agent's log score minus the market's on the realized outcome, ``ln p_agent - ln p_market``
(both floored like the log loss), where the market has a value: positive means the agent knew more
than the market. **Source precision** (WorldReasoner's evidence quality) is the share of the documents
a step searched, read or cited that are in the step's reference set, i.e. time-valid (available before
the cutoff) and relevant; **evidence recall** the share of the reference set the agent saw (a search
hit's snippet or a read); **citation precision** the source precision of the cited ids alone;
**key-event recall** (WorldReasoner's reasoning quality) the share of the step's hindsight key events
(its heaviest reference documents) that the submitted reasoning graph names: a text-similar event
dated within 7 days (:func:`key_event_recall`).

Aggregation is the mean within each event, then the mean across events (every event weighs the
same, however many steps it has). Intervals resample events (an event's steps are correlated) with
a fixed seed, so the same rows always give the same summary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from typing import Any

import numpy as np

from forecast_dojo.errors import DataError
from forecast_dojo.events.relevance import salient_terms
from forecast_dojo.records import spent_tokens

# The per-forecast losses are forecast_dojo.scoring's (one definition); re-exported here for callers of metrics.
from forecast_dojo.scoring import LOG_FLOOR as LOG_FLOOR
from forecast_dojo.scoring import brier_loss as brier_loss
from forecast_dojo.scoring import log_loss as log_loss
from forecast_dojo.tools import SUBMIT_FORECAST

N_BINS = 10
FAILURE_FLAGS = ("no_submission", "invalid_forecast", "no_notebook")
HORIZON_BUCKETS = ((0, 7, "<=7d"), (8, 30, "8-30d"), (31, 90, "31-90d"), (91, 10**9, ">90d"))
HORIZONS = tuple(name for _, _, name in HORIZON_BUCKETS)  # shortest first
THIRDS = ("first", "middle", "last")
EVIDENCE_METRICS = ("source_precision", "evidence_recall", "citation_precision", "key_event_recall")
KEY_EVENT_SIMILARITY = 0.3
KEY_EVENT_DATE_GATE_DAYS = 7

Row = dict[str, Any]
Key = tuple[str, int, Any]


# ---------------------------------------------------------------------------- per-forecast metrics


def accuracy(probabilities: Sequence[float], outcome: int, tol: float = 1e-12) -> float:
    """Top-1 accuracy with fractional ties: ``1 / |argmax|`` if the realized outcome is a top outcome, else 0.

    Args:
        probabilities: the forecast over the K outcomes.
        outcome: index of the realized outcome.
        tol: probabilities within ``tol`` of the maximum count as tied.

    Returns:
        A value in [0, 1] (0.5 for a uniform binary forecast).
    """
    top = max(probabilities)
    tied = [k for k, p in enumerate(probabilities) if p >= top - tol]
    return 1.0 / len(tied) if outcome in tied else 0.0


def brier_index(mean_brier: float) -> float:
    """Brier Index ``100 * (1 - sqrt(B / 2))`` of a mean multiclass Brier loss (see module docstring).

    Args:
        mean_brier: a mean multiclass Brier loss in [0, 2].

    Returns:
        The index: 100 is perfect, 50 is the uniform binary forecast, 0 the worst.
    """
    return 100.0 * (1.0 - math.sqrt(max(mean_brier, 0.0) / 2.0))


def expected_calibration_error(
    forecasts: Sequence[Sequence[float]],
    outcomes: Sequence[int],
    weights: Sequence[float] | None = None,
    n_bins: int = N_BINS,
) -> float:
    """Top-label ECE: ``sum_b w_b / W * |accuracy_b - confidence_b|`` over equal-width confidence bins.

    The confidence of a forecast is its largest probability; its accuracy is :func:`accuracy`.

    Args:
        forecasts: one distribution per forecast.
        outcomes: realized outcome index of each forecast.
        weights: optional weight per forecast (e.g. 1 / steps of its event); 1 each by default.
        n_bins: number of bins of [0, 1] (the last one includes 1.0).

    Returns:
        The ECE in [0, 1]; NaN for no forecasts.
    """
    if not forecasts:
        return float("nan")
    weights = [1.0] * len(forecasts) if weights is None else list(weights)
    total = [0.0] * n_bins
    conf = [0.0] * n_bins
    acc = [0.0] * n_bins
    for forecast, outcome, weight in zip(forecasts, outcomes, weights, strict=True):
        confidence = max(forecast)
        b = min(int(confidence * n_bins), n_bins - 1)
        total[b] += weight
        conf[b] += weight * confidence
        acc[b] += weight * accuracy(forecast, outcome)
    mass = sum(total)
    return sum(abs(acc[b] - conf[b]) for b in range(n_bins) if total[b] > 0) / mass


def reliability_bins(
    forecasts: Sequence[Sequence[float]], outcomes: Sequence[int], n_bins: int = N_BINS
) -> list[dict[str, float]]:
    """Reliability-diagram points over every outcome of every forecast (K points per forecast).

    Args:
        forecasts: one distribution per forecast.
        outcomes: realized outcome index of each forecast.
        n_bins: number of equal-width bins.

    Returns:
        One ``{"bin", "mean_forecast", "observed", "count"}`` per non-empty bin, in bin order.
    """
    bins: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for forecast, outcome in zip(forecasts, outcomes, strict=True):
        for k, p in enumerate(forecast):
            bins[min(int(p * n_bins), n_bins - 1)].append((p, 1.0 if k == outcome else 0.0))
    return [
        {
            "bin": b,
            "mean_forecast": sum(p for p, _ in pairs) / len(pairs),
            "observed": sum(y for _, y in pairs) / len(pairs),
            "count": len(pairs),
        }
        for b, pairs in sorted(bins.items())
    ]


def step_metrics(row: Row) -> dict[str, float]:
    """Every per-step metric of one row: brier, log_loss, accuracy, and where known regret / vs_market.

    ``regret`` is ``brier - brier(oracle)`` (synthetic world), ``vs_market`` is ``brier - brier(market)``
    at the same step (both lower is better for the agent), ``info_alpha`` is
    ``log_loss(market) - log_loss`` (higher is better for the agent); with a reference set also
    :func:`evidence_metrics`.

    Args:
        row: an evaluation row (``forecast``, ``outcome_index``, optional ``oracle`` and ``market``).

    Returns:
        The metrics of that step.
    """
    p, o = row["forecast"], row["outcome_index"]
    out = {"brier": brier_loss(p, o), "log_loss": log_loss(p, o), "accuracy": accuracy(p, o)}
    if row.get("oracle") is not None:
        out["regret"] = out["brier"] - brier_loss(row["oracle"], o)
    if row.get("market") is not None:
        out["vs_market"] = out["brier"] - brier_loss(row["market"], o)
        out["info_alpha"] = log_loss(row["market"], o) - out["log_loss"]
    out |= evidence_metrics(row)
    return out


def evidence_metrics(row: Row) -> dict[str, float]:
    """Source precision, evidence recall and citation precision of one step, where defined.

    Defined only when the row has a reference set (``reference_docs``); precision needs at least one
    document searched, read or cited, recall a non-empty reference set, citation precision a citation.

    Args:
        row: an evaluation row (``seen_docs``, ``cited_docs``, ``reference_docs``).

    Returns:
        ``source_precision``, ``evidence_recall``, ``citation_precision`` and, with a reasoning graph
        (``graph_events``) and key events (``key_events``), ``key_event_recall`` (those defined).
    """
    reference = row.get("reference_docs")
    if reference is None:
        return {}
    relevant = set(reference)
    seen = set(row.get("seen_docs") or ())
    cited = set(row.get("cited_docs") or ())
    accessed = seen | cited
    out: dict[str, float] = {}
    if accessed:
        out["source_precision"] = len(accessed & relevant) / len(accessed)
    if relevant:
        out["evidence_recall"] = len(seen & relevant) / len(relevant)
    if cited:
        out["citation_precision"] = len(cited & relevant) / len(cited)
    if row.get("graph_events") is not None and row.get("key_events"):
        out["key_event_recall"] = key_event_recall(row["graph_events"], row["key_events"])
    return out


def text_similarity(a: str, b: str) -> float:
    """Cosine similarity of two texts' salient-term sets (:func:`forecast_dojo.events.relevance.salient_terms`).

    Args:
        a: one text.
        b: the other.

    Returns:
        ``|A & B| / sqrt(|A| |B|)`` in [0, 1]; 0 when either has no salient term.
    """
    left, right = salient_terms(a), salient_terms(b)
    if not left or not right:
        return 0.0
    return len(left & right) / math.sqrt(len(left) * len(right))


def key_event_recall(
    submitted: Sequence[Mapping[str, str]],
    key_events: Sequence[Mapping[str, str]],
    *,
    min_similarity: float = KEY_EVENT_SIMILARITY,
    date_gate_days: int = KEY_EVENT_DATE_GATE_DAYS,
) -> float:
    """WorldReasoner's key-event recall: the share of hindsight key events that a submitted graph event matches.

    A key event is matched when some submitted event is dated within ``date_gate_days`` of it and its
    text is at least ``min_similarity`` similar (:func:`text_similarity`).

    Args:
        submitted: the graph's events (``date`` ``YYYY-MM-DD``, ``text``).
        key_events: the step's hindsight key events (``date``, ``text``).
        min_similarity: the text-similarity threshold.
        date_gate_days: the date gate.

    Returns:
        The recall in [0, 1] (NaN without key events).
    """
    if not key_events:
        return float("nan")

    def day(value: str) -> date | None:
        try:
            return date.fromisoformat(value)
        except (TypeError, ValueError):
            return None

    matched = 0
    for key in key_events:
        key_day = day(key.get("date", ""))
        if key_day is None:
            continue
        for event in submitted:
            event_day = day(event.get("date", ""))
            if event_day is None or abs((event_day - key_day).days) > date_gate_days:
                continue
            if text_similarity(event.get("text", ""), key.get("text", "")) >= min_similarity:
                matched += 1
                break
    return matched / len(key_events)


# ---------------------------------------------------------------------------- aggregation


def event_mean(values_by_event: dict[str, list[float]]) -> float:
    """Mean within each event, then across events.

    Args:
        values_by_event: per event, the values of its steps (empty lists are ignored).

    Returns:
        The mean of event means; NaN when there is no value.
    """
    means = [sum(v) / len(v) for v in values_by_event.values() if v]
    return sum(means) / len(means) if means else float("nan")


def event_bootstrap(
    values_by_event: dict[str, list[float]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[float, float, float]:
    """Event-clustered bootstrap of the mean of event means: (estimate, 2.5 %, 97.5 % percentiles).

    Events are resampled with replacement (sorted by id first, so the result does not depend on
    dict order); with fewer than two events the interval is NaN.

    Args:
        values_by_event: per event, the values of its steps.
        n_boot: number of bootstrap resamples.
        seed: seed of the resampling (same seed, same interval).
        statistic: optional transform of each resample's mean, applied to an array of means at once
            (so it must work elementwise on numpy arrays).

    Returns:
        (estimate, low, high).
    """
    events = sorted(e for e, v in values_by_event.items() if v)
    means = np.array([sum(values_by_event[e]) / len(values_by_event[e]) for e in events], dtype=float)
    transform = statistic or (lambda x: x)
    if len(events) == 0:
        return float("nan"), float("nan"), float("nan")
    estimate = float(transform(np.array(means.mean())))
    if len(events) < 2:
        return estimate, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(events), size=(n_boot, len(events)))
    resampled = np.asarray(transform(means[draws].mean(axis=1)), dtype=float)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return estimate, float(low), float(high)


def _by_event(rows: Iterable[Row], value: Callable[[Row], float | None]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        v = value(row)
        if v is not None:
            out[row["event_id"]].append(v)
    return out


def _event_weights(rows: Sequence[Row]) -> list[float]:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row["event_id"]] += 1
    return [1.0 / counts[row["event_id"]] for row in rows]


def forecaster(row: Row) -> tuple[str, str]:
    """The (agent, mode) a row belongs to."""
    return row["agent"], row["memory"]


def group_rows(rows: Iterable[Row]) -> dict[tuple[str, str], list[Row]]:
    """Rows grouped by (agent, mode), in sorted order."""
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[forecaster(row)].append(row)
    return dict(sorted(groups.items()))


def tokens_of(row: Row) -> int:
    """Prompt plus completion tokens of a row (0 when not reported): :func:`~forecast_dojo.records.spent_tokens`."""
    return spent_tokens(row.get("tokens"))


def tool_calls_of(row: Row) -> int:
    """Research tool calls of a row (every kind but the submission)."""
    return sum(n for kind, n in (row.get("tool_calls_by_kind") or {}).items() if kind != SUBMIT_FORECAST)


def summarize_group(rows: Sequence[Row], *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Every aggregate of one forecaster's rows (see module docstring for the conventions).

    Args:
        rows: the rows of one (agent, mode).
        n_boot: bootstrap resamples for the intervals.
        seed: bootstrap seed.

    Returns:
        events, steps, rollouts; brier / brier_index / log_loss / accuracy with ``*_ci`` intervals;
        ece; failure rates (``failure_<flag>``, ``failure_any``); mean tool calls, tokens and wall
        time per step; and where known ``regret``, ``vs_market`` and ``info_alpha`` (with the number of
        steps they cover, ``market_steps``) and the evidence metrics of :data:`EVIDENCE_METRICS`
        (each with ``*_ci`` and ``*_steps``, the steps where it is defined); for an agent decoded under
        the evidence-label constraint, ``constrained_steps``: its steps where the constraint chose
        at least one token over the model's first choice.
    """
    metrics = [step_metrics(r) for r in rows]
    line: dict[str, Any] = {
        "events": len({r["event_id"] for r in rows}),
        "steps": len(rows),
        "rollouts": len({r.get("rollout") for r in rows}),
    }
    pairs = list(zip(rows, metrics, strict=True))
    for name in ("brier", "log_loss", "accuracy"):
        mean, low, high = event_bootstrap(
            _by_event((r | {"_v": m[name]} for r, m in pairs), lambda r: r["_v"]), n_boot=n_boot, seed=seed
        )
        line[name] = mean
        line[f"{name}_ci"] = (low, high)
        if name == "brier":
            index_values = [brier_index(b) for b in (mean, high, low)]  # the index falls as the loss rises
            line["brier_index"] = index_values[0]
            line["brier_index_ci"] = (index_values[1], index_values[2])
    line["ece"] = expected_calibration_error(
        [r["forecast"] for r in rows], [r["outcome_index"] for r in rows], _event_weights(rows)
    )
    for optional in ("regret", "vs_market", "info_alpha", *EVIDENCE_METRICS):
        covered = [(r, m) for r, m in pairs if optional in m]
        if covered:
            mean, low, high = event_bootstrap(
                _by_event((r | {"_v": m[optional]} for r, m in covered), lambda r: r["_v"]),
                n_boot=n_boot,
                seed=seed,
            )
            line[optional] = mean
            line[f"{optional}_ci"] = (low, high)
            if optional in EVIDENCE_METRICS:
                line[f"{optional}_steps"] = len(covered)
            if optional == "vs_market":
                line["market_steps"] = len(covered)
                market_brier = event_mean(
                    _by_event(
                        (r | {"_v": brier_loss(r["market"], r["outcome_index"])} for r, _ in covered),
                        lambda r: r["_v"],
                    )
                )
                own = event_mean(_by_event((r | {"_v": m["brier"]} for r, m in covered), lambda r: r["_v"]))
                line["skill_vs_market"] = 1.0 - own / market_brier if market_brier > 0 else float("nan")
    for flag in FAILURE_FLAGS:
        line[f"failure_{flag}"] = sum(flag in (r.get("flags") or []) for r in rows) / len(rows)
    line["failure_any"] = sum(bool(r.get("flags")) for r in rows) / len(rows)
    line["tool_calls"] = event_mean(_by_event(rows, tool_calls_of))
    constrained = [r for r in rows if "constrained_tokens" in (r.get("tokens") or {})]
    if constrained:  # decoded under the evidence-label constraint: how often it overrode the model
        line["constrained_steps"] = sum(bool(r["tokens"]["constrained_tokens"]) for r in constrained)
    line["tokens"] = event_mean(_by_event(rows, tokens_of))
    line["wall_s"] = event_mean(_by_event(rows, lambda r: r.get("wall_s")))
    return line


def summarize(rows: Sequence[Row], *, n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One line per (agent, mode) with :func:`summarize_group`'s aggregates, sorted by agent and mode.

    Args:
        rows: evaluation rows of any number of forecasters.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        The table, one dict per forecaster with ``agent`` and ``memory`` keys.
    """
    return [
        {"agent": agent, "memory": memory, **summarize_group(group, n_boot=n_boot, seed=seed)}
        for (agent, memory), group in group_rows(rows).items()
    ]


def _pair_index(rows: Iterable[Row], who: tuple[str, str]) -> dict[Key, Row]:
    return {(r["event_id"], int(r["step"]), r.get("rollout")): r for r in rows if forecaster(r) == who}


def paired_values_by_event(
    rows: Sequence[Row],
    a: tuple[str, str],
    b: tuple[str, str],
    metric: str | Callable[[Row], float | None] = "brier",
) -> dict[str, list[float]]:
    """Per event, ``metric(a) - metric(b)`` of every identical (event, step, rollout) both scored.

    The pairing of :func:`paired_difference`: a reference forecaster without rollouts (``rollout``
    None) pairs with every rollout of the other; steps where either value is undefined are left out.

    Args:
        rows: evaluation rows.
        a: (agent, mode) of the first forecaster.
        b: (agent, mode) of the second.
        metric: a :func:`step_metrics` key, ``tokens``, ``tool_calls``, or a function of a row.

    Returns:
        ``{event_id: [differences of its paired steps]}`` (events with no paired step are absent).
    """
    value = _metric_function(metric)
    left, right = _pair_index(rows, a), _pair_index(rows, b)
    right_by_step: dict[tuple[str, int], list[tuple[Any, Row]]] = defaultdict(list)
    for (event_id, step, rollout), row in right.items():
        right_by_step[(event_id, step)].append((rollout, row))
    by_event: dict[str, list[float]] = defaultdict(list)
    for (event_id, step, rollout), row in sorted(
        left.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))
    ):
        for other_rollout, other in sorted(right_by_step.get((event_id, step), []), key=lambda x: str(x[0])):
            if rollout is not None and other_rollout is not None and rollout != other_rollout:
                continue
            va, vb = value(row), value(other)
            if va is not None and vb is not None:
                by_event[event_id].append(va - vb)
    return dict(by_event)


def paired_difference(
    rows: Sequence[Row],
    a: tuple[str, str],
    b: tuple[str, str],
    metric: str | Callable[[Row], float | None] = "brier",
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean of ``metric(a) - metric(b)`` over identical (event, step, rollout), with an event-bootstrap interval.

    A reference forecaster without rollouts (``rollout`` None) pairs with every rollout of the other
    (:func:`paired_values_by_event`). For ``brier`` a negative difference means ``a`` is better (lower loss).

    Args:
        rows: evaluation rows.
        a: (agent, mode) of the first forecaster.
        b: (agent, mode) of the second.
        metric: a :func:`step_metrics` key, ``tokens``, ``tool_calls``, or a function of a row.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        ``{"a", "b", "metric", "steps", "events", "mean", "ci", "max_abs_difference"}`` (the largest
        ``|a - b|`` of any paired step: 0 when the two are identical at every step).

    Raises:
        DataError: when no step was scored by both.
    """
    by_event = paired_values_by_event(rows, a, b, metric)
    if not by_event:
        raise DataError(f"no steps scored by both {a} and {b}")
    mean, low, high = event_bootstrap(by_event, n_boot=n_boot, seed=seed)
    return {
        "a": list(a),
        "b": list(b),
        "metric": metric if isinstance(metric, str) else getattr(metric, "__name__", "custom"),
        "steps": sum(map(len, by_event.values())),
        "events": len(by_event),
        "mean": mean,
        "ci": (low, high),
        "max_abs_difference": max(abs(d) for values in by_event.values() for d in values),
    }


def _replicate_values(groups: Sequence[Sequence[Mapping[str, float]]]) -> list[np.ndarray]:
    """Each group's runs as a (runs, events) array over the events of the first run, sorted by id."""
    runs = [run for group in groups for run in group]
    if not all(groups):
        raise DataError("no runs to pool")
    events = sorted(runs[0])
    if not events:
        raise DataError("run 1 has no event values")
    for index, run in enumerate(runs[1:], start=2):
        if sorted(run) != events:
            missing = sorted(set(events) - set(run))
            extra = sorted(set(run) - set(events))
            raise DataError(
                f"run {index} holds other events than run 1 (missing {missing[:3]}, extra {extra[:3]}; "
                f"{len(missing)} and {len(extra)} in all): replicates must be scored on the same events"
            )
    return [np.array([[float(run[e]) for e in events] for run in group], dtype=float) for group in groups]


def _replicate_resamples(
    values: Sequence[np.ndarray], n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per group, ``n_boot`` resampled means: events only, then runs (within each group) and events.

    One event draw serves every group and run (they answered the same questions), so a difference of
    groups is paired on events. Returns two arrays of shape (groups, n_boot).
    """
    rng = np.random.default_rng(seed)
    n_events = values[0].shape[1]
    event_draws = rng.integers(0, n_events, size=(n_boot, n_events))
    by_events, both = [], []
    for group in values:
        by_events.append(group[:, event_draws].mean(axis=2).mean(axis=0))  # (runs, n_boot, events) -> n_boot
        run_draws = rng.integers(0, len(group), size=(n_boot, len(group)))
        both.append(group[run_draws[:, :, None], event_draws[:, None, :]].mean(axis=(1, 2)))
    return np.array(by_events), np.array(both)


def _interval(resamples: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(resamples, [2.5, 97.5])
    return float(low), float(high)


def replicate_bootstrap(
    runs: Sequence[Mapping[str, float]], *, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Pool replicate runs of one recipe (e.g. training seeds) scored on the same events.

    Each run gives one value per event (its event mean of a step metric, e.g. Brier minus uniform
    paired on identical steps). A run's estimate is the mean of its event values, as in
    :func:`event_bootstrap`; the pooled estimate is the mean over runs. Two 95 % intervals:

    * ``ci_events``: events resampled (the same draw for every run: they are the same questions),
      runs fixed. What these runs, averaged, would score on other events like these; it says nothing
      about another run of the recipe.
    * ``ci_runs_and_events``: runs resampled with replacement as well (a two-level bootstrap). What
      the recipe is expected to score, its training randomness included. With few runs it is rough
      (two runs give three distinct draws) and too narrow on average: a bootstrap over ``k`` runs
      puts the variance of their mean at ``(k - 1) / k`` of its unbiased estimate.

    Args:
        runs: per run, ``{event_id: value}``; every run must hold the same events.
        n_boot: bootstrap resamples.
        seed: bootstrap seed (same seed, same intervals).

    Returns:
        ``{"runs", "events", "per_run", "mean", "between_run_sd", "ci_events", "ci_runs_and_events"}``:
        ``per_run`` the runs' estimates in the order given, ``between_run_sd`` their standard deviation
        (ddof 1; NaN for one run); with one event the intervals are NaN, with one run the two
        intervals are the same (the same event draws).

    Raises:
        DataError: no run, a run with no event, or runs that hold different events.
    """
    (values,) = _replicate_values([runs])
    per_run = values.mean(axis=1)
    out: dict[str, Any] = {
        "runs": len(runs),
        "events": values.shape[1],
        "per_run": [float(v) for v in per_run],
        "mean": float(per_run.mean()),
        "between_run_sd": float(per_run.std(ddof=1)) if len(runs) > 1 else float("nan"),
    }
    if values.shape[1] < 2:
        out["ci_events"] = out["ci_runs_and_events"] = (float("nan"), float("nan"))
        return out
    by_events, both = _replicate_resamples([values], n_boot, seed)
    out["ci_events"], out["ci_runs_and_events"] = _interval(by_events[0]), _interval(both[0])
    return out


def replicate_difference(
    runs: Sequence[Mapping[str, float]],
    against: Sequence[Mapping[str, float]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The mean over ``runs`` minus the mean over ``against``: two recipes' replicates on the same events.

    The intervals are :func:`replicate_bootstrap`'s, for the difference: ``ci_events`` resamples the
    events (one draw for both recipes: paired on events), ``ci_runs_and_events`` also resamples each
    recipe's runs among its own. With one run on a side, that side's training randomness is not in
    the interval at all, which is why one run per arm cannot tell a format from the spread.

    Args:
        runs: per run of the first recipe, ``{event_id: value}``.
        against: per run of the second recipe, the same events.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        ``{"runs", "against", "events", "mean", "ci_events", "ci_runs_and_events"}`` (run counts of
        each side; NaN intervals with one event).

    Raises:
        DataError: a side without runs, a run with no event, or runs that hold different events.
    """
    values, other = _replicate_values([runs, against])
    out: dict[str, Any] = {
        "runs": len(runs),
        "against": len(against),
        "events": values.shape[1],
        "mean": float(values.mean() - other.mean()),
    }
    if values.shape[1] < 2:
        out["ci_events"] = out["ci_runs_and_events"] = (float("nan"), float("nan"))
        return out
    by_events, both = _replicate_resamples([values, other], n_boot, seed)
    out["ci_events"] = _interval(by_events[0] - by_events[1])
    out["ci_runs_and_events"] = _interval(both[0] - both[1])
    return out


def _metric_function(metric: str | Callable[[Row], float | None]) -> Callable[[Row], float | None]:
    if callable(metric):
        return metric
    if metric == "tokens":
        return tokens_of
    if metric == "tool_calls":
        return tool_calls_of
    return lambda row: step_metrics(row).get(metric)


# ---------------------------------------------------------------------------- new evidence and capture


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 3:
        return float("nan")
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def new_evidence_items(row: Row, previous_date: str) -> set[str]:
    """The documents a memory-on step's notebook records as new since the previous forecast date.

    An entry is new when its date lies in ``[previous_date, forecast date)``; its ``doc_ids`` are the items.

    Args:
        row: a memory-on row (``notebook_evidence``, ``cutoff``).
        previous_date: the previous step's forecast date (``YYYY-MM-DD``).

    Returns:
        The ids (empty without a notebook).
    """
    today = str(row["cutoff"])[:10]
    return {
        doc_id
        for entry in row.get("notebook_evidence") or []
        if previous_date <= str(entry.get("date", "")) < today
        for doc_id in entry.get("doc_ids") or []
    }


def evidence_capture(rows: Sequence[Row], *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Forecast-Dojo's new evidence between dates and each agent's evidence capture, from dated notebook entries.

    At every (event, step >= 1, rollout) that two or more memory-on forecasters played, each one's
    *new evidence* is :func:`new_evidence_items` since the previous forecast date. The step's index
    is the number of distinct new documents they found together; a forecaster's *capture* at the
    step is the share of the new documents the **others** found that it recorded too (leave-one-
    model-out, defined where the others found any). A forecaster's capture is the event mean (with
    an event-bootstrap interval); ``improvement_correlation`` is the Pearson correlation, across its
    events, of its mean capture with its first-to-last improvement (Brier at its first step minus at
    its last; NaN with fewer than three events).

    Args:
        rows: evaluation rows (memory-on rows carry ``notebook_evidence``).
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        ``{"per_step": [{"event_id", "step", "rollout", "forecasters", "index"}], "forecasters":
        [{"agent", "memory", "capture", "capture_ci", "steps", "improvement_correlation"}]}``, or an
        empty dict when no step was played by two memory-on forecasters.
    """
    notebook_rows = [r for r in rows if r.get("notebook_evidence") is not None]
    dates: dict[tuple[str, int], str] = {}
    for r in notebook_rows:
        dates.setdefault((r["event_id"], int(r["step"])), str(r["cutoff"])[:10])
    by_key: dict[tuple[str, int, Any], dict[tuple[str, str], set[str]]] = defaultdict(dict)
    for r in notebook_rows:
        step = int(r["step"])
        previous = dates.get((r["event_id"], step - 1))
        if step >= 1 and previous is not None:
            by_key[(r["event_id"], step, r.get("rollout"))][forecaster(r)] = new_evidence_items(r, previous)
    per_step = []
    captures: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (event_id, step, rollout), found in sorted(by_key.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(found) < 2:
            continue
        pooled = set().union(*found.values())
        per_step.append(
            {
                "event_id": event_id,
                "step": step,
                "rollout": rollout,
                "forecasters": len(found),
                "index": len(pooled),
            }
        )
        for who, items in found.items():
            others = set().union(*(v for w, v in found.items() if w != who))
            if others:
                captures[who][event_id].append(len(items & others) / len(others))
    if not per_step:
        return {}
    improvement: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for who, group in group_rows(rows).items():
        for event_id in {r["event_id"] for r in group}:
            steps = sorted((r for r in group if r["event_id"] == event_id), key=lambda r: int(r["step"]))
            first, last = steps[0], steps[-1]
            improvement[who][event_id] = brier_loss(first["forecast"], first["outcome_index"]) - brier_loss(
                last["forecast"], last["outcome_index"]
            )
    out = []
    for who, by_event in sorted(captures.items()):
        mean, low, high = event_bootstrap(by_event, n_boot=n_boot, seed=seed)
        events = sorted(e for e in by_event if e in improvement[who])
        correlation = _pearson(
            [sum(by_event[e]) / len(by_event[e]) for e in events], [improvement[who][e] for e in events]
        )
        out.append(
            {
                "agent": who[0],
                "memory": who[1],
                "capture": mean,
                "capture_ci": (low, high),
                "steps": sum(map(len, by_event.values())),
                "improvement_correlation": correlation,
            }
        )
    return {"per_step": per_step, "forecasters": out}


# ---------------------------------------------------------------------------- breakdowns


def life_third(step: int, n_steps: int) -> str:
    """Which third of an event's life a step falls in: ``first``, ``middle`` or ``last``.

    Args:
        step: 0-based step index.
        n_steps: the event's number of steps.

    Returns:
        The third's name (a one-step event is ``first``).
    """
    return THIRDS[min(3 * step // max(n_steps, 1), 2)]


def horizon_bucket(days: float) -> str:
    """The horizon bucket (days from the forecast date to the question's close) of a step."""
    for low, high, name in HORIZON_BUCKETS:
        if days <= high and days >= low:
            return name
    return HORIZON_BUCKETS[0][2] if days < 0 else HORIZON_BUCKETS[-1][2]


def breakdown(
    rows: Sequence[Row],
    key: Callable[[Row], Any],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    order: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """Mean Brier (and its interval) per forecaster and per value of ``key`` (e.g. life third, source).

    Args:
        rows: evaluation rows.
        key: function of a row giving its slice (rows where it is None are skipped).
        n_boot: bootstrap resamples.
        seed: bootstrap seed.
        order: the slices' natural order (e.g. :data:`THIRDS`); slices not in it follow, as text.

    Returns:
        One ``{"agent", "memory", "slice", "events", "steps", "brier", "brier_ci"}`` per non-empty cell,
        by forecaster, then slice in ``order``.
    """
    cells: dict[tuple[str, str, Any], list[Row]] = defaultdict(list)
    for row in rows:
        k = key(row)
        if k is not None:
            cells[(*forecaster(row), k)].append(row)
    out = []
    rank = {value: i for i, value in enumerate(order)}

    def position(cell: tuple[str, str, Any]) -> tuple[str, str, int, str]:
        agent, memory, value = cell
        return agent, memory, rank.get(value, len(rank)), str(value)

    for (agent, memory, value), group in sorted(cells.items(), key=lambda kv: position(kv[0])):
        mean, low, high = event_bootstrap(
            _by_event(group, lambda r: brier_loss(r["forecast"], r["outcome_index"])),
            n_boot=n_boot,
            seed=seed,
        )
        out.append(
            {
                "agent": agent,
                "memory": memory,
                "slice": value,
                "events": len({r["event_id"] for r in group}),
                "steps": len(group),
                "brier": mean,
                "brier_ci": (low, high),
            }
        )
    return out


def by_life_third(rows: Sequence[Row], **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`breakdown` by the third of the event's life (rows need ``n_steps``)."""
    return breakdown(
        rows,
        lambda r: life_third(int(r["step"]), int(r["n_steps"])) if r.get("n_steps") else None,
        order=THIRDS,
        **kwargs,
    )


def by_horizon(rows: Sequence[Row], **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`breakdown` by horizon bucket (rows need ``horizon_days``)."""
    return breakdown(
        rows,
        lambda r: horizon_bucket(r["horizon_days"]) if r.get("horizon_days") is not None else None,
        order=HORIZONS,
        **kwargs,
    )


def by_source(rows: Sequence[Row], **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`breakdown` by event source (rows need ``source``)."""
    return breakdown(rows, lambda r: r.get("source"), **kwargs)


def market_coverage(rows: Sequence[Row]) -> dict[str, Any]:
    """How many distinct (event, step) pairs have a market value, out of all pairs seen."""
    pairs = {(r["event_id"], int(r["step"])) for r in rows}
    covered = {(r["event_id"], int(r["step"])) for r in rows if r.get("market") is not None}
    return {
        "steps": len(pairs),
        "with_market": len(covered),
        "share": len(covered) / len(pairs) if pairs else 0.0,
    }


def contamination_split(rows: Sequence[Row], knowledge_cutoff: str) -> dict[str, list[Row]]:
    """Split rows by whether their event opened before a model's knowledge cutoff (ISO date).

    Events that opened before the cutoff may be known to the model from pre-training, so scores are
    reported on all events and on the ``after`` set alone.

    Args:
        rows: evaluation rows with ``open_at`` (ISO text).
        knowledge_cutoff: the model's cutoff, ``YYYY-MM-DD``.

    Returns:
        ``{"before": rows of events opened before the cutoff, "after": the others}``.
    """
    out: dict[str, list[Row]] = {"before": [], "after": []}
    for row in rows:
        out["before" if str(row.get("open_at", ""))[:10] < knowledge_cutoff else "after"].append(row)
    return out


def format_table(table: Sequence[dict[str, Any]], market: dict[str, Any] | None = None) -> str:
    """A fixed-width text table of :func:`summarize` output in the field's conventions.

    Brier and log loss are losses (lower is better); the Brier Index and accuracy are higher-is-better.
    The market's row is marked with the share of steps it covers.

    Args:
        table: :func:`summarize` lines.
        market: optional :func:`market_coverage` result (used to mark the market's row).

    Returns:
        The table as text.
    """
    names = []
    for line in table:
        name = line["agent"]
        if name == "market" and market is not None and market["steps"]:
            name = f"market ({market['with_market']}/{market['steps']} steps)"
        names.append(name)
    wide = max([22, *map(len, names)])  # columns stay aligned however long a label or mode is
    mode_wide = max([15, *(len(line["memory"]) for line in table)])
    header = (
        f"{'agent':<{wide}} {'mode':<{mode_wide}} {'events':>6} {'steps':>6}  {'Brier (95% CI), lower is better':>32}"
        f"  {'BI':>5}  {'log loss':>8}  {'acc':>5}  {'ECE':>5}  {'fail':>5}"
    )
    lines = [header, "-" * len(header)]
    for name, line in zip(names, table, strict=True):
        low, high = line["brier_ci"]
        ci = f"{line['brier']:.4f} [{low:.4f}, {high:.4f}]" if not math.isnan(low) else f"{line['brier']:.4f}"
        lines.append(
            f"{name:<{wide}} {line['memory']:<{mode_wide}} {line['events']:>6} {line['steps']:>6}  {ci:>32}"
            f"  {line['brier_index']:>5.1f}  {line['log_loss']:>8.4f}  {line['accuracy']:>5.3f}"
            f"  {line['ece']:>5.3f}  {line['failure_any']:>5.1%}"
        )
    return "\n".join(lines)
