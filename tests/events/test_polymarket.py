"""Polymarket importer over hand-written Gamma/CLOB fixture files, including the awkward cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forecast_dojo.events.polymarket import PolymarketError, decode_list, load_polymarket, load_price_history
from forecast_dojo.schema import load_events, save_events

from .conftest import day


@pytest.fixture
def imported(polymarket_export: Path):
    return load_polymarket(polymarket_export, progress=False)


def by_id(result):
    return {e.id: e for e in result.events}


def test_skips_are_counted_by_reason(imported) -> None:
    assert dict(imported.skipped) == {
        "missing_prices": 1,  # 503: no outcomePrices
        "tie": 1,  # 504: 50/50
        "not_closed": 1,  # 505
        "no_winner": 1,  # 506: closed at 0.6/0.4
        "multiple_winners": 1,  # event 9003
        "duplicate_market": 1,  # 501 again in markets/
    }
    assert sorted(by_id(imported)) == [
        "polymarket:501",
        "polymarket:502",
        "polymarket:801",
        "polymarket:event:9001",
    ]
    assert imported.notes["placeholder_markets_dropped"] == 1
    assert imported.notes["no_price_history"] == 1  # 801


def test_negrisk_event_becomes_one_k_outcome_event(imported) -> None:
    event = by_id(imported)["polymarket:event:9001"]
    assert event.outcomes == ("Mira Tolvanen", "Jonas Berg", "Ada Quist")  # placeholder "Person D" dropped
    assert event.outcome == "Mira Tolvanen"
    assert event.question == "Who will win the 2030 Ostrava mayoral election?"
    assert event.open_at == day(0) and event.close_at == day(48)  # endDate 2030-02-18
    assert event.resolved_at > event.close_at  # closedTime a day later
    first = event.market[0]
    raw = (0.40, 0.35, 0.30)
    assert first.probabilities == pytest.approx(tuple(v / sum(raw) for v in raw))
    assert all(abs(sum(p.probabilities) - 1) < 1e-9 for p in event.market)
    assert event.market[-1].probabilities[0] > first.probabilities[0]
    assert event.extra["market_granularity"] == "trades"
    assert event.tags == ("polymarket", "Politics", "Elections")


def test_binary_market_with_both_token_histories_forward_fills(imported) -> None:
    event = by_id(imported)["polymarket:501"]
    assert event.outcomes == ("Yes", "No") and event.outcome == "Yes"
    # The union of both histories' instants, each normalized.
    assert len(event.market) == 30
    second = event.market[1]  # day 2: yes 0.51, no still 0.50 (its next point is on day 3)
    assert second.probabilities == pytest.approx((0.51 / 1.01, 0.50 / 1.01))
    assert event.url == "https://polymarket.com/market/will-the-valdorian-parliament-pass-the-harbor-act"


def test_single_token_history_is_complemented_and_clipped_at_close(imported) -> None:
    event = by_id(imported)["polymarket:502"]
    assert event.outcome == "No"
    assert event.market[0].probabilities == pytest.approx((0.3, 0.7))
    assert all(p.at <= event.close_at for p in event.market)  # the day-60 point is after the close
    assert len(event.market) == 10  # the non-numeric price was dropped


def test_plain_list_fields_and_no_history(imported) -> None:
    event = by_id(imported)["polymarket:801"]
    assert event.outcome == "No" and event.market == ()
    assert event.extra["market_granularity"] == "none"


def test_events_round_trip_through_an_events_file(imported, tmp_path: Path) -> None:
    path = save_events(imported.events, tmp_path / "pm.jsonl")
    loaded = load_events(path)
    assert [e.id for e in loaded] == [e.id for e in imported.events]
    assert loaded[0].extra == imported.events[0].extra


def test_decode_list_accepts_strings_and_lists_and_names_bad_fields() -> None:
    assert decode_list('["Yes", "No"]', where="x") == ["Yes", "No"]
    assert decode_list(["a"], where="x") == ["a"]
    assert decode_list("", where="x") is None
    with pytest.raises(PolymarketError, match=r"market 9 outcomes: not a JSON list: '\[not json'"):
        decode_list("[not json", where="market 9 outcomes")
    with pytest.raises(PolymarketError, match="expected a list"):
        decode_list('{"a": 1}', where="m")


def test_malformed_files_fail_with_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "bad.json").write_text("{nope")
    with pytest.raises(PolymarketError, match="bad.json"):
        load_polymarket(tmp_path, progress=False)
    (tmp_path / "events" / "bad.json").write_text(json.dumps({"id": "1", "title": "t"}))
    with pytest.raises(PolymarketError, match="no 'markets' list"):
        load_polymarket(tmp_path, progress=False)
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"history": [{"t": 1}]}))
    with pytest.raises(PolymarketError, match=r"history\[0\]"):
        load_price_history(history)


def test_missing_export_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="events/ or markets/"):
        load_polymarket(tmp_path, progress=False)
