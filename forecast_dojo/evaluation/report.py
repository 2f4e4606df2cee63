"""The report of one or more study folders: ``report.md``, ``report.json`` (every number) and figures.

Everything is recomputed from the logs and ``references.jsonl`` (:func:`study.study_rows`), so
``forecast-dojo report`` on a finished (or resumed) study gives the numbers a direct recomputation
from the log gives. Conventions are the field's (see :mod:`forecast_dojo.evaluation.metrics`).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_dojo.evaluation import metrics
from forecast_dojo.evaluation.evidence import load_reference
from forecast_dojo.evaluation.study import (
    EPISODE_MODES,
    STALE_FIRST,
    STUDY_FILE,
    STUDY_MODES,
    TOPLINE_MODES,
    control_coverage,
    study_rows,
)

REFERENCE = "-"


def comparisons(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paired comparisons a study supports (each on identical (event, step, rollout) keys).

    Per agent: notebook - none and no-tools - none (Brier, tool calls, tokens); each notebook control
    - notebook; every agent mode - market (market steps only), - oracle (regret), - base rate and - uniform.
    """
    present = {metrics.forecaster(r) for r in rows}
    agents = sorted({a for a, m in present if m != REFERENCE})
    out = []

    def add(a: tuple[str, str], b: tuple[str, str], metric: str = "brier") -> None:
        if a in present and b in present:
            with contextlib.suppress(ValueError):  # no common step
                out.append(metrics.paired_difference(rows, a, b, metric))

    for agent in agents:
        for metric in ("brier", "tool_calls", "tokens"):
            add((agent, "notebook"), (agent, "none"), metric)
        add((agent, "no-tools"), (agent, "none"))
        for mode in sorted(
            m for a, m in present if a == agent and m in STUDY_MODES and STUDY_MODES[m].control
        ):
            add((agent, mode), (agent, "notebook"))
        for mode in sorted(m for a, m in present if a == agent and m in EPISODE_MODES):
            # a topline's step is not at the reference's cutoff: only the per-event constants pair with it
            references = (
                ("base-rate", "uniform")
                if mode in TOPLINE_MODES
                else ("market", "oracle", "base-rate", "uniform")
            )
            for reference in references:
                add((agent, mode), (reference, REFERENCE))
    return out


def _prints_as_zero(c: dict[str, Any]) -> bool:
    """Whether a comparison's mean and interval all print as ``+0.0000``."""
    values = [c["mean"], *(v for v in c["ci"] if not math.isnan(v))]
    return all(abs(v) < 5e-5 for v in values)


def fold_comparisons(
    comparisons: Sequence[dict[str, Any]], *, tokens_logged: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """Split comparisons into the informative ones and sentences that name the uninformative ones.

    A comparison whose mean and interval print as ``+0.0000`` says only that the two forecasters
    (nearly) coincide; those are named per pair in one sentence (identical at every step, or within
    0.00005) instead of one line each. Without any token count logged, token comparisons are dropped.

    Args:
        comparisons: :func:`comparisons` output.
        tokens_logged: whether any row logged token counts.

    Returns:
        (the comparisons to list, the sentences for the rest).
    """
    shown: list[dict[str, Any]] = []
    exact: dict[str, list[str]] = {}
    close: dict[str, list[str]] = {}
    for c in comparisons:
        if c["metric"] == "tokens" and not tokens_logged:
            continue
        if not _prints_as_zero(c):
            shown.append(c)
            continue
        pair = f"{c['a'][0]}/{c['a'][1]} - {c['b'][0]}/{c['b'][1]}"
        bucket = exact if c.get("max_abs_difference", 1.0) == 0 else close
        bucket.setdefault(pair, []).append(c["metric"])

    def named(pairs: dict[str, list[str]]) -> str:
        return "; ".join(f"{pair} ({', '.join(m)})" for pair, m in pairs.items())

    sentences = []
    if exact:
        sentences.append(
            f"Identical at every paired step (difference exactly 0, not listed): {named(exact)}."
        )
    if close:
        sentences.append(
            f"Within 0.00005 in mean and 95 % interval (prints as +0.0000, not listed): {named(close)}."
        )
    if not tokens_logged:
        sentences.append("No step logged token counts, so no token comparison is shown.")
    return shown, sentences


def matched_steps(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows on the (event, step) pairs every agent condition played, for the headline table.

    Conditions that played different steps (notebook controls replay steps >= 1 or >= 2; a study
    pooled with a shorter one) are not comparable on their own steps: the headline compares every
    forecaster, references included, on the steps all agent conditions share (the market on its
    own steps among them).

    Args:
        rows: study rows.

    Returns:
        (the matched rows, ``{"restricted", "pairs", "of", "conditions"}``: whether steps were
        dropped, the matched and all (event, step) pairs, and each agent condition's pairs). Rows
        come back unchanged when the conditions played the same steps, or shared none.
    """
    played: dict[str, set[tuple[str, int]]] = {}
    every: set[tuple[str, int]] = set()
    for r in rows:
        pair = (r["event_id"], int(r["step"]))
        every.add(pair)
        if r["memory"] != REFERENCE and r["memory"] not in TOPLINE_MODES:  # a topline has its own steps
            played.setdefault(f"{r['agent']}/{r['memory']}", set()).add(pair)
    shared = set.intersection(*played.values()) if played else every
    restricted = bool(shared) and shared != every
    info = {
        "restricted": restricted,
        "pairs": len(shared) if restricted else len(every),
        "of": len(every),
        "conditions": {name: len(pairs) for name, pairs in sorted(played.items())},
    }
    if not restricted:
        info["none_shared"] = bool(played) and not shared
        return list(rows), info
    return [
        r for r in rows if (r["event_id"], int(r["step"])) in shared or r["memory"] in TOPLINE_MODES
    ], info


def comparison_line(c: dict[str, Any]) -> str:
    """One comparison as text (Brier: negative means ``a`` is better)."""
    low, high = c["ci"]
    ci = f"[{low:+.4f}, {high:+.4f}]" if not math.isnan(low) else "[n/a]"
    return (
        f"  {c['a'][0]}/{c['a'][1]} - {c['b'][0]}/{c['b'][1]} ({c['metric']}): {c['mean']:+.4f} {ci}"
        f" over {c['steps']} steps of {c['events']} events"
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def build_report(
    rows: Sequence[dict[str, Any]],
    *,
    knowledge_cutoff: str | None = None,
    controls: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Every number of the report, from rows (pure).

    Args:
        rows: study rows (agents' and references').
        knowledge_cutoff: optional model knowledge cutoff (``YYYY-MM-DD``) for the contamination view.
        controls: what each notebook control replayed (:func:`~forecast_dojo.evaluation.study.control_coverage`).

    Returns:
        ``table`` (on :func:`matched_steps`), ``matched_steps``, ``table_all_steps`` (each forecaster on
        all its steps, when the matched table dropped some), ``market_coverage``, ``comparisons``,
        ``life_thirds``, ``horizon``, ``source``, ``step_position`` (mean Brier per step index; life
        thirds and step positions leave toplines out: their one step is not a scheduled one),
        ``reliability`` (per forecaster), ``notebook_controls`` when given, and ``contamination``
        (tables on events opened after the cutoff) when asked.
    """
    # a topline's one step is (event, 0) at its own cutoff: not one of the scheduled forecast steps, so it
    # counts neither in the market's coverage nor in the life-of-event thirds and step positions
    schedule_rows = [r for r in rows if r["memory"] not in TOPLINE_MODES]
    coverage = metrics.market_coverage(schedule_rows)
    matched, matching = matched_steps(rows)
    matching["market_coverage"] = metrics.market_coverage(
        [r for r in matched if r["memory"] not in TOPLINE_MODES]
    )
    report: dict[str, Any] = {
        "conventions": "Brier = multiclass Brier loss in [0, 2], lower is better (the RL reward is its negative); "
        "BI = Brier Index 100 (1 - sqrt(Brier / 2)); log loss floored at 1e-3; accuracy with fractional ties; "
        "ECE top-label, 10 bins; means within event then across events; 95 % event-bootstrap intervals (seed 0).",
        "table": metrics.summarize(matched),
        "matched_steps": matching,
        "market_coverage": coverage,
        "comparisons": comparisons(rows),
        "life_thirds": metrics.by_life_third(schedule_rows),
        "horizon": metrics.by_horizon(rows),
        "source": metrics.by_source(rows),
        "step_position": metrics.breakdown(schedule_rows, lambda r: int(r["step"])),
        "reliability": {
            f"{a}/{m}": metrics.reliability_bins(
                [r["forecast"] for r in group], [r["outcome_index"] for r in group]
            )
            for (a, m), group in metrics.group_rows(rows).items()
        },
    }
    if matching["restricted"]:
        report["table_all_steps"] = metrics.summarize(rows)
    if controls:
        report["notebook_controls"] = controls
    report["tokens_logged"] = any(metrics.tokens_of(r) for r in rows)
    capture = metrics.evidence_capture(rows)
    if capture:
        report["evidence_capture"] = capture
    toplines = sorted({r["memory"] for r in rows if r["memory"] in TOPLINE_MODES})
    if toplines:
        report["toplines"] = {m: STUDY_MODES[m].description for m in toplines}
    if knowledge_cutoff:
        split = metrics.contamination_split(rows, knowledge_cutoff)
        report["contamination"] = {
            "knowledge_cutoff": knowledge_cutoff,
            "events_before": len({r["event_id"] for r in split["before"]}),
            "events_after": len({r["event_id"] for r in split["after"]}),
            "table_after": metrics.summarize(split["after"]) if split["after"] else [],
        }
    return report


def _table_lines(table: Sequence[dict[str, Any]], coverage: dict[str, Any]) -> list[str]:
    """A summary table in markdown (the market's row marked with the steps it covers)."""
    lines = [
        "| forecaster | mode | events | steps | Brier (95% CI) | BI | log loss | accuracy | ECE | failures | tool calls | tokens |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in table:
        low, high = t["brier_ci"]
        ci = f"{t['brier']:.4f} [{low:.4f}, {high:.4f}]" if not math.isnan(low) else f"{t['brier']:.4f}"
        name = t["agent"]
        if name == "market":
            name = f"market ({coverage['with_market']}/{coverage['steps']} steps)"
        mode = f"{t['memory']} (TOPLINE)" if t["memory"] in TOPLINE_MODES else t["memory"]
        lines.append(
            f"| {name} | {mode} | {t['events']} | {t['steps']} | {ci} | {t['brier_index']:.1f} | "
            f"{t['log_loss']:.4f} | {t['accuracy']:.3f} | {t['ece']:.3f} | {t['failure_any']:.1%} | "
            f"{t['tool_calls']:.2f} | {t['tokens']:.0f} |"
        )
    return lines


def _slice_table(cells: Sequence[dict[str, Any]], order: Sequence[str], header: str) -> list[str]:
    """One row per forecaster, one column per slice in ``order`` (those present): ``Brier (steps)``."""
    by_forecaster: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for c in cells:
        by_forecaster.setdefault((c["agent"], c["memory"]), {})[c["slice"]] = c
    present = [s for s in order if any(s in v for v in by_forecaster.values())]
    present += sorted({str(c["slice"]) for c in cells} - set(present))
    lines = [
        f"| forecaster | mode | {' | '.join(f'{header} {s}' for s in present)} |",
        "| --- | --- |" + " ---: |" * len(present),
    ]
    for (agent, memory), by_slice in by_forecaster.items():
        values = [
            f"{by_slice[s]['brier']:.4f} ({by_slice[s]['steps']})" if s in by_slice else "" for s in present
        ]
        lines.append(f"| {agent} | {memory} | {' | '.join(values)} |")
    return lines


def _control_lines(controls: dict[str, dict[str, Any]]) -> list[str]:
    """The notebook controls' coverage: steps replayed of the notebook run's, and why any were skipped."""
    lines = [
        "",
        "## Notebook controls: steps replayed",
        "",
        "Each control replays the notebook run's steps after the first; a step where it has no notebook "
        "to give is skipped.",
        "",
        "| control | replayed | of the notebook run's steps after the first | skipped (why) |",
        "| --- | ---: | ---: | --- |",
    ]
    warnings = []
    for name, c in sorted(controls.items()):
        why = "; ".join(f"{n}: {reason}" for reason, n in sorted(c["skipped"].items())) or "-"
        lines.append(f"| {name} | {c['planned']} | {c['replayable']} | {why} |")
        unexpected = {r: n for r, n in c["skipped"].items() if r != STALE_FIRST}
        if unexpected:
            warnings.append(
                f"**Warning:** {name} replayed {c['planned']} of {c['replayable']} steps "
                f"({'; '.join(f'{n} skipped: {r}' for r, n in sorted(unexpected.items()))})."
            )
    return lines + ([""] + warnings if warnings else [])


def _markdown(report: dict[str, Any], runs: Sequence[Path], figures: Sequence[str]) -> str:
    coverage = report["market_coverage"]
    matching = report["matched_steps"]
    lines = [
        "# Evaluation report",
        "",
        f"Study folders: {', '.join(str(r) for r in runs)}",
        "",
        report["conventions"],
        f"The market exists at {coverage['with_market']} of {coverage['steps']} (event, step) pairs "
        f"({coverage['share']:.0%}); comparisons with it use exactly those steps.",
        "",
    ]
    if matching["restricted"]:
        played = ", ".join(f"{name} {n}" for name, n in matching["conditions"].items())
        lines += [
            f"**Matched steps.** The agent conditions played different steps ({played} (event, step) pairs), "
            f"so this table compares every forecaster on the {matching['pairs']} of {matching['of']} pairs "
            "that all of them played (the market on its own steps among them); each forecaster on all its "
            "steps follows the paired differences.",
            "",
        ]
    elif matching.get("none_shared"):
        lines += [
            "**No step was played by every agent condition**, so each row is on its own steps: "
            "compare rows through the paired differences only.",
            "",
        ]
    lines += _table_lines(report["table"], matching["market_coverage"])
    for mode, description in report.get("toplines", {}).items():
        lines += [
            "",
            f"TOPLINE: {mode} is an upper reference by design, not a forecast ({description}); "
            "its rows are not comparable with forecasts made at the events' own cutoffs.",
        ]
    if not report.get("tokens_logged", True):
        lines += ["", "No step logged token counts (the tokens column is 0)."]
    for t in report["table"]:
        if "constrained_steps" in t:
            lines += [
                "",
                f"{t['agent']} ({t['memory']}) was decoded under the evidence-label constraint: in "
                f"{t['constrained_steps']} of its {t['steps']} steps it chose at least one token over the "
                "model's own first choice.",
            ]
    if report.get("notebook_controls"):
        lines += _control_lines(report["notebook_controls"])
    shown, folded = fold_comparisons(report["comparisons"], tokens_logged=report.get("tokens_logged", True))
    lines += [
        "",
        "## Paired differences (a - b on identical (event, step, rollout); Brier: negative = a better)",
        "",
    ]
    lines += [f"- {comparison_line(c).strip()}" for c in shown] or ["(none)"]
    if folded:
        lines += [""] + folded
    if "table_all_steps" in report:
        lines += ["", "## Every forecaster on all its own steps (not comparable across rows)", ""]
        lines += _table_lines(report["table_all_steps"], coverage)
    lines += ["", "## Brier over the event's life (thirds of each event's steps): Brier (steps)", ""]
    lines += _slice_table(report["life_thirds"], metrics.THIRDS, "third:")
    lines += ["", "## Brier by horizon (days from forecast date to close): Brier (steps)", ""]
    lines += _slice_table(report["horizon"], metrics.HORIZONS, "")
    lines += ["", "## Brier by source", ""]
    lines += ["| forecaster | mode | source | events | Brier |", "| --- | --- | --- | ---: | ---: |"]
    lines += [
        f"| {c['agent']} | {c['memory']} | {c['slice']} | {c['events']} | {c['brier']:.4f} |"
        for c in report["source"]
    ]
    lines += _evidence_section(report) + _capture_section(report)
    if "contamination" in report:
        c = report["contamination"]
        lines += [
            "",
            f"## Contamination control (knowledge cutoff {c['knowledge_cutoff']})",
            "",
            f"{c['events_before']} events opened before the cutoff, {c['events_after']} after; on the latter only:",
            "",
        ]
        lines += [
            f"- {t['agent']}/{t['memory']}: Brier {t['brier']:.4f} over {t['steps']} steps of {t['events']} events"
            for t in c["table_after"]
        ]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def _interval(t: dict[str, Any], name: str, signed: bool = False) -> str:
    """``mean [low, high]`` of a table line's metric, ``-`` where it is not defined."""
    value = t.get(name)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    low, high = t.get(f"{name}_ci", (float("nan"), float("nan")))
    fmt = "+.3f" if signed else ".3f"
    if low is None or math.isnan(low):
        return format(value, fmt)
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def _evidence_section(report: dict[str, Any]) -> list[str]:
    """The information and evidence-quality table (info_alpha beside skill vs the market; precision, recall)."""
    names = ("info_alpha", "source_precision", "evidence_recall", "citation_precision", "key_event_recall")
    table = [t for t in report["table"] if t["agent"] != "market" and any(n in t for n in names)]
    if not table:
        return []
    lines = [
        "",
        "## Information and evidence quality",
        "",
        "info_alpha = log score - the market's log score on the realized outcome (market steps only; "
        "higher = the agent knew more than the market). Source precision = share of the documents a "
        "step searched, read or cited that are time-valid and relevant (in the step's reference set); "
        "evidence recall = share of the reference set the agent saw; citation precision = the same "
        "precision over cited ids only; key-event recall = share of the step's top-5 hindsight key events "
        "that the submitted reasoning graph names (text similarity >= 0.3 and dated within 7 days).",
    ]
    if report.get("evidence_reference"):
        lines += ["", f"Reference set: {report['evidence_reference']}."]
    lines += [
        "",
        "| forecaster | mode | info_alpha (95% CI) | skill vs market | source precision (95% CI) | "
        "evidence recall (95% CI) | citation precision | key-event recall | steps with a reference |",
        "| --- | --- | --- | ---: | --- | --- | --- | --- | ---: |",
    ]
    for t in table:
        skill = t.get("skill_vs_market")
        skill_text = "-" if skill is None or math.isnan(skill) else f"{skill:+.3f}"
        lines.append(
            f"| {t['agent']} | {t['memory']} | {_interval(t, 'info_alpha', signed=True)} | {skill_text} | "
            f"{_interval(t, 'source_precision')} | {_interval(t, 'evidence_recall')} | "
            f"{_interval(t, 'citation_precision')} | {_interval(t, 'key_event_recall')} | "
            f"{t.get('evidence_recall_steps', 0)} |"
        )
    return lines


def _capture_section(report: dict[str, Any]) -> list[str]:
    """New evidence between dates (index per step) and each memory-on forecaster's evidence capture."""
    capture = report.get("evidence_capture")
    if not capture:
        return []
    lines = [
        "",
        "## New evidence between dates and evidence capture (dated notebook entries)",
        "",
        "Index = distinct documents the memory-on forecasters recorded as new since the previous forecast "
        "date, on steps two or more of them played; capture = share of the new documents the others "
        "found that this one recorded too (leave-one-out), with its correlation with first-to-last improvement.",
        "",
        "| forecaster | mode | capture (95% CI) | steps | correlation with improvement |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for c in capture["forecasters"]:
        r = c["improvement_correlation"]
        lines.append(
            f"| {c['agent']} | {c['memory']} | {_interval(c, 'capture')} | {c['steps']} | "
            f"{'-' if r is None or math.isnan(r) else f'{r:+.2f}'} |"
        )
    lines += ["", "| event | step | forecasters | new-evidence index |", "| --- | ---: | ---: | ---: |"]
    lines += [
        f"| {s['event_id']} | {s['step']} | {s['forecasters']} | {s['index']} |" for s in capture["per_step"]
    ]
    return lines


def write_report(
    runs: Sequence[str | Path], out: str | Path, *, knowledge_cutoff: str | None = None, plots: bool = True
) -> dict[str, Any]:
    """Recompute everything from study folders and write ``report.md``, ``report.json`` and figures to ``out``.

    Args:
        runs: study folders (their rows are pooled; forecasters must not collide across folders).
        out: output folder.
        knowledge_cutoff: optional model knowledge cutoff for the contamination view.
        plots: also draw the figures.

    Returns:
        The report dict plus ``table_text`` and ``comparison_lines`` (what the CLI prints).

    A folder that is not a study but holds world-mode logs (:func:`forecast_dojo.evaluation.world.find_world_logs`)
    adds the ``world`` section (per-day curves, memory pairing) and the ``world.png`` figure; a report
    of world-mode logs only has just that section.
    """
    from forecast_dojo.evaluation.world import find_world_logs, world_markdown, world_report

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world_logs = [
        log for run in runs if not (Path(run) / STUDY_FILE).is_file() for log in find_world_logs(run)
    ]
    runs = [run for run in runs if (Path(run) / STUDY_FILE).is_file() or not find_world_logs(run)]
    world = world_report(world_logs) if world_logs else None
    if not runs:
        assert world is not None
        return _write_world_only(world, world_logs, out, plots=plots)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, int, Any]] = set()
    for run in runs:
        for row in study_rows(run):
            key = (row["agent"], row["memory"], row["event_id"], int(row["step"]), row.get("rollout"))
            if key not in seen:  # references shared by several folders count once
                seen.add(key)
                rows.append(row)
    controls: dict[str, dict[str, Any]] = {}
    for run in runs:
        controls |= control_coverage(run)
    report = build_report(rows, knowledge_cutoff=knowledge_cutoff, controls=controls)
    kinds = sorted(
        {f"{ref.kind} ({ref.note})" for ref in (load_reference(run) for run in runs) if ref is not None}
    )
    if kinds:
        report["evidence_reference"] = "; ".join(kinds)
    figures: list[str] = []
    if plots:
        from forecast_dojo.evaluation.plots import plot_report

        figures = plot_report(rows, report, out)
    world_figure = None
    if world is not None:
        report["world"] = world
        world_figure = _world_figure(world, out) if plots else None
    markdown = _markdown(report, [Path(r) for r in runs], figures)
    if world is not None:
        markdown += "\n".join(world_markdown(world, world_figure)) + "\n"
    (out / "report.json").write_text(json.dumps(_jsonable(report), indent=2, sort_keys=True))
    (out / "report.md").write_text(markdown)
    matching = report["matched_steps"]
    report["table_text"] = metrics.format_table(report["table"], market=matching["market_coverage"])
    if matching["restricted"]:
        report["table_text"] = (
            f"On the {matching['pairs']} of {matching['of']} (event, step) pairs every agent condition played "
            "(report.md also has each forecaster on all its steps):\n" + report["table_text"]
        )
    shown, folded = fold_comparisons(report["comparisons"], tokens_logged=report["tokens_logged"])
    report["comparison_lines"] = ["", "Paired differences (a - b; Brier: negative means a is better):"] + [
        comparison_line(c) for c in shown
    ]
    report["comparison_lines"] += [f"  {sentence}" for sentence in folded]
    for name, c in sorted(controls.items()):
        unexpected = {r: n for r, n in c["skipped"].items() if r != STALE_FIRST}
        if unexpected:
            reasons = "; ".join(f"{n} skipped: {r}" for r, n in sorted(unexpected.items()))
            report["comparison_lines"].append(
                f"Warning: {name} replayed {c['planned']} of {c['replayable']} steps ({reasons})"
            )
    if world is not None:
        report["comparison_lines"] += _world_lines(world)
    return report


WORLD_FIGURE = "world.png"


def _world_figure(world: dict[str, Any], out: Path) -> str:
    from forecast_dojo.evaluation.world import plot_world_curves

    plot_world_curves(world["forecasters"], out / WORLD_FIGURE)
    return WORLD_FIGURE


def _world_lines(world: dict[str, Any]) -> list[str]:
    """What the CLI prints of the world section: its table and the memory pairing."""
    from forecast_dojo.evaluation.world import render_world_table

    lines = [
        "",
        "World mode (per question, time-averaged free-form score):",
        render_world_table(world["forecasters"]),
    ]
    for c in world["comparisons"]:
        low, high = c["ci"]
        ci = "[n/a]" if math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]"
        lines.append(
            f"  {c['a'][0]}/{c['a'][1]} - {c['b'][0]}/{c['b'][1]} ({c['metric']}): {c['mean']:+.4f} {ci}"
            f" over {c['question_days']} question-days of {c['questions']} questions"
        )
    return lines


def _write_world_only(
    world: dict[str, Any], logs: Sequence[Path], out: Path, *, plots: bool
) -> dict[str, Any]:
    """The report of world-mode logs only: ``report.json`` holds ``world``, ``report.md`` its section."""
    from forecast_dojo.evaluation.world import world_markdown

    figure = _world_figure(world, out) if plots else None
    report: dict[str, Any] = {"world": world}
    lines = ["# Evaluation report", "", f"World-mode logs: {', '.join(str(log) for log in logs)}"]
    lines += world_markdown(world, figure)
    (out / "report.json").write_text(json.dumps(_jsonable(report), indent=2, sort_keys=True))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    lines = _world_lines(world)
    report["table_text"] = "\n".join(lines[2:3])
    report["comparison_lines"] = lines[3:]
    return report
