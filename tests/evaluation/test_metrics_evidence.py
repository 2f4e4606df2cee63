"""Evidence quality (source precision, evidence recall, citations) and info_alpha: hand-computed and on the synthetic world."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta

import pytest

from forecast_dojo.agents.base import tool_call
from forecast_dojo.agents.scripted import EvidenceAgent, UniformAgent
from forecast_dojo.errors import DataError, UntrustedInputError
from forecast_dojo.evaluation.evidence import (
    EVIDENCE_FILE,
    KEY_EVENTS,
    EvidenceReference,
    ReferenceDocument,
    attach_reference,
    load_reference,
    save_reference,
    synthetic_reference,
)
from forecast_dojo.evaluation.metrics import (
    evidence_capture,
    evidence_metrics,
    key_event_recall,
    log_loss,
    step_metrics,
    summarize,
    text_similarity,
)
from forecast_dojo.evaluation.runner import Episode, play_episode, record_row
from forecast_dojo.graph import MAX_GRAPH_EVENTS, parse_graph
from forecast_dojo.synthetic import generate_world
from forecast_dojo.timeutil import parse_instant
from forecast_dojo.tools import MAX_CITATIONS, citations_error, tool_schemas


def row(event_id="e1", step=0, forecast=(0.7, 0.3), outcome=0, **extra):
    return {
        "agent": "a",
        "memory": "none",
        "event_id": event_id,
        "step": step,
        "rollout": 0,
        "forecast": list(forecast),
        "outcome_index": outcome,
        "flags": [],
        **extra,
    }


# ---------------------------------------------------------------- hand-computed


def test_info_alpha_is_the_log_score_minus_the_markets():
    r = row(forecast=(0.8, 0.2), market=[0.5, 0.5])
    assert step_metrics(r)["info_alpha"] == pytest.approx(math.log(0.8) - math.log(0.5))
    worse = row(forecast=(0.2, 0.8), market=[0.5, 0.5])
    assert step_metrics(worse)["info_alpha"] == pytest.approx(math.log(0.2) - math.log(0.5))
    floored = row(forecast=(0.0, 1.0), market=[0.9, 0.1])  # the log loss's floor applies to both
    assert step_metrics(floored)["info_alpha"] == pytest.approx(
        log_loss([0.9, 0.1], 0) - log_loss([0.0, 1.0], 0)
    )
    assert "info_alpha" not in step_metrics(row())  # no market, no info_alpha


def test_precision_recall_and_citation_precision_by_hand():
    r = row(seen_docs=["a", "b", "c", "x"], cited_docs=["a", "future"], reference_docs=["a", "b", "d", "e"])
    m = evidence_metrics(r)
    # accessed = {a, b, c, x, future}: a and b are relevant and time-valid
    assert m["source_precision"] == pytest.approx(2 / 5)
    assert m["evidence_recall"] == pytest.approx(2 / 4)  # seen a, b of {a, b, d, e}
    assert m["citation_precision"] == pytest.approx(1 / 2)  # 'future' is not in the step's reference set
    assert evidence_metrics(row(seen_docs=["a"])) == {}  # no reference set: nothing defined
    nothing = evidence_metrics(row(seen_docs=[], cited_docs=[], reference_docs=["a"]))
    assert nothing == {"evidence_recall": 0.0}  # no tools: recall 0, precision undefined
    assert evidence_metrics(row(seen_docs=["z"], reference_docs=[])) == {"source_precision": 0.0}


def test_summary_carries_the_new_rows_with_intervals_and_step_counts():
    rows = [
        row("e1", 0, seen_docs=["a", "b"], reference_docs=["a"], market=[0.5, 0.5]),
        row("e1", 1, seen_docs=["a"], reference_docs=["a", "c"], market=[0.6, 0.4]),
        row("e2", 0, seen_docs=["q"], reference_docs=["q", "r"], market=[0.5, 0.5]),
        row("e3", 0, seen_docs=["s"], reference_docs=[]),
    ]
    [line] = summarize(rows, n_boot=200)
    # precision per event: e1 (1/2 + 1) / 2 = 0.75, e2 1.0, e3 0.0 -> mean 0.5833
    assert line["source_precision"] == pytest.approx((0.75 + 1.0 + 0.0) / 3)
    assert line["source_precision_steps"] == 4
    # recall: e1 (1 + 1/2) / 2 = 0.75, e2 0.5 (e3 has an empty reference: undefined)
    assert line["evidence_recall"] == pytest.approx((0.75 + 0.5) / 2)
    assert line["evidence_recall_steps"] == 3
    low, high = line["evidence_recall_ci"]
    assert low <= line["evidence_recall"] <= high
    alpha = (
        (math.log(0.7) - math.log(0.5) + math.log(0.7) - math.log(0.6)) / 2 + math.log(0.7) - math.log(0.5)
    ) / 2
    assert line["info_alpha"] == pytest.approx(alpha)
    assert "citation_precision" not in line


def test_reference_round_trips_and_bad_files_are_clear_errors(tmp_path):
    ref = EvidenceReference(
        "synthetic",
        {
            "e1": [
                ReferenceDocument("d1", "2031-01-02T00:00:00Z", "2031-01-01", "Harbor act passes", 1.0),
                ReferenceDocument("d2", "2031-01-05T12:00:00Z", "2031-01-05", "Vote delayed", 2.0),
            ]
        },
        note="n",
    )
    save_reference(tmp_path, ref)
    assert load_reference(tmp_path) == ref
    assert ref.at("e1", "2031-01-05T12:00:00Z") == ["d1"]  # strictly before the cutoff
    assert ref.at("e1", "2031-01-05T12:00:01Z") == ["d1", "d2"]
    assert [k["doc_id"] for k in ref.key_events("e1", "2031-01-06T00:00:00Z")] == [
        "d2",
        "d1",
    ]  # heaviest first
    assert ref.key_events("e1", "2031-01-06T00:00:00Z", k=1) == [
        {"doc_id": "d2", "date": "2031-01-05", "text": "Vote delayed"}
    ]
    assert ref.at("other", "2031-01-05T00:00:00Z") is None and ref.key_events("other", "2031-01-05") == []
    (tmp_path / EVIDENCE_FILE).write_text(json.dumps(ref.to_dict() | {"kind": "guess"}))
    with pytest.raises(DataError, match="kind"):
        load_reference(tmp_path)
    bad = ref.to_dict()
    bad["documents"]["e1"][0]["available_at"] = "soon"
    (tmp_path / EVIDENCE_FILE).write_text(json.dumps(bad))
    with pytest.raises(DataError, match=r"'documents'\['e1'\]\[0\].*available_at"):
        load_reference(tmp_path)
    (tmp_path / EVIDENCE_FILE).write_text("{")
    with pytest.raises(DataError, match="not valid JSON"):
        load_reference(tmp_path)
    assert load_reference(tmp_path / "nothing-here") is None


def test_key_event_recall_needs_text_similarity_and_the_seven_day_gate():
    keys = [
        {"date": "2031-03-10", "text": "Officials confirmed the Harbor Act will pass the Velmora senate"},
        {
            "date": "2031-03-20",
            "text": "Analysts at Quist Research expect the Tolvanen coalition to collapse",
        },
    ]
    near = {
        "date": "2031-03-16",
        "text": "Velmora senate officials confirmed Harbor Act passage",
    }  # 6 days off
    assert key_event_recall([near], keys) == pytest.approx(0.5)
    late = dict(near, date="2031-03-18")  # 8 days after the first key event: outside the gate
    assert key_event_recall([late], keys) == 0.0
    unrelated = {"date": "2031-03-10", "text": "Rain expected across the northern provinces"}
    assert key_event_recall([unrelated], keys) == 0.0
    both = [near, {"date": "2031-03-21", "text": "Tolvanen coalition collapse expected by Quist analysts"}]
    assert key_event_recall(both, keys) == 1.0
    assert math.isnan(key_event_recall(both, []))
    assert text_similarity("the a of", "Harbor") == 0.0
    r = row(graph_events=[near], key_events=keys, reference_docs=["d"], seen_docs=[])
    assert evidence_metrics(r)["key_event_recall"] == pytest.approx(0.5)
    assert "key_event_recall" not in evidence_metrics(row(key_events=keys, reference_docs=["d"]))  # no graph


def test_graphs_are_parsed_strictly_and_clear_errors_name_the_part():
    graph = {
        "events": [{"id": "a", "date": "2031-03-10", "text": "Officials confirmed the act"}],
        "links": [{"from": "a", "to": "outcome", "sign": "+"}],
    }
    assert parse_graph(graph).to_dict() == graph
    for bad, words in (
        ("text", "must be an object"),
        ({"events": [{"id": "a", "date": "10 March", "text": "x"}]}, "YYYY-MM-DD"),
        ({"events": [{"id": "a", "date": "2031-03-10", "text": ""}]}, "text must be a non-empty"),
        ({"events": graph["events"] * 2}, "distinct"),
        ({"events": graph["events"], "links": [{"from": "a", "to": "b", "sign": "+"}]}, "join event ids"),
        ({"events": graph["events"], "links": [{"from": "a", "to": "outcome", "sign": "up"}]}, "sign"),
        (
            {
                "events": [
                    {"id": str(i), "date": "2031-01-01", "text": "x"} for i in range(MAX_GRAPH_EVENTS + 1)
                ]
            },
            "at most",
        ),
        ({"nodes": []}, "must be an object"),
    ):
        with pytest.raises(UntrustedInputError, match=words):
            parse_graph(bad)


# ---------------------------------------------------------------- citations on submit_forecast


def test_citations_are_optional_in_the_generated_schema():
    for memory in ("none", "notebook"):
        [schema] = [s for s in tool_schemas(memory) if s["function"]["name"] == "submit_forecast"]
        parameters = schema["function"]["parameters"]
        assert parameters["properties"]["citations"]["type"] == "array"
        # every parameter is optional (probabilities or log_odds: the tool checks that one is given)
        assert not parameters.get("required")
        assert {"probabilities", "log_odds", "citations"} <= set(parameters["properties"])
    assert citations_error(None) is None and citations_error(["a", "b"]) is None
    assert "list of document id strings" in citations_error("a")
    assert "list of document id strings" in citations_error([1])
    assert "cap" in citations_error(["x"] * (MAX_CITATIONS + 1))


def test_citations_are_logged_and_a_malformed_list_refuses_the_submission(make_synthetic_env):
    env = make_synthetic_env()
    event = env.events[0]
    uniform = [1 / len(event.outcomes)] * len(event.outcomes)
    env.reset(event.id)
    _, _, _, _, info = env.step(tool_call("submit_forecast", probabilities=uniform, citations="syn0-00001"))
    assert not info["step_ended"]  # refused: the step goes on
    _, _, _, _, info = env.step(
        tool_call("submit_forecast", probabilities=uniform, citations=["syn0-99999", "x"])
    )
    assert info["step_ended"]
    fields = record_row(info["record"])
    assert fields["cited_docs"] == ["syn0-99999", "x"]  # as written; the agent is told nothing about them
    assert fields["seen_docs"] == [] and fields["graph_events"] is None


def test_a_submitted_graph_reaches_the_row_and_a_malformed_one_refuses_the_submission(make_synthetic_env):
    env = make_synthetic_env()
    event = env.events[0]
    uniform = [1 / len(event.outcomes)] * len(event.outcomes)
    env.reset(event.id)
    _, _, _, _, info = env.step(tool_call("submit_forecast", probabilities=uniform, graph={"events": "x"}))
    assert not info["step_ended"]
    assert "graph rejected, forecast not submitted" in info_text(env)
    graph = {"events": [{"id": "a", "date": "2031-01-02", "text": "A leak says so"}], "links": []}
    _, _, _, _, info = env.step(tool_call("submit_forecast", probabilities=uniform, graph=graph))
    assert info["step_ended"]
    assert record_row(info["record"])["graph_events"] == [{"date": "2031-01-02", "text": "A leak says so"}]


def info_text(env):
    return "\n".join(m["content"] for m in env.conversation() if m["role"] == "tool")


# ---------------------------------------------------------------- the synthetic world: the exact reference


@pytest.fixture(scope="module")
def world():
    return generate_world(0)


def test_the_synthetic_reference_is_the_generators_evidence(world):
    ref = synthetic_reference(world)
    for event in world.events[:10]:
        for cutoff in event.cutoffs:
            expected = sorted(ev.doc_id for ev in world.evidence[event.id] if ev.available_at < cutoff)
            assert ref.at(event.id, cutoff) == expected
            assert all(world.doc_kinds[d] == "evidence" for d in expected)
            assert not set(expected) & set(world.resolution_docs[event.id])


def play(env, agent_factory, events):
    records = []
    for index, event in enumerate(events):
        records += play_episode(env, agent_factory(), Episode(event.id, seed=index))
    return records


def test_oracle_informed_agents_recall_matches_the_generator(make_synthetic_env, world):
    env = make_synthetic_env(memory="notebook")
    events = env.events[:6]
    records = play(env, EvidenceAgent, events)
    rows = [record_row(r, "evidence") for r in records]
    attach_reference(rows, synthetic_reference(world))
    by_id = {e.id: e for e in world.events}
    recalls = []
    for record, r in zip(records, rows, strict=True):
        cutoff = parse_instant(record.cutoff)
        generator = {ev.doc_id for ev in world.evidence[record.event_id] if ev.available_at < cutoff}
        hits = {d for call in record.tool_calls if call.name == "search" for d in call.doc_ids}
        assert set(r["reference_docs"]) == generator
        metrics = evidence_metrics(r)
        if generator:
            assert metrics["evidence_recall"] == pytest.approx(len(hits & generator) / len(generator))
            recalls.append(metrics["evidence_recall"])
        assert metrics["source_precision"] == pytest.approx(len(hits & generator) / len(hits))
        # every document the cue reader weighed (its notebook's evidence) is one of the generator's
        weighed = {d for e in json.loads(record.notebook_out)["evidence"] for d in e["doc_ids"]}
        assert weighed <= {ev.doc_id for ev in world.evidence[record.event_id]}
        assert all(ev.available_at < cutoff for ev in world.evidence[record.event_id] if ev.doc_id in weighed)
        assert by_id[record.event_id].id == record.event_id
    assert recalls and sum(recalls) / len(recalls) > 0.5  # it finds most of the evidence
    # a graph that names the step's key events (their dates, their own words) recalls all of them
    ref = synthetic_reference(world)
    record = records[-1]
    keys = ref.key_events(record.event_id, record.cutoff)
    assert keys and all(world.doc_kinds[k["doc_id"]] == "evidence" for k in keys)
    assert len(keys) == min(KEY_EVENTS, len(ref.at(record.event_id, record.cutoff)))
    echo = [{"date": k["date"], "text": k["text"]} for k in keys]
    assert key_event_recall(echo, keys) == 1.0
    shifted = [
        {"date": (date.fromisoformat(k["date"]) + timedelta(days=2000)).isoformat(), "text": k["text"]}
        for k in keys
    ]
    assert key_event_recall(shifted, keys) == 0.0  # the date gate (evidence texts of one event are alike)
    uniform_rows = [record_row(r, "uniform") for r in play(make_synthetic_env(), UniformAgent, events)]
    attach_reference(uniform_rows, synthetic_reference(world))
    assert all("source_precision" not in evidence_metrics(r) for r in uniform_rows)
    assert all(evidence_metrics(r).get("evidence_recall", 0.0) == 0.0 for r in uniform_rows)


# ---------------------------------------------------------------- new evidence and capture


def nb_row(agent, step, cutoff, entries, forecast=(0.5, 0.5), event_id="e1"):
    return row(
        event_id,
        step,
        forecast,
        agent=agent,
        memory="notebook",
        cutoff=cutoff,
        notebook_evidence=[{"date": d, "doc_ids": ids} for d, ids in entries],
    )


def test_new_evidence_index_and_leave_one_out_capture_by_hand():
    rows = [
        nb_row("A", 0, "2031-01-05T00:00:00Z", [("2031-01-02", ["a0"])]),
        nb_row("B", 0, "2031-01-05T00:00:00Z", []),
        # step 1 (new since 2031-01-05): A found d1, d2; B found d2, d3 and re-recorded an old one
        nb_row(
            "A",
            1,
            "2031-01-10T00:00:00Z",
            [("2031-01-02", ["a0"]), ("2031-01-06", ["d1"]), ("2031-01-09", ["d2"])],
        ),
        nb_row("B", 1, "2031-01-10T00:00:00Z", [("2031-01-04", ["old"]), ("2031-01-07", ["d2", "d3"])]),
        # step 2: only A found something new
        nb_row("A", 2, "2031-01-20T00:00:00Z", [("2031-01-12", ["d4"])], forecast=(0.9, 0.1)),
        nb_row("B", 2, "2031-01-20T00:00:00Z", [], forecast=(0.2, 0.8)),
        row("e1", 1, agent="C", memory="none", cutoff="2031-01-10T00:00:00Z"),  # memory-free: not counted
    ]
    for r in rows:
        r.setdefault("agent", "a")
    result = evidence_capture(rows, n_boot=100)
    assert [(s["step"], s["forecasters"], s["index"]) for s in result["per_step"]] == [(1, 2, 3), (2, 2, 1)]
    capture = {c["agent"]: c for c in result["forecasters"]}
    # A: step 1 others {d2, d3} -> 1/2; step 2 others {} -> undefined. B: step 1 others {d1, d2} -> 1/2; step 2 {d4} -> 0
    assert capture["A"]["capture"] == pytest.approx(0.5) and capture["A"]["steps"] == 1
    assert capture["B"]["capture"] == pytest.approx(0.25) and capture["B"]["steps"] == 2
    assert math.isnan(capture["A"]["improvement_correlation"])  # one event: no correlation
    assert evidence_capture([r for r in rows if r["agent"] != "B"]) == {}  # one memory-on forecaster: nothing


def test_capture_of_two_scripted_readers_in_a_study(make_synthetic_env, tmp_path, world):
    from forecast_dojo.evaluation.report import write_report
    from forecast_dojo.evaluation.study import run_study, study_rows

    events = make_synthetic_env().events[:4]
    agents = {
        "full": lambda env: EvidenceAgent(name="full"),
        "lite": lambda env: EvidenceAgent(top_k=3, max_searches=1, name="lite"),
    }
    run_study(
        tmp_path,
        agents,
        ["notebook"],
        events,
        lambda mode, metadata: make_synthetic_env(memory="notebook", run_metadata=metadata),
        progress=False,
    )
    save_reference(tmp_path, synthetic_reference(world, events))
    rows = study_rows(tmp_path)
    result = evidence_capture(rows)
    capture = {c["agent"]: c["capture"] for c in result["forecasters"]}
    assert set(capture) == {"full", "lite"}
    assert capture["full"] >= capture["lite"]  # the thorough reader records what the quick one found
    assert all(s["forecasters"] == 2 for s in result["per_step"])
    report = write_report([tmp_path], tmp_path / "report", plots=False)
    assert report["evidence_capture"]["forecasters"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## New evidence between dates and evidence capture" in md
    assert "| full | notebook |" in md
