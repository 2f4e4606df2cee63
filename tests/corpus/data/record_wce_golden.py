"""Record search/read answers on a Wikipedia slice for
``tests/corpus/test_retrieval.py::test_search_and_read_match_the_pre_format_2_code_on_wikipedia``.

Recorded with the format-1 store (main before the scale branch) and the current importer:
``PYTHONPATH=<checkout of that code> python tests/corpus/data/record_wce_golden.py tests/corpus/data/wce_2025h2_golden.json``.
Rerun it (with format-1 code and the new importer) when the importer or cleaning changes the slice.
"""

import hashlib
import json
import sys
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path

from forecast_dojo.corpus import HashingEmbedder, build_indexes, make_retriever
from forecast_dojo.corpus.pipeline import build_from_source
from forecast_dojo.gateway import TemporalGateway

QUERIES = [
    "Russian strike on Ukraine energy infrastructure",
    "hurricane landfall evacuation",
    "election results parliament",
    "central bank interest rate decision",
    "earthquake death toll",
    "Gaza ceasefire hostages",
    "Supreme Court ruling",
    "protests police clashes capital",
    "tariffs trade war China",
    "football championship final",
    "wildfire evacuation",
    "prime minister resigns",
]
CUTOFFS = [
    datetime(2025, 7, 15, tzinfo=UTC),
    datetime(2025, 9, 1, 12, tzinfo=UTC),
    datetime(2025, 11, 1, tzinfo=UTC),
]


def answers(corpus):
    emb = HashingEmbedder()
    out = {}
    for kind in ("dense", "bm25", "hybrid"):
        retriever = make_retriever(kind, corpus, emb if kind != "bm25" else None)
        gateway = TemporalGateway(corpus, retriever)
        for cutoff in CUTOFFS:
            view = gateway.at(cutoff)
            for q in QUERIES:
                hits = view.search(q, 10)
                reads = []
                for row, _ in hits:
                    d = view.get(corpus.field("id", row))
                    reads.append(
                        hashlib.sha256(
                            json.dumps(
                                [d.doc_id, d.title, d.text, d.source, d.url, d.available_us, d.published_us]
                            ).encode()
                        ).hexdigest()[:16]
                    )
                out[f"{kind}|{cutoff.isoformat()}|{q}"] = {
                    "ids": [corpus.field("id", r) for r, _ in hits],
                    "scores": [round(s, 6) for _, s in hits],
                    "reads": reads,
                }
    return out


if __name__ == "__main__":
    root = Path("/work/shared/data/wikipedia-current-events")
    with tempfile.TemporaryDirectory() as tmp:
        result = build_from_source(
            "wikipedia",
            root,
            Path(tmp) / "wce",
            embedder=HashingEmbedder(),
            start=date(2025, 6, 1),
            end=date(2025, 10, 31),
            progress=False,
        )
        corpus = result.corpus
        build_indexes(corpus, dense=None, bm25=True, progress=False)
        golden = {
            "slice": ["2025-06-01", "2025-10-31"],
            "n_documents": len(corpus),
            "queries": QUERIES,
            "cutoffs": [c.isoformat() for c in CUTOFFS],
            "answers": answers(corpus),
        }
        print(len(corpus), file=sys.stderr)
        Path(sys.argv[1]).write_text(json.dumps(golden, indent=0, sort_keys=True))
