"""The evidence references (``forecast_dojo.evaluation.evidence``) end to end: the hindsight set of real
events, a real-events study that writes it and reports against it, and submitted citations and reasoning
graphs reaching report.json with intervals."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from forecast_dojo.agents.base import ConversationAgent, tool_call
from forecast_dojo.cli import main
from forecast_dojo.evaluation.evidence import (
    KEY_EVENTS,
    hindsight_reference,
    load_reference,
    save_reference,
    synthetic_reference,
)
from forecast_dojo.evaluation.report import write_report
from forecast_dojo.evaluation.study import run_study
from forecast_dojo.schema import save_events
from forecast_dojo.synthetic import generate_world
from forecast_dojo.timeutil import iso
from tests.events.conftest import day, make_corpus, make_doc, make_event

HARBOR = "Will the Valdorian parliament pass the Harbor Act?"


def harbor_documents():
    return [
        make_doc("early", "The Valdorian parliament tabled the Harbor Act.", -120, "Harbor Act tabled"),
        make_doc("h1", "The Valdorian parliament debated the Harbor Act on Monday.", 2, "Harbor Act debate"),
        make_doc("h2", "Valdorian parliament leaders expect to pass the Harbor Act.", 5, "Harbor Act vote"),
        make_doc("leak", "The Valdorian parliament passed the Harbor Act.", 8, "Harbor Act passed"),
        make_doc("weather", "Mild and dry weather across the north, forecasters said.", 3, "weather"),
        make_doc("other", "Kestria miners extended their strike at Orlan Mining.", 4, "strike"),
        make_doc("s2", "Orlan Mining and the Kestria union resumed talks on the strike.", 7, "strike talks"),
        make_doc(
            "late", "The Valdorian parliament passed the Harbor Act, officials said.", 40, "Harbor Act law"
        ),
    ]


def harbor_event(event_id="harbor", question=HARBOR, **kwargs):
    event = make_event(event_id, question=question, open_day=0, close_day=30, **kwargs)
    return dataclasses.replace(event, cutoffs=(day(3), day(6), day(12)), excluded_doc_ids=("leak",))


def test_hindsight_reference_holds_the_relevant_time_valid_documents(tmp_path):
    corpus = make_corpus(tmp_path, harbor_documents())
    reference = hindsight_reference([harbor_event()], corpus, lookback_days=90)
    assert reference.kind == "hindsight" and "lexical relevance" in reference.note
    docs = {d.doc_id: d for d in reference.documents["harbor"]}
    # relevant and inside [open - 90 days, close); 'early' is older, 'late' after the close, 'leak' screened out
    assert set(docs) == {"h1", "h2"}
    assert docs["h1"].date == "2030-01-03" and docs["h1"].text.startswith("Harbor Act debate.")
    assert all(0 < d.weight <= 1 for d in docs.values())
    # a step's set: the documents available strictly before its cutoff (a day's news is visible after it)
    assert reference.at("harbor", day(2)) == []
    assert reference.at("harbor", iso(day(2) + timedelta(microseconds=1))) == ["h1"]
    assert reference.at("harbor", day(12)) == ["h1", "h2"]
    assert reference.at("unknown", day(12)) is None  # not covered: no reference set at all
    keys = reference.key_events("harbor", day(12), k=1)
    assert len(keys) == 1 and keys[0]["doc_id"] in docs
    assert len(reference.key_events("harbor", day(12))) == 2 <= KEY_EVENTS
    # a longer lookback reaches the early document
    wide = hindsight_reference([harbor_event()], corpus, lookback_days=200)
    assert {d.doc_id for d in wide.documents["harbor"]} == {"early", "h1", "h2"}


def test_a_real_events_study_writes_the_hindsight_reference_and_reports_against_it(tmp_path, capsys):
    """``forecast-dojo run`` on an events file + corpus (not the synthetic world) measures against hindsight."""
    corpus = make_corpus(tmp_path, harbor_documents())
    market = [(4, (0.6, 0.4)), (11, (0.8, 0.2))]  # none at the first cutoff (day 3)
    strike = "Will the Orlan Mining strike in Kestria end?"
    events = [harbor_event(market=market), harbor_event("strike", strike, outcome="No", market=market)]
    save_events(events, tmp_path / "events.jsonl")
    save_events(
        [make_event("trained", question=HARBOR, outcome="No", open_day=-60, close_day=-40)],
        tmp_path / "train.jsonl",
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'name = "Harbor-v0"\n[data]\nevents = "{tmp_path / "events.jsonl"}"\ncorpus = "{corpus.path}"\n'
        '[env]\nretriever = "bm25"\nmemory = "none"\ntools = ["search", "read", "submit_forecast"]\n'
    )
    out = tmp_path / "study"
    argv = ["run", "--spec", str(spec), "--agents", "evidence-oracle", "--modes", "none", "near-resolution"]
    argv += ["--train-events", str(tmp_path / "train.jsonl"), "--out", str(out)]
    assert main(argv) == 0
    reference = load_reference(out)
    assert reference is not None and reference.kind == "hindsight"
    assert {d.doc_id for d in reference.documents["harbor"]} == {"h1", "h2"}
    assert {d.doc_id for d in reference.documents["strike"]} == {"other", "s2"}
    report = json.loads((out / "report.json").read_text())
    assert report["evidence_reference"].startswith("hindsight (lexical relevance")
    table = {(t["agent"], t["memory"]): t for t in report["table"]}
    line = table[("evidence-oracle", "none")]
    for name in ("source_precision", "evidence_recall", "info_alpha"):
        assert len(line[f"{name}_ci"]) == 2 and line[f"{name}_ci"][0] <= line[name] <= line[f"{name}_ci"][1]
    # the strike's first step (cutoff day 3) precedes its first relevant document: recall undefined there
    assert line["evidence_recall_steps"] == 5 and 0 < line["evidence_recall"] <= 1
    assert line["market_steps"] == 4  # the market's first value (day 4) follows the first cutoff
    # the topline's one step (a later cutoff, with a market value) does not count as a covered forecast step
    assert report["market_coverage"]["steps"] == 6 and report["market_coverage"]["with_market"] == 4
    topline = table[("evidence-oracle", "near-resolution")]
    assert topline["steps"] == 2 and topline["evidence_recall_steps"] == 2
    # its one step is not a scheduled step: no life-of-event third or step position holds it
    assert all(c["memory"] != "near-resolution" for c in report["life_thirds"] + report["step_position"])
    md = (out / "report.md").read_text()
    assert "Reference set: hindsight (lexical relevance" in md
    assert "| evidence-oracle | near-resolution (TOPLINE) |" in md


class CitingGrapher(ConversationAgent):
    """Searches once, then submits the uniform forecast citing its hits, with a graph of their dated texts."""

    name = "citing-grapher"

    def respond(self, observation):
        results = [m for m in self.messages if m.get("role") == "tool"]
        if not results:
            return tool_call("search", query=observation["question"], top_k=5)
        hits = json.loads(results[0]["content"])
        n = len(observation["outcomes"])
        graph = {
            "events": [
                {"id": f"e{i}", "date": h["date"][:10], "text": f"{h['title']}. {h['snippet']}"[:300]}
                for i, h in enumerate(hits[:5])
            ],
            "links": [{"from": "e0", "to": "outcome", "sign": "+"}] if hits else [],
        }
        return tool_call(
            "submit_forecast", probabilities=[1 / n] * n, citations=[h["id"] for h in hits], graph=graph
        )


def test_citations_and_graphs_reach_report_json_with_intervals(make_synthetic_env, tmp_path):
    world = generate_world(0)
    events = make_synthetic_env().events[:4]
    run_study(
        tmp_path,
        {"citing-grapher": lambda env: CitingGrapher()},
        ["none"],
        events,
        lambda mode, metadata: make_synthetic_env(run_metadata=metadata),
        progress=False,
    )
    assert load_reference(tmp_path).kind == "synthetic"
    save_reference(tmp_path, synthetic_reference(world, events))
    report = write_report([tmp_path], tmp_path / "report", plots=False)
    [line] = [t for t in report["table"] if t["agent"] == "citing-grapher"]
    for name in ("source_precision", "evidence_recall", "citation_precision", "key_event_recall"):
        low, high = line[f"{name}_ci"]
        assert low <= line[name] <= high and line[f"{name}_steps"] > 0, name
    # it cites exactly what it saw: citation precision equals source precision
    assert line["citation_precision"] == pytest.approx(line["source_precision"])
    # its graph quotes its hits' own titles and dates: every key event it found is matched
    assert line["key_event_recall"] > 0
    saved = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [t for t in saved["table"] if t["agent"] == "citing-grapher"][0]["key_event_recall_ci"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "key-event recall" in md and "| citing-grapher | none |" in md
