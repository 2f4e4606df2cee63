"""The one train / held-out split of the synthetic world's events.

Sorted by id, events at even positions train (SFT data, GRPO prompts, the honest agent's cue weights,
the base rate) and events at odd positions are held out for evaluation (``forecast-dojo run`` evaluates
them by default; ``forecast-dojo export sft`` refuses them). The rule depends only on the ids, never on
outcomes or evidence, so it cannot be tuned to make a model look good.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from forecast_dojo.errors import ConfigError


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
    """Split ids: sorted, even positions train, odd positions are held out.

    Args:
        event_ids: the ids to split (duplicates are ignored).

    Returns:
        The split.
    """
    ordered = sorted(set(event_ids))
    return EventSplit(train=tuple(ordered[0::2]), held_out=tuple(ordered[1::2]))


def synthetic_split(world_seed: int = 0) -> EventSplit:
    """The split of the synthetic world generated with ``world_seed``.

    Args:
        world_seed: the world's generator seed.

    Returns:
        The split of that world's event ids.
    """
    from forecast_dojo.synthetic import generate_world

    return split_event_ids(e.id for e in generate_world(world_seed).events)
