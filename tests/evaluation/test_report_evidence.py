"""The report's new axes end to end: ``forecast-dojo run`` writes the exact synthetic reference, and report.json and
report.md carry source precision, evidence recall and info_alpha with intervals; the near-resolution topline is a
labelled, opt-in study mode."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from forecast_dojo.cli import build_parser, main
from forecast_dojo.errors import ConfigError
from forecast_dojo.evaluation.evidence import load_reference
from forecast_dojo.evaluation.study import EPISODE_MODES, STUDY_MODES, TOPLINE_MODES
from forecast_dojo.events.schedule import near_resolution_cutoff, near_resolution_event
from forecast_dojo.synthetic import generate_world
from forecast_dojo.trajectory import load_records

ARGS = ["--embedder", "hashing", "--no-python", "--max-turns", "6", "--max-tool-calls", "6"]


def test_run_reports_evidence_quality_info_alpha_and_the_labelled_topline(
    synthetic_cache, tmp_path, monkeypatch
):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    out = tmp_path / "run"
    argv = ["run", *ARGS, "--max-events", "3", "--agents", "evidence-oracle", "--out", str(out)]
    argv += ["--modes", "none", "no-tools", "near-resolution"]
    assert main(argv) == 0
    reference = load_reference(out)
    assert reference is not None and reference.kind == "synthetic"
    world = generate_world(0)
    study = json.loads((out / "study.json").read_text())
    for event_id in study["events"]:  # the exact evidence of the generator, nothing else
        assert {d.doc_id for d in reference.documents[event_id]} == {
            ev.doc_id for ev in world.evidence[event_id]
        }
    report = json.loads((out / "report.json").read_text())
    table = {(line["agent"], line["memory"]): line for line in report["table"]}
    none = table[("evidence-oracle", "none")]
    for name in ("source_precision", "evidence_recall", "info_alpha"):
        assert name in none and len(none[f"{name}_ci"]) == 2, name
        assert 0.0 <= none.get("evidence_recall", 0) <= 1.0
    assert none["evidence_recall"] > 0.3
    assert none["skill_vs_market"] is not None
    no_tools = table[("evidence-oracle", "no-tools")]
    assert no_tools["evidence_recall"] == 0.0 and "source_precision" not in no_tools  # read nothing
    md = (out / "report.md").read_text()
    assert "## Information and evidence quality" in md and "Reference set: synthetic" in md
    # the topline: one step per event, a day before resolution, labelled in both files
    near = load_records(out / "evidence-oracle-near-resolution")
    events = {e.id: e for e in world.events}
    assert sorted(r.event_id for r in near) == sorted(study["events"])
    for record in near:
        assert record.step == 0 and record.n_steps == 1
        assert record.cutoff.startswith(near_resolution_cutoff(events[record.event_id]).date().isoformat())
    assert "near-resolution" in report["toplines"]
    assert "| near-resolution (TOPLINE) |" in md and "TOPLINE: near-resolution is an upper reference" in md
    compared = {(tuple(c["a"]), tuple(c["b"])) for c in report["comparisons"]}
    assert (("evidence-oracle", "near-resolution"), ("uniform", "-")) in compared
    assert (("evidence-oracle", "near-resolution"), ("market", "-")) not in compared  # other cutoffs


def test_near_resolution_is_registered_opt_in_and_one_day_before_resolution(make_synthetic_env):
    assert "near-resolution" in STUDY_MODES and "near-resolution" in EPISODE_MODES
    assert TOPLINE_MODES == ("near-resolution",)
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    assert "near-resolution" not in run.get_default("modes")  # never the default
    env = make_synthetic_env(schedule="near-resolution")
    plain = make_synthetic_env()
    assert env.run_id != plain.run_id and plain.run_metadata.get("schedule") is None
    for event, original in zip(env.events[:10], plain.events[:10], strict=True):
        assert event.n_steps == 1 and event.cutoffs[0] == near_resolution_cutoff(original)
        assert original.open_at <= event.cutoffs[0] <= original.close_at
        one_day = timedelta(days=1)
        assert event.cutoffs[0] == min(original.resolved_at - one_day, original.close_at)
        assert original.resolved_at - event.cutoffs[0] >= one_day
        assert event.cutoffs[0] >= original.cutoffs[-1]  # later than any forecast step
        assert near_resolution_event(original) == event
    observation, _ = env.reset(env.events[0].id)
    assert observation["forecast_date"] == env.events[0].cutoffs[0].date().isoformat()
    with pytest.raises(ConfigError, match="schedule"):
        make_synthetic_env(schedule="tomorrow")


def test_the_topline_sees_no_resolution_report(make_synthetic_env):
    """It is a topline, not a leak: the outcome's own reports stay invisible (they come after resolution)."""
    world = generate_world(0)
    env = make_synthetic_env(schedule="near-resolution")
    for event in env.events:
        view = env.gateway.at(event.cutoffs[0], hidden_ids=frozenset(event.excluded_doc_ids))
        assert all(view.get(doc_id) is None for doc_id in world.resolution_docs[event.id])
