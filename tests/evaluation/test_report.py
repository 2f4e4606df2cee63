"""The report a person reads: semantic slice order, folded paired lines, matched headline steps, control coverage."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.scripted import EvidenceAgent
from forecast_dojo.evaluation import metrics
from forecast_dojo.evaluation.report import build_report, fold_comparisons, matched_steps, write_report
from forecast_dojo.evaluation.study import run_study, study_rows


def row(agent, memory, event_id, step, forecast, outcome=0, n_steps=6, horizon=None):
    return {
        "agent": agent,
        "memory": memory,
        "event_id": event_id,
        "step": step,
        "n_steps": n_steps,
        "rollout": 0 if memory != "-" else None,
        "forecast": forecast,
        "outcome_index": outcome,
        "flags": [],
        "horizon_days": horizon,
        "tool_calls_by_kind": {"search": 1},
    }


def markdown(report, tmp_path):
    from forecast_dojo.evaluation.report import _markdown

    return _markdown(report, [tmp_path], [])


def test_life_thirds_and_horizons_in_their_natural_order(tmp_path):
    horizons = [200, 60, 20, 3, 100, 10]  # every bucket, none in order
    rows = [
        row("a", "none", f"e{i}", step, [0.6, 0.4], outcome=i % 2, horizon=horizons[step])
        for i in range(2)
        for step in range(6)
    ]
    report = build_report(rows)
    assert [c["slice"] for c in report["life_thirds"]] == ["first", "middle", "last"]
    assert [c["slice"] for c in report["horizon"]] == ["<=7d", "8-30d", "31-90d", ">90d"]
    text = markdown(report, tmp_path)
    life_header = next(line for line in text.splitlines() if "third: first" in line)
    assert life_header.index("first") < life_header.index("middle") < life_header.index("last")
    horizon_header = next(line for line in text.splitlines() if "<=7d" in line)
    positions = [horizon_header.index(name) for name in metrics.HORIZONS]
    assert positions == sorted(positions)


def test_identical_pairs_fold_into_one_sentence_and_informative_lines_stay(tmp_path):
    rows = []
    for i in range(4):
        for step in range(3):
            outcome = i % 2
            rows.append(row("same", "none", f"e{i}", step, [0.7, 0.3], outcome))
            rows.append(row("same", "notebook", f"e{i}", step, [0.7, 0.3], outcome))
            rows.append(row("better", "none", f"e{i}", step, [0.6, 0.4], outcome))
            rows.append(
                row("better", "notebook", f"e{i}", step, [0.9, 0.1] if outcome == 0 else [0.1, 0.9], outcome)
            )
    report = build_report(rows)
    shown, sentences = fold_comparisons(report["comparisons"], tokens_logged=report["tokens_logged"])
    shown_pairs = {(tuple(c["a"]), tuple(c["b"]), c["metric"]) for c in shown}
    assert (("better", "notebook"), ("better", "none"), "brier") in shown_pairs
    assert not any(c["a"][0] == "same" and c["b"][0] == "same" for c in shown)
    assert not any(c["metric"] == "tokens" for c in shown)  # nothing logged tokens
    identical = next(s for s in sentences if s.startswith("Identical"))
    assert "same/notebook - same/none (brier, tool_calls)" in identical
    assert "better/notebook - better/none (tool_calls)" in identical
    assert any("no token comparison" in s for s in sentences)
    text = markdown(report, tmp_path)
    assert "+0.0000 [+0.0000, +0.0000]" not in text
    assert "- better/notebook - better/none (brier):" in text and identical in text


def test_near_identical_pairs_are_named_apart_from_identical_ones():
    rows = []
    for i in range(3):
        for step in range(2):
            rows.append(row("a", "none", f"e{i}", step, [0.7, 0.3]))
            rows.append(row("a", "notebook", f"e{i}", step, [0.7 + 1e-7, 0.3 - 1e-7]))
    shown, sentences = fold_comparisons(build_report(rows)["comparisons"], tokens_logged=False)
    assert not any(c["a"] == ["a", "notebook"] and c["b"] == ["a", "none"] for c in shown)
    assert any(s.startswith("Within 0.00005") and "a/notebook - a/none (brier)" in s for s in sentences)


def test_headline_table_compares_conditions_on_matched_steps(tmp_path):
    rows = []
    for i in range(3):
        for step in range(6):
            late = step >= 2
            good = [0.95, 0.05] if late else [0.5, 0.5]
            rows.append(row("a", "notebook", f"e{i}", step, good))
            rows.append(row("uniform", "-", f"e{i}", step, [0.5, 0.5]))
            if late:  # a control replays only later steps, where every forecaster does better
                rows.append(row("a", "notebook-stale", f"e{i}", step, good))
    matched, info = matched_steps(rows)
    assert info["restricted"] and info["pairs"] == 12 and info["of"] == 18
    assert info["conditions"] == {"a/notebook": 18, "a/notebook-stale": 12}
    assert {(r["event_id"], r["step"]) for r in matched} == {
        (f"e{i}", s) for i in range(3) for s in range(2, 6)
    }
    report = build_report(rows)
    table = {(t["agent"], t["memory"]): t for t in report["table"]}
    assert {t["steps"] for t in table.values()} == {12}
    assert table[("a", "notebook")]["brier"] == pytest.approx(table[("a", "notebook-stale")]["brier"])
    unmatched = {(t["agent"], t["memory"]): t for t in report["table_all_steps"]}
    assert unmatched[("a", "notebook")]["steps"] == 18
    assert unmatched[("a", "notebook")]["brier"] > unmatched[("a", "notebook-stale")]["brier"]
    text = markdown(report, tmp_path)
    assert "**Matched steps.**" in text and "12 of 18 pairs" in text
    assert "## Every forecaster on all its own steps" in text


def test_a_constrained_agents_interventions_are_counted_and_said(tmp_path):
    """Steps whose reply the evidence-label constraint changed are counted per forecaster and named in the report."""
    rows = []
    for i in range(3):
        for step in range(2):
            changed = 2 if (i, step) in {(0, 0), (2, 1)} else 0
            constrained = row("m-labels", "none", f"e{i}", step, [0.6, 0.4])
            constrained["tokens"] = {
                "prompt_tokens": 90,
                "completion_tokens": 30,
                "constrained_tokens": changed,
            }
            plain = row("m", "none", f"e{i}", step, [0.6, 0.4])
            plain["tokens"] = {"prompt_tokens": 90, "completion_tokens": 30}
            rows += [constrained, plain]
    report = build_report(rows)
    table = {t["agent"]: t for t in report["table"]}
    assert table["m-labels"]["constrained_steps"] == 2 and "constrained_steps" not in table["m"]
    assert table["m-labels"]["tokens"] == table["m"]["tokens"] == 120  # counted once, not added
    text = markdown(report, tmp_path)
    assert "m-labels (none) was decoded under the evidence-label constraint: in 2 of its 6 steps" in text
    assert "m (none) was decoded" not in text


def test_matching_leaves_equal_or_disjoint_conditions_alone():
    same = [row(a, "none", "e0", s, [0.5, 0.5]) for a in ("a", "b") for s in range(3)]
    rows, info = matched_steps(same)
    assert rows == same and not info["restricted"] and not info["none_shared"]
    assert "table_all_steps" not in build_report(same)
    disjoint = [row("a", "none", "e0", 0, [0.5, 0.5]), row("b", "none", "e1", 0, [0.5, 0.5])]
    rows, info = matched_steps(disjoint)
    assert rows == disjoint and not info["restricted"] and info["none_shared"]


def make_env_factory(make_synthetic_env):
    def make(mode, metadata):
        return make_synthetic_env(
            memory="notebook" if mode.startswith("notebook") else "none", run_metadata=metadata
        )

    return make


def test_shuffled_control_without_a_donor_warns_and_the_report_counts_it(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    event = sorted(make("none", {}).events, key=lambda e: e.id)[0]
    modes = ["notebook", "notebook-stale", "notebook-shuffled"]
    with pytest.warns(UserWarning, match=r"notebook-shuffled replays 0 of the notebook run's"):
        run_study(tmp_path, {"e": lambda env: EvidenceAgent()}, modes, [event], make, progress=False)
    controls = json.loads((tmp_path / "study.json").read_text())["controls"]
    replayable = event.n_steps - 1
    reason = f"no other evaluated event has {len(event.outcomes)} outcomes to lend its notebook"
    assert controls["e/notebook-shuffled"] == {
        "replayable": replayable,
        "planned": 0,
        "skipped": {reason: replayable},
    }
    assert controls["e/notebook-stale"]["planned"] == replayable - 1
    assert {r["memory"] for r in study_rows(tmp_path)} == {"notebook", "notebook-stale"}
    report = write_report([tmp_path], tmp_path / "report", plots=False)
    text = (tmp_path / "report" / "report.md").read_text()
    assert (
        f"**Warning:** e/notebook-shuffled replayed 0 of {replayable} steps ({replayable} skipped: {reason})"
        in text
    )
    assert f"| e/notebook-stale | {replayable - 1} | {replayable} | 1: step 1: no notebook" in text
    assert any(line.startswith("Warning: e/notebook-shuffled") for line in report["comparison_lines"])
