"""The trajectory log: one JSON line per forecast step (a :class:`StepRecord`), flushed as each step ends.

A run directory holds ``run.json`` (env spec, corpus manifest hash, package version, seed: stored
once) and ``steps.jsonl``. ``datasets.load_dataset("json", data_files=".../steps.jsonl")`` reads it
without custom code; the ``messages`` and ``tools`` columns are what TRL's SFT trainer expects.
Every record has the same keys; values whose shape varies (tool arguments, tool schemas) load as
``datasets.Json`` features, exactly as written.

This module owns every read and write of a log: the typed reader (:func:`load_records`, and
:func:`find_run_dirs` for paths that name several runs) that the export, GRPO, the evaluation and the
report all use, the torn-tail rule, de-duplication, and the writer.

Crash safety: a record is one ``write`` of one line, so a killed run leaves at most one torn line, at
the end. Loaders drop it with a warning, and a writer reopening the directory cuts it off before
appending. A writer never writes two records with the same key ``(run_id, event_id, step, rollout)``:
a second one is skipped with a :class:`DuplicateRecordWarning`, so rerunning or appending a run never
duplicates steps. :func:`log_status` says which events are complete and which were left half-logged
(a resuming runner continues those).

One writer per run directory: a :class:`TrajectoryWriter` holds an exclusive lock
(``fcntl.flock`` on ``writer.lock`` in the directory) for its whole life, and a second writer, in
this process or another, gets a :class:`LogLockedError` naming the holder (pid, command, start
time). The torn-tail repair and ``run.json`` (written under a unique temporary name, then renamed)
happen only under that lock. A write that fails (a full disk) leaves the file exactly as it was and
raises :class:`LogWriteError`; :class:`LogSink` (what the env writes through) keeps such records and
writes them, in order and once, with the next record or at close.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.atomic import write_text_atomic
from forecast_dojo.errors import DataError, OutputExistsError, StateError
from forecast_dojo.errors import LogLockedError as LogLockedError
from forecast_dojo.errors import LogNotFoundError as LogNotFoundError
from forecast_dojo.errors import LogWriteError as LogWriteError
from forecast_dojo.records import RecordFormatError, StepRecord

if TYPE_CHECKING:
    from datasets import Dataset

STEPS_FILE = "steps.jsonl"
RUN_FILE = "run.json"
LOCK_FILE = "writer.lock"
LOG_FORMAT_VERSION = 2

RecordKey = tuple[str | None, str, int, int]


class TornLogWarning(UserWarning):
    """A log ended in a partial line (a run was killed mid-write); the line was dropped."""


class DuplicateRecordWarning(UserWarning):
    """A record whose key the log already holds was not written (a replay of a logged step)."""


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


TORN_DROPPED = "the last line is incomplete (the run was interrupted while writing it); dropped it"
TORN_CUT = "cut off an incomplete last line left by an interrupted run"


def _read_complete_lines(
    file: Path, torn_message: str = TORN_DROPPED, *, stacklevel: int = 2
) -> tuple[list[dict[str, Any]], int, bool]:
    """:func:`_read_lines`, warning (a :class:`TornLogWarning` at ``stacklevel`` above its caller) when the tail was torn."""
    records, good, torn = _read_lines(file)
    if torn:
        warnings.warn(f"{file}: {torn_message}", TornLogWarning, stacklevel=stacklevel + 1)
    return records, good, torn


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


def _key_of(record: dict[str, Any]) -> RecordKey:
    return (record.get("run_id"), record["event_id"], record["step"], record.get("rollout", 0))


def _deduplicated(records: Iterable[dict[str, Any]], file: Path) -> list[dict[str, Any]]:
    seen: set[RecordKey] = set()
    out = []
    duplicates = 0
    for record in records:
        if not isinstance(record, dict):
            raise RecordFormatError(
                f"{file}: a step record must be a JSON object, not {type(record).__name__}"
            )
        key = _key_of(record)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(record)
    if duplicates:
        warnings.warn(f"{file}: dropped {duplicates} duplicate step record(s)", stacklevel=3)
    return out


def read_log(path: str | Path, *, deduplicate: bool = True) -> list[dict[str, Any]]:
    """The raw records of a log (a run directory or a ``steps.jsonl``), torn tail and duplicates dropped.

    Args:
        path: The run directory or the file.
        deduplicate: Keep only the first record of each key (a file of several forecasters' reference
            records, which share keys, is read with False).

    Returns:
        One dict per record, in file order.
    """
    file = _steps_file(path)
    records, _, _ = _read_complete_lines(file)
    return _deduplicated(records, file) if deduplicate else records


def load_records(path: str | Path, *, deduplicate: bool = True) -> list[StepRecord]:
    """The step records of a run directory (or a ``steps.jsonl``), as typed records.

    The one reader of a log: a torn last line (a killed run) is dropped with a :class:`TornLogWarning`;
    duplicate keys keep the first record; a corrupt line that is not the last is a
    :class:`~forecast_dojo.records.RecordFormatError` naming the file and line.

    Args:
        path: The run directory or the file.
        deduplicate: Keep only the first record of each key (see :func:`read_log`).

    Returns:
        The records in the order they were written.
    """
    return [StepRecord.from_dict(r) for r in read_log(path, deduplicate=deduplicate)]


def save_records(path: str | Path, records: Sequence[StepRecord]) -> Path:
    """Write records as a JSONL file at once, replacing it atomically (for files written whole, e.g. references).

    The text goes to a uniquely named temporary file in the same folder, then is renamed over ``path``:
    a reader sees the old file or the new one, never a mix, and two writers never share a temporary name.

    Args:
        path: The file.
        records: The records, in order.

    Returns:
        The path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(_line_of(record) for record in records))
    return path


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories that paths name: each is a run directory, a ``steps.jsonl`` or a folder of runs.

    Args:
        paths: Run directories, ``steps.jsonl`` files, or folders holding run directories.

    Returns:
        The run directories, in the order given (a folder's runs sorted by name).

    Raises:
        LogNotFoundError: For a path that is none of these (the message names it).
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file() and path.name == STEPS_FILE:
            found.append(path.parent)
        elif (path / STEPS_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            children = sorted(p.parent for p in path.glob(f"*/{STEPS_FILE}"))
            if not children:
                raise LogNotFoundError(f"{path}: no {STEPS_FILE} in it or in its subfolders")
            found.extend(children)
        else:
            raise LogNotFoundError(f"{path}: not a run directory, a {STEPS_FILE} or a folder of runs")
    return found


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
    raw, _, torn = _read_complete_lines(file)
    records = _deduplicated(raw, file)
    if not torn and len(records) == len(raw):
        return load_dataset("json", data_files=str(file), split="train")
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / STEPS_FILE
        with clean.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        return load_dataset("json", data_files=str(clean), split="train", cache_dir=str(Path(tmp) / "cache"))


def load_run_metadata(path: str | Path, *, missing_ok: bool = False) -> dict[str, Any]:
    """The ``run.json`` of a run directory.

    Args:
        path: The run directory.
        missing_ok: Return ``{}`` for a directory without ``run.json`` instead of raising.

    Returns:
        The run's metadata (``run_id``, ``format_version`` and what the run stored).
    """
    file = Path(path) / RUN_FILE
    if missing_ok and not file.is_file():
        return {}
    return json.loads(file.read_text())


@dataclass
class LogStatus:
    """What a log holds, per (event, rollout): complete episodes and half-logged ones.

    Attributes:
        complete: (event_id, rollout) pairs whose every step is logged.
        partial: (event_id, rollout) -> the last logged record of an episode that stopped early.
        keys: Every logged record key.
        steps: (event_id, rollout) -> the steps logged for it (in any order, with any gaps).
    """

    complete: set[tuple[str, int]] = field(default_factory=set)
    partial: dict[tuple[str, int], StepRecord] = field(default_factory=dict)
    keys: set[RecordKey] = field(default_factory=set)
    steps: dict[tuple[str, int], set[int]] = field(default_factory=dict)


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
        status.steps[episode] = set(by_step)
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


def _line_of(record: StepRecord) -> str:
    line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
    # Lone surrogates (a model can write "\ud800") cannot be encoded as UTF-8: store U+FFFD instead.
    return line.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _append(fh: Any, data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file (a single ``write`` may be partial)."""
    view = memoryview(data)
    while view:
        written = fh.write(view)
        if not written:
            raise OSError(f"write returned {written!r}")
        view = view[written:]


def _holder_text(lock_file: Path) -> str:
    """Who holds a writer lock, as its holder wrote it (waiting briefly for a holder that just took it)."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            holder = json.loads(lock_file.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            holder = None
        if isinstance(holder, dict) or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if not isinstance(holder, dict):
        return "a writer that did not say who it is"
    who = "this process" if holder.get("pid") == os.getpid() else f"pid {holder.get('pid')}"
    return f"{who} on {holder.get('host')}, started {holder.get('started')}, command: {holder.get('command')}"


class TrajectoryWriter:
    """Appends step records to ``<directory>/steps.jsonl``; writes ``run.json`` once; the directory's only writer.

    The writer takes an exclusive lock on ``<directory>/writer.lock`` (``fcntl.flock``) before it reads
    or changes anything and holds it until :meth:`close`; while it does, another writer on the same
    directory raises :class:`LogLockedError` naming this one. Reopening a directory of the same run
    appends (after cutting off a torn last line); a directory that belongs to another run is an error,
    so no log is ever silently mixed or overwritten. A record whose key is already in the log is not
    written again (:meth:`write` returns False and warns). A failed append (a full disk) leaves the
    file as it was and raises :class:`LogWriteError`: writing the same record again later logs it once.
    """

    def __init__(self, directory: str | Path, metadata: dict[str, Any], run_id: str | None = None) -> None:
        self.directory = Path(directory)
        self.run_id = run_id or run_id_for(metadata)
        self._lock: Any = None
        self._fh: Any = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = self._acquire()
            self._open(metadata)
        except OSError as err:
            self.close()
            if isinstance(err, FileExistsError):
                raise
            raise LogWriteError(
                f"{self.directory}: cannot open the log for writing ({err})", err.errno
            ) from err
        except BaseException:
            self.close()
            raise

    def _acquire(self) -> Any:
        lock_file = self.directory / LOCK_FILE
        handle = open(lock_file, "a+b", buffering=0)  # noqa: SIM115 - held open for the writer's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise LogLockedError(
                f"{self.directory} is being written by another writer ({_holder_text(lock_file)}); one "
                "writer per run directory: wait for it to finish, or write to another directory"
            ) from None
        except BaseException:
            handle.close()
            raise
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "command": " ".join([sys.executable, *sys.argv])[:1000],
            "run_id": self.run_id,
        }
        handle.truncate(0)
        handle.write(json.dumps(holder).encode())
        return handle

    def _open(self, metadata: dict[str, Any]) -> None:
        """Under the lock: check or write ``run.json``, cut a torn tail, open ``steps.jsonl`` for appending."""
        run_file = self.directory / RUN_FILE
        header = {"format_version": LOG_FORMAT_VERSION, "run_id": self.run_id, **metadata}
        if run_file.exists():
            existing = json.loads(run_file.read_text())
            if existing.get("run_id") != self.run_id:
                raise OutputExistsError(
                    f"{self.directory} holds the log of run {existing.get('run_id')!r}, not {self.run_id!r}; use another directory"
                )
        else:
            write_text_atomic(run_file, json.dumps(header, indent=2, sort_keys=True, default=str))
        steps = self.directory / STEPS_FILE
        records, good, torn = _read_complete_lines(steps, TORN_CUT, stacklevel=4)
        if torn:
            with steps.open("r+b") as fh:
                fh.truncate(good)
        self._keys: set[RecordKey] = {_key_of(r) for r in _deduplicated(records, steps)}
        self._fh = open(steps, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        self._size = good  # the end of the last complete line: what a failed write is undone to
        self._repair = False

    @property
    def steps_file(self) -> Path:
        """The ``steps.jsonl`` this writer appends to."""
        return self.directory / STEPS_FILE

    def has(self, key: RecordKey) -> bool:
        """Whether the log holds a record with this key."""
        return key in self._keys

    def write(self, record: StepRecord) -> bool:
        """Append one record (one line, one ``write``); skip it if its key is already logged.

        Args:
            record: The step record; its ``run_id`` must be this run's (or None).

        Returns:
            True if written, False if a record with the same key was already in the log (the log keeps
            the first; a :class:`DuplicateRecordWarning` says so).

        Raises:
            LogWriteError: The append failed (e.g. ``ENOSPC``); the file is as it was before the call and
                the record is not logged, so writing it again later logs it exactly once.
        """
        if record.run_id not in (None, self.run_id):
            raise DataError(f"record of run {record.run_id!r} written to the log of run {self.run_id!r}")
        if self._fh is None or self._fh.closed:
            raise StateError(f"{self.steps_file}: the writer is closed")
        if record.run_id is None:
            record = record.replace(run_id=self.run_id)
        if record.key in self._keys:
            warnings.warn(
                f"{self.steps_file}: not logged: a record of event {record.event_id!r} step {record.step} "
                f"rollout {record.rollout} is already in the log (a replay of a logged step; the log keeps "
                "the first; give a replay another rollout index to log it)",
                DuplicateRecordWarning,
                stacklevel=2,
            )
            return False
        data = _line_of(record).encode("utf-8")
        try:
            if self._repair:  # an earlier failed write may have left part of its line
                self._fh.truncate(self._size)
                self._repair = False
            _append(self._fh, data)
        except OSError as err:
            try:
                self._fh.truncate(self._size)
            except OSError:
                self._repair = True  # cut before the next write
            raise LogWriteError(
                f"{self.steps_file}: could not append the record of event {record.event_id!r} step "
                f"{record.step} ({err}); the log is as it was before it",
                err.errno,
            ) from err
        self._size += len(data)
        self._keys.add(record.key)
        return True

    def close(self) -> None:
        """Close the file and release the directory's lock."""
        if self._fh is not None and not self._fh.closed:
            self._fh.close()
        if self._lock is not None and not self._lock.closed:
            self._lock.close()  # closing the descriptor releases the flock

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class LogOutcome:
    """What became of one record sent to a :class:`LogSink`.

    Attributes:
        written: The record is in the log now.
        duplicate: The log already held a record with its key; this one was not written.
        error: Why it is not logged yet (an I/O failure); it is kept and written with the next record or at close.
        pending: How many records wait to be written after this call (this one included when it failed).
        recovered: How many earlier records, kept after a failure, this call wrote.
    """

    written: bool
    duplicate: bool = False
    error: str | None = None
    pending: int = 0
    recovered: int = 0

    def message(self) -> str | None:
        """Why the record is not logged (None when it is), in words."""
        if self.written:
            return None
        if self.duplicate:
            return (
                "not logged: the log already holds a record of this (event, step, rollout); a replay of a "
                "logged step keeps the first record (give a replay another rollout index to log it)"
            )
        return (
            f"not logged yet: {self.error}; {self.pending} record(s) are kept and will be written, in "
            "order and once, with the next record or when the env closes"
        )


class LogSink:
    """The env's way into its log: opens the :class:`TrajectoryWriter` on first use, survives failed writes.

    A record that could not be written (a full disk, or a directory that could not be opened) is kept,
    and written before the next record, so once space returns the log holds every record once, in order.
    A second writer's lock (:class:`LogLockedError`) and a directory of another run
    (``FileExistsError``) are configuration errors and raise.
    """

    def __init__(self, directory: str | Path, metadata: dict[str, Any], run_id: str | None = None) -> None:
        self.directory = Path(directory)
        self.metadata = metadata
        self.run_id = run_id or run_id_for(metadata)
        self.writer: TrajectoryWriter | None = None
        self.pending: list[StepRecord] = []

    def write(self, record: StepRecord) -> LogOutcome:
        """Log ``record`` after any records kept from earlier failures.

        Args:
            record: The step record.

        Returns:
            The :class:`LogOutcome`; an I/O failure is reported there, never raised.
        """
        self.pending.append(record)
        written = self._flush()
        if isinstance(written, LogWriteError):
            return LogOutcome(False, error=str(written), pending=len(self.pending), recovered=0)
        recovered = sum(1 for ok in written[:-1] if ok)
        if not written[-1]:
            return LogOutcome(False, duplicate=True, recovered=recovered)
        return LogOutcome(True, recovered=recovered)

    def _flush(self) -> list[bool] | LogWriteError:
        """Write every kept record in order; their results, or the error that stopped the writing."""
        results: list[bool] = []
        try:
            if self.writer is None:
                self.writer = TrajectoryWriter(self.directory, self.metadata, run_id=self.run_id)
            while self.pending:
                results.append(self.writer.write(self.pending[0]))
                self.pending.pop(0)
        except LogWriteError as err:
            return err
        return results

    def close(self) -> None:
        """Write the kept records, then close the writer.

        Raises:
            LogWriteError: Records could still not be written (the message says how many are lost).
        """
        try:
            if self.pending:
                result = self._flush()
                if isinstance(result, LogWriteError):
                    lost = len(self.pending)
                    self.pending = []
                    raise LogWriteError(
                        f"{self.directory}: {lost} step record(s) could not be logged ({result})",
                        result.errno,
                    ) from result
        finally:
            if self.writer is not None:
                self.writer.close()
                self.writer = None
