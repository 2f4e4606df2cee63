"""The temporal gateway, adversarially: no document at or after the cutoff is ever visible."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_dojo.corpus import HashingEmbedder
from forecast_dojo.corpus.retrieval import ExactDenseRetriever
from forecast_dojo.gateway import TemporalGateway
from forecast_dojo.timeutil import to_micros

T0 = datetime(2030, 1, 1, tzinfo=UTC)
WORDS = [
    "harbor",
    "act",
    "vote",
    "poll",
    "tolvanen",
    "weather",
    "rain",
    "final",
    "passed",
    "wins",
    "ostrava",
    "day",
]


@settings(max_examples=200, deadline=None)
@given(
    offset_minutes=st.integers(min_value=-60 * 24, max_value=62 * 24 * 60),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    top_k=st.integers(1, 40),
)
def test_no_visible_document_at_or_after_the_cutoff(tiny_corpus, offset_minutes, words, top_k):
    cutoff = T0 + timedelta(minutes=offset_minutes)
    view = TemporalGateway(tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder())).at(cutoff)
    rows = [row for row, _ in view.search(" ".join(words), top_k)]
    assert len(rows) == min(top_k, view.n_visible)
    for row in rows:
        assert tiny_corpus.available_us[row] < to_micros(cutoff)
    for doc_id in ("leak-harbor", "leak-vote", "boundary-harbor", "noise-00", "noise-59"):
        document = view.get(doc_id)
        row = tiny_corpus.row_of(doc_id)
        assert (document is not None) == (tiny_corpus.available_us[row] < to_micros(cutoff))


def test_exact_boundary_is_invisible(tiny_corpus):
    boundary = T0 + timedelta(days=10)
    gateway = TemporalGateway(tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()))
    assert gateway.at(boundary).get("boundary-harbor") is None
    assert gateway.at(boundary + timedelta(microseconds=1)).get("boundary-harbor") is not None


class FutureLeakingRetriever:
    """A broken index that proposes every row, future ones included."""

    name = "broken"

    def __init__(self, n: int) -> None:
        self.n = n

    def search(self, query, n_visible, top_k):
        return [(row, 1.0) for row in range(self.n - 1, -1, -1)][:top_k]


def test_gateway_drops_rows_a_broken_retriever_proposes(tiny_corpus):
    cutoff = T0 + timedelta(days=20)
    view = TemporalGateway(tiny_corpus, FutureLeakingRetriever(len(tiny_corpus))).at(cutoff)
    rows = [row for row, _ in view.search("anything", len(tiny_corpus))]
    assert rows and all(tiny_corpus.available_us[r] < to_micros(cutoff) for r in rows)


def test_hidden_ids_are_excluded_from_search_and_read(tiny_corpus):
    gateway = TemporalGateway(tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()))
    view = gateway.at(T0 + timedelta(days=30), hidden_ids=frozenset({"harbor-05"}))
    assert view.get("harbor-05") is None and view.get("harbor-06") is not None
    rows = [r for r, _ in view.search("Day 5: lawmakers in Valdoria debated the Harbor Act", 50)]
    assert tiny_corpus.row_of("harbor-05") not in rows and len(rows) == 50


def test_env_excludes_screened_documents(make_tiny_env):
    import dataclasses
    import json

    from forecast_dojo.corpus.retrieval import ExactDenseRetriever as Dense
    from forecast_dojo.env import ForecastDojoEnv
    from tests.conftest import tiny_events

    events = tiny_events()
    events[0] = dataclasses.replace(events[0], extra={"excluded_doc_ids": {"0": ["harbor-08"]}})
    env = ForecastDojoEnv(
        events,
        tiny_corpus := make_tiny_env().corpus,
        Dense(tiny_corpus, HashingEmbedder()),
        python_runner=None,
    )
    env.reset("harbor")
    query = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "function": {
                    "name": "search",
                    "arguments": {"query": "Day 8: lawmakers Harbor Act", "top_k": 20},
                }
            }
        ],
    }
    obs, *_ = env.step(query)
    assert "harbor-08" not in {r["id"] for r in json.loads(obs["messages"][0]["content"])}
