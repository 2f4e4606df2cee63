"""The synthetic world's generative model: evidence tiers, their likelihoods, and the world's types.

What each evidence document says about its event is fixed by its tier's likelihood ratio (see
``world.py`` for the whole generative story and ``oracle.py`` for the exact posterior it implies).
These types are shared by the generator (``world.py``), the oracle and the cache; they carry the
hidden facts and must never reach the agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from forecast_dojo.errors import UnknownEventError
from forecast_dojo.errors import WorldConfigError as WorldConfigError
from forecast_dojo.schema import Document, Event

TIERS = ("weak", "moderate", "strong")
TIER_LIKELIHOOD_RATIO = {"weak": 1.5, "moderate": 3.0, "strong": 9.0}
TRAIN_EVENT_PREFIX = "syn-t"  # ids of the training-only events ``generate_world(train_events=N)`` adds


def train_event_id(number: int) -> str:
    """The id of the ``number``-th (from 0) training-only event: ``syn-t00000``, ``syn-t00001``..."""
    return f"{TRAIN_EVENT_PREFIX}{number:05d}"


def signal_accuracy(tier: str, k: int) -> float:
    """``q = P(signal = true outcome)`` for an evidence document of ``tier`` in a K-outcome event."""
    if tier not in TIER_LIKELIHOOD_RATIO:
        raise WorldConfigError(f"unknown tier {tier!r}; tiers are {TIERS}")
    if k < 2:
        raise WorldConfigError(f"an event needs K >= 2 outcomes, got {k}")
    ratio = TIER_LIKELIHOOD_RATIO[tier]
    return ratio / (ratio + k - 1)


def signal_likelihood(tier: str, k: int, signal: int) -> tuple[float, ...]:
    """``P(signal | outcome = o)`` for every outcome ``o``: the factor the oracle multiplies in."""
    if not 0 <= signal < k:
        raise WorldConfigError(f"signal {signal} is not an outcome index of a {k}-outcome event")
    q = signal_accuracy(tier, k)
    other = (1.0 - q) / (k - 1)
    return tuple(q if outcome == signal else other for outcome in range(k))


@dataclass(frozen=True)
class Evidence:
    """What the generator knows about one evidence document (never shown to the agent)."""

    doc_id: str
    event_id: str
    available_at: datetime
    signal: int
    tier: str
    likelihood: tuple[float, ...]


@dataclass
class SyntheticWorld:
    """Events, documents and the hidden generative facts needed to compute the exact posterior.

    ``doc_kinds`` maps every document id to ``evidence``, ``distractor``, ``background`` or
    ``resolution``; ``resolution_docs`` lists each event's outcome-revealing documents.
    """

    seed: int
    events: list[Event]
    documents: list[Document]
    evidence: dict[str, list[Evidence]]
    prior: dict[str, tuple[float, ...]]
    doc_kinds: dict[str, str] = field(default_factory=dict)
    resolution_docs: dict[str, list[str]] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._events_by_id = {event.id: event for event in self.events}

    def event(self, event_id: str) -> Event:
        """The event with this id; a clear error for ids that are not in this world."""
        try:
            return self._events_by_id[event_id]
        except KeyError:
            raise UnknownEventError(
                f"event {event_id!r} is not in synthetic world seed={self.seed}"
            ) from None
