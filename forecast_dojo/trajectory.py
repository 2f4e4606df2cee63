"""The trajectory log: one JSON line per forecast step, flushed as each step ends.

A run directory holds ``run.json`` (env spec, corpus manifest hash, package version, seed: stored
once) and ``steps.jsonl``. ``datasets.load_dataset("json", data_files=".../steps.jsonl")`` reads it
without custom code; the ``messages`` and ``tools`` columns are what TRL's SFT trainer expects.
Every record has the same keys; values whose shape varies (tool arguments, tool schemas) load as
``datasets.Json`` features, exactly as written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from forecast_dojo.untrusted import UntrustedInputError, loads

STEPS_FILE = "steps.jsonl"
RUN_FILE = "run.json"
LOG_FORMAT_VERSION = 1


def run_id_for(metadata: dict[str, Any]) -> str:
    """A deterministic run id: the same configuration and seed give the same id."""
    digest = hashlib.sha256(json.dumps(metadata, sort_keys=True, default=str).encode()).hexdigest()
    return f"run-{digest[:12]}"


def decoded_arguments(arguments: Any) -> Any:
    """Tool-call arguments as chat templates expect them: a dict when they are a JSON object, else as sent."""
    if isinstance(arguments, str):
        try:  # as the env read them: clean strings, bounded nesting and numbers, strict JSON
            value = loads(arguments, max_chars=max(len(arguments), 1))
        except UntrustedInputError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments


def normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message with exactly the keys role, content, tool_calls, tool_call_id, name.

    Tool-call arguments are stored decoded (a dict), the form TRL and Hugging Face chat templates
    render; ``datasets`` keeps their mixed shapes exactly (a ``Json`` feature).
    """
    calls = message.get("tool_calls") or None
    if calls is not None:
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": decoded_arguments(c["function"]["arguments"]),
                },
            }
            for c in calls
        ]
    return {
        "role": message["role"],
        "content": message.get("content") or "",
        "tool_calls": calls,
        "tool_call_id": message.get("tool_call_id"),
        "name": message.get("name"),
    }


class TrajectoryWriter:
    """Appends step records to ``<directory>/steps.jsonl``; writes ``run.json`` once.

    Reopening a directory of the same run appends; a directory that belongs to another run is an
    error, so no log is ever silently mixed or overwritten.
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
                raise FileExistsError(
                    f"{self.directory} holds the log of run {existing.get('run_id')!r}, not {self.run_id!r}; use another directory"
                )
        else:
            run_file.write_text(json.dumps(header, indent=2, sort_keys=True, default=str))
        self._fh = (self.directory / STEPS_FILE).open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps({"run_id": self.run_id, **record}, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_steps(path: str | Path):
    """The step records of a run directory (or a steps.jsonl) as a ``datasets.Dataset``."""
    from datasets import load_dataset

    path = Path(path)
    file = path / STEPS_FILE if path.is_dir() else path
    return load_dataset("json", data_files=str(file), split="train")


def load_run_metadata(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / RUN_FILE).read_text())
