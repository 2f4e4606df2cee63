"""Helpers for the events tests: small hand-made events and corpora (hashing embedder, instant)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from forecast_dojo.corpus import HashingEmbedder, build_corpus
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.schema import Document, Event, MarketPoint

T0 = datetime(2030, 1, 1, tzinfo=UTC)
FIXTURES = Path(__file__).parent / "fixtures"


def day(n: float) -> datetime:
    """``n`` days after 2030-01-01T00:00Z."""
    return T0 + timedelta(days=n)


def make_event(
    event_id: str = "e1",
    *,
    question: str = "Will the Valdorian parliament pass the Harbor Act?",
    outcomes: Sequence[str] = ("Yes", "No"),
    outcome: str = "Yes",
    open_day: float = 0,
    close_day: float = 30,
    resolved_day: float | None = None,
    market: Sequence[tuple[float, Sequence[float]]] = (),
    extra: dict[str, Any] | None = None,
) -> Event:
    """An imported-looking event (one step at its open) with an optional market series."""
    return Event(
        id=event_id,
        question=question,
        outcomes=tuple(outcomes),
        outcome=outcome,
        open_at=day(open_day),
        close_at=day(close_day),
        resolved_at=day(close_day if resolved_day is None else resolved_day),
        cutoffs=(day(open_day),),
        market=tuple(MarketPoint(day(d), tuple(p)) for d, p in market),
        extra=dict(extra or {}),
    )


def make_doc(doc_id: str, text: str, available_day: float, title: str = "") -> Document:
    at = day(available_day)
    return Document(doc_id, title, text, at, at, source="test")


def make_corpus(tmp_path: Path, documents: Sequence[Document], name: str = "corpus") -> Corpus:
    return build_corpus(list(documents), tmp_path / name, HashingEmbedder(), progress=False)


@pytest.fixture
def polymarket_export() -> Path:
    return FIXTURES / "polymarket"


@pytest.fixture(scope="session")
def unseen_labels(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The second labelled set with its texts, rebuilt from the shared data (skips without it)."""
    from .unseen_labels import rebuild_unseen_labels

    return rebuild_unseen_labels(data_root, tmp_path_factory.mktemp("unseen") / "leakage_labels_unseen.jsonl")
