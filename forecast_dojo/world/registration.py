"""World-mode environments by name: ``make_world(spec, **options)`` and the gymnasium ids it registers.

A world env is built from the same spec files as the fixed-date envs (:mod:`forecast_dojo.registration`):
the spec gives the events (or the synthetic world), the corpus, the split, the embedder and the
retriever; world mode adds its own options (``start``, ``end``, ``memory``, ``reward``, ``budgets``...).
Importing ``forecast_dojo`` registers:

* ``forecast_dojo/SyntheticSim-v0``: the synthetic world's calendar (spec ``Synthetic-v0``);
* ``forecast_dojo/ForecastBench-WCE-Sim-v0``: the real ForecastBench events on Wikipedia Current
  Events (spec ``ForecastBench-WCE-v0``); ``make`` says which command builds the data when it is absent.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import date
from typing import TYPE_CHECKING, Any

from forecast_dojo.errors import ConfigError

if TYPE_CHECKING:
    from forecast_dojo.registration import DojoSpec
    from forecast_dojo.world.env import WorldEnv

WORLD_IDS = {
    "SyntheticSim-v0": "Synthetic-v0",
    "ForecastBench-WCE-Sim-v0": "ForecastBench-WCE-v0",
}
SPEC_OVERRIDES = ("split", "embedder", "retriever", "retriever_options", "seed", "event_ids", "train_events")


def _day(value: Any, name: str) -> date | None:
    if value is None or isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError as err:
            raise ConfigError(f"{name} must be a date (YYYY-MM-DD), got {value!r}") from err
    raise ConfigError(f"{name} must be a date (YYYY-MM-DD), got {value!r}")


def make_world(
    spec: DojoSpec | str | os.PathLike[str] = "Synthetic-v0",
    *,
    default_split: str = "train",
    free_form: bool = False,
    **options: Any,
) -> WorldEnv:
    """Build a world-mode env over a spec's events and corpus.

    Args:
        spec: A spec (object, file, name or gymnasium id of a fixed-date spec), e.g. ``"Synthetic-v0"``.
        default_split: The split when neither ``split`` nor the spec names one.
        free_form: Synthetic world: replace every multi-outcome question by its free-form variant
            (:func:`forecast_dojo.world.oracle.free_form_variant`: the answer is an entity the agent must name).
        **options: Spec fields (``split``, ``embedder``, ``retriever``, ``retriever_options``, ``seed``,
            ``event_ids``, ``train_events``) and :class:`~forecast_dojo.world.WorldEnv` arguments
            (``start``/``end`` as dates or ``YYYY-MM-DD``, ``memory``, ``reward``, ``budgets``, ``tools``,
            ``python_runner``, ``log_dir``, ``run_metadata``, ``skip_empty_days``, ``render_mode``).
            ``tools`` defaults to the spec's research tools.

    Returns:
        The env (unwrapped).

    Raises:
        SpecError: An unknown spec, or its data not built (the message names the command that builds it).
        ConfigError: Bad world options.
    """
    from forecast_dojo.registration import _spec_data, resolve_spec
    from forecast_dojo.world.env import WorldEnv
    from forecast_dojo.world.oracle import free_form_variant
    from forecast_dojo.world.tools import RESEARCH_TOOLS

    resolved = resolve_spec(spec)
    resolved = dataclasses.replace(resolved, **{k: options.pop(k) for k in SPEC_OVERRIDES if k in options})
    if isinstance(resolved.event_ids, list):
        resolved = dataclasses.replace(resolved, event_ids=tuple(resolved.event_ids))
    resolved.validate()
    if free_form and resolved.world != "synthetic":
        raise ConfigError("free_form=True makes free-form variants of the synthetic world's questions only")
    events, corpus, retriever, env_spec = _spec_data(resolved, default_split)
    if free_form:
        events = [free_form_variant(e) if len(e.outcomes) > 2 else e for e in events]
    options.setdefault("tools", tuple(t for t in RESEARCH_TOOLS if t in resolved.tools))
    for name in ("start", "end"):
        options[name] = _day(options.get(name), name)
    env_spec.pop("train_events", None)  # not part of a world run's identity (its run id stays as it was)
    metadata = {
        "env_spec": {**env_spec, **({"free_form": True} if free_form else {})},
        **options.pop("run_metadata", {}),
    }
    return WorldEnv(events, corpus, retriever, run_metadata=metadata, name=resolved.name, **options)


def register_world_envs() -> list[str]:
    """Register the world-mode gymnasium ids (:data:`WORLD_IDS`); cheap: nothing is loaded until ``make``.

    Returns:
        The gymnasium ids.
    """
    import gymnasium as gym

    ids = []
    for name, spec in WORLD_IDS.items():
        env_id = f"forecast_dojo/{name}"
        if env_id not in gym.registry:
            gym.register(
                env_id, entry_point="forecast_dojo.world.registration:make_world", kwargs={"spec": spec}
            )
        ids.append(env_id)
    return ids
