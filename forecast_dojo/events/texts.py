r"""Question texts as they stood at a cutoff: dated notes, edit stamps and source leftovers removed.

Question platforms edit their texts after a question opens. Manifold appends "Update 2025-07-05
(PST) (AI summary of creator comment): ..." notes (one said "Since the Nobel market has resolved
No ..."), Polymarket appends "Update: ..." lines, other sources add "[Edit May 6, 2025]:" or
"EDIT (Nov 2, 2025 - @user)" stamps. A prompt built from the latest text would show a forecaster
notes written months after its forecast date. This module

* finds those notes (:func:`find_notes`): a line that starts (after an optional bracket or
  parenthesis) with ``Update``, ``Edit``, ``Edited``, ``Clarification``, ``Note added``, ``Addendum``
  or ``Correction``, followed either by a date within 40 characters (a *dated* note) or by a colon
  (an *undated* note). A note runs from its line to the next note or the end of the text: platforms
  append them, and a multi-paragraph note ("Clarifications:\n\n- ...") belongs to its header;
* removes them (:func:`strip_notes`): the notes dated on or after ``keep_before`` (every note when
  ``keep_before`` is None, and every undated note then too);
* cleans source leftovers (:func:`clean_text`): "[link preview]" markers, and the numeric suffix
  chains that Polymarket adds to re-created market slugs ("...-by-june-30-2026-699-664-723-...");
* builds the per-cutoff text versions of an event (:func:`text_versions`), read back by
  :meth:`forecast_dojo.schema.Event.text_at`.

Dates are read as ISO ``YYYY-MM-DD`` (Manifold also writes ``YYYY-DD-MM``: "Update 2024-27-12"; a
month above 12 is read as the day), ``Month D, YYYY``, ``D Month YYYY`` and ``Month YYYY`` (the last
day of that month). Manifold's dates are Pacific time, so a note dated ``D`` may be written up to
08:00 UTC of ``D + 1``: a note is kept at a cutoff only when its date is at least
:data:`NOTE_MARGIN_DAYS` days before the cutoff's UTC date.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from forecast_dojo.timeutil import iso

NOTE_MARGIN_DAYS = 2
_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_NAMES.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTH_NAMES["sept"] = 9
_MONTH = "|".join(sorted(_MONTH_NAMES, key=len, reverse=True))
DATE_PATTERN = re.compile(
    rf"(?P<iso>(?<!\d)(?P<y>(?:19|20)\d\d)-(?P<a>\d\d?)-(?P<b>\d\d?)(?!\d))"
    rf"|(?P<mdy>\b(?P<m1>{_MONTH})\.?\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y1>(?:19|20)\d\d)\b)"
    rf"|(?P<dmy>\b(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m2>{_MONTH})\.?,?\s+(?P<y2>(?:19|20)\d\d)\b)"
    rf"|(?P<my>\b(?P<m3>{_MONTH})\.?,?\s+(?P<y3>(?:19|20)\d\d)\b)",
    re.IGNORECASE,
)
_NOTE_WORD = r"(?:update[ds]?|edit(?:ed)?|clarifications?|note\s+added|addendum|correction)"
_NOTE_START = re.compile(rf"^\W{{0,3}}{_NOTE_WORD}\b(?P<rest>.*)$", re.IGNORECASE)
_LINK_PREVIEW = re.compile(r"\s*\[link preview\]\s*", re.IGNORECASE)
_SLUG_SUFFIX = re.compile(r"(https?://(?:www\.)?polymarket\.com/\S*?[a-z0-9])((?:-\d{3})+)(?=[/?#.,;)\s]|$)")


def parse_date(match: re.Match[str]) -> date | None:
    """The date a :data:`DATE_PATTERN` match names (a month alone means its last day), or None."""
    try:
        if match.group("iso"):
            year, a, b = int(match.group("y")), int(match.group("a")), int(match.group("b"))
            month, day = (b, a) if a > 12 >= b else (a, b)
            return date(year, month, day)
        if match.group("mdy"):
            month = _MONTH_NAMES[match.group("m1").lower()]
            return date(int(match.group("y1")), month, int(match.group("d1")))
        if match.group("dmy"):
            month = _MONTH_NAMES[match.group("m2").lower()]
            return date(int(match.group("y2")), month, int(match.group("d2")))
        month, year = _MONTH_NAMES[match.group("m3").lower()], int(match.group("y3"))
        return date(year, month, calendar.monthrange(year, month)[1])
    except ValueError:
        return None


def dates_in(text: str) -> list[date]:
    """Every date :data:`DATE_PATTERN` finds in ``text``, in order (unparseable ones skipped)."""
    return [d for m in DATE_PATTERN.finditer(text) if (d := parse_date(m)) is not None]


@dataclass(frozen=True)
class Note:
    """One appended note: its line span ``[start, stop)`` in the text's lines and its date (or None)."""

    start: int
    stop: int
    dated: date | None
    header: str


def _note_header(line: str) -> tuple[bool, date | None]:
    match = _NOTE_START.match(line.strip())
    if match is None:
        return False, None
    rest = match.group("rest")
    found = DATE_PATTERN.search(rest[:60])
    if found is not None and found.start() <= 40:
        return True, parse_date(found)
    # Undated: the note word must be used as a label ("Update:", "EDIT -"), not as prose ("Updates to the EAR").
    if re.match(r"^\s*(?:\([^)]*\)\s*)?[:\-–—\]]", rest):
        return True, None
    return False, None


def find_notes(text: str) -> list[Note]:
    """The appended notes of a text (see the module docstring), in order."""
    lines = text.split("\n")
    starts = []
    for i, line in enumerate(lines):
        is_note, dated = _note_header(line)
        if is_note:
            starts.append((i, dated))
    return [
        Note(
            start, starts[k + 1][0] if k + 1 < len(starts) else len(lines), dated, lines[start].strip()[:120]
        )
        for k, (start, dated) in enumerate(starts)
    ]


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def strip_notes(text: str, keep_before: date | None) -> tuple[str, int]:
    """The text without the notes not dated before ``keep_before`` (all notes when it is None).

    Returns the text and the number of notes removed. With a date, undated notes stay: they were in
    the snapshot the text comes from, so they were written by its publication.
    """
    notes = find_notes(text)
    drop = [n for n in notes if keep_before is None or (n.dated is not None and n.dated >= keep_before)]
    if not drop:
        return text, 0
    lines = text.split("\n")
    removed: set[int] = set()
    for note in drop:
        removed.update(range(note.start, note.stop))
    return _tidy("\n".join(line for i, line in enumerate(lines) if i not in removed)), len(drop)


def clean_text(text: str) -> str:
    """Source leftovers removed: "[link preview]" markers and Polymarket slug suffix chains."""
    text = _LINK_PREVIEW.sub("\n", text)
    text = _SLUG_SUFFIX.sub(r"\1", text)
    return _tidy(text)


def keep_before(cutoff: datetime) -> date:
    """The first note date that is too late for ``cutoff`` (its UTC date minus the margin)."""
    return cutoff.date() - timedelta(days=NOTE_MARGIN_DAYS - 1)


@dataclass(frozen=True)
class Snapshot:
    """One published version of a question: when it became public and its three texts."""

    published_at: datetime
    question: str
    background: str
    resolution_criteria: str


FIELDS = ("question", "background", "resolution_criteria")


def earliest_text(snapshots: Sequence[Snapshot]) -> tuple[dict[str, str], int]:
    """The texts safe at any instant: the first snapshot, cleaned, with every note removed.

    Returns the texts and the number of notes removed.
    """
    first = snapshots[0]
    out, removed = {}, 0
    for name in FIELDS:
        text, n = strip_notes(clean_text(getattr(first, name)), None)
        out[name], removed = text, removed + n
    return out, removed


def text_versions(snapshots: Sequence[Snapshot]) -> tuple[list[dict[str, str]], int]:
    """Per-snapshot versions ``{"from", "question", "background", "resolution_criteria"}``.

    A version applies from its snapshot's publication; its notes dated at or after the publication's
    date minus the margin are removed (conservative: at any later cutoff at most more notes would be
    allowed). Consecutive identical versions are merged. Returns the versions and the notes removed.
    """
    versions: list[dict[str, str]] = []
    removed = 0
    for snap in sorted(snapshots, key=lambda s: s.published_at):
        limit = keep_before(snap.published_at)
        version = {"from": iso(snap.published_at)}
        for name in FIELDS:
            text, n = strip_notes(clean_text(getattr(snap, name)), limit)
            version[name], removed = text, removed + n
        if versions and all(versions[-1][k] == version[k] for k in FIELDS):
            continue
        versions.append(version)
    return versions, removed
