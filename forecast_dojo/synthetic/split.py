"""A fixed train / held-out split of the synthetic world's events.

Training (SFT data, GRPO prompts, cue weights an honest agent learns) uses only ``train`` events;
evaluation of anything trained reports ``held_out`` events. The split depends only on the event ids
and a split seed (a SHA-256 rank), never on outcomes, evidence or the generator's internals, so it is
stable when the world is regenerated and cannot be tuned to make a model look good.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

HELD_OUT_FRACTION = 0.25
SPLIT_SEED = 0


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


def _rank(event_id: str, seed: int) -> str:
    return hashlib.sha256(f"forecast-dojo-split:{seed}:{event_id}".encode()).hexdigest()


def split_event_ids(
    event_ids: Iterable[str], *, held_out_fraction: float = HELD_OUT_FRACTION, seed: int = SPLIT_SEED
) -> EventSplit:
    """Split event ids: the ``round(n * held_out_fraction)`` ids with the smallest hash rank are held out.

    Args:
        event_ids: the ids to split (duplicates are ignored).
        held_out_fraction: the share of events held out, in (0, 1).
        seed: the split seed (not the world seed): another seed gives another split.

    Returns:
        The split.
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise ValueError(f"held_out_fraction must be in (0, 1), not {held_out_fraction}")
    ids = sorted(set(event_ids))
    n_held_out = max(1, round(len(ids) * held_out_fraction)) if len(ids) > 1 else 0
    ranked = sorted(ids, key=lambda event_id: _rank(event_id, seed))
    held_out = set(ranked[:n_held_out])
    return EventSplit(
        train=tuple(i for i in ids if i not in held_out), held_out=tuple(i for i in ids if i in held_out)
    )


def synthetic_split(world_seed: int = 0, **options: float | int) -> EventSplit:
    """The split of the synthetic world generated with ``world_seed`` (see :func:`split_event_ids`).

    Args:
        world_seed: the world's generator seed.
        **options: ``held_out_fraction`` and ``seed`` of :func:`split_event_ids`.

    Returns:
        The split of that world's event ids.
    """
    from forecast_dojo.synthetic import generate_world

    return split_event_ids((e.id for e in generate_world(world_seed).events), **options)  # type: ignore[arg-type]
