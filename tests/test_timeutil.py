"""Instants: parsing, the end-of-day rule, exact microsecond arithmetic."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from forecast_dojo.timeutil import InstantError, end_of_day, from_micros, iso, parse_instant, to_micros


def test_day_precision_means_the_end_of_the_day():
    day = date(2024, 3, 5)
    assert end_of_day(day) == datetime(2024, 3, 5, 23, 59, 59, 999999, tzinfo=UTC)
    assert end_of_day(day) < datetime(2024, 3, 6, tzinfo=UTC)  # visible at 00:00 of the next day
    assert parse_instant("2024-03-05", date_means="end") == end_of_day(day)
    assert parse_instant("2024-03-05") == datetime(2024, 3, 5, tzinfo=UTC)


def test_zones_and_formats():
    assert parse_instant("2024-03-05T10:00:00+02:00") == datetime(2024, 3, 5, 8, tzinfo=UTC)
    assert parse_instant("2024-03-05T10:00:00Z") == datetime(2024, 3, 5, 10, tzinfo=UTC)
    assert parse_instant("2024-03-05T10:00:00") == datetime(2024, 3, 5, 10, tzinfo=UTC)  # naive = UTC
    assert parse_instant(0) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_instant(datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-5)))).hour == 5
    for bad in ("", "yesterday", "2024-13-01", None, True, [2024]):
        with pytest.raises(InstantError):
            parse_instant(bad)


def test_micros_round_trip_and_iso():
    instant = datetime(2031, 7, 1, 12, 30, 5, 123456, tzinfo=UTC)
    assert from_micros(to_micros(instant)) == instant
    assert (
        iso(instant) == "2031-07-01T12:30:05.123456Z"
        and iso(instant.replace(microsecond=0)) == "2031-07-01T12:30:05Z"
    )
    with pytest.raises(InstantError):
        to_micros(datetime(2031, 1, 1))
