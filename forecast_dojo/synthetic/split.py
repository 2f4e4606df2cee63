"""The synthetic world's one train / held-out split (the rule lives in :mod:`forecast_dojo.events.split`).

Sorted by id, events at even positions train (SFT data, GRPO prompts, the honest agent's cue weights,
the base rate; ``gym.make`` ids hold them by default) and events at odd positions are held out for
evaluation (``forecast-dojo run`` evaluates them by default; ``forecast-dojo export sft`` refuses them).
"""

from __future__ import annotations

from forecast_dojo.events.split import EventSplit, split_event_ids

__all__ = ["EventSplit", "split_event_ids", "synthetic_split"]


def synthetic_split(world_seed: int = 0) -> EventSplit:
    """The split of the synthetic world generated with ``world_seed``.

    Args:
        world_seed: the world's generator seed.

    Returns:
        The split of that world's event ids.
    """
    from forecast_dojo.synthetic import generate_world

    return split_event_ids(e.id for e in generate_world(world_seed).events)
