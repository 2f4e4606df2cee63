"""Summaries with uncertainty: mean proper scores with bootstrap intervals, and paired comparisons.

Bootstrap resampling is over events (steps of one event are correlated), with a fixed seed, so a
summary of the same rows is always the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

SCORES = ("brier", "log", "spherical")


def _event_bootstrap(
    values_by_event: dict[str, list[float]], n_boot: int, seed: int
) -> tuple[float, float, float]:
    events = sorted(values_by_event)
    sums = np.array([sum(values_by_event[e]) for e in events])
    counts = np.array([len(values_by_event[e]) for e in events])
    mean = float(sums.sum() / counts.sum())
    if len(events) < 2:
        return mean, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(events), size=(n_boot, len(events)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return mean, float(low), float(high)


def summarize(rows: Sequence[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One line per (agent, memory): steps, invalid share, and each mean score with a 95 % interval."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["agent"], row["memory"])].append(row)
    table = []
    for (agent, memory), group in sorted(groups.items()):
        line: dict[str, Any] = {
            "agent": agent,
            "memory": memory,
            "events": len({r["event_id"] for r in group}),
            "steps": len(group),
            "invalid": sum(not r["valid"] for r in group) / len(group),
        }
        for score in SCORES:
            by_event: dict[str, list[float]] = defaultdict(list)
            for r in group:
                by_event[r["event_id"]].append(r[f"score_{score}"])
            mean, low, high = _event_bootstrap(by_event, n_boot, seed)
            line[score] = mean
            line[f"{score}_ci"] = (low, high)
        table.append(line)
    return table


def paired_difference(
    rows: Sequence[dict[str, Any]],
    a: tuple[str, str],
    b: tuple[str, str],
    score: str = "brier",
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean of ``score(a) - score(b)`` over the steps both scored, with an event-bootstrap 95 % interval.

    ``a`` and ``b`` are (agent, memory) pairs; e.g. the notebook agent minus the memory-free one, or
    an agent minus the oracle (the negative of its regret).
    """
    index = {(r["agent"], r["memory"], r["event_id"], r["step"]): r[f"score_{score}"] for r in rows}
    by_event: dict[str, list[float]] = defaultdict(list)
    for (agent, memory, event_id, step), value in index.items():
        if (agent, memory) == a and (b[0], b[1], event_id, step) in index:
            by_event[event_id].append(value - index[(b[0], b[1], event_id, step)])
    if not by_event:
        raise ValueError(f"no steps scored by both {a} and {b}")
    mean, low, high = _event_bootstrap(by_event, n_boot, seed)
    return {
        "a": a,
        "b": b,
        "score": score,
        "steps": sum(map(len, by_event.values())),
        "mean": mean,
        "ci": (low, high),
    }


def format_table(table: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of :func:`summarize` output (higher scores are better)."""
    header = f"{'agent':<14} {'memory':<9} {'events':>6} {'steps':>6} {'invalid':>7}  " + "  ".join(
        f"{s + ' (95% CI)':>26}" for s in SCORES
    )
    lines = [header, "-" * len(header)]
    for line in table:
        cells = []
        for s in SCORES:
            low, high = line[f"{s}_ci"]
            cells.append(f"{line[s]:>8.4f} [{low:>7.4f},{high:>7.4f}]")
        lines.append(
            f"{line['agent']:<14} {line['memory']:<9} {line['events']:>6} {line['steps']:>6} {line['invalid']:>7.1%}  "
            + "  ".join(f"{c:>26}" for c in cells)
        )
    return "\n".join(lines)
