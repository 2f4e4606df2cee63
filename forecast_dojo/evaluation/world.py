"""World-mode results: per-day skill, accuracy and coverage curves, with question-bootstrap intervals.

Input is what a world episode produced: its step records (one per question per day, from
``info["records"]`` or the log, :func:`forecast_dojo.trajectory.load_records`) or plain score tables
``{question_id: {day: value}}`` (``info["scores"]``, the oracle's :func:`forecast_dojo.world.oracle_scores`).
Means are taken within each question over its open days, then across questions (each question
counts once however long it was open, FutureSim's time-averaged score); intervals resample
questions (:func:`forecast_dojo.evaluation.metrics.event_bootstrap`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.agents.base import Agent
from forecast_dojo.evaluation.metrics import event_bootstrap
from forecast_dojo.records import StepRecord

Table = Mapping[str, Mapping[str, float]]


def tables_from_records(records: Sequence[StepRecord]) -> dict[str, dict[str, dict[str, float]]]:
    """The per-question per-day tables of a world episode's records.

    Args:
        records: One record per question per day (``scores["free_form"]``, ``scores["accuracy"]``,
            ``valid``, the ``updated`` flag, ``budgets["tool_calls_used"]``).

    Returns:
        ``{"scores", "accuracy", "covered", "updated", "tool_calls"}``, each ``{question_id: {day: value}}``
        (``tool_calls``: the research calls of that day, the same for every question of the day).
    """
    out: dict[str, dict[str, dict[str, float]]] = {
        name: defaultdict(dict) for name in ("scores", "accuracy", "covered", "updated", "tool_calls")
    }
    for r in records:
        day = r.forecast_date
        out["scores"][r.event_id][day] = float(r.scores["free_form"])
        out["accuracy"][r.event_id][day] = float(r.scores["accuracy"])
        out["covered"][r.event_id][day] = 1.0 if r.valid else 0.0
        out["updated"][r.event_id][day] = 1.0 if "updated" in r.flags else 0.0
        out["tool_calls"][r.event_id][day] = float((r.budgets or {}).get("tool_calls_used", 0))
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
        oracle: The oracle's scores on the same question-days (adds ``regret``).
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.

    Returns:
        ``questions``, ``question_days``, ``skill``/``accuracy``/``coverage``/``regret`` as
        ``[mean, low, high]`` (None when not given), and ``per_day``: one row per day with ``day``,
        ``open``, ``skill``, ``accuracy``, ``coverage``, ``updates`` and ``tool_calls``.
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

        row: dict[str, Any] = {
            "day": day,
            "open": len(open_),
            "skill": mean(scores),
            "accuracy": mean(accuracy),
        }
        row["coverage"] = mean(covered)
        row["updates"] = sum(updated[q].get(day, 0.0) for q in open_ if q in updated) if updated else None
        row["tool_calls"] = (
            max((tool_calls[q].get(day, 0.0) for q in open_ if q in tool_calls), default=0.0)
            if tool_calls
            else None
        )
        per_day.append(row)
    return {
        "questions": len(scores),
        "question_days": sum(len(v) for v in scores.values()),
        "skill": interval(scores),
        "accuracy": interval(accuracy),
        "coverage": interval(covered),
        "regret": interval(regret),
        "updates_per_day": (sum(r["updates"] for r in per_day) / len(per_day))
        if updated and per_day
        else None,
        "tool_calls_per_day": (sum(r["tool_calls"] for r in per_day) / len(per_day))
        if tool_calls and per_day
        else None,
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
    header = f"{'forecaster':<16} {'questions':>9} {'q-days':>7}  {'skill (95% CI)':<24} {'accuracy':<24} {'coverage':<24} {'regret':<24}"
    lines = [header, "-" * len(header)]
    for name, s in rows.items():
        lines.append(
            f"{name:<16} {s['questions']:>9} {s['question_days']:>7}  {_cell(s['skill']):<24} "
            f"{_cell(s['accuracy']):<24} {_cell(s['coverage']):<24} {_cell(s['regret']):<24}"
        )
    return "\n".join(lines)


def plot_world_curves(rows: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Per-day curves of several forecasters' :func:`summarize_world` results: skill, accuracy and coverage.

    Args:
        rows: Forecaster name -> summary.
        path: The PNG to write.

    Returns:
        The path written.
    """
    from forecast_dojo.evaluation.plots import _plt, _save

    plt = _plt()
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for name, summary in rows.items():
        days = list(range(len(summary["per_day"])))
        for ax, key in zip(axes, ("skill", "accuracy", "coverage"), strict=True):
            values = [r[key] for r in summary["per_day"]]
            if any(v is not None for v in values):
                ax.plot(days, [float("nan") if v is None else v for v in values], label=name, linewidth=1)
    for ax, label in zip(
        axes, ("skill (mean over open questions)", "top-1 accuracy", "coverage"), strict=True
    ):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("day of the calendar")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    _save(fig, out.parent, out.name)
    return out
