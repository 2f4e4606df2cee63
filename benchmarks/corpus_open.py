"""Corpus open time with the sealed array digests (issue 18) against the open without them.

``Corpus.load`` now checks ``available_us.npy`` and ``id_order.npy`` against sealed full-coverage
sums and samples the other two arrays (``forecast_dojo.corpus.store.array_digest``). The baseline,
measured in the same run on the same corpus, is the same open with that check switched off (what an
open did before). Each open runs in a fresh process (page cache warm: the corpus was just written
or opened), several times; the table gives the median and the range, and the digest check alone.

Corpora are generated with one-word texts and 4-dimensional float16 vectors: the array check does
not depend on text or vector size, and the rest of the open is the same in both columns.

    python benchmarks/corpus_open.py --rows 100000 1000000 --work /tmp/corpus-open
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CHUNK = 65_536


def build(out: Path, rows: int) -> None:
    """Write a corpus of ``rows`` tiny documents (no embedding model)."""
    import numpy as np
    import pyarrow as pa

    from forecast_dojo.corpus.store import DOCUMENT_SCHEMA, CorpusWriter
    from forecast_dojo.timeutil import to_micros

    base = to_micros(datetime(2024, 1, 1, tzinfo=UTC))
    writer = CorpusWriter(out, embedder_name="constant-4", dim=4, vector_dtype="float16", overwrite=True)
    unit = np.zeros((CHUNK, 4), dtype=np.float32)
    unit[:, 0] = 1.0
    for lo in range(0, rows, CHUNK):
        n = min(CHUNK, rows - lo)
        at = base + 1_000_000 * np.arange(lo, lo + n, dtype=np.int64)
        table = pa.Table.from_pydict(
            {
                "id": [f"d{i:09d}" for i in range(lo, lo + n)],
                "title": [""] * n,
                "text": ["text"] * n,
                "url": [None] * n,
                "source": [None] * n,
                "published_at": pa.array(at, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                "available_at": pa.array(at, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                "date_source": ["given"] * n,
            },
            schema=DOCUMENT_SCHEMA,
        )
        writer.add(table, unit[:n])
    writer.finish(verify=False)


def open_once(path: str, digests: bool) -> dict[str, float]:
    """In this (fresh) process: one ``Corpus.load``; with ``digests`` off, the array check is skipped."""
    from forecast_dojo.corpus import store

    if not digests:
        store.Corpus._check_array_digests = lambda self: None  # type: ignore[method-assign]
    started = time.perf_counter()
    corpus = store.Corpus.load(path)
    opened = time.perf_counter() - started
    started = time.perf_counter()
    corpus._check_array_digests()
    return {"open_s": opened, "digest_s": time.perf_counter() - started}


def fresh(path: Path, digests: bool) -> dict[str, float]:
    """``open_once`` in a new interpreter."""
    done = subprocess.run(
        [sys.executable, __file__, "--open-once", str(path), "--digests", str(int(digests))],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) one corpus per size and print the open-time table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/corpus-open"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--open-once", help=argparse.SUPPRESS)
    parser.add_argument("--digests", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.open_once:
        print(json.dumps(open_once(args.open_once, bool(args.digests))))
        return 0
    results: list[dict[str, Any]] = []
    for rows in args.rows:
        path = args.work / f"rows-{rows}"
        if not (path / "manifest.json").exists():
            started = time.perf_counter()
            build(path, rows)
            print(f"built {rows:,} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        fresh(path, True)  # warm the page cache
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for _ in range(args.repeats):
            for digests in (False, True):  # interleaved, so load changes hit both alike
                runs[digests].append(fresh(path, digests))
        results.append({"rows": rows, "runs": {str(k): v for k, v in runs.items()}})
        base = [r["open_s"] for r in runs[False]]
        new = [r["open_s"] for r in runs[True]]
        check = [r["digest_s"] for r in runs[True]]
        results[-1]["row"] = (
            f"| {rows:,} | {statistics.median(base):.3f} ({min(base):.3f}-{max(base):.3f}) "
            f"| {statistics.median(new):.3f} ({min(new):.3f}-{max(new):.3f}) "
            f"| {1000 * statistics.median(check):.1f} |"
        )
    load = os.getloadavg()
    print(
        f"Corpus.load, fresh process, warm page cache, median (range) of {args.repeats}; load {load[0]:.1f}"
    )
    print(
        "| documents | open s, no array digests (baseline) | open s, with array digests | digest check ms |"
    )
    print("|---|---|---|---|")
    for result in results:
        print(result["row"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
