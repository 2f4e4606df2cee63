"""The train / eval split, defined once: its names, its two rules, and which events a split holds.

Every environment is built on one split of its events (:data:`SPLITS`: ``train``, ``eval`` or
``all``; ``registration.make(split=...)``), decided here:

* **Real events** (an ``events build`` folder): the temporal split. An event belongs to a split when
  it *starts* (its first forecast cutoff) and *closes* inside that split's window; an event crossing a
  window boundary goes to neither, so no training outcome can be known from inside the evaluation
  period and no evaluation event is partly seen in training. Evaluation events also need at least
  ``min_eval_steps`` forecast steps. The build writes each split to its file (:data:`SPLIT_FILES`:
  ``train.jsonl``, ``eval.jsonl``, and ``all.jsonl`` with every scheduled event).
* **The synthetic world** (all events share one time span): by id,
  ``forecast_dojo.synthetic.split.split_event_ids`` (sorted, even positions train, odd positions are
  held out; its extra training-only events all train).
* **Any other events file** carries no split: it is used as a whole (``all``), and asking for its
  ``train`` or ``eval`` part is an error.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from forecast_dojo.errors import SplitError as SplitError
from forecast_dojo.schema import Event, load_events
from forecast_dojo.timeutil import end_of_day, iso, parse_instant

SPLITS = ("train", "eval", "all")
SPLIT_FILES = {"train": "train.jsonl", "eval": "eval.jsonl", "all": "all.jsonl"}
"""The file of each split in an ``events build`` folder."""


def check_split(split: str) -> str:
    """``split`` if it names a split (:data:`SPLITS`).

    Raises:
        SplitError: Any other value.
    """
    if split not in SPLITS:
        raise SplitError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    return split


def build_split_file(events_path: str | Path, split: str) -> Path | None:
    """The file of ``split`` in the ``events build`` folder that holds ``events_path``.

    Args:
        events_path: Any events file of a build folder (``train.jsonl``, ``eval.jsonl``, ``all.jsonl``).
        split: ``train``, ``eval`` or ``all``.

    Returns:
        The split's file, or None when the folder is no build (it lacks ``train.jsonl`` or ``eval.jsonl``).
    """
    folder = Path(events_path).parent
    if not all((folder / SPLIT_FILES[part]).is_file() for part in ("train", "eval")):
        return None
    return folder / SPLIT_FILES[check_split(split)]


def has_split(*, synthetic: bool, events_path: str | Path | None) -> bool:
    """Whether the events carry a train / eval split: the synthetic world's, or an ``events build``'s."""
    return synthetic or (events_path is not None and build_split_file(events_path, "train") is not None)


def select_split(
    events: Sequence[Event],
    split: str | None,
    *,
    synthetic: bool,
    events_path: str | Path | None,
    default: str = "train",
) -> tuple[list[Event], str]:
    """The events of one split, and the split's name.

    Args:
        events: All events of the source (the synthetic world, or an events file).
        split: ``train``, ``eval``, ``all``, or None for ``default`` (``all`` for events with no split).
        synthetic: The events are the synthetic world's (split by id).
        events_path: The events file; in an ``events build`` folder, a split holds the events listed in
            that split's file (the build's temporal split).
        default: The split when ``split`` is None and the events carry one.

    Returns:
        The events of ``events`` in the split (in their order) and the split's name.

    Raises:
        SplitError: An unknown split name, ``train`` or ``eval`` of events that carry no split, or a
            split that holds none of ``events``.
    """
    splittable = has_split(synthetic=synthetic, events_path=events_path)
    split = check_split(split if split is not None else (check_split(default) if splittable else "all"))
    if split == "all":
        return list(events), split
    where = "the synthetic world" if synthetic else str(events_path)
    if not splittable:
        raise SplitError(
            f"{where}: these events carry no train/eval split (an events build writes train.jsonl and "
            f"eval.jsonl side by side); use split='all' to play them"
        )
    if synthetic:
        from forecast_dojo.synthetic.split import split_event_ids

        wanted = set(split_event_ids(e.id for e in events).select(split))
    else:
        assert events_path is not None
        part = build_split_file(events_path, split)
        assert part is not None
        wanted = {e.id for e in load_events(part)}
    chosen = [e for e in events if e.id in wanted]
    if not chosen:
        raise SplitError(
            f"{where} holds no event of the {split} split; point the spec at the build's "
            f"{SPLIT_FILES['all']} (or {SPLIT_FILES[split]})"
        )
    return chosen, split


@dataclass(frozen=True)
class Window:
    """A half-open interval of instants ``[start, end)``."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start >= self.end:
            raise SplitError(f"window start {iso(self.start)} is not before its end {iso(self.end)}")

    def contains(self, event: Event) -> bool:
        """Whether the event's first cutoff and its close both lie in the window."""
        return self.start <= event.cutoffs[0] and event.close_at <= self.end

    def overlaps(self, other: Window) -> bool:
        """Whether the two windows share an instant."""
        return self.start < other.end and other.start < self.end

    def describe(self) -> str:
        """The window as ``[start, end)`` in ISO form."""
        return f"[{iso(self.start)}, {iso(self.end)})"


def parse_window(text: str) -> Window:
    """``START:END`` with ISO dates, both inclusive (``2025-01-01:2025-12-31`` ends at 2026-01-01T00:00Z)."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise SplitError(f"window {text!r}: expected START:END with ISO dates, e.g. 2025-01-01:2025-12-31")
    try:
        start, end = date.fromisoformat(start_text.strip()), date.fromisoformat(end_text.strip())
    except ValueError as err:
        raise SplitError(f"window {text!r}: {err}") from err
    return Window(parse_instant(start), end_of_day(end))


@dataclass
class SplitResult:
    """The two splits and, by reason, the ids of events in neither."""

    train: list[Event] = field(default_factory=list)
    eval: list[Event] = field(default_factory=list)
    neither: dict[str, list[str]] = field(default_factory=dict)


def split_events(
    events: Sequence[Event], train: Window, evaluation: Window, *, min_eval_steps: int = 3
) -> SplitResult:
    """Assign whole events to the training window, the evaluation window, or neither (with a reason)."""
    if train.overlaps(evaluation):
        raise SplitError(
            f"training window {train.describe()} overlaps evaluation window {evaluation.describe()}"
        )
    result = SplitResult()

    def drop(reason: str, event: Event) -> None:
        result.neither.setdefault(reason, []).append(event.id)

    for event in events:
        if train.contains(event):
            result.train.append(event)
        elif evaluation.contains(event):
            if event.n_steps >= min_eval_steps:
                result.eval.append(event)
            else:
                drop(f"eval_fewer_than_{min_eval_steps}_steps", event)
        elif any(
            w.start <= event.cutoffs[0] < w.end or w.start < event.close_at <= w.end
            for w in (train, evaluation)
        ):
            drop("crosses_window_boundary", event)
        else:
            drop("outside_windows", event)
    return result


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def q(p: float) -> float:
        return float(ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))])

    return {
        "min": q(0.0),
        "p25": q(0.25),
        "median": q(0.5),
        "p75": q(0.75),
        "max": q(1.0),
        "mean": round(statistics.fmean(values), 2),
    }


def split_stats(events: Sequence[Event]) -> dict[str, Any]:
    """Counts, outcome balance, horizon (days from first cutoff to close) and steps per event."""
    horizons = [(e.close_at - e.cutoffs[0]).total_seconds() / 86_400 for e in events]
    return {
        "events": len(events),
        "outcomes": dict(Counter(e.outcome for e in events).most_common()),
        "k_outcomes": dict(sorted(Counter(len(e.outcomes) for e in events).items())),
        "sources": dict(Counter(e.source for e in events).most_common()),
        "horizon_days": _quantiles([round(h, 2) for h in horizons]),
        "steps": dict(sorted(Counter(e.n_steps for e in events).items())),
        "first_cutoff": iso(min(e.cutoffs[0] for e in events)) if events else None,
        "last_close": iso(max(e.close_at for e in events)) if events else None,
    }
