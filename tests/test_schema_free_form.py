"""Free-form questions in the events schema: an answer and aliases, no fixed outcomes; checked and loaded."""

from __future__ import annotations

import dataclasses
import json

import pytest

from forecast_dojo.schema import (
    MAX_LABEL_CHARS,
    Event,
    MarketPoint,
    SchemaError,
    event_to_record,
    load_events,
    save_events,
)
from tests.conftest import tiny_events


def free_form(**changes) -> Event:
    base = dataclasses.replace(
        tiny_events()[0], id="ff", outcomes=(), outcome="Valdoria Post", market=(), aliases=("The Post",)
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_free_form_questions_round_trip_beside_fixed_ones(tmp_path, suffix):
    events = [*tiny_events(), free_form()]
    path = save_events(events, tmp_path / f"events{suffix}")
    loaded = load_events(path)
    assert loaded == events
    assert (
        loaded[-1].free_form and loaded[-1].answer == "Valdoria Post" and loaded[-1].aliases == ("The Post",)
    )
    assert not loaded[0].free_form and loaded[0].aliases == ()
    record = event_to_record(loaded[-1])
    assert record["outcomes"] == [] and "outcome" not in record and record["answer"] == "Valdoria Post"
    assert "aliases" not in event_to_record(loaded[0])  # fixed-outcome records are written as before


def test_free_form_has_no_outcome_index():
    with pytest.raises(SchemaError, match="no outcome index"):
        _ = free_form().outcome_index


@pytest.mark.parametrize(
    "change, message",
    [
        ({"outcome": "  "}, "non-empty label"),
        ({"outcome": "x" * (MAX_LABEL_CHARS + 1)}, "'answer'"),
        ({"aliases": "The Post"}, "'aliases' must be a list"),
        ({"aliases": ("",)}, "non-empty labels"),
        ({"market": (MarketPoint(tiny_events()[0].open_at, (1.0,)),)}, "no fixed outcomes to price"),
    ],
)
def test_bad_free_form_questions_are_refused(change, message):
    with pytest.raises(SchemaError, match=message):
        free_form(**change)


def test_aliases_on_a_fixed_outcome_question_are_refused():
    with pytest.raises(SchemaError, match="'aliases' is for free-form"):
        dataclasses.replace(tiny_events()[0], aliases=("Aye",))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"outcomes": ["A", "B"]}, "no 'outcomes' or 'outcome'"),
        ({"outcome": "A"}, "no 'outcomes' or 'outcome'"),
        ({"answer": 3}, "'answer' must be a string"),
        ({"aliases": "The Post"}, "'aliases' must be a list"),
    ],
)
def test_bad_free_form_records_name_file_line_and_field(tmp_path, change, message):
    record = event_to_record(free_form())
    record.update(change)
    if "outcome" in change:
        record["outcomes"] = []
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(event_to_record(tiny_events()[0])) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(SchemaError, match=message) as err:
        load_events(path)
    assert f"{path}:2" in str(err.value) and "'ff'" in str(err.value)


def test_aliases_without_an_answer_are_refused_at_load(tmp_path):
    record = event_to_record(tiny_events()[0]) | {"aliases": ["Aye"]}
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(SchemaError, match=r"events.jsonl:1: .*'aliases' is for free-form"):
        load_events(path)
