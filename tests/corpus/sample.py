"""Generated dated documents with many shared timestamps, for the corpus tests.

Real corpora put dozens of documents on the same instant (every entry of a Wikipedia day page is
available at the end of that day); these samples do the same, so the visibility boundary
``available_at < cutoff`` is exercised where it is easiest to get wrong.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from forecast_dojo.schema import Document
from forecast_dojo.timeutil import UTC

TOPICS = (
    "election parliament vote minister coalition ballot",
    "earthquake tsunami magnitude coast rescue damage",
    "football league cup goal striker champions",
    "inflation interest rate central bank economy prices",
    "vaccine outbreak virus hospital health cases",
    "satellite rocket launch orbit space agency",
    "wildfire drought heat evacuation forest",
    "court ruling judge appeal verdict trial",
)
SAMPLE_START = datetime(2024, 1, 1, tzinfo=UTC)


def sample_documents(n: int, *, n_instants: int | None = None, seed: int = 0) -> list[Document]:
    """``n`` documents over ``n_instants`` distinct day-end instants (default ``n // 5``: ties everywhere)."""
    rng = np.random.default_rng(seed)
    n_instants = max(1, n_instants if n_instants is not None else n // 5)
    days = np.sort(rng.integers(0, n_instants, size=n))
    documents = []
    for i, day in enumerate(days):
        topic = TOPICS[int(rng.integers(len(TOPICS)))].split()
        words = rng.choice(topic, size=int(rng.integers(4, 12))).tolist()
        noise = [f"w{int(x)}" for x in rng.integers(0, 200, size=int(rng.integers(1, 6)))]
        available = SAMPLE_START + timedelta(days=int(day) + 1)
        documents.append(
            Document(
                id=f"doc-{i:06d}",
                title=f"{words[0]} report {i}",
                text=" ".join(words + noise),
                published_at=available - timedelta(hours=int(rng.integers(1, 24))),
                available_at=available,
                source="sample",
            )
        )
    return documents
