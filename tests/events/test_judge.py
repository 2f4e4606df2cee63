"""The optional LLM judge of the leakage screen, against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from forecast_dojo.errors import ConfigError
from forecast_dojo.events.build import BuildConfig, build_events, render_summary, write_outputs
from forecast_dojo.events.judge import JudgeConfig, LeakageJudge, parse_verdict
from forecast_dojo.events.leakage import LeakageConfig, load_labelled_pairs, measure_screen, screen_event
from forecast_dojo.events.relevance import RelevanceIndex
from forecast_dojo.events.result import ImportResult
from forecast_dojo.events.split import parse_window
from tests.agents.test_openai_agent import ScriptedServer, completion

from .conftest import day, make_corpus, make_doc, make_event
from .test_build import public_world, run_cli


def reply(text: str) -> tuple[int, dict]:
    return (200, completion({"role": "assistant", "content": text}))


class ByContent(list):
    """A server script that answers YES when the last request's document holds ``needle``, else NO."""

    def __init__(self, server: ScriptedServer, needle: str) -> None:
        super().__init__([None])
        self.server, self.needle = server, needle

    def pop(self, index: int = -1) -> tuple[int, dict]:  # noqa: ARG002 - the server pops item 0
        document = self.server.requests[-1]["messages"][-1]["content"]
        return reply("YES" if self.needle in document else "NO")


def judge_for(server: ScriptedServer, cache: Path, **config) -> LeakageJudge:
    options = {"timeout_s": 5.0, "backoff_s": 0.01, "max_retries": 1, "api_key": "x"} | config
    return LeakageJudge(JudgeConfig(server.url, "scripted-judge", cache, **options))


def harbor_world(tmp_path: Path):
    docs = [
        make_doc("debate", "Valdoria lawmakers debate the Harbor Act again.", 20.5),
        make_doc("passed", "The Valdoria parliament passes the Harbor Act in a final vote.", 22.5),
        make_doc(
            "after", "Valdoria Harbor Act signed into law by the president.", 40
        ),  # after the last cutoff
    ]
    index = RelevanceIndex(make_corpus(tmp_path, docs))
    event = make_event(
        "harbor", question="Will the Valdoria parliament pass the Harbor Act?", open_day=0, close_day=45
    )
    return replace(event, cutoffs=(day(10), day(21), day(23), day(30))), index


def test_judge_confirms_or_drops_the_lexical_flags_and_sees_no_more_than_the_screen(tmp_path: Path) -> None:
    event, index = harbor_world(tmp_path)
    with ScriptedServer([reply("NO")]) as server:
        verdicts: list[dict] = []
        judge = judge_for(server, tmp_path / "cache")
        assert screen_event(event, index, LeakageConfig(), judge=judge, verdicts=verdicts) == []
    assert verdicts == [
        {"event_id": "harbor", "doc_id": "passed", "lexical": True, "judge": False, "cached": False}
    ]
    (request,) = server.requests
    assert request["model"] == "scripted-judge" and request["temperature"] == 0.0
    sent = json.dumps(request["messages"])
    assert event.question in sent and "passes the Harbor Act in a final vote" in sent
    assert "2030-01-23T12:00:00Z" in sent  # the document's own date ...
    # ... and nothing the screen does not read: no other document, no close, no schedule, no event id
    for absent in ("signed into law", "debate the Harbor Act", "2030-02-15", 'harbor"', "cutoff"):
        assert absent not in sent, absent

    # A YES keeps the flag; the cache answers the same pair again without a request.
    with ScriptedServer([reply("YES.")]) as server:
        flags = screen_event(event, index, LeakageConfig(), judge=judge_for(server, tmp_path / "cache2"))
        assert [f.doc_id for f in flags] == ["passed"]
        cached = judge_for(server, tmp_path / "cache2")
        again = screen_event(event, index, LeakageConfig(), judge=cached)
    assert [f.doc_id for f in again] == ["passed"] and len(server.requests) == 1
    assert cached.cache_hits == 1 and cached.requests == 0
    stored = [json.loads(p.read_text()) for p in (tmp_path / "cache2").glob("*.json")]
    assert [s["reply"] for s in stored] == ["YES."] and stored[0]["messages"] == request["messages"]


def test_scope_matches_reads_every_visible_match_and_can_add_flags(tmp_path: Path) -> None:
    event, index = harbor_world(tmp_path)
    with ScriptedServer([]) as server:
        server.script = ByContent(server, "debate")
        verdicts: list[dict] = []
        judge = judge_for(server, tmp_path / "cache", scope="matches")
        flags = screen_event(event, index, LeakageConfig(), judge=judge, verdicts=verdicts)
    # the judge read the two visible matches, never the document after the last cutoff
    assert sorted(v["doc_id"] for v in verdicts) == ["debate", "passed"]
    assert all("signed into law" not in json.dumps(r) for r in server.requests)
    assert [(f.doc_id, f.resolution_terms) for f in flags] == [("debate", ("judge: yes",))]


def test_a_failing_or_unreadable_judge_keeps_the_lexical_decision(tmp_path: Path) -> None:
    event, index = harbor_world(tmp_path)
    error = (500, {"error": {"message": "down"}})
    with ScriptedServer([error, error]) as server:
        judge = judge_for(server, tmp_path / "cache", max_retries=1)
        flags = screen_event(event, index, LeakageConfig(), judge=judge)
    assert [f.doc_id for f in flags] == ["passed"] and len(server.requests) == 2
    assert len(judge.failures) == 1 and judge.summary()["failures"] == 1
    assert not list((tmp_path / "cache").glob("*.json"))  # nothing cached for a failure
    with ScriptedServer([reply("It depends on the date.")]) as server:
        judge = judge_for(server, tmp_path / "cache")
        assert [f.doc_id for f in screen_event(event, index, LeakageConfig(), judge=judge)] == ["passed"]
    assert parse_verdict("Yes, it does.") is True and parse_verdict("no") is False
    assert parse_verdict("") is None and parse_verdict("maybe") is None
    with pytest.raises(ConfigError):
        JudgeConfig("http://127.0.0.1:1/v1", "m", tmp_path, scope="everything")
    with pytest.raises(ConfigError):
        JudgeConfig("", "m", tmp_path)


def test_judge_verdicts_go_to_decisions_and_the_report(tmp_path: Path) -> None:
    events, docs = public_world()
    corpus = make_corpus(tmp_path, docs)
    config = BuildConfig(
        train_window=parse_window("2029-01-01:2029-12-31"), eval_window=parse_window("2030-01-01:2030-12-31")
    )
    with ScriptedServer([]) as server:
        server.script = ByContent(server, "Harbor Act")  # the mayoral flag is judged a false flag
        judge = judge_for(server, tmp_path / "cache")
        output = build_events(
            [ImportResult(source="test", events=events)],
            config,
            corpus=corpus,
            progress=False,
            leakage_judge=judge,
        )
    paths = write_outputs(output, tmp_path / "out")
    decisions = {d["event_id"]: d for d in map(json.loads, paths["decisions"].read_text().splitlines())}
    assert decisions["test:harbor"]["leakage_judge"] == [
        {"doc_id": "harbor-passes", "lexical": True, "judge": True, "cached": False}
    ]
    assert decisions["test:mayor"]["leakage_judge"] == [
        {"doc_id": "mayor-wins", "lexical": True, "judge": False, "cached": False}
    ]
    assert decisions["test:mayor"]["outcome"] != "dropped"  # its only flag was judged false
    assert "leakage_judge" not in decisions["test:bridge"]
    leak = output.report["leakage"]
    assert leak["judge"]["model"] == "scripted-judge" and leak["judge"]["requests"] == 2
    assert leak["judge_verdicts"] == 2
    assert "leakage judge scripted-judge (flags): 2 verdicts in decisions.jsonl" in render_summary(
        output.report
    )


def test_cli_prints_precision_and_recall_on_labels_and_uses_the_judge(
    polymarket_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture, unseen_labels: Path
) -> None:
    from .test_build import world_docs

    make_corpus(tmp_path, world_docs())
    argv = ["events", "build", "--polymarket", str(polymarket_export), "--corpus", str(tmp_path / "corpus")]
    argv += ["--train-window", "2029-01-01:2029-12-31", "--eval-window", "2030-01-01:2030-12-31"]
    argv += ["--no-progress", "--leakage-labels", str(unseen_labels)]
    assert run_cli([*argv, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    pairs, _ = load_labelled_pairs(unseen_labels)
    measured = measure_screen(pairs, LeakageConfig())
    assert (
        f"leakage screen (outcome) on {unseen_labels}: precision {measured['precision']:.2f}, recall "
        f"{measured['recall']:.2f}" in printed
    )
    heldout = measured["by_split"]["heldout"]
    assert f"heldout: precision {heldout['precision']:.2f}, recall {heldout['recall']:.2f}" in printed
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["leakage"]["labelled"][0]["precision"] == measured["precision"]
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert (
        "### Precision and recall on labelled pairs" in markdown
        and "| heldout | outcome | 483 | 12 |" in markdown
    )

    # The judge on the same labels: every lexical flag of the labelled pairs is sent to it (answers NO).
    with ScriptedServer([], default=completion({"role": "assistant", "content": "NO"})) as server:
        judged = [*argv, "--out", str(tmp_path / "judged"), "--judge-base-url", server.url]
        judged += ["--judge-model", "scripted-judge", "--judge-cache", str(tmp_path / "cache")]
        assert run_cli(judged) == 0
    printed = capsys.readouterr().out
    assert f"leakage screen (outcome+judge) on {unseen_labels}: precision 0.00, recall 0.00" in printed
    judge = json.loads((tmp_path / "judged" / "report.json").read_text())["leakage"]["judge"]
    # one request per distinct flagged pair (two questions of the set share their text: cached)
    assert (
        judge["requests"] == len(server.requests)
        and judge["requests"] + judge["cache_hits"] == measured["flags"]
    )
    assert "leakage judge scripted-judge (flags)" in printed
    assert run_cli([*argv, "--out", str(tmp_path / "x"), "--judge-model", "m"]) == 2  # no URL: a clear error
    assert "--judge-base-url" in capsys.readouterr().err
