"""The temporal gateway: the one place that decides which documents an agent may see.

Visibility rule: a document is visible at a step iff ``available_at < cutoff`` (strictly). Every
path from the corpus to the agent (search results, snippets, reads) goes through a
:class:`CutoffView`, which re-checks each row a retriever proposes, so a buggy or approximate index
can drop results but can never surface a future document.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from forecast_dojo.corpus.retrieval import Retriever
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import LeakageError as LeakageError
from forecast_dojo.errors import StateError
from forecast_dojo.timeutil import to_micros


@dataclass(frozen=True)
class VisibleDocument:
    """A document the agent may see at this cutoff, with its corpus row."""

    row: int
    doc_id: str
    title: str
    text: str
    source: str | None
    url: str | None
    available_us: int
    published_us: int


class CutoffView:
    """The corpus as it was just before one cutoff."""

    def __init__(
        self,
        corpus: Corpus,
        retriever: Retriever | None,
        cutoff: datetime,
        published_us: np.ndarray,
        hidden_ids: frozenset[str] = frozenset(),
    ) -> None:
        self.corpus = corpus
        self.retriever = retriever
        self.cutoff_us = to_micros(cutoff)
        self.n_visible = corpus.n_visible(self.cutoff_us)
        self.published_us = published_us
        self.hidden_rows = frozenset(r for r in (corpus.row_of(i) for i in hidden_ids) if r is not None)

    def is_visible(self, row: int) -> bool:
        """Available strictly before the cutoff, and not excluded for this event (leakage screen)."""
        return (
            0 <= row < self.n_visible
            and int(self.corpus.available_us[row]) < self.cutoff_us
            and row not in self.hidden_rows
        )

    def assert_before_cutoff(self, available_us: int) -> None:
        """The last line of defence: fail loudly if anything at or after the cutoff was exposed."""
        if available_us >= self.cutoff_us:
            raise LeakageError(f"exposed text available at {available_us} >= cutoff {self.cutoff_us}")

    def search(self, query: str, top_k: int) -> list[tuple[int, float]]:
        """Rows and scores of visible documents for a query; rows outside the view are dropped."""
        if self.retriever is None:
            raise StateError("this view has no retriever")
        # Ask for a few more when some rows are hidden for this event, so hiding does not shorten lists.
        hits = self.retriever.search(query, self.n_visible, top_k + len(self.hidden_rows))
        return [(row, score) for row, score in hits if self.is_visible(row)][:top_k]

    def get(self, doc_id: str) -> VisibleDocument | None:
        """A visible document by id, or None when it is unknown or not yet available (indistinguishably)."""
        row = self.corpus.row_of(doc_id)
        if row is None or not self.is_visible(row):
            return None
        return VisibleDocument(
            row=row,
            doc_id=doc_id,
            title=self.corpus.field("title", row) or "",
            text=self.corpus.text(row),
            source=self.corpus.field("source", row),
            url=self.corpus.field("url", row),
            available_us=int(self.corpus.available_us[row]),
            published_us=int(self.published_us[row]),
        )


class TemporalGateway:
    """Hands out :class:`CutoffView` objects for one corpus and retriever."""

    def __init__(self, corpus: Corpus, retriever: Retriever | None) -> None:
        self.corpus = corpus
        self.retriever = retriever
        self.published_us = corpus.published_us  # memory-mapped int64 micros, read per row

    def at(self, cutoff: datetime, hidden_ids: frozenset[str] = frozenset()) -> CutoffView:
        """The corpus as seen just before ``cutoff``; ``hidden_ids`` are excluded for this event."""
        return CutoffView(self.corpus, self.retriever, cutoff, self.published_us, hidden_ids)
