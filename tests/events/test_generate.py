"""``forecast-dojo events generate`` end to end against a scripted OpenAI-compatible server on 127.0.0.1.

Proposals from dated clusters, the generator's checks (answer in question, documents outside the
cluster, unresolved), resolution from documents after the resolution date only, the events build,
and a rerun answered entirely from the cache.
"""

from __future__ import annotations

import json
import re
import socket
from datetime import date

import pytest

from forecast_dojo.cli import main
from forecast_dojo.errors import ConfigError
from forecast_dojo.events.generate import GenerateConfig, ReplyCache, answer_in_question, document_clusters
from forecast_dojo.schema import load_events
from tests.agents.test_openai_agent import ScriptedServer, completion
from tests.events.conftest import make_corpus, make_doc

HARBOR = "The Valdorian parliament will vote on the Harbor Act on January 20, lawmakers said."
STRIKE = "Workers at Orlan Mining in Kestria extended their strike, the Kestria union said."


def documents():
    docs = [
        make_doc(f"h{i}", HARBOR + f" Session {i}.", 1 + i, "Valdorian parliament Harbor Act vote")
        for i in range(4)
    ]
    docs += [
        make_doc(f"s{i}", STRIKE + f" Day {i}.", 2 + i * 0.9, "Orlan Mining strike in Kestria")
        for i in range(3)
    ]
    docs += [make_doc(f"w{i}", f"mild and dry, reading {i}.", 6 + i, "weather") for i in range(20)]
    # after the resolution dates (January 20 and 25): the resolving reports
    docs.append(
        make_doc(
            "r1",
            "The Valdorian parliament passed the Harbor Act by a wide margin.",
            21.5,
            "Harbor Act passes",
        )
    )
    docs.append(
        make_doc("r2", "The Orlan Mining strike in Kestria ended after a deal.", 26.5, "Kestria strike ends")
    )
    return docs


def reply(value) -> tuple[int, dict]:
    text = value if isinstance(value, str) else "Here you go:\n```json\n" + json.dumps(value) + "\n```"
    return 200, completion({"role": "assistant", "content": text})


HARBOR_Q = {
    "question": "Will the Valdorian parliament pass the Harbor Act by January 20, 2030?",
    "outcomes": ["Yes", "No"],
    "resolution_criteria": "Yes if the Harbor Act passes the parliament by January 20, 2030.",
    "resolution_date": "2030-01-20",
    "background": "Parliament scheduled a vote.",
    "supporting_doc_ids": ["h0", "h3"],
}
GIVEAWAY_Q = {
    "question": "Who will lead the Harbor Act vote now that Mira Tolvanen was chosen to lead it?",
    "outcomes": ["Mira Tolvanen", "Jonas Berg", "Ada Quist"],
    "resolution_criteria": "The leader named by parliament.",
    "resolution_date": "2030-01-20",
    "background": "",
    "supporting_doc_ids": ["h1"],
}
STRIKE_Q = {
    "question": "Will the Orlan Mining strike in Kestria end by January 25, 2030?",
    "outcomes": ["Yes", "No"],
    "resolution_criteria": "Yes if the strike ends by January 25, 2030.",
    "resolution_date": "2030-01-25",
    "background": "",
    "supporting_doc_ids": ["s1"],
}
OUTSIDE_Q = dict(STRIKE_Q, question="Will Orlan Mining raise wages in Kestria?", supporting_doc_ids=["h2"])
SCRIPT = [
    reply({"questions": [HARBOR_Q, GIVEAWAY_Q]}),  # cluster 0 (Harbor Act)
    reply({"outcome": "Yes", "doc_ids": ["r1"]}),  # resolves the Harbor question
    reply({"questions": [STRIKE_Q, OUTSIDE_Q]}),  # cluster 1 (strike)
    reply({"outcome": "unknown", "doc_ids": []}),  # the strike question stays unresolved
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_generate_round_trips_builds_events_and_reruns_from_the_cache(tmp_path, capsys):
    corpus = make_corpus(tmp_path, documents())
    out = tmp_path / "generated"
    argv = [
        "events",
        "generate",
        "--corpus",
        str(corpus.path),
        "--model",
        "scripted",
        "--start",
        "2030-01-01",
    ]
    argv += ["--end", "2030-01-31", "--out", str(out), "--no-progress"]
    with ScriptedServer(list(SCRIPT), default=reply("no more")[1]) as server:
        assert main([*argv, "--base-url", server.url]) == 0
    assert len(server.requests) == 4
    propose, resolve = (
        server.requests[0]["messages"][1]["content"],
        server.requests[1]["messages"][1]["content"],
    )
    assert "[h0]" in propose and "[s0]" not in propose  # one cluster per prompt
    shown = re.findall(r"^\[(\S+)\] (\d{4}-\d{2}-\d{2})", resolve, re.MULTILINE)
    assert shown and all(day > "2030-01-20" for _, day in shown)  # documents after the resolution date only
    assert "h0" not in {doc for doc, _ in shown}

    report = json.loads((out / "generate.json").read_text())
    reasons = {p["question"]: p["dropped"] for p in report["proposals"]}
    assert reasons[HARBOR_Q["question"]] is None
    assert reasons[GIVEAWAY_Q["question"]].startswith("answer in question")
    assert reasons[STRIKE_Q["question"]].startswith("unresolved")
    assert reasons[OUTSIDE_Q["question"]].startswith("cites documents outside its cluster")
    assert report["requests"] == {"cached": 0, "sent": 4}
    events = load_events(out / "all.jsonl")  # the build's output loads like any events file
    assert [e.question for e in events] == [HARBOR_Q["question"]]
    [event] = events
    assert event.outcome == "Yes" and event.source == "generated:scripted"
    assert event.extra["generated"]["resolution_doc_ids"] == ["r1"]
    assert (
        event.cutoffs[0].date().isoformat() >= "2030-01-06"
        and event.close_at.date().isoformat() == "2030-01-20"
    )
    build = json.loads((out / "report.json").read_text())
    assert build["imports"][0]["source"] == "generated" and build["leakage"]["run"]
    assert "answer in question" in (out / "generate.md").read_text()
    log = [json.loads(line) for line in (out / "llm-log.jsonl").read_text().splitlines()]
    assert [entry["cached"] for entry in log] == [False] * 4
    first = {name: (out / name).read_text() for name in ("all.jsonl", "train.jsonl", "eval.jsonl")}
    capsys.readouterr()

    # the rerun: no server at all (a closed port), everything from the cache, the same events
    dead = f"http://127.0.0.1:{free_port()}/v1"
    assert main([*argv, "--base-url", dead, "--overwrite"]) == 0
    assert "4 cached" in capsys.readouterr().out
    assert {name: (out / name).read_text() for name in first} == first
    log = [json.loads(line) for line in (out / "llm-log.jsonl").read_text().splitlines()]
    assert [entry["cached"] for entry in log] == [False] * 4 + [True] * 4
    assert main([*argv, "--base-url", dead]) == 2  # files exist: refused without --overwrite


def test_clusters_group_documents_that_share_names(tmp_path):
    corpus = make_corpus(tmp_path, documents())
    clusters = document_clusters(corpus, GenerateConfig(date(2030, 1, 1), date(2030, 1, 7)))
    ids = [{corpus.field("id", r) for r in c.rows} for c in clusters]
    assert ids == [{"h0", "h1", "h2", "h3"}, {"s0", "s1", "s2"}]


def test_checks_and_cache_errors_are_clear(tmp_path):
    assert (
        answer_in_question("Will Ada Quist win?", ["Ada Quist", "Jonas Berg", "Mira Tolvanen"]) == "Ada Quist"
    )
    assert answer_in_question("Will the act pass?", ["Yes", "No"]) is None
    cache = ReplyCache(tmp_path, "m", None)
    with pytest.raises(ConfigError, match="no cached reply"):
        cache.ask("propose", [{"role": "user", "content": "x"}])
    with pytest.raises(ConfigError, match="after --end"):
        GenerateConfig(date(2030, 2, 1), date(2030, 1, 1))
