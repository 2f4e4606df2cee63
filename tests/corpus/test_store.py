"""The corpus directory: order, visibility prefix, resumable embedding, and manifest checks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus, embedding_text
from forecast_dojo.timeutil import to_micros

from .sample import sample_documents


class FlakyEmbedder:
    """Wraps an embedder, counts every text it encodes, and raises after ``fail_after`` calls."""

    def __init__(
        self, inner: HashingEmbedder, fail_after: int | None = None, name: str | None = None
    ) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = name or inner.name
        self.fail_after = fail_after
        self.calls = 0
        self.encoded: Counter[str] = Counter()

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1
        self.encoded.update(texts)
        return self.inner.encode(texts)


def test_rows_are_sorted_and_the_visible_set_is_a_prefix(tmp_path: Path) -> None:
    docs = sample_documents(300, n_instants=20, seed=3)
    corpus = build_corpus(reversed(docs), tmp_path / "c", HashingEmbedder(32), progress=False, shard_rows=64)
    assert np.all(np.diff(corpus.available_us) >= 0)
    instants = sorted({to_micros(d.available_at) for d in docs})
    for cutoff in instants:
        n = corpus.n_visible(cutoff)
        # Documents available exactly at the cutoff are not visible; all earlier ones are.
        assert n == sum(to_micros(d.available_at) < cutoff for d in docs)
        assert np.all(corpus.available_us[:n] < cutoff) and np.all(corpus.available_us[n:] >= cutoff)
    assert corpus.n_visible(instants[0]) == 0 and corpus.n_visible(instants[-1] + 1) == len(docs)


def test_embeddings_match_documents_and_rows_gather_without_full_load(tmp_path: Path) -> None:
    docs = sample_documents(150, seed=4)
    embedder = HashingEmbedder(32)
    corpus = build_corpus(docs, tmp_path / "c", embedder, progress=False, shard_rows=40)
    assert len(corpus.shards) == 4
    rows = np.array([149, 0, 41, 40, 39, 80])
    gathered = corpus.vectors(rows)
    texts = [embedding_text(corpus.field("title", r), corpus.text(r)) for r in rows]
    np.testing.assert_array_equal(gathered, embedder.encode(texts))
    np.testing.assert_array_equal(corpus.embeddings[rows], gathered)
    assert corpus.document(int(rows[0])).id == corpus.field("id", int(rows[0]))


def test_interrupted_build_resumes_without_embedding_anything_twice(tmp_path: Path) -> None:
    docs = sample_documents(500, seed=5)
    out = tmp_path / "c"
    # batch_size=5 -> 20 texts per encode call; shards of 70 rows -> partial shards on the way.
    first = FlakyEmbedder(HashingEmbedder(32), fail_after=9)
    with pytest.raises(KeyboardInterrupt):
        build_corpus(docs, out, first, batch_size=5, shard_rows=70, progress=False)
    assert not (out / "manifest.json").exists()
    assert list((out / "embeddings").glob("*.partial.npy")), (
        "the interrupted shard keeps its committed progress"
    )
    second = FlakyEmbedder(HashingEmbedder(32))
    corpus = build_corpus(docs, out, second, batch_size=5, shard_rows=70, progress=False)
    assert first.calls == 9 and 0 < sum(first.encoded.values()) < len(docs)
    combined = first.encoded + second.encoded
    expected = Counter(embedding_text(d.title, d.text) for d in docs)
    assert combined == expected, "every text embedded exactly once across both runs"
    assert sum(second.encoded.values()) == len(docs) - sum(first.encoded.values())
    clean = build_corpus(docs, tmp_path / "clean", HashingEmbedder(32), shard_rows=70, progress=False)
    np.testing.assert_array_equal(corpus.embeddings, clean.embeddings)
    assert not list((out / "embeddings").glob("*.partial*")) and not (out / "build_state.json").exists()


def test_resume_with_another_embedder_or_other_documents_starts_over(tmp_path: Path) -> None:
    docs = sample_documents(200, seed=6)
    out = tmp_path / "c"
    with pytest.raises(KeyboardInterrupt):
        build_corpus(
            docs,
            out,
            FlakyEmbedder(HashingEmbedder(32), fail_after=3),
            batch_size=5,
            shard_rows=50,
            progress=False,
        )
    other_model = FlakyEmbedder(HashingEmbedder(32), name="another-model-32")
    corpus = build_corpus(docs, out, other_model, batch_size=5, shard_rows=50, progress=False)
    assert sum(other_model.encoded.values()) == len(docs), "vectors of a different model are never reused"
    assert corpus.embedder_name == "another-model-32"

    out2 = tmp_path / "c2"
    with pytest.raises(KeyboardInterrupt):
        build_corpus(
            docs,
            out2,
            FlakyEmbedder(HashingEmbedder(32), fail_after=3),
            batch_size=5,
            shard_rows=50,
            progress=False,
        )
    changed = sample_documents(200, seed=7)
    fresh = FlakyEmbedder(HashingEmbedder(32))
    build_corpus(changed, out2, fresh, batch_size=5, shard_rows=50, progress=False)
    assert sum(fresh.encoded.values()) == len(changed), "vectors of other documents are never reused"


def test_existing_corpus_needs_overwrite(tmp_path: Path) -> None:
    docs = sample_documents(30, seed=8)
    build_corpus(docs, tmp_path / "c", HashingEmbedder(16), progress=False)
    with pytest.raises(CorpusError, match="overwrite"):
        build_corpus(docs, tmp_path / "c", HashingEmbedder(16), progress=False)
    assert (
        len(build_corpus(docs[:10], tmp_path / "c", HashingEmbedder(16), progress=False, overwrite=True))
        == 10
    )


def test_duplicate_ids_and_empty_input_are_rejected(tmp_path: Path) -> None:
    docs = sample_documents(5, seed=9)
    with pytest.raises(CorpusError, match="duplicate document id 'doc-000000'"):
        build_corpus([*docs, docs[0]], tmp_path / "c", HashingEmbedder(16), progress=False)
    with pytest.raises(CorpusError, match="no documents"):
        build_corpus([], tmp_path / "d", HashingEmbedder(16), progress=False)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    build_corpus(
        sample_documents(120, seed=10), tmp_path / "c", HashingEmbedder(16), progress=False, shard_rows=50
    )
    return tmp_path / "c"


def _edit_manifest(path: Path, **changes: object) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(changes)
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_load_rejects_the_wrong_embedder(built: Path) -> None:
    assert Corpus.load(built, expect_embedder="hashing-bow-16").embedder_name == "hashing-bow-16"
    with pytest.raises(
        CorpusError, match="embedded with 'hashing-bow-16', but 'all-MiniLM-L6-v2@128' was expected"
    ):
        Corpus.load(built, expect_embedder="all-MiniLM-L6-v2@128")


def test_load_rejects_a_count_mismatch(built: Path) -> None:
    _edit_manifest(built, n_documents=121)
    with pytest.raises(CorpusError, match="120 documents on disk, manifest says 121"):
        Corpus.load(built)


def test_load_rejects_a_missing_file(built: Path) -> None:
    (built / "embeddings" / "shard-00001.npy").unlink()
    with pytest.raises(CorpusError, match="missing file embeddings/shard-00001.npy"):
        Corpus.load(built)


def test_load_rejects_a_hash_mismatch(built: Path) -> None:
    shard = built / "embeddings" / "shard-00002.npy"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match="shard-00002.npy does not match its sha256"):
        Corpus.load(built)
    assert len(Corpus.load(built, verify=False)) == 120  # size still matches: only hashing catches it


def test_load_rejects_changed_documents(built: Path) -> None:
    _edit_manifest(built, content_hash="0" * 64)
    with pytest.raises(CorpusError, match="content hash mismatch"):
        Corpus.load(built)


def test_load_rejects_a_missing_manifest_and_other_format(built: Path, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no manifest.json"):
        Corpus.load(tmp_path / "nowhere")
    _edit_manifest(built, format_version=99)
    with pytest.raises(CorpusError, match="corpus format 99"):
        Corpus.load(built)
