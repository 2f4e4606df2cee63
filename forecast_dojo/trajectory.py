"""The trajectory log: one JSON line per forecast step (a :class:`StepRecord`), flushed as each step ends.

A run directory holds ``run.json`` (env spec, corpus manifest hash, package version, seed: stored
once) and ``steps.jsonl``. ``datasets.load_dataset("json", data_files=".../steps.jsonl")`` reads it
without custom code; the ``messages`` and ``tools`` columns are what TRL's SFT trainer expects.
Every record has the same keys; values whose shape varies (tool arguments, tool schemas) load as
``datasets.Json`` features, exactly as written.

Crash safety: a record is one ``write`` of one line followed by a flush, so a killed run leaves at
most one torn line, at the end. Loaders drop it with a warning, and a writer reopening the directory
cuts it off before appending. A writer never writes two records with the same key
``(run_id, event_id, step, rollout)``: a second one is skipped, so rerunning or appending a run
never duplicates steps. :func:`log_status` says which events are complete and which were left
half-logged (a resuming runner continues those).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.errors import DataError, OutputExistsError
from forecast_dojo.records import RecordFormatError, StepRecord

if TYPE_CHECKING:
    from datasets import Dataset

STEPS_FILE = "steps.jsonl"
RUN_FILE = "run.json"
LOG_FORMAT_VERSION = 2

RecordKey = tuple[str | None, str, int, int]


class TornLogWarning(UserWarning):
    """A log ended in a partial line (a run was killed mid-write); the line was dropped."""


def run_id_for(metadata: dict[str, Any]) -> str:
    """A deterministic run id: the same configuration and seed give the same id.

    Args:
        metadata: The run's configuration (what ``run.json`` stores).

    Returns:
        ``run-`` and 12 hex digits of the configuration's hash.
    """
    digest = hashlib.sha256(json.dumps(metadata, sort_keys=True, default=str).encode()).hexdigest()
    return f"run-{digest[:12]}"


def _steps_file(path: str | Path) -> Path:
    path = Path(path)
    return path / STEPS_FILE if path.is_dir() else path


def _read_lines(file: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """The decoded records of a log, the byte length of its complete part, and whether a torn tail was cut."""
    data = file.read_bytes() if file.exists() else b""
    records: list[dict[str, Any]] = []
    good = 0
    torn = False
    position = 0
    while position < len(data):
        end = data.find(b"\n", position)
        complete = end != -1
        line = data[position:] if not complete else data[position:end]
        next_position = len(data) if not complete else end + 1
        if line.strip():
            try:
                value = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                if next_position >= len(data):
                    torn = True  # the last line: a write that a kill interrupted
                    break
                raise RecordFormatError(
                    f"{file}: line {len(records) + 1} is not a JSON record ({err})"
                ) from err
            if not complete:
                # A valid JSON prefix without its newline: the write was cut just before the newline.
                torn = True
                break
            records.append(value)
        position = next_position
        good = position
    return records, good, torn


def _deduplicated(records: Iterable[dict[str, Any]], file: Path) -> list[dict[str, Any]]:
    seen: set[RecordKey] = set()
    out = []
    duplicates = 0
    for record in records:
        key = (record.get("run_id"), record["event_id"], record["step"], record.get("rollout", 0))
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(record)
    if duplicates:
        warnings.warn(f"{file}: dropped {duplicates} duplicate step record(s)", stacklevel=3)
    return out


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The raw records of a log (a run directory or a ``steps.jsonl``), torn tail and duplicates dropped.

    Args:
        path: The run directory or the file.

    Returns:
        One dict per record, in file order.
    """
    file = _steps_file(path)
    records, _, torn = _read_lines(file)
    if torn:
        warnings.warn(
            f"{file}: the last line is incomplete (the run was interrupted while writing it); dropped it",
            TornLogWarning,
            stacklevel=2,
        )
    return _deduplicated(records, file)


def load_records(path: str | Path) -> list[StepRecord]:
    """The step records of a run directory (or a ``steps.jsonl``), as typed records.

    A torn last line is dropped with a :class:`TornLogWarning`; duplicate keys keep the first record.

    Args:
        path: The run directory or the file.

    Returns:
        The records in the order they were written.
    """
    return [StepRecord.from_dict(r) for r in read_log(path)]


def load_steps(path: str | Path) -> Dataset:
    """The step records of a run directory (or a steps.jsonl) as a ``datasets.Dataset`` (for TRL).

    A torn last line is dropped with a :class:`TornLogWarning` (the cleaned records are loaded from a
    temporary copy; the log itself is left as it is).

    Args:
        path: The run directory or the file.

    Returns:
        A ``datasets.Dataset`` with one row per step record.
    """
    from datasets import load_dataset

    file = _steps_file(path)
    raw, _, torn = _read_lines(file)
    records = _deduplicated(raw, file)
    if not torn and len(records) == len(raw):
        return load_dataset("json", data_files=str(file), split="train")
    if torn:
        warnings.warn(
            f"{file}: the last line is incomplete (the run was interrupted while writing it); dropped it",
            TornLogWarning,
            stacklevel=2,
        )
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / STEPS_FILE
        with clean.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        return load_dataset("json", data_files=str(clean), split="train", cache_dir=str(Path(tmp) / "cache"))


def load_run_metadata(path: str | Path) -> dict[str, Any]:
    """The ``run.json`` of a run directory."""
    return json.loads((Path(path) / RUN_FILE).read_text())


@dataclass
class LogStatus:
    """What a log holds, per (event, rollout): complete episodes and half-logged ones.

    Attributes:
        complete: (event_id, rollout) pairs whose every step is logged.
        partial: (event_id, rollout) -> the last logged record of an episode that stopped early.
        keys: Every logged record key.
    """

    complete: set[tuple[str, int]] = field(default_factory=set)
    partial: dict[tuple[str, int], StepRecord] = field(default_factory=dict)
    keys: set[RecordKey] = field(default_factory=set)


def log_status(path: str | Path) -> LogStatus:
    """Which episodes of a log are complete and which were left half-logged (e.g. by a crash).

    An episode is complete when it has a record for every step from its first logged step to its
    last step (``n_steps - 1``); one that lacks later steps is partial.

    Args:
        path: The run directory (or ``steps.jsonl``); a missing log is empty.

    Returns:
        The :class:`LogStatus`.
    """
    status = LogStatus()
    file = _steps_file(path)
    if not file.exists():
        return status
    by_episode: dict[tuple[str, int], list[StepRecord]] = {}
    for record in load_records(file):
        status.keys.add(record.key)
        by_episode.setdefault((record.event_id, record.rollout), []).append(record)
    for episode, records in by_episode.items():
        by_step = {r.step: r for r in records}
        last = by_step[min(by_step)]
        while last.step + 1 in by_step:  # the contiguous run from the first logged step
            last = by_step[last.step + 1]
        if last.step + 1 >= last.n_steps:
            status.complete.add(episode)
        else:
            status.partial[episode] = last
    return status


def completed_keys(path: str | Path) -> set[RecordKey]:
    """The keys ``(run_id, event_id, step, rollout)`` of every record a log holds."""
    return log_status(path).keys


class TrajectoryWriter:
    """Appends step records to ``<directory>/steps.jsonl``; writes ``run.json`` once.

    Reopening a directory of the same run appends (after cutting off a torn last line); a directory
    that belongs to another run is an error, so no log is ever silently mixed or overwritten. A
    record whose key is already in the log is not written again (:meth:`write` returns False).
    """

    def __init__(self, directory: str | Path, metadata: dict[str, Any], run_id: str | None = None) -> None:
        self.directory = Path(directory)
        self.run_id = run_id or run_id_for(metadata)
        self.directory.mkdir(parents=True, exist_ok=True)
        run_file = self.directory / RUN_FILE
        header = {"format_version": LOG_FORMAT_VERSION, "run_id": self.run_id, **metadata}
        if run_file.exists():
            existing = json.loads(run_file.read_text())
            if existing.get("run_id") != self.run_id:
                raise OutputExistsError(
                    f"{self.directory} holds the log of run {existing.get('run_id')!r}, not {self.run_id!r}; use another directory"
                )
        else:
            tmp = run_file.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(header, indent=2, sort_keys=True, default=str))
            os.replace(tmp, run_file)
        steps = self.directory / STEPS_FILE
        records, good, torn = _read_lines(steps)
        if torn:
            warnings.warn(
                f"{steps}: cut off an incomplete last line left by an interrupted run",
                TornLogWarning,
                stacklevel=2,
            )
            with steps.open("r+b") as fh:
                fh.truncate(good)
        self._keys: set[RecordKey] = {
            (r.get("run_id"), r["event_id"], r["step"], r.get("rollout", 0)) for r in records
        }
        self._fh = steps.open("a", encoding="utf-8")

    def write(self, record: StepRecord) -> bool:
        """Append one record (one line, flushed); skip it if its key is already logged.

        Args:
            record: The step record; its ``run_id`` must be this run's (or None).

        Returns:
            True if written, False if a record with the same key was already in the log.
        """
        if record.run_id not in (None, self.run_id):
            raise DataError(f"record of run {record.run_id!r} written to the log of run {self.run_id!r}")
        if record.run_id is None:
            record = record.replace(run_id=self.run_id)
        if record.key in self._keys:
            return False
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        # Lone surrogates (a model can write "\ud800") cannot be encoded as UTF-8: store U+FFFD instead.
        line = line.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        self._fh.write(line)
        self._fh.flush()
        self._keys.add(record.key)
        return True

    def close(self) -> None:
        """Close the file."""
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
