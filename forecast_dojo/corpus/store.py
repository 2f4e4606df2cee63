"""The corpus directory: documents sorted by ``available_at``, their embeddings, and a sealed manifest.

Layout (format version 2)::

    corpus/
      manifest.json          counts, date range, embedder, hashes, per-file sha256, build config
      documents.arrow        Arrow IPC file, uncompressed: id, title, text, url, source,
                             published_at, available_at, date_source, in record batches of 8,192 rows
      available_us.npy       int64 ``available_at`` (micros), sorted: the visibility prefix
      published_us.npy       int64 ``published_at`` (micros)
      id_order.npy           int64 rows sorted by id: ``row_of`` bisects it
      row_hashes.npy         8-byte blake2b digest of every row (all fields): sampled checks at open
      embeddings/shard-00000.npy ...   float32 (or float16) rows, L2-normalized, in document order
      index/                 optional search indexes (dense IVF, BM25), each recorded under
                             ``manifest["indexes"]`` with its files' sha256 and the corpus it indexes

Row ``i`` of the documents is row ``i`` of the concatenated embeddings. Because rows are sorted by
``available_at``, the documents visible before any cutoff are exactly a prefix ``[0, n_visible)``.

**Opening is cheap and reads no text.** Everything is memory-mapped: the Arrow file (zero-copy: a
row's text is read from the page cache when a search or read asks for it), the numeric arrays and the
embedding shards. The uncompressed Arrow IPC layout was chosen over parquet because a row is then
an offset lookup plus the bytes themselves (no row group to decompress per read), and because the
pages are the operating system's page cache: N worker processes that open one corpus share one copy
(``benchmarks/scale.py`` measures it). The price is disk (news text compresses about 3x).

**Checks.** At open (``verify=True``, the default): the manifest's seal, every file's size, the
sha256 of every file under 32 MiB, shapes, the date range, the four arrays against their sealed
digests (:func:`array_digest`: full sums of ``available_us`` and ``id_order``, samples of the
others), and 16 rows drawn at random re-hashed against ``row_hashes.npy`` and compared with the
arrays. On request (:meth:`Corpus.verify`, ``forecast-dojo corpus verify DIR``) and at build: every
byte (all files' sha256, every row's digest, order, unique ids, and the ``documents_hash``). The seal
``content_hash`` is a sha256 over the whole manifest's meaning (format, counts, dates,
``documents_hash``, embedder name, dimension and probe, shard size, vector dtype, and since seal 2
every file's size and sha256 and the array digests), so editing any of it (for instance swapping the
embedder's name, or an array together with its checksum) fails at open. A manifest without
``seal_version`` (seal 1) opens with a warning; :func:`migrate_corpus` reseals it. The embedder itself
is checked when a retriever pairs it with the corpus (:meth:`Corpus.check_embedder`): the text of a
known document (the *probe row*) must embed to its stored vector.

Format 1 corpora (``documents.parquet``) still load, fully into memory as before, with a warning;
:func:`migrate_corpus` (``forecast-dojo corpus migrate DIR``) rewrites them to format 2 in place
without re-embedding.

Embedding is resumable: each shard is filled batch by batch in ``shard-N.partial.npy`` (a memory
map) whose progress is committed to ``shard-N.partial.json`` after every batch, and renamed to
``shard-N.npy`` once full. ``build_state.json`` pins the documents (hash), embedder and shard size
that the files on disk belong to, so a restarted build keeps exactly the batches already done and
never reuses vectors from different documents or a different model.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import shutil
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.corpus.embedders import Embedder
from forecast_dojo.errors import ConfigError, NotFoundError
from forecast_dojo.errors import CorpusError as CorpusError
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import from_micros, iso, to_micros

CORPUS_FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1
SHARD_ROWS = 65_536
BATCH_ROWS = 8_192  # rows per Arrow record batch
SMALL_FILE_BYTES = 32 << 20  # files up to this size are sha256-checked at every open
SAMPLED_ROWS = 16  # rows re-hashed at every open
PROBE_MIN_COSINE = 0.99  # float16 storage costs ~1e-3; another model lands far below
VECTOR_DTYPES = ("float32", "float16")
DOCUMENTS_FILE = "documents.arrow"
ARRAY_FILES = ("available_us.npy", "published_us.npy", "id_order.npy", "row_hashes.npy")
SEALED_FIELDS = (
    "format_version",
    "n_documents",
    "available_from",
    "available_to",
    "documents_hash",
    "embedder",
    "shard_rows",
    "vector_dtype",
)
# Seal 2 (since issue 18) also seals every file's size and sha256 and the arrays' digests. A format-2
# manifest without ``seal_version`` is seal 1: it still opens, with a warning.
SEAL_VERSION = 2
SEALED_FIELDS_V2 = (*SEALED_FIELDS, "seal_version", "files", "arrays")
# The arrays the temporal gateway decides with: visibility (``available_us``) and id lookups
# (``id_order``: hidden documents and reads by id). Fully summed at every open; the others sampled.
GATEWAY_ARRAYS = ("available_us.npy", "id_order.npy")
DIGEST_SAMPLE = 65_536  # evenly spaced elements hashed per array at open
_DIGEST_CHUNK = 1 << 16
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
    """Format 1's order-sensitive hash of ids, availability, titles and texts (kept to read old corpora)."""
    digest = hashlib.sha256()
    for doc_id, avail, title, text in zip(ids, available_us, titles, texts, strict=True):
        for part in (doc_id, str(int(avail)), title or "", text):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


def _row_digest(values: tuple[Any, ...]) -> bytes:
    """8-byte blake2b of one row: every field, length-prefixed (None differs from the empty string)."""
    digest = hashlib.blake2b(digest_size=8)
    for value in values:
        if value is None:
            digest.update(b"\xff" * 8)
            continue
        encoded = str(value).encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.digest()


_DIGEST_FIELDS = ("id", "available_at", "published_at", "title", "text", "url", "source", "date_source")


def _batch_digests(batch: pa.RecordBatch | pa.Table) -> np.ndarray:
    """Row digests of a batch, as uint64 (timestamps hashed as integer micros)."""
    columns = []
    for name in _DIGEST_FIELDS:
        column = batch.column(name)
        if name in ("available_at", "published_at"):
            column = column.cast(pa.int64())
        columns.append(column.to_pylist())
    digests = b"".join(_row_digest(values) for values in zip(*columns, strict=True))
    return np.frombuffer(digests, dtype="<u8").copy()


def seal_hash(manifest: dict[str, Any]) -> str:
    """The ``content_hash`` of a format-2 manifest: sha256 of its sealed fields in canonical JSON.

    Seal 2 (``seal_version: 2``) covers :data:`SEALED_FIELDS_V2`: also the ``files`` (each file's
    size and sha256) and the ``arrays`` digests; a manifest without ``seal_version`` (seal 1) only
    :data:`SEALED_FIELDS`.
    """
    names = SEALED_FIELDS if manifest.get("seal_version") is None else SEALED_FIELDS_V2
    sealed = {name: manifest.get(name) for name in names}
    return hashlib.sha256(json.dumps(sealed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _sample_rows(n: int) -> np.ndarray:
    """The evenly spaced rows an array digest samples (first and last included)."""
    if n <= DIGEST_SAMPLE:
        return np.arange(n, dtype=np.int64)
    return np.arange(DIGEST_SAMPLE, dtype=np.int64) * (n - 1) // (DIGEST_SAMPLE - 1)


def array_digest(array: np.ndarray, *, full: bool = True) -> dict[str, Any]:
    """A digest of an 8-byte-per-row array that is cheap enough to check at every open.

    ``sample_sha256``: sha256 of :data:`DIGEST_SAMPLE` evenly spaced elements. With ``full`` also
    ``sum`` and ``weighted_sum``, the sums of ``a[i]`` and of ``(i + 1) * a[i]`` over every element
    as unsigned 64-bit integers (mod 2**64): any single changed element changes ``sum``, and moving
    values between rows changes ``weighted_sum``. It detects edits and corruption, not an adversary
    who solves for both sums (only the full sha256 of ``forecast-dojo corpus verify`` does that).
    """
    words = np.asarray(array).view(np.uint64).reshape(-1)
    n = int(words.shape[0])
    out: dict[str, Any] = {"sample_sha256": hashlib.sha256(words[_sample_rows(n)].tobytes()).hexdigest()}
    if full:
        weights = np.arange(1, _DIGEST_CHUNK + 1, dtype=np.uint64)
        total = np.uint64(0)
        weighted = np.uint64(0)
        with np.errstate(over="ignore"):
            for lo in range(0, n, _DIGEST_CHUNK):
                chunk = words[lo : lo + _DIGEST_CHUNK]
                chunk_sum = chunk.sum(dtype=np.uint64)
                total += chunk_sum
                weighted += np.dot(chunk, weights[: chunk.shape[0]]) + np.uint64(lo) * chunk_sum
        out["sum"] = int(total)
        out["weighted_sum"] = int(weighted)
    return out


def _array_digests(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    return {name: array_digest(array) for name, array in arrays.items()}


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


class _DocumentWriter:
    """Streams document tables (already in ``available_at`` order) into the format-2 files."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.tmp = out / (DOCUMENTS_FILE + ".tmp")
        self.writer = pa.ipc.new_file(str(self.tmp), DOCUMENT_SCHEMA)
        self.available: list[np.ndarray] = []
        self.published: list[np.ndarray] = []
        self.digests: list[np.ndarray] = []
        self.last = np.iinfo(np.int64).min
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        """Append rows; they must continue the ``available_at`` order of everything written so far."""
        if table.schema.remove_metadata() != DOCUMENT_SCHEMA:
            table = table.select(DOCUMENT_SCHEMA.names).cast(DOCUMENT_SCHEMA)
        if table.num_rows == 0:
            return
        available = table.column("available_at").cast(pa.int64()).to_numpy().astype(np.int64)
        if available[0] < self.last or np.any(np.diff(available) < 0):
            raise CorpusError("documents must be written in available_at order")
        self.last = int(available[-1])
        for batch in table.to_batches(max_chunksize=BATCH_ROWS):
            self.writer.write_batch(batch)
            self.digests.append(_batch_digests(batch))
        self.available.append(available)
        self.published.append(table.column("published_at").cast(pa.int64()).to_numpy().astype(np.int64))
        self.rows += table.num_rows

    def close(self) -> dict[str, Any]:
        """Finish every document file; checks ids are unique. Returns the manifest's document fields."""
        self.writer.close()
        if self.rows == 0:
            raise CorpusError("cannot build a corpus with no documents")
        with pa.memory_map(str(self.tmp)) as source:
            ids = pa.ipc.open_file(source).read_all().column("id")
            order = pc.sort_indices(ids).to_numpy().astype(np.int64)
            ordered = ids.take(pa.array(order))
            same = pc.equal(ordered[1:], ordered[:-1]).to_numpy(zero_copy_only=False)
            if same.any():
                raise CorpusError(f"duplicate document id {ordered[int(np.argmax(same))].as_py()!r}")
            del ids, ordered
        self.tmp.replace(self.out / DOCUMENTS_FILE)
        available = np.concatenate(self.available)
        digests = np.concatenate(self.digests)
        arrays = {
            "available_us.npy": available,
            "published_us.npy": np.concatenate(self.published),
            "id_order.npy": order,
            "row_hashes.npy": digests,
        }
        for name, array in arrays.items():
            np.save(self.out / name, array)
        return {
            "n_documents": self.rows,
            "available_from": iso(from_micros(int(available[0]))),
            "available_to": iso(from_micros(int(available[-1]))),
            "documents_hash": hashlib.sha256(digests.astype("<u8").tobytes()).hexdigest(),
            "arrays": _array_digests(arrays),
        }


def _file_entries(out: Path, rows: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    files = {}
    for rel, count in rows.items():
        entry: dict[str, Any] = {"bytes": (out / rel).stat().st_size, "sha256": _sha256(out / rel)}
        if count is not None:
            entry["rows"] = count
        files[rel] = entry
    return files


def _seal(
    out: Path,
    documents: dict[str, Any],
    *,
    embedder_name: str,
    dim: int,
    shard_rows: int,
    vector_dtype: str,
    shard_files: dict[str, int],
    build_config: dict[str, Any] | None,
) -> dict[str, Any]:
    """Choose the probe row, hash every file, and write the sealed manifest (last, atomically)."""
    shards = [np.load(out / rel, mmap_mode="r") for rel in shard_files]
    matrix = ShardedMatrix(shards)
    n = documents["n_documents"]
    probe = n // 2
    for row in range(n // 2, min(n, n // 2 + 1000)):
        if float(np.linalg.norm(matrix[row])) > 0.5:
            probe = row
            break
    stored = np.asarray(_shard_row(shards, matrix.starts, probe))
    rows: dict[str, int | None] = {DOCUMENTS_FILE: n, **dict.fromkeys(ARRAY_FILES, n), **shard_files}
    manifest: dict[str, Any] = {
        "format_version": CORPUS_FORMAT_VERSION,
        "seal_version": SEAL_VERSION,
        **documents,
        "embedder": {
            "name": embedder_name,
            "dim": int(dim),
            "probe": {"row": int(probe), "vector_sha256": hashlib.sha256(stored.tobytes()).hexdigest()},
        },
        "shard_rows": int(shard_rows),
        "vector_dtype": vector_dtype,
        "files": _file_entries(out, rows),
        "indexes": {},
        "build": build_config or {},
    }
    manifest["content_hash"] = seal_hash(manifest)
    write_json_atomic(out / "manifest.json", manifest, sort_keys=True)
    return manifest


def _shard_row(shards: list[np.ndarray], starts: np.ndarray, row: int) -> np.ndarray:
    shard = int(np.searchsorted(starts, row, side="right")) - 1
    return shards[shard][row - starts[shard]]


def _prepare_out(out: Path, overwrite: bool) -> None:
    if (out / "manifest.json").exists():
        if not overwrite:
            raise CorpusError(f"{out} already holds a corpus; pass overwrite=True to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


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
    """Sort, store, embed and seal a corpus directory; returns it loaded (after a full verification).

    Resumable: rerunning the same build after an interruption (exception, kill, power loss) keeps
    every batch already committed to disk and embeds only the rest. The manifest is written last, so
    a directory without one is never mistaken for a finished corpus. Search indexes are built
    afterwards (``forecast_dojo.corpus.retrieval.build_indexes``). Corpora too large for one list of
    documents are streamed with :class:`CorpusWriter`.
    """
    if batch_size <= 0 or shard_rows <= 0:
        raise ConfigError(f"batch_size and shard_rows must be positive, got {batch_size} and {shard_rows}")
    out = Path(out_dir)
    docs = sorted(documents, key=lambda d: (to_micros(d.available_at), d.id))
    if not docs:
        raise CorpusError("cannot build a corpus with no documents")
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise CorpusError(f"duplicate document id {doc.id!r}")
        seen.add(doc.id)
    _prepare_out(out, overwrite)
    table = _documents_table(docs)
    writer = _DocumentWriter(out)
    writer.write(table)
    fields = writer.close()
    state = {
        "documents_hash": fields["documents_hash"],
        "embedder": {"name": embedder.name, "dim": embedder.dim},
        "shard_rows": shard_rows,
    }
    state_path = out / "build_state.json"
    shard_dir = out / "embeddings"
    previous = _read_json(state_path)
    if previous != state:
        # Files from an attempt with other documents, another model or another shard size: start over.
        shutil.rmtree(shard_dir, ignore_errors=True)
        write_json_atomic(state_path, state, sort_keys=True)
    shard_dir.mkdir(exist_ok=True)
    (out / "documents.parquet").unlink(missing_ok=True)

    texts = [embedding_text(d.title, d.text) for d in docs]
    del table
    n_shards = (len(texts) + shard_rows - 1) // shard_rows
    shard_files: dict[str, int] = {}
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
        shard_files[f"embeddings/{path.name}"] = hi - lo
    bar.close()
    _seal(
        out,
        fields,
        embedder_name=embedder.name,
        dim=embedder.dim,
        shard_rows=shard_rows,
        vector_dtype="float32",
        shard_files=shard_files,
        build_config=build_config,
    )
    state_path.unlink(missing_ok=True)
    corpus = Corpus.load(out, verify=False)
    corpus.verify(progress=False)
    return corpus


class CorpusWriter:
    """Streams a corpus of any size to disk: document tables with their vectors, then the seal.

    For corpora whose documents do not fit in one Python list (the benchmark's 10M rows, a cluster
    build's output): ``add`` takes an Arrow table in :data:`DOCUMENT_SCHEMA` (rows continuing the
    ``available_at`` order) and the (rows, dim) vectors computed from :func:`embedding_text`;
    ``finish`` seals the manifest and returns the corpus opened. Not resumable (use
    :func:`build_corpus` for that); an unfinished directory has no manifest and never loads.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        embedder_name: str,
        dim: int,
        shard_rows: int = SHARD_ROWS,
        vector_dtype: str = "float32",
        overwrite: bool = False,
    ) -> None:
        if vector_dtype not in VECTOR_DTYPES:
            raise ConfigError(f"vector_dtype must be one of {VECTOR_DTYPES}, got {vector_dtype!r}")
        self.out = Path(out_dir)
        _prepare_out(self.out, overwrite)
        (self.out / "embeddings").mkdir(exist_ok=True)
        self.embedder_name, self.dim, self.shard_rows = embedder_name, int(dim), int(shard_rows)
        self.dtype = np.dtype(vector_dtype)
        self.documents = _DocumentWriter(self.out)
        self.buffer = np.empty((self.shard_rows, self.dim), dtype=self.dtype)
        self.filled = 0
        self.shard_files: dict[str, int] = {}

    def add(self, table: pa.Table, vectors: np.ndarray) -> None:
        """Append documents (a table continuing the sort order) and their L2-normalized vectors."""
        vectors = np.asarray(vectors)
        if vectors.shape != (table.num_rows, self.dim):
            raise CorpusError(
                f"{table.num_rows} documents need ({table.num_rows}, {self.dim}) vectors, got {vectors.shape}"
            )
        self.documents.write(table)
        done = 0
        while done < vectors.shape[0]:
            take = min(self.shard_rows - self.filled, vectors.shape[0] - done)
            self.buffer[self.filled : self.filled + take] = vectors[done : done + take]
            self.filled += take
            done += take
            if self.filled == self.shard_rows:
                self._flush()

    def _flush(self) -> None:
        if self.filled:
            rel = f"embeddings/shard-{len(self.shard_files):05d}.npy"
            np.save(self.out / rel, self.buffer[: self.filled])
            self.shard_files[rel] = self.filled
            self.filled = 0

    def finish(self, build_config: dict[str, Any] | None = None, *, verify: bool = True) -> Corpus:
        """Write the last shard, the document files and the sealed manifest; returns the corpus.

        The corpus is verified in full unless ``verify=False`` (a benchmark times that step on its own).
        """
        self._flush()
        fields = self.documents.close()
        _seal(
            self.out,
            fields,
            embedder_name=self.embedder_name,
            dim=self.dim,
            shard_rows=self.shard_rows,
            vector_dtype=self.dtype.name,
            shard_files=self.shard_files,
            build_config=build_config,
        )
        corpus = Corpus.load(self.out, verify=False)
        if verify:
            corpus.verify(progress=False)
        return corpus


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


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
        write_json_atomic(progress_path, {"shape": [rows, dim], "done": 0}, sort_keys=True)
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
        write_json_atomic(progress_path, {"shape": [rows, dim], "done": hi}, sort_keys=True)
        bar.update(hi - lo)
    del matrix
    partial.replace(path)
    progress_path.unlink(missing_ok=True)


class ShardedMatrix:
    """The (n, dim) embeddings as one read-only array-like over memory-mapped shards (never all in RAM).

    Indexing returns float32 ndarrays: ``m[i]`` (a row), ``m[lo:hi]`` (a view when it lies in one
    float32 shard, else a copy of just those rows), ``m[rows]`` (a gather). ``np.asarray(m)``
    materializes everything, on purpose only.
    """

    def __init__(self, shards: list[np.ndarray]) -> None:
        if not shards:
            raise CorpusError("a corpus needs at least one embedding shard")
        # Plain ndarray views of the maps: np.memmap's Python-level indexing costs ~50 us per call.
        self.shards = [s.view(np.ndarray) if isinstance(s, np.memmap) else s for s in shards]
        self.starts = np.cumsum([0] + [s.shape[0] for s in shards]).astype(np.int64)
        self.shape = (int(self.starts[-1]), int(shards[0].shape[1]))
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes_on_disk(self) -> int:
        """Bytes of the shards' data (what a full scan reads)."""
        return int(sum(s.nbytes for s in self.shards))

    def __getitem__(self, key: Any) -> np.ndarray:
        n = self.shape[0]
        if isinstance(key, (int, np.integer)):
            row = int(key) + n if int(key) < 0 else int(key)
            if not 0 <= row < n:
                raise IndexError(f"row {key} out of range for {n} rows")
            return np.asarray(_shard_row(self.shards, self.starts, row), dtype=np.float32)
        if isinstance(key, slice):
            lo, hi, step = key.indices(n)
            if step != 1:
                return self.gather(np.arange(lo, hi, step))
            if hi <= lo:
                return np.zeros((0, self.shape[1]), dtype=np.float32)
            first = int(np.searchsorted(self.starts, lo, side="right")) - 1
            last = int(np.searchsorted(self.starts, hi - 1, side="right")) - 1
            pieces = [
                self.shards[s][
                    max(lo, self.starts[s]) - self.starts[s] : min(hi, self.starts[s + 1]) - self.starts[s]
                ]
                for s in range(first, last + 1)
            ]
            if len(pieces) == 1:
                return np.asarray(pieces[0], dtype=np.float32)
            return np.concatenate(pieces).astype(np.float32, copy=False)
        return self.gather(np.asarray(key))

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """Rows in the given order, read shard by shard."""
        rows = np.asarray(rows, dtype=np.int64)
        shape = rows.shape
        rows = rows.reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"rows out of range for {self.shape[0]} rows")
        out = np.empty((rows.size, self.shape[1]), dtype=np.float32)
        if len(self.shards) == 1:
            out[:] = self.shards[0][rows]
            return out.reshape(*shape, self.shape[1])
        which = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange(len(self.shards) + 1))
        for shard in np.flatnonzero(np.diff(bounds)):
            picked = order[bounds[shard] : bounds[shard + 1]]
            out[picked] = self.shards[shard][rows[picked] - self.starts[shard]]
        return out.reshape(*shape, self.shape[1])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[0 : self.shape[0]]
        return whole if dtype is None else whole.astype(dtype, copy=False)


@dataclass(eq=False, repr=False)
class Corpus:
    """An opened corpus: memory-mapped documents, ``available_at`` as int64 micros, and the embeddings.

    Nothing is read in full at open: rows are read when asked (:meth:`text`, :meth:`field`,
    :meth:`document`), vectors when a search gathers them (:attr:`embeddings` is a
    :class:`ShardedMatrix`). Open one with :meth:`load`.

    Attributes:
        path: The corpus directory.
        manifest: Its ``manifest.json``.
        table: The documents (memory-mapped in format 2).
        available_us: Each row's ``available_at`` in micros (rows are sorted by it).
        published_us: Each row's ``published_at`` in micros.
        shards: The embedding shards, in row order.
    """

    path: Path
    manifest: dict[str, Any]
    table: pa.Table
    available_us: np.ndarray
    published_us: np.ndarray
    _id_order: np.ndarray  # rows sorted by id
    shards: list[np.ndarray]
    _row_hashes: np.ndarray | None  # each row's stored digest (format 2)
    _mapped: mmap.mmap | None = None  # the documents file's mapping (format 2), for read-ahead advice

    def __post_init__(self) -> None:
        self._columns = {name: self.table.column(name) for name in DOCUMENT_SCHEMA.names}
        lengths = [len(chunk) for chunk in self._columns["id"].chunks]
        self._chunk_starts = np.cumsum([0] + lengths).astype(np.int64)
        self._embeddings = ShardedMatrix(self.shards)

    @property
    def format_version(self) -> int:
        """1 for a legacy parquet corpus (in memory), 2 for the memory-mapped layout."""
        return int(self.manifest["format_version"])

    @classmethod
    def load(cls, path: str | Path, *, expect_embedder: str | None = None, verify: bool = True) -> Corpus:
        """Open a corpus directory without reading its text.

        Always checked: manifest, format, seal (``content_hash``), every file's presence and size,
        counts, shapes, the date range. With ``verify`` (default) also the sha256 of every file under
        32 MiB, the four arrays against their sealed digests (seal 2), and 16 random rows against
        their digests and the arrays. :meth:`verify` checks every byte. A seal-1 manifest (no
        ``seal_version``) opens with a warning.
        """
        path = Path(path)
        manifest_path = path / "manifest.json"
        if not manifest_path.exists():
            raise CorpusError(f"{path}: no manifest.json (not a corpus directory, or an unfinished build)")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CorpusError(f"{manifest_path}: not valid JSON ({err})") from err
        if not isinstance(manifest, dict):
            raise CorpusError(f"{manifest_path}: not a JSON object")
        version = manifest.get("format_version")
        if version not in (CORPUS_FORMAT_VERSION, LEGACY_FORMAT_VERSION):
            raise CorpusError(
                f"{path}: corpus format {version} (this library reads {CORPUS_FORMAT_VERSION} and "
                f"{LEGACY_FORMAT_VERSION}); rebuild it with `forecast-dojo corpus build`"
            )
        embedder = manifest.get("embedder")
        if not isinstance(embedder, dict):
            raise CorpusError(f"{path}: manifest has no embedder")
        if expect_embedder is not None and embedder.get("name") != expect_embedder:
            raise CorpusError(
                f"{path}: embedded with {embedder.get('name')!r}, but {expect_embedder!r} was expected"
            )
        files = manifest.get("files")
        if not isinstance(files, dict):
            raise CorpusError(f"{path}: manifest has no file list")
        if version == LEGACY_FORMAT_VERSION:
            return cls._load_legacy(path, manifest, verify=verify)
        _check_files(path, files, mode="size")
        for rel in (DOCUMENTS_FILE, *ARRAY_FILES):
            if rel not in files:
                raise CorpusError(f"{path}: manifest lists no {rel}")
        n = manifest.get("n_documents")
        try:
            mapped = _map_random(path / DOCUMENTS_FILE)
            table = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
        except (pa.ArrowInvalid, OSError, ValueError) as err:
            raise CorpusError(f"{path}: {DOCUMENTS_FILE} is not a readable Arrow file ({err})") from err
        if table.schema.remove_metadata() != DOCUMENT_SCHEMA:
            raise CorpusError(
                f"{path}: {DOCUMENTS_FILE} has schema {table.schema}, expected {DOCUMENT_SCHEMA}"
            )
        if table.num_rows != n:
            raise CorpusError(f"{path}: {table.num_rows} documents on disk, manifest says {n}")
        arrays = {}
        for rel, dtype in zip(ARRAY_FILES, ("<i8", "<i8", "<i8", "<u8"), strict=True):
            try:
                array = np.load(path / rel, mmap_mode="r")
            except (ValueError, OSError) as err:
                raise CorpusError(f"{path}: {rel} is not a readable .npy file ({err})") from err
            if array.shape != (n,) or array.dtype != np.dtype(dtype):
                raise CorpusError(
                    f"{path}: {rel} has shape {array.shape} {array.dtype}, expected ({n},) {dtype}"
                )
            arrays[rel] = array
        available = arrays["available_us.npy"]
        if n and (
            iso(from_micros(int(available[0]))) != manifest.get("available_from")
            or iso(from_micros(int(available[-1]))) != manifest.get("available_to")
        ):
            raise CorpusError(f"{path}: available_at range on disk differs from the manifest's")
        dtype = manifest.get("vector_dtype", "float32")
        if dtype not in VECTOR_DTYPES:
            raise CorpusError(f"{path}: unknown vector dtype {dtype!r}")
        shards = _open_shards(path, files, embedder.get("dim"), dtype, n)
        seal = manifest.get("seal_version")
        if seal not in (None, SEAL_VERSION):
            raise CorpusError(f"{path}: seal version {seal!r} (this library reads 1 and {SEAL_VERSION})")
        if manifest.get("content_hash") != seal_hash(manifest):
            raise CorpusError(
                f"{path}: content hash mismatch: the manifest's sealed fields (documents, embedder, "
                "dimension, probe, dates"
                + (", files' sizes and sha256, array digests" if seal else "")
                + ") were edited after the build; rebuild the corpus"
            )
        if seal is None:
            warnings.warn(
                f"{path} was sealed before the files' checksums were (seal 1): an edit of a file together "
                f"with its checksum in the manifest is caught only by sampled rows; run "
                f"`forecast-dojo corpus migrate {path}` to verify every byte and seal it",
                stacklevel=2,
            )
        corpus = cls(
            path,
            manifest,
            table,
            available,
            arrays["published_us.npy"],
            arrays["id_order.npy"],
            shards,
            arrays["row_hashes.npy"],
            mapped,
        )
        if verify:
            _check_files(path, files, mode="small")
            if seal is not None:
                corpus._check_array_digests()
            corpus._check_rows(np.random.default_rng().choice(n, size=min(n, SAMPLED_ROWS), replace=False))
        return corpus

    @classmethod
    def _load_legacy(cls, path: Path, manifest: dict[str, Any], *, verify: bool) -> Corpus:
        """Format 1: the parquet table in memory, as before (full hash with ``verify``)."""
        warnings.warn(
            f"{path} is a format-1 corpus: it loads fully into memory; "
            f"run `forecast-dojo corpus migrate {path}` to open it memory-mapped",
            stacklevel=3,
        )
        files = manifest["files"]
        _check_files(path, files, mode="full" if verify else "size")
        try:
            table = pq.read_table(path / "documents.parquet")
        except (pa.ArrowInvalid, OSError) as err:
            raise CorpusError(f"{path}: documents.parquet is not readable ({err})") from err
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
        shards = _open_shards(path, files, manifest["embedder"].get("dim"), "float32", n)
        if verify:
            actual = content_hash(
                table.column("id").to_pylist(),
                available,
                table.column("title").to_pylist(),
                table.column("text").to_pylist(),
            )
            if actual != manifest.get("content_hash"):
                raise CorpusError(f"{path}: content hash mismatch (documents changed after the build)")
        ids = table.column("id")
        order = pc.sort_indices(ids).to_numpy().astype(np.int64)
        if n > 1 and pc.any(pc.equal(ids.take(order[1:]), ids.take(order[:-1]))).as_py():
            raise CorpusError(f"{path}: duplicate document ids")
        published = table.column("published_at").cast(pa.int64()).to_numpy().astype(np.int64)
        return cls(path, manifest, table, available, published, order, shards, None)

    # --- checks -----------------------------------------------------------------------------------

    def _check_rows(self, rows: Iterable[int]) -> None:
        """Re-hash some rows and compare them with their stored digests."""
        if self._row_hashes is None:
            return
        for row in rows:
            row = int(row)
            chunk = int(np.searchsorted(self._chunk_starts, row, side="right")) - 1
            offset = row - int(self._chunk_starts[chunk])
            values = []
            for name in _DIGEST_FIELDS:
                value = self._columns[name].chunk(chunk)[offset]
                values.append(value.cast(pa.int64()).as_py() if name.endswith("_at") else value.as_py())
            actual = int(np.frombuffer(_row_digest(tuple(values)), dtype="<u8")[0])
            if actual != int(self._row_hashes[row]):
                raise CorpusError(
                    f"{self.path}: row {row} does not match its digest (documents corrupted or edited)"
                )
            available, published = values[1], values[2]
            if int(self.available_us[row]) != available or int(self.published_us[row]) != published:
                raise CorpusError(
                    f"{self.path}: available_us.npy/published_us.npy differ from the documents at row {row} "
                    "(edited after the build)"
                )
            if self.row_of(values[0]) != row:
                raise CorpusError(
                    f"{self.path}: id_order.npy does not find document {values[0]!r} at row {row} (edited after the build)"
                )

    def _check_array_digests(self) -> None:
        """The arrays against their sealed digests: full sums of the gateway's, samples of the others."""
        digests = self.manifest.get("arrays")
        if not isinstance(digests, dict):
            raise CorpusError(f"{self.path}: manifest has no array digests")
        arrays = {
            "available_us.npy": self.available_us,
            "published_us.npy": self.published_us,
            "id_order.npy": self._id_order,
            "row_hashes.npy": self._row_hashes,
        }
        for name, array in arrays.items():
            expected = digests.get(name)
            if not isinstance(expected, dict) or array is None:
                raise CorpusError(f"{self.path}: manifest has no digest of {name}")
            actual = array_digest(array, full=name in GATEWAY_ARRAYS)
            if any(actual[key] != expected.get(key) for key in actual):
                raise CorpusError(
                    f"{self.path}: {name} does not match its sealed digest (edited or corrupted after the build); "
                    "rebuild the corpus, or run `forecast-dojo corpus verify` for the first differing row"
                )

    def verify(self, *, progress: bool = True) -> dict[str, Any]:
        """Check every byte of the corpus; raises :class:`CorpusError` on the first mismatch.

        Checked: all files' sha256 (indexes too), every row's digest, the documents hash, order, unique
        ids, and the numeric arrays against the documents.

        Returns a summary (rows, bytes hashed, seconds) for ``forecast-dojo corpus verify``.
        """
        import time

        started = time.perf_counter()
        files = dict(self.manifest["files"])
        for entry in self.indexes().values():
            for rel, meta in entry.get("files", {}).items():
                files[rel] = meta
        _check_files(self.path, files, mode="full", progress=progress)
        n = len(self)
        if self.format_version == LEGACY_FORMAT_VERSION:
            return {"rows": n, "files": len(files), "seconds": round(time.perf_counter() - started, 3)}
        digests = np.empty(n, dtype="<u8")
        if self._mapped is not None:
            self._mapped.madvise(mmap.MADV_SEQUENTIAL)  # a full scan: read ahead
        lo = 0
        with tqdm(total=n, desc="verifying rows", unit="doc", disable=not progress) as bar:
            for batch in self.table.to_batches():
                hi = lo + batch.num_rows
                digests[lo:hi] = _batch_digests(batch)
                available = batch.column("available_at").cast(pa.int64()).to_numpy()
                published = batch.column("published_at").cast(pa.int64()).to_numpy()
                if not (
                    np.array_equal(available, self.available_us[lo:hi])
                    and np.array_equal(published, self.published_us[lo:hi])
                ):
                    raise CorpusError(
                        f"{self.path}: available_us/published_us differ from the documents in rows {lo}-{hi}"
                    )
                lo = hi
                bar.update(batch.num_rows)
        if self._mapped is not None:
            self._mapped.madvise(mmap.MADV_RANDOM)
        bad = np.flatnonzero(digests != self._row_hashes)
        if bad.size:
            raise CorpusError(
                f"{self.path}: {bad.size} rows do not match their digests (first: row {int(bad[0])})"
            )
        if hashlib.sha256(digests.tobytes()).hexdigest() != self.manifest.get("documents_hash"):
            raise CorpusError(f"{self.path}: documents hash mismatch")
        if n and np.any(np.diff(self.available_us) < 0):
            raise CorpusError(f"{self.path}: documents are not sorted by available_at")
        order = np.asarray(self._id_order)
        if n and not np.array_equal(np.sort(order), np.arange(n)):
            raise CorpusError(f"{self.path}: id_order.npy is not a permutation of the rows")
        ordered = self._columns["id"].take(pa.array(order))
        if n > 1 and not pc.all(pc.less(ordered[:-1], ordered[1:])).as_py():
            raise CorpusError(
                f"{self.path}: id_order.npy does not sort the ids strictly (duplicate or unordered ids)"
            )
        return {"rows": n, "files": len(files), "seconds": round(time.perf_counter() - started, 3)}

    def check_embedder(self, embedder: Embedder) -> None:
        """Fail unless ``embedder`` is the model this corpus was embedded with.

        Same name and dimension, and the probe row's text embeds to its stored vector (cosine >= 0.99).
        """
        if embedder.name != self.embedder_name or int(embedder.dim) != self.dim:
            raise CorpusError(
                f"corpus {self.path} was embedded with {self.embedder_name!r}, not {embedder.name!r} "
                f"({self.dim} vs {embedder.dim} dims)"
            )
        probe = self.manifest["embedder"].get("probe")
        if not probe:
            return  # format 1 recorded no probe
        row = int(probe["row"])
        stored_raw = np.asarray(_shard_row(self.shards, self._embeddings.starts, row))
        if hashlib.sha256(stored_raw.tobytes()).hexdigest() != probe.get("vector_sha256"):
            raise CorpusError(f"{self.path}: the probe row's stored vector changed after the build")
        stored = stored_raw.astype(np.float32)
        fresh = np.asarray(
            embedder.encode([embedding_text(self.field("title", row) or "", self.text(row))]),
            dtype=np.float32,
        )[0]
        denominator = float(np.linalg.norm(stored) * np.linalg.norm(fresh)) or 1.0
        cosine = float(stored @ fresh) / denominator
        if cosine < PROBE_MIN_COSINE:
            raise CorpusError(
                f"{self.path}: embedder {embedder.name!r} is not the model this corpus was embedded with: "
                f"document {self.field('id', row)!r} embeds at cosine {cosine:.3f} to its stored vector"
            )

    # --- rows -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.available_us.shape[0])

    @property
    def embeddings(self) -> ShardedMatrix:
        """The (n, dim) embeddings over the memory-mapped shards; rows are read as they are indexed."""
        return self._embeddings

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The float32 embeddings of some rows, gathered from the memory-mapped shards."""
        return self._embeddings.gather(rows)

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self.manifest["embedder"]["dim"])

    @property
    def embedder_name(self) -> str:
        """The embedder's name recorded at build (sealed by the content hash)."""
        return self.manifest["embedder"]["name"]

    @property
    def content_hash(self) -> str:
        """Identity of the corpus: documents, embedder and layout (format 1: documents only)."""
        return self.manifest["content_hash"]

    @property
    def index_dir(self) -> Path:
        """Where search indexes of this corpus live (created on demand)."""
        return self.path / "index"

    def n_visible(self, cutoff_us: int) -> int:
        """How many documents are available strictly before the cutoff: the visible prefix length."""
        return int(np.searchsorted(self.available_us, int(cutoff_us), side="left"))

    def _cell(self, name: str, row: int) -> Any:
        row = int(row)
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} out of range for {len(self)} documents")
        chunk = int(np.searchsorted(self._chunk_starts, row, side="right")) - 1
        return self._columns[name].chunk(chunk)[row - int(self._chunk_starts[chunk])].as_py()

    def row_of(self, doc_id: str) -> int | None:
        """The row of a document id, or None (a bisection over the ids in sorted order)."""
        if not isinstance(doc_id, str):
            return None
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._cell("id", int(self._id_order[mid])) < doc_id:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self):
            row = int(self._id_order[lo])
            if self._cell("id", row) == doc_id:
                return row
        return None

    def field(self, name: str, row: int) -> Any:
        """One field of one row (``id``, ``title``, ``url``, ``source``, ``date_source``, ``text``...)."""
        if name not in self._columns:
            raise NotFoundError(f"no document field {name!r}; known: {DOCUMENT_SCHEMA.names}")
        return self._cell(name, row)

    def text(self, row: int) -> str:
        """The text of one row, read on demand."""
        return self._cell("text", row)

    def iter_texts(self, batch_rows: int = BATCH_ROWS) -> Iterator[list[str]]:
        """Embedding texts (title, then text) in row order, a batch at a time (bounded memory)."""
        for batch in self.table.select(["title", "text"]).to_batches(max_chunksize=batch_rows):
            titles, texts = batch.column("title").to_pylist(), batch.column("text").to_pylist()
            yield [embedding_text(t or "", x) for t, x in zip(titles, texts, strict=True)]

    def texts(self) -> list[str]:
        """What each row's embedding was computed from (title, then text), in row order (all in RAM)."""
        return [text for batch in self.iter_texts() for text in batch]

    def document(self, row: int) -> Document:
        """One row as a :class:`~forecast_dojo.schema.Document`."""
        return Document(
            id=self._cell("id", row),
            title=self._cell("title", row) or "",
            text=self._cell("text", row),
            url=self._cell("url", row),
            source=self._cell("source", row),
            published_at=self._cell("published_at", row),
            available_at=self._cell("available_at", row),
            date_source=self._cell("date_source", row),
        )

    def available_at(self, row: int) -> datetime:
        """When a row became available."""
        return from_micros(int(self.available_us[row]))

    # --- search indexes -------------------------------------------------------------------------

    def register_index(self, name: str, kind: str, files: list[str], params: dict[str, Any]) -> None:
        """Record an index written under :attr:`index_dir` in the manifest, pinned to this corpus."""
        entry: dict[str, Any] = {
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
        write_json_atomic(self.path / "manifest.json", on_disk, sort_keys=True)
        self.manifest = on_disk

    def index_entry(self, name: str, *, verify: bool = True) -> dict[str, Any]:
        """The manifest entry of a persisted index, after checking it indexes exactly this corpus.

        Sizes are always checked; sha256 of files under 32 MiB with ``verify``; all of them in
        :meth:`verify`.
        """
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
        mode = ("small" if self.format_version == CORPUS_FORMAT_VERSION else "full") if verify else "size"
        _check_files(self.path, entry.get("files", {}), mode=mode, what=f"index {name!r}")
        return entry

    def indexes(self) -> dict[str, dict[str, Any]]:
        """Manifest entries of all persisted indexes, by name."""
        return dict(self.manifest.get("indexes", {}))


def _map_random(path: Path) -> mmap.mmap:
    """Map a file read-only with read-ahead off.

    A row's read then maps the pages it touches, not the ~2 MB window the kernel would otherwise
    fault in around each random access (measured).
    """
    with path.open("rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_RANDOM)
    return mapped


def _open_shards(path: Path, files: dict[str, Any], dim: Any, dtype: str, n: Any) -> list[np.ndarray]:
    shard_names = sorted(rel for rel in files if rel.startswith("embeddings/"))
    if not shard_names:
        raise CorpusError(f"{path}: manifest lists no embedding shards")
    shards = []
    for rel in shard_names:
        try:
            shard = np.load(path / rel, mmap_mode="r")
        except (ValueError, OSError) as err:
            raise CorpusError(f"{path}: {rel} is not a readable .npy file ({err})") from err
        if shard.ndim != 2 or shard.shape[1] != dim or shard.dtype != np.dtype(dtype):
            raise CorpusError(
                f"{path}: {rel} has shape {shard.shape} {shard.dtype}, expected (rows, {dim}) {dtype}"
            )
        shards.append(shard)
    total = sum(shard.shape[0] for shard in shards)
    if total != n:
        raise CorpusError(f"{path}: embeddings have {total} rows, expected {n} (one per document)")
    return shards


def _check_files(
    root: Path, files: dict[str, dict[str, Any]], *, mode: str, what: str = "corpus", progress: bool = False
) -> None:
    """``size``: presence and size; ``small``: and sha256 of files under 32 MiB; ``full``: every sha256."""
    for rel, meta in tqdm(files.items(), desc="hashing files", unit="file", disable=not progress):
        file = root / rel
        if not file.exists():
            raise CorpusError(f"{root}: {what}: missing file {rel}")
        size = file.stat().st_size
        if size != meta.get("bytes"):
            raise CorpusError(f"{root}: {what}: {rel} has {size} bytes, manifest says {meta.get('bytes')}")
        hashed = mode == "full" or (mode == "small" and size <= SMALL_FILE_BYTES)
        if hashed and _sha256(file) != meta.get("sha256"):
            raise CorpusError(
                f"{root}: {what}: {rel} does not match its sha256 in the manifest (corrupted or edited)"
            )


def verify_corpus(path: str | Path, *, progress: bool = True) -> dict[str, Any]:
    """Open a corpus and check every byte of it (``forecast-dojo corpus verify DIR``)."""
    return Corpus.load(path).verify(progress=progress)


def migrate_corpus(path: str | Path, *, progress: bool = True) -> Corpus:
    """Bring a corpus to the current format and seal in place (no re-embedding); indexes are re-pinned.

    Format 1 is rewritten to format 2; a format-2 corpus of seal 1 (files' checksums outside the
    seal) is verified byte for byte and resealed (seal 2: files and array digests sealed), which
    changes its ``content_hash``. The old files are checked in full first; the new manifest is written
    last (atomically), then ``documents.parquet`` is removed.
    """
    path = Path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = Corpus.load(path, verify=True)
    if old.format_version != LEGACY_FORMAT_VERSION:
        if old.manifest.get("seal_version") is not None:
            raise CorpusError(
                f"{path} is already format {old.format_version}, seal {old.manifest['seal_version']}"
            )
        return _reseal(old, progress=progress)
    writer = _DocumentWriter(path)
    writer.write(old.table)
    fields = writer.close()
    shard_files = {
        rel: meta["rows"]
        for rel, meta in sorted(old.manifest["files"].items())
        if rel.startswith("embeddings/")
    }
    manifest = _seal(
        path,
        fields,
        embedder_name=old.embedder_name,
        dim=old.dim,
        shard_rows=int(old.manifest.get("shard_rows", SHARD_ROWS)),
        vector_dtype="float32",
        shard_files=shard_files,
        build_config=old.manifest.get("build"),
    )
    for entry in old.indexes().values():
        entry["content_hash"] = manifest["content_hash"]
    manifest["indexes"] = old.indexes()
    manifest["migrated_from"] = {"format_version": LEGACY_FORMAT_VERSION, "content_hash": old.content_hash}
    write_json_atomic(path / "manifest.json", manifest, sort_keys=True)
    (path / "documents.parquet").unlink(missing_ok=True)
    corpus = Corpus.load(path, verify=False)
    corpus.verify(progress=progress)
    return corpus


def _reseal(old: Corpus, *, progress: bool) -> Corpus:
    """Seal a seal-1 format-2 corpus after checking every byte against its documents (see migrate_corpus)."""
    old.verify(progress=progress)  # arrays against the documents, rows against the sealed documents hash
    manifest = dict(old.manifest)
    manifest["seal_version"] = SEAL_VERSION
    manifest["arrays"] = _array_digests(
        {
            "available_us.npy": old.available_us,
            "published_us.npy": old.published_us,
            "id_order.npy": old._id_order,
            "row_hashes.npy": np.asarray(old._row_hashes),
        }
    )
    manifest["content_hash"] = seal_hash(manifest)
    indexes = old.indexes()
    for entry in indexes.values():
        if entry.get("content_hash") == old.content_hash:
            entry["content_hash"] = manifest["content_hash"]
    manifest["indexes"] = indexes
    manifest["migrated_from"] = {"seal_version": 1, "content_hash": old.content_hash}
    write_json_atomic(old.path / "manifest.json", manifest, sort_keys=True)
    return Corpus.load(old.path)
