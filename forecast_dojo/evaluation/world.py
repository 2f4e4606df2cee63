"""World-mode results: per-day skill, accuracy and coverage curves, with question-bootstrap intervals.

Input is what a world episode produced: its step records (one per question per day, from
``info["records"]`` or the log, :func:`forecast_dojo.trajectory.load_records`) or plain score tables
``{question_id: {day: value}}`` (``info["scores"]``, the oracle's :func:`forecast_dojo.world.oracle_scores`).
Means are taken within each question over its open days, then across questions (each question
counts once however long it was open, FutureSim's time-averaged score); intervals resample
questions (:func:`forecast_dojo.evaluation.metrics.event_bootstrap`).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.agents.base import Agent
from forecast_dojo.evaluation.metrics import event_bootstrap
from forecast_dojo.records import StepRecord, spent_tokens

Table = Mapping[str, Mapping[str, float]]


def tables_from_records(records: Sequence[StepRecord]) -> dict[str, dict[str, dict[str, float]]]:
    """The per-question per-day tables of a world episode's records.

    Args:
        records: One record per question per day (``scores["free_form"]``, ``scores["accuracy"]``,
            ``valid``, the ``updated`` flag, ``budgets["tool_calls_used"]``).

    Returns:
        ``{"scores", "accuracy", "covered", "updated", "tool_calls", "tokens"}``, each
        ``{question_id: {day: value}}`` (``tool_calls``: the research calls of that day, the same for
        every question of the day; ``tokens``: the day's prompt and completion tokens, on the records of
        the questions the day updated, 0 on the others: a day's cost is the largest of its rows).
    """
    out: dict[str, dict[str, dict[str, float]]] = {
        name: defaultdict(dict)
        for name in ("scores", "accuracy", "covered", "updated", "tool_calls", "tokens")
    }
    for r in records:
        day = r.forecast_date
        out["scores"][r.event_id][day] = float(r.scores["free_form"])
        out["accuracy"][r.event_id][day] = float(r.scores["accuracy"])
        out["covered"][r.event_id][day] = 1.0 if r.valid else 0.0
        out["updated"][r.event_id][day] = 1.0 if "updated" in r.flags else 0.0
        out["tool_calls"][r.event_id][day] = float((r.budgets or {}).get("tool_calls_used", 0))
        out["tokens"][r.event_id][day] = float(spent_tokens(r.tokens))
    return {name: dict(table) for name, table in out.items()}


def _by_question(table: Table) -> dict[str, list[float]]:
    return {q: list(days.values()) for q, days in table.items()}


def summarize_world(
    scores: Table,
    *,
    accuracy: Table | None = None,
    covered: Table | None = None,
    updated: Table | None = None,
    tool_calls: Table | None = None,
    tokens: Table | None = None,
    oracle: Table | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Totals with intervals and the per-day curves of one forecaster's world episode.

    Args:
        scores: ``{question_id: {day: free-form score}}``.
        accuracy: The same for top-1 accuracy.
        covered: 1 where the question had a standing forecast that day, else 0.
        updated: 1 where the forecast changed that day.
        tool_calls: The day's research tool calls (per question row; counted once per day).
        tokens: The day's tokens (per question row; the day's cost is the largest).
        oracle: The oracle's scores on the same question-days (adds ``regret``).
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.

    Returns:
        ``questions``, ``question_days``, ``skill``/``accuracy``/``coverage``/``regret`` as
        ``[mean, low, high]`` (None when not given), ``updates_per_day``, ``tool_calls_per_day``,
        ``tokens_per_day``, and ``per_day``: one row per day with ``day``, ``open``, ``skill`` and
        ``skill_ci`` (a bootstrap of that day's open questions), ``accuracy``, ``coverage``,
        ``updates``, ``tool_calls`` and ``tokens`` (the day's cost).
    """

    def interval(table: Table | None) -> list[float] | None:
        if table is None:
            return None
        return list(event_bootstrap(_by_question(table), n_boot=n_boot, seed=seed))

    regret = None
    if oracle is not None:
        regret = {
            q: {d: oracle[q][d] - v for d, v in days.items() if d in oracle.get(q, {})}
            for q, days in scores.items()
        }
    days = sorted({d for table in scores.values() for d in table})
    per_day = []
    for day in days:
        open_ = [q for q in scores if day in scores[q]]

        def mean(table: Table | None, questions: list[str] = open_, day: str = day) -> float | None:
            if table is None:
                return None
            values = [table[q][day] for q in questions if day in table.get(q, {})]
            return sum(values) / len(values) if values else None

        day_skill = event_bootstrap({q: [scores[q][day]] for q in open_}, n_boot=n_boot, seed=seed)
        row: dict[str, Any] = {
            "day": day,
            "open": len(open_),
            "skill": mean(scores),
            "skill_ci": [day_skill[1], day_skill[2]],
            "accuracy": mean(accuracy),
        }
        row["coverage"] = mean(covered)
        row["updates"] = sum(updated[q].get(day, 0.0) for q in open_ if q in updated) if updated else None
        row["tool_calls"] = (
            max((tool_calls[q].get(day, 0.0) for q in open_ if q in tool_calls), default=0.0)
            if tool_calls
            else None
        )
        row["tokens"] = (
            max((tokens[q].get(day, 0.0) for q in open_ if q in tokens), default=0.0) if tokens else None
        )
        per_day.append(row)

    def per_day_mean(key: str, given: Table | None) -> float | None:
        return sum(r[key] for r in per_day) / len(per_day) if given and per_day else None

    return {
        "questions": len(scores),
        "question_days": sum(len(v) for v in scores.values()),
        "skill": interval(scores),
        "accuracy": interval(accuracy),
        "coverage": interval(covered),
        "regret": interval(regret),
        "updates_per_day": per_day_mean("updates", updated),
        "tool_calls_per_day": per_day_mean("tool_calls", tool_calls),
        "tokens_per_day": per_day_mean("tokens", tokens),
        "per_day": per_day,
    }


def play_world(env: Any, agent: Agent, *, seed: int = 0) -> tuple[list[StepRecord], dict[str, Any]]:
    """Play one world episode to its end.

    Args:
        env: A :class:`forecast_dojo.world.WorldEnv` (or a wrapper of one).
        agent: Anything with ``act(observation)``.
        seed: The reset seed.

    Returns:
        (every step record, the last step's info with ``scores`` and ``accuracy``).
    """
    obs, info = env.reset(seed=seed)
    records: list[StepRecord] = []
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs))
        records += info.get("records") or []
        done = terminated or truncated
    return records, info


def _cell(value: list[float] | None) -> str:
    if value is None:
        return "-"
    mean, low, high = value
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def render_world_table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """A text table of :func:`summarize_world` results by forecaster name."""
    width = max([16, *(len(name) for name in rows)])
    header = f"{'forecaster':<{width}} {'questions':>9} {'q-days':>7}  {'skill (95% CI)':<24} {'accuracy':<24} {'coverage':<24} {'regret':<24}"
    lines = [header, "-" * len(header)]
    for name, s in rows.items():
        lines.append(
            f"{name:<{width}} {s['questions']:>9} {s['question_days']:>7}  {_cell(s['skill']):<24} "
            f"{_cell(s['accuracy']):<24} {_cell(s['coverage']):<24} {_cell(s['regret']):<24}"
        )
    return "\n".join(lines)


def plot_world_curves(rows: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Per-day curves of several forecasters' :func:`summarize_world` results, one figure.

    Panels: skill (the mean free-form score over the day's open questions, with its 95 % interval
    over those questions as a band), top-1 accuracy, coverage, forecasts updated per day and the
    day's cost (research tool calls; tokens in a last panel when any forecaster logged them).
    Memory-files forecasters (``.../files``) are drawn dashed on top, so one that coincides with its
    memory-free run stays visible.

    Args:
        rows: Forecaster name -> summary.
        path: The PNG to write.

    Returns:
        The path written.
    """
    from forecast_dojo.evaluation.plots import _plt, _save, forecaster_colours

    panels = [
        ("skill", "skill (mean free-form score)"),
        ("accuracy", "top-1 accuracy"),
        ("coverage", "coverage"),
        ("updates", "forecasts updated"),
        ("tool_calls", "research calls"),
    ]
    if any(r.get("tokens") for s in rows.values() for r in s["per_day"]):
        panels.append(("tokens", "tokens"))
    plt = _plt()
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.9 * len(panels) + 0.6), sharex=True)
    colours = forecaster_colours(rows)
    for name, summary in rows.items():
        per_day = summary["per_day"]
        days = list(range(len(per_day)))
        for ax, (key, _) in zip(axes, panels, strict=True):
            values = [r.get(key) for r in per_day]
            if not any(v is not None for v in values):
                continue
            files = name.endswith("/files")  # memory on: dashed, on top (it often coincides with memory off)
            ax.plot(
                days,
                [float("nan") if v is None else v for v in values],
                label=name,
                linewidth=1.6 if files else 1,
                linestyle=(0, (4, 3)) if files else "-",
                zorder=3 if files else 2,
                color=colours.get(name),
            )
            if key == "skill":
                low = [_nan(r.get("skill_ci", [None, None])[0]) for r in per_day]
                high = [_nan(r.get("skill_ci", [None, None])[1]) for r in per_day]
                ax.fill_between(days, low, high, alpha=0.15, color=colours.get(name), linewidth=0)
    for ax, (_, label) in zip(axes, panels, strict=True):
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    axes[0].set_title(
        "World mode: per simulated day (band: 95 % interval over the day's open questions)", fontsize=9
    )
    axes[-1].set_xlabel("day of the calendar (days with an open question)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    _save(fig, out.parent, out.name)
    return out


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


# ---------------------------------------------------------------------- world-mode logs in a report


def find_world_logs(path: str | Path, *, depth: int = 2) -> list[Path]:
    """The world-mode log directories at ``path`` or below it (``run.json`` with ``"mode": "world"``).

    Args:
        path: A world-mode log directory, or a folder holding them (up to ``depth`` levels down).
        depth: How many folder levels below ``path`` to look.

    Returns:
        The log directories, sorted; empty when there are none.
    """
    from forecast_dojo.trajectory import RUN_FILE, load_run_metadata

    root = Path(path)
    found = []
    candidates = [root]
    for _ in range(depth):
        candidates += [
            c for parent in list(candidates) if parent.is_dir() for c in parent.iterdir() if c.is_dir()
        ]
    for candidate in dict.fromkeys(candidates):
        if (candidate / RUN_FILE).is_file() and (candidate / "steps.jsonl").is_file():
            try:
                mode = load_run_metadata(candidate).get("mode")
            except (OSError, ValueError):
                continue
            if mode == WORLD_MODE:
                found.append(candidate)
    return sorted(found)


WORLD_MODE = "world"  # the ``mode`` a world env writes into its log's run.json


def world_forecasters(log_dirs: Sequence[str | Path]) -> dict[tuple[str, str], list[StepRecord]]:
    """World-mode records by forecaster ``(agent, memory)``, pooled over the given log directories.

    The agent is the records' (else ``run.json``'s ``agent``, else the folder's name); the memory
    mode is the records' (``none`` or ``files``).

    Args:
        log_dirs: World-mode log directories (:func:`find_world_logs`).

    Returns:
        ``{(agent, memory): records}``.

    Raises:
        DataError: Two logs give one forecaster the same (question, day, rollout).
    """
    from forecast_dojo.errors import DataError
    from forecast_dojo.trajectory import load_records, load_run_metadata

    out: dict[tuple[str, str], list[StepRecord]] = defaultdict(list)
    seen: dict[tuple[str, str], dict[tuple[str, str, int], Path]] = defaultdict(dict)
    for directory in map(Path, log_dirs):
        meta = load_run_metadata(directory)
        for record in load_records(directory):
            key = (record.agent or meta.get("agent") or directory.name, record.memory or "none")
            where = (record.event_id, record.forecast_date, record.rollout)
            if where in seen[key] and seen[key][where] != directory:
                raise DataError(
                    f"{key[0]}/{key[1]} has question {where[0]!r} on {where[1]} (rollout {where[2]}) in both "
                    f"{seen[key][where]} and {directory}: pass each forecaster's log once"
                )
            seen[key][where] = directory
            out[key].append(record)
    return dict(out)


def _pair_rows(records: Sequence[StepRecord], agent: str, memory: str) -> list[dict[str, Any]]:
    """Rows that :func:`forecast_dojo.evaluation.metrics.paired_difference` pairs on (question, day, rollout)."""
    return [
        {
            "agent": agent,
            "memory": memory,
            "event_id": r.event_id,
            "step": r.step,  # the question's day index: the same question-day in two runs of one calendar
            "rollout": r.rollout,
            "skill": float(r.scores["free_form"]),
            "accuracy": float(r.scores["accuracy"]),
            "tool_calls": float((r.budgets or {}).get("tool_calls_used", 0)),
            "tokens": float(spent_tokens(r.tokens)),
        }
        for r in records
    ]


WORLD_PAIR_METRICS = ("skill", "accuracy", "tool_calls", "tokens")


def _row_value(metric: str, row: Mapping[str, Any]) -> float:
    return float(row[metric])


def world_report(log_dirs: Sequence[str | Path], *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The world-mode section of a report: each forecaster's totals and per-day curves, and memory pairing.

    Args:
        log_dirs: World-mode log directories (:func:`find_world_logs`).
        n_boot: Bootstrap resamples (questions are resampled).
        seed: Bootstrap seed.

    Returns:
        ``logs`` (the directories), ``forecasters`` (``"agent/memory"`` -> :func:`summarize_world`, with
        ``tokens``), and ``comparisons``: per agent with both, memory files - none on identical
        (question, day, rollout), for skill, accuracy, tool calls and tokens (each question-day row;
        skill and accuracy: positive = memory helps), with a question-bootstrap interval.
    """
    from forecast_dojo.evaluation.metrics import paired_difference

    forecasters = world_forecasters(log_dirs)
    summaries = {
        f"{agent}/{memory}": summarize_world(**tables_from_records(records), n_boot=n_boot, seed=seed)
        for (agent, memory), records in sorted(forecasters.items())
    }
    comparisons = []
    for agent in sorted({a for a, _ in forecasters}):
        if (agent, "files") not in forecasters or (agent, "none") not in forecasters:
            continue
        rows = _pair_rows(forecasters[agent, "files"], agent, "files") + _pair_rows(
            forecasters[agent, "none"], agent, "none"
        )
        for metric in WORLD_PAIR_METRICS:
            try:
                c = paired_difference(
                    rows,
                    (agent, "files"),
                    (agent, "none"),
                    functools.partial(_row_value, metric),
                    n_boot=n_boot,
                    seed=seed,
                )
            except ValueError:  # no common question-day
                continue
            c["metric"] = metric
            c["question_days"], c["questions"] = c.pop("steps"), c.pop("events")
            comparisons.append(c)
    return {"logs": [str(d) for d in log_dirs], "forecasters": summaries, "comparisons": comparisons}


def _number(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def world_markdown(world: Mapping[str, Any], figure: str | None = None) -> list[str]:
    """The world-mode section of ``report.md``."""
    lines = [
        "",
        "## World mode (calendar episodes)",
        "",
        "Skill = FutureSim's free-form Brier score, 1 - (1 - p(answer))^2 - sum of p^2 over the other proposed "
        "outcomes (1 = certain and right, 0 = no forecast, -1 = certain and wrong), averaged within each question "
        "over its open days, then across questions; accuracy = top-1; coverage = share of question-days with a "
        "standing forecast; 95 % intervals resample questions (seed 0). Cost per day = research tool calls "
        "and tokens of the day.",
        "",
        "| forecaster | questions | question-days | skill (95% CI) | accuracy (95% CI) | coverage (95% CI) | "
        "updates / day | tool calls / day | tokens / day |",
        "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for name, s in world["forecasters"].items():
        lines.append(
            f"| {name} | {s['questions']} | {s['question_days']} | {_cell(s['skill'])} | {_cell(s['accuracy'])} | "
            f"{_cell(s['coverage'])} | {_number(s['updates_per_day'])} | {_number(s['tool_calls_per_day'])} | "
            f"{_number(s['tokens_per_day'], '.0f')} |"
        )
    lines += [
        "",
        "Memory files vs memory-free (a - b on identical question-days; skill: positive = a better):",
        "",
    ]
    if world["comparisons"]:
        for c in world["comparisons"]:
            low, high = c["ci"]
            ci = "[n/a]" if low is None or math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]"
            lines.append(
                f"- {c['a'][0]}/{c['a'][1]} - {c['b'][0]}/{c['b'][1]} ({c['metric']}): {c['mean']:+.4f} {ci} "
                f"over {c['question_days']} question-days of {c['questions']} questions"
            )
    else:
        lines.append("(none: no agent was logged both with memory files and without)")
    if figure:
        lines += ["", f"![{figure}]({figure})"]
    return lines
