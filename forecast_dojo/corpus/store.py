"""The corpus directory: documents sorted by ``available_at``, their embeddings, and a manifest.

Layout (format version 1)::

    corpus/
      manifest.json          counts, date range, embedder, content hash, per-file sha256, build config
      documents.parquet      id, title, text, url, source, published_at, available_at, date_source
      embeddings/shard-00000.npy ...   float32 rows, L2-normalized, in document order
      index/                 optional search indexes (dense IVF, BM25), each recorded under
                             ``manifest["indexes"]`` with its files' sha256 and the corpus it indexes

Row ``i`` of the documents is row ``i`` of the concatenated embeddings. Because rows are sorted by
``available_at``, the documents visible before any cutoff are exactly a prefix ``[0, n_visible)``.
Loading verifies everything the manifest promises and fails with :class:`CorpusError` otherwise.

Embedding is resumable: each shard is filled batch by batch in ``shard-N.partial.npy`` (a memory
map) whose progress is committed to ``shard-N.partial.json`` after every batch, and renamed to
``shard-N.npy`` once full. ``build_state.json`` pins the documents (content hash), embedder and
shard size that the files on disk belong to, so a restarted build keeps exactly the batches already
done and never reuses vectors from different documents or a different model.
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
from forecast_dojo.errors import ForecastDojoError
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


class CorpusError(ForecastDojoError, RuntimeError):
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


def content_hash(
    ids: Iterable[str], available_us: Iterable[int], titles: Iterable[str], texts: Iterable[str]
) -> str:
    """Order-sensitive hash of what a corpus says and when: independent of parquet encoding details."""
    digest = hashlib.sha256()
    for doc_id, avail, title, text in zip(ids, available_us, titles, texts, strict=True):
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
    shard_rows: int = SHARD_ROWS,
) -> Corpus:
    """Sort, store, embed and seal a corpus directory; returns it loaded.

    Resumable: rerunning the same build after an interruption (exception, kill, power loss) keeps
    every batch already committed to disk and embeds only the rest. The manifest is written last, so
    a directory without one is never mistaken for a finished corpus. Search indexes are built
    afterwards (``forecast_dojo.corpus.retrieval.build_indexes``).
    """
    if batch_size <= 0 or shard_rows <= 0:
        raise ValueError(f"batch_size and shard_rows must be positive, got {batch_size} and {shard_rows}")
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
    available = table.column("available_at").cast(pa.int64()).to_numpy()
    ids, titles, texts_raw = (table.column(c).to_pylist() for c in ("id", "title", "text"))
    corpus_hash = content_hash(ids, available, titles, texts_raw)
    state = {
        "content_hash": corpus_hash,
        "embedder": {"name": embedder.name, "dim": embedder.dim},
        "shard_rows": shard_rows,
    }
    state_path = out / "build_state.json"
    shard_dir = out / "embeddings"
    previous = _read_json(state_path)
    if previous != state:
        # Files from an attempt with other documents, another model or another shard size: start over.
        shutil.rmtree(shard_dir, ignore_errors=True)
        _write_json_atomic(state_path, state)
    shard_dir.mkdir(exist_ok=True)
    doc_path = out / "documents.parquet"
    pq.write_table(table, doc_path)

    texts = [embedding_text(d.title, d.text) for d in docs]
    n_shards = (len(texts) + shard_rows - 1) // shard_rows
    files: dict[str, dict[str, Any]] = {}
    bar = tqdm(
        total=len(texts),
        desc=f"embedding ({embedder.name})",
        unit="doc",
        disable=not progress,
        smoothing=0.05,
    )
    for shard in range(n_shards):
        lo, hi = shard * shard_rows, min(len(texts), (shard + 1) * shard_rows)
        path = shard_dir / f"shard-{shard:05d}.npy"
        _embed_shard(path, texts[lo:hi], embedder, batch_size, bar)
        files[f"embeddings/{path.name}"] = {"rows": hi - lo}
    bar.close()

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
        "content_hash": corpus_hash,
        "files": files,
        "shard_rows": shard_rows,
        "indexes": {},
        "build": build_config or {},
    }
    _write_json_atomic(out / "manifest.json", manifest)
    state_path.unlink(missing_ok=True)
    return Corpus.load(out)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_json_atomic(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True))
    tmp.replace(path)


def _embed_shard(path: Path, texts: list[str], embedder: Embedder, batch_size: int, bar: tqdm) -> None:
    """Fill one shard, resuming from its committed partial progress; the finished shard is renamed in."""
    rows, dim = len(texts), embedder.dim
    if path.exists():
        try:
            if np.load(path, mmap_mode="r").shape == (rows, dim):
                bar.update(rows)
                return
        except (ValueError, OSError):
            pass
        path.unlink()
    partial = path.with_name(path.stem + ".partial.npy")
    progress_path = path.with_name(path.stem + ".partial.json")
    done = 0
    matrix = None
    committed = _read_json(progress_path)
    if partial.exists() and isinstance(committed, dict) and committed.get("shape") == [rows, dim]:
        try:
            matrix = np.lib.format.open_memmap(partial, mode="r+")
            if matrix.shape == (rows, dim) and matrix.dtype == np.float32:
                done = min(int(committed.get("done", 0)), rows)
            else:
                matrix = None
        except (ValueError, OSError):
            matrix = None
    if matrix is None:
        done = 0
        matrix = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(rows, dim))
        _write_json_atomic(progress_path, {"shape": [rows, dim], "done": 0})
    bar.update(done)
    # Bigger calls amortize the model's overhead; each call's result is committed before the next.
    step = batch_size * 4
    for lo in range(done, rows, step):
        hi = min(rows, lo + step)
        vectors = np.asarray(embedder.encode(texts[lo:hi], batch_size=batch_size), dtype=np.float32)
        if vectors.shape != (hi - lo, dim):
            raise CorpusError(
                f"embedder {embedder.name!r} returned shape {vectors.shape} for {hi - lo} texts (dim {dim})"
            )
        matrix[lo:hi] = vectors
        matrix.flush()
        _write_json_atomic(progress_path, {"shape": [rows, dim], "done": hi})
        bar.update(hi - lo)
    del matrix
    partial.replace(path)
    progress_path.unlink(missing_ok=True)


@dataclass
class Corpus:
    """A loaded corpus: the document table, ``available_at`` as int64 micros, and the embedding shards.

    Shards stay memory-mapped; :attr:`embeddings` concatenates them in RAM on first use, while
    :meth:`vectors` gathers single rows without loading the whole matrix (the memory-bound path).
    """

    path: Path
    manifest: dict[str, Any]
    table: pa.Table
    available_us: np.ndarray
    shards: list[np.ndarray]

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
            raise CorpusError(
                f"{path}: corpus format {manifest.get('format_version')} (this library reads {CORPUS_FORMAT_VERSION})"
            )
        embedder = manifest.get("embedder", {})
        if expect_embedder is not None and embedder.get("name") != expect_embedder:
            raise CorpusError(
                f"{path}: embedded with {embedder.get('name')!r}, but {expect_embedder!r} was expected"
            )
        files = manifest.get("files", {})
        _check_files(path, files, verify=verify)
        table = pq.read_table(path / "documents.parquet")
        if table.schema.remove_metadata() != DOCUMENT_SCHEMA:
            raise CorpusError(
                f"{path}: documents.parquet has schema {table.schema}, expected {DOCUMENT_SCHEMA}"
            )
        n = manifest.get("n_documents")
        if table.num_rows != n:
            raise CorpusError(f"{path}: {table.num_rows} documents on disk, manifest says {n}")
        available = table.column("available_at").cast(pa.int64()).to_numpy().astype(np.int64)
        if n and np.any(np.diff(available) < 0):
            raise CorpusError(f"{path}: documents are not sorted by available_at")
        shard_names = sorted(rel for rel in files if rel.startswith("embeddings/"))
        shards = [np.load(path / rel, mmap_mode="r") for rel in shard_names]
        dim = embedder.get("dim")
        for rel, shard in zip(shard_names, shards, strict=True):
            if shard.ndim != 2 or shard.shape[1] != dim or shard.dtype != np.float32:
                raise CorpusError(
                    f"{path}: {rel} has shape {shard.shape} {shard.dtype}, expected (rows, {dim}) float32"
                )
        total = sum(shard.shape[0] for shard in shards)
        if total != n:
            raise CorpusError(f"{path}: embeddings have {total} rows, expected {n} (one per document)")
        corpus = cls(path=path, manifest=manifest, table=table, available_us=available, shards=shards)
        if verify:
            actual = content_hash(
                table.column("id").to_pylist(),
                available,
                table.column("title").to_pylist(),
                table.column("text").to_pylist(),
            )
            if actual != manifest.get("content_hash"):
                raise CorpusError(f"{path}: content hash mismatch (documents changed after the build)")
        ids = table.column("id").to_pylist()
        corpus._row_of = {doc_id: row for row, doc_id in enumerate(ids)}
        if len(corpus._row_of) != n:
            raise CorpusError(f"{path}: duplicate document ids")
        corpus._columns = {
            name: table.column(name).to_pylist() for name in ("id", "title", "url", "source", "date_source")
        }
        corpus._shard_starts = np.cumsum([0] + [shard.shape[0] for shard in shards]).astype(np.int64)
        corpus._embeddings = None
        return corpus

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def embeddings(self) -> np.ndarray:
        """The whole (n, dim) float32 matrix in RAM (loaded once, on first use)."""
        if self._embeddings is None:
            if len(self.shards) == 1:
                self._embeddings = np.ascontiguousarray(self.shards[0], dtype=np.float32)
            else:
                self._embeddings = np.concatenate(self.shards).astype(np.float32, copy=False)
        return self._embeddings

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The embeddings of some rows, gathered from the memory-mapped shards (no full load)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self._embeddings is not None:
            return self._embeddings[rows]
        out = np.empty((rows.size, self.dim), dtype=np.float32)
        which = np.searchsorted(self._shard_starts, rows, side="right") - 1
        for shard in np.unique(which):
            mask = which == shard
            out[mask] = self.shards[shard][rows[mask] - self._shard_starts[shard]]
        return out

    @property
    def dim(self) -> int:
        return int(self.manifest["embedder"]["dim"])

    @property
    def embedder_name(self) -> str:
        return self.manifest["embedder"]["name"]

    @property
    def content_hash(self) -> str:
        return self.manifest["content_hash"]

    @property
    def index_dir(self) -> Path:
        """Where search indexes of this corpus live (created on demand)."""
        return self.path / "index"

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

    def texts(self) -> list[str]:
        """What each row's embedding was computed from (title, then text), in row order."""
        return [
            embedding_text(t or "", x)
            for t, x in zip(self._columns["title"], self.table.column("text").to_pylist(), strict=True)
        ]

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

    # --- search indexes -------------------------------------------------------------------------

    def register_index(self, name: str, kind: str, files: list[str], params: dict[str, Any]) -> None:
        """Record an index written under :attr:`index_dir` in the manifest, pinned to this corpus."""
        entry = {
            "kind": kind,
            "params": params,
            "n_documents": len(self),
            "content_hash": self.content_hash,
            "embedder": self.embedder_name,
            "files": {},
        }
        for rel in files:
            file = self.path / rel
            entry["files"][rel] = {"bytes": file.stat().st_size, "sha256": _sha256(file)}
        on_disk = _read_json(self.path / "manifest.json")
        if not isinstance(on_disk, dict) or on_disk.get("content_hash") != self.content_hash:
            raise CorpusError(f"{self.path}: manifest on disk no longer describes this corpus; reload it")
        on_disk.setdefault("indexes", {})[name] = entry
        _write_json_atomic(self.path / "manifest.json", on_disk)
        self.manifest = on_disk

    def index_entry(self, name: str, *, verify: bool = True) -> dict[str, Any]:
        """The manifest entry of a persisted index, after checking it indexes exactly this corpus."""
        entry = self.manifest.get("indexes", {}).get(name)
        if entry is None:
            known = sorted(self.manifest.get("indexes", {}))
            raise CorpusError(f"{self.path}: no index {name!r} in the manifest (built: {known})")
        if entry.get("n_documents") != len(self):
            raise CorpusError(
                f"{self.path}: index {name!r} covers {entry.get('n_documents')} documents, corpus has {len(self)}"
            )
        if entry.get("content_hash") != self.content_hash:
            raise CorpusError(
                f"{self.path}: index {name!r} was built for different documents (content hash mismatch)"
            )
        if entry.get("embedder") != self.embedder_name:
            raise CorpusError(
                f"{self.path}: index {name!r} was built from {entry.get('embedder')!r} embeddings, corpus has {self.embedder_name!r}"
            )
        _check_files(self.path, entry.get("files", {}), verify=verify, what=f"index {name!r}")
        return entry

    def indexes(self) -> dict[str, dict[str, Any]]:
        """Manifest entries of all persisted indexes, by name."""
        return dict(self.manifest.get("indexes", {}))


def _check_files(root: Path, files: dict[str, dict[str, Any]], *, verify: bool, what: str = "corpus") -> None:
    for rel, meta in files.items():
        file = root / rel
        if not file.exists():
            raise CorpusError(f"{root}: {what}: missing file {rel}")
        if file.stat().st_size != meta.get("bytes"):
            raise CorpusError(
                f"{root}: {what}: {rel} has {file.stat().st_size} bytes, manifest says {meta.get('bytes')}"
            )
        if verify and _sha256(file) != meta.get("sha256"):
            raise CorpusError(
                f"{root}: {what}: {rel} does not match its sha256 in the manifest (corrupted or edited)"
            )
