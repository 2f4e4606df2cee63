"""The one train / held-out split of the synthetic world's events.

Sorted by id, events at even positions train (SFT data, GRPO prompts, the honest agent's cue weights,
the base rate; ``gym.make`` ids hold them by default) and events at odd positions are held out for
evaluation (``forecast-dojo run`` evaluates them by default; ``forecast-dojo export sft`` refuses them).
The rule depends only on the ids, never on outcomes or evidence, so it cannot be tuned to make a
model look good. The extra training-only events of ``generate_world(train_events=N)`` (ids
``syn-t...``) all train and leave the split of the others as it is. The split's names, and the rule
for real events, live in :mod:`forecast_dojo.events.split`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from forecast_dojo.errors import ConfigError
from forecast_dojo.synthetic.model import TRAIN_EVENT_PREFIX, train_event_id


@dataclass(frozen=True)
class EventSplit:
    """Event ids of the training and held-out parts (disjoint, each sorted)."""

    train: tuple[str, ...]
    held_out: tuple[str, ...]

    def part(self, event_id: str) -> str | None:
        """``"train"``, ``"held_out"`` or None for an id in neither part."""
        if event_id in self.train:
            return "train"
        if event_id in self.held_out:
            return "held_out"
        return None

    def select(self, which: str) -> list[str]:
        """The ids of ``"train"``, ``"eval"`` (the held-out part) or ``"all"`` (sorted)."""
        if which == "train":
            return list(self.train)
        if which == "eval":
            return list(self.held_out)
        if which == "all":
            return sorted(self.train + self.held_out)
        raise ConfigError(f"split must be train, eval or all, not {which!r}")


def split_event_ids(event_ids: Iterable[str]) -> EventSplit:
    """Split ids: sorted, even positions train, odd positions are held out; training-only ids all train.

    Args:
        event_ids: the ids to split (duplicates are ignored).

    Returns:
        The split.
    """
    unique = set(event_ids)
    train_only = sorted(i for i in unique if i.startswith(TRAIN_EVENT_PREFIX))
    ordered = sorted(unique.difference(train_only))
    return EventSplit(train=tuple(sorted(ordered[0::2] + train_only)), held_out=tuple(ordered[1::2]))


def synthetic_split(world_seed: int = 0, train_events: int = 0) -> EventSplit:
    """The split of the synthetic world generated with ``world_seed``.

    Args:
        world_seed: the world's generator seed.
        train_events: the world's number of extra training events (all of them train).

    Returns:
        The split of that world's event ids.
    """
    from forecast_dojo.synthetic import generate_world

    ids = [e.id for e in generate_world(world_seed).events]
    return split_event_ids(ids + [train_event_id(i) for i in range(train_events)])
