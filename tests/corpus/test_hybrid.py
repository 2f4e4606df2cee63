"""Reciprocal rank fusion: the arithmetic, determinism and tie-breaking."""

from __future__ import annotations

import pytest

from forecast_dojo.corpus.hybrid import HybridRetriever, reciprocal_rank_fusion


class FixedRetriever:
    """Returns a fixed ranking, filtered to the visible prefix and cut at top_k."""

    name = "fixed"

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows
        self.calls: list[tuple[int, int]] = []

    def search(self, query: str, n_visible: int, top_k: int) -> list[tuple[int, float]]:
        self.calls.append((n_visible, top_k))
        return [(r, 1.0 / (i + 1)) for i, r in enumerate(r for r in self.rows if r < n_visible)][:top_k]


def test_rrf_scores_are_sums_of_reciprocal_ranks() -> None:
    fused = reciprocal_rank_fusion([[(5, 0.9), (3, 0.8)], [(3, 12.0), (9, 3.0)]], top_k=10, k=60)
    assert fused == [(3, 1 / 62 + 1 / 61), (5, 1 / 61), (9, 1 / 62)]


def test_rrf_ties_break_by_row_and_top_k_cuts() -> None:
    fused = reciprocal_rank_fusion([[(8, 1.0)], [(2, 1.0)], [(5, 1.0)]], top_k=2)
    assert [r for r, _ in fused] == [2, 5]
    assert reciprocal_rank_fusion([[(1, 1.0)]], top_k=0) == []


def test_hybrid_is_deterministic_and_only_passes_the_visible_prefix() -> None:
    dense, lexical = FixedRetriever([4, 1, 7, 2]), FixedRetriever([2, 9, 4])
    hybrid = HybridRetriever([dense, lexical], depth=20)
    first = hybrid.search("q", 8, 3)
    assert first == hybrid.search("q", 8, 3)
    assert [r for r, _ in first] == [4, 2, 1]  # 4: 1/61 + 1/62 > 2: 1/64 + 1/61 > 1: 1/62
    assert all(call == (8, 20) for call in dense.calls + lexical.calls)
    assert hybrid.search("q", 0, 3) == []
    with pytest.raises(ValueError, match="at least one"):
        HybridRetriever([])
