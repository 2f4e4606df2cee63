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


def test_check_distribution_refuses_huge_integers_with_a_short_message():
    with pytest.raises(SchemaError, match="an integer of 401 digits") as err:
        check_distribution([10**400, 0], 2)
    assert len(str(err.value)) < 200
    with pytest.raises(SchemaError, match="an integer of about 5000 digits"):
        check_distribution([10**5000, 0], 2)


def _write_records(tmp_path, change):
    path = save_events(tiny_events(), tmp_path / "events.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    change(records[0])
    path.write_text("\n".join(json.dumps(r) for r in records))
    return path


@pytest.mark.parametrize(
    "field, value, message",
    [
        (
            "cutoffs",
            ["2030-01-01T00:00:00Z", "2030-01-20T00:00:00Z"],
            r"'cutoffs': 2030-01-01T00:00:00Z is before open_at",
        ),
        (
            "cutoffs",
            ["2030-01-11T00:00:00Z", "2030-02-15T00:00:00Z"],
            r"'cutoffs': 2030-02-15T00:00:00Z is after close_at",
        ),
        (
            "resolved_at",
            "2099-01-01T00:00:00Z",
            r"'resolved_at' 2099-01-01T00:00:00Z is more than 1830 days after",
        ),
        ("outcomes", "ABC", r"'outcomes' must be a list of labels, got 'ABC'"),
        ("outcomes", ["Yes", 1], r"'outcomes' must be a list of non-empty label strings"),
        ("outcomes", ["Yes", ""], r"'outcomes' must be a list of non-empty label strings"),
        (
            "extra",
            json.dumps({"excluded_doc_ids": "leak-harbor"}),
            r"excluded_doc_ids'\] must be a list of document ids or an object",
        ),
        (
            "extra",
            json.dumps({"excluded_doc_ids": [1, 2]}),
            r"excluded_doc_ids'\] must be a list of document id strings",
        ),
        (
            "extra",
            json.dumps({"excluded_doc_ids": {"0": "leak"}}),
            r"excluded_doc_ids'\]\['0'\] must be a list",
        ),
        (
            "extra",
            json.dumps({"excluded_doc_ids": {"7": ["leak"]}}),
            r"has key '7'; keys are 'all', a step index 0..2",
        ),
        ("extra", json.dumps([1, 2]), r"'extra' must be a JSON object"),
    ],
)
def test_wrong_events_are_rejected_at_load_naming_the_event_and_field(tmp_path, field, value, message):
    path = _write_records(tmp_path, lambda record: record.__setitem__(field, value))
    with pytest.raises(SchemaError, match=r"event 'harbor': .*" + message):
        load_events(path)


@pytest.mark.parametrize(
    "excluded",
    [
        ["leak-harbor"],
        {"all": ["a"], "0": ["b"], "2": [], "2030-01-21T00:00:00Z": ["c"]},
        {},
    ],
)
def test_valid_exclusions_and_boundary_cutoffs_load(tmp_path, excluded):
    def change(record):
        record["extra"] = json.dumps({"excluded_doc_ids": excluded})
        record["cutoffs"] = [record["open_at"], "2030-01-21T00:00:00Z", record["close_at"]]
        record["resolved_at"] = "2034-12-31T00:00:00Z"  # within five years of the close

    event = load_events(_write_records(tmp_path, change))[0]
    assert event.cutoffs[0] == event.open_at and event.cutoffs[-1] == event.close_at
    assert event.extra["excluded_doc_ids"] == excluded


def test_events_built_in_code_are_checked_too():
    event = tiny_events()[0]
    with pytest.raises(SchemaError, match="'outcomes' must be a list of non-empty label strings, got 'ABC'"):
        dataclasses.replace(event, outcomes="ABC", outcome="A")
    with pytest.raises(SchemaError, match="'close_at' must be an aware datetime"):
        dataclasses.replace(event, close_at=datetime(2030, 2, 1))
    assert dataclasses.replace(event, outcomes=["Yes", "No"]).outcomes == ("Yes", "No")
