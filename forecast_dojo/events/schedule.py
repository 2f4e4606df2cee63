"""The forecast-date schedule: which days of an event's life become forecast steps.

A forecast date ``D`` means the cutoff 00:00 UTC of ``D``; a document is visible iff its
``available_at`` is strictly before that. Candidate dates run from the first midnight at or after
the open to the last midnight at least ``buffer_days`` before the *stated deadline* (``horizon =
"deadline"``, the default: ``extra["deadline_at"]``, the market's announced end, else the close);
given a corpus,
only dates that show at least one document and none after the first midnight strictly after its
last document. With ``n`` candidates an event gets ``T = clamp(round_half_up(sqrt(n)), 3, 10)``
steps (never more than ``n``): the candidates split into ``T`` contiguous bins of near-equal size
(earlier bins take the remainder) and each bin contributes its best date, scored by

    market_weight * movement / max movement + documents_weight * new documents / max new documents

where ``movement`` is the total-variation change of the market belief between the cutoffs of
``D-1`` and ``D`` and ``new documents`` counts documents that became visible between them. Ties go
to a seeded random choice, so a schedule is a pure function of (event, corpus, config, seed).

Early resolution must not shape the schedule: a question that resolves early (usually "Yes, it
happened") would otherwise get its steps squeezed into a shorter life, so the spacing of its dates,
their position between the open and the deadline, and the number of steps would all tell the
outcome. With ``horizon = "deadline"`` the bins are laid over the candidates up to the stated
deadline, which is known when the question opens, and the dates are then *truncated*: no date later
than ``buffer_days`` before the close (the earlier of the recorded close and the resolution) is
kept, and days past that point are never scored (their documents and market moves never choose a
date). An early-resolving event's schedule is therefore a prefix of the schedule it would have had
otherwise: step k falls on the same kind of date whatever the outcome; what differs is only how many
steps there are, which the agent is not told. ``horizon = "close"`` restores the former behaviour
(bins over the life up to the close) for comparison; ``forecast_dojo.events.schedule_leak`` measures
both.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Any, Literal

from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import UTC, from_micros, iso, to_micros


@dataclass(frozen=True)
class CloseBuffer:
    """The days before an event's close that no forecast uses: the schedule's and the selection's alike.

    Attributes:
        buffer_days: The last forecast date is at least this many days before the close; the
            selection judges the market and the evidence up to the same point (an events build
            refuses a selection and a schedule that disagree).
    """

    buffer_days: int = 2


@dataclass(frozen=True)
class ScheduleConfig(CloseBuffer):
    """Schedule parameters (defaults from Forecast-Dojo); ``horizon`` is ``"deadline"`` or ``"close"``."""

    min_steps: int = 3
    max_steps: int = 10
    market_weight: float = 1.0
    documents_weight: float = 1.0
    seed: int = 0
    horizon: Literal["deadline", "close"] = "deadline"

    def __post_init__(self) -> None:
        if self.horizon not in ("deadline", "close"):
            raise ConfigError(f"schedule horizon must be 'deadline' or 'close', got {self.horizon!r}")


def stated_deadline(event: Event) -> datetime:
    """The deadline the question states (``extra["deadline_at"]``), never before the close.

    It is the close itself when the importer recorded none.
    """
    from forecast_dojo.timeutil import InstantError, parse_instant

    value = event.extra.get("deadline_at")
    if value:
        try:
            return max(event.close_at, parse_instant(value))
        except InstantError:
            pass
    return event.close_at


def midnight(day: date) -> datetime:
    """The cutoff of forecast date ``day``: 00:00 UTC."""
    return datetime.combine(day, time(0), tzinfo=UTC)


def last_forecast_day(event: Event, config: ScheduleConfig) -> date:
    """The last date a forecast may be made on: ``buffer_days`` before the close."""
    return (event.close_at - timedelta(days=config.buffer_days)).date()


def candidate_days(event: Event, config: ScheduleConfig, corpus: Corpus | None = None) -> list[date]:
    """Forecast dates the bins are laid over, in order.

    They run up to the stated deadline (``horizon = "deadline"``) or the close; :func:`choose_days`
    keeps only those up to :func:`last_forecast_day`.
    """
    first = event.open_at.date()
    if midnight(first) < event.open_at:
        first += timedelta(days=1)
    end = stated_deadline(event) if config.horizon == "deadline" else event.close_at
    last = (end - timedelta(days=config.buffer_days)).date()
    if corpus is not None and len(corpus):
        # Outside the corpus's coverage a cutoff would show an empty (before) or silent (after) world:
        # the first date must see at least one document, the last is the one just after the last.
        first = max(first, from_micros(int(corpus.available_us[0])).date() + timedelta(days=1))
        last = min(last, from_micros(int(corpus.available_us[-1])).date() + timedelta(days=1))
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def steps_for(n_candidates: int, config: ScheduleConfig) -> int:
    """``T = clamp(round_half_up(sqrt(n)), min_steps, max_steps)``, capped by ``n``."""
    if n_candidates <= 0:
        return 0
    t = math.floor(math.sqrt(n_candidates) + 0.5)
    return min(n_candidates, max(config.min_steps, min(config.max_steps, t)))


def bins(n_candidates: int, n_steps: int) -> list[range]:
    """Contiguous index ranges of near-equal size covering ``range(n_candidates)``; earlier bins are larger."""
    size, extra = divmod(n_candidates, n_steps)
    out, start = [], 0
    for b in range(n_steps):
        stop = start + size + (1 if b < extra else 0)
        out.append(range(start, stop))
        start = stop
    return out


def _movement(event: Event, day: date) -> float:
    after, before = event.market_at(midnight(day)), event.market_at(midnight(day - timedelta(days=1)))
    if after is None or before is None:
        return 0.0
    return 0.5 * sum(abs(a - b) for a, b in zip(after, before, strict=True))


def _new_documents(corpus: Corpus | None, day: date) -> int:
    if corpus is None:
        return 0
    return corpus.n_visible(to_micros(midnight(day))) - corpus.n_visible(
        to_micros(midnight(day - timedelta(days=1)))
    )


def day_scores(event: Event, days: list[date], config: ScheduleConfig, corpus: Corpus | None) -> list[float]:
    """The preference score of each candidate date (see the module docstring)."""
    movements = [_movement(event, d) for d in days]
    documents = [float(_new_documents(corpus, d)) for d in days]
    top_m, top_d = max(movements, default=0.0), max(documents, default=0.0)
    return [
        config.market_weight * (m / top_m if top_m > 0 else 0.0)
        + config.documents_weight * (n / top_d if top_d > 0 else 0.0)
        for m, n in zip(movements, documents, strict=True)
    ]


def _rng(event_id: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}|{event_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def choose_days(event: Event, config: ScheduleConfig, corpus: Corpus | None = None) -> list[date]:
    """The forecast dates of one event (possibly fewer than ``min_steps``; possibly none)."""
    days = candidate_days(event, config, corpus)
    n_steps = steps_for(len(days), config)
    if n_steps == 0:
        return []
    last = last_forecast_day(event, config)
    allowed = sum(d <= last for d in days)  # days are in order: the allowed ones form a prefix
    if allowed == 0:
        return []
    scores = day_scores(event, days[:allowed], config, corpus)
    rng = _rng(event.id, config.seed)
    chosen = []
    for span in bins(len(days), n_steps):
        open_days = [i for i in span if i < allowed]
        if not open_days:
            break
        best = max(scores[i] for i in open_days)
        tied = [i for i in open_days if abs(scores[i] - best) <= 1e-12]
        chosen.append(days[tied[0] if len(tied) == 1 else rng.choice(tied)])
    return chosen


def trim_before(event: Event, start: datetime) -> Event | None:
    """The scheduled event with only its cutoffs at or after ``start``, or None when none is left.

    Per-step market beliefs and the step count follow the cutoffs. Used to bring an event that opened
    before the evaluation window into it; call it before the leakage screen, whose exclusions are per
    step.
    """
    keep = [i for i, c in enumerate(event.cutoffs) if c >= start]
    if not keep:
        return None
    extra: dict[str, Any] = dict(event.extra)
    if isinstance(extra.get("market_at_cutoffs"), list):
        extra["market_at_cutoffs"] = [extra["market_at_cutoffs"][i] for i in keep]
    if isinstance(extra.get("schedule"), dict):
        extra["schedule"] = {**extra["schedule"], "steps": len(keep), "trimmed_before": iso(start)}
    return replace(event, cutoffs=tuple(event.cutoffs[i] for i in keep), extra=extra)


def truncate_at(event: Event, n_keep: int) -> Event:
    """The scheduled event with only its first ``n_keep`` cutoffs (at least one: an event has a step).

    Per-step market beliefs and the step count follow the cutoffs; ``extra["schedule"]`` records
    how many steps were removed (``truncated_steps``). Used to end a schedule before the first date
    at which the corpus reveals the outcome (``forecast_dojo.events.leakage.outcome_public``).
    """
    if not 1 <= n_keep <= event.n_steps:
        raise ConfigError(f"n_keep must be within 1..{event.n_steps}, got {n_keep}")
    extra: dict[str, Any] = dict(event.extra)
    if isinstance(extra.get("market_at_cutoffs"), list):
        extra["market_at_cutoffs"] = extra["market_at_cutoffs"][:n_keep]
    if isinstance(extra.get("schedule"), dict):
        extra["schedule"] = {
            **extra["schedule"],
            "steps": n_keep,
            "truncated_steps": event.n_steps - n_keep,
        }
    return replace(event, cutoffs=tuple(event.cutoffs[:n_keep]), extra=extra)


NEAR_RESOLUTION_LEAD = timedelta(days=1)


def near_resolution_cutoff(event: Event) -> datetime:
    """The cutoff of the near-resolution topline: one day before the resolution, within ``[open, close]``.

    ``resolved_at - 1 day``, brought back to the close when it lies after it (an event's cutoffs never
    pass its close) and forward to the open when the event resolved within a day of opening.
    """
    return max(event.open_at, min(event.resolved_at - NEAR_RESOLUTION_LEAD, event.close_at))


def near_resolution_event(event: Event) -> Event:
    """The event as WorldReasoner's near-resolution condition plays it: one step, at :func:`near_resolution_cutoff`.

    A *topline*, not a forecast: the gateway opens a day before the outcome is known, so the step
    sees (nearly) all the evidence there will be, and for an event that resolved early the date itself
    hints at the outcome. Reports label it so, and no study runs it unless asked. The leakage
    screen's exclusions (``excluded_doc_ids``) still apply; per-step extras (market beliefs at the
    old cutoffs, step-keyed exclusions, already merged) are dropped, ``extra["schedule"]`` says what
    was done.
    """
    extra: dict[str, Any] = {
        k: v for k, v in event.extra.items() if k not in ("market_at_cutoffs", "excluded_doc_ids")
    }
    previous = event.extra.get("schedule")
    extra["schedule"] = {
        **(previous if isinstance(previous, dict) else {}),
        "steps": 1,
        "near_resolution": True,
        "original_steps": event.n_steps,
    }
    return replace(event, cutoffs=(near_resolution_cutoff(event),), extra=extra)


def schedule_event(event: Event, config: ScheduleConfig, corpus: Corpus | None = None) -> Event | None:
    """The event with its forecast cutoffs and per-step market belief, or None when no date is available.

    ``extra["market_at_cutoffs"]`` holds, per step, the latest market belief at or before the cutoff
    (a list of K probabilities) or None; it is for evaluation only and never reaches the agent.
    """
    days = choose_days(event, config, corpus)
    if not days:
        return None
    cutoffs = tuple(midnight(d) for d in days)
    market_at = [None if (m := event.market_at(c)) is None else list(m) for c in cutoffs]
    extra: dict[str, Any] = dict(event.extra)
    extra["market_at_cutoffs"] = market_at
    extra["schedule"] = {
        "candidate_days": len(candidate_days(event, config, corpus)),
        "horizon": config.horizon,
        "steps": len(days),
        "seed": config.seed,
        "buffer_days": config.buffer_days,
    }
    return replace(event, cutoffs=cutoffs, extra=extra)
