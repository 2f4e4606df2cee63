"""The leakage screen measured on hand-labelled documents of the shared data (fixtures/leakage_labels.jsonl).

The labels hold only ids and judgments (the texts stay in the shared data); this test rebuilds each
(question, document) pair from ``../shared/data``, applies both rules and checks the precision and
recall that ``MEASURED_ON_LABELS`` (printed by ``forecast-dojo events build``) and docs/events.md report.
"""

from __future__ import annotations

import json
import math
from datetime import date, timedelta
from pathlib import Path

import pytest

from forecast_dojo.corpus.importers.wikipedia import parse_day_file
from forecast_dojo.events.forecastbench import load_forecastbench
from forecast_dojo.events.leakage import MEASURED_ON_LABELS, LeakageConfig, resolving_statements
from forecast_dojo.events.relevance import name_terms, salient_terms, terms

LABELS = Path(__file__).parent / "fixtures" / "leakage_labels.jsonl"


def _matches(question: str, title: str, text: str, min_coverage: float, min_shared: int) -> bool:
    wanted, names = salient_terms(question), name_terms(question)
    shared = wanted & terms(f"{title}\n{text}")
    need = min(len(wanted), max(min_shared, math.ceil(min_coverage * len(wanted))))
    return bool(wanted) and len(shared) >= need and (not names or bool(names & shared))


def _scores(flags: list[bool], labels: list[int]) -> dict[str, float | int]:
    tp = sum(f and y for f, y in zip(flags, labels, strict=True))
    flagged, positives = sum(flags), sum(labels)
    return {
        "flags": flagged,
        "true_flags": tp,
        "precision": round(tp / flagged, 3) if flagged else 0.0,
        "recall": round(tp / positives, 3) if positives else 0.0,
    }


def test_labels_file_is_well_formed() -> None:
    rows = [json.loads(line) for line in LABELS.read_text().splitlines()]
    assert len(rows) >= 60 and sum(r["old_flag"] for r in rows) >= 50
    assert {tuple(sorted(r)) for r in rows} == {
        ("borderline", "doc_id", "event_id", "label", "note", "old_flag")
    }
    assert len({(r["event_id"], r["doc_id"]) for r in rows}) == len(rows)
    assert all(
        r["label"] in (0, 1) and (r["note"] or not r["label"]) for r in rows
    )  # every positive says why


@pytest.mark.shared_data
@pytest.mark.slow
def test_outcome_screen_is_precise_without_losing_recall(data_root: Path) -> None:
    rows = [json.loads(line) for line in LABELS.read_text().splitlines()]
    events = {e.id: e for e in load_forecastbench(data_root / "forecastbench", progress=False).events}
    wiki = data_root / "wikipedia-current-events"
    documents = {}
    for day in sorted({r["doc_id"][4:14] for r in rows}):
        path = wiki / day[:4] / day[5:7] / f"{day}.yaml"
        docs, _ = parse_day_file(path, date.fromisoformat(day))
        documents.update({d.id: d for d in docs})
    config = LeakageConfig()
    new_flags, labels = [], []
    for row in rows:
        event, doc = events[row["event_id"]], documents[row["doc_id"]]
        in_window = doc.available_at >= event.close_at - timedelta(days=config.window_days)
        matched = _matches(event.question, doc.title, doc.text, config.min_coverage, config.min_shared_terms)
        found = resolving_statements(event.question, event.outcomes, event.outcome, doc.text)
        new_flags.append(bool(in_window and matched and found))
        labels.append(row["label"])
    new = _scores(new_flags, labels)
    old = _scores([r["old_flag"] for r in rows], labels)
    assert new == MEASURED_ON_LABELS["outcome"] and old == MEASURED_ON_LABELS["legacy"], (new, old)
    assert new["precision"] >= 0.5 and new["recall"] >= old["recall"]
