"""Replicates of the learning experiment: several runs of one recipe on one world, pooled.

One run's interval (``brier_minus_uniform`` in ``learning.json``) resamples the held-out events of
that run's model; it says nothing about the randomness of training. Two runs of the same recipe that
differ only in the SFT data order have scored -0.029 and -0.129 on the same 105 steps
(docs/training.md), so whether a recipe learns is a question about its runs, not one run. This
module reads the ``learning.json`` of each run, checks that they are replicates (the same world and
held-out events) and pools their per-event numbers with
:func:`forecast_dojo.evaluation.metrics.replicate_bootstrap`:

    python training/replicates.py --runs docs/results/learning-run21.json docs/results/learning-run23.json
    python training/replicates.py --runs <no lines runs> --against <runs with the lines>   # two recipes

With ``against``, the runs of a second recipe on the same world are pooled the same way and the two
compared (:func:`forecast_dojo.evaluation.metrics.replicate_difference`, paired on events).

``learning.json`` files written before per-event numbers (2026-12-07) lack them; rerunning the
experiment's ``results`` stage on the run's folder (``--stages results`` with its arguments) adds them
from the logs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from forecast_dojo.errors import DataError
from forecast_dojo.training.experiment import LOCATION_FIELDS

# What a run must share with the others to be a replicate: the world of its held-out events (the
# synthetic world's seed) and the retrieval they are searched with. Other differences are listed.
WORLD_FIELDS = ("seed", "embedder")
# Issue 17's goal for the SFT model: at least this valid-forecast rate and an interval below 0.
GOAL_VALID_RATE = 0.9
METRIC = "brier_minus_uniform"


@dataclass(frozen=True)
class ReplicateRun:
    """One run's headline in the chosen model and memory mode."""

    path: str
    valid_rate: float
    steps: int
    brier_minus_uniform: tuple[float, float, float]
    by_event: dict[str, float] = field(repr=False)

    @property
    def goal_met(self) -> bool:
        """Valid on at least :data:`GOAL_VALID_RATE` of steps and the interval's upper end below 0."""
        return self.valid_rate >= GOAL_VALID_RATE and self.brier_minus_uniform[2] < 0


@dataclass(frozen=True)
class Replicates:
    """Several runs of one recipe pooled (see the module docstring)."""

    model: str
    mode: str
    runs: list[ReplicateRun]
    pooled: dict[str, Any]
    differing_arguments: dict[str, list[Any]]
    against: list[ReplicateRun] = field(default_factory=list)
    against_pooled: dict[str, Any] | None = None
    difference: dict[str, Any] | None = None

    def table(self) -> str:
        """A plain-text table: each run, the pooled estimate and its two intervals, the arguments that differ."""

        def interval(values: Sequence[float]) -> str:
            return "[" + ", ".join(f"{v:+.3f}" for v in values) + "]"

        def rough(runs: int) -> str:
            return " (rough with fewer than 5 runs a side)" if runs < 5 else ""

        n_runs = len(self.runs) + len(self.against)
        lines = [
            f"{self.model} model, memory mode {self.mode!r}: {n_runs} run(s) on the same "
            f"{self.pooled['events']} held-out events; Brier minus uniform (negative: better than uniform)",
            "",
            "| run | steps | valid | Brier minus uniform [95 %, events] | goal met |",
            "| --- | --- | --- | --- | --- |",
        ]
        for side, runs in (("", self.runs), ("against: ", self.against)):
            for run in runs:
                mean, low, high = run.brier_minus_uniform
                lines.append(
                    f"| {side}{run.path} | {run.steps} | {run.valid_rate:.1%} | {mean:+.3f} "
                    f"{interval((low, high))} | {'yes' if run.goal_met else 'no'} |"
                )
        sides = (("runs", self.pooled, self.runs), ("runs against", self.against_pooled, self.against))
        for name, pooled, runs in sides:
            if pooled is None:
                continue
            sd = pooled["between_run_sd"]
            lines += [
                "",
                f"pooled over the {name}: {pooled['mean']:+.3f}"
                + ("" if math.isnan(sd) else f"; between-run standard deviation {sd:.3f}"),
                f"  95 % over events, these runs fixed:           {interval(pooled['ci_events'])}",
                f"  95 % over runs and events (the recipe):       {interval(pooled['ci_runs_and_events'])}"
                + rough(len(runs)),
                f"goal (valid >= {GOAL_VALID_RATE:.0%}, interval below 0) met in "
                f"{sum(r.goal_met for r in runs)} of {len(runs)} run(s)",
            ]
        if self.difference is not None:
            d = self.difference
            lines += [
                "",
                f"runs minus against: {d['mean']:+.3f} (negative: the runs' recipe is better)",
                f"  95 % over events (paired), runs fixed:        {interval(d['ci_events'])}",
                f"  95 % over runs and events:                    {interval(d['ci_runs_and_events'])}"
                + rough(min(len(self.runs), len(self.against))),
            ]
        if self.differing_arguments:
            lines.append("arguments that differ between the runs:")
            lines += [
                f"  {name}: " + " | ".join(json.dumps(v) for v in values)
                for name, values in self.differing_arguments.items()
            ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The table's numbers as JSON-ready data."""
        return {
            "model": self.model,
            "mode": self.mode,
            "runs": [_run_dict(r) for r in self.runs],
            "pooled": _jsonable(self.pooled),
            "against": [_run_dict(r) for r in self.against],
            "against_pooled": _jsonable(self.against_pooled),
            "difference": _jsonable(self.difference),
            "differing_arguments": self.differing_arguments,
        }


def _run_dict(run: ReplicateRun) -> dict[str, Any]:
    return {
        "path": run.path,
        "steps": run.steps,
        "valid_rate": run.valid_rate,
        METRIC: list(run.brier_minus_uniform),
        "goal_met": run.goal_met,
    }


def _jsonable(numbers: dict[str, Any] | None) -> dict[str, Any] | None:
    return (
        None if numbers is None else {k: list(v) if isinstance(v, tuple) else v for k, v in numbers.items()}
    )


def _read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise DataError(f"{path}: no such results file (an experiment's learning.json)") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a JSON results file ({err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("arguments"), dict):
        raise DataError(f"{path}: not an experiment's learning.json (no 'arguments')")
    return data


def _run(path: Path, data: dict[str, Any], model: str, mode: str) -> ReplicateRun:
    models = [key for key in ("base", "sft", "grpo") if isinstance(data.get(key), dict)]
    if model not in models:
        raise DataError(f"{path}: no {model!r} model (it holds {', '.join(models) or 'none'})")
    numbers = (data[model].get("modes") or {}).get(mode) or {}
    if not isinstance(numbers, dict) or not numbers.get("steps"):
        raise DataError(f"{path}: the {model} model has no steps in memory mode {mode!r}")
    if not (
        isinstance(numbers["steps"], int) and not isinstance(numbers["steps"], bool) and numbers["steps"] > 0
    ):
        raise DataError(
            f"{path}: the {model} model's step count in memory mode {mode!r} is {numbers['steps']!r}"
        )
    by_event = numbers.get(f"{METRIC}_by_event")
    if not by_event:
        raise DataError(
            f"{path}: no per-event numbers (written by a version before 2026-12-07); rerun the experiment's results "
            "stage on its folder (training/experiment.py with its arguments and --stages results)"
        )
    where = f"{path}: the {model} model's numbers in memory mode {mode!r}"
    headline = numbers.get(METRIC)
    if not (isinstance(headline, list) and len(headline) == 3 and all(_is_number(v) for v in headline)):
        raise DataError(f"{where}: {METRIC!r} is not a [mean, low, high] triple of numbers ({headline!r})")
    valid_rate = numbers.get("valid_rate")
    if not (_is_number(valid_rate) and 0 <= valid_rate <= 1):
        raise DataError(f"{where}: 'valid_rate' is not a number from 0 to 1 ({valid_rate!r})")
    if not isinstance(by_event, dict) or not all(_is_number(v) for v in by_event.values()):
        raise DataError(f"{where}: '{METRIC}_by_event' is not an object of numbers, one per event")
    return ReplicateRun(
        path=str(path),
        valid_rate=float(valid_rate),
        steps=int(numbers["steps"]),
        brier_minus_uniform=(float(headline[0]), float(headline[1]), float(headline[2])),
        by_event={str(k): float(v) for k, v in by_event.items()},
    )


def _is_number(value: Any) -> TypeGuard[float]:
    """A finite JSON number (``true`` is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _differing(arguments: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    names = sorted({name for args in arguments for name in args} - set(LOCATION_FIELDS))
    return {
        name: [args.get(name) for args in arguments]
        for name in names
        if any(args.get(name) != arguments[0].get(name) for args in arguments[1:])
    }


def load_replicates(
    paths: Sequence[str | Path],
    *,
    against: Sequence[str | Path] = (),
    model: str = "sft",
    mode: str = "none",
    n_boot: int = 1000,
    seed: int = 0,
) -> Replicates:
    """Read each run's ``learning.json`` and pool the runs; with ``against``, compare two recipes.

    Args:
        paths: the runs' ``learning.json`` files (one per run).
        against: runs of another recipe on the same world (e.g. another teacher format): pooled the
            same way, and the difference (``paths`` minus ``against``) paired on events.
        model: which model of each run: ``base``, ``sft`` or ``grpo``.
        mode: the memory mode: ``none`` (memory-free, the headline) or ``notebook``.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        The runs and their pooled numbers.

    Raises:
        DataError: a file that is missing or not a results file, a model or mode a run lacks, a run
            without per-event numbers, numbers of the wrong kind (a file edited by hand), runs of different worlds or held-out events, or one run given twice.
    """
    from forecast_dojo.evaluation.metrics import replicate_bootstrap, replicate_difference

    if not paths:
        raise DataError("no runs given")
    results = [(Path(p), _read_results(Path(p))) for p in [*paths, *against]]
    for name in WORLD_FIELDS:
        values = [data["arguments"].get(name) for _, data in results]
        if any(v != values[0] for v in values[1:]):
            raise DataError(
                f"the runs are not replicates: their worlds differ in {name!r} ({values}); "
                "pool runs of one world"
            )
    every = [_run(path, data, model, mode) for path, data in results]
    for i, a in enumerate(every):
        for b in every[i + 1 :]:
            if a.by_event == b.by_event:
                raise DataError(
                    f"{a.path} and {b.path} hold the same per-event numbers: one run given twice?"
                )
    runs, others = every[: len(paths)], every[len(paths) :]
    mine, theirs = [r.by_event for r in runs], [r.by_event for r in others]
    return Replicates(
        model=model,
        mode=mode,
        runs=runs,
        pooled=replicate_bootstrap(mine, n_boot=n_boot, seed=seed),
        differing_arguments=_differing([data["arguments"] for _, data in results]),
        against=others,
        against_pooled=replicate_bootstrap(theirs, n_boot=n_boot, seed=seed) if others else None,
        difference=replicate_difference(mine, theirs, n_boot=n_boot, seed=seed) if others else None,
    )
