"""A world-mode calendar: which questions are open on which simulated day.

A day ``d`` is the instant 00:00 UTC of ``d``: the agent sees documents available strictly before it
(the fixed-date rule, one cutoff per day). A question is open from the day of its first cutoff to the
day of its last cutoff (both clipped to the calendar), so every day it is open lies inside the span
that the events build screened for outcome-stating documents; it then resolves and leaves the open
set. Its answer is known to the calendar (for scoring) and never to the agent.

Known limit (as in FutureSim): the day a question leaves the open set is visible, so a question
whose schedule ended early because it resolved early shows that it did; the fixed-date env hides it
(it never says how many steps an episode has), world mode cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from forecast_dojo.errors import ConfigError
from forecast_dojo.schema import Event


def day_instant(day: date) -> datetime:
    """The instant at which day ``day`` begins (00:00 UTC): the day's visibility cutoff."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


@dataclass(frozen=True)
class Calendar:
    """The questions of one world-mode episode and the days it runs over.

    Attributes:
        events: The questions, in calendar order (by first open day, then id).
        start: The first simulated day.
        end: The last simulated day (inclusive).
        skip_empty_days: Leave out days on which no question is open (the agent never lives through them).
    """

    events: tuple[Event, ...]
    start: date
    end: date
    skip_empty_days: bool = True
    _spans: dict[str, tuple[date, date]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _days: tuple[date, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ConfigError(f"calendar end {self.end} is before its start {self.start}")
        ids = [e.id for e in self.events]
        if len(set(ids)) != len(ids):
            raise ConfigError("duplicate question ids in a calendar")
        spans = {}
        for event in self.events:
            first = max(event.cutoffs[0].date(), self.start)
            last = min(event.cutoffs[-1].date(), self.end)
            if first <= last:
                spans[event.id] = (first, last)
        if not spans:
            raise ConfigError(f"no question is open between {self.start} and {self.end}")
        kept = tuple(sorted((e for e in self.events if e.id in spans), key=lambda e: (spans[e.id][0], e.id)))
        object.__setattr__(self, "events", kept)
        object.__setattr__(self, "_spans", spans)
        days = []
        day = self.start
        while day <= self.end:
            if not self.skip_empty_days or any(a <= day <= b for a, b in spans.values()):
                days.append(day)
            day += timedelta(days=1)
        object.__setattr__(self, "_days", tuple(days))

    @classmethod
    def from_events(
        cls,
        events: Sequence[Event],
        start: date | None = None,
        end: date | None = None,
        *,
        skip_empty_days: bool = True,
    ) -> Calendar:
        """The calendar of ``events`` from ``start`` to ``end`` (default: the first question's first day to the last one's last).

        Args:
            events: The questions (fixed-outcome or free-form).
            start: The first day (default: the earliest first cutoff).
            end: The last day (default: the latest last cutoff).
            skip_empty_days: Leave out days with no open question.

        Returns:
            The calendar; questions not open on any of its days are left out.

        Raises:
            ConfigError: No events, ``end`` before ``start``, or no question open in between.
        """
        if not events:
            raise ConfigError("a calendar needs at least one question")
        start = start or min(e.cutoffs[0].date() for e in events)
        end = end or max(e.cutoffs[-1].date() for e in events)
        return cls(tuple(events), start, end, skip_empty_days)

    @property
    def days(self) -> tuple[date, ...]:
        """The simulated days, in order."""
        return self._days

    def span(self, event_id: str) -> tuple[date, date]:
        """The first and last day (inclusive) a question is open in this calendar."""
        return self._spans[event_id]

    def open_on(self, day: date) -> list[Event]:
        """The questions open on ``day``, in calendar order."""
        return [e for e in self.events if self._spans[e.id][0] <= day <= self._spans[e.id][1]]

    def open_days(self, event_id: str) -> list[date]:
        """The simulated days on which a question is open (its scored days)."""
        first, last = self._spans[event_id]
        return [d for d in self._days if first <= d <= last]

    def text_on(self, event: Event, day: date) -> tuple[str, str, str]:
        """(question, background, resolution criteria) as they stood at the day's start.

        The text of the latest forecast step whose cutoff is at or before the day's instant (the first
        step's before it): never a version from after the day.
        """
        instant = day_instant(day)
        step = max((i for i, c in enumerate(event.cutoffs) if c <= instant), default=0)
        return event.text_at(step)
