"""Embedders: determinism, normalization, names, and the static model distilled from MiniLM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forecast_dojo.corpus.distill import cache_dir, distill_static_minilm
from forecast_dojo.corpus.embedders import HashingEmbedder, MiniLMEmbedder, StaticMiniLMEmbedder, get_embedder


def test_hashing_is_deterministic_and_normalized() -> None:
    embedder = HashingEmbedder(64)
    vectors = embedder.encode(["Flood in Dhaka", "flood in dhaka", ""])
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], vectors[1])
    assert not vectors[2].any()


def test_get_embedder_names() -> None:
    assert get_embedder("hashing").name == "hashing-bow-256"
    assert get_embedder("hashing-bow-48").dim == 48
    with pytest.raises(ValueError, match="unknown embedder 'bert'.*static-minilm"):
        get_embedder("bert")


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("FORECAST_DOJO_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "forecast_dojo"


@pytest.fixture(scope="module")
def static_embedder(tmp_path_factory: pytest.TempPathFactory) -> StaticMiniLMEmbedder:
    """A static model distilled from the first 3000 vocabulary entries only (seconds, not a minute)."""
    out = tmp_path_factory.mktemp("static") / "static-minilm-64-v1"
    distill_static_minilm(out, dims=64, max_tokens=3000, progress=False)
    return StaticMiniLMEmbedder(dim=64, model_dir=str(out))


def test_static_embedder_is_a_normalized_mean_of_token_rows(static_embedder: StaticMiniLMEmbedder) -> None:
    texts = ["The government called an election.", "music film song", "", "zzqxj"]
    vectors = static_embedder.encode(texts)
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    for text, vector in zip(texts, vectors, strict=True):
        ids = static_embedder.tokenizer.encode(text, add_special_tokens=False).ids
        rows = [static_embedder.token_rows[i] for i in ids if static_embedder.token_rows[i] >= 0]
        expected = static_embedder.table[rows].mean(axis=0) if rows else np.zeros(64)
        norm = np.linalg.norm(expected)
        np.testing.assert_allclose(vector, expected / norm if norm else expected, atol=1e-5)
    assert static_embedder.name == "static-minilm-64"


def test_static_embedder_ranks_related_text_higher(static_embedder: StaticMiniLMEmbedder) -> None:
    query, related, unrelated = static_embedder.encode(
        ["government election vote", "the election and the vote of the government", "music film song"]
    )
    assert query @ related > query @ unrelated + 0.2


def test_minilm_encodes_offline_and_normalized() -> None:
    embedder = MiniLMEmbedder(max_seq_length=32)
    vectors = embedder.encode(
        ["Earthquake hits the coast", "A tremor strikes the shore", "Stock prices rise"]
    )
    assert embedder.name == "all-MiniLM-L6-v2@32" and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_minilm_leaves_torchs_thread_count_alone_under_concurrent_searches() -> None:
    """Episodes search from many threads while a local model generates in the same process: encoding
    must not change the process-wide thread count (setting it per call and putting it back raced, and
    left every later thread, the generating one included, on one core)."""
    import threading

    torch = pytest.importorskip("torch")
    embedder = MiniLMEmbedder(max_seq_length=32)

    def threads_seen_by_a_new_thread() -> int:
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        reader.start()
        reader.join()
        return seen[0]

    before = threads_seen_by_a_new_thread()

    def search(i: int) -> None:
        for j in range(10):
            embedder.encode([f"query {i} {j}"])

    searchers = [threading.Thread(target=search, args=(i,)) for i in range(6)]
    for t in searchers:
        t.start()
    for t in searchers:
        t.join(timeout=120)
    assert threads_seen_by_a_new_thread() == before


@pytest.mark.slow
def test_distilling_says_what_it_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    distill_static_minilm(tmp_path / "tiny", dims=8, max_tokens=200, progress=False)
    err = capsys.readouterr().err
    assert "static-minilm: first use, distilling the bundled all-MiniLM-L6-v2" in err
    assert str(tmp_path / "tiny") in err and "PCA to 8 dimensions" in err and "static-minilm: wrote" in err
