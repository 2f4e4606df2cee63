"""Fixtures for training tests: SmolLM2's real tokenizer, a tiny random Llama on it, and teacher logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_smollm2, tiny_llama

pytest.importorskip("trl")
llm = require_smollm2()


@pytest.fixture(scope="session")
def tokenizer():
    """A fresh SmolLM2 tokenizer with the tool chat template (shared by the session: do not modify)."""
    return llm.load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer) -> Path:
    """A saved checkpoint of the tiny random Llama: loads by path like any HF model."""
    out = tmp_path_factory.mktemp("tiny-llama")
    return llm.save_checkpoint(tiny_llama(len(tokenizer)), tokenizer, out)


@pytest.fixture
def teacher_log(make_tiny_env, tmp_path: Path):
    """Play both tiny events with the scripted EvidenceAgent in notebook mode; returns the log directory."""

    def play(name: str = "teacher", agent_factory=None, memory: str = "notebook", **env_kwargs) -> Path:
        from forecast_dojo.agents import EvidenceAgent
        from forecast_dojo.evaluation.runner import run_episode

        log = tmp_path / name
        env = make_tiny_env(memory=memory, log_dir=log, run_metadata={"agent": name}, **env_kwargs)
        for event_id in ("harbor", "mayor"):
            run_episode(env, (agent_factory or EvidenceAgent)(), event_id)
        env.close()
        return log

    return play
