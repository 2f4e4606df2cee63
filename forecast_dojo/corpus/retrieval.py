"""Retrievers: ranked rows of a corpus restricted to a visible prefix ``[0, n_visible)``.

A retriever never sees a cutoff, only ``n_visible``; the temporal gateway (``forecast_dojo.gateway``)
turns a cutoff into ``n_visible`` and re-checks every row a retriever returns. Results are
deterministic: ties in score break by row (earlier document first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, runtime_checkable

import numpy as np

from forecast_dojo.corpus.embedders import Embedder
from forecast_dojo.corpus.store import Corpus, CorpusError


@runtime_checkable
class Retriever(Protocol):
    """Ranks visible rows for a query. ``search`` returns ``[(row, score), ...]`` best first."""

    name: str

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]: ...


def top_k_rows(scores: np.ndarray, top_k: int, offset: int = 0) -> list[tuple[int, float]]:
    """Deterministic top-k of a score vector: by score descending, then row ascending."""
    if top_k <= 0 or scores.size == 0:
        return []
    k = min(top_k, scores.size)
    if k < scores.size:
        candidates = np.argpartition(-scores, k - 1)[:k]
        # Include every row tied with the k-th score so the tie-break by row is exact.
        threshold = scores[candidates].min()
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.arange(scores.size)
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    chosen = candidates[order]
    return [(int(row) + offset, float(scores[row])) for row in chosen]


class QueryCache:
    """A small LRU of query embeddings: agents repeat queries, and embedding dominates a search's cost."""

    def __init__(self, embedder: Embedder, size: int = 1024) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, query: str) -> np.ndarray:
        vector = self._cache.get(query)
        if vector is None:
            vector = self.embedder.encode([query])[0]
            self._cache[query] = vector
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(query)
        return vector


class ExactDenseRetriever:
    """Exact inner-product scan of the visible prefix of the embedding matrix (exact, no index)."""

    name = "dense"

    def __init__(self, corpus: Corpus, embedder: Embedder) -> None:
        if embedder.name != corpus.embedder_name:
            raise CorpusError(f"corpus {corpus.path} was embedded with {corpus.embedder_name!r}, not {embedder.name!r}")
        self.corpus = corpus
        self.embed_query = QueryCache(embedder)

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        if n_visible <= 0:
            return []
        vector = self.embed_query(query)
        scores = self.corpus.embeddings[:n_visible] @ vector
        return top_k_rows(scores, top_k)


def make_retriever(kind: str, corpus: Corpus, embedder: Embedder) -> Retriever:
    """The retriever named in an environment spec."""
    if kind == "dense":
        return ExactDenseRetriever(corpus, embedder)
    raise ValueError(f"unknown retriever {kind!r}; known: 'dense'")
