"""The corpus directory: documents sorted by ``available_at``, their embeddings, and a manifest.

Layout (format version 1)::

    corpus/
      manifest.json          counts, date range, embedder, content hash, per-file sha256, build config
      documents.parquet      id, title, text, url, source, published_at, available_at, date_source
      embeddings/shard-00000.npy ...   float32 rows, L2-normalized, in document order

Row ``i`` of the documents is row ``i`` of the concatenated embeddings. Because rows are sorted by
``available_at``, the documents visible before any cutoff are exactly a prefix ``[0, n_visible)``.
Loading verifies everything the manifest promises and fails with :class:`CorpusError` otherwise.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from forecast_dojo.corpus.embedders import Embedder
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import from_micros, iso, to_micros

CORPUS_FORMAT_VERSION = 1
SHARD_ROWS = 4096
DOCUMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("source", pa.string()),
        ("published_at", pa.timestamp("us", tz="UTC")),
        ("available_at", pa.timestamp("us", tz="UTC")),
        ("date_source", pa.string()),
    ]
)


class CorpusError(RuntimeError):
    """A corpus directory that is missing, corrupted, or does not match what the caller expects."""


def embedding_text(title: str, text: str) -> str:
    """What gets embedded for a document: its title (context headers) then its text."""
    return f"{title}\n{text}" if title else text


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_hash(ids: Iterable[str], available_us: Iterable[int], titles: Iterable[str], texts: Iterable[str]) -> str:
    """Order-sensitive hash of what a corpus says and when: independent of parquet encoding details."""
    digest = hashlib.sha256()
    for doc_id, avail, title, text in zip(ids, available_us, titles, texts):
        for part in (doc_id, str(int(avail)), title or "", text):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


def _documents_table(documents: list[Document]) -> pa.Table:
    columns: dict[str, list[Any]] = {name: [] for name in DOCUMENT_SCHEMA.names}
    for doc in documents:
        columns["id"].append(doc.id)
        columns["title"].append(doc.title)
        columns["text"].append(doc.text)
        columns["url"].append(doc.url)
        columns["source"].append(doc.source)
        columns["published_at"].append(to_micros(doc.published_at))
        columns["available_at"].append(to_micros(doc.available_at))
        columns["date_source"].append(doc.date_source)
    return pa.Table.from_pydict(columns, schema=DOCUMENT_SCHEMA)


def build_corpus(
    documents: Iterable[Document],
    out_dir: str | Path,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    build_config: dict[str, Any] | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> Corpus:
    """Sort, store, embed and seal a corpus directory; returns it loaded.

    Embedding runs shard by shard: a shard already on disk with the right row count is kept, so an
    interrupted build resumes where it stopped. The manifest is written last, so a directory without
    one is never mistaken for a finished corpus.
    """
    out = Path(out_dir)
    docs = sorted(documents, key=lambda d: (to_micros(d.available_at), d.id))
    if not docs:
        raise CorpusError("cannot build a corpus with no documents")
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise CorpusError(f"duplicate document id {doc.id!r}")
        seen.add(doc.id)
    if (out / "manifest.json").exists():
        if not overwrite:
            raise CorpusError(f"{out} already holds a corpus; pass overwrite=True to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    table = _documents_table(docs)
    doc_path = out / "documents.parquet"
    # A resumed build must embed the same documents: compare with what a previous attempt stored.
    if doc_path.exists() and not pq.read_table(doc_path).equals(table):
        shutil.rmtree(out / "embeddings", ignore_errors=True)
    pq.write_table(table, doc_path)

    texts = [embedding_text(d.title, d.text) for d in docs]
    shard_dir = out / "embeddings"
    shard_dir.mkdir(exist_ok=True)
    n_shards = (len(texts) + SHARD_ROWS - 1) // SHARD_ROWS
    files: dict[str, dict[str, Any]] = {}
    bar = tqdm(total=len(texts), desc=f"embedding ({embedder.name})", unit="doc", disable=not progress)
    for shard in range(n_shards):
        lo, hi = shard * SHARD_ROWS, min(len(texts), (shard + 1) * SHARD_ROWS)
        path = shard_dir / f"shard-{shard:05d}.npy"
        existing = None
        if path.exists():
            try:
                existing = np.load(path, mmap_mode="r")
            except (ValueError, OSError):
                existing = None
        if existing is None or existing.shape != (hi - lo, embedder.dim):
            vectors = embedder.encode(texts[lo:hi], batch_size=batch_size)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32))
            tmp.replace(path)
        files[f"embeddings/{path.name}"] = {"rows": hi - lo}
        bar.update(hi - lo)
    bar.close()

    available = table.column("available_at").cast(pa.int64()).to_numpy()
    files["documents.parquet"] = {"rows": len(docs)}
    for rel, meta in files.items():
        meta["sha256"] = _sha256(out / rel)
        meta["bytes"] = (out / rel).stat().st_size
    manifest = {
        "format_version": CORPUS_FORMAT_VERSION,
        "n_documents": len(docs),
        "available_from": iso(from_micros(int(available[0]))),
        "available_to": iso(from_micros(int(available[-1]))),
        "embedder": {"name": embedder.name, "dim": embedder.dim},
        "content_hash": content_hash(
            table.column("id").to_pylist(), available, table.column("title").to_pylist(), table.column("text").to_pylist()
        ),
        "files": files,
        "build": build_config or {},
    }
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    tmp.replace(out / "manifest.json")
    return Corpus.load(out)


@dataclass
class Corpus:
    """A loaded corpus: the document table, ``available_at`` as int64 micros, and the embedding matrix."""

    path: Path
    manifest: dict[str, Any]
    table: pa.Table
    available_us: np.ndarray
    embeddings: np.ndarray

    @classmethod
    def load(cls, path: str | Path, *, expect_embedder: str | None = None, verify: bool = True) -> Corpus:
        """Open a corpus directory, checking manifest, files, counts, hashes, order and embedder."""
        path = Path(path)
        manifest_path = path / "manifest.json"
        if not manifest_path.exists():
            raise CorpusError(f"{path}: no manifest.json (not a corpus directory, or an unfinished build)")
        try:
            manifest = json.loads(manifest_path.read_text())
        except json.JSONDecodeError as err:
            raise CorpusError(f"{manifest_path}: not valid JSON ({err})") from err
        if manifest.get("format_version") != CORPUS_FORMAT_VERSION:
            raise CorpusError(f"{path}: corpus format {manifest.get('format_version')} (this library reads {CORPUS_FORMAT_VERSION})")
        embedder = manifest.get("embedder", {})
        if expect_embedder is not None and embedder.get("name") != expect_embedder:
            raise CorpusError(f"{path}: embedded with {embedder.get('name')!r}, but {expect_embedder!r} was expected")
        files = manifest.get("files", {})
        for rel, meta in files.items():
            file = path / rel
            if not file.exists():
                raise CorpusError(f"{path}: missing file {rel}")
            if file.stat().st_size != meta.get("bytes"):
                raise CorpusError(f"{path}: {rel} has {file.stat().st_size} bytes, manifest says {meta.get('bytes')}")
            if verify and _sha256(file) != meta.get("sha256"):
                raise CorpusError(f"{path}: {rel} does not match its sha256 in the manifest (corrupted or edited)")
        table = pq.read_table(path / "documents.parquet")
        if table.schema.remove_metadata() != DOCUMENT_SCHEMA:
            raise CorpusError(f"{path}: documents.parquet has schema {table.schema}, expected {DOCUMENT_SCHEMA}")
        n = manifest.get("n_documents")
        if table.num_rows != n:
            raise CorpusError(f"{path}: {table.num_rows} documents on disk, manifest says {n}")
        available = table.column("available_at").cast(pa.int64()).to_numpy().astype(np.int64)
        if n and np.any(np.diff(available) < 0):
            raise CorpusError(f"{path}: documents are not sorted by available_at")
        shards = sorted(rel for rel in files if rel.startswith("embeddings/"))
        arrays = [np.load(path / rel, mmap_mode="r") for rel in shards]
        embeddings = np.concatenate(arrays) if arrays else np.zeros((0, embedder.get("dim", 0)), np.float32)
        if embeddings.shape != (n, embedder.get("dim")):
            raise CorpusError(f"{path}: embeddings have shape {embeddings.shape}, expected ({n}, {embedder.get('dim')})")
        corpus = cls(path=path, manifest=manifest, table=table, available_us=available, embeddings=np.ascontiguousarray(embeddings, dtype=np.float32))
        if verify:
            actual = content_hash(table.column("id").to_pylist(), available, table.column("title").to_pylist(), table.column("text").to_pylist())
            if actual != manifest.get("content_hash"):
                raise CorpusError(f"{path}: content hash mismatch (documents changed after the build)")
        ids = table.column("id").to_pylist()
        corpus._row_of = {doc_id: row for row, doc_id in enumerate(ids)}
        if len(corpus._row_of) != n:
            raise CorpusError(f"{path}: duplicate document ids")
        corpus._columns = {name: table.column(name).to_pylist() for name in ("id", "title", "url", "source", "date_source")}
        return corpus

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def embedder_name(self) -> str:
        return self.manifest["embedder"]["name"]

    @property
    def content_hash(self) -> str:
        return self.manifest["content_hash"]

    def n_visible(self, cutoff_us: int) -> int:
        """How many documents are available strictly before the cutoff: the visible prefix length."""
        return int(np.searchsorted(self.available_us, int(cutoff_us), side="left"))

    def row_of(self, doc_id: str) -> int | None:
        return self._row_of.get(doc_id)

    def field(self, name: str, row: int) -> Any:
        """A metadata field of one row, from an in-memory column (fast path for result listings)."""
        return self._columns[name][row]

    def text(self, row: int) -> str:
        return self.table.column("text")[row].as_py()

    def document(self, row: int) -> Document:
        record = self.table.slice(row, 1).to_pylist()[0]
        return Document(
            id=record["id"],
            title=record["title"] or "",
            text=record["text"],
            url=record["url"],
            source=record["source"],
            published_at=record["published_at"],
            available_at=record["available_at"],
            date_source=record["date_source"],
        )

    def available_at(self, row: int) -> datetime:
        return from_micros(int(self.available_us[row]))
