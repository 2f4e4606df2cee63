"""Dense indexes under a time filter: recall against the exact scan, persistence, mismatches."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from forecast_dojo.corpus import index as index_module
from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.index import (
    AUTO_EXACT_MAX_DOCS,
    ExactIndex,
    IVFIndex,
    IVFParams,
    build_dense_index,
    choose_dense_kind,
    exact_search,
    load_dense_index,
)
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus

from .sample import sample_documents


def clustered_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 40 fixed centres, the centre drifting over rows (topics change over time)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(dim).normal(size=(40, dim))
    topic = (np.arange(n) * 40 // n + rng.integers(0, 8, size=n)) % 40
    vectors = centres[topic] + 0.6 * rng.normal(size=(n, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def brute_force(vectors: np.ndarray, query: np.ndarray, n_visible: int, top_k: int) -> list[int]:
    scores = vectors[:n_visible] @ query
    return [int(r) for r in np.lexsort((np.arange(n_visible), -scores))[:top_k]]


def test_exact_search_is_exact_with_ties_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "EXACT_SCAN_CHUNK_ROWS", 7)
    rng = np.random.default_rng(1)
    # Small integers: every inner product is exact in float32, so ties are real ties on every code path.
    vectors = np.repeat(rng.integers(-3, 4, size=(10, 8)).astype(np.float32), 5, axis=0)  # each 5 times
    queries = rng.integers(-3, 4, size=(3, 8)).astype(np.float32)
    for n_visible in (1, 6, 7, 8, 23, 50):
        got = exact_search(vectors, queries, n_visible, 6)
        for q in range(3):
            assert [r for r, _ in got[q]] == brute_force(vectors, queries[q], n_visible, 6)
            assert all(r < n_visible for r, _ in got[q])
    assert exact_search(vectors, queries, 0, 5) == [[], [], []]


@pytest.mark.parametrize("kind", ["ivf-flat", "ivf-sq8", "ivf-pq"])
def test_ivf_recall_holds_at_every_visible_fraction(kind: str) -> None:
    vectors = clustered_vectors(6000, 32, seed=2)
    params = IVFParams.default(kind, len(vectors), pq_m=8, exact_below=0)
    index = IVFIndex.train(kind, vectors, params, progress=False)
    queries = clustered_vectors(30, 32, seed=3)
    for fraction in (0.02, 0.1, 0.5, 1.0):
        n_visible = int(len(vectors) * fraction)
        results = index.search(queries, n_visible, 10)
        hits = 0
        for q, result in enumerate(results):
            rows = [r for r, _ in result]
            assert len(rows) == 10 and max(rows) < n_visible
            hits += len(set(rows) & set(brute_force(vectors, queries[q], n_visible, 10)))
        assert hits / (10 * len(queries)) >= 0.9, f"{kind} recall@10 at {fraction:.0%} visible"


def test_probes_skip_lists_without_visible_vectors_and_widen_as_the_filter_tightens() -> None:
    vectors = clustered_vectors(4000, 16)
    index = IVFIndex.train("ivf-flat", vectors, IVFParams(nlist=40, nprobe=4, exact_below=0), progress=False)
    queries = vectors[-20:]  # the latest topics: their nearest lists are mostly in the future
    for n_visible in (4000, 1000, 200):
        lists, _ = index.probe_plan(queries, n_visible, fetch=10)
        visible = index._visible_per_list(n_visible)
        assert all(visible[lst] > 0 for lst in lists[lists >= 0]), "a list without visible vectors was probed"
        # Enough visible vectors are probed for every query, wherever its nearest lists are.
        assert all(visible[row[row >= 0]].sum() >= min(4 * 4000 / 40, n_visible) for row in lists)
    # Under a tight filter the nearest lists of the latest topics hold nothing visible: they are skipped.
    _, nearest = index.index.quantizer.search(queries, 4)
    empty = index._visible_per_list(200)[nearest] == 0
    assert empty.any()
    lists, _ = index.probe_plan(queries, 200, fetch=10)
    assert not any(set(nearest[q][empty[q]]) & set(lists[q].tolist()) for q in range(len(queries)))
    counts = index._visible_per_list(1234)
    assert (
        counts.sum() == 1234
        and counts.tolist() == np.bincount(index._list_of_row[:1234], minlength=40).tolist()
    )
    # Below exact_below the scan is exact, whatever the index.
    index.params.exact_below = 300
    exact = index.search(vectors[:2], 300, 5)
    assert [[r for r, _ in res] for res in exact] == [
        brute_force(vectors, vectors[i], 300, 5) for i in range(2)
    ]


def test_calibration_picks_the_smallest_nprobe_reaching_the_target() -> None:
    vectors = clustered_vectors(5000, 16, seed=5)
    loose = IVFIndex.train("ivf-flat", vectors, IVFParams(nlist=60, target_recall=0.5), progress=False)
    strict = IVFIndex.train("ivf-flat", vectors, IVFParams(nlist=60, target_recall=0.99), progress=False)
    assert 1 <= loose.params.nprobe <= strict.params.nprobe <= 60
    assert (
        IVFIndex.train("ivf-flat", vectors, IVFParams(nlist=60, nprobe=7), progress=False).params.nprobe == 7
    )


def test_auto_chooses_by_size() -> None:
    assert choose_dense_kind(AUTO_EXACT_MAX_DOCS) == "exact"
    assert choose_dense_kind(AUTO_EXACT_MAX_DOCS + 1) == "ivf-sq8"
    assert choose_dense_kind(10_000_000) == "ivf-pq"


def test_ivf_training_needs_enough_vectors() -> None:
    with pytest.raises(ValueError, match="cannot train 64 inverted lists on 10 vectors"):
        IVFIndex.train("ivf-flat", clustered_vectors(10, 8), IVFParams(nlist=64), progress=False)
    with pytest.raises(ValueError, match="not divisible"):
        IVFIndex.train("ivf-pq", clustered_vectors(500, 10), IVFParams(nlist=4, pq_m=4), progress=False)
    with pytest.raises(ValueError, match="unknown IVF option 'nprobes'"):
        IVFParams.default("ivf-flat", 100, nprobes=3)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index") / "c"
    build_corpus(sample_documents(1500, seed=11), out, HashingEmbedder(32), progress=False, shard_rows=400)
    return out


@pytest.mark.parametrize("kind", ["ivf-flat", "ivf-sq8", "ivf-pq"])
def test_persisted_index_reloads_and_matches(corpus_dir: Path, tmp_path: Path, kind: str) -> None:
    work = tmp_path / "c"
    shutil.copytree(corpus_dir, work)
    corpus = Corpus.load(work)
    built = build_dense_index(corpus, kind, nlist=16, pq_m=8, exact_below=0, progress=False)
    reloaded_corpus = Corpus.load(work)
    assert reloaded_corpus.indexes()[f"dense-{kind}"]["kind"] == kind
    loaded = load_dense_index(reloaded_corpus, kind)
    assert load_dense_index(reloaded_corpus, "auto").kind == kind
    queries = corpus.embeddings[:5]
    assert loaded.search(queries, 700, 10) == built.search(queries, 700, 10)
    assert isinstance(load_dense_index(reloaded_corpus, kind, nprobe=2), IVFIndex)
    # Under exact_below the persisted index answers with the exact scan (for ivf-pq: from the shards).
    exact_path = load_dense_index(reloaded_corpus, kind, exact_below=10**6)
    assert exact_path.search(queries, 700, 10) == ExactIndex(corpus.embeddings).search(queries, 700, 10)
    with pytest.raises(ValueError, match="only"):
        load_dense_index(reloaded_corpus, kind, nlist=3)
    # The inverted lists are memory-mapped, and so are the per-row list numbers the visible-aware
    # probing counts with: equal to what the index computes from its lists.
    import faiss

    lists = faiss.extract_index_ivf(loaded.index).invlists
    assert faiss.downcast_InvertedLists(lists).__class__.__name__ == "OnDiskInvertedLists"
    persisted = loaded.visibility_arrays()
    assert isinstance(persisted[0], np.memmap)
    fresh = IVFIndex(kind=kind, index=loaded.index, vectors=corpus.embeddings, params=loaded.params)
    computed = fresh.visibility_arrays()
    np.testing.assert_array_equal(persisted[0], computed[0])
    np.testing.assert_array_equal(persisted[1], computed[1])
    assert persisted[2] == computed[2]
    for n_visible in (0, 1, 699, 1024, 1500):
        np.testing.assert_array_equal(loaded._visible_per_list(n_visible), fresh._visible_per_list(n_visible))


def test_index_mismatches_fail_clearly(corpus_dir: Path, tmp_path: Path) -> None:
    work = tmp_path / "c"
    shutil.copytree(corpus_dir, work)
    corpus = Corpus.load(work)
    assert isinstance(load_dense_index(corpus, "auto"), ExactIndex)
    with pytest.raises(CorpusError, match="no index 'dense-ivf-flat'.*build_indexes"):
        load_dense_index(corpus, "ivf-flat")
    build_dense_index(corpus, "ivf-flat", nlist=16, progress=False)

    index_file = work / "index" / "dense-ivf-flat.faiss"
    original = index_file.read_bytes()
    index_file.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(CorpusError, match="dense-ivf-flat.faiss does not match its sha256"):
        load_dense_index(Corpus.load(work), "ivf-flat")
    index_file.unlink()
    with pytest.raises(CorpusError, match="missing file index/dense-ivf-flat.faiss"):
        load_dense_index(Corpus.load(work), "ivf-flat")

    # An index directory and manifest entry carried over to a corpus of other documents.
    other = tmp_path / "other"
    build_corpus(sample_documents(1500, seed=12), other, HashingEmbedder(32), progress=False)
    index_file.write_bytes(original)
    shutil.copytree(work / "index", other / "index")
    import json

    manifest = json.loads((other / "manifest.json").read_text())
    manifest["indexes"] = json.loads((work / "manifest.json").read_text())["indexes"]
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="built for different documents"):
        load_dense_index(Corpus.load(other), "ivf-flat")
    manifest["indexes"]["dense-ivf-flat"]["n_documents"] = 10
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="covers 10 documents, corpus has 1500"):
        load_dense_index(Corpus.load(other), "ivf-flat")
