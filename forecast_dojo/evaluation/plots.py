"""Figures of an evaluation report, in the field's conventions (Brier loss: lower is better).

* ``reliability.png``: a reliability diagram per forecaster, one small panel each (every outcome of
  every step, 10 bins), the number of probabilities per bin as marker size and as a bar strip.
* ``life.png``: mean Brier loss per third of the event's life, per agent mode, with the market
  (on its own steps) and the other references.
* ``memory_gain.png``: Brier(notebook) - Brier(memory-free) per step position (negative: memory helps).
* ``cost.png``: research cost per mode (tool calls, and tokens per step when any step logged them).

Every figure draws a forecaster in the same colour (:func:`forecaster_colours`): the references in
fixed neutral colours, each agent/mode in its own colour of a qualitative palette.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.evaluation import metrics

# the references keep one colour in every report; agents' colours come from PALETTE in sorted order
REFERENCE_COLOURS = {
    "market": "black",
    "oracle": "dimgray",
    "base-rate": "saddlebrown",
    "uniform": "darkgray",
}
PALETTE = (  # tab10 without its brown and grey (the references'), then tab20's lighter shades
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
)


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


def forecaster_colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per forecaster name (``agent/mode``, or a reference's name), the same in every figure.

    Args:
        names: every forecaster of the report.

    Returns:
        Name -> matplotlib colour: references their fixed colour, agents the palette in sorted order
        (cycling past 16).
    """
    colours: dict[str, str] = {}
    agents = sorted({n for n in names if n not in REFERENCE_COLOURS})
    for i, name in enumerate(agents):
        colours[name] = PALETTE[i % len(PALETTE)]
    for name in names:
        if name in REFERENCE_COLOURS:
            colours[name] = REFERENCE_COLOURS[name]
    return colours


def _reliability(plt: Any, report: dict[str, Any], colours: dict[str, str], out: Path) -> str:
    """Small multiples: one reliability panel per forecaster (uniform omitted), bin counts shown."""
    panels = [(n, p) for n, p in sorted(report["reliability"].items()) if not n.startswith("uniform") and p]
    columns = min(3, max(len(panels), 1))
    rows = max(math.ceil(len(panels) / columns), 1)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (key, points) in zip(axes.flat, panels, strict=False):
        name = key.removesuffix("/-")
        colour = colours.get(name, "black")
        counts = [p["count"] for p in points]
        most = max(counts)
        strip = ax.twinx()  # the bin counts, as a bar strip along the bottom quarter of the panel
        strip.bar(
            [(p["bin"] + 0.5) / metrics.N_BINS for p in points],
            counts,
            width=0.9 / metrics.N_BINS,
            color=colour,
            alpha=0.18,
        )
        strip.set_ylim(0, most * 4)
        strip.set_yticks([])
        for p in points:
            strip.annotate(
                str(p["count"]),
                ((p["bin"] + 0.5) / metrics.N_BINS, p["count"]),
                ha="center",
                va="bottom",
                fontsize=6,
                color="0.3",
            )
        ax.plot([0, 1], [0, 1], color="black", linewidth=0.7, linestyle="--")
        ax.plot(
            [p["mean_forecast"] for p in points], [p["observed"] for p in points], color=colour, linewidth=1
        )
        ax.scatter(
            [p["mean_forecast"] for p in points],
            [p["observed"] for p in points],
            s=[12 + 140 * c / most for c in counts],
            color=colour,
            edgecolor="white",
            linewidth=0.5,
            zorder=3,
            clip_on=False,  # a bin at (1, 1) or (0, 0) is drawn whole, not cut by the axes
        )
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_zorder(strip.get_zorder() + 1)  # the curve above the strip
        ax.patch.set_visible(False)
        ax.set_title(f"{name} (n = {sum(counts)})", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("forecast probability", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("observed frequency", fontsize=8)
    fig.suptitle(
        "Reliability: every outcome of every step, 10 bins (numbers and bars: probabilities per bin; "
        "dashed: perfect; uniform omitted)",
        fontsize=9,
    )
    return _save(fig, out, "reliability.png")


def _life(plt: Any, report: dict[str, Any], colours: dict[str, str], out: Path) -> str:
    """Mean Brier loss per third of the event's life, one line per forecaster (references dashed)."""
    fig, ax = plt.subplots(figsize=(7, 5))
    cells: dict[str, dict[str, float]] = defaultdict(dict)
    for c in report["life_thirds"]:
        cells[_name(c["agent"], c["memory"])][c["slice"]] = c["brier"]
    # lines that coincide on the plot (equal to 3 decimals, finer than the axis shows): a line on top
    # of an earlier one is drawn thinner, so both stay visible, and its label names the one beneath
    first_of: dict[tuple[tuple[str, float], ...], list[tuple[str, list[float]]]] = defaultdict(list)
    for name, by_third in sorted(cells.items()):
        xs = [i for i, t in enumerate(metrics.THIRDS) if t in by_third]
        ys = [by_third[metrics.THIRDS[i]] for i in xs]
        same = first_of[tuple((metrics.THIRDS[i], round(y, 3)) for i, y in zip(xs, ys, strict=True))]
        k = len(same)
        label = name
        if same:
            beneath, its_ys = same[0]
            exact = all(abs(a - b) <= 1e-9 for a, b in zip(ys, its_ys, strict=True))
            label = f"{name} ({'=' if exact else '≈'} {beneath})"
        ax.plot(
            xs,
            ys,
            marker="o",
            markersize=max(7 - 2.5 * k, 2.5),
            linewidth=max(2.2 - 0.8 * k, 0.8),
            linestyle="--" if name in REFERENCE_COLOURS else "-",
            label=label,
            color=colours.get(name),
        )
        same.append((name, ys))
    ax.set_xticks(range(3), ["first third", "middle third", "last third"])
    ax.set_ylabel("mean Brier loss (lower is better)")
    ax.set_title("Score over the event's life (dashed: references; market on its own steps)")
    ax.legend(fontsize=7)
    return _save(fig, out, "life.png")


def _memory_gain(plt: Any, rows: Sequence[dict[str, Any]], colours: dict[str, str], out: Path) -> str | None:
    """Brier(notebook) - Brier(none) per step position, per agent with both modes (None: no such agent)."""
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
    if not gains:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for agent, by_step in sorted(gains.items()):
        steps = sorted(by_step)
        ax.plot(
            steps,
            [sum(by_step[s]) / len(by_step[s]) for s in steps],
            marker="o",
            label=f"{agent} (notebook - none)",
            color=colours.get(f"{agent}/notebook"),
        )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("step position (0 = first forecast date)")
    ax.set_ylabel("Brier(notebook) - Brier(none)\n(negative: the notebook helps)")
    ax.set_title("Memory gain per step position")
    ax.legend(fontsize=7)
    return _save(fig, out, "memory_gain.png")


COST_TICK_PT = 9  # cost.png's tick labels (they were 7 pt: hard to read at 100 dpi)


def _cost(plt: Any, report: dict[str, Any], colours: dict[str, str], out: Path) -> str | None:
    """Research cost per agent mode (tokens only when any step logged them; None: no agent)."""
    agent_lines = [t for t in report["table"] if t["memory"] != "-"]
    if not agent_lines:
        return None
    labels = [_name(t["agent"], t["memory"]) for t in agent_lines]
    bar_colours = [colours.get(label) for label in labels]
    logged_tokens = any(t["tokens"] for t in agent_lines)
    if logged_tokens:
        fig, (calls, tokens) = plt.subplots(1, 2, figsize=(11, 4.5))
    else:
        fig, calls = plt.subplots(figsize=(6.5, 4.5))
    calls.bar(range(len(labels)), [t["tool_calls"] for t in agent_lines], color=bar_colours)
    calls.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=COST_TICK_PT)
    calls.tick_params(axis="y", labelsize=COST_TICK_PT)
    calls.set_ylabel("research tool calls per step")
    if logged_tokens:
        tokens.bar(range(len(labels)), [t["tokens"] for t in agent_lines], color=bar_colours)
        tokens.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=COST_TICK_PT)
        tokens.tick_params(axis="y", labelsize=COST_TICK_PT)
        tokens.set_ylabel("tokens per step (prompt + completion)")
        fig.suptitle("Research cost per mode")
    else:
        fig.suptitle("Research cost per mode (no token counts logged)")
    return _save(fig, out, "cost.png")


def _report_names(report: dict[str, Any]) -> set[str]:
    """Every forecaster a report describes (its reliability keys are one per group of rows)."""
    return {key.removesuffix("/-") for key in report["reliability"]} | {
        _name(t["agent"], t["memory"]) for t in report["table"]
    }


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
    colours = forecaster_colours({_name(r["agent"], r["memory"]) for r in rows} | _report_names(report))
    drawn = [
        _reliability(plt, report, colours, out),
        _life(plt, report, colours, out),
        _memory_gain(plt, rows, colours, out),
        _cost(plt, report, colours, out),
    ]
    return [name for name in drawn if name is not None]


def figures_from_report(report: dict[str, Any], out: str | Path) -> list[str]:
    """Redraw the figures a report holds every number of (all but ``memory_gain.png``, which needs the rows).

    For a ``report.json`` whose logs are gone (e.g. the committed ``docs/evaluation-report``).

    Args:
        report: a report dict, as :func:`forecast_dojo.evaluation.report.build_report` returns it or
            ``report.json`` holds it.
        out: output folder.

    Returns:
        File names written (relative to ``out``).
    """
    plt = _plt()
    out = Path(out)
    colours = forecaster_colours(_report_names(report))
    drawn = [
        _reliability(plt, report, colours, out),
        _life(plt, report, colours, out),
        _cost(plt, report, colours, out),
    ]
    return [name for name in drawn if name is not None]
