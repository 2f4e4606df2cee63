"""The data model: validation, and the events file round trip (JSONL and parquet)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from forecast_dojo.schema import (
    MAX_EVENT_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_LABELS_TOTAL_CHARS,
    MAX_OUTCOMES,
    MAX_QUESTION_CHARS,
    MAX_TEXT_CHARS,
    Document,
    SchemaError,
    check_distribution,
    event_to_record,
    load_events,
    save_events,
)
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
    with pytest.raises(SchemaError, match="title and date_source must be strings"):
        Document("d", None, "text", T, T)  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="url must be a string or None, got 5"):
        Document("d", "", "text", T, T, url=5)  # type: ignore[arg-type]


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


# ---------------------------------------------------------------- bad input: file, line and field named


def _record_line(tmp_path, **changes):
    record = json.loads(save_events(tiny_events()[:1], tmp_path / "one.jsonl").read_text())
    record.update(changes)
    return record


@pytest.mark.parametrize("line", ["[1, 2]", "null", '"harbor"', "42", "true"])
def test_lines_that_are_not_objects_name_the_file_and_line(tmp_path, line):
    good = json.dumps(_record_line(tmp_path))
    path = tmp_path / "events.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(SchemaError, match=r"events\.jsonl:2: an event record must be a JSON object, got"):
        load_events(path)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("field", ["open_at", "resolved_at"])
def test_bare_nan_or_infinity_in_a_date_names_line_and_field(tmp_path, constant, field):
    text = json.dumps(_record_line(tmp_path, **{field: "__X__"})).replace('"__X__"', constant)
    path = tmp_path / "events.jsonl"
    path.write_text("\n" + text + "\n")
    with pytest.raises(
        SchemaError, match=rf"events\.jsonl:2: event 'harbor': field '{field}' must be an ISO 8601"
    ):
        load_events(path)
    text = json.dumps(_record_line(tmp_path, cutoffs=["__X__"])).replace('"__X__"', constant)
    path.write_text(text + "\n")
    with pytest.raises(SchemaError, match=r"events\.jsonl:1: event 'harbor': field 'cutoffs'"):
        load_events(path)


def test_latin1_bytes_name_the_line_and_the_field(tmp_path):
    record = _record_line(tmp_path, background="Caf\u00e9 society in Valdoria")
    path = tmp_path / "events.jsonl"
    good = json.dumps(_record_line(tmp_path, id="first"), ensure_ascii=False).encode("utf-8")
    path.write_bytes(good + b"\n" + json.dumps(record, ensure_ascii=False).encode("latin-1") + b"\n")
    with pytest.raises(
        SchemaError, match=r"events\.jsonl:2: field 'background' is not UTF-8 text \(byte 0xe9"
    ):
        load_events(path)
    path.write_bytes(b'{"id": "x", "quest\xe9ion": \n')  # not even JSON: the line and the byte still
    with pytest.raises(SchemaError, match=r"events\.jsonl:1: is not UTF-8 text \(byte 0xe9 at byte 19"):
        load_events(path)
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\n")  # a UTF-8 byte order mark is fine
    assert load_events(path)[0].id == "first"


def test_lone_surrogates_are_refused(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(_record_line(tmp_path, question="Will \ud800 pass?")) + "\n")
    with pytest.raises(SchemaError, match=r":1: event 'harbor': field 'question' holds a lone surrogate"):
        load_events(path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("tags", "politics", r"field 'tags' must be a list, got 'politics'"),
        ("tags", ["politics", 3], r"field 'tags' must be a list of non-empty strings"),
        ("id", 123, r"field 'id' must be a string, got 123"),
        ("question", ["Will it?"], r"field 'question' must be a string"),
        ("outcome", True, r"field 'outcome' must be a string, got True"),
        ("background", 5, r"field 'background' must be a string, got 5"),
        ("resolution_criteria", {"a": 1}, r"field 'resolution_criteria' must be a string"),
        ("source", ["polymarket"], r"field 'source' must be a string"),
        ("url", 7, r"field 'url' must be a string or null, got 7"),
        ("cutoffs", "2030-01-11T00:00:00Z", r"field 'cutoffs' must be a list"),
        ("open_at", 1_900_000_000, r"field 'open_at' must be an ISO 8601 instant string, got 1900000000"),
        (
            "market",
            [{"at": "2030-01-02T00:00:00Z", "probabilities": ["0.5", "0.5"]}],
            r"must be numbers, got '0.5'",
        ),
        (
            "market",
            [{"at": "2030-01-02T00:00:00Z", "probabilities": [True, False]}],
            r"must be numbers, got True",
        ),
        (
            "market",
            [{"at": "2030-01-02T00:00:00Z", "p": [0.5, 0.5]}],
            r"'market'\[0\] must be an object with 'at'",
        ),
        ("market", {"at": "2030-01-02T00:00:00Z"}, r"field 'market' must be a list of points"),
        ("format_version", True, r"unsupported format_version True"),
        ("extra", "{not json", r"field 'extra' is not valid JSON"),
        ("extra", json.dumps({"text_versions": "v2"}), r"'text_versions'\] must be a list"),
        (
            "extra",
            json.dumps({"text_versions": [{"from": 5, "question": "Q?"}]}),
            r"'text_versions'\]\[0\]\['from'\] must be an ISO 8601 instant",
        ),
        (
            "extra",
            json.dumps({"text_versions": [{"from": "2030-01-05T00:00:00Z", "question": 5}]}),
            r"'text_versions'\]\[0\]\['question'\] must be a string, got 5",
        ),
        (
            "extra",
            json.dumps({"text_versions": [{"from": "2030-01-05T00:00:00Z", "questoin": "Q?"}]}),
            r"'text_versions'\]\[0\] has unknown key\(s\) \['questoin'\]",
        ),
        (
            "extra",
            json.dumps(
                {"text_versions": [{"from": "2030-01-05T00:00:00Z"}, {"from": "2030-01-04T00:00:00Z"}]}
            ),
            r"'text_versions'\] must be in time order",
        ),
    ],
)
def test_wrong_types_are_refused_never_converted(tmp_path, field, value, message):
    path = _write_records(tmp_path, lambda record: record.__setitem__(field, value))
    with pytest.raises(SchemaError, match=r"events\.jsonl:1: event '(harbor|<no id>)': .*" + message):
        load_events(path)


def test_parquet_rows_are_named_and_checked_like_lines(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = save_events(tiny_events(), tmp_path / "events.parquet")
    rows = pq.read_table(path).to_pylist()
    rows[0]["close_at"], rows[1]["close_at"] = 1_900_000_000.0, float("nan")
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(
        SchemaError, match=r"events\.parquet: row 1: event 'harbor': field 'close_at' must be an ISO"
    ):
        load_events(path)
    rows = pq.read_table(save_events(tiny_events(), tmp_path / "tags.parquet")).to_pylist()
    for row in rows:
        row["tags"] = "politics"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(
        SchemaError, match=r"events\.parquet: row 1: event 'harbor': field 'tags' must be a list"
    ):
        load_events(path)
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(SchemaError, match=r"events\.parquet: not a readable parquet file"):
        load_events(path)


def test_duplicate_ids_at_load_name_both_lines(tmp_path):
    line = json.dumps(_record_line(tmp_path))
    path = tmp_path / "events.jsonl"
    path.write_text(f"{line}\n\n{line}\n")
    with pytest.raises(
        SchemaError, match=r"events\.jsonl:3: duplicate event id 'harbor' \(first at .*events\.jsonl:1\)"
    ):
        load_events(path)


# ---------------------------------------------------------------- size limits (the env's observation space)


def _at_limits(extra_chars: dict[str, int] | None = None, k: int = MAX_OUTCOMES):
    """An event at every size limit (plus ``extra_chars`` characters on the named fields)."""
    extra_chars = extra_chars or {}
    width = MAX_LABELS_TOTAL_CHARS // k
    labels = [f"{i:02d}".ljust(width + extra_chars.get("label", 0), "x") for i in range(k)]
    labels[0] = labels[0].ljust(
        min(MAX_LABEL_CHARS, width + MAX_LABELS_TOTAL_CHARS % k) + extra_chars.get("label", 0), "y"
    )
    base = tiny_events()[0]
    return dataclasses.replace(
        base,
        id="e" * (MAX_EVENT_ID_CHARS + extra_chars.get("id", 0)),
        question="Q" * (MAX_QUESTION_CHARS + extra_chars.get("question", 0) - 1) + "?",
        background="b" * (MAX_TEXT_CHARS + extra_chars.get("background", 0)),
        resolution_criteria="r" * MAX_TEXT_CHARS,
        outcomes=tuple(labels),
        outcome=labels[-1],
        market=(),
    )


def test_an_event_at_every_limit_loads(tmp_path):
    event = _at_limits()
    assert len(event.outcomes) == MAX_OUTCOMES and sum(map(len, event.outcomes)) == MAX_LABELS_TOTAL_CHARS
    assert len(event.id) == MAX_EVENT_ID_CHARS and len(event.question) == MAX_QUESTION_CHARS
    assert load_events(save_events([event], tmp_path / "limits.jsonl")) == [event]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"id": 1}, r"field 'id' has 513 characters; the limit is 512"),
        ({"question": 1}, r"field 'question' has 10,001 characters; the limit is 10,000"),
        ({"background": 1}, r"field 'background' has 100,001 characters; the limit is 100,000"),
        ({"label": 1}, r"field 'outcomes' has 2,0\d\d characters in all; the limit is 2,000"),
    ],
)
def test_past_a_limit_is_refused_at_load(tmp_path, change, message):
    path = tmp_path / "events.jsonl"
    record = event_to_record(_at_limits())
    if "label" in change:
        record["outcomes"] = [o + "z" for o in record["outcomes"]]
        record["outcome"] = record["outcomes"][-1]
    for name in ("id", "question", "background"):
        if name in change:
            record[name] = record[name][:-1] + "zz" if name == "question" else record[name] + "z"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(SchemaError, match=r"events\.jsonl:1: event .*" + message):
        load_events(path)


def test_too_many_or_too_long_labels_are_refused():
    base = tiny_events()[0]
    labels = tuple(f"o{i}" for i in range(MAX_OUTCOMES + 1))
    with pytest.raises(SchemaError, match=r"'outcomes' has 65 labels; the limit is 64"):
        dataclasses.replace(base, outcomes=labels, outcome="o0", market=())
    with pytest.raises(SchemaError, match=r"'outcomes' has 201 characters; the limit is 200"):
        dataclasses.replace(base, outcomes=("Yes", "N" * 201), market=())
    with pytest.raises(SchemaError, match=r"'question' has 100,000,000 characters"):
        dataclasses.replace(base, question="Q" * 100_000_000)
    version = {"from": "2030-01-05T00:00:00Z", "background": "b" * (MAX_TEXT_CHARS + 1)}
    with pytest.raises(SchemaError, match=r"'text_versions'\]\[0\]\['background'\] has 100,001 characters"):
        dataclasses.replace(base, extra={"text_versions": [version]})


def test_a_missing_events_file_is_a_forecast_dojo_error(tmp_path):
    from forecast_dojo.errors import ForecastDojoError

    for path in (tmp_path / "none.jsonl", tmp_path):
        with pytest.raises(FileNotFoundError, match="events file not found") as err:
            load_events(path)
        assert isinstance(err.value, ForecastDojoError)


def test_decode_json_text_decodes_strings_only_and_raises_the_callers_error() -> None:
    from forecast_dojo.schema import decode_json_text

    assert decode_json_text('{"a": [1, 2]}', lambda err: ValueError(str(err))) == {"a": [1, 2]}
    value = {"already": "decoded"}
    assert decode_json_text(value, lambda err: ValueError(str(err))) is value
    with pytest.raises(SchemaError, match="bad field") as info:
        decode_json_text("{not json", lambda err: SchemaError(f"bad field ({err.msg})"))
    assert isinstance(info.value.__cause__, json.JSONDecodeError)
