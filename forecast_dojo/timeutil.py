"""Instants: one representation (timezone-aware UTC datetimes, int64 microseconds on disk).

Every comparison that decides visibility happens on integer microseconds since the epoch, so there is
no timezone or float-rounding ambiguity anywhere between a corpus on disk and the temporal gateway.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from forecast_dojo.errors import ConfigError
from forecast_dojo.errors import InstantError as InstantError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def end_of_day(day: date) -> datetime:
    """The instant a day-precision date becomes available: the END of that UTC day.

    That is the day's last microsecond (23:59:59.999999), so with the strict ``available_at < cutoff``
    rule a cutoff at 00:00 UTC on day D sees day D-1 (and never anything of day D).
    """
    return datetime.combine(day, time(0), tzinfo=UTC) + timedelta(days=1, microseconds=-1)


def parse_instant(value: object, *, date_means: str = "start") -> datetime:
    """Read an ISO 8601 string, date, datetime or epoch-seconds number as an aware UTC datetime.

    ``date_means`` decides what a bare date (no time) means: ``"start"`` (00:00 UTC that day) or ``"end"``
    (00:00 UTC the next day, the rule for when a day's news becomes available). Naive times are UTC.
    """
    if date_means not in ("start", "end"):
        raise ConfigError(f"date_means must be 'start' or 'end', not {date_means!r}")
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return end_of_day(value) if date_means == "end" else datetime.combine(value, time(0), tzinfo=UTC)
    if isinstance(value, bool):
        raise InstantError(f"not an instant: {value!r}")
    if isinstance(value, (int, float)):
        try:
            return EPOCH + timedelta(seconds=float(value))
        except (OverflowError, ValueError) as err:  # NaN, infinities, beyond year 9999
            bits = value.bit_length() if isinstance(value, int) else 0  # a huge int's repr can be refused
            shown = f"an integer of about {int(bits * 0.30103)} digits" if bits > 128 else repr(value)
            raise InstantError(f"not an instant: {shown} seconds since the epoch") from err
    if not isinstance(value, str) or not value.strip():
        raise InstantError(f"not an instant: {value!r}")
    text = value.strip()
    if _DATE_ONLY.match(text):
        try:
            day = date.fromisoformat(text)
        except ValueError as err:
            raise InstantError(f"not an ISO date: {value!r}") from err
        return parse_instant(day, date_means=date_means)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as err:
        raise InstantError(f"not an ISO 8601 instant: {value!r}") from err
    return parse_instant(parsed)


def to_micros(instant: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact integer arithmetic)."""
    if instant.tzinfo is None:
        raise InstantError(f"naive datetime {instant!r}: instants must carry a timezone")
    delta = instant - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime of an epoch-microseconds integer."""
    return EPOCH + timedelta(microseconds=int(micros))


def iso(instant: datetime) -> str:
    """Canonical text form: ``YYYY-MM-DDTHH:MM:SSZ`` (microseconds only when present)."""
    instant = instant.astimezone(UTC)
    spec = "seconds" if instant.microsecond == 0 else "microseconds"
    return instant.replace(tzinfo=None).isoformat(timespec=spec) + "Z"
