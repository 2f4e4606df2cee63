"""A resumable evaluation study: agents x modes x events x rollouts, logged step by step.

Layout of a study folder::

    <out>/study.json                 what was run (agents, modes, events, rollouts, seed, spec)
    <out>/references.jsonl           reference forecasts (uniform, base rate, market, oracle) as step records
    <out>/evidence.json              the reference evidence sets (evidence quality, forecast_dojo.evaluation.evidence)
    <out>/<agent>-<mode>/run.json    one trajectory log per (agent, mode) ...
    <out>/<agent>-<mode>/steps.jsonl ... one step record per line, appended as each step ends

Modes (:data:`STUDY_MODES`, the one registry of study modes: a new mode is one entry there, and
its env is built from the entry's memory mode and options): ``none`` (memory-free), ``notebook``
(memory-on), ``no-tools`` (memory-free, only ``submit_forecast``, one turn: the same model without
research), and the notebook controls ``notebook-empty``, ``notebook-stale`` (the agent's own
notebook from two steps before), ``notebook-shuffled`` (another event's notebook at the same step,
labels mapped by position) and ``notebook-oracle`` (synthetic world: the oracle's posterior at the
previous step): each replays single steps (``reset(options={"step", "notebook"})``) of the
``notebook`` run's events (:func:`control_notebook`); and the topline ``near-resolution``
(WorldReasoner's condition: memory-free, each event one step with the gateway a day before it
resolved, :func:`forecast_dojo.events.schedule.near_resolution_event`), an upper reference that
sees what no forecaster could: never a default, and labelled as such in reports.

The folder also gets ``evidence.json``, the reference evidence quality is measured against
(:func:`forecast_dojo.evaluation.evidence.study_reference`: the generator's exact evidence on the
synthetic world, a hindsight set on real events), written once.

Episodes are played by :func:`forecast_dojo.evaluation.runner.play_episode`, the library's one
episode loop. Resuming: rerunning the same study reads each log
(:func:`forecast_dojo.trajectory.log_status`), skips complete episodes, continues a half-logged one
by :func:`forecast_dojo.evaluation.runner.resume_episode` (from its next step, in the state the env
had carried into it), and never writes a key twice. A log of a different configuration is an error unless
``overwrite`` (which deletes the study's logs first).
"""

from __future__ import annotations

import json
import shutil
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from forecast_dojo.agents.base import Agent
from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.budgets import Budgets
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.errors import ConfigError
from forecast_dojo.errors import StudyError as StudyError
from forecast_dojo.evaluation.evidence import (
    EVIDENCE_FILE,
    attach_reference,
    load_reference,
    save_reference,
    study_reference,
)
from forecast_dojo.evaluation.runner import Episode, play_episode, record_row, resume_episode
from forecast_dojo.events.schedule import near_resolution_event
from forecast_dojo.notebook import notebook_value
from forecast_dojo.records import StepRecord
from forecast_dojo.schema import Event
from forecast_dojo.trajectory import TrajectoryWriter, load_records, log_status, save_records

STUDY_FILE = "study.json"
REFERENCES_FILE = "references.jsonl"

AgentFactory = Callable[[ForecastDojoEnv], Agent]
EnvFactory = Callable[[str, dict[str, Any]], ForecastDojoEnv]


@dataclass(frozen=True)
class StudyMode:
    """One study mode: the env it plays in and what it plays.

    Attributes:
        name: The mode's name (``--modes``; the log folder is ``<agent>-<name>``).
        memory: The env's memory mode (``forecast_dojo.env.MEMORY_MODES``).
        description: One line for help texts.
        submit_only: Only ``submit_forecast``, one turn (no research).
        control: A notebook control (:func:`control_notebook`): the mode replays single steps of the
            same agent's ``notebook`` run from the notebook the control gives.
        schedule: The env's schedule (``forecast_dojo.env.SCHEDULES``): ``cutoffs`` (the events' own)
            or ``near-resolution`` (one step a day before resolution).
        topline: The mode is an upper reference by design (it sees what a forecaster could not), never
            a forecast: reports label it so and no default runs it.
    """

    name: str
    memory: str
    description: str
    submit_only: bool = False
    control: str | None = None
    schedule: str = "cutoffs"
    topline: bool = False

    def scheduled(self, events: Sequence[Event]) -> list[Event]:
        """The events as this mode's env plays them (its schedule applied, as ``ForecastDojoEnv`` does)."""
        if self.schedule == "near-resolution":
            return [near_resolution_event(e) for e in events]
        return list(events)

    def env_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``registration.make`` keywords for this mode's env: ``options`` with the mode's memory and tools."""
        result = dict(options) | {"memory": self.memory}
        if self.schedule != "cutoffs":
            result["schedule"] = self.schedule
        if self.submit_only:
            result.pop("max_turns", None)
            result.pop("max_tool_calls", None)
            result |= {"tools": ("submit_forecast",), "budgets": Budgets(max_tool_calls=0, max_turns=1)}
        return result


STUDY_MODES: dict[str, StudyMode] = {
    mode.name: mode
    for mode in (
        StudyMode("none", "none", "memory-free"),
        StudyMode("notebook", "notebook", "memory-on: the belief notebook is carried between steps"),
        StudyMode("no-tools", "none", "memory-free, only submit_forecast, one turn", submit_only=True),
        StudyMode(
            "near-resolution",
            "none",
            "TOPLINE, not a forecast: memory-free, one step with the gateway a day before resolution",
            schedule="near-resolution",
            topline=True,
        ),
        StudyMode(
            "notebook-empty",
            "notebook",
            "single steps of the notebook run, without a notebook",
            control="empty",
        ),
        StudyMode(
            "notebook-stale", "notebook", "... from its own notebook two steps before", control="stale"
        ),
        StudyMode("notebook-shuffled", "notebook", "... from another event's notebook", control="shuffled"),
        StudyMode(
            "notebook-oracle", "notebook", "... from the oracle's posterior (synthetic)", control="oracle"
        ),
    )
}
MODES = tuple(STUDY_MODES)
EPISODE_MODES = tuple(m.name for m in STUDY_MODES.values() if m.control is None)  # whole episodes
TOPLINE_MODES = tuple(m.name for m in STUDY_MODES.values() if m.topline)  # upper references, never forecasts
CONTROLS = tuple(m.control for m in STUDY_MODES.values() if m.control is not None)


def study_mode(mode: str) -> StudyMode:
    """The registered study mode named ``mode``.

    Raises:
        StudyError: An unknown mode.
    """
    if mode not in STUDY_MODES:
        raise StudyError(f"unknown mode {mode!r}; known: {list(MODES)}")
    return STUDY_MODES[mode]


def env_memory(mode: str) -> str:
    """The env's memory setting for a study mode."""
    return study_mode(mode).memory


def log_dir(out: Path, agent: str, mode: str) -> Path:
    """Where the log of (agent, mode) lives in a study folder."""
    return Path(out) / f"{agent}-{mode}"


def _episode_seed(seed: int, index: int, rollout: int) -> int:
    return seed + 1000 * rollout + index


def plan_episodes(
    directory: Path, events: Sequence[Event], rollouts: int, seed: int, memory: str
) -> tuple[list[Episode], int]:
    """What is left to play of a log: (episodes, steps already logged for the plan).

    Memory-free (``memory == "none"``), every forecast step is an episode of its own
    (``Episode(..., start=step, single=True)``): nothing is carried between the steps of an event,
    so they are independent and play side by side under ``concurrency``, and a log with gaps plays
    exactly the steps it lacks. Memory-on, the steps of an (event, rollout) play in order as one
    episode: complete episodes are skipped and a half-logged one continues by
    :func:`~forecast_dojo.evaluation.runner.resume_episode`, so no step is played twice.
    """
    status = log_status(directory)
    jobs, done = [], 0
    for index, event in enumerate(events):
        for rollout in range(rollouts):
            key = (event.id, rollout)
            logged = status.steps.get(key, set())
            episode_seed = _episode_seed(seed, index, rollout)
            if memory == "none":
                for step in range(event.n_steps):
                    if step in logged:
                        done += 1
                    else:
                        jobs.append(Episode(event.id, rollout, episode_seed, step, single=True))
            elif key in status.complete:
                done += event.n_steps
            elif key in status.partial:
                done += len(logged)
                jobs.append(resume_episode(status.partial[key], memory, seed=episode_seed))
            else:
                jobs.append(Episode(event.id, rollout, episode_seed))
    return jobs, done


def control_notebook(
    control: str,
    record: StepRecord,
    by_key: Mapping[tuple[str, int, int], StepRecord],
    events: Mapping[str, Event],
    oracle: Mapping[tuple[str, int], Sequence[float]] | None,
) -> tuple[bool, str | None]:
    """The notebook a control carries into ``record``'s step: (applicable, notebook JSON or None).

    Args:
        control: ``empty``, ``stale``, ``shuffled`` or ``oracle``.
        record: the memory-on run's record of the step being replayed (step >= 1).
        by_key: that run's records by (event, step, rollout).
        events: events by id.
        oracle: the synthetic world's oracle (for ``oracle``).

    Returns:
        Whether the control applies at this step, and the notebook (None: start without one).
    """
    event = events[record.event_id]
    step, rollout = record.step, record.rollout
    forecast_date = event.cutoffs[step].date().isoformat()
    if control == "empty":
        return True, None
    if control == "stale":
        if step < 2:
            return False, None
        older = by_key.get((event.id, step - 2, rollout))
        return older is not None, older.notebook_out if older else None
    if control == "oracle":
        if oracle is None or (event.id, step - 1) not in oracle:
            return False, None
        probabilities = oracle[(event.id, step - 1)]
        assessment = dict(zip(event.outcomes, (round(float(p), 6) for p in probabilities), strict=True))
        total = sum(assessment.values())
        assessment = {k: v / total for k, v in assessment.items()}
        return True, json.dumps(notebook_value(assessment))
    if control == "shuffled":
        same_k = sorted(e.id for e in events.values() if len(e.outcomes) == len(event.outcomes))
        if len(same_k) < 2:
            return False, None
        donor_id = same_k[(same_k.index(event.id) + 1) % len(same_k)]
        donor_steps = sorted(s for (e, s, r) in by_key if e == donor_id and r == rollout)
        if not donor_steps:
            return False, None
        donor = by_key[(donor_id, min(donor_steps, key=lambda s: abs(s - step)), rollout)]
        if donor.notebook_in is None:
            return True, None
        raw = json.loads(donor.notebook_in)
        labels = list(events[donor_id].outcomes)
        assessment = {
            event.outcomes[labels.index(label)]: p
            for label, p in raw.get("assessment", {}).items()
            if label in labels
        }
        evidence = [e for e in raw.get("evidence", []) if str(e.get("date", "")) <= forecast_date]
        return True, json.dumps(notebook_value(assessment, evidence, raw.get("open_questions", [])))
    raise ConfigError(f"unknown notebook control {control!r}; known: {CONTROLS}")


# why a control replays no notebook at a step; the first is by design, the others are warned about
STALE_FIRST = "step 1: no notebook of its own from two steps before"


def control_skip_reason(
    control: str,
    record: StepRecord,
    by_key: Mapping[tuple[str, int, int], StepRecord],
    events: Mapping[str, Event],
) -> str:
    """Why :func:`control_notebook` does not apply at ``record``'s step (one line, for the report).

    Args:
        control: the notebook control.
        record: the memory-on run's record of the step.
        by_key: that run's records by (event, step, rollout).
        events: the study's events by id.

    Returns:
        The reason, as text.
    """
    if control == "stale":
        return STALE_FIRST if record.step < 2 else "its step two before is not logged"
    if control == "oracle":
        return "no oracle posterior for the previous step (the synthetic world only)"
    if control == "shuffled":
        k = len(events[record.event_id].outcomes)
        if sum(len(e.outcomes) == k for e in events.values()) < 2:
            return f"no other evaluated event has {k} outcomes to lend its notebook"
        return "the donor event has no logged step in this rollout"
    return f"the {control} control does not apply"


def plan_controls(
    directory: Path,
    source: Path,
    control: str,
    events: Sequence[Event],
    oracle: Mapping[tuple[str, int], Sequence[float]] | None,
) -> tuple[list[Episode], int, dict[str, int]]:
    """Single-step replays of the memory-on run's steps (>= 1) under a notebook control.

    Returns:
        (jobs left to play, steps already logged, skipped steps counted by reason
        (:func:`control_skip_reason`)).
    """
    records = load_records(source) if (Path(source) / "steps.jsonl").exists() else []
    if not records:
        raise StudyError(
            f"the notebook control {control!r} needs the memory-on log {source}; run mode 'notebook' first"
        )
    by_id = {e.id: e for e in events}
    by_key = {(r.event_id, r.step, r.rollout): r for r in records if r.event_id in by_id}
    done_keys = {(k[1], k[2], k[3]) for k in log_status(directory).keys}
    jobs, done = [], 0
    skipped: dict[str, int] = {}
    for (event_id, step, rollout), record in sorted(by_key.items()):
        if step < 1:
            continue
        applies, notebook = control_notebook(control, record, by_key, by_id, oracle)
        if not applies:
            reason = control_skip_reason(control, record, by_key, by_id)
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if (event_id, step, rollout) in done_keys:
            done += 1
            continue
        jobs.append(Episode(event_id, rollout, 0, step, notebook, single=True))
    return jobs, done, skipped


def evaluate_step(
    env: ForecastDojoEnv,
    agent: Agent,
    event_id: str,
    step: int,
    *,
    notebook: str | dict[str, Any] | None = None,
    seed: int = 0,
) -> StepRecord:
    """Play a single forecast step of an event, starting from a given notebook (memory-on envs).

    Args:
        env: the env (``memory="notebook"`` to carry ``notebook``).
        agent: a fresh agent.
        event_id: the event.
        step: the forecast step to replay.
        notebook: the notebook to start from (dict or JSON), or None.
        seed: the episode seed.

    Returns:
        The step's record.
    """
    text = json.dumps(notebook) if isinstance(notebook, dict) else notebook
    return play_episode(env, agent, Episode(event_id, 0, seed, step, text, single=True))[0]


def run_study(
    out: str | Path,
    agents: Mapping[str, AgentFactory],
    modes: Sequence[str],
    events: Sequence[Event],
    make_env: EnvFactory,
    *,
    rollouts: int = 1,
    seed: int = 0,
    concurrency: int = 1,
    overwrite: bool = False,
    oracle: Mapping[tuple[str, int], Sequence[float]] | None = None,
    config: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run (or resume) a study; every step record is appended to its log as the step ends.

    Args:
        out: the study folder.
        agents: agent name -> factory of a fresh agent for an env (one agent per episode).
        modes: study modes (:data:`MODES`); controls run after the ``notebook`` mode of the same agent.
        events: the events to play, in order.
        make_env: ``make_env(mode, run_metadata)`` -> a new env for that mode, without a log directory.
        rollouts: episodes per (agent, mode, event).
        seed: base seed of the episodes.
        concurrency: episodes in flight at once (threads, each with its own env): parallel requests to
            a server agent, the batch of a local model; memory-free, each forecast step is an episode.
        overwrite: delete the study's logs and start afresh.
        oracle: the synthetic world's oracle (for the ``notebook-oracle`` control).
        config: extra configuration stored in ``study.json`` (e.g. the spec).
        progress: show a progress bar per (agent, mode).

    Returns:
        ``{"played": steps played now, "reused": steps found in the logs, "logs": [log dirs]}``.

    Raises:
        StudyError: for an unknown mode, or logs of another configuration without ``overwrite``.
    """
    out = Path(out)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise StudyError(f"unknown mode(s) {unknown}; known: {list(MODES)}")
    study = {
        "agents": list(agents),
        "modes": list(modes),
        "events": [e.id for e in events],
        "rollouts": rollouts,
        "seed": seed,
        "event_meta": {
            e.id: {"open_at": e.open_at.isoformat(), "close_at": e.close_at.isoformat()} for e in events
        },
        **(config or {}),
    }
    if overwrite and out.exists():
        for name in agents:
            for mode in MODES:
                shutil.rmtree(log_dir(out, name, mode), ignore_errors=True)
        for file in (STUDY_FILE, REFERENCES_FILE, EVIDENCE_FILE):
            (out / file).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    _write_study_file(out, study)
    ordered = sorted(modes, key=lambda m: STUDY_MODES[m].control is not None)  # controls last
    played = reused = 0
    logs = []
    for name, factory in agents.items():
        for mode in ordered:
            directory = log_dir(out, name, mode)
            metadata = {"agent": name, "mode": mode, "seed": seed, "rollouts": rollouts}
            probe = make_env(mode, metadata)
            if not (out / EVIDENCE_FILE).exists():  # what evidence quality is measured against
                save_reference(out, study_reference(probe, events))
            run_id = probe.run_id
            run_file = directory / "run.json"
            if run_file.exists() and json.loads(run_file.read_text()).get("run_id") != run_id:
                raise StudyError(
                    f"{directory} holds a log of another configuration (run {json.loads(run_file.read_text()).get('run_id')}, "
                    f"this one is {run_id}); rerun with --overwrite to start afresh, or choose another --out"
                )
            control = STUDY_MODES[mode].control
            if control is not None:
                jobs, done, skipped = plan_controls(
                    directory, log_dir(out, name, "notebook"), control, events, oracle
                )
                total = done + len(jobs)
                _note_control(out, study, f"{name}/{mode}", total, skipped)
            else:
                mode_events = STUDY_MODES[mode].scheduled(events)  # near-resolution: one step per event
                jobs, done = plan_episodes(directory, mode_events, rollouts, seed, env_memory(mode))
                total = sum(e.n_steps for e in mode_events) * rollouts
            reused += done
            logs.append(directory)
            if not jobs:
                probe.close()
                continue
            played += _run_jobs(
                jobs,
                TrajectoryWriter(directory, probe.run_metadata, run_id=run_id),
                probe,
                partial(make_env, mode, metadata),
                factory,
                concurrency,
                tqdm(total=total, initial=done, desc=f"{name} / {mode}", unit="step", disable=not progress),
            )
    return {"played": played, "reused": reused, "logs": [str(p) for p in logs]}


def _note_control(out: Path, study: dict[str, Any], name: str, planned: int, skipped: dict[str, int]) -> None:
    """Record in ``study.json`` how many of the notebook run's steps a control replays, and warn of gaps."""
    replayable = planned + sum(skipped.values())
    study.setdefault("controls", {})[name] = {
        "replayable": replayable,
        "planned": planned,
        "skipped": skipped,
    }
    _write_study_file(out, study)
    unexpected = {reason: n for reason, n in skipped.items() if reason != STALE_FIRST}
    if unexpected:
        reasons = "; ".join(f"{n} step(s): {reason}" for reason, n in sorted(unexpected.items()))
        warnings.warn(
            f"{name} replays {planned} of the notebook run's {replayable} steps after the first ({reasons})",
            stacklevel=3,
        )


def control_coverage(out: str | Path) -> dict[str, dict[str, Any]]:
    """What each notebook control of a study folder replayed (written by :func:`run_study`).

    Args:
        out: the study folder.

    Returns:
        ``{"<agent>/<mode>": {"replayable", "planned", "skipped": {reason: steps}}}``; empty for a
        study without controls (or one written before this was recorded).
    """
    study = json.loads((Path(out) / STUDY_FILE).read_text())
    return dict(study.get("controls", {}))


def _run_jobs(
    jobs: Sequence[Episode],
    writer: TrajectoryWriter,
    first_env: ForecastDojoEnv,
    new_env: Callable[[], ForecastDojoEnv],
    factory: AgentFactory,
    concurrency: int,
    bar: Any,
) -> int:
    """Play jobs (in threads, one env per thread), writing each record under a lock; returns steps played."""
    lock = threading.Lock()
    local = threading.local()
    spare = [first_env]

    def write(record: StepRecord) -> None:
        with lock:
            writer.write(record)
            bar.update(1)

    def work(job: Episode) -> int:
        env = getattr(local, "env", None)
        if env is None:
            with lock:
                env = spare.pop() if spare else None
            env = env or new_env()
            local.env = env
        return len(play_episode(env, factory(env), job, write))

    played = 0
    try:
        if concurrency <= 1:
            for job in jobs:
                played += work(job)
        else:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = [pool.submit(work, job) for job in jobs]
                try:
                    for future in as_completed(futures):
                        played += future.result()
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
    finally:
        bar.close()
        with lock:
            writer.close()
    return played


def write_references(out: str | Path, records: Sequence[StepRecord]) -> Path:
    """Write reference forecasters' records to ``<out>/references.jsonl`` (replacing it)."""
    return save_records(Path(out) / REFERENCES_FILE, records)


def _write_study_file(out: Path, study: dict[str, Any]) -> None:
    """Write ``study.json``, keeping the agents and modes of earlier runs of the same study.

    Several ``forecast-dojo run`` invocations may fill one study folder (one per agent or mode, at once
    or one after another): when the folder's ``study.json`` describes the same study (every key but
    ``agents`` and ``modes`` equal), the new file lists the union of both runs' agents and modes, so
    :func:`study_rows` and the report read every log (the controls' notes are merged too); a study
    of other events or another seed replaces it. The read-merge-write holds an exclusive lock
    (``study.json.lock``), so concurrent runs do not lose each other's entries.
    """
    import fcntl

    path = out / STUDY_FILE
    with open(out / (STUDY_FILE + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            earlier = json.loads(path.read_text()) if path.is_file() else None
        except (OSError, ValueError):
            earlier = None
        mine = json.loads(json.dumps(study, default=str))  # as it is stored (dates as strings)
        merged_keys = ("agents", "modes", "controls")
        if isinstance(earlier, dict) and all(
            earlier.get(key) == value for key, value in mine.items() if key not in merged_keys
        ):
            for key in ("agents", "modes"):
                merged = list(earlier.get(key) or [])
                mine[key] = merged + [item for item in mine[key] if item not in merged]
            controls = {**(earlier.get("controls") or {}), **(mine.get("controls") or {})}
            if controls:
                mine["controls"] = controls
        write_json_atomic(path, mine, sort_keys=True)


def study_rows(out: str | Path) -> list[dict[str, Any]]:
    """Every row of a study folder: its logs (mode from the folder) and its reference records.

    Rows get ``horizon_days`` (cutoff to the question's close) and ``open_at`` from ``study.json``,
    and, when the folder has an evidence reference (``evidence.json``,
    :mod:`forecast_dojo.evaluation.evidence`), agents' rows their step's ``reference_docs``.

    Args:
        out: the study folder.

    Returns:
        Rows as :func:`forecast_dojo.evaluation.metrics.summarize` reads them.
    """
    out = Path(out)
    study = json.loads((out / STUDY_FILE).read_text())
    rows = []
    for name in study["agents"]:
        for mode in study["modes"]:
            directory = log_dir(out, name, mode)
            if not (directory / "steps.jsonl").exists():
                continue
            for record in load_records(directory):
                if record.event_id in study["events"]:
                    rows.append(record_row(record, name) | {"agent": name, "memory": mode})
    references = out / REFERENCES_FILE
    if references.exists():  # several forecasters' records share (event, step) keys: keep them all
        rows.extend(record_row(record) for record in load_records(references, deduplicate=False))
    from datetime import datetime

    meta = study.get("event_meta", {})
    for row in rows:
        event = meta.get(row["event_id"])
        if event is not None:
            cutoff = datetime.fromisoformat(row["cutoff"].replace("Z", "+00:00"))
            row["horizon_days"] = (datetime.fromisoformat(event["close_at"]) - cutoff).total_seconds() / 86400
            row["open_at"] = event["open_at"]
    attach_reference(rows, load_reference(out))
    return rows
