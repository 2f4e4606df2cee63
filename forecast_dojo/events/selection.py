"""Selection filters: which imported events are worth replaying. Each filter's removals are counted.

Filters run in this order (cheap first), and an event is counted under the first filter that drops it:

1. ``language``: the question is English and not personal (rules in :func:`language_problem`).
2. ``horizon``: the tradeable lifetime spans at least ``min_horizon_days`` UTC calendar days.
3. ``faithfulness``: where trade data exist (``extra["market_granularity"] == "trades"``), enough of
   the lifetime's days have coherent prices and no unfaithful run is too long.
4. ``non_triviality``: the market did not already give near-certainty to the realized outcome at the
   first forecast date the schedule uses (the latest belief at or before it, or the first one at most
   ``near_certain_max_lag_days`` after it; not judged when neither exists), and the series is not
   both flat and directionless, a judgment made only on a dense series (at least
   ``flat_min_points`` points, no gap over ``flat_max_gap_days``): two or three sparse snapshots
   that happen to agree say nothing about what happened between them.
5. ``evidence``: the corpus holds at least ``evidence_min_documents`` documents matching the question
   (``forecast_dojo.events.relevance``) in the ``evidence_lookback_days`` before the last possible
   forecast date; an optional judge callable may replace the count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

from forecast_dojo.events.relevance import Match, MatchRule, RelevanceIndex
from forecast_dojo.events.schedule import CloseBuffer
from forecast_dojo.schema import Event, MarketPoint
from forecast_dojo.timeutil import iso

# An optional judge: given an event and the (doc_id, title, text) of its best evidence, say if it suffices.
EvidenceJudge = Callable[[Event, list[tuple[str, str, str]]], bool]

FILTER_ORDER = ("language", "horizon", "faithfulness", "non_triviality", "evidence")


@dataclass(frozen=True)
class SelectionConfig(CloseBuffer):
    """Thresholds of the filters (defaults follow Forecast-Dojo where it states one)."""

    min_horizon_days: int = 8
    min_faithful_fraction: float = 0.8
    max_unfaithful_run_days: int = 7
    near_certain: float = 0.95
    flat_max_range: float = 0.05
    directionless_max_drift: float = 0.02
    flat_min_points: int = 5
    flat_max_gap_days: float = 7.0
    near_certain_max_lag_days: float = 7.0
    evidence_lookback_days: int = 90
    evidence_min_coverage: float = 0.4
    evidence_min_shared_terms: int = 2
    evidence_min_similarity: float = 0.0
    evidence_min_documents: int = 2
    evidence_top_k: int = 20
    require_english: bool = True
    drop_personal: bool = True

    @property
    def evidence_rule(self) -> MatchRule:
        """When a document counts as evidence for a question (the ``evidence_min_*`` thresholds)."""
        return MatchRule(
            self.evidence_min_coverage, self.evidence_min_shared_terms, self.evidence_min_similarity
        )


@dataclass
class SelectionResult:
    """Kept events, removed event ids by filter, and per-event evidence scores for the report."""

    kept: list[Event] = field(default_factory=list)
    removed: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in FILTER_ORDER})
    reasons: dict[str, str] = field(default_factory=dict)
    evidence_scores: dict[str, int] = field(default_factory=dict)
    skipped_filters: list[str] = field(default_factory=list)
    # event id -> {"decision": "kept" | "dropped", "rule", "reason", "numbers"}: every event's record.
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Counts kept and removed by filter, a few removed ids per filter, and the filters not run."""
        return {
            "kept": len(self.kept),
            "removed": {name: len(ids) for name, ids in self.removed.items()},
            "removed_examples": {name: ids[:5] for name, ids in self.removed.items() if ids},
            "not_run": self.skipped_filters,
        }


# ---------------------------------------------------------------- language and quality


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ENGLISH = _word_set(
    "the of and to in is will be by on for at this that with from before after than have has or "
    "what which who does did are was were any more less end between during"
)
_FOREIGN = _word_set(
    # Spanish, Portuguese, French, German, Italian function words that are not English words.
    "el los las del una unos para por con sobre antes después entre será sera habrá habra cuál cual "
    "qué que como más mas según durante hasta año años também uma seja ser pelo pela dos das "
    "le les des du est sera avant après une aux pour dans sur "
    "der das und ist wird vor nach bis ein eine dem den zum zur nicht "
    "il della delle degli sarà prima dopo"
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_FIRST_PERSON = re.compile(r"\b(my|mine|myself)\b", re.IGNORECASE)
_PRONOUN_I = re.compile(r"(?:^|(?<=[\s\"'(]))(\w+\s+)?I(?:'(?:m|ll|ve|d))?\s+([a-z]\w*)")
_ORDINAL_CONTEXT = _word_set(
    "war phase title class type grade stage part chapter season category division league act section level world"
)


def is_english(text: str) -> bool:
    """Whether ``text`` is English, by a stop-word vote.

    English unless foreign function words outnumber English ones (at least two) or most letters are
    non-ASCII. The vote needs no model and is stable on one-sentence questions.
    """
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return False
    letters = [c for c in text if c.isalpha()]
    if letters and sum(not c.isascii() for c in letters) / len(letters) > 0.3:
        return False
    english = sum(w in _ENGLISH for w in words)
    foreign = sum(w in _FOREIGN for w in words)
    return not (foreign >= 2 and foreign > english)


def is_personal(question: str) -> bool:
    """Whether a question is in the first-person singular ("Will I ...", "my video game").

    Such questions resolve on one person's private life, which no news corpus covers. The rule: "my",
    "mine" or "myself" anywhere, or ``I`` as a pronoun, i.e. followed by a lowercase word and not after
    an ordinal context word ("World War I ends", "Phase I trial" are not personal). "me" is not used:
    titles such as "Deliver Me from Nowhere" would trip it.
    """
    if _FIRST_PERSON.search(question):
        return True
    for match in _PRONOUN_I.finditer(question):
        before = (match.group(1) or "").strip().lower()
        if before not in _ORDINAL_CONTEXT:
            return True
    return False


def language_problem(event: Event, config: SelectionConfig) -> str | None:
    """Why the question fails the language/quality rule, or None."""
    if config.require_english and not is_english(event.question):
        return "not English"
    if config.drop_personal and is_personal(event.question):
        return "personal question"
    return None


# ---------------------------------------------------------------- horizon and faithfulness


def lifetime_days(event: Event) -> list[date]:
    """The UTC calendar days the event's market was open, inclusive of both ends."""
    first, last = event.open_at.date(), event.close_at.date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def horizon_problem(event: Event, config: SelectionConfig) -> str | None:
    """Why the event's lifetime is too short to forecast over, or None."""
    days = len(lifetime_days(event))
    return (
        None
        if days >= config.min_horizon_days
        else f"lifetime spans {days} UTC days < {config.min_horizon_days}"
    )


def faithfulness(event: Event) -> tuple[float, int] | None:
    """How complete the event's trade data are, or None when it carries none.

    Returns (fraction of lifetime days with coherent prices, longest run of days without); None when
    the event carries no trade data (only sparse snapshots, where a missing day says nothing).
    """
    if event.extra.get("market_granularity") != "trades":
        return None
    good = set(event.extra.get("trade_days") or ())
    days = lifetime_days(event)
    longest = run = 0
    for day in days:
        run = 0 if day.isoformat() in good else run + 1
        longest = max(longest, run)
    return sum(day.isoformat() in good for day in days) / len(days), longest


def faithfulness_problem(event: Event, config: SelectionConfig) -> str | None:
    """Why the event's trade data are too patchy to score against, or None (also when it has none)."""
    measured = faithfulness(event)
    if measured is None:
        return None
    fraction, longest = measured
    if fraction < config.min_faithful_fraction:
        return f"faithful days {fraction:.2f} < {config.min_faithful_fraction}"
    if longest > config.max_unfaithful_run_days:
        return f"unfaithful run of {longest} days > {config.max_unfaithful_run_days}"
    return None


# ---------------------------------------------------------------- non-triviality


def forecastable_market(event: Event, buffer_days: int) -> list[MarketPoint]:
    """Market points inside the window forecasts can be made in.

    The window runs from the open to close minus the buffer; all points up to the close are used when
    that window holds none.
    """
    end = event.close_at - timedelta(days=buffer_days)
    inside = [p for p in event.market if event.open_at <= p.at <= end]
    return inside or [p for p in event.market if p.at <= event.close_at]


def triviality_numbers(
    event: Event, config: SelectionConfig, first_at: datetime | None = None
) -> dict[str, Any]:
    """The numbers the non-triviality rule decides on.

    ``first_belief``: the realized outcome's market probability at ``first_at`` (the schedule's first
    forecast date: the latest point at or before it, else the first point at most
    ``near_certain_max_lag_days`` after it, else None); without ``first_at``, the first point of the
    forecastable window. ``points``, ``max_gap_days``, ``dense``, ``range`` and ``drift`` describe the
    series in the forecastable window.
    """
    points = forecastable_market(event, config.buffer_days)
    realized = event.outcome_index
    numbers: dict[str, Any] = {"points": len(points), "first_at": None if first_at is None else iso(first_at)}
    belief = None
    if first_at is None:
        belief = points[0].probabilities[realized] if points else None
    else:
        at = event.market_at(first_at)
        if at is None:
            later = [p for p in event.market if p.at > first_at]
            if later and (later[0].at - first_at).total_seconds() <= config.near_certain_max_lag_days * 86400:
                at = later[0].probabilities
        belief = None if at is None else at[realized]
    numbers["first_belief"] = None if belief is None else round(float(belief), 4)
    gaps = [(b.at - a.at).total_seconds() / 86400 for a, b in zip(points, points[1:], strict=False)]
    numbers["max_gap_days"] = round(max(gaps), 2) if gaps else None
    numbers["dense"] = (
        len(points) >= config.flat_min_points and bool(gaps) and max(gaps) <= config.flat_max_gap_days
    )
    if len(points) >= 2:
        k = len(event.outcomes)
        numbers["range"] = round(
            max(
                max(p.probabilities[j] for p in points) - min(p.probabilities[j] for p in points)
                for j in range(k)
            ),
            4,
        )
        numbers["drift"] = round(
            max(abs(points[-1].probabilities[j] - points[0].probabilities[j]) for j in range(k)), 4
        )
    return numbers


def triviality_problem(event: Event, config: SelectionConfig, first_at: datetime | None = None) -> str | None:
    """Why the event is trivial (near-certain at the first forecast date, or a dense flat series), or None."""
    numbers = triviality_numbers(event, config, first_at)
    first = numbers["first_belief"]
    if first is not None and first >= config.near_certain:
        when = "at the first forecast date" if first_at is not None else "at its first observation"
        return f"market already gave {first:.3f} to the realized outcome {when}"
    if (
        numbers["dense"]
        and "range" in numbers
        and numbers["range"] <= config.flat_max_range
        and numbers["drift"] <= config.directionless_max_drift
    ):
        return f"market flat (range {numbers['range']:.3f}) and directionless (drift {numbers['drift']:.3f})"
    return None


# ---------------------------------------------------------------- evidence sufficiency


def evidence_documents(event: Event, index: RelevanceIndex, config: SelectionConfig) -> list[Match]:
    """Documents relevant to the question among those an agent could see at the latest possible step.

    These are the documents available in the ``evidence_lookback_days`` before the close minus the
    buffer.
    """
    end = event.close_at - timedelta(days=config.buffer_days)
    lo, hi = index.rows_between(end - timedelta(days=config.evidence_lookback_days), end)
    return index.find(event.question, lo, hi, config.evidence_rule)


def evidence_problem(
    event: Event,
    index: RelevanceIndex,
    config: SelectionConfig,
    judge: EvidenceJudge | None,
    scores: dict[str, int],
) -> str | None:
    """The evidence-sufficiency rule: enough matching documents, or the judge's verdict when one is given."""
    hits = evidence_documents(event, index, config)
    scores[event.id] = len(hits)
    if judge is not None:
        best = hits[: config.evidence_top_k]
        documents = [
            (
                index.corpus.field("id", m.row),
                index.corpus.field("title", m.row) or "",
                index.corpus.text(m.row),
            )
            for m in best
        ]
        return None if judge(event, documents) else "judge found the evidence insufficient"
    if len(hits) < config.evidence_min_documents:
        return f"{len(hits)} relevant documents < {config.evidence_min_documents}"
    return None


# ---------------------------------------------------------------- the whole selection


def select_events(
    events: Sequence[Event],
    config: SelectionConfig,
    *,
    index: RelevanceIndex | None = None,
    judge: EvidenceJudge | None = None,
    progress: bool = True,
    first_forecast_at: Callable[[Event], datetime | None] | None = None,
) -> SelectionResult:
    """Apply the filters in ``FILTER_ORDER``; without a corpus index the evidence filter is not run.

    ``first_forecast_at`` gives the first forecast date the schedule would use for an event (None when
    it has none); near-certainty is judged there. Without it, at the first market point of the
    forecastable window. Every event's decision, with the numbers behind it, is in ``decisions``.
    """
    from tqdm.auto import tqdm

    result = SelectionResult()
    if index is None:
        result.skipped_filters.append("evidence")
    for event in tqdm(events, desc="selecting events", disable=not progress):
        first_at = first_forecast_at(event) if first_forecast_at is not None else None
        numbers: dict[str, Any] = {"lifetime_days": len(lifetime_days(event))}
        numbers.update(triviality_numbers(event, config, first_at))
        measured = faithfulness(event)
        if measured is not None:
            numbers["faithful_fraction"], numbers["longest_unfaithful_run"] = (
                round(measured[0], 3),
                measured[1],
            )
        checks: list[tuple[str, Callable[[], str | None]]] = [
            ("language", partial(language_problem, event, config)),
            ("horizon", partial(horizon_problem, event, config)),
            ("faithfulness", partial(faithfulness_problem, event, config)),
            ("non_triviality", partial(triviality_problem, event, config, first_at)),
        ]
        if index is not None:
            checks.append(
                ("evidence", partial(evidence_problem, event, index, config, judge, result.evidence_scores))
            )
        decision: dict[str, str | None]
        for name, check in checks:
            problem = check()
            if problem is not None:
                result.removed[name].append(event.id)
                result.reasons[event.id] = f"{name}: {problem}"
                decision = {"decision": "dropped", "rule": name, "reason": problem}
                break
        else:
            result.kept.append(event)
            decision = {"decision": "kept", "rule": None, "reason": None}
        if event.id in result.evidence_scores:
            numbers["evidence_documents"] = result.evidence_scores[event.id]
        result.decisions[event.id] = {**decision, "numbers": numbers}
    return result
