"""Writing a file so that a kill, a full disk or a second writer leaves the old file or the new, never half.

The writers of the files a later run reads back (a log's rewrite, ``run.json``, a store's manifest, an
experiment's markers and ``learning.json``, a script's ``--json``) go through :func:`write_text_atomic`:
the text goes to a uniquely named temporary file in the same folder, which is then renamed over the
target (``os.replace`` is atomic within one file system). Two writers at once each rename a whole
file of their own; the last one wins.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

# The process's umask, read once at import (reading it means setting it, which is not thread-safe later):
# mkstemp makes its file 0600, and a file renamed into place should have the mode a plain write gives it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder, then rename it in.

    Args:
        path: The file to write; its folder is made if missing.
        text: The whole content.

    Raises:
        OSError: the folder cannot be made or written; ``path`` is then left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # what open(path, "w") would make, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, value: Any, *, sort_keys: bool = False, default: Any = None) -> None:
    """Write ``value`` as indented JSON with a final newline, atomically (:func:`write_text_atomic`).

    Args:
        path: The file to write.
        value: Anything :func:`json.dumps` takes.
        sort_keys: Sort the keys of every object.
        default: :func:`json.dumps`'s ``default`` (e.g. ``str`` for paths and dates).
    """
    write_text_atomic(path, json.dumps(value, indent=2, sort_keys=sort_keys, default=default) + "\n")
