"""The top-level evaluation scripts run as scripts (subprocess smoke tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_compare_memory_help():
    done = subprocess.run(
        [sys.executable, str(REPO / "evaluation" / "compare_memory.py"), "--help"],
        capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0 and "--controls" in done.stdout


@pytest.mark.slow
def test_compare_memory_runs_the_study(synthetic_cache, tmp_path):
    env = os.environ | {"FORECAST_DOJO_CACHE": str(synthetic_cache), "PYTHONPATH": str(REPO)}
    out = tmp_path / "study"
    done = subprocess.run(
        [sys.executable, str(REPO / "evaluation" / "compare_memory.py"), "--agent", "evidence-oracle-lite",
         "--embedder", "hashing", "--max_events", "3", "--controls", "empty", "stale", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    compared = {(tuple(c["a"]), tuple(c["b"]), c["metric"]) for c in report["comparisons"]}
    lite = "evidence-oracle-lite"
    assert ((lite, "notebook"), (lite, "none"), "brier") in compared
    assert ((lite, "notebook-empty"), (lite, "notebook"), "brier") in compared


def test_every_spec_path_the_scripts_and_docs_name_exists():
    """compare_memory.py and the docs point at specs by their place in the repository (envs/*.toml)."""
    import re

    texts = [
        REPO / "evaluation" / "compare_memory.py",
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    named = {m for path in texts for m in re.findall(r"(?<![\w/.-])envs/[\w.-]+\.toml", path.read_text())}
    assert "envs/forecastbench-wce.toml" in named
    assert all((REPO / name).is_file() for name in named), sorted(
        n for n in named if not (REPO / n).is_file()
    )
