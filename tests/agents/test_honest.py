"""The honest scripted agent: cue weights fitted on training events only, written rationale, rounded forecasts."""

from __future__ import annotations

import json
import math
import re

import pytest

from forecast_dojo.agents.honest import (
    NO_BEARING,
    NO_CUE,
    CueModel,
    HonestEvidenceAgent,
    Reading,
    cue_signature,
    fit_cue_model,
    fit_from_readings,
    number,
    points,
    tally_forecast,
)
from forecast_dojo.agents.scripted import CUE_WEIGHTS
from forecast_dojo.evaluation.runner import run_episodes


def test_cue_signature_uses_the_generic_vocabulary():
    assert cue_signature("Officials with direct knowledge confirmed that X will win.") == "confirm+officials"
    assert cue_signature("Unconfirmed rumours suggest X.") == "rumour+unconfirmed"
    assert cue_signature("X will win.") == NO_CUE


def test_fit_recovers_a_known_likelihood_ratio():
    # binary: a signature right 90 times out of 100 -> LR near 9; K = 3 right 60 of 100 -> LR = q (K-1) / (1-q) = 3
    readings = [Reading(f"b{i}", "d", 0 if i < 90 else 1, "strong", 2) for i in range(100)]
    readings += [Reading(f"t{i}", "d", 0 if i < 60 else 1, "moderate", 3) for i in range(100)]
    readings += [Reading("b0", "d", 1, "strong", 2)]  # the same (event, doc) again: counted once
    readings += [Reading(f"r{i}", "d", 0, "rare", 2) for i in range(3)]
    outcomes = (
        {f"b{i}": 0 for i in range(100)} | {f"t{i}": 0 for i in range(100)} | {f"r{i}": 0 for i in range(3)}
    )
    model = fit_from_readings(readings, outcomes, {'["Yes", "No"]': [60, 40]})
    assert math.exp(model.llr["strong"]) == pytest.approx(9.0, rel=0.15)
    assert math.exp(model.llr["moderate"]) == pytest.approx(3.0, rel=0.2)
    assert "rare" not in model.llr  # fewer than min_count readings: no weight
    assert model.counts["strong"][2] == [90, 100]
    assert model.prior_for(["Yes", "No"]) == pytest.approx([62 / 104, 42 / 104])
    assert model.prior_for(["No", "Yes"]) == [0.5, 0.5]
    assert model.prior_for(["A", "B", "C"]) == pytest.approx([1 / 3] * 3)
    assert CueModel.from_json(model.to_json()) == model


def test_honest_agent_learns_from_training_events_and_writes_its_reasoning(make_synthetic_env):
    env = make_synthetic_env()
    ids = sorted(e.id for e in env.events)
    train, test = ids[0::2], ids[1::2]
    model = fit_cue_model(env, train)
    assert model.n_events == len(train) and model.llr
    # learned, not copied: the generator's tiers are 1.5 / 3 / 9; no learned weight is exactly one of them
    copied = {round(math.log(ratio), 6) for _, ratio, _ in CUE_WEIGHTS}
    assert not copied & {round(v, 6) for v in model.llr.values()}
    honest = run_episodes(env, lambda: HonestEvidenceAgent(model), test, progress=False)
    uniform = [
        -sum((1 / len(r["forecast"]) - (k == r["outcome_index"])) ** 2 for k in range(len(r["forecast"])))
        for r in honest
    ]
    assert sum(r["score_brier"] for r in honest) > sum(uniform) + 0.1 * len(honest)  # clearly beats uniform
    assert all(r["valid"] for r in honest)
    assert all(abs(p - round(p, 2)) < 1e-9 for r in honest for p in r["forecast"])  # env renormalizes 1 ulp
    # the submission turn states the evidence and the arithmetic
    agent = HonestEvidenceAgent(model)
    observation, _ = env.reset(test[0])
    while True:
        action = agent.act(observation)
        observation, _, _, _, info = env.step(action)
        if info["step_ended"]:
            break
    assert action["content"].startswith("Prior (training events)") and "Forecast:" in action["content"]
    assert len(action["content"]) < 600  # a few short sentences: a small student imitates them cheaply
    arguments = json.loads(action["tool_calls"][0]["function"]["arguments"])
    assert arguments["rationale"].startswith("prior times the likelihood ratios of")  # not the text twice


def test_honest_and_scripted_readers_share_one_relevance_filter():
    from forecast_dojo.agents.scripted import EvidenceAgent, favoured_outcome

    question = "Will Krorgres Energy complete its acquisition of Meithi Works by 2031-03-12?"
    sentences = [
        "A report by Vairnei Insight indicates that Krorgres Energy's purchase of Meithi Works will not close.",
        "Officials confirmed that Krorgres Energy will complete the acquisition of Meithi Works.",
        "Krorgres Energy opened a new office.",  # names, no topic word
        "A report by X indicates Krorgres Energy's acquisition of Meithi Works closes by April 2, 2031.",
    ]
    honest, scripted = HonestEvidenceAgent(CueModel()), EvidenceAgent()
    for agent in (honest, scripted):
        agent.fields = {"question": question, "outcomes": ["Yes", "No"], "notebook": None}
    expected = [1, 0, None, None]
    assert [favoured_outcome(s, question, ["Yes", "No"]) for s in sentences] == expected
    assert [(r or (None,))[0] for r in map(honest.read, sentences)] == expected
    assert [(w or (None,))[0] for w in map(scripted.weigh, sentences)] == expected


def test_the_compact_teacher_writes_short_turns_and_a_capped_notebook(make_synthetic_env):
    from forecast_dojo.agents.honest import COMPACT_NOTEBOOK_EVIDENCE
    from forecast_dojo.tools import parse_search_results

    env = make_synthetic_env(memory="notebook", prompt="compact")
    ids = sorted(e.id for e in env.events)
    model = fit_cue_model(env, ids[0::2])
    agent = HonestEvidenceAgent(model, compact=True)
    observation, _ = env.reset(ids[2])
    finals, done, carried = [], False, []
    while not done:
        action = agent.act(observation)
        observation, _, done, _, info = env.step(action)
        if info["step_ended"]:
            finals.append((action, info["record"]))
            carried.append(observation["notebook"])
    assert len(finals) >= 2
    for action, record in finals:
        text = action["content"]
        arguments = json.loads(action["tool_calls"][0]["function"]["arguments"])
        assert "rationale" not in arguments  # the turn's text says it once
        assert len(text) < 400, text
        # the forecast is the weighed verdicts, copied as evidence in their order; the env sums them
        assert "probabilities" not in arguments and "log_odds" not in arguments
        written = [  # (outcome, points) of each weighed verdict, hits then notes
            (label, float(value))
            for label, value in re.findall(r"syn[\w-]+: ([^\n]+?) \('[^']*', ([+-][\d.]+)\)", text)
        ]
        assert [(label, float(value)) for label, value in arguments["evidence"]] == written, text
        tally = [sum(v for label, v in written if label == outcome) for outcome in record.outcomes]
        # the env records the tally's softmax, and says so
        assert record.valid and record.forecast == pytest.approx(tally_forecast(tally))
        assert abs(sum(record.forecast) - 1) < 1e-9
        assert record.messages[-1]["content"].startswith("forecast recorded: ")
        hits = [
            h["id"]
            for m in record.messages
            if m["role"] == "tool"
            for h in parse_search_results(m["content"]) or []
        ]
        # one verdict per hit that bears on the question, in the search's order: favoured outcome with
        # cue and weight (or no weight); a hit of no bearing gets no line
        verdicts = [line for line in text.splitlines() if line.startswith("syn")]
        judged = [line.split(":", 1)[0] for line in verdicts]
        assert judged == [h for h in dict.fromkeys(hits) if h in judged]
        assert "no bearing" not in text
        if hits and not verdicts and "Notes: " not in text:
            assert text == NO_BEARING
        for line in verdicts:
            label = line.split(": ", 1)[1].split(" ('")[0].removesuffix(", no weight.")
            assert label in record.outcomes, line
        weighed = [line for line in verdicts if re.search(r"', [+-][\d.]+\)\.$", line)]
        assert (not arguments["evidence"]) == (not weighed and "Notes: " not in text)
        for line in weighed:  # a verdict's points are its cue's log likelihood ratio, nats to the half
            signature = line.split(" ('")[1].split("',")[0]
            assert float(line.rsplit(", ", 1)[1].rstrip(").")) == points(model.llr[signature])
        notebook = arguments["notebook"]
        assert len(notebook["evidence"]) <= COMPACT_NOTEBOOK_EVIDENCE
        assert all(" favoured: " in e["claim"] for e in notebook["evidence"])
    assert carried[0] is not None and json.loads(carried[0])["evidence"] == arguments_evidence(finals[0][0])


def arguments_evidence(action):
    return json.loads(action["tool_calls"][0]["function"]["arguments"])["notebook"]["evidence"]


@pytest.mark.slow
def test_export_at_1024_tokens_keeps_90_percent_of_compact_teacher_records(
    synthetic_cache, tmp_path, monkeypatch
):
    """The compact teacher on the training events, both memory modes, in the learning experiment's env
    (its tools and budgets), exported at 1,024 SmolLM2 tokens: >= 90 % kept, median <= 700 tokens."""
    import statistics

    from forecast_dojo.agents.llm import smollm2_path
    from forecast_dojo.cli import main
    from forecast_dojo.training import ExportConfig, build_sft_rows
    from forecast_dojo.training.experiment import ExperimentArguments
    from forecast_dojo.training.export import token_counter

    try:
        smollm2_path()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    experiment = ExperimentArguments()
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "CompactTeacher"\n[data]\nworld = "synthetic"\nseed = 0\nembedder = "hashing"\n'
        f'[env]\nprompt = "compact"\ntools = {json.dumps(experiment.tools)}\n'
        f"[budgets]\nmax_tool_calls = {experiment.max_tool_calls}\nmax_turns = {experiment.max_turns}\n"
    )
    out = tmp_path / "teacher"
    argv = ["run", "--spec", str(spec), "--agents", "honest", "--modes", "none", "notebook"]
    assert main([*argv, "--split", "train", "--out", str(out)]) == 0
    logs = [out / "honest-none", out / "honest-notebook"]
    rows, report = build_sft_rows(logs, ExportConfig(max_tokens=experiment.max_tokens))
    assert report.read >= 200 and report.kept >= 0.9 * report.read, report.summary()
    assert all(r["prompt_profile"] == "compact" for r in rows)
    from forecast_dojo.agents.llm import load_tokenizer

    count = token_counter(load_tokenizer("smollm2"))
    lengths = [count(r["messages"]) for r in rows]
    assert max(lengths) <= 1024
    assert statistics.median(lengths) <= 700  # 689 here; 700 in the experiment's world of 420 events
    # no assistant turn cut: every kept record's assistant turns are the logged ones, whole
    logged = {
        (r["event_id"], r["step"], r["memory"]): r
        for log in logs
        for r in map(json.loads, (log / "steps.jsonl").open())
    }
    for row in rows:
        source = logged[(row["event_id"], row["step"], row["memory"])]
        kept = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert kept == [m["content"] for m in source["messages"] if m["role"] == "assistant"]


def test_compact_points_are_half_nats_and_the_tally_forecast_is_their_softmax():
    """Points are log likelihood ratios to the nearest half nat; the forecast of a tally is its softmax."""
    assert [points(math.log(lr)) for lr in (7.5, 3.0, 1.5, 1.1, 1 / 3)] == [2, 1, 0.5, 0, -1]
    assert [number(x) for x in (2.0, 0.5, -1.5, 0.0)] == ["2", "0.5", "-1.5", "0"]
    assert tally_forecast([0, 0]) == [0.5, 0.5]
    assert tally_forecast([0, 0, 0]) == pytest.approx([1 / 3] * 3)
    assert tally_forecast([1, 1, 0]) == pytest.approx(
        [math.e / (2 * math.e + 1)] * 2 + [1 / (2 * math.e + 1)]
    )
    assert tally_forecast([0.5, 2]) == pytest.approx([1 / (1 + math.exp(1.5)), 1 / (1 + math.exp(-1.5))])
    assert tally_forecast([60, 0]) == pytest.approx([1, 0])  # large tallies do not overflow
    for k in (2, 3, 4, 5):
        for tally in ([0] * k, [5] + [0] * (k - 1), [0] * (k - 1) + [2.5]):
            forecast = tally_forecast(tally)
            assert len(forecast) == k and abs(sum(forecast) - 1) < 1e-9 and min(forecast) > 0
    for m in range(6):  # a larger lead never lowers the leader
        assert tally_forecast([m + 0.5, 0, 0])[0] > tally_forecast([m, 0, 0])[0]


def test_the_compact_turn_names_each_verdict_and_its_call_copies_the_weighed_ones():
    from forecast_dojo.agents.honest import (
        CueModel,
        Verdict,
        compact_evidence,
        explain_compact,
        parse_verdicts,
    )
    from forecast_dojo.tools import read_forecast

    model = CueModel(llr={"leak": math.log(7.5), "rumour": math.log(1.5), "report": math.log(3)})
    ledger = {
        "d2": (0, "leak", "2031-01-02"),
        "d3": (1, "rumour", "2031-01-03"),
        "d4": (1, "gossip", "2031-01-01"),
        "d5": (1, "report", "2031-01-04"),
        "d0": (2, "report", "2030-12-30"),  # carried by the notebook from an earlier date
    }
    hits = ["d1", "d2", "d3", "d4", "d5"]
    text = explain_compact(["A", "B", "C"], ledger, model, hits)
    assert text.splitlines() == [  # d1 bears on nothing: no line
        "d2: A ('leak', +2).",
        "d3: B ('rumour', +0.5).",
        "d4: B, no weight.",
        "d5: B ('report', +1).",
        "Notes: d0: C ('report', +1).",
    ]
    evidence = compact_evidence(["A", "B", "C"], ledger, model, hits)
    assert evidence == [["A", 2], ["B", 0.5], ["B", 1], ["C", 1]]
    forecast, error = read_forecast({"evidence": evidence}, ["A", "B", "C"])
    assert error is None and forecast == pytest.approx(tally_forecast([2, 1.5, 1]))
    unweighed = {"d4": (1, "gossip", "2031-01-01")}
    assert explain_compact(["A", "B", "C"], unweighed, model, ["d4"]).splitlines() == ["d4: B, no weight."]
    assert compact_evidence(["A", "B", "C"], unweighed, model, ["d4"]) == []  # uniform
    assert explain_compact(["A", "B"], {}, model, []) == "No reports found."
    assert explain_compact(["A", "B"], {}, model, ["d1", "d2"]) == NO_BEARING
    # with the lines of no bearing (the form before 2026-12-07) every hit is judged next to its id
    lined = explain_compact(["A", "B", "C"], ledger, model, hits, no_bearing_lines=True).splitlines()
    assert lined == ["d1: no bearing.", *text.splitlines()]
    assert explain_compact(["A", "B"], {}, model, ["d1", "d2"], no_bearing_lines=True).splitlines() == [
        "d1: no bearing.",
        "d2: no bearing.",
    ]
    assert explain_compact(["A", "B"], {}, model, [], no_bearing_lines=True) == "No reports found."
    assert parse_verdicts("\n".join(lined)) == [Verdict("d1"), *parse_verdicts(text)]
    model.llr["denial"] = math.log(1 / 3)  # a cue that points away from the outcome it names
    ledger = {"d2": (0, "leak", "x"), "d3": (0, "denial", "y")}
    text = explain_compact(["A", "B"], ledger, model, ["d2", "d3"])
    assert text.splitlines() == ["d2: A ('leak', +2).", "d3: A ('denial', -1)."]
    assert compact_evidence(["A", "B"], ledger, model, ["d2", "d3"]) == [["A", 2], ["A", -1]]


def test_verdicts_read_back_what_the_compact_turn_wrote():
    from forecast_dojo.agents.honest import (
        CueModel,
        Verdict,
        compact_evidence,
        explain_compact,
        parse_verdicts,
    )

    model = CueModel(llr={"leak": math.log(7.5), "rumour": math.log(1.5), "denial": math.log(1 / 3)})
    labels = ["St. Anne: the port", "B", "C"]  # a label with a period and a colon
    ledger = {
        "d2": (0, "leak", "2031-01-02"),
        "d3": (1, "rumour", "2031-01-03"),
        "d4": (1, "gossip", "2031-01-01"),
        "d5": (2, "denial", "2031-01-04"),
        "wiki:7": (0, "leak", "2030-12-30"),  # carried by the notebook: on the Notes line
        "d0": (2, "rumour", "2030-12-29"),
    }
    text = explain_compact(labels, ledger, model, ["d1", "d2", "d3", "d4", "d5"])
    verdicts = parse_verdicts(text)
    assert verdicts == [  # d1 bears on nothing: no verdict written
        Verdict("d2", "St. Anne: the port", "leak", 2.0),
        Verdict("d3", "B", "rumour", 0.5),
        Verdict("d4", "B"),
        Verdict("d5", "C", "denial", -1.0),
        Verdict("d0", "C", "rumour", 0.5),
        Verdict("wiki:7", "St. Anne: the port", "leak", 2.0),
    ]
    # the weighed verdicts are exactly what the turn's call copies
    assert [[v.outcome, v.points] for v in verdicts if v.weighed] == compact_evidence(
        labels, ledger, model, ["d1", "d2", "d3", "d4", "d5"]
    )
    # what a student may write instead: malformed lines are no verdict; a repeated document keeps its first
    student = (
        "d1: Yes ('leak' +2).\nd2: no bearing.\nd2: B ('leak', +2).\nI think d3 matters.\nd4: B, no weight"
    )
    assert parse_verdicts(student) == [Verdict("d2")]
    assert parse_verdicts("") == [] and parse_verdicts("No reports found.") == []
