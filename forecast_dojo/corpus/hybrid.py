"""Hybrid retrieval: dense and BM25 rankings fused by reciprocal rank fusion (RRF).

RRF needs no score calibration between a cosine similarity and a BM25 score: a row's fused score
is ``sum over rankers of 1 / (k + rank)`` (rank from 1). Each ranker sees the same ``n_visible``,
so the fusion can only reorder visible rows. Deterministic: fused ties break by row.
"""

from __future__ import annotations

from collections.abc import Sequence

from forecast_dojo.corpus.ranking import Retriever
from forecast_dojo.errors import ConfigError

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[tuple[int, float]]], top_k: int, k: int = RRF_K
) -> list[tuple[int, float]]:
    """Fuse best-first ``(row, score)`` lists; returns ``(row, fused score)`` best first, ties by row."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (row, _) in enumerate(ranking, start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    return ordered[: max(top_k, 0)]


class HybridRetriever:
    """Dense + lexical retrieval fused with RRF over the top ``depth`` rows of each."""

    name = "hybrid"

    def __init__(self, retrievers: Sequence[Retriever], *, depth: int = 50, k: int = RRF_K) -> None:
        if not retrievers:
            raise ConfigError("hybrid retrieval needs at least one retriever")
        self.retrievers = list(retrievers)
        self.depth = depth
        self.k = k

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` visible rows by reciprocal-rank fusion of every retriever's ranking."""
        if n_visible <= 0 or top_k <= 0:
            return []
        depth = max(self.depth, top_k)
        rankings = [retriever.search(query, n_visible, depth) for retriever in self.retrievers]
        return reciprocal_rank_fusion(rankings, top_k, self.k)
