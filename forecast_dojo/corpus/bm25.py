"""BM25 over a visible prefix, with term statistics computed from the visible documents only.

A BM25 score depends on corpus statistics: document frequency ``df`` (through IDF) and the average
document length. Computing them over the whole corpus would let documents published *after* the
cutoff shape the ranking before it (a subtle leak; FABench's rule forbids it). Because rows are sorted
by ``available_at`` and postings are stored in row order, the exact visible statistics are cheap:

- ``df(term, n_visible) = searchsorted(postings[term], n_visible)`` (a bisection per query term);
- ``avgdl(n_visible) = prefix_len[n_visible] / n_visible`` (a prefix sum of document lengths).

Only the visible part of each posting list is scored. Nothing is approximated: the scores equal those
of a BM25 index built from the visible documents alone (tested).

Scoring is Lucene's BM25: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``, summed over the distinct query terms.

At scale: a persisted index is a set of ``.npy`` arrays and a sorted, UTF-8 term file, all
memory-mapped at load (nothing is read until a query needs it; worker processes share the pages);
terms are found by bisection in the sorted term file, not through a dict of every term.
:func:`build_bm25_index` streams the corpus's texts and lays out the postings in chunks spilled to
disk, so building needs memory for one chunk of postings and the vocabulary, not for all postings.
"""

from __future__ import annotations

import functools
import json
import math
import re
import shutil
import tempfile
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from forecast_dojo.corpus.ranking import rank_candidates
from forecast_dojo.corpus.store import Corpus, CorpusError

BM25_INDEX_NAME = "bm25"
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# Very common English function words: they carry no ranking signal and dominate posting volume.
STOPWORDS = frozenset(
    """a an and are as at be but by for from has have he her his i in is it its of on or that the their
    them they this to was were which will with""".split()  # noqa: SIM905 (readable as prose)
)


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens (letters and digits, any script), stopwords removed, no stemming."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in STOPWORDS]


LAYOUT = "npy-v2"  # persisted arrays: see ``ARRAY_FILES`` and ``TERM_FILES``
ARRAY_FILES = {
    "offsets": "index/bm25-offsets.npy",
    "rows": "index/bm25-rows.npy",
    "tfs": "index/bm25-tfs.npy",
    "doc_lengths": "index/bm25-doc-lengths.npy",
    "prefix_lengths": "index/bm25-prefix-lengths.npy",
}
TERM_FILES = {
    "terms": "index/bm25-terms.bin",  # UTF-8 terms in sorted order, concatenated
    "term_offsets": "index/bm25-term-offsets.npy",  # int64, byte offsets of each sorted term
    "term_ids": "index/bm25-term-ids.npy",  # int64, the id of each sorted term
}
CHUNK_POSTINGS = 20_000_000  # postings laid out per chunk by the streaming build (about 0.5 GB)


class SortedTerms(Mapping[str, int]):
    """A read-only vocabulary over a sorted term file: lookups bisect the (memory-mapped) UTF-8 bytes.

    UTF-8 byte order is code-point order, so comparing encoded bytes matches sorting the strings.
    """

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, ids: np.ndarray) -> None:
        self._blob, self._offsets, self._ids = blob, offsets, ids
        self._cached = functools.lru_cache(maxsize=1 << 16)(self._find)  # query terms recur

    def _bytes(self, position: int) -> bytes:
        return self._blob[int(self._offsets[position]) : int(self._offsets[position + 1])].tobytes()

    def __getitem__(self, term: str) -> int:
        found = self._cached(term)
        if found < 0:
            raise KeyError(term)
        return found

    def _find(self, term: str) -> int:
        """The id of ``term``, or -1."""
        key = term.encode("utf-8", "surrogatepass")  # a lone surrogate is simply not a term
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and self._bytes(lo) == key:
            return int(self._ids[lo])
        return -1

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        try:
            self[term]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return int(self._ids.size)

    def __iter__(self) -> Iterator[str]:
        for position in range(len(self)):
            yield self._bytes(position).decode("utf-8")


@dataclass
class BM25Index:
    """Posting lists in row order (``rows``/``tfs`` sliced by ``offsets``), per-row lengths, vocabulary.

    The arrays are in memory after :meth:`build` and memory-mapped after :meth:`load`.
    """

    vocabulary: Mapping[str, int]
    offsets: np.ndarray  # int64, len(vocabulary) + 1
    rows: np.ndarray  # int32, postings of term t at rows[offsets[t]:offsets[t+1]], ascending
    tfs: np.ndarray  # float32, term frequencies aligned with rows
    doc_lengths: np.ndarray  # int32 tokens per row
    k1: float = 1.5
    b: float = 0.75
    kind: str = "bm25"
    prefix_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # int64, len(rows) + 1

    def __post_init__(self) -> None:
        if self.prefix_lengths.size != self.doc_lengths.size + 1:
            self.prefix_lengths = np.concatenate([[0], np.cumsum(self.doc_lengths, dtype=np.int64)])

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        progress: bool = True,
        total: int | None = None,
    ) -> BM25Index:
        """Tokenize every row in order and lay out its postings in memory (rows ascending per term)."""
        vocabulary, doc_lengths, chunks = _tokenize_in_chunks(texts, None, progress=progress, total=total)
        n_postings = sum(chunk[0].size for chunk in chunks)
        rows, tfs = np.empty(n_postings, np.int32), np.empty(n_postings, np.float32)
        offsets = _merge_chunks(chunks, len(vocabulary), rows, tfs)
        return cls(vocabulary, offsets, rows, tfs, doc_lengths, k1=k1, b=b)

    def scores(self, query: str, n_visible: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows (ascending) among ``[0, n_visible)`` that match the query, and their BM25 scores."""
        n = max(0, min(int(n_visible), self.doc_lengths.size))
        terms = sorted({self.vocabulary[t] for t in tokenize(query) if t in self.vocabulary})
        if n == 0 or not terms:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        avgdl = max(float(self.prefix_lengths[n]) / n, 1e-9)
        hit_rows: list[np.ndarray] = []
        hit_scores: list[np.ndarray] = []
        for term in terms:
            start, end = int(self.offsets[term]), int(self.offsets[term + 1])
            postings = self.rows[start:end]
            df = int(np.searchsorted(postings, n, side="left"))  # visible documents containing the term
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            rows = np.asarray(postings[:df])
            tf = np.asarray(self.tfs[start : start + df], dtype=np.float64)
            norm = self.k1 * (1.0 - self.b + self.b * self.doc_lengths[rows] / avgdl)
            hit_rows.append(rows.astype(np.int64))
            hit_scores.append(idf * tf * (self.k1 + 1.0) / (tf + norm))
        if not hit_rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        rows, inverse = np.unique(np.concatenate(hit_rows), return_inverse=True)
        return rows, np.bincount(inverse, weights=np.concatenate(hit_scores), minlength=rows.size)

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        """Best-first visible rows with a positive score (never padded with non-matching rows)."""
        rows, scores = self.scores(query, n_visible)
        return rank_candidates(rows, scores, top_k)

    def memory_bytes(self) -> int:
        """Size of the index's arrays and vocabulary (resident after :meth:`build`; mapped after :meth:`load`)."""
        arrays = (self.offsets, self.rows, self.tfs, self.doc_lengths, self.prefix_lengths)
        if isinstance(self.vocabulary, SortedTerms):
            terms = (
                self.vocabulary._blob.nbytes + self.vocabulary._offsets.nbytes + self.vocabulary._ids.nbytes
            )
        else:
            terms = sum(len(t) + 60 for t in self.vocabulary)
        return int(sum(a.nbytes for a in arrays) + terms)

    # --- persistence -----------------------------------------------------------------------------

    def save(self, corpus: Corpus) -> None:
        """Write the index's arrays and sorted terms under ``index/`` and record them in the manifest."""
        if self.doc_lengths.size != len(corpus):
            raise CorpusError(
                f"bm25 index has {self.doc_lengths.size} rows, corpus {corpus.path} has {len(corpus)}"
            )
        corpus.index_dir.mkdir(exist_ok=True)
        arrays = {name: getattr(self, name) for name in ARRAY_FILES}
        for name, rel in ARRAY_FILES.items():
            _save_array(corpus.path / rel, arrays[name])
        _save_terms(corpus.path, self.vocabulary)
        _register(corpus, self.k1, self.b)

    @classmethod
    def load(cls, corpus: Corpus, *, verify: bool = True) -> BM25Index:
        """The persisted BM25 index of a corpus, checked against the manifest, its arrays memory-mapped."""
        entry = corpus.index_entry(BM25_INDEX_NAME, verify=verify)
        params = entry["params"]
        if params.get("tokenizer") != "unicode-words-lower-stopwords-v1":
            raise CorpusError(
                f"{corpus.path}: bm25 index uses tokenizer {params.get('tokenizer')!r}, unknown here"
            )
        vocabulary: Mapping[str, int]
        if params.get("layout") == LAYOUT:
            try:
                arrays = {n: _mapped(corpus.path / rel) for n, rel in ARRAY_FILES.items()}
                term_arrays = {
                    "blob": np.asarray(np.memmap(corpus.path / TERM_FILES["terms"], dtype=np.uint8, mode="r"))
                    if (corpus.path / TERM_FILES["terms"]).stat().st_size
                    else np.zeros(0, np.uint8),
                    "offsets": _mapped(corpus.path / TERM_FILES["term_offsets"]),
                    "ids": _mapped(corpus.path / TERM_FILES["term_ids"]),
                }
            except (OSError, ValueError) as err:
                raise CorpusError(f"{corpus.path}: bm25 index files cannot be read: {err}") from err
            vocabulary = SortedTerms(**term_arrays)
            n_terms = term_arrays["ids"].size
            consistent = (
                term_arrays["offsets"].size == n_terms + 1
                and int(term_arrays["offsets"][-1]) == term_arrays["blob"].size
                and arrays["prefix_lengths"].size == arrays["doc_lengths"].size + 1
                and arrays["offsets"].size > 0
                and int(arrays["offsets"][-1]) == arrays["rows"].size == arrays["tfs"].size
            )
        else:  # the first layout (before memory mapping): one .npz and a JSON list of terms, read into RAM
            with np.load(corpus.index_dir / "bm25.npz") as data:
                arrays = {name: data[name] for name in ("offsets", "rows", "tfs", "doc_lengths")}
            terms = json.loads((corpus.index_dir / "bm25-vocabulary.json").read_text())
            vocabulary, n_terms, consistent = {t: i for i, t in enumerate(terms)}, len(terms), True
        if (
            not consistent
            or arrays["offsets"].size != n_terms + 1
            or arrays["doc_lengths"].size != len(corpus)
        ):
            raise CorpusError(
                f"{corpus.path}: bm25 index arrays do not match its vocabulary or the corpus size"
            )
        return cls(
            vocabulary,
            offsets=arrays["offsets"],
            rows=arrays["rows"],
            tfs=arrays["tfs"],
            doc_lengths=arrays["doc_lengths"],
            k1=params["k1"],
            b=params["b"],
            prefix_lengths=arrays.get("prefix_lengths", np.zeros(0, np.int64)),
        )


def _mapped(path: Path) -> np.ndarray:
    """A read-only ``.npy`` array backed by a memory map (a plain ndarray view: cheaper to slice)."""
    return np.asarray(np.load(path, mmap_mode="r"))


def _save_array(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, np.asarray(array))
    tmp.replace(path)


def _save_terms(root: Path, vocabulary: Mapping[str, int]) -> None:
    """The vocabulary as sorted UTF-8 terms (one file), their byte offsets and their ids."""
    ordered = sorted(vocabulary)
    encoded = [t.encode("utf-8") for t in ordered]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded], dtype=np.int64)]).astype(np.int64)
    blob = root / TERM_FILES["terms"]
    tmp = blob.with_name(blob.name + ".tmp")
    tmp.write_bytes(b"".join(encoded))
    tmp.replace(blob)
    _save_array(root / TERM_FILES["term_offsets"], offsets)
    _save_array(
        root / TERM_FILES["term_ids"], np.fromiter((vocabulary[t] for t in ordered), np.int64, len(ordered))
    )


def _register(corpus: Corpus, k1: float, b: float) -> None:
    for old in ("bm25.npz", "bm25-vocabulary.json"):  # the first layout's files, replaced by these
        (corpus.index_dir / old).unlink(missing_ok=True)
    params: dict[str, Any] = {
        "k1": k1,
        "b": b,
        "tokenizer": "unicode-words-lower-stopwords-v1",
        "layout": LAYOUT,
    }
    corpus.register_index(BM25_INDEX_NAME, "bm25", [*ARRAY_FILES.values(), *TERM_FILES.values()], params)


Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]  # term ids, rows, tfs of one chunk, sorted by term


def _tokenize_in_chunks(
    texts: Iterable[str], spill: Path | None, *, progress: bool, total: int | None
) -> tuple[dict[str, int], np.ndarray, list[Chunk]]:
    """Tokenize rows in order; every ``CHUNK_POSTINGS`` postings, sort the chunk by term.

    A chunk is kept in memory (no ``spill``) or written to the ``spill`` folder and memory-mapped back.
    """
    vocabulary: dict[str, int] = {}
    lengths = array("i")
    chunks: list[Chunk] = []
    terms, rows, tfs = array("q"), array("i"), array("f")

    def flush() -> None:
        term_ids = np.frombuffer(terms, np.int64)
        order = np.argsort(term_ids, kind="stable")  # stable: rows stay ascending within a term
        parts: Chunk = (
            term_ids[order],
            np.frombuffer(rows, np.int32)[order],
            np.frombuffer(tfs, np.float32)[order],
        )
        if spill is None:
            chunks.append(parts)
        else:
            paths = [spill / f"chunk{len(chunks)}-{name}.npy" for name in ("terms", "rows", "tfs")]
            for path, part in zip(paths, parts, strict=True):
                np.save(path, part)
            loaded = [np.load(path, mmap_mode="r") for path in paths]
            chunks.append((loaded[0], loaded[1], loaded[2]))
        del term_ids, order, parts  # views of the buffers must go before the buffers can be emptied
        del terms[:], rows[:], tfs[:]

    for row, text in enumerate(
        tqdm(texts, desc="bm25 tokenizing", unit="doc", total=total, disable=not progress)
    ):
        tokens = tokenize(text)
        lengths.append(len(tokens))
        bag = Counter(tokens)
        terms.extend(vocabulary.setdefault(t, len(vocabulary)) for t in bag)
        rows.extend([row] * len(bag))
        tfs.extend(bag.values())
        if len(terms) >= CHUNK_POSTINGS:
            flush()
    if len(terms) or not chunks:
        flush()
    return vocabulary, np.frombuffer(lengths, np.int32).copy(), chunks


def _merge_chunks(chunks: list[Chunk], n_terms: int, out_rows: np.ndarray, out_tfs: np.ndarray) -> np.ndarray:
    """Write the chunks' postings term by term into ``out_rows``/``out_tfs``; the term offsets.

    Chunks hold consecutive rows, so a term's postings, taken chunk after chunk, stay ascending.
    """

    def count(terms: np.ndarray) -> np.ndarray:
        return np.bincount(terms, minlength=n_terms).astype(np.int64)

    totals = np.zeros(n_terms, np.int64)
    for chunk in chunks:  # two passes of counting: one count array at a time, however many chunks
        totals += count(chunk[0])
    offsets = np.concatenate([[0], np.cumsum(totals)]).astype(np.int64)
    cursor = offsets[:-1].copy()  # where the next posting of each term goes
    for terms_of_chunk, rows, tfs in chunks:
        terms = np.asarray(terms_of_chunk)
        chunk_count = count(terms)
        chunk_start = np.concatenate([[0], np.cumsum(chunk_count)])
        destination = np.arange(terms.size, dtype=np.int64)  # in place: one chunk-sized temporary at a time
        destination -= chunk_start[terms]
        destination += cursor[terms]
        out_rows[destination] = rows
        out_tfs[destination] = tfs
        cursor += chunk_count
    return offsets


def build_bm25_index(corpus: Corpus, *, progress: bool = True, k1: float = 1.5, b: float = 0.75) -> BM25Index:
    """Build and persist the BM25 index of a corpus (same text as the embeddings: title, then text).

    Streams the texts batch by batch and spills sorted chunks of postings next to the index, so the
    build holds one chunk and the vocabulary in memory; returns the index loaded from disk (mapped).
    """
    corpus.index_dir.mkdir(exist_ok=True)
    spill = Path(tempfile.mkdtemp(prefix="bm25-build-", dir=corpus.index_dir))
    try:
        texts = (text for batch in corpus.iter_texts() for text in batch)
        vocabulary, doc_lengths, chunks = _tokenize_in_chunks(
            texts, spill, progress=progress, total=len(corpus)
        )
        if doc_lengths.size != len(corpus):
            raise CorpusError(
                f"bm25: read {doc_lengths.size} texts from {corpus.path}, expected {len(corpus)}"
            )
        n_postings = sum(chunk[0].size for chunk in chunks)
        paths = {name: corpus.path / rel for name, rel in ARRAY_FILES.items()}
        tmp = {name: path.with_name(path.name + ".tmp.npy") for name, path in paths.items()}
        rows = np.lib.format.open_memmap(tmp["rows"], mode="w+", dtype=np.int32, shape=(n_postings,))
        tfs = np.lib.format.open_memmap(tmp["tfs"], mode="w+", dtype=np.float32, shape=(n_postings,))
        offsets = _merge_chunks(chunks, len(vocabulary), rows, tfs)
        rows.flush()
        tfs.flush()
        del rows, tfs, chunks
        np.save(tmp["offsets"], offsets)
        np.save(tmp["doc_lengths"], doc_lengths)
        np.save(tmp["prefix_lengths"], np.concatenate([[0], np.cumsum(doc_lengths, dtype=np.int64)]))
        for name, path in paths.items():
            tmp[name].replace(path)
        _save_terms(corpus.path, vocabulary)
    finally:  # a failed build leaves no spill folder and no half-written arrays behind
        shutil.rmtree(spill, ignore_errors=True)
        for leftover in corpus.index_dir.glob("bm25-*.tmp.npy"):
            leftover.unlink(missing_ok=True)
    _register(corpus, k1, b)
    return BM25Index.load(corpus, verify=False)
