"""BM25 with visible-only statistics: exact against an index of the visible documents alone."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from forecast_dojo.corpus import bm25
from forecast_dojo.corpus.bm25 import BM25Index, build_bm25_index, tokenize
from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus, embedding_text
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import to_micros

from .sample import sample_documents


def reference_bm25(texts: list[str], query: str, k1: float = 1.5, b: float = 0.75) -> dict[int, float]:
    """Textbook Lucene BM25 over exactly these texts (the visible ones), written independently."""
    docs = [Counter(tokenize(t)) for t in texts]
    lengths = [sum(d.values()) for d in docs]
    avgdl = sum(lengths) / len(docs)
    scores: dict[int, float] = {}
    for term in set(tokenize(query)):
        df = sum(1 for d in docs if term in d)
        if df == 0:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for row, d in enumerate(docs):
            if term in d:
                tf = d[term]
                scores[row] = scores.get(row, 0.0) + idf * tf * (k1 + 1) / (
                    tf + k1 * (1 - b + b * lengths[row] / avgdl)
                )
    return scores


TEXTS = [embedding_text(d.title, d.text) for d in sample_documents(400, seed=21)]
QUERIES = [
    "earthquake coast rescue",
    "central bank inflation rates",
    "w17 w3 goal",
    "court verdict",
    "nothing-matches-this",
]


def test_tokenize_lowercases_and_drops_stopwords() -> None:
    assert tokenize("The Ukrainian Army launches an offensive in Kursk_Oblast, 2025!") == [
        "ukrainian",
        "army",
        "launches",
        "offensive",
        "kursk",
        "oblast",
        "2025",
    ]
    assert tokenize("Émilia Pérez wins") == ["émilia", "pérez", "wins"]


@pytest.mark.parametrize("n_visible", [1, 7, 100, 399, 400])
def test_scores_use_only_visible_statistics(n_visible: int) -> None:
    index = BM25Index.build(TEXTS, progress=False)
    for query in QUERIES:
        rows, scores = index.scores(query, n_visible)
        expected = reference_bm25(TEXTS[:n_visible], query)
        assert rows.tolist() == sorted(expected)
        np.testing.assert_allclose(scores, [expected[r] for r in sorted(expected)], rtol=1e-12)
        assert rows.size == 0 or rows.max() < n_visible


def test_documents_after_the_cutoff_do_not_change_scores_before_it(tmp_path: Path) -> None:
    docs = sample_documents(300, n_instants=30, seed=22)
    last = max(d.available_at for d in docs)
    future = [
        Document(
            id=f"future-{i}",
            title="earthquake earthquake",
            text="earthquake coast rescue " * (i + 1),
            published_at=last,
            available_at=last + timedelta(days=1),
        )
        for i in range(40)
    ]
    before = build_corpus(docs, tmp_path / "before", HashingEmbedder(16), progress=False)
    after = build_corpus(docs + future, tmp_path / "after", HashingEmbedder(16), progress=False)
    cutoff = to_micros(last + timedelta(days=1))  # the future documents are available exactly at the cutoff
    assert before.n_visible(cutoff) == after.n_visible(cutoff) == len(docs)
    index_before = build_bm25_index(before, progress=False)
    index_after = build_bm25_index(after, progress=False)
    for query in QUERIES:
        assert index_before.search(query, len(docs), 20) == index_after.search(
            query, after.n_visible(cutoff), 20
        )
    # ...while a corpus-wide statistic would have changed them: earthquake is far more common afterwards.
    assert index_after.search("earthquake", len(after), 20) != index_before.search(
        "earthquake", len(docs), 20
    )


def test_search_never_pads_with_non_matching_or_invisible_rows() -> None:
    texts = ["alpha beta", "gamma", "alpha", "delta", "alpha alpha"]
    index = BM25Index.build(texts, progress=False)
    assert [r for r, _ in index.search("alpha", 2, 10)] == [0]
    assert [r for r, _ in index.search("alpha", 5, 10)] == [4, 2, 0]
    assert index.search("zeta", 5, 10) == [] and index.search("alpha", 0, 10) == []


def test_ties_break_by_row() -> None:
    index = BM25Index.build(
        ["same words here", "other", "same words here", "same words here"], progress=False
    )
    assert [r for r, _ in index.search("same words", 4, 3)] == [0, 2, 3]


def test_persisted_index_round_trips_and_is_verified(tmp_path: Path) -> None:
    corpus = build_corpus(sample_documents(200, seed=23), tmp_path / "c", HashingEmbedder(16), progress=False)
    built = build_bm25_index(corpus, progress=False)
    loaded = BM25Index.load(Corpus.load(tmp_path / "c"))
    for query in QUERIES:
        assert loaded.search(query, 150, 10) == built.search(query, 150, 10)
    terms = tmp_path / "c" / "index" / "bm25-terms.bin"
    terms.write_bytes(terms.read_bytes().replace(b"a", b"b", 1))
    with pytest.raises(CorpusError, match="bm25-terms.bin does not match its sha256"):
        BM25Index.load(Corpus.load(tmp_path / "c"))
    shutil.rmtree(tmp_path / "c" / "index")
    with pytest.raises(CorpusError, match="missing file index/bm25"):
        BM25Index.load(Corpus.load(tmp_path / "c"))


def test_loaded_index_is_memory_mapped_and_finds_terms_by_bisection(tmp_path: Path) -> None:
    documents = sample_documents(120, seed=5)
    documents[3] = Document(**{**documents[3].__dict__, "text": documents[3].text + " Émilia Ωmega zürich"})
    corpus = build_corpus(documents, tmp_path / "c", HashingEmbedder(16), progress=False)
    built = BM25Index.build(corpus.texts(), progress=False)
    loaded = build_bm25_index(corpus, progress=False)
    for array in (loaded.offsets, loaded.rows, loaded.tfs, loaded.doc_lengths, loaded.prefix_lengths):
        assert isinstance(array.base, np.memmap)  # mapped: nothing of the postings is read at load
    assert not isinstance(loaded.vocabulary, dict) and len(loaded.vocabulary) == len(built.vocabulary)
    for term, term_id in built.vocabulary.items():  # every term, non-ASCII ones included
        assert loaded.vocabulary[term] == term_id
    assert (
        "émilia" in loaded.vocabulary and "zzz-absent" not in loaded.vocabulary and 3 not in loaded.vocabulary
    )
    with pytest.raises(KeyError):
        loaded.vocabulary["zzz-absent"]
    assert "\udfff" not in loaded.vocabulary  # a lone surrogate (hostile query text) is not a term, no error
    assert sorted(loaded.vocabulary) == list(loaded.vocabulary)
    for query in [*QUERIES, "émilia ωmega"]:
        assert loaded.search(query, 100, 10) == built.search(query, 100, 10)
    assert loaded.search("ωmega", 120, 3)[0][0] == 3


def test_building_in_chunks_lays_out_the_same_postings(tmp_path: Path, monkeypatch) -> None:
    whole = BM25Index.build(TEXTS, progress=False)
    monkeypatch.setattr(bm25, "CHUNK_POSTINGS", 97)  # many chunks, boundaries inside rows' postings
    chunked = BM25Index.build(iter(TEXTS), progress=False)
    for name in ("offsets", "rows", "tfs", "doc_lengths", "prefix_lengths"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    corpus = build_corpus(sample_documents(400, seed=21), tmp_path / "c", HashingEmbedder(16), progress=False)
    persisted = build_bm25_index(corpus, progress=False)  # spilled to disk in chunks, then merged
    for name in ("offsets", "rows", "tfs", "doc_lengths"):
        assert np.array_equal(getattr(whole, name), getattr(persisted, name)), name
    assert not list(corpus.index_dir.glob("bm25-build-*"))  # the spill folder is gone


def test_an_index_in_the_first_layout_still_loads(tmp_path: Path) -> None:
    corpus = build_corpus(sample_documents(150, seed=8), tmp_path / "c", HashingEmbedder(16), progress=False)
    index = BM25Index.build(corpus.texts(), progress=False)
    corpus.index_dir.mkdir(exist_ok=True)
    np.savez(
        corpus.index_dir / "bm25.npz",
        offsets=index.offsets,
        rows=index.rows,
        tfs=index.tfs,
        doc_lengths=index.doc_lengths,
    )
    terms = sorted(index.vocabulary, key=index.vocabulary.__getitem__)
    (corpus.index_dir / "bm25-vocabulary.json").write_text(json.dumps(terms))
    params = {"k1": 1.5, "b": 0.75, "tokenizer": "unicode-words-lower-stopwords-v1"}
    corpus.register_index("bm25", "bm25", ["index/bm25.npz", "index/bm25-vocabulary.json"], params)
    old = BM25Index.load(Corpus.load(tmp_path / "c"))
    assert isinstance(old.vocabulary, dict)
    for query in QUERIES:
        assert old.search(query, 120, 10) == index.search(query, 120, 10)
    build_bm25_index(Corpus.load(tmp_path / "c"), progress=False)  # a rebuild replaces the old files
    assert not (corpus.index_dir / "bm25.npz").exists()


def test_a_failed_build_leaves_the_previous_index_and_no_leftovers(tmp_path: Path, monkeypatch) -> None:
    corpus = build_corpus(sample_documents(150, seed=9), tmp_path / "c", HashingEmbedder(16), progress=False)
    before = build_bm25_index(corpus, progress=False)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(bm25, "_merge_chunks", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_bm25_index(Corpus.load(tmp_path / "c"), progress=False)
    assert not list(corpus.index_dir.glob("bm25-build-*")) and not list(corpus.index_dir.glob("*.tmp*"))
    after = BM25Index.load(Corpus.load(tmp_path / "c"))  # still verified against the manifest
    for query in QUERIES:
        assert after.search(query, 150, 10) == before.search(query, 150, 10)
