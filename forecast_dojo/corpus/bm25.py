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
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass
class BM25Index:
    """Posting lists in row order (``rows``/``tfs`` sliced by ``offsets``), per-row lengths, vocabulary."""

    vocabulary: dict[str, int]
    offsets: np.ndarray  # int64, len(vocabulary) + 1
    rows: np.ndarray  # int32, postings of term t at rows[offsets[t]:offsets[t+1]], ascending
    tfs: np.ndarray  # float32, term frequencies aligned with rows
    doc_lengths: np.ndarray  # int32 tokens per row
    k1: float = 1.5
    b: float = 0.75
    kind: str = "bm25"

    def __post_init__(self) -> None:
        self.prefix_lengths = np.concatenate([[0], np.cumsum(self.doc_lengths, dtype=np.int64)])

    @classmethod
    def build(
        cls, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75, progress: bool = True
    ) -> BM25Index:
        """Tokenize every row in order and lay out its postings (stable sort keeps rows ascending)."""
        vocabulary: dict[str, int] = {}
        term_ids: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        lengths = np.zeros(len(texts), dtype=np.int32)
        for row, text in enumerate(tqdm(texts, desc="bm25 tokenizing", unit="doc", disable=not progress)):
            tokens = tokenize(text)
            lengths[row] = len(tokens)
            bag = Counter(tokens)
            term_ids.append(
                np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in bag), np.int64, len(bag))
            )
            counts.append(np.fromiter(bag.values(), np.float32, len(bag)))
        per_row = np.fromiter((ids.size for ids in term_ids), np.int64, len(term_ids))
        all_terms = np.concatenate(term_ids) if term_ids else np.zeros(0, np.int64)
        all_rows = np.repeat(np.arange(len(texts), dtype=np.int32), per_row)
        all_tfs = np.concatenate(counts) if counts else np.zeros(0, np.float32)
        order = np.argsort(all_terms, kind="stable")
        offsets = np.concatenate([[0], np.cumsum(np.bincount(all_terms, minlength=len(vocabulary)))]).astype(
            np.int64
        )
        return cls(vocabulary, offsets, all_rows[order], all_tfs[order], lengths, k1=k1, b=b)

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
            postings = self.rows[self.offsets[term] : self.offsets[term + 1]]
            df = int(np.searchsorted(postings, n, side="left"))  # visible documents containing the term
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            rows = postings[:df]
            tf = self.tfs[self.offsets[term] : self.offsets[term] + df].astype(np.float64)
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
        """Approximate resident size of the index: its arrays plus the vocabulary strings."""
        arrays = (self.offsets, self.rows, self.tfs, self.doc_lengths, self.prefix_lengths)
        return int(sum(a.nbytes for a in arrays) + sum(len(t) + 60 for t in self.vocabulary))

    # --- persistence -----------------------------------------------------------------------------

    def save(self, corpus: Corpus) -> None:
        """Write ``index/bm25.npz`` and ``index/bm25-vocabulary.json`` and record them in the manifest."""
        if self.doc_lengths.size != len(corpus):
            raise CorpusError(
                f"bm25 index has {self.doc_lengths.size} rows, corpus {corpus.path} has {len(corpus)}"
            )
        corpus.index_dir.mkdir(exist_ok=True)
        arrays = corpus.index_dir / "bm25.npz"
        vocab = corpus.index_dir / "bm25-vocabulary.json"
        tmp = arrays.with_name("bm25.tmp.npz")
        np.savez(tmp, offsets=self.offsets, rows=self.rows, tfs=self.tfs, doc_lengths=self.doc_lengths)
        tmp.replace(arrays)
        terms = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        vocab_tmp = vocab.with_name(vocab.name + ".tmp")
        vocab_tmp.write_text(json.dumps(terms, ensure_ascii=False))
        vocab_tmp.replace(vocab)
        params: dict[str, Any] = {"k1": self.k1, "b": self.b, "tokenizer": "unicode-words-lower-stopwords-v1"}
        corpus.register_index(
            BM25_INDEX_NAME, "bm25", ["index/bm25.npz", "index/bm25-vocabulary.json"], params
        )

    @classmethod
    def load(cls, corpus: Corpus, *, verify: bool = True) -> BM25Index:
        """The persisted BM25 index of a corpus, checked against the manifest."""
        entry = corpus.index_entry(BM25_INDEX_NAME, verify=verify)
        if entry["params"].get("tokenizer") != "unicode-words-lower-stopwords-v1":
            raise CorpusError(
                f"{corpus.path}: bm25 index uses tokenizer {entry['params'].get('tokenizer')!r}, unknown here"
            )
        with np.load(corpus.index_dir / "bm25.npz") as data:
            arrays = {name: data[name] for name in ("offsets", "rows", "tfs", "doc_lengths")}
        terms = json.loads((corpus.index_dir / "bm25-vocabulary.json").read_text())
        if arrays["offsets"].size != len(terms) + 1 or arrays["doc_lengths"].size != len(corpus):
            raise CorpusError(
                f"{corpus.path}: bm25 index arrays do not match its vocabulary or the corpus size"
            )
        return cls(
            {t: i for i, t in enumerate(terms)}, k1=entry["params"]["k1"], b=entry["params"]["b"], **arrays
        )


def build_bm25_index(corpus: Corpus, *, progress: bool = True, k1: float = 1.5, b: float = 0.75) -> BM25Index:
    """Build and persist the BM25 index of a corpus (same text as the embeddings: title, then text)."""
    index = BM25Index.build(corpus.texts(), k1=k1, b=b, progress=progress)
    index.save(corpus)
    return index
