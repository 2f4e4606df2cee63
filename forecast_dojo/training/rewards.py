"""Reward functions for TRL trainers: ``fn(completions, **kwargs) -> list[float]``.

A completion (TRL's conversational form: a list of messages, or plain text) is scored by the first
``submit_forecast`` call in it, read as the env reads it (``forecast_dojo.actions.parse_action``, then
the tools' own forecast reader :func:`forecast_dojo.tools.read_forecast`: ``probabilities``, or ``log_odds`` and ``evidence``),
against the realized outcome (the dataset's ``outcome_index`` column, passed by TRL as a keyword).

Invalid and missing forecasts score as the uniform forecast minus a penalty (missing > invalid by
default). The env itself records the uniform fallback for both, which gives every rollout of a group
the same reward once none submits a valid forecast, and so no learning signal; the penalties keep the
ordering "valid > invalid > nothing submitted" that a group can learn from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forecast_dojo.actions import parse_action
from forecast_dojo.scoring import SCORING_RULES, uniform
from forecast_dojo.tools import SUBMIT_FORECAST
from forecast_dojo.tools import read_forecast as read_forecast  # the env's one reader, re-exported
from forecast_dojo.tools import read_probabilities as read_probabilities

INVALID_PENALTY = 0.25
MISSING_PENALTY = 0.5


@dataclass(frozen=True)
class Submission:
    """What a completion submitted: the forecast (None if invalid or missing) and why it is missing."""

    forecast: tuple[float, ...] | None
    error: str | None  # None when valid; "missing" when no submit_forecast call was found


def _assistant_turns(completion: Any) -> list[Any]:
    if isinstance(completion, str):
        return [completion]
    if isinstance(completion, dict):
        return [completion]
    return [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]


def find_submission(completion: Any, outcomes: Sequence[str]) -> Submission:
    """The first ``submit_forecast`` call of a completion (messages or text), validated.

    Args:
        completion: a list of messages, one assistant message, or the raw text of a reply.
        outcomes: the event's outcome labels.

    Returns:
        The submission; ``error="missing"`` when no call was found.
    """
    for turn in _assistant_turns(completion):
        parsed = parse_action(turn)
        for call in parsed.tool_calls:
            if call.name != SUBMIT_FORECAST:
                continue
            if call.error is not None or not isinstance(call.arguments, dict):
                return Submission(None, call.error or "arguments are not an object")
            forecast, error = read_forecast(call.arguments, outcomes)
            return Submission(forecast, error)
    return Submission(None, "missing")


def step_reward(
    submission: Submission,
    outcome_index: int,
    n_outcomes: int,
    *,
    rule: str = "brier",
    invalid_penalty: float = INVALID_PENALTY,
    missing_penalty: float = MISSING_PENALTY,
) -> float:
    """The reward of one step: the proper score of a valid forecast, else uniform's score minus a penalty."""
    score = SCORING_RULES[rule]
    if submission.forecast is not None:
        return float(score(submission.forecast, outcome_index))
    return float(score(uniform(n_outcomes), outcome_index)) - penalty(
        submission, invalid_penalty=invalid_penalty, missing_penalty=missing_penalty
    )


def penalty(
    submission: Submission,
    *,
    invalid_penalty: float = INVALID_PENALTY,
    missing_penalty: float = MISSING_PENALTY,
) -> float:
    """What :func:`step_reward` subtracts from uniform's score: 0 for a valid forecast, else the penalty for its error.

    A served env (``forecast_dojo.integrations``) scores the uniform fallback itself; its clients subtract this.
    """
    if submission.forecast is not None:
        return 0.0
    return missing_penalty if submission.error == "missing" else invalid_penalty


def _outcomes_of(kwargs: dict[str, Any], index: int) -> list[str]:
    outcomes = kwargs["outcomes"][index]
    return json.loads(outcomes) if isinstance(outcomes, str) else list(outcomes)


def proper_score_reward(
    completions: list[Any],
    outcome_index: list[int],
    outcomes: list[Sequence[str]],
    rule: str = "brier",
    invalid_penalty: float = INVALID_PENALTY,
    missing_penalty: float = MISSING_PENALTY,
    **kwargs: Any,
) -> list[float]:
    """Score each completion's submitted forecast (TRL reward-function signature).

    Args:
        completions: TRL's completions (lists of messages, or strings).
        outcome_index: the realized outcome per completion (a dataset column).
        outcomes: the outcome labels per completion (a dataset column).
        rule: ``brier`` (negative Brier), ``log`` or ``spherical``.
        invalid_penalty: subtracted from uniform's score when the forecast is invalid.
        missing_penalty: subtracted from uniform's score when nothing was submitted.
        **kwargs: the other columns TRL passes (ignored).

    Returns:
        One reward per completion.
    """
    rewards = []
    for i, completion in enumerate(completions):
        labels = _outcomes_of({"outcomes": outcomes}, i)
        submission = find_submission(completion, labels)
        rewards.append(
            step_reward(
                submission,
                int(outcome_index[i]),
                len(labels),
                rule=rule,
                invalid_penalty=invalid_penalty,
                missing_penalty=missing_penalty,
            )
        )
    return rewards


def brier_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Negative Brier score of the submitted forecast (penalized uniform when invalid or missing)."""
    return proper_score_reward(completions, rule="brier", **kwargs)


def log_score_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Log score (floored at 1e-3) of the submitted forecast (penalized uniform when invalid or missing)."""
    return proper_score_reward(completions, rule="log", **kwargs)


def valid_forecast_reward(
    completions: list[Any], outcomes: list[Sequence[str]], **kwargs: Any
) -> list[float]:
    """1.0 for a valid submitted forecast, 0.0 otherwise (a format reward; add it with a small weight)."""
    return [
        1.0 if find_submission(c, _outcomes_of({"outcomes": outcomes}, i)).forecast is not None else 0.0
        for i, c in enumerate(completions)
    ]
