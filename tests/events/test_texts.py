"""Snapshot-true question texts: dated notes, edit stamps, source leftovers, per-cutoff versions."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from forecast_dojo.events.forecastbench import load_forecastbench
from forecast_dojo.events.polymarket import undated_text
from forecast_dojo.events.schedule import ScheduleConfig, schedule_event
from forecast_dojo.events.texts import (
    DATE_PATTERN,
    clean_text,
    dates_in,
    find_notes,
    parse_date,
    strip_notes,
)
from forecast_dojo.prompts import Budgets, step_prompt
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import UTC
from tests.events.test_forecastbench import question, resolution, write_sets

MANIFOLD = """Resolves YES if Trump wins the 2025 Nobel Peace Prize.

Update 2025-06-21 (PST) (AI summary of creator comment): Clarifications:

- A joint prize counts.

Update 2025-27-10 (PST) (AI summary of creator comment): Since the Nobel market has resolved No, this resolves NO.

[Edit Nov 2, 2025]: handing the market over to @someone."""


def test_dates_are_read_in_every_written_form() -> None:
    found = dates_in("2025-06-21, 2024-27-12, March 3, 2026, 3 March 2026, Sept 2025 and 2025-13-13")
    assert found == [
        date(2025, 6, 21),
        date(2024, 12, 27),
        date(2026, 3, 3),
        date(2026, 3, 3),
        date(2025, 9, 30),
    ]


def test_notes_are_found_with_their_dates_and_extent() -> None:
    notes = find_notes(MANIFOLD)
    assert [n.dated for n in notes] == [date(2025, 6, 21), date(2025, 10, 27), date(2025, 11, 2)]
    lines = MANIFOLD.split("\n")
    assert "- A joint prize counts." in lines[notes[0].start : notes[0].stop]  # a note keeps its paragraphs
    # Prose that uses the words is not a note.
    assert find_notes("Updates to the Export Administration Regulations count.\nEdited genomes too.") == []
    assert [n.dated for n in find_notes("Polymarket text.\nUpdate: the deadline was extended.")] == [None]


def test_strip_notes_keeps_only_notes_dated_before_the_limit() -> None:
    text, removed = strip_notes(MANIFOLD, date(2025, 10, 1))
    assert removed == 2
    assert "joint prize" in text and "Nobel market has resolved" not in text and "@someone" not in text
    text, removed = strip_notes(MANIFOLD, None)
    assert removed == 3 and text == "Resolves YES if Trump wins the 2025 Nobel Peace Prize."


def test_clean_text_removes_link_previews_and_slug_suffixes() -> None:
    text = clean_text(
        "Related: https://manifold.markets/x/y\n\n[link preview]At the time of writing, 25.\n"
        "See https://polymarket.com/market/us-strikes-iran-by-june-30-2026-699-664-723."
    )
    assert "[link preview]" not in text and "At the time of writing, 25." in text
    assert "https://polymarket.com/market/us-strikes-iran-by-june-30-2026." in text
    assert undated_text("Will X happen?\n\nUpdate: extended to March 31.") == "Will X happen?"


def _event_with_versions(tmp_path: Path) -> Event:
    early = question("n", background=MANIFOLD.split("\n\nUpdate 2025-27-10")[0])
    late = question("n", background=MANIFOLD, freeze_datetime="2025-11-20T00:00:00+00:00")
    root = write_sets(
        tmp_path / "fb",
        {"2025-10-26": [early], "2025-11-30": [late]},
        {"2025-11-30": [resolution("n", value=0.0, day="2025-12-15")]},
    )
    (event,) = load_forecastbench(root, progress=False).events
    return event


def test_each_step_sees_the_latest_snapshot_at_or_before_its_cutoff(tmp_path: Path) -> None:
    event = _event_with_versions(tmp_path)
    # The base text (before the first snapshot) has every dated note removed.
    assert "Update" not in event.background and event.background.startswith("Resolves YES")
    assert [v["from"] for v in event.extra["text_versions"]] == [
        "2025-10-26T00:00:00Z",
        "2025-11-30T00:00:00Z",
    ]
    cutoffs = (
        datetime(2025, 10, 1, tzinfo=UTC),
        datetime(2025, 11, 5, tzinfo=UTC),
        datetime(2025, 12, 5, tzinfo=UTC),
    )
    from dataclasses import replace

    event = replace(event, cutoffs=cutoffs)
    before, first, second = (event.text_at(k)[1] for k in range(3))
    assert "joint prize" not in before
    assert "joint prize" in first and "Nobel market has resolved" not in first
    assert "joint prize" in second and "Nobel market has resolved" in second  # dated 2025-10-27, shown after
    assert "@someone" in second
    prompt = step_prompt(event, 0, Budgets(), "none", None)
    assert "joint prize" not in prompt and "Resolves YES if Trump" in prompt


def _allowed_dates(event: Event) -> set[date]:
    """Dates that belong to the question itself: those in its earliest text, the deadline its title states
    (a "Month D" without a year is read in the years of the event's life), and the end of any year it names."""
    allowed = set(dates_in("\n".join((event.question, event.background, event.resolution_criteria))))
    titles = [event.question] + [v["question"] for v in event.extra.get("text_versions", [])]
    years = range(event.open_at.year, event.close_at.year + 2)
    for title in titles:
        allowed.update(dates_in(title))
        for year in re.findall(r"\b(20\d\d)\b", title):
            allowed.add(date(int(year), 12, 31))
        for match in re.finditer(r"\b([A-Z][a-z]+)\.? (\d{1,2})\b", title):
            for year in years:
                found = DATE_PATTERN.search(f"{match.group(1)} {match.group(2)}, {year}")
                if found and (d := parse_date(found)):
                    allowed.add(d)
    return allowed


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_prompts_hold_no_date_after_their_cutoff(data_root: Path) -> None:
    result = load_forecastbench(data_root / "forecastbench", progress=False)
    assert result.notes["dated_notes_removed"] > 0
    affected = [e for e in result.events if e.extra.get("text_versions")]
    assert len(affected) >= 2
    nobel = next(e for e in result.events if "Nobel Peace Prize iff" in e.question)
    assert "Nobel market has resolved" not in nobel.background
    checked = 0
    for event in result.events:
        scheduled = schedule_event(event, ScheduleConfig())
        if scheduled is None:
            continue
        allowed = _allowed_dates(event)
        for step, cutoff in enumerate(scheduled.cutoffs):
            prompt = step_prompt(scheduled, step, Budgets(), "none", None)
            body = prompt.split("\nForecast date: ")[0]  # the question's texts, not the step's own date line
            for match in DATE_PATTERN.finditer(body):
                found = parse_date(match)
                if found is not None and found >= cutoff.date() - timedelta(days=1):
                    assert found in allowed, (event.id, step, cutoff, match.group(0))
            if "Nobel market has resolved" in body:
                assert cutoff.date() > date(2025, 10, 29)
            checked += 1
    assert checked > 1000
