"""Running agents through episodes and collecting one row per scored forecast step."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from forecast_dojo.agents.base import Agent
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.schema import Event
from forecast_dojo.scoring import all_scores, uniform

MAX_TURNS_PER_EPISODE = 10_000


def run_episode(
    env: ForecastDojoEnv, agent: Agent, event_id: str, *, seed: int | None = None
) -> list[dict[str, Any]]:
    """Play one whole event; returns a row per forecast step (the env's end-of-step info plus labels)."""
    observation, _ = env.reset(event_id, seed=seed)
    rows = []
    for _ in range(MAX_TURNS_PER_EPISODE):
        observation, _, terminated, truncated, info = env.step(agent.act(observation))
        if info["step_ended"]:
            rows.append(
                {
                    "agent": agent.name,
                    "memory": env.memory,
                    "event_id": event_id,
                    "step": info.get("finished_step", info["step"]),
                    "cutoff": info["cutoff"],
                    "forecast": info["forecast"],
                    "valid": info["valid"],
                    "flags": info["flags"],
                    **{f"score_{name}": value for name, value in info["scores"].items()},
                }
            )
        if terminated or truncated:
            return rows
    raise RuntimeError(f"episode {event_id!r} did not end within {MAX_TURNS_PER_EPISODE} turns")


def run_episodes(
    env: ForecastDojoEnv,
    agent_factory: Callable[[], Agent],
    event_ids: Iterable[str],
    *,
    seed: int = 0,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Play each event with a fresh agent (so nothing leaks between events through agent state)."""
    event_ids = list(event_ids)
    rows: list[dict[str, Any]] = []
    label = f"{agent_factory().name} / memory={env.memory}"
    for index, event_id in enumerate(tqdm(event_ids, desc=label, unit="event", disable=not progress)):
        rows.extend(run_episode(env, agent_factory(), event_id, seed=seed + index))
    return rows


def baseline_rows(
    events: Sequence[Event],
    *,
    oracle: Mapping[tuple[str, int], Sequence[float]] | None = None,
) -> list[dict[str, Any]]:
    """Rows for the reference forecasters that need no agent: uniform, market (where known), oracle (where known)."""
    rows = []
    for event in events:
        for step, cutoff in enumerate(event.cutoffs):
            references: dict[str, Sequence[float] | None] = {
                "uniform": uniform(len(event.outcomes)),
                "market": event.market_at(cutoff),
                "oracle": oracle.get((event.id, step)) if oracle is not None else None,
            }
            for name, forecast in references.items():
                if forecast is None:
                    continue
                scores = all_scores(forecast, event.outcome_index)
                rows.append(
                    {
                        "agent": name,
                        "memory": "-",
                        "event_id": event.id,
                        "step": step,
                        "cutoff": cutoff.isoformat(),
                        "forecast": list(forecast),
                        "valid": True,
                        "flags": [],
                        **{f"score_{k}": v for k, v in scores.items()},
                    }
                )
    return rows
