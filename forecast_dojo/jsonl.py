"""Reading JSONL files line by line: the numbering every error message names.

A JSONL reader here counts lines from 1, blank lines included (so ``path:line`` in an error is the
line an editor shows), and skips the blank ones. What a line must hold is the reader's own rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def nonblank_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line of a UTF-8 text file, numbered from 1.

    Args:
        path: The file.

    Yields:
        The line's number (blank lines count) and its text, newline included.
    """
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                yield number, line
