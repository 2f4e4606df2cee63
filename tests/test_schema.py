"""The data model: validation, and the events file round trip (JSONL and parquet)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from forecast_dojo.schema import Document, SchemaError, check_distribution, load_events, save_events
from tests.conftest import tiny_events

T = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_events_round_trip(tmp_path, suffix):
    events = tiny_events()
    events[1] = dataclasses.replace(events[1], extra={"excluded_doc_ids": {"0": ["a"]}}, tags=("politics",))
    path = save_events(events, tmp_path / f"events{suffix}")
    loaded = load_events(path)
    assert loaded == events and loaded[1].extra == {"excluded_doc_ids": {"0": ["a"]}}
    assert loaded[0].market_at(events[0].cutoffs[0]) == events[0].market_at(events[0].cutoffs[0])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"outcomes": ("Yes",), "outcome": "Yes"}, "K >= 2"),
        ({"outcomes": ("Yes", "Yes")}, "K >= 2"),
        ({"outcome": "Maybe"}, "not one of"),
        ({"cutoffs": ()}, "no forecast cutoffs"),
        ({"cutoffs": (T + timedelta(days=20), T + timedelta(days=10))}, "strictly increasing"),
        ({"resolved_at": T}, "open_at <= close_at <= resolved_at"),
        ({"question": "  "}, "empty question"),
    ],
)
def test_invalid_events_are_rejected(change, message):
    with pytest.raises(SchemaError, match=message):
        dataclasses.replace(tiny_events()[0], **change)


def test_bad_records_name_the_event_and_field(tmp_path):
    path = save_events(tiny_events(), tmp_path / "events.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    del records[1]["outcome"]
    path.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(SchemaError, match=r"'mayor'.*outcome"):
        load_events(path)
    records[1]["outcome"] = "Mira Tolvanen"
    records[0]["format_version"] = 99
    path.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(SchemaError, match="format_version 99"):
        load_events(path)
    path.write_text("{not json")
    with pytest.raises(SchemaError, match=":1: not JSON"):
        load_events(path)
    with pytest.raises(SchemaError, match="duplicate event ids"):
        save_events([tiny_events()[0]] * 2, tmp_path / "dup.jsonl")
    with pytest.raises(SchemaError, match=".jsonl or .parquet"):
        save_events(tiny_events(), tmp_path / "events.csv")


def test_documents_need_aware_dates_text_and_order():
    with pytest.raises(SchemaError, match="aware datetime"):
        Document("d", "", "text", datetime(2030, 1, 1), T)
    with pytest.raises(SchemaError, match="text"):
        Document("d", "", " ", T, T)
    with pytest.raises(SchemaError, match="precedes"):
        Document("d", "", "text", T, T - timedelta(seconds=1))


def test_check_distribution():
    assert check_distribution([0.3334, 0.3333, 0.3334], 3) == pytest.approx((1 / 3,) * 3, abs=1e-4)
    for bad in ([0.5], [0.5, float("inf")], [True, 0.0], [0.2, 0.2]):
        with pytest.raises(SchemaError):
            check_distribution(bad, 2)
