"""The Bayes-optimal baseline: the exact posterior of a synthetic event at each forecast cutoff.

Because the generator knows every evidence document's likelihood (see ``world.py``), the optimum is
computable exactly; an agent's score is then reported as regret against it. The oracle is for
evaluation only and must never reach the agent.

The posterior at a cutoff is the prior times the likelihoods of the evidence documents available
strictly before it (:func:`log_posteriors_at`); the generator also builds each event's reference
market from it. Scores here are losses (lower is better), unlike ``forecast_dojo.scoring``'s rewards:
:func:`~forecast_dojo.scoring.brier_loss` is the multi-class ``sum_j (p_j - [j == outcome])**2`` (0
perfect, 2 worst), i.e. ``-scoring.brier_score``, and :func:`~forecast_dojo.scoring.log_loss` is
``-ln max(p_outcome, 1e-3)`` (both from :mod:`forecast_dojo.scoring`, re-exported here). The oracle
table's ``brier`` and ``log_loss`` columns hold these losses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from forecast_dojo.errors import InputNotFoundError
from forecast_dojo.errors import OracleError as OracleError
from forecast_dojo.scoring import brier_loss as brier_loss  # re-exported (forecast_dojo.synthetic)
from forecast_dojo.scoring import log_loss as log_loss
from forecast_dojo.synthetic.model import Evidence, SyntheticWorld
from forecast_dojo.timeutil import iso, to_micros


def log_posteriors_at(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoffs_us: Sequence[int]
) -> np.ndarray:
    """Normalized log posteriors, one row per cutoff, given the evidence available strictly before it.

    Each row is the log prior plus the summed log likelihoods of the visible documents, minus their
    logsumexp.
    """
    k = len(prior)
    available_us = np.array([to_micros(item.available_at) for item in evidence], dtype=np.int64)
    log_likelihood = np.log(
        np.array([item.likelihood for item in evidence], dtype=np.float64).reshape(len(evidence), k)
    )
    visible = (available_us[None, :] < np.asarray(cutoffs_us, dtype=np.int64).reshape(-1, 1)).astype(
        np.float64
    )
    # An explicit sum (not a BLAS product) so one cutoff or many give bit-identical rows.
    log_posterior = np.log(np.asarray(prior, dtype=np.float64))[None, :] + (
        visible[:, :, None] * log_likelihood[None, :, :]
    ).sum(axis=1)
    top = log_posterior.max(axis=1, keepdims=True)
    return log_posterior - (top + np.log(np.exp(log_posterior - top).sum(axis=1, keepdims=True)))


def posteriors_at(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoffs_us: Sequence[int]
) -> np.ndarray:
    """Exact posteriors, one row per cutoff (see :func:`log_posteriors_at`)."""
    return np.exp(log_posteriors_at(prior, evidence, cutoffs_us))


def posterior_from_evidence(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoff_us: int
) -> tuple[float, ...]:
    """Exact posterior given the evidence available strictly before ``cutoff_us``."""
    return tuple(float(p) for p in posteriors_at(prior, evidence, [cutoff_us])[0])


def oracle_forecast(world: SyntheticWorld, event_id: str, cutoff: datetime) -> tuple[float, ...]:
    """Exact posterior over the event's outcomes given its evidence with ``available_at < cutoff``."""
    if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
        raise OracleError(f"cutoff must be a timezone-aware datetime, got {cutoff!r}")
    event = world.event(event_id)
    return posterior_from_evidence(world.prior[event.id], world.evidence[event.id], to_micros(cutoff))


def oracle_table(world: SyntheticWorld) -> list[dict[str, Any]]:
    """One row per (event, step): the oracle's forecast at that cutoff and its scores.

    Keys: ``event_id``, ``step``, ``cutoff`` (ISO text), ``probabilities`` (over the event's outcomes, in
    order), ``outcome_index``, ``n_evidence`` (evidence documents visible), ``brier``, ``log_loss``.
    """
    rows = []
    for event in world.events:
        evidence = world.evidence[event.id]
        posteriors = posteriors_at(world.prior[event.id], evidence, [to_micros(c) for c in event.cutoffs])
        for step, cutoff in enumerate(event.cutoffs):
            probabilities = tuple(float(p) for p in posteriors[step])
            rows.append(
                {
                    "event_id": event.id,
                    "step": step,
                    "cutoff": iso(cutoff),
                    "probabilities": list(probabilities),
                    "outcome_index": event.outcome_index,
                    "n_evidence": sum(1 for ev in evidence if to_micros(ev.available_at) < to_micros(cutoff)),
                    "brier": brier_loss(probabilities, event.outcome_index),
                    "log_loss": log_loss(probabilities, event.outcome_index),
                }
            )
    return rows


def save_oracle(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write an oracle table as JSONL (atomically: a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def load_oracle(path: str | Path) -> dict[tuple[str, int], tuple[float, ...]]:
    """Read an oracle JSONL file into ``{(event_id, step): probabilities}``; bad rows fail the load."""
    path = Path(path)
    if not path.exists():
        raise InputNotFoundError(f"oracle file not found: {path}")
    table: dict[tuple[str, int], tuple[float, ...]] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = (str(row["event_id"]), int(row["step"]))
                probabilities = tuple(float(p) for p in row["probabilities"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise OracleError(f"{path}:{lineno}: not an oracle row ({err})") from err
            if key in table:
                raise OracleError(f"{path}:{lineno}: duplicate row for event {key[0]!r} step {key[1]}")
            if not probabilities or abs(sum(probabilities) - 1.0) > 1e-9 or min(probabilities) < 0.0:
                raise OracleError(
                    f"{path}:{lineno}: probabilities {list(probabilities)} are not a distribution"
                )
            table[key] = probabilities
    return table
