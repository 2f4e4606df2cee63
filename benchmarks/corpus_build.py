"""Corpus build throughput: Ray Data with 1 and 2 local workers against the single-process runner.

Every configuration builds the same input into its own directory with ``forecast-dojo corpus build``
(a fresh process each, so Ray starts with the CPU count asked for), without indexes. The table gives
documents per second over the whole command (Ray's start included) and over the build's own steps,
the seconds of each step from ``build_report.json``, and whether every run wrote the same corpus
(content hash). The single-process runner is the baseline, measured in the same run.

    python benchmarks/corpus_build.py --input ../shared/data/wikipedia-current-events \\
        --start 2024-01-01 --end 2024-03-31 --embedder minilm --work /tmp/corpus-build-bench
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

CONFIGS: dict[str, list[str]] = {
    "single process (baseline)": ["--runner", "single"],
    "ray, 1 worker": ["--runner", "ray", "--ray-cpus", "1", "--embed-actors", "1"],
    "ray, 2 workers": ["--runner", "ray", "--ray-cpus", "2", "--embed-actors", "2"],
}


def run(name: str, flags: list[str], args: argparse.Namespace) -> dict[str, object]:
    """Build once with ``flags``; wall time of the command and the build report's numbers."""
    out = args.work / name.split(" (")[0].replace(", ", "-").replace(" ", "-")
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "forecast_dojo.cli",
        "corpus",
        "build",
        "--source",
        args.source,
        "--input",
        str(args.input),
        "--out",
        str(out),
        "--embedder",
        args.embedder,
        "--dense-index",
        "none",
        "--no-bm25",
        "--no-progress",
        *(["--start", args.start] if args.start else []),
        *(["--end", args.end] if args.end else []),
        *flags,
    ]
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        sys.exit(f"{name}: exit {completed.returncode}\n{completed.stderr[-3000:]}")
    report = json.loads((out / "build_report.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    seconds = {k: float(v) for k, v in report["seconds"].items()}
    documents = int(report["documents"])
    return {
        "config": name,
        "documents": documents,
        "wall_s": round(wall, 2),
        "steps_s": round(sum(seconds.values()), 2),
        "docs_per_s_wall": round(documents / wall, 1),
        "docs_per_s_steps": round(documents / max(sum(seconds.values()), 1e-9), 1),
        "seconds": seconds,
        "content_hash": manifest["content_hash"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--input", type=Path, default=Path("../shared/data/wikipedia-current-events"))
    parser.add_argument("--source", default="wikipedia")
    parser.add_argument("--start", default="2024-01-01")
    parser.add_argument("--end", default="2024-03-31")
    parser.add_argument(
        "--embedder", default="minilm", help="minilm (the real model) or static-minilm (fast)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/corpus-build-bench"))
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--json", type=Path, help="append the results as JSON lines")
    args = parser.parse_args()
    if not args.input.exists():
        sys.exit(f"input not found: {args.input} (the shared data folder; see ../shared/data/README)")
    args.work.mkdir(parents=True, exist_ok=True)

    results = []
    for name in args.configs:
        print(f"building with {name} ...", file=sys.stderr, flush=True)
        results.append(run(name, CONFIGS[name], args))
    steps = list(dict.fromkeys(step for r in results for step in r["seconds"]))  # type: ignore[attr-defined]
    same = len({r["content_hash"] for r in results}) == 1
    print(f"\n{results[0]['documents']:,} documents, embedder {args.embedder}, input {args.input}")
    print(f"| runner | wall s | docs/s (wall) | docs/s (steps) | {' | '.join(f'{s} s' for s in steps)} |")
    print("|---|---|---|---|" + "---|" * len(steps))
    for r in results:
        cells = " | ".join(f"{r['seconds'].get(s, 0.0):.1f}" for s in steps)  # type: ignore[attr-defined]
        print(
            f"| {r['config']} | {r['wall_s']} | {r['docs_per_s_wall']} | {r['docs_per_s_steps']} | {cells} |"
        )
    print(f"\nsame corpus (content hash) from every runner: {'yes' if same else 'NO'}")
    if args.json:
        with args.json.open("a") as f:
            for r in results:
                f.write(json.dumps({"what": "corpus-build", "embedder": args.embedder, **r}) + "\n")


if __name__ == "__main__":
    main()
