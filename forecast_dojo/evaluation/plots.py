"""Figures of an evaluation report, in the field's conventions (Brier loss: lower is better).

* ``reliability.png``: reliability diagram per forecaster (every outcome of every step, 10 bins).
* ``life.png``: mean Brier loss per third of the event's life, per agent mode, with the market
  (on its own steps) and the other references.
* ``memory_gain.png``: Brier(notebook) - Brier(memory-free) per step position (negative: memory helps).
* ``cost.png``: research cost per mode (tool calls and tokens per step).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.evaluation import metrics


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path, name: str) -> str:
    """Lay out, write ``out/name`` (100 dpi) and close a figure; returns ``name``."""
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    _plt().close(fig)
    return name


def _name(agent: str, mode: str) -> str:
    return agent if mode == "-" else f"{agent}/{mode}"


def plot_report(rows: Sequence[dict[str, Any]], report: dict[str, Any], out: str | Path) -> list[str]:
    """Draw the report's figures into ``out``; returns their file names.

    Args:
        rows: the study rows.
        report: :func:`forecast_dojo.evaluation.report.build_report` output.
        out: output folder.

    Returns:
        File names written (relative to ``out``).
    """
    plt = _plt()
    out = Path(out)
    written = []

    fig, ax = plt.subplots(figsize=(6, 5))
    ax.plot([0, 1], [0, 1], color="black", linewidth=0.8, linestyle="--", label="perfect")
    for name, points in sorted(report["reliability"].items()):
        if name.startswith("uniform"):
            continue
        ax.plot([p["mean_forecast"] for p in points], [p["observed"] for p in points], marker="o", label=name)
    ax.set_xlabel("forecast probability")
    ax.set_ylabel("observed frequency")
    ax.set_title("Reliability (every outcome of every step)")
    ax.legend(fontsize=7)
    written.append(_save(fig, out, "reliability.png"))

    fig, ax = plt.subplots(figsize=(7, 5))
    cells: dict[str, dict[str, float]] = defaultdict(dict)
    for c in report["life_thirds"]:
        cells[_name(c["agent"], c["memory"])][c["slice"]] = c["brier"]
    for name, by_third in sorted(cells.items()):
        xs = [i for i, t in enumerate(metrics.THIRDS) if t in by_third]
        style = {"linestyle": "--", "color": "black"} if name == "market" else {}
        ax.plot(xs, [by_third[metrics.THIRDS[i]] for i in xs], marker="o", label=name, **style)
    ax.set_xticks(range(3), ["first third", "middle third", "last third"])
    ax.set_ylabel("mean Brier loss (lower is better)")
    ax.set_title("Score over the event's life (market: on its own steps)")
    ax.legend(fontsize=7)
    written.append(_save(fig, out, "life.png"))

    gains: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    index = {(r["agent"], r["memory"], r["event_id"], int(r["step"]), r.get("rollout")): r for r in rows}
    for (agent, mode, event_id, step, rollout), row in index.items():
        if mode != "notebook":
            continue
        other = index.get((agent, "none", event_id, step, rollout))
        if other is not None:
            gains[agent][step].append(
                metrics.brier_loss(row["forecast"], row["outcome_index"])
                - metrics.brier_loss(other["forecast"], other["outcome_index"])
            )
    if gains:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for agent, by_step in sorted(gains.items()):
            steps = sorted(by_step)
            ax.plot(steps, [sum(by_step[s]) / len(by_step[s]) for s in steps], marker="o", label=agent)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xlabel("step position (0 = first forecast date)")
        ax.set_ylabel("Brier(notebook) - Brier(none)\n(negative: the notebook helps)")
        ax.set_title("Memory gain per step position")
        ax.legend(fontsize=7)
        written.append(_save(fig, out, "memory_gain.png"))

    agent_lines = [t for t in report["table"] if t["memory"] != "-"]
    if agent_lines:
        fig, (calls, tokens) = plt.subplots(1, 2, figsize=(11, 4.5))
        labels = [_name(t["agent"], t["memory"]) for t in agent_lines]
        calls.bar(range(len(labels)), [t["tool_calls"] for t in agent_lines], color="tab:blue")
        calls.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        calls.set_ylabel("research tool calls per step")
        tokens.bar(range(len(labels)), [t["tokens"] for t in agent_lines], color="tab:orange")
        tokens.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        tokens.set_ylabel("tokens per step (prompt + completion)")
        fig.suptitle("Research cost per mode")
        written.append(_save(fig, out, "cost.png"))
    return written
