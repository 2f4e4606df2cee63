"""Content-level leakage screen: documents that are visible at a step but appear to state the outcome.

The temporal gateway already guarantees that nothing available at or after a cutoff is shown. This
screen catches the other kind of leak: a document that is legitimately earlier than the cutoff but
already reports the result, because the outcome was known before the market's recorded close (an
election decided weeks before the market closed, a market that resolved early).

A document is flagged for an event when all of these hold:

1. it is visible at some step (``available_at`` before the step's cutoff) and became available
   within ``window_days`` before the event's close;
2. it strongly matches the question: it holds at least ``max(min_shared_terms, ceil(min_coverage * n))``
   of the question's ``n`` salient terms (see ``forecast_dojo.events.relevance``), optionally with a
   minimum embedding similarity;
3. it contains resolution language (:data:`RESOLUTION_PATTERN`: "wins", "is elected", "resigns",
   "announces", ...), or, for an event with named outcomes (not Yes/No), names the realized outcome.

Flagged documents are listed in the build report and written to the event as
``extra["excluded_doc_ids"] = {"<step index>": [doc ids visible at that step that are flagged]}``
(only steps with at least one flagged document appear), plus ``extra["leakage_flags"]`` with the
evidence for each flag. The environment hides excluded documents at those steps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any

from forecast_dojo.events.relevance import RelevanceIndex
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import iso, to_micros

RESOLUTION_PATTERN = re.compile(
    r"\b("
    r"wins?|won|winners?|defeats?|defeated|beats?|victory|victorious|champions?|clinch(?:es|ed)?|"
    r"(?:is|are|was|were|gets?|got)\s+(?:re-?)?elected|re-?elected|elected|sworn\s+in|inaugurated|"
    r"(?:is|are|was|were)\s+(?:named|appointed|nominated|confirmed|chosen|selected|awarded)|"
    r"appoints?|appointed|nominates?|nominated|confirms?|confirmed|"
    r"announces?|announced|approves?|approved|pass(?:es|ed)|signs?|signed|ratif(?:y|ies|ied)|"
    r"resigns?|resigned|steps?\s+down|stepped\s+down|dies|died|killed|"
    r"captures?|captured|seizes?|seized|takes?\s+control|took\s+control|"
    r"launch(?:es|ed)|releas(?:es|ed)|unveil(?:s|ed)|"
    r"conced(?:es|ed)|verdict|convicted|acquitted|sentenced|eliminated|"
    r"cancel(?:s|led|ed)|postpone(?:s|d)|withdr(?:aws?|ew)|"
    r"(?:final\s+)?results?|ceasefire|agreement|agrees?|agreed"
    r")\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LeakageConfig:
    """Thresholds of the screen (stricter matching than the evidence filter: only strong matches)."""

    window_days: int = 45
    min_coverage: float = 0.6
    min_shared_terms: int = 2
    min_similarity: float = 0.0
    max_flags_per_event: int = 50


@dataclass(frozen=True)
class LeakageFlag:
    """Why one document was flagged for one event, and the first step at which it is visible."""

    event_id: str
    doc_id: str
    first_step: int
    available_at: str
    coverage: float
    shared_terms: tuple[str, ...]
    resolution_terms: tuple[str, ...]
    names_outcome: bool
    excerpt: str


def resolution_terms(text: str) -> tuple[str, ...]:
    """The distinct resolution-language phrases in a text, lowercased, in order of appearance."""
    seen: dict[str, None] = {}
    for match in RESOLUTION_PATTERN.finditer(text):
        seen.setdefault(re.sub(r"\s+", " ", match.group(0).lower()), None)
    return tuple(seen)


def _names(label: str, text: str) -> bool:
    return bool(label) and re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text, re.IGNORECASE) is not None


def screen_event(event: Event, index: RelevanceIndex, config: LeakageConfig) -> list[LeakageFlag]:
    """Flag documents visible at some step of ``event`` that appear to state its outcome."""
    cutoff_us = [to_micros(c) for c in event.cutoffs]
    window_start = max(event.open_at, event.close_at - timedelta(days=config.window_days))
    lo, hi = index.rows_between(window_start, event.cutoffs[-1])
    corpus = index.corpus
    named = {o.lower() for o in event.outcomes} != {"yes", "no"}
    flags = []
    for match in index.matches(
        event.question,
        lo,
        hi,
        min_coverage=config.min_coverage,
        min_shared=config.min_shared_terms,
        min_similarity=config.min_similarity,
    ):
        text = f"{corpus.field('title', match.row) or ''}\n{corpus.text(match.row)}"
        terms_found = resolution_terms(text)
        names_outcome = named and _names(event.outcome, text)
        if not terms_found and not names_outcome:
            continue
        available = int(corpus.available_us[match.row])
        first_step = next(i for i, c in enumerate(cutoff_us) if available < c)
        flags.append(
            LeakageFlag(
                event_id=event.id,
                doc_id=str(corpus.field("id", match.row)),
                first_step=first_step,
                available_at=iso(corpus.available_at(match.row)),
                coverage=round(match.coverage, 3),
                shared_terms=match.shared,
                resolution_terms=terms_found,
                names_outcome=names_outcome,
                excerpt=corpus.text(match.row)[:240],
            )
        )
        if len(flags) >= config.max_flags_per_event:
            break
    return sorted(flags, key=lambda f: (f.first_step, f.available_at, f.doc_id))


def apply_exclusions(event: Event, flags: Sequence[LeakageFlag]) -> Event:
    """The event with ``extra["excluded_doc_ids"]`` (step index as a string -> flagged doc ids visible
    at that step) and ``extra["leakage_flags"]``; unchanged apart from empty entries when nothing is flagged."""
    excluded: dict[str, list[str]] = {}
    for step in range(event.n_steps):
        ids = sorted({f.doc_id for f in flags if f.first_step <= step})
        if ids:
            excluded[str(step)] = ids
    extra: dict[str, Any] = dict(event.extra)
    extra["excluded_doc_ids"] = excluded
    extra["leakage_flags"] = [
        {
            k: v
            for k, v in asdict(f).items()
            if k in ("doc_id", "first_step", "coverage", "resolution_terms", "names_outcome")
        }
        for f in flags
    ]
    return replace(event, extra=extra)
