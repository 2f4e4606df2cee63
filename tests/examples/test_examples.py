"""Smoke tests: every recipe in examples/ runs as a script (subprocess) on the synthetic world."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo.testing import ScriptedChatServer, serve_scripted_chat
from tests.conftest import REPO_ROOT, tiny_llama

EXAMPLES = REPO_ROOT / "examples"


def run_example(name: str, *args: str, cache: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {**os.environ, "FORECAST_DOJO_CACHE": str(cache), "NO_PROXY": "127.0.0.1,localhost"}
    environment["PYTHONPATH"] = str(REPO_ROOT)  # this tree's forecast_dojo, whatever is installed
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_example_has_a_smoke_test():
    tested = set(re.findall(r'run_example\(\s*"([\w.]+)"', Path(__file__).read_text()))
    assert {p.name for p in EXAMPLES.glob("*.py")} <= tested


@pytest.mark.slow
def test_rl_loop(synthetic_cache):
    result = run_example("rl_loop.py", "--embedder", "hashing", cache=synthetic_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"episode syn-\d{4}: return -?\d+\.\d{3}", lines[-1])
    assert sum(line.startswith("step ") for line in lines) >= 1


@pytest.fixture
def chat_server():
    ScriptedChatServer.requests = []
    server, url = serve_scripted_chat()
    yield url
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_openai_client_loop(synthetic_cache, chat_server):
    result = run_example(
        "openai_client_loop.py",
        "--base-url",
        chat_server,
        "--model",
        "scripted",
        "--embedder",
        "hashing",
        cache=synthetic_cache,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [line for line in result.stdout.splitlines() if " step " in line]
    requests = ScriptedChatServer.requests
    assert steps and len(requests) == 2 * len(steps)  # one search and one submission per step
    assert all(r["path"] == "/v1/chat/completions" and r["model"] == "scripted" for r in requests)
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"search", "submit_forecast"}
    second = requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert all(None not in m.values() for m in second)
    assert json.loads(second[3]["content"])  # the search results came back as JSON
    assert all("brier -0." in line for line in steps)


@pytest.mark.slow
def test_sft_from_log(synthetic_cache, tmp_path):
    """Teacher log -> export -> 2 SFT steps of a tiny random Llama -> a checkpoint that loads as an agent."""
    pytest.importorskip("trl")
    llm = pytest.importorskip("forecast_dojo.agents.llm")
    try:
        tokenizer = llm.load_tokenizer("smollm2")
    except FileNotFoundError as err:
        pytest.skip(str(err))
    student = llm.save_checkpoint(tiny_llama(len(tokenizer)), tokenizer, tmp_path / "student")
    result = run_example(
        "sft_from_log.py",
        "--out", str(tmp_path / "run"), "--embedder", "hashing", "--model", str(student),
        "--events", "2", "--max-steps", "2",
        cache=synthetic_cache,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"teacher: \d+ forecast steps logged", result.stdout)
    assert re.search(
        r"SFT: 2 optimizer steps, 2 sequences, ~[\d,]+ tokens .*estimated [\d.]+ min", result.stdout
    )
    checkpoint = tmp_path / "run" / "model"
    assert (checkpoint / "config.json").exists() and "quantization_config" not in (
        checkpoint / "config.json"
    ).read_text()
    agent = llm.TransformersAgent.from_pretrained(checkpoint)
    assert agent.model is not None


@pytest.mark.slow
def test_world_loop(synthetic_cache, tmp_path):
    out = tmp_path / "world.json"
    result = run_example(
        "world_loop.py",
        "--embedder",
        "hashing",
        "--end",
        "2031-04-01",
        "--out",
        str(out),
        "--figure",
        str(tmp_path / "world.png"),
        "--log-dir",
        str(tmp_path / "logs"),
        "--memory",
        "none",
        "files",
        cache=synthetic_cache,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0].startswith("forecaster")
    rows = json.loads(out.read_text())
    agents = ("world-scripted", "world-uniform", "world-idle")
    assert set(rows) == {f"{a}/{m}" for a in agents for m in ("none", "files")} | {"oracle"}
    assert rows["world-idle/none"]["skill"][0] == 0.0 and rows["oracle"]["regret"][0] == 0.0
    assert rows["world-scripted/none"]["skill"][0] > rows["world-uniform/none"]["skill"][0]
    assert (tmp_path / "world.png").read_bytes().startswith(b"\x89PNG")
    # the logs make a report: the same numbers, and memory files vs memory-free paired
    from forecast_dojo.evaluation.report import write_report

    world = write_report([tmp_path / "logs"], tmp_path / "report", plots=False)["world"]
    assert set(world["forecasters"]) == set(rows) - {"oracle"}
    for name, summary in world["forecasters"].items():
        assert summary["skill"] == pytest.approx(rows[name]["skill"])
    assert {tuple(c["a"]) for c in world["comparisons"]} == {(a, "files") for a in agents}


@pytest.mark.slow
def test_grpo_remote(make_tiny_env, tmp_path):
    """The TRL example against two servers on 127.0.0.1: one GRPO step whose rollouts run on them."""
    pytest.importorskip("trl")
    pytest.importorskip("openenv")
    llm = pytest.importorskip("forecast_dojo.agents.llm")
    from forecast_dojo.integrations.openenv import BackgroundServer, create_app

    try:
        tokenizer = llm.load_tokenizer("smollm2")
    except FileNotFoundError as err:
        pytest.skip(str(err))
    student = llm.save_checkpoint(tiny_llama(len(tokenizer)), tokenizer, tmp_path / "student")
    sessions: list[object] = []

    def make_env():
        sessions.append(None)
        return make_tiny_env(memory="none", split="train")

    with BackgroundServer(create_app(make_env)) as first, BackgroundServer(create_app(make_env)) as second:
        result = run_example(
            "grpo_remote.py",
            "--servers", first.url, second.url, "--model", str(student), "--out", str(tmp_path / "grpo"),
            "--events", "harbor", "--max-steps", "1", "--num-generations", "2",
            "--max-completion-length", "16", "--max-tool-calling-iterations", "1",
            cache=tmp_path, timeout=1200,  # torch + TRL start slowly on a loaded machine
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(
        r"GRPO: 1 optimizer steps on 3 prompts through 2 server\(s\); mean reward -1\.0000", result.stdout
    )
    assert (tmp_path / "grpo" / "model" / "config.json").exists()
    assert len(sessions) >= 2 + 2  # a probe env per server, then sessions on both
