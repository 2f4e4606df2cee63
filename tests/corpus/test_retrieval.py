"""Retrievers end to end: kinds, errors, and the no-future-document property for every index type."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.retrieval import (
    BM25Retriever,
    DenseRetriever,
    ExactDenseRetriever,
    HybridRetriever,
    build_indexes,
    make_retriever,
)
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus
from forecast_dojo.gateway import TemporalGateway
from forecast_dojo.timeutil import from_micros

from .sample import TOPICS, sample_documents

EMBEDDER = HashingEmbedder(32)
DENSE_KINDS = ["exact", "ivf-flat", "ivf-sq8", "ivf-pq"]
WORDS = sorted({w for topic in TOPICS for w in topic.split()} | {"w1", "w42", "report"})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """1200 documents on 60 instants (20 per instant on average), with every index type persisted."""
    out = tmp_path_factory.mktemp("retrieval") / "c"
    built = build_corpus(
        sample_documents(1200, n_instants=60, seed=31), out, EMBEDDER, progress=False, shard_rows=300
    )
    # exact_below=0 forces the IVF code path even for tiny visible prefixes.
    for kind in ("ivf-flat", "ivf-sq8", "ivf-pq"):
        build_indexes(
            built, dense=kind, bm25=kind == "ivf-pq", progress=False, nlist=12, pq_m=8, exact_below=0
        )
    return Corpus.load(out)


@pytest.fixture(scope="module")
def retrievers(corpus: Corpus) -> dict[str, object]:
    found: dict[str, object] = {
        kind: make_retriever("dense", corpus, EMBEDDER, index=kind) for kind in DENSE_KINDS
    }
    found["bm25"] = make_retriever("bm25", corpus)
    for kind in DENSE_KINDS:
        found[f"hybrid-{kind}"] = make_retriever("hybrid", corpus, EMBEDDER, index=kind, depth=30)
    return found


def test_make_retriever_kinds(corpus: Corpus, retrievers: dict[str, object]) -> None:
    assert isinstance(retrievers["ivf-sq8"], DenseRetriever) and retrievers["ivf-sq8"].index.kind == "ivf-sq8"
    assert isinstance(retrievers["bm25"], BM25Retriever)
    assert isinstance(retrievers["hybrid-exact"], HybridRetriever)
    assert make_retriever("dense", corpus, EMBEDDER).index.kind == "ivf-flat"  # auto: the persisted index
    with pytest.raises(ValueError, match="unknown retriever 'sparse'"):
        make_retriever("sparse", corpus, EMBEDDER)
    with pytest.raises(ValueError, match="needs the corpus's embedder"):
        make_retriever("dense", corpus)
    with pytest.raises(CorpusError, match="embedded with 'hashing-bow-32', not 'hashing-bow-16'"):
        make_retriever("dense", corpus, HashingEmbedder(16))
    with pytest.raises(ValueError, match="unknown dense index 'hnsw'"):
        make_retriever("dense", corpus, EMBEDDER, index="hnsw")


def test_exact_retriever_matches_brute_force(corpus: Corpus) -> None:
    retriever = ExactDenseRetriever(corpus, EMBEDDER)
    query = "earthquake coast rescue"
    scores = corpus.embeddings[:500] @ EMBEDDER.encode([query])[0]
    expected = np.lexsort((np.arange(500), -scores))[:10].tolist()
    assert [r for r, _ in retriever.search(query, 500, 10)] == expected


def test_bm25_is_built_in_memory_when_not_persisted(corpus: Corpus, tmp_path: Path) -> None:
    shutil.copytree(corpus.path, tmp_path / "c")
    manifest_path = tmp_path / "c" / "manifest.json"
    import json

    manifest = json.loads(manifest_path.read_text())
    del manifest["indexes"]["bm25"]
    manifest_path.write_text(json.dumps(manifest))
    fresh = make_retriever("bm25", Corpus.load(tmp_path / "c"))
    persisted = make_retriever("bm25", corpus)
    assert fresh.search("court ruling", 900, 10) == persisted.search("court ruling", 900, 10)


@pytest.mark.parametrize("kind", DENSE_KINDS + ["bm25"] + [f"hybrid-{k}" for k in DENSE_KINDS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    instant_index=st.integers(min_value=0, max_value=59),
    shift_us=st.sampled_from([-1, 0, 0, 0, 1]),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    top_k=st.integers(min_value=1, max_value=25),
)
def test_no_document_at_or_after_the_cutoff_is_ever_returned(
    corpus: Corpus,
    retrievers: dict[str, object],
    kind: str,
    instant_index: int,
    shift_us: int,
    words: list[str],
    top_k: int,
) -> None:
    instants = np.unique(corpus.available_us)
    # Mostly cutoffs exactly at a document's available_at: those documents must be invisible.
    cutoff_us = int(instants[min(instant_index, instants.size - 1)]) + shift_us
    n_visible = corpus.n_visible(cutoff_us)
    query = " ".join(words)
    hits = retrievers[kind].search(query, n_visible, top_k)
    assert len(hits) <= top_k
    assert all(0 <= row < n_visible and int(corpus.available_us[row]) < cutoff_us for row, _ in hits)
    assert len({row for row, _ in hits}) == len(hits)
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert hits == retrievers[kind].search(query, n_visible, top_k), "same query, same cutoff, same list"
    if kind.startswith(("exact", "ivf")) and n_visible >= top_k:
        assert len(hits) == top_k, "the filter is applied inside the search, not by dropping results"
    # Through the gateway nothing is dropped either: the retriever already respected the cutoff.
    view = TemporalGateway(corpus, retrievers[kind]).at(from_micros(cutoff_us))
    assert view.search(query, top_k) == hits


def test_everything_is_invisible_before_the_first_instant(
    retrievers: dict[str, object], corpus: Corpus
) -> None:
    first = int(corpus.available_us[0])
    assert corpus.n_visible(first) == 0
    for retriever in retrievers.values():
        assert retriever.search("election vote", 0, 10) == []
    view = TemporalGateway(corpus, retrievers["exact"]).at(from_micros(first) + timedelta(microseconds=1))
    assert all(int(corpus.available_us[row]) == first for row, _ in view.search("election", 50))


GOLDEN = Path(__file__).parent / "data" / "wce_2025h2_golden.json"


@pytest.mark.shared_data
@pytest.mark.slow
def test_search_and_read_match_the_pre_format_2_code_on_wikipedia(data_root: Path, tmp_path: Path) -> None:
    """Answers recorded with the code before the memory-mapped layout (format 1, parquet in memory,
    embeddings concatenated in RAM) on Wikipedia Current Events 2025-06 to 2025-10: the same ids,
    scores and read documents come back from the format-2 corpus, at three cutoffs, for dense,
    BM25 and hybrid retrieval. (Regenerate with tests/corpus/data/record_wce_golden.py and format-1 code if the importer changes.)"""
    import hashlib
    import json
    from datetime import date, datetime

    from forecast_dojo.corpus.pipeline import build_from_source

    golden = json.loads(GOLDEN.read_text())
    start, end = (date.fromisoformat(day) for day in golden["slice"])
    embedder = HashingEmbedder()
    result = build_from_source(
        "wikipedia",
        data_root / "wikipedia-current-events",
        tmp_path / "wce",
        embedder=embedder,
        start=start,
        end=end,
        progress=False,
    )
    build_indexes(result.corpus, dense=None, bm25=True, progress=False)
    corpus = Corpus.load(tmp_path / "wce")
    assert corpus.format_version == 2 and len(corpus) == golden["n_documents"]
    compared = 0
    for kind in ("dense", "bm25", "hybrid"):
        gateway = TemporalGateway(corpus, make_retriever(kind, corpus, embedder if kind != "bm25" else None))
        for cutoff_text in golden["cutoffs"]:
            view = gateway.at(datetime.fromisoformat(cutoff_text))
            for query in golden["queries"]:
                want = golden["answers"][f"{kind}|{cutoff_text}|{query}"]
                hits = view.search(query, 10)
                assert [corpus.field("id", row) for row, _ in hits] == want["ids"], (kind, cutoff_text, query)
                np.testing.assert_allclose([score for _, score in hits], want["scores"], atol=2e-6)
                reads = []
                for row, _ in hits:
                    doc = view.get(corpus.field("id", row))
                    record = [
                        doc.doc_id,
                        doc.title,
                        doc.text,
                        doc.source,
                        doc.url,
                        doc.available_us,
                        doc.published_us,
                    ]
                    reads.append(hashlib.sha256(json.dumps(record).encode()).hexdigest()[:16])
                assert reads == want["reads"]
                compared += len(hits)
    assert compared > 500
