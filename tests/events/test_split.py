"""Temporal split: whole events by first cutoff and close, boundary crossers in neither."""

from __future__ import annotations

from dataclasses import replace

import pytest

from forecast_dojo.events.split import SplitError, Window, parse_window, split_events, split_stats
from forecast_dojo.timeutil import parse_instant

from .conftest import day, make_event


def scheduled(event_id: str, first: float, close: float, steps: int = 3, outcome: str = "Yes"):
    event = make_event(event_id, open_day=first - 5, close_day=close, outcome=outcome)
    return replace(event, cutoffs=tuple(day(first + i) for i in range(steps)))


TRAIN = Window(day(0), day(100))
EVAL = Window(day(100), day(200))


def test_parse_window_dates_are_inclusive() -> None:
    window = parse_window("2025-01-01:2025-12-31")
    assert window.start == parse_instant("2025-01-01") and window.end == parse_instant(
        "2025-12-31", date_means="end"
    )
    for bad in ("2025-01-01", "2025-13-01:2025-12-31", "2025-12-31:2025-01-01"):
        with pytest.raises(SplitError):
            parse_window(bad)


def test_events_go_to_the_window_they_start_and_close_in() -> None:
    events = [
        scheduled("train-a", 10, 50, outcome="No"),
        scheduled("train-edge", 0, 100),  # closes exactly at the train window's end
        scheduled("eval-a", 120, 150),
        scheduled("cross", 90, 130),
        scheduled("late", 150, 250),
        scheduled("outside", 300, 350),
        scheduled("eval-short", 120, 150, steps=2),
    ]
    result = split_events(events, TRAIN, EVAL)
    assert [e.id for e in result.train] == ["train-a", "train-edge"]
    assert [e.id for e in result.eval] == ["eval-a"]
    assert result.neither == {
        "crosses_window_boundary": ["cross", "late"],
        "outside_windows": ["outside"],
        "eval_fewer_than_3_steps": ["eval-short"],
    }


def test_the_first_cutoff_not_the_open_decides() -> None:
    event = scheduled("opened-early", 110, 150)  # opened on day 105, forecasts start on day 110
    event = replace(event, open_at=day(-50))
    assert [e.id for e in split_events([event], TRAIN, EVAL).eval] == ["opened-early"]


def test_overlapping_windows_are_rejected() -> None:
    with pytest.raises(SplitError, match="overlaps"):
        split_events([], Window(day(0), day(101)), EVAL)


def test_split_stats() -> None:
    events = [scheduled("a", 10, 20, outcome="No"), scheduled("b", 10, 50, steps=4), scheduled("c", 10, 30)]
    stats = split_stats(events)
    assert stats["events"] == 3
    assert stats["outcomes"] == {"Yes": 2, "No": 1}
    assert stats["steps"] == {3: 2, 4: 1}
    assert stats["horizon_days"]["median"] == 20.0 and stats["horizon_days"]["max"] == 40.0
    assert split_stats([])["events"] == 0
