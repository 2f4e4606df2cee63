"""A resumable evaluation study: agents x modes x events x rollouts, logged step by step.

Layout of a study folder::

    <out>/study.json                 what was run (agents, modes, events, rollouts, seed, spec)
    <out>/references.jsonl           reference forecasts (uniform, base rate, market, oracle) as step records
    <out>/<agent>-<mode>/run.json    one trajectory log per (agent, mode) ...
    <out>/<agent>-<mode>/steps.jsonl ... one step record per line, appended as each step ends

Modes: ``none`` (memory-free), ``notebook`` (memory-on), ``no-tools`` (memory-free, only
``submit_forecast``, one turn: the same model without research), and the notebook controls
``notebook-empty``, ``notebook-stale`` (the agent's own notebook from two steps before),
``notebook-shuffled`` (another event's notebook at the same step, labels mapped by position) and
``notebook-oracle`` (synthetic world: the oracle's posterior at the previous step): each replays
single steps (``reset(options={"step", "notebook"})``) of the ``notebook`` run's events.

Resuming: rerunning the same study reads each log (:func:`forecast_dojo.trajectory.log_status`),
skips complete episodes, continues a half-logged one from its next step with the notebook it had
carried, and never writes a key twice. A log of a different configuration is an error unless
``overwrite`` (which deletes the study's logs first).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from forecast_dojo.agents.base import Agent
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.errors import ConfigError, EpisodeError
from forecast_dojo.errors import StudyError as StudyError
from forecast_dojo.notebook import notebook_value
from forecast_dojo.records import StepRecord
from forecast_dojo.schema import Event
from forecast_dojo.trajectory import TrajectoryWriter, load_records, log_status, save_records

EPISODE_MODES = ("none", "notebook", "no-tools")
CONTROLS = ("empty", "stale", "shuffled", "oracle")
MODES = EPISODE_MODES + tuple(f"notebook-{c}" for c in CONTROLS)
STUDY_FILE = "study.json"
REFERENCES_FILE = "references.jsonl"
MAX_TURNS_PER_EPISODE = 10_000

AgentFactory = Callable[[ForecastDojoEnv], Agent]
EnvFactory = Callable[[str, dict[str, Any]], ForecastDojoEnv]


@dataclass(frozen=True)
class Job:
    """One unit of work: play ``event_id`` from ``start`` (one step only when ``single``)."""

    event_id: str
    rollout: int
    start: int
    notebook: str | None
    single: bool
    seed: int


def env_memory(mode: str) -> str:
    """The env's memory setting for a study mode."""
    return "notebook" if mode.startswith("notebook") else "none"


def log_dir(out: Path, agent: str, mode: str) -> Path:
    """Where the log of (agent, mode) lives in a study folder."""
    return Path(out) / f"{agent}-{mode}"


def _episode_seed(seed: int, index: int, rollout: int) -> int:
    return seed + 1000 * rollout + index


def plan_episodes(
    directory: Path, events: Sequence[Event], rollouts: int, seed: int, memory: str
) -> tuple[list[Job], int]:
    """What is left to play of whole episodes in a log: (jobs, steps already logged for the plan).

    Complete (event, rollout) episodes are skipped; a half-logged one continues at its next step with
    the notebook its last logged step submitted (memory-on), so no step is played twice.
    """
    status = log_status(directory)
    jobs, done = [], 0
    for index, event in enumerate(events):
        for rollout in range(rollouts):
            key = (event.id, rollout)
            episode_seed = _episode_seed(seed, index, rollout)
            if key in status.complete:
                done += event.n_steps
            elif key in status.partial:
                last = status.partial[key]
                done += sum(1 for k in status.keys if k[1] == event.id and k[3] == rollout)
                notebook = last.notebook_out if memory == "notebook" else None
                jobs.append(Job(event.id, rollout, last.step + 1, notebook, False, episode_seed))
            else:
                jobs.append(Job(event.id, rollout, 0, None, False, episode_seed))
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


def plan_controls(
    directory: Path,
    source: Path,
    control: str,
    events: Sequence[Event],
    oracle: Mapping[tuple[str, int], Sequence[float]] | None,
) -> tuple[list[Job], int]:
    """Single-step replays of the memory-on run's steps (>= 1) under a notebook control: (jobs, done)."""
    records = load_records(source) if (Path(source) / "steps.jsonl").exists() else []
    if not records:
        raise StudyError(
            f"the notebook control {control!r} needs the memory-on log {source}; run mode 'notebook' first"
        )
    by_id = {e.id: e for e in events}
    by_key = {(r.event_id, r.step, r.rollout): r for r in records if r.event_id in by_id}
    done_keys = {(k[1], k[2], k[3]) for k in log_status(directory).keys}
    jobs, done = [], 0
    for (event_id, step, rollout), record in sorted(by_key.items()):
        if step < 1:
            continue
        applies, notebook = control_notebook(control, record, by_key, by_id, oracle)
        if not applies:
            continue
        if (event_id, step, rollout) in done_keys:
            done += 1
            continue
        jobs.append(Job(event_id, rollout, step, notebook, True, 0))
    return jobs, done


def play(
    env: ForecastDojoEnv,
    agent: Agent,
    job: Job,
    write: Callable[[StepRecord], None],
) -> int:
    """Play one job, handing every step record to ``write`` as the step ends; returns steps played."""
    options: dict[str, Any] = {"rollout": job.rollout, "step": job.start}
    if job.notebook is not None and env.memory == "notebook":
        options["notebook"] = job.notebook
    observation, _ = env.reset(job.event_id, seed=job.seed, options=options)
    if hasattr(agent, "seed_rollout"):
        agent.seed_rollout(job.seed)
    steps = 0
    for _ in range(MAX_TURNS_PER_EPISODE):
        observation, _, terminated, truncated, info = env.step(agent.act(observation))
        if info["step_ended"]:
            write(info["record"])
            steps += 1
            if job.single:
                return steps
        if terminated or truncated:
            return steps
    raise EpisodeError(f"episode {job.event_id!r} did not end within {MAX_TURNS_PER_EPISODE} turns")


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
    records: list[StepRecord] = []
    text = json.dumps(notebook) if isinstance(notebook, dict) else notebook
    play(env, agent, Job(event_id, 0, step, text, True, seed), records.append)
    return records[0]


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
        concurrency: episodes in flight at once (threads, each with its own env); for server agents.
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
        raise StudyError(f"unknown mode(s) {unknown}; known: {MODES}")
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
        for file in (STUDY_FILE, REFERENCES_FILE):
            (out / file).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / STUDY_FILE).write_text(json.dumps(study, indent=2, sort_keys=True, default=str))
    ordered = [m for m in modes if not m.startswith("notebook-")] + [
        m for m in modes if m.startswith("notebook-")
    ]
    played = reused = 0
    logs = []
    for name, factory in agents.items():
        for mode in ordered:
            directory = log_dir(out, name, mode)
            metadata = {"agent": name, "mode": mode, "seed": seed, "rollouts": rollouts}
            probe = make_env(mode, metadata)
            run_id = probe.run_id
            run_file = directory / "run.json"
            if run_file.exists() and json.loads(run_file.read_text()).get("run_id") != run_id:
                raise StudyError(
                    f"{directory} holds a log of another configuration (run {json.loads(run_file.read_text()).get('run_id')}, "
                    f"this one is {run_id}); rerun with --overwrite to start afresh, or choose another --out"
                )
            if mode.startswith("notebook-"):
                jobs, done = plan_controls(
                    directory, log_dir(out, name, "notebook"), mode.removeprefix("notebook-"), events, oracle
                )
                total = done + len(jobs)
            else:
                jobs, done = plan_episodes(directory, events, rollouts, seed, env_memory(mode))
                total = sum(e.n_steps for e in events) * rollouts
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


def _run_jobs(
    jobs: Sequence[Job],
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

    def work(job: Job) -> int:
        env = getattr(local, "env", None)
        if env is None:
            with lock:
                env = spare.pop() if spare else None
            env = env or new_env()
            local.env = env
        return play(env, factory(env), job, write)

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


def study_rows(out: str | Path) -> list[dict[str, Any]]:
    """Every row of a study folder: its logs (mode from the folder) and its reference records.

    Rows get ``horizon_days`` (cutoff to the question's close) and ``open_at`` from ``study.json``.

    Args:
        out: the study folder.

    Returns:
        Rows as :func:`forecast_dojo.evaluation.metrics.summarize` reads them.
    """
    from forecast_dojo.evaluation.runner import record_row

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
    return rows
