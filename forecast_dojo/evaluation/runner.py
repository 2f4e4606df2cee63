"""Running agents through episodes and collecting one :class:`StepRecord` per scored forecast step.

:func:`play_episode` is the one episode loop (the library's :func:`run_episodes` and the CLI's
study, :mod:`forecast_dojo.evaluation.study`, both play through it) and :func:`resume_episode` the one
rule for continuing a cut episode.

Metrics are computed from records only (``info["record"]`` for agents, :meth:`StepRecord.reference`
for the uniform, market and oracle baselines), never from other ``info`` keys; :func:`record_row`
flattens a record into the row that ``metrics`` and ``plots`` read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from forecast_dojo.agents.base import Agent
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.errors import EpisodeError, UntrustedInputError
from forecast_dojo.evaluation.baselines import reference_records
from forecast_dojo.graph import parse_graph
from forecast_dojo.records import StepRecord
from forecast_dojo.schema import Event
from forecast_dojo.tools import SUBMIT_FORECAST
from forecast_dojo.trajectory import LogStatus, log_status

MAX_TURNS_PER_EPISODE = 10_000
REFERENCE_MEMORY = "-"


def record_row(record: StepRecord, agent: str | None = None) -> dict[str, Any]:
    """The flat row of one record that ``metrics.summarize`` and ``plots`` read.

    Args:
        record: A step record.
        agent: The agent's name when the record has none.

    Returns:
        ``agent, memory ("-" for reference forecasts), event_id, step, rollout, cutoff, forecast,
        valid, flags, score_<rule>`` for every scoring rule, ``outcome_index, n_steps, source, market,
        tokens, tool_calls_by_kind, wall_s``, and what the agent looked at (:func:`evidence_fields`):
        ``seen_docs``, ``read_docs``, ``cited_docs``.
    """
    return {
        "agent": record.agent or agent,
        "memory": record.memory if record.memory is not None else REFERENCE_MEMORY,
        "event_id": record.event_id,
        "step": record.step,
        "rollout": record.rollout
        if record.memory is not None
        else None,  # references pair with every rollout
        "cutoff": record.cutoff,
        "forecast": list(record.forecast),
        "valid": record.valid,
        "flags": list(record.flags),
        **{f"score_{name}": value for name, value in record.scores.items()},
        "outcome_index": record.outcome_index,
        "n_steps": record.n_steps,
        "source": record.source,
        "market": list(record.market) if record.market is not None else None,
        "tokens": dict(record.tokens),
        "tool_calls_by_kind": _tool_call_kinds(record),
        "wall_s": record.wall_time_s if record.memory is not None else None,
        **evidence_fields(record),
    }


def evidence_fields(record: StepRecord) -> dict[str, Any]:
    """The documents a step's agent looked at, for the evidence-quality metrics.

    ``seen_docs``: every id a successful ``search`` returned or ``read`` opened in the step (the agent
    saw its title and snippet, or its text); ``read_docs``: the ids opened with ``read``;
    ``cited_docs``: the ``citations`` of the ``submit_forecast`` call that ended the step (as written:
    an id may be unknown or dated after the cutoff, which evidence precision counts against it);
    ``graph_events``: the ``{"date", "text"}`` events of the reasoning graph it submitted
    (:mod:`forecast_dojo.graph`), or None without one; ``notebook_evidence``: the ``{"date",
    "doc_ids"}`` entries of the notebook it submitted (memory-on), or None.

    Args:
        record: A step record.

    Returns:
        The three sorted id lists (empty for reference forecasts) and the graph's events.
    """
    seen: set[str] = set()
    read: set[str] = set()
    cited: set[str] = set()
    graph: list[dict[str, str]] | None = None
    for call in record.tool_calls:
        if call.error is not None:
            continue
        if call.name in ("search", "read"):
            seen.update(call.doc_ids)
        if call.name == "read":
            read.update(call.doc_ids)
        if call.name == SUBMIT_FORECAST and isinstance(call.arguments, dict):
            citations = call.arguments.get("citations")
            cited = {c for c in citations if isinstance(c, str)} if isinstance(citations, list) else set()
            if call.arguments.get("graph") is not None:
                try:
                    parsed = parse_graph(call.arguments["graph"])
                except UntrustedInputError:  # refused by the tool; a log from elsewhere may hold one
                    parsed = None
                if parsed is not None:
                    graph = [{"date": e.date, "text": e.text} for e in parsed.events]
    return {
        "seen_docs": sorted(seen),
        "read_docs": sorted(read),
        "cited_docs": sorted(cited),
        "graph_events": graph,
        "notebook_evidence": _notebook_evidence(record.notebook_out),
    }


def _notebook_evidence(notebook: str | None) -> list[dict[str, Any]] | None:
    """The dated entries (``date``, ``doc_ids``) of a submitted notebook (validated by the env), or None."""
    if notebook is None:
        return None
    entries = json.loads(notebook).get("evidence") or []
    return [{"date": str(e.get("date", "")), "doc_ids": list(e.get("doc_ids") or [])} for e in entries]


def _tool_call_kinds(record: StepRecord) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for call in record.tool_calls:
        kinds[call.name] = kinds.get(call.name, 0) + 1
    return kinds


@dataclass(frozen=True)
class Episode:
    """What to play of one event: from step ``start`` to its end (or that step only when ``single``).

    Attributes:
        event_id: The event.
        rollout: The attempt index written into the records.
        seed: The reset seed.
        start: The first step to play.
        notebook: The notebook (JSON) the first step starts from (memory-on envs), or None.
        notebook_missing: Memory-on, no ``notebook``: the step before ``start`` submitted none (the
            prompt says so, as inside an uninterrupted episode).
        single: Play the step ``start`` only.
    """

    event_id: str
    rollout: int = 0
    seed: int | None = None
    start: int = 0
    notebook: str | None = None
    notebook_missing: bool = False
    single: bool = False

    def reset_options(self, memory: str) -> dict[str, Any]:
        """The ``env.reset`` options that open this episode in an env with memory mode ``memory``."""
        options: dict[str, Any] = {"rollout": self.rollout, "step": self.start}
        if memory == "notebook" and self.notebook is not None:
            options["notebook"] = self.notebook
        elif memory == "notebook" and self.notebook_missing:
            options["notebook_missing"] = True
        return options


def resume_episode(after: StepRecord, memory: str, *, seed: int | None = None) -> Episode:
    """The one rule for continuing a cut episode: on from its next step, in the state the env carried.

    The episode continues at the step after its last logged one. Memory-free, that is nothing. Memory-on, it is the notebook the last logged step submitted
    (``notebook_out``); when that step submitted none, the env carried none and said so in the next
    prompt, and the resumed step starts the same way. So with a deterministic agent a resumed log
    equals that of an uninterrupted run (apart from ``wall_time_s``), and no step is played twice.
    Replaying the episode from its start instead would re-play logged steps and, for a sampling
    agent, continue from a notebook other than the logged one.

    Args:
        after: The last logged record of the half-logged episode (``LogStatus.partial``).
        memory: The env's memory mode.
        seed: The episode's reset seed.

    Returns:
        The rest of the episode.
    """
    carried = after.notebook_out if memory == "notebook" else None
    return Episode(
        after.event_id,
        after.rollout,
        seed,
        after.step + 1,
        carried,
        notebook_missing=memory == "notebook" and carried is None,
    )


def play_episode(
    env: ForecastDojoEnv,
    agent: Agent,
    episode: Episode,
    write: Callable[[StepRecord], object] | None = None,
) -> list[StepRecord]:
    """The episode loop: reset, then ``agent.act`` / ``env.step`` until the episode (or the single step) ends.

    Args:
        env: The environment.
        agent: The agent (fresh for the episode).
        episode: What to play.
        write: Called with every step's record as the step ends (e.g. a study's log writer).

    Returns:
        The records of the steps played, in order.

    Raises:
        EpisodeError: An episode that does not end within :data:`MAX_TURNS_PER_EPISODE` turns.
    """
    observation, _ = env.reset(episode.event_id, seed=episode.seed, options=episode.reset_options(env.memory))
    records: list[StepRecord] = []
    for _ in range(MAX_TURNS_PER_EPISODE):
        observation, _, terminated, truncated, info = env.step(agent.act(observation))
        if info["step_ended"]:
            records.append(info["record"])
            if write is not None:
                write(info["record"])
            if episode.single:
                return records
        if terminated or truncated:
            return records
    raise EpisodeError(f"episode {episode.event_id!r} did not end within {MAX_TURNS_PER_EPISODE} turns")


def episode_records(
    env: ForecastDojoEnv,
    agent: Agent,
    event_id: str,
    *,
    seed: int | None = None,
    after: StepRecord | None = None,
) -> list[StepRecord]:
    """Play one event; returns the env's record of every forecast step played (``info["record"]``).

    Args:
        env: The environment.
        agent: The agent (fresh for the event).
        event_id: The event to play.
        seed: The reset seed.
        after: The last logged record of a half-logged episode: play on from the next step
            (:func:`resume_episode`).

    Returns:
        The records of the steps played, in order.
    """
    episode = Episode(event_id, seed=seed) if after is None else resume_episode(after, env.memory, seed=seed)
    return play_episode(env, agent, episode)


def run_episode(
    env: ForecastDojoEnv,
    agent: Agent,
    event_id: str,
    *,
    seed: int | None = None,
    after: StepRecord | None = None,
) -> list[dict[str, Any]]:
    """Play one event; returns a row (:func:`record_row`) per forecast step (see :func:`episode_records`)."""
    return [record_row(r, agent.name) for r in episode_records(env, agent, event_id, seed=seed, after=after)]


def run_episodes(
    env: ForecastDojoEnv,
    agent_factory: Callable[[], Agent],
    event_ids: Iterable[str],
    *,
    seed: int = 0,
    progress: bool = True,
    resume: bool = False,
) -> list[dict[str, Any]]:
    """Play each event with a fresh agent (so nothing leaks between events through agent state).

    Args:
        env: The environment.
        agent_factory: Makes a fresh agent per event.
        event_ids: The events, played in this order (event ``i`` is reset with seed ``seed + i``).
        seed: The base seed.
        progress: Show a progress bar.
        resume: Continue the env's trajectory log (``log_dir``): skip events it holds completely,
            play half-logged ones on from their first missing step (:func:`resume_episode`);
            memory-free, where nothing is carried between steps, play exactly the steps the log
            lacks, each alone (a study at ``--concurrency`` logs steps out of order, so a killed one
            leaves gaps). With a deterministic agent the log then holds the records of an
            uninterrupted run (apart from ``wall_time_s``), each step once.

    Returns:
        The rows of the steps played in this call.
    """
    event_ids = list(event_ids)
    status = log_status(env.log_dir) if resume and env.log_dir is not None else LogStatus()
    rows: list[dict[str, Any]] = []
    label = f"{agent_factory().name} / memory={env.memory}"
    steps = {event.id: event.n_steps for event in env.events}
    for index, event_id in enumerate(tqdm(event_ids, desc=label, unit="event", disable=not progress)):
        logged = status.steps.get((event_id, 0))
        if env.memory == "none" and logged and event_id in steps:
            for step in sorted(set(range(steps[event_id])) - logged):
                agent = agent_factory()
                episode = Episode(event_id, 0, seed + index, step, single=True)
                rows.extend(record_row(r, agent.name) for r in play_episode(env, agent, episode))
            continue
        if (event_id, 0) in status.complete:
            continue
        after = status.partial.get((event_id, 0))
        rows.extend(run_episode(env, agent_factory(), event_id, seed=seed + index, after=after))
    return rows


def baseline_records(
    events: Sequence[Event],
    *,
    oracle: Mapping[tuple[str, int], Sequence[float]] | None = None,
) -> list[StepRecord]:
    """Records of the reference forecasters that need no agent: uniform, market (where known), oracle (where known).

    The base rate needs training events: see :func:`forecast_dojo.evaluation.baselines.reference_records`.
    """
    return reference_records(events, oracle=oracle)


def baseline_rows(
    events: Sequence[Event],
    *,
    oracle: Mapping[tuple[str, int], Sequence[float]] | None = None,
) -> list[dict[str, Any]]:
    """:func:`baseline_records` as rows (:func:`record_row`)."""
    return [record_row(r) for r in baseline_records(events, oracle=oracle)]
