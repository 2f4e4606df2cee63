"""What an importer hands to the pipeline: the events it made and, by reason, what it skipped."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.schema import Event


@dataclass
class ImportResult:
    """Events from one source plus skip counts by reason; ``notes`` holds non-fatal repairs by kind."""

    source: str
    events: list[Event] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, example: str | None = None) -> None:
        """Count one skipped record under ``reason`` and keep up to three example ids for the report."""
        self.skipped[reason] += 1
        if example is not None:
            bucket = self.examples.setdefault(reason, [])
            if len(bucket) < 3:
                bucket.append(example)

    def note(self, kind: str, count: int = 1) -> None:
        """Count a repair that did not drop anything (deduplicated rows, imputed dates, ...)."""
        self.notes[kind] += count

    def summary(self) -> dict[str, Any]:
        """Events imported, skips by reason and repairs by kind (the report's import section)."""
        return {
            "source": self.source,
            "events": len(self.events),
            "skipped": dict(sorted(self.skipped.items())),
            "notes": dict(sorted(self.notes.items())),
            "examples": {k: v for k, v in sorted(self.examples.items())},
        }
