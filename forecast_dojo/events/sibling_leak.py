"""Cross-question leak audit: how often a question's answer is written in another visible question's text.

FutureSim's public issue #1 found a quarter of its answers word for word in sibling questions'
titles ("Who will win X?" beside "Will Y, X's winner, ...?"). When questions are shown together (a
world-mode calendar: open on the same day; a fixed-date split: one study), a question's answer in a
sibling's question, background or resolution criteria is an outcome leak no temporal gateway
catches. This module measures it.

A question's **answer terms** are its answer and aliases (free-form) or its realized label (fixed
outcomes), leaving out generic labels (``Yes``, ``No``...) and terms shorter than
:data:`MIN_TERM_CHARS` after :func:`~forecast_dojo.scoring.normalize_answer`. A term leaks when its
normal form appears, on word boundaries, in the normal form of a sibling's text. As a control, the
same count runs for the question's *other* outcome labels (fixed outcomes only): a leak rate far
above the control rate means the texts name winners, not just candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from forecast_dojo.schema import Event
from forecast_dojo.scoring import normalize_answer

GENERIC_LABELS = frozenset({"yes", "no", "other", "none", "neither", "both", "true", "false", "up", "down"})
MIN_TERM_CHARS = 3
MAX_LISTED = 100
FIELDS = ("question", "background", "resolution_criteria")


@dataclass(frozen=True)
class SiblingLeak:
    """One question's answer found in a sibling's text."""

    question_id: str
    term: str
    sibling_id: str
    field: str


def _terms(labels: Sequence[str]) -> list[str]:
    out = []
    for label in labels:
        key = normalize_answer(label)
        if len(key) >= MIN_TERM_CHARS and key not in GENERIC_LABELS:
            out.append(label)
    return out


def answer_terms(event: Event) -> list[str]:
    """The texts that name a question's answer (see the module docstring); may be empty."""
    return _terms([event.answer, *event.aliases])


def _found(term: str, texts: dict[str, str]) -> str | None:
    key = f" {normalize_answer(term)} "
    return next((name for name, text in texts.items() if key in text), None)


def sibling_leak_audit(
    events: Sequence[Event], *, together: Callable[[Event, Event], bool] | None = None
) -> dict[str, Any]:
    """Measure how often a question's answer appears in another question shown with it.

    Args:
        events: The questions.
        together: Whether two questions are shown together (default: all of them are, as in one split).

    Returns:
        ``questions``, ``with_answer_terms`` (questions whose answer is specific enough to look for),
        ``leaking_questions`` (of those, how many have a sibling naming their answer), ``leak_rate``
        (their share, None without such questions), ``control_rate`` (the same share for the
        non-answer labels of fixed-outcome questions, None without any), ``leaking_ids`` (sorted) and
        ``leaks`` (up to :data:`MAX_LISTED` :class:`SiblingLeak` records as dicts).
    """
    normalized = {e.id: {name: f" {normalize_answer(getattr(e, name))} " for name in FIELDS} for e in events}
    leaks: list[SiblingLeak] = []
    leaking: set[str] = set()
    with_terms = 0
    control_hits = control_total = 0
    for event in events:
        terms = answer_terms(event)
        siblings = [o for o in events if o.id != event.id and (together is None or together(event, o))]
        if terms:
            with_terms += 1
            for sibling in siblings:
                for term in terms:
                    field = _found(term, normalized[sibling.id])
                    if field is not None:
                        leaks.append(SiblingLeak(event.id, term, sibling.id, field))
                        leaking.add(event.id)
                        break
        if not event.free_form:
            for label in _terms([o for o in event.outcomes if o != event.outcome]):
                control_total += 1
                control_hits += any(_found(label, normalized[s.id]) is not None for s in siblings)
    return {
        "questions": len(events),
        "with_answer_terms": with_terms,
        "leaking_questions": len(leaking),
        "leak_rate": len(leaking) / with_terms if with_terms else None,
        "control_rate": control_hits / control_total if control_total else None,
        "leaking_ids": sorted(leaking),
        "leaks": [asdict(leak) for leak in leaks[:MAX_LISTED]],
    }


def describe_sibling_leaks(audit: dict[str, Any]) -> str:
    """One line for a build report."""
    if not audit["with_answer_terms"]:
        return f"{audit['questions']} questions, none with an answer specific enough to look for"
    control = audit["control_rate"]
    return (
        f"{audit['leaking_questions']} of {audit['with_answer_terms']} questions with a specific answer "
        f"({100 * audit['leak_rate']:.1f} %) have it written in another question's text"
        + (f" (control, non-answer labels: {100 * control:.1f} %)" if control is not None else "")
    )
