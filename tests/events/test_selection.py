"""Selection filters: each one on events built to sit on either side of its threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from forecast_dojo.events.relevance import RelevanceIndex
from forecast_dojo.events.selection import (
    SelectionConfig,
    faithfulness,
    horizon_problem,
    is_english,
    is_personal,
    select_events,
    triviality_numbers,
    triviality_problem,
)

from .conftest import day, make_corpus, make_doc, make_event

CONFIG = SelectionConfig()


def test_horizon_counts_utc_calendar_days_inclusive() -> None:
    assert horizon_problem(make_event(open_day=0, close_day=7.5), CONFIG) is None  # Jan 1 .. Jan 8 = 8 days
    # Jan 1 21:36 .. Jan 8 00:00 still touches 8 calendar days
    assert horizon_problem(make_event(open_day=0.9, close_day=7), CONFIG) is None
    problem = horizon_problem(make_event(open_day=0, close_day=6.99), CONFIG)
    assert problem is not None and "7 UTC days" in problem


def test_faithfulness_applies_only_to_trade_data() -> None:
    sparse = make_event(extra={"market_granularity": "sparse"})
    assert faithfulness(sparse) is None
    days = [f"2030-01-{d:02d}" for d in range(1, 32)]
    full = make_event("full", close_day=30, extra={"market_granularity": "trades", "trade_days": days})
    assert faithfulness(full) == (1.0, 0)
    holes = make_event(
        "holes", close_day=30, extra={"market_granularity": "trades", "trade_days": days[:10] + days[20:]}
    )
    fraction, run = faithfulness(holes)
    assert fraction == pytest.approx(21 / 31) and run == 10
    result = select_events([full, holes], CONFIG, progress=False)
    assert [e.id for e in result.kept] == ["full"]
    assert result.summary()["removed"]["faithfulness"] == 1


def test_unfaithful_run_alone_can_drop_an_event() -> None:
    days = [f"2030-01-{d:02d}" for d in range(1, 32) if not 10 <= d <= 17]  # 8-day gap, 74 % coverage
    event = make_event(close_day=30, extra={"market_granularity": "trades", "trade_days": days})
    config = SelectionConfig(min_faithful_fraction=0.7)
    result = select_events([event], config, progress=False)
    assert result.removed["faithfulness"] == [event.id]
    assert "run of 8 days" in result.reasons[event.id]


def test_near_certain_markets_are_trivial() -> None:
    certain = make_event(outcome="No", market=[(1, (0.03, 0.97)), (10, (0.4, 0.6))])
    assert "0.970" in triviality_problem(certain, CONFIG)
    # the market was sure of the wrong side: hard, not trivial
    contrarian = make_event(outcome="Yes", market=[(1, (0.03, 0.97))])
    assert triviality_problem(contrarian, CONFIG) is None
    no_market = make_event()
    assert triviality_problem(no_market, CONFIG) is None


def test_flat_and_directionless_markets_are_trivial_but_either_alone_is_not() -> None:
    days = (1, 4, 7, 10, 13, 16)
    flat = make_event(
        market=[(d, (0.50 + 0.01 * (i % 3), 0.50 - 0.01 * (i % 3))) for i, d in enumerate(days)]
    )
    assert "flat" in triviality_problem(flat, CONFIG)
    # moves, then ends where it began
    wandering = make_event(market=[(d, (0.7, 0.3)) if d == 7 else (d, (0.5, 0.5)) for d in days])
    assert triviality_problem(wandering, CONFIG) is None
    drifting = make_event(market=[(d, (0.50 + 0.008 * i, 0.50 - 0.008 * i)) for i, d in enumerate(days)])
    assert triviality_problem(drifting, CONFIG) is None  # small range but a clear direction


def test_sparse_series_are_never_called_flat() -> None:
    # Three snapshots two weeks apart that agree: nothing is known about the days between them.
    sparse = make_event(close_day=60, market=[(1, (0.15, 0.85)), (15, (0.15, 0.85)), (29, (0.16, 0.84))])
    assert triviality_problem(sparse, CONFIG) is None
    numbers = triviality_numbers(sparse, CONFIG)
    assert numbers["points"] == 3 and numbers["dense"] is False and numbers["max_gap_days"] == 14.0


def test_near_certainty_is_judged_at_the_first_forecast_date() -> None:
    # The only snapshot lies 40 days after the first forecast date: the belief there is unknown.
    late = make_event(close_day=60, outcome="No", market=[(41, (0.02, 0.98))])
    assert "0.980" in triviality_problem(late, CONFIG)  # the old rule: first observation
    assert triviality_problem(late, CONFIG, day(1)) is None
    assert triviality_numbers(late, CONFIG, day(1))["first_belief"] is None
    # A belief at or shortly after the first date decides.
    assert "first forecast date" in triviality_problem(late, CONFIG, day(40))
    early = make_event(close_day=60, outcome="No", market=[(2, (0.03, 0.97)), (30, (0.5, 0.5))])
    assert triviality_problem(early, CONFIG, day(1)) is not None
    assert triviality_problem(early, CONFIG, day(20)) is not None  # the latest belief at day 20 is 0.97
    assert triviality_problem(early, CONFIG, day(31)) is None  # by day 31 the market moved to 0.5


def test_points_in_the_buffer_before_close_are_ignored() -> None:
    # The only informative point is inside the two-day buffer, where no forecast is made.
    event = make_event(close_day=30, outcome="Yes", market=[(5, (0.5, 0.5)), (29, (0.99, 0.01))])
    assert triviality_problem(event, CONFIG) is None


@pytest.mark.parametrize(
    ("question", "english"),
    [
        ("Will Bitcoin close 2025 higher than it started?", True),
        ("¿Cerrará Bitcoin el 2025 más alto de lo que empezó?", False),
        ("¿Crecerá la economía de España más que la de la Eurozona entre el Q3 2024 y el Q3 2025?", False),
        ("Wird die AfD bei der Wahl in Sachsen die meisten Stimmen gewinnen?", False),
        ("Will the Pope die before 2026?", True),
        ("Будет ли заключено перемирие?", False),
    ],
)
def test_language_rule(question: str, english: bool) -> None:
    assert is_english(question) is english


@pytest.mark.parametrize(
    ("question", "personal"),
    [
        ("Will my video game be released by the end of 2025?", True),
        ("Will I finish my thesis this year?", True),
        ("Will I'm-fine memes trend?", False),
        ("Will Springsteen: Deliver Me from Nowhere win Best Costume Design?", False),
        ("Will World War I records be declassified?", False),
        ("Will the Phase I trial report results by June?", False),
        ("Will Elon Musk step down from being Tesla CEO by the end of 2025?", False),
    ],
)
def test_personal_rule(question: str, personal: bool) -> None:
    assert is_personal(question) is personal


def test_evidence_needs_enough_matching_documents_before_the_close(tmp_path: Path) -> None:
    docs = [
        make_doc(f"harbor-{d}", f"Valdoria lawmakers debate the Harbor Act, day {d}.", d) for d in (5, 10, 15)
    ]
    docs += [make_doc("late", "Valdoria Harbor Act news after the last forecast date.", 29)]
    docs += [make_doc(f"noise-{d}", f"Mild weather in Ostrava, day {d}.", d) for d in range(20)]
    index = RelevanceIndex(make_corpus(tmp_path, docs))
    covered = make_event("covered", question="Will Valdoria pass the Harbor Act?", close_day=30)
    thin = make_event("thin", question="Will Ostrava open its new metro line?", close_day=30)
    result = select_events(
        [covered, thin], SelectionConfig(evidence_min_documents=3), index=index, progress=False
    )
    assert [e.id for e in result.kept] == ["covered"]
    assert result.removed["evidence"] == ["thin"]
    assert result.evidence_scores == {"covered": 3, "thin": 0}  # "late" is inside the buffer
    strict = select_events([covered], SelectionConfig(evidence_min_documents=4), index=index, progress=False)
    assert strict.removed["evidence"] == ["covered"]


def test_a_judge_replaces_the_count(tmp_path: Path) -> None:
    docs = [make_doc(f"harbor-{d}", f"Valdoria debates the Harbor Act, day {d}.", d) for d in range(1, 6)]
    index = RelevanceIndex(make_corpus(tmp_path, docs))
    event = make_event(question="Will Valdoria pass the Harbor Act?", close_day=30)
    seen: list[list[str]] = []

    def judge(e, documents):
        seen.append([doc_id for doc_id, _, _ in documents])
        return False

    result = select_events([event], CONFIG, index=index, judge=judge, progress=False)
    assert result.removed["evidence"] == [event.id]
    assert seen == [[f"harbor-{d}" for d in range(1, 6)]]


def test_filters_run_in_order_and_without_a_corpus_evidence_is_not_run() -> None:
    events = [
        make_event(
            "spanish",
            question="¿Será la película con mayor recaudación mundial en 2025 parte de una franquicia?",
            close_day=3,
        ),
        make_event("short", close_day=3),
        make_event("fine", close_day=30),
    ]
    result = select_events(events, CONFIG, progress=False)
    assert result.removed["language"] == ["spanish"]  # also too short, but language runs first
    assert result.removed["horizon"] == ["short"]
    assert [e.id for e in result.kept] == ["fine"]
    assert result.summary()["not_run"] == ["evidence"]
