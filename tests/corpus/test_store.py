"""The corpus directory: order, visibility prefix, resumable embedding, and manifest checks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forecast_dojo.cli import main as cli_main
from forecast_dojo.corpus import store
from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.retrieval import DenseRetriever, build_indexes, make_retriever
from forecast_dojo.corpus.store import (
    DOCUMENT_SCHEMA,
    Corpus,
    CorpusError,
    CorpusWriter,
    build_corpus,
    embedding_text,
    migrate_corpus,
)
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


# --- format 2: memory-mapped, text on demand, sealed manifest -----------------------------------


def _big_table(n: int, text_bytes: int, seed: int = 0) -> tuple[pa.Table, np.ndarray]:
    """A document table with long texts and random unit vectors (no embedding: fast to write)."""
    rng = np.random.default_rng(seed)
    words = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"])
    base = to_micros(datetime(2024, 1, 1, tzinfo=UTC))
    texts = [" ".join(rng.choice(words, size=text_bytes // 6)) for _ in range(n)]
    table = pa.Table.from_pydict(
        {
            "id": [f"big-{i:06d}" for i in range(n)],
            "title": [f"Title {i}" for i in range(n)],
            "text": texts,
            "url": [f"https://example.org/{i}" for i in range(n)],
            "source": ["example"] * n,
            "published_at": [base + 60_000_000 * i for i in range(n)],
            "available_at": [base + 60_000_000 * i for i in range(n)],
            "date_source": ["published"] * n,
        },
        schema=DOCUMENT_SCHEMA,
    )
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    return table, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.slow
def test_opening_reads_no_text_until_asked(tmp_path: Path) -> None:
    table, vectors = _big_table(3000, 40_000)
    writer = CorpusWriter(tmp_path / "big", embedder_name="random-16", dim=16, shard_rows=1000)
    writer.add(table, vectors)
    writer.finish(verify=False)
    small = CorpusWriter(tmp_path / "small", embedder_name="random-16", dim=16)
    small.add(table.slice(0, 20), vectors[:20])
    small.finish()
    text_bytes = sum(len(t) for t in table.column("text").to_pylist())
    assert text_bytes > 100 << 20
    # A fresh process, so nothing of the build is mapped or allocated already.
    script = f"""
import json
from pathlib import Path
from forecast_dojo.corpus.store import Corpus
def rss():
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {{k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssFile")}}
def grew(before):
    after = rss()
    return {{k: after[k] - before[k] for k in after}}
warm = Corpus.load({str(tmp_path / "small")!r})  # the libraries' lazy initialization, paid once
warm.text(3), warm.row_of("big-000003")
before = rss()
corpus = Corpus.load({str(tmp_path / "big")!r}, verify=False)
opened = grew(before)
before = rss()
Corpus.load({str(tmp_path / "big")!r})
checked = grew(before)
before = rss()
text = corpus.text(1234)
row = corpus.row_of("big-002999")
read = grew(before)
print(json.dumps({{"open": opened, "checked": checked, "read": read, "len": len(text), "row": row}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["row"] == 2999 and measured["len"] == len(table.column("text")[1234].as_py())
    # The text column is >100 MB. Opening maps it and reads none of it...
    assert measured["open"]["RssAnon"] < 4 << 20 and measured["open"]["RssFile"] < 4 << 20, measured
    # ...the default checks re-hash 16 random rows (the kernel maps page-cache folios of up to 2 MB
    # around each; shared, file-backed)...
    assert measured["checked"]["RssAnon"] < 4 << 20 and measured["checked"]["RssFile"] < 40 << 20, measured
    # ...and a read maps only what it touches.
    assert measured["read"]["RssAnon"] < 4 << 20 and measured["read"]["RssFile"] < 8 << 20, measured


def test_writer_streams_float16_vectors_and_rows_read_back(tmp_path: Path) -> None:
    table, vectors = _big_table(300, 200, seed=1)
    writer = CorpusWriter(
        tmp_path / "c", embedder_name="random-16", dim=16, shard_rows=128, vector_dtype="float16"
    )
    writer.add(table.slice(0, 100), vectors[:100])
    writer.add(table.slice(100), vectors[100:])
    corpus = writer.finish()
    assert corpus.manifest["vector_dtype"] == "float16" and [s.shape[0] for s in corpus.shards] == [
        128,
        128,
        44,
    ]
    assert corpus.embeddings[100:200].dtype == np.float32
    np.testing.assert_allclose(
        corpus.embeddings[np.array([299, 0, 127, 128])], vectors[[299, 0, 127, 128]], atol=1e-3
    )
    np.testing.assert_allclose(corpus.embeddings[120:140], vectors[120:140], atol=1e-3)
    assert corpus.document(150).text == table.column("text")[150].as_py()
    assert corpus.row_of("big-000150") == 150 and corpus.row_of("big-9") is None and corpus.row_of(3) is None
    with pytest.raises(CorpusError, match="available_at order"):
        later = CorpusWriter(tmp_path / "d", embedder_name="random-16", dim=16)
        later.add(table.slice(100, 10), vectors[100:110])
        later.add(table.slice(0, 10), vectors[:10])


def test_swapping_the_embedder_name_fails_at_open(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    manifest["embedder"]["name"] = "static-minilm-16"  # another embedder of the same dimension
    (built / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="content hash mismatch"):
        Corpus.load(built)


class _Permuted:
    """Another model under the same name and dimension: the hashing embedder with shuffled dims."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(16)
        self.name, self.dim = self.inner.name, 16

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        return self.inner.encode(texts)[:, ::-1].copy()


def test_a_different_model_under_the_same_name_fails_the_probe(built: Path) -> None:
    corpus = Corpus.load(built)
    corpus.check_embedder(HashingEmbedder(16))
    DenseRetriever(corpus, HashingEmbedder(16))
    with pytest.raises(CorpusError, match="is not the model this corpus was embedded with"):
        DenseRetriever(corpus, _Permuted())
    with pytest.raises(CorpusError, match="embedded with 'hashing-bow-16', not 'hashing-bow-32'"):
        corpus.check_embedder(HashingEmbedder(32))


def test_corrupted_text_is_caught_by_sampled_rows_and_by_verify(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = Corpus.load(built)
    row = 77
    needle = corpus.text(row)[:40].encode()
    data = bytearray((built / "documents.arrow").read_bytes())
    at = data.index(needle)
    data[at] = ord("#") if data[at] != ord("#") else ord("%")
    (built / "documents.arrow").write_bytes(bytes(data))
    with pytest.raises(CorpusError, match="documents.arrow does not match its sha256"):
        Corpus.load(built)
    # A large file is not hashed at open (size only): the row digests still catch the edit.
    monkeypatch.setattr(store, "SMALL_FILE_BYTES", 0)
    with pytest.raises(CorpusError, match=f"row {row} does not match its digest"):
        Corpus.load(built, verify=False)._check_rows([row])
    with pytest.raises(CorpusError, match="documents.arrow does not match its sha256"):
        Corpus.load(built, verify=False).verify(progress=False)
    assert cli_main(["corpus", "verify", str(built), "--no-progress"]) == 2


def test_truncated_files_fail_clearly(built: Path) -> None:
    assert cli_main(["corpus", "verify", str(built), "--no-progress"]) == 0
    for rel in ("documents.arrow", "id_order.npy", "embeddings/shard-00000.npy"):
        original = (built / rel).read_bytes()
        (built / rel).write_bytes(original[: len(original) // 2])
        with pytest.raises(CorpusError, match=f"{rel} has \\d+ bytes, manifest says"):
            Corpus.load(built, verify=False)
        (built / rel).write_bytes(original)
    Corpus.load(built)


def _write_format_1(docs: list, out: Path, embedder: HashingEmbedder, shard_rows: int) -> None:
    """The directory layout the library wrote before format 2 (parquet, unsealed manifest)."""
    out.mkdir(parents=True)
    docs = sorted(docs, key=lambda d: (to_micros(d.available_at), d.id))
    table = store._documents_table(docs)
    pq.write_table(table, out / "documents.parquet")
    (out / "embeddings").mkdir()
    files = {"documents.parquet": {"rows": len(docs)}}
    for lo in range(0, len(docs), shard_rows):
        rel = f"embeddings/shard-{lo // shard_rows:05d}.npy"
        chunk = docs[lo : lo + shard_rows]
        np.save(out / rel, embedder.encode([embedding_text(d.title, d.text) for d in chunk]))
        files[rel] = {"rows": len(chunk)}
    for rel, meta in files.items():
        meta["sha256"] = store._sha256(out / rel)
        meta["bytes"] = (out / rel).stat().st_size
    available = [to_micros(d.available_at) for d in docs]
    manifest = {
        "format_version": 1,
        "n_documents": len(docs),
        "embedder": {"name": embedder.name, "dim": embedder.dim},
        "content_hash": store.content_hash(
            [d.id for d in docs], available, [d.title for d in docs], [d.text for d in docs]
        ),
        "files": files,
        "shard_rows": shard_rows,
        "indexes": {},
        "build": {},
    }
    (out / "manifest.json").write_text(json.dumps(manifest))


def test_format_1_corpora_still_load_and_migrate_in_place(tmp_path: Path) -> None:
    docs = sample_documents(300, seed=14)
    embedder = HashingEmbedder(16)
    _write_format_1(docs, tmp_path / "old", embedder, shard_rows=128)
    new = build_corpus(docs, tmp_path / "new", embedder, progress=False, shard_rows=128)
    with pytest.warns(UserWarning, match="corpus migrate"):
        old = Corpus.load(tmp_path / "old")
    assert old.format_version == 1 and new.format_version == 2
    build_indexes(old, dense="ivf-flat", nlist=8, progress=False)
    queries = ["election results", "storm warning coast", "market shares fall"]

    def answers(corpus: Corpus) -> list:
        dense = make_retriever("dense", corpus, embedder, index="ivf-flat")
        bm25 = make_retriever("bm25", corpus)
        out = []
        for query in queries:
            for n_visible in (50, 200, 300):
                for retriever in (dense, bm25):
                    out.append(
                        [
                            (corpus.field("id", r), round(s, 5))
                            for r, s in retriever.search(query, n_visible, 10)
                        ]
                    )
        return out

    before = answers(old)
    assert [old.document(r) for r in (0, 150, 299)] == [new.document(r) for r in (0, 150, 299)]
    np.testing.assert_array_equal(np.asarray(old.embeddings), np.asarray(new.embeddings))
    migrated = migrate_corpus(tmp_path / "old", progress=False)
    assert migrated.format_version == 2 and not (tmp_path / "old" / "documents.parquet").exists()
    assert migrated.manifest["documents_hash"] == new.manifest["documents_hash"]
    assert answers(Corpus.load(tmp_path / "old")) == before
    with pytest.raises(CorpusError, match="already format 2"):
        migrate_corpus(tmp_path / "old", progress=False)


# --- the seal covers what the gateway decides with (issue 18) ----------------------------------


def _edit_available_us(
    path: Path, *, fix_checksum: bool = True, reseal: bool = False, redigest: bool = False
):
    """The reproducer: move every interior document's availability to the first instant (so they are
    visible at any cutoff), keep the first and last (so the manifest's date range still matches), and
    optionally update the manifest the way someone covering the edit would."""
    available = np.load(path / "available_us.npy")
    edited = available.copy()
    edited[1:-1] = available[0]
    np.save(path / "available_us.npy", edited)
    manifest = json.loads((path / "manifest.json").read_text())
    if fix_checksum:
        manifest["files"]["available_us.npy"] = {
            "bytes": (path / "available_us.npy").stat().st_size,
            "sha256": store._sha256(path / "available_us.npy"),
            "rows": len(edited),
        }
    if redigest:
        manifest["arrays"]["available_us.npy"] = store.array_digest(edited)
    if reseal:
        manifest["content_hash"] = store.seal_hash(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))
    return available, edited


@pytest.mark.parametrize("large_files", [False, True], ids=["hashed-at-open", "over-32MiB"])
def test_editing_available_us_and_its_checksum_is_refused_at_open(
    built: Path, monkeypatch: pytest.MonkeyPatch, large_files: bool
) -> None:
    if large_files:  # as if every file were over 32 MiB: no sha256 at open, only the sealed digests
        monkeypatch.setattr(store, "SMALL_FILE_BYTES", 0)
    pristine = (built / "manifest.json").read_text(), (built / "available_us.npy").read_bytes()
    available, _ = _edit_available_us(built)
    with pytest.raises(CorpusError, match="content hash mismatch: .*files' sizes and sha256"):
        Corpus.load(built)
    # Re-sealing the edited manifest too: the sealed digest of available_us no longer matches.
    (built / "manifest.json").write_text(pristine[0])
    _edit_available_us(built, reseal=True)
    with pytest.raises(CorpusError, match="available_us.npy does not match its sealed digest"):
        Corpus.load(built)
    # And with the digest recomputed as well: the arrays disagree with the (row-hashed) documents.
    (built / "manifest.json").write_text(pristine[0])
    _edit_available_us(built, reseal=True, redigest=True)
    with pytest.raises(
        CorpusError, match="available_us.npy/published_us.npy differ from the documents at row"
    ):
        Corpus.load(built)
    with pytest.raises(CorpusError, match="available_us/published_us differ from the documents"):
        Corpus.load(built, verify=False).verify(progress=False)
    # The edit mattered: at the first instant, the edited arrays show every document but the last.
    assert Corpus.load(built, verify=False).n_visible(int(available[0]) + 1) == len(available) - 1
    (built / "manifest.json").write_text(pristine[0])
    (built / "available_us.npy").write_bytes(pristine[1])
    assert Corpus.load(built).n_visible(int(available[0]) + 1) < len(available) // 2


def test_editing_id_order_is_refused_at_open(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "SMALL_FILE_BYTES", 0)
    order = np.load(built / "id_order.npy")
    order[[3, 70]] = order[[70, 3]]  # two rows swapped: row_of would miss both (a hidden document shows)
    np.save(built / "id_order.npy", order)
    manifest = json.loads((built / "manifest.json").read_text())
    manifest["files"]["id_order.npy"]["sha256"] = store._sha256(built / "id_order.npy")
    manifest["content_hash"] = store.seal_hash(manifest)
    (built / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="id_order.npy does not match its sealed digest"):
        Corpus.load(built)


def test_an_unedited_corpus_opens_without_a_warning(built: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corpus = Corpus.load(built)
    manifest = corpus.manifest
    assert manifest["seal_version"] == store.SEAL_VERSION
    assert set(manifest["arrays"]) == set(store.ARRAY_FILES)
    assert manifest["content_hash"] == store.seal_hash(manifest)


def test_array_digest_sums_see_every_element_and_its_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "DIGEST_SAMPLE", 2)  # the sample sees only the first and last element
    values = np.arange(10, 300_010, dtype=np.int64) * 1_000_003
    digest = store.array_digest(values)
    changed = values.copy()
    changed[150_001] -= 86_400_000_000  # one document a day earlier
    swapped = values.copy()
    swapped[[5, 200_000]] = swapped[[200_000, 5]]  # same values, other rows
    assert store.array_digest(changed)["sum"] != digest["sum"]
    assert store.array_digest(swapped)["sum"] == digest["sum"]
    assert store.array_digest(swapped)["weighted_sum"] != digest["weighted_sum"]
    assert store.array_digest(values.copy()) == digest
    assert set(store.array_digest(values, full=False)) == {"sample_sha256"}


def _as_seal_1(path: Path) -> None:
    """Rewrite a manifest the way corpora were sealed before issue 18 (files and arrays outside the seal)."""
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["seal_version"], manifest["arrays"]
    old = manifest["content_hash"]
    manifest["content_hash"] = store.seal_hash(manifest)
    for entry in manifest["indexes"].values():
        assert entry["content_hash"] == old
        entry["content_hash"] = manifest["content_hash"]
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_seal_1_corpora_open_with_a_warning_and_migrate_to_seal_2(built: Path) -> None:
    build_indexes(Corpus.load(built), dense="ivf-flat", nlist=4, progress=False)
    _as_seal_1(built)
    with pytest.warns(UserWarning, match="sealed before the files' checksums were .*corpus migrate"):
        old = Corpus.load(built)
    assert "seal_version" not in old.manifest and len(old) == 120
    migrated = migrate_corpus(built, progress=False)
    assert migrated.manifest["seal_version"] == store.SEAL_VERSION
    assert migrated.content_hash != old.content_hash
    assert migrated.manifest["migrated_from"] == {"seal_version": 1, "content_hash": old.content_hash}
    assert make_retriever("dense", migrated, HashingEmbedder(16), index="ivf-flat").search("storm", 120, 3)
    with pytest.raises(CorpusError, match="already format 2, seal 2"):
        migrate_corpus(built, progress=False)


def test_a_seal_1_corpus_with_edited_available_us_fails_at_open_and_at_migrate(built: Path) -> None:
    _as_seal_1(built)
    _edit_available_us(built, reseal=True)  # checksums are outside seal 1: it stays valid
    with (
        pytest.warns(UserWarning, match="seal 1"),
        pytest.raises(CorpusError, match="differ from the documents"),
    ):
        Corpus.load(built)
    with pytest.raises(CorpusError, match="differ from the documents"):
        migrate_corpus(built, progress=False)
