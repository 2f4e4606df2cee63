"""The second labelled set's texts, rebuilt from the shared data at test time (the repository keeps ids only).

``fixtures/leakage_labels_unseen.jsonl`` holds, per (question, document) pair, the ids, the label and
where the texts live: the ForecastBench question set (``source["question_set"]``) whose question text
was labelled, and the Wikipedia "Current events" day of the document (its id ``wce-YYYY-MM-DD-NNNN``).
:func:`rebuild_unseen_labels` writes the full layout that
:func:`forecast_dojo.events.leakage.load_labelled_pairs` reads (``question``, ``outcomes``, ``outcome``,
``available_at``, ``title``, ``text``), with the texts normalized as the corpus build does.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

IDS_FILE = Path(__file__).parent / "fixtures" / "leakage_labels_unseen.jsonl"


def _questions(root: Path, wanted: set[tuple[str, str]]) -> dict[tuple[str, str, str], str]:
    """``(question set file, source, id) -> question text`` for the wanted ForecastBench questions."""
    from forecast_dojo.corpus.cleaning import normalize_text
    from forecast_dojo.events.forecastbench import html_to_text

    texts = {}
    for path in sorted((root / "forecastbench" / "question_sets").glob("*.json")):
        for question in json.loads(path.read_text(encoding="utf-8"))["questions"]:
            key = (str(question.get("source")), str(question.get("id")))
            if key in wanted:
                texts[(path.name, *key)] = normalize_text(html_to_text(question["question"]))
    return texts


def rebuild_unseen_labels(data_root: Path, out: Path) -> Path:
    """Write the labelled pairs with their texts to ``out`` (JSON lines) and return it."""
    from forecast_dojo.corpus.cleaning import normalize_text
    from forecast_dojo.corpus.importers.wikipedia import parse_day_file

    rows: list[dict[str, Any]] = [
        json.loads(line) for line in IDS_FILE.read_text(encoding="utf-8").splitlines()
    ]
    wanted = {tuple(r["event_id"].split(":")[1:3]) for r in rows}
    questions = _questions(data_root, wanted)  # type: ignore[arg-type]
    wiki = data_root / "wikipedia-current-events"
    documents = {}
    for day in sorted({r["doc_id"][4:14] for r in rows}):
        docs, _ = parse_day_file(wiki / day[:4] / day[5:7] / f"{day}.yaml", date.fromisoformat(day))
        documents.update({d.id: d for d in docs})
    with out.open("w", encoding="utf-8") as fh:
        for r in rows:
            source = r.pop("source")
            _, fb_source, qid = r["event_id"].split(":")
            doc = documents[r["doc_id"]]
            full = {
                **r,
                "question": questions[(source["question_set"], fb_source, qid)],
                "outcomes": source["outcomes"],
                "outcome": source["outcome"],
                "available_at": source["available_at"],
                "title": normalize_text(doc.title),
                "text": normalize_text(doc.text),
            }
            fh.write(json.dumps(full, ensure_ascii=False) + "\n")
    return out
