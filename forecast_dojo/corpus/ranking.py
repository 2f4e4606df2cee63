"""Ranking primitives shared by every retriever: the protocol and deterministic top-k.

Every retriever in this package returns ``[(row, score), ...]`` best first with ties broken by row
(earlier document first), so the same query at the same cutoff always yields the same list.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Retriever(Protocol):
    """Ranks visible rows for a query. ``search`` returns ``[(row, score), ...]`` best first.

    Only rows ``< n_visible`` may be returned: the visible set at a cutoff is that prefix.
    """

    name: str

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` rows among the first ``n_visible`` as ``(row, score)``, best first."""
        ...


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


def rank_candidates(rows: np.ndarray, scores: np.ndarray, top_k: int) -> list[tuple[int, float]]:
    """Top-k of explicit (row, score) candidates, by score descending then row; duplicates and -1 dropped."""
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    keep = rows >= 0
    rows, scores = rows[keep], scores[keep]
    if rows.size == 0 or top_k <= 0:
        return []
    order = np.lexsort((rows, -scores))
    rows, scores = rows[order], scores[order]
    _, first = np.unique(rows, return_index=True)
    first.sort()
    return [(int(rows[i]), float(scores[i])) for i in first[:top_k]]
