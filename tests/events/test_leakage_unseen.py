"""The leakage screen on a second labelled set, drawn from data it was not tuned on.

``fixtures/leakage_labels_unseen.jsonl`` (how it was drawn and labelled: ``fixtures/README.md``)
keeps ids and labels only (the shared data is never copied into the repository); the ``unseen_labels``
fixture rebuilds the texts from the shared data (``tests/events/unseen_labels.py``), so these tests
skip where it is absent.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from forecast_dojo.errors import ForecastDojoError, InputNotFoundError, SchemaError
from forecast_dojo.events.leakage import (
    MEASURED_ON_UNSEEN,
    LeakageConfig,
    load_labelled_pairs,
    measure_screen,
    resolving_statements,
    text_matches,
)

UNSEEN_IDS = Path(__file__).parent / "fixtures" / "leakage_labels_unseen.jsonl"
FIRST = Path(__file__).parent / "fixtures" / "leakage_labels.jsonl"
FIELDS = {
    "event_id", "doc_id", "stratum", "split", "question", "outcomes", "outcome", "available_at",
    "title", "text", "label", "borderline", "note", "in_first_set",
}  # fmt: skip


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_unseen_labels_are_well_formed_and_disjoint_from_the_first_set(unseen_labels: Path) -> None:
    data = rows(unseen_labels)
    assert all(set(r) == FIELDS for r in data)
    assert len({(r["event_id"], r["doc_id"]) for r in data}) == len(data)
    assert all(r["label"] in (0, 1) and (r["note"] or not r["label"]) for r in data)  # every leak says why
    assert Counter(r["split"] for r in data).keys() == {"dev", "heldout"}
    assert Counter(r["stratum"] for r in data).keys() == {"whole_life", "unresolved"}
    # a question's pairs are all in one part (split by question text), so no question is in both
    parts: dict[str, set[str]] = {}
    for r in data:
        parts.setdefault(r["question"], set()).add(r["split"])
    assert all(len(p) == 1 for p in parts.values())
    first = {
        (json.loads(line)["event_id"], json.loads(line)["doc_id"]) for line in FIRST.read_text().splitlines()
    }
    assert not first & {(r["event_id"], r["doc_id"]) for r in data}  # no pair of the first set again
    assert sum(r["label"] for r in data) == 19
    # every pair matches its question as the screen's match rule says (how the pool was drawn)
    config = LeakageConfig()
    assert all(text_matches(r["question"], r["title"], r["text"], config) for r in data)


def test_screen_precision_and_recall_on_the_unseen_set(unseen_labels: Path) -> None:
    pairs, missing = load_labelled_pairs(unseen_labels)
    assert missing == 0 and len(pairs) == 918
    measured = measure_screen(pairs, LeakageConfig())
    heldout = measured["by_split"]["heldout"]
    overall = {k: measured[k] for k in MEASURED_ON_UNSEEN["outcome"]}
    assert overall == MEASURED_ON_UNSEEN["outcome"], measured
    assert heldout == MEASURED_ON_UNSEEN["outcome_heldout"], heldout
    # the measured floors, on the part not looked at while the screen was revised
    assert heldout["precision"] >= 0.55 and heldout["recall"] >= 0.65
    legacy = measure_screen(pairs, LeakageConfig(mode="legacy"))
    assert {k: legacy[k] for k in MEASURED_ON_UNSEEN["legacy"]} == MEASURED_ON_UNSEEN["legacy"]
    assert measured["precision"] > 10 * legacy["precision"]


def test_the_revised_rules_on_the_unseen_error_kinds() -> None:
    yes_no = ("Yes", "No")
    cases = [
        # the question's subject, not another name: Trump signing orders says nothing of Musk
        ("Will Musk be on good terms with Trump at the end of 2025?", "Trump signs an order imposing tariffs on goods.", False),
        # a state at a date: a release before it does not settle who has the top model then
        ("Will OpenAI have the top AI model on December 31?", "OpenAI releases their latest model, GPT-4.5.", False),
        # a verb used as a noun
        ("Will the United States launch a strike against Islamic State in Nigeria?",
         "NATO praises Israel and the United States for their strikes against Iran.", False),
        # "other than" names are not the subject
        ("Will anyone other than Carlos Alcaraz and Jannik Sinner win a major in 2026?",
         "Carlos Alcaraz defeats Novak Djokovic to win his first Australian Open title.", False),
        # US / United States are one name, and strikes answer an attack question
        ("Will the United States attack Iran before April 2026?",
         "A day after Israel and the US launched strikes against Iran, Trump says talks will follow.", True),
        ("Will Trump actually establish a strategic Bitcoin reserve?",
         "Trump signs an executive order creating a strategic bitcoin reserve.", True),
    ]  # fmt: skip
    for question, text, leak in cases:
        assert bool(resolving_statements(question, yes_no, "Yes", text)) is leak, (question, text)


def test_labels_file_errors_name_the_file_line_and_field(tmp_path: Path, unseen_labels: Path) -> None:
    with pytest.raises(InputNotFoundError):
        load_labelled_pairs(tmp_path / "missing.jsonl")
    good = json.loads(unseen_labels.read_text(encoding="utf-8").splitlines()[0])
    cases = [
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "not valid JSON"),
        (json.dumps({**good, "label": 2}), "'label'"),
        (json.dumps({**good, "label": True}), "'label'"),
        (json.dumps({**good, "doc_id": None}), "'doc_id'"),
        (json.dumps({**good, "outcomes": "Yes"}), "'outcomes'"),
        (json.dumps({k: v for k, v in good.items() if k != "text"}), "'text'"),
    ]
    for line, wanted in cases:
        path = tmp_path / "labels.jsonl"
        path.write_text(json.dumps(good) + "\n" + line + "\n", encoding="utf-8")
        with pytest.raises(SchemaError) as err:
            load_labelled_pairs(path)
        assert f"{path}:2" in str(err.value) and wanted in str(err.value), err.value
        assert isinstance(err.value, ForecastDojoError)


def test_id_only_labels_are_rebuilt_from_events_and_corpus_or_counted(tmp_path: Path) -> None:
    from .conftest import make_corpus, make_doc, make_event

    event = make_event("e1", question="Will the Valdorian parliament pass the Harbor Act?")
    corpus = make_corpus(tmp_path, [make_doc("d1", "The Valdorian parliament passes the Harbor Act.", 5)])
    path = tmp_path / "ids.jsonl"
    lines = [
        {"event_id": "e1", "doc_id": "d1", "label": 1},
        {"event_id": "e1", "doc_id": "nowhere", "label": 0},
        {"event_id": "unknown", "doc_id": "d1", "label": 0},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    pairs, missing = load_labelled_pairs(path, events=[event], corpus=corpus)
    assert missing == 2 and [p.doc_id for p in pairs] == ["d1"]
    assert pairs[0].question == event.question and "passes" in pairs[0].text
    measured = measure_screen(pairs, LeakageConfig())
    assert (measured["flags"], measured["true_flags"], measured["precision"], measured["recall"]) == (
        1,
        1,
        1.0,
        1.0,
    )
    assert load_labelled_pairs(path)[1] == 3  # without events and corpus nothing can be rebuilt


def test_the_repository_keeps_ids_and_labels_only() -> None:
    """No shared text is copied into the repository: the fixture names where each text lives."""
    data = rows(UNSEEN_IDS)
    assert len(data) == 918
    texts = {"question", "outcomes", "outcome", "available_at", "title", "text"}
    assert all(not texts & set(r) and set(r["source"]) == {"question_set", "outcomes", "outcome", "available_at"}
               for r in data)  # fmt: skip
    assert all(len(json.dumps(r)) < 600 for r in data)
