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

Free-form questions (no fixed outcomes: the forecaster proposes outcomes, an answer is known) are
scored by FutureSim's adaptation of the multiclass Brier rule, :func:`free_form_score`:
``1 - (1 - p(answer))^2 - sum over the other proposed outcomes p(o)^2`` (all mass on the answer: 1, no
forecast: 0, all mass on a wrong outcome: -1), with proposed outcomes matched to the answer up to
case, whitespace and punctuation (:func:`normalize_answer`) and aliases; :func:`top1_accuracy` is its
accuracy. On a question with fixed outcomes and a full distribution it equals ``1 - brier_loss``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from forecast_dojo.schema import MAX_FREE_FORM_OUTCOMES, MAX_LABEL_CHARS
from forecast_dojo.untrusted import preview

LOG_FLOOR = 1e-3
FREE_FORM_TOLERANCE = 1e-6  # how far above 1 a free-form forecast's total may round


def softmax(logits: Sequence[float]) -> list[float]:
    """The distribution ``e^x_i / sum_j e^x_j`` of log odds (any common offset), computed without overflow."""
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


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


def round_distribution(probabilities: Sequence[float], digits: int = 2) -> list[float]:
    """Probabilities rounded as a person writes them: ``digits`` decimals, none below 10^-digits, summing to 1.

    The rounding error is added to the largest probability; with many outcomes (K (K + 1) >= 10^digits,
    e.g. 10 or more at two decimals) more decimals are used, so that it always stays above the floor.
    """
    k = len(probabilities)
    while k * (k + 1) * 10**-digits >= 1:
        digits += 1
    unit = 10**-digits
    rounded = [max(round(p, digits), unit) for p in probabilities]
    top = max(range(len(rounded)), key=lambda i: rounded[i])
    rounded[top] = round(rounded[top] + 1.0 - sum(rounded), digits)
    return rounded


_NON_WORD = re.compile(r"[\W_]+")


def normalize_answer(text: str) -> str:
    """An outcome or answer as free-form matching compares it: case, whitespace and punctuation removed.

    Unicode is NFKC-normalized and case-folded, every run of punctuation, symbols and whitespace
    becomes one space, and the ends are stripped: ``"  The Tide of Gremsen!"`` and ``"the tide of
    gremsen"`` match, ``"U.S."`` and ``"U S"`` match. Letters with accents keep them.

    Args:
        text: The text.

    Returns:
        Its normal form (empty for text of punctuation only).
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NON_WORD.sub(" ", folded).strip()


def answer_matches(outcome: str, answer: str, aliases: Iterable[str] = ()) -> bool:
    """Whether a proposed outcome names the answer (or one of its aliases) up to :func:`normalize_answer`."""
    key = normalize_answer(outcome)
    return bool(key) and key in {normalize_answer(a) for a in (answer, *aliases)}


def _names_answer(
    outcome: str, answer: str, aliases: tuple[str, ...], judge: Callable[[str, str], bool] | None
) -> bool:
    """Whether a proposed outcome is the answer: by :func:`answer_matches`, else by the ``judge`` when one is given."""
    return answer_matches(outcome, answer, aliases) or (judge is not None and judge(outcome, answer))


def free_form_score(
    probabilities: Mapping[str, float],
    answer: str,
    aliases: Iterable[str] = (),
    *,
    judge: Callable[[str, str], bool] | None = None,
) -> float:
    """FutureSim's free-form Brier score: ``1 - (1 - p(answer))^2 - sum_{other proposed o} p(o)^2``.

    ``p(answer)`` is the total probability of the proposed outcomes that match the answer (see
    :func:`answer_matches`; a ``judge`` may accept paraphrases the normal form misses); every other
    proposed outcome is penalized by its squared probability. Probabilities need not sum to 1 (mass
    left unassigned goes to "something else"). Anchors: all mass on the answer scores 1, no forecast
    (an empty mapping) 0, all mass on one wrong outcome -1. On a full distribution over fixed outcomes
    it is ``1 - brier_loss``.

    Args:
        probabilities: Proposed outcome -> probability (each in [0, 1]; the env checks this).
        answer: The realized answer.
        aliases: Other names of the answer.
        judge: Optional ``judge(outcome, answer) -> bool`` asked about outcomes that do not match by
            normal form (e.g. an LLM judge with a cache); never asked when it is None.

    Returns:
        The score, in [-(number of wrong outcomes), 1]; in [-1, 1] when the probabilities sum to at most 1.
    """
    aliases = tuple(aliases)
    right = 0.0
    wrong = 0.0
    for outcome, p in probabilities.items():
        if _names_answer(outcome, answer, aliases, judge):
            right += float(p)
        else:
            wrong += float(p) ** 2
    return 1.0 - (1.0 - right) ** 2 - wrong


def top1_accuracy(
    probabilities: Mapping[str, float],
    answer: str,
    aliases: Iterable[str] = (),
    *,
    judge: Callable[[str, str], bool] | None = None,
) -> float:
    """Top-1 accuracy of a free-form forecast: the share of its most probable outcomes that match the answer.

    Ties count fractionally (two outcomes tied at the top, one right: 0.5), as the fixed-outcome
    metrics do; no forecast (an empty mapping, or all probabilities 0) scores 0.

    Args:
        probabilities: Proposed outcome -> probability.
        answer: The realized answer.
        aliases: Other names of the answer.
        judge: Optional paraphrase judge (see :func:`free_form_score`).

    Returns:
        A number in [0, 1].
    """
    if not probabilities:
        return 0.0
    top = max(float(p) for p in probabilities.values())
    if top <= 0.0:
        return 0.0
    best = [o for o, p in probabilities.items() if float(p) == top]
    aliases = tuple(aliases)
    hits = sum(1 for o in best if _names_answer(o, answer, aliases, judge))
    return hits / len(best)


def read_free_form(value: Any) -> tuple[dict[str, float] | None, str | None]:
    """A free-form forecast as both envs read it (world mode, and fixed-date free-form questions): ``{outcome: p}``, each p in [0, 1], summing to at most 1.

    Outcomes are non-empty labels of at most :data:`~forecast_dojo.schema.MAX_LABEL_CHARS` characters,
    at most :data:`~forecast_dojo.schema.MAX_FREE_FORM_OUTCOMES` of them, distinct up to
    :func:`~forecast_dojo.scoring.normalize_answer` (so two spellings of one name are one outcome).

    Args:
        value: The decoded argument (anything a model can write).

    Returns:
        ``(forecast, None)`` when valid, else ``(None, error)``.
    """
    if not isinstance(value, dict):
        return None, "a free-form forecast must be an object {outcome: probability}"
    if len(value) > MAX_FREE_FORM_OUTCOMES:
        return None, f"at most {MAX_FREE_FORM_OUTCOMES} proposed outcomes, got {len(value)}"
    out: dict[str, float] = {}
    seen: dict[str, str] = {}
    for label, p in value.items():
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
            return None, f"outcomes must be non-empty labels of at most {MAX_LABEL_CHARS} characters"
        key = normalize_answer(label)
        if not key:
            return None, f"outcome {preview(label)} has no letters or digits"
        if key in seen:
            return None, f"outcomes {preview(seen[key])} and {preview(label)} name the same thing"
        seen[key] = label
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            return None, f"probability of {preview(label)} must be a number, got {preview(p)}"
        try:
            number = float(p)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            return None, f"probability of {preview(label)} must be in [0, 1], got {preview(p)}"
        out[label] = number
    total = sum(out.values())
    if total > 1.0 + FREE_FORM_TOLERANCE:
        return None, f"probabilities sum to {total:.6g}; they may sum to less than 1, never more"
    return out, None


def free_form_distribution(
    probabilities: Mapping[str, float],
    answer: str,
    aliases: Iterable[str] = (),
    *,
    judge: Callable[[str, str], bool] | None = None,
) -> tuple[list[str], list[float]]:
    """A free-form forecast as a distribution whose first label is the answer, for the K-outcome metrics.

    The mass of the proposed outcomes that name the answer is pooled on ``answer`` (first, 0 when
    none does); every other proposed outcome follows with its probability. With outcome index 0,
    ``brier_loss`` of it is ``1 - free_form_score`` exactly, so a fixed-date step record of a
    free-form question is read by the evaluation metrics like any other (researcher-facing only:
    the first label is the answer).

    Args:
        probabilities: Proposed outcome -> probability.
        answer: The realized answer.
        aliases: Other names of the answer.
        judge: Optional paraphrase judge (see :func:`free_form_score`).

    Returns:
        ``(labels, probabilities)``; the realized outcome's index is 0.
    """
    aliases = tuple(aliases)
    right = 0.0
    labels, values = [answer], [0.0]
    for outcome, p in probabilities.items():
        if _names_answer(outcome, answer, aliases, judge):
            right += float(p)
        else:
            labels.append(outcome)
            values.append(float(p))
    values[0] = right
    return labels, values
