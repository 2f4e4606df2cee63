"""Retrievers: ranked rows of a corpus restricted to a visible prefix ``[0, n_visible)``.

A retriever never sees a cutoff, only ``n_visible``; the temporal gateway (``forecast_dojo.gateway``)
turns a cutoff into ``n_visible`` and re-checks every row a retriever returns. Results are
deterministic: ties in score break by row (earlier document first).

Kinds: ``dense`` (embeddings through an index from :mod:`forecast_dojo.corpus.index`), ``bm25``
(:mod:`forecast_dojo.corpus.bm25`, visible-only term statistics) and ``hybrid`` (both, fused by
reciprocal rank fusion, :mod:`forecast_dojo.corpus.hybrid`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from forecast_dojo.corpus.bm25 import BM25_INDEX_NAME, BM25Index, build_bm25_index
from forecast_dojo.corpus.embedders import Embedder
from forecast_dojo.corpus.hybrid import HybridRetriever
from forecast_dojo.corpus.index import DenseIndex, build_dense_index, choose_dense_kind, load_dense_index
from forecast_dojo.corpus.ranking import Retriever, top_k_rows
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError

RETRIEVER_KINDS = ("dense", "bm25", "hybrid")

__all__ = [
    "RETRIEVER_KINDS",
    "BM25Retriever",
    "DenseRetriever",
    "ExactDenseRetriever",
    "HybridRetriever",
    "QueryCache",
    "Retriever",
    "build_indexes",
    "make_retriever",
    "top_k_rows",
]


class QueryCache:
    """A small LRU of query embeddings: agents repeat queries, and embedding dominates a search's cost."""

    def __init__(self, embedder: Embedder, size: int = 1024) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, query: str) -> np.ndarray:
        """The query's embedding, from the cache when it was embedded recently."""
        vector = self._cache.get(query)
        if vector is None:
            vector = self.embedder.encode([query])[0]
            self._cache[query] = vector
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(query)
        return vector


class DenseRetriever:
    """Embeds the query (cached) and searches a dense index inside the visible prefix."""

    name = "dense"

    def __init__(self, corpus: Corpus, embedder: Embedder, index: DenseIndex | None = None) -> None:
        corpus.check_embedder(embedder)  # name, dimension, and a probe document's stored vector
        self.corpus = corpus
        self.index = index if index is not None else load_dense_index(corpus, "exact")
        self.embed_query = QueryCache(embedder)

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` visible rows by inner product with the query's embedding."""
        if n_visible <= 0 or top_k <= 0:
            return []
        return self.index.search(self.embed_query(query)[None, :], n_visible, top_k)[0]


class ExactDenseRetriever(DenseRetriever):
    """Exact inner-product scan of the visible prefix (the dense baseline every index is measured against)."""

    def __init__(self, corpus: Corpus, embedder: Embedder) -> None:
        super().__init__(corpus, embedder, load_dense_index(corpus, "exact"))


class BM25Retriever:
    """Lexical BM25 over the visible prefix with visible-only statistics."""

    name = "bm25"

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` visible rows by BM25 score."""
        return self.index.search(query, n_visible, top_k)


def _bm25_for(corpus: Corpus, verify: bool) -> BM25Index:
    """The persisted BM25 index, or one built in memory when the corpus has none (seconds per 100k docs)."""
    if BM25_INDEX_NAME in corpus.indexes():
        return BM25Index.load(corpus, verify=verify)
    texts = (text for batch in corpus.iter_texts() for text in batch)
    return BM25Index.build(texts, progress=len(corpus) > 20_000, total=len(corpus))


def make_retriever(kind: str, corpus: Corpus, embedder: Embedder | None = None, **options: Any) -> Retriever:
    """The retriever named in an environment spec.

    Options: ``index`` (dense and hybrid: ``auto``, ``exact``, ``ivf-flat``, ``ivf-sq8``, ``ivf-pq``;
    ``auto`` uses the persisted dense index, else the exact scan), the search-time IVF options
    ``nprobe``, ``exact_below``, ``rerank``, ``depth`` and ``rrf_k`` (hybrid), ``verify`` (hash index files).
    """
    verify = bool(options.pop("verify", True))
    depth = int(options.pop("depth", 50))
    rrf_k = int(options.pop("rrf_k", 60))
    index_kind = str(options.pop("index", "auto"))
    if kind not in RETRIEVER_KINDS:
        raise ConfigError(f"unknown retriever {kind!r}; known: {RETRIEVER_KINDS}")
    if kind == "bm25":
        if options or index_kind != "auto":
            raise ConfigError(
                f"bm25 takes no dense index options, got {sorted(options) + ['index'] * (index_kind != 'auto')}"
            )
        return BM25Retriever(_bm25_for(corpus, verify))
    if embedder is None:
        raise ConfigError(f"a {kind!r} retriever needs the corpus's embedder ({corpus.embedder_name!r})")
    dense = DenseRetriever(corpus, embedder, load_dense_index(corpus, index_kind, verify=verify, **options))
    if kind == "dense":
        return dense
    return HybridRetriever([dense, BM25Retriever(_bm25_for(corpus, verify))], depth=depth, k=rrf_k)


def build_indexes(
    corpus: Corpus,
    *,
    dense: str | None = "auto",
    bm25: bool = True,
    progress: bool = True,
    **dense_options: Any,
) -> dict[str, str]:
    """Build and persist a corpus's search indexes (after ``build_corpus``); returns what was built.

    ``dense="auto"`` chooses by size (:func:`forecast_dojo.corpus.index.choose_dense_kind`): the exact
    scan needs no file, larger corpora get an IVF index under ``index/``. ``None`` skips dense.
    """
    built: dict[str, str] = {}
    if dense is not None:
        kind = choose_dense_kind(len(corpus)) if dense == "auto" else dense
        build_dense_index(corpus, kind, progress=progress, **dense_options)
        built["dense"] = kind
    if bm25:
        build_bm25_index(corpus, progress=progress)
        built["bm25"] = BM25_INDEX_NAME
    return built
