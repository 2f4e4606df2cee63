"""``import forecast_dojo`` and ``gym.make`` load no model library (transformers, torch, sentence-transformers).

Each check runs in a fresh interpreter, since this test process has imported them already.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo import tools

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("sentence_transformers", "transformers", "torch", "trl", "datasets")

REPORT = f"""
import json, sys
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""


def run_python(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["FORECAST_DOJO_CACHE"] = str(cache)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def warm_schema_cache() -> None:
    """What the first env built with this cache writes (the tests' own process imports transformers anyway)."""
    for memory in ("none", "notebook"):
        for name in tools.TOOL_NAMES:
            tools.tool_schema(tools.tool_interface(name, memory))


def test_import_loads_no_model_library(tmp_path):
    result = run_python("import forecast_dojo\n" + REPORT, tmp_path)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_gym_make_reset_and_step_load_no_model_library(synthetic_cache, monkeypatch):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    warm_schema_cache()
    code = (
        """
import gymnasium as gym
import forecast_dojo
env = gym.make("forecast_dojo/Synthetic-v0", embedder="hashing")
obs, info = env.reset(seed=0)
assert obs["messages"][0]["role"] == "system"
obs, reward, terminated, truncated, info = env.step(
    '<tool_call>{"name": "search", "arguments": {"query": "election"}}</tool_call>'
)
assert "error" not in obs["messages"][0]["content"][:40].lower(), obs["messages"][0]["content"][:200]
"""
        + REPORT
    )
    result = run_python(code, synthetic_cache)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    assert "Loading weights" not in result.stderr


def test_cached_schemas_are_the_generators_and_follow_every_edit(tmp_path, monkeypatch):
    from transformers.utils import get_json_schema

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path))
    for memory in ("none", "notebook"):
        for name in tools.TOOL_NAMES:
            interface = tools.tool_interface(name, memory)
            generated = get_json_schema(interface.function(tools._schema_only))
            assert tools.tool_schema(interface) == generated  # generates and writes
            path = tools.schema_cache_path(interface)
            assert path.is_file() and path.is_relative_to(tmp_path / tools.SCHEMA_CACHE_DIR)
            assert tools.tool_schema(interface) == generated  # reads
    interface = tools.tool_interface("search")
    path = tools.schema_cache_path(interface)
    path.write_text("{torn")  # a corrupt file is regenerated
    assert tools.tool_schema(interface) == get_json_schema(interface.function(tools._schema_only))
    assert json.loads(path.read_text())["function"]["name"] == "search"
    edited = dataclasses.replace(interface, doc=interface.doc.replace("Search", "Look up", 1))
    assert tools.schema_cache_path(edited) != path  # an edited docstring never reads the old schema
    assert tools.tool_schema(edited)["function"]["description"].startswith("Look up")
    # the two memory modes of submit_forecast are different files (memory on adds the notebook)
    assert tools.schema_cache_path(
        tools.tool_interface("submit_forecast", "none")
    ) != tools.schema_cache_path(tools.tool_interface("submit_forecast", "notebook"))


def test_an_unwritable_cache_still_gives_the_schema(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(blocked))
    interface = tools.tool_interface("read")
    assert tools.tool_schema(interface)["function"]["name"] == "read"


@pytest.mark.slow
def test_minilm_loads_without_a_progress_bar(tmp_path):
    code = """
from transformers.utils import logging
from forecast_dojo.corpus.embedders import MiniLMEmbedder
embedder = MiniLMEmbedder()
assert embedder.encode(["a test"]).shape == (1, 384)
assert logging.is_progress_bar_enabled()  # restored after the load
"""
    result = run_python(code, tmp_path)
    assert "Loading weights" not in result.stderr, result.stderr[-2000:]


def test_the_command_line_parser_loads_no_model_library(tmp_path):
    code = "from forecast_dojo.cli import build_parser\nbuild_parser().format_help()\n" + REPORT
    result = run_python(code, tmp_path)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
