"""ForecastBench importer: the awkward cases on a small synthetic folder, then the real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forecast_dojo.events.forecastbench import (
    ForecastBenchError,
    html_to_text,
    load_forecastbench,
    parse_probability,
)
from forecast_dojo.schema import load_events, save_events
from forecast_dojo.timeutil import parse_instant


def question(qid: Any, source: str = "polymarket", **overrides: Any) -> dict[str, Any]:
    record = {
        "id": qid,
        "source": source,
        "question": f"Will thing {qid} happen?",
        "resolution_criteria": "Resolves per the market.",
        "background": "<p>Some <b>HTML</b> &amp; text.</p>\r\n<ul><li>one</li><li>two</li></ul>",
        "market_info_open_datetime": "2025-09-01",
        "market_info_close_datetime": "2025-12-31T00:00:00+00:00",
        "url": f"https://example.org/{qid}",
        "freeze_datetime": "2025-10-20T00:00:00+00:00",
        "freeze_datetime_value": "0.25",
        "source_intro": "",
        "resolution_dates": "N/A",
    }
    record.update(overrides)
    return record


def resolution(
    qid: Any, source: str = "polymarket", resolved: bool = True, value: float = 1.0, day: str = "2025-11-30"
) -> dict[str, Any]:
    return {
        "id": qid,
        "source": source,
        "direction": None,
        "resolution_date": day,
        "resolved_to": value,
        "resolved": resolved,
    }


def write_sets(
    root: Path, question_sets: dict[str, list[dict]], resolution_sets: dict[str, list[dict]]
) -> Path:
    (root / "question_sets").mkdir(parents=True)
    (root / "resolution_sets").mkdir(parents=True)
    for due, questions in question_sets.items():
        payload = {"forecast_due_date": due, "question_set": f"{due}-llm.json", "questions": questions}
        (root / "question_sets" / f"{due}-llm.json").write_text(json.dumps(payload))
    for due, rows in resolution_sets.items():
        payload = {"forecast_due_date": due, "question_set": f"{due}-llm.json", "resolutions": rows}
        (root / "resolution_sets" / f"{due}_resolution_set.json").write_text(json.dumps(payload))
    return root


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    sets = {
        "2025-10-26": [
            question("a"),
            question("b", freeze_datetime_value="N/A"),
            question("u"),  # never resolved
            question(["a", "b"], source="polymarket"),  # combination
            question(
                "DGS10",
                source="fred",
                question="Up by {resolution_date} vs {forecast_due_date}?",
                resolution_dates=["2025-11-02", "2025-12-01"],
            ),
            question("x", source="carrier-pigeon"),
        ],
        "2025-11-09": [
            question("a", freeze_datetime="2025-11-03T00:00:00+00:00", freeze_datetime_value="0.4"),
            question(
                "a", freeze_datetime="2025-11-03T00:00:00+00:00", freeze_datetime_value="0.4"
            ),  # duplicate row
            question(
                "b", freeze_datetime="2025-11-03T00:00:00+00:00", freeze_datetime_value="1.7"
            ),  # out of range
        ],
    }
    rows = {
        "2025-10-26": [
            resolution("a", resolved=False, value=0.55, day="2025-11-10"),
            resolution("a"),
            resolution("a"),  # exact duplicate
            resolution("b", value=0.0, day="2025-12-20"),
            resolution("ghost"),  # no question anywhere
            resolution(["a", "b"]),
            resolution("DGS10", source="fred", value=1.0, day="2025-11-02"),
        ]
    }
    return write_sets(tmp_path / "fb", sets, rows)


def test_joins_questions_and_resolutions_with_a_market_series(synthetic: Path) -> None:
    result = load_forecastbench(synthetic, progress=False)
    events = {e.id: e for e in result.events}
    assert sorted(events) == ["forecastbench:polymarket:a", "forecastbench:polymarket:b"]
    a = events["forecastbench:polymarket:a"]
    assert a.outcomes == ("Yes", "No") and a.outcome == "Yes"
    assert a.open_at == parse_instant("2025-09-01")
    assert a.resolved_at == parse_instant("2025-11-30", date_means="end")  # end of the resolution day
    assert a.close_at == a.resolved_at  # recorded close 2025-12-31 is later than the resolution
    # freeze values (2) + the unresolved row (1), deduplicated, ordered, as (p, 1 - p)
    assert [(p.at.date().isoformat(), p.probabilities[0]) for p in a.market] == [
        ("2025-10-20", 0.25),
        ("2025-11-03", 0.4),
        ("2025-11-10", 0.55),  # end of 2025-11-10
    ]
    assert a.market[0].probabilities == pytest.approx((0.25, 0.75))
    assert a.background == "Some HTML & text.\n\n- one\n\n- two"
    assert a.cutoffs == (a.open_at,)
    b = events["forecastbench:polymarket:b"]
    assert b.outcome == "No" and b.market == ()  # "N/A" and 1.7 are not market values


def test_skips_and_repairs_are_counted(synthetic: Path) -> None:
    result = load_forecastbench(synthetic, progress=False)
    assert dict(result.skipped) == {
        "unresolved": 1,
        "combination": 2,  # the list id in a question set and in a resolution set
        "data_source_question": 1,
        "resolution_without_question": 1,
        "unknown_source": 1,
    }
    assert result.notes["duplicate_resolution_rows"] == 1
    assert result.notes["duplicate_question_rows"] == 1
    assert result.notes["bad_market_value"] == 2
    assert result.examples["unresolved"] == ["u"]


def test_data_source_questions_behind_a_flag(synthetic: Path) -> None:
    result = load_forecastbench(synthetic, include_data_sources=True, progress=False)
    data = [e for e in result.events if e.source == "forecastbench/fred"]
    assert len(data) == 1  # 2025-12-01 has no resolution row
    event = data[0]
    assert event.id == "forecastbench:fred:DGS10:2025-10-26:2025-11-02"
    assert event.question == "Up by 2025-11-02 vs 2025-10-26?"
    assert event.market == () and event.outcome == "Yes"
    assert event.open_at == parse_instant("2025-10-26") and event.close_at == parse_instant("2025-11-02")
    assert result.skipped["unresolved"] == 2


def test_conflicting_resolutions_and_non_binary_outcomes_are_skipped(tmp_path: Path) -> None:
    root = write_sets(
        tmp_path / "fb",
        {"2025-10-26": [question("c"), question("h")]},
        {"2025-10-26": [resolution("c", value=1.0), resolution("c", value=0.0), resolution("h", value=0.5)]},
    )
    result = load_forecastbench(root, progress=False)
    assert result.events == []
    assert result.skipped == {"conflicting_resolutions": 1, "non_binary_resolution": 1}


def test_one_id_naming_two_questions_in_one_set_is_ambiguous(tmp_path: Path) -> None:
    root = write_sets(
        tmp_path / "fb",
        {"2025-10-26": [question("d"), question("d", question="Something else entirely?")]},
        {"2025-10-26": [resolution("d")]},
    )
    assert load_forecastbench(root, progress=False).skipped == {"ambiguous_id": 1}


def test_conflicting_values_at_one_instant_keep_the_latest_set(tmp_path: Path) -> None:
    root = write_sets(
        tmp_path / "fb",
        {
            "2025-10-26": [question("e", freeze_datetime_value="0.2")],
            "2025-11-09": [question("e", freeze_datetime_value="0.3")],
        },
        {"2025-10-26": [resolution("e")]},
    )
    result = load_forecastbench(root, progress=False)
    assert [p.probabilities[0] for p in result.events[0].market] == [0.3]
    assert result.notes["conflicting_market_values"] == 1


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    root = write_sets(tmp_path / "fb", {"2025-10-26": [question("a")]}, {})
    (root / "question_sets" / "2025-10-26-llm.json").write_text(
        '{"forecast_due_date": "2025-10-26", "questions": [{"x": 1}]}'
    )
    with pytest.raises(ForecastBenchError, match=r"2025-10-26-llm.json: questions\[0\]"):
        load_forecastbench(root, progress=False)
    with pytest.raises(FileNotFoundError, match="question_sets"):
        load_forecastbench(tmp_path / "nowhere", progress=False)


def test_parse_probability() -> None:
    assert parse_probability("0.0195") == pytest.approx(0.0195)
    assert parse_probability(1) == 1.0
    for bad in ("N/A", "", None, "nan", "1.2", -0.1, True, "abc"):
        assert parse_probability(bad) is None


def test_html_to_text_handles_links_entities_and_autolinks() -> None:
    raw = 'An <a href="https://x.org">island</a> of &quot;stability&quot;.\r\n\r\n\r\nLinks:\n\n<https://pubmed.org/1?a=1&amp;b=2>'
    assert html_to_text(raw) == 'An island of "stability".\n\nLinks:\n\nhttps://pubmed.org/1?a=1&b=2'
    assert html_to_text(None) == ""
    assert html_to_text("<div>a<script>var x;</script></div>") == "a"


@pytest.mark.shared_data
def test_real_forecastbench_files(data_root: Path, tmp_path: Path) -> None:
    result = load_forecastbench(data_root / "forecastbench", progress=False)
    skipped = result.skipped
    assert len(result.events) > 300
    assert skipped["combination"] > 0 and skipped["unresolved"] > 0 and skipped["data_source_question"] > 0
    sources = {e.source for e in result.events}
    assert sources == {
        "forecastbench/polymarket",
        "forecastbench/manifold",
        "forecastbench/metaculus",
        "forecastbench/infer",
    }
    share_yes = sum(e.outcome == "Yes" for e in result.events) / len(result.events)
    assert 0.05 < share_yes < 0.3  # the README's "about 15 % Yes"
    assert sum(len(e.market) >= 2 for e in result.events) > 50
    for event in result.events:
        assert event.open_at <= event.close_at <= event.resolved_at
        assert all(p.at <= event.close_at for p in event.market)
        assert "<div" not in event.background and "\r" not in event.background
    # the README's Spanish Metaculus questions survive import (selection drops them)
    assert any(e.question.startswith("¿") for e in result.events)
    loaded = load_events(save_events(result.events, tmp_path / "fb.jsonl"))
    assert len(loaded) == len(result.events)
