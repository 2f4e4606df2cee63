"""Figures of an evaluation run: what people would rather look at than read.

``plot_run(rows, path)`` draws (left) mean Brier score with 95 % intervals for every agent and memory
mode next to the baselines, and (right) a reliability diagram of each forecaster's probability for the
realized-or-not outcomes, pooled over all outcomes of all steps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.evaluation.metrics import summarize

N_BINS = 10


def reliability(
    rows: Sequence[dict[str, Any]], outcome_index: dict[str, int]
) -> list[tuple[float, float, int]]:
    """(mean forecast, observed frequency, count) per probability bin, over every outcome of every step."""
    bins: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        realized = outcome_index[row["event_id"]]
        for k, p in enumerate(row["forecast"]):
            bins[min(int(p * N_BINS), N_BINS - 1)].append((p, 1.0 if k == realized else 0.0))
    return [
        (sum(p for p, _ in pairs) / len(pairs), sum(y for _, y in pairs) / len(pairs), len(pairs))
        for _, pairs in sorted(bins.items())
    ]


def plot_run(rows: Sequence[dict[str, Any]], outcome_index: dict[str, int], path: str | Path) -> Path:
    """Write the run's figure (PNG) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summarize(rows)
    fig, (scores, calibration) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1.3, 1]})
    labels = [f"{t['agent']}\n{t['memory']}" if t["memory"] != "-" else t["agent"] for t in table]
    means = [t["brier"] for t in table]  # the Brier loss: lower is better
    errors = [
        [t["brier"] - t["brier_ci"][0] for t in table],
        [t["brier_ci"][1] - t["brier"] for t in table],
    ]
    colors = [
        "tab:gray" if t["memory"] == "-" else ("tab:blue" if t["memory"] == "none" else "tab:orange")
        for t in table
    ]
    scores.bar(range(len(table)), means, yerr=errors, color=colors, capsize=4)
    scores.set_xticks(range(len(table)), labels, fontsize=8)
    scores.set_ylabel("mean Brier loss (lower is better)")
    scores.set_title(
        "Scores with 95% event-bootstrap intervals\nblue: memory-free, orange: notebook, gray: baselines"
    )

    by_forecaster: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        name = row["agent"] if row["memory"] == "-" else f"{row['agent']}/{row['memory']}"
        by_forecaster[name].append(row)
    calibration.plot([0, 1], [0, 1], color="black", linewidth=0.8, linestyle="--", label="perfect")
    for name, group in sorted(by_forecaster.items()):
        if name == "uniform":
            continue
        points = reliability(group, outcome_index)
        calibration.plot([p for p, _, _ in points], [y for _, y, _ in points], marker="o", label=name)
    calibration.set_xlabel("forecast probability")
    calibration.set_ylabel("observed frequency")
    calibration.set_title("Reliability (all outcomes of all steps)")
    calibration.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
