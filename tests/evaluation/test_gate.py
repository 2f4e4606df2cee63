"""The teacher-forced probe of the one-line "no bearing" turn: exact log-probabilities, the script."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from forecast_dojo.agents.honest import NO_BEARING
from forecast_dojo.errors import DataError, UsageError
from forecast_dojo.evaluation.gate import continuation_logprob, probe_no_bearing, summarize_probes
from forecast_dojo.evaluation.verdicts import final_turn_index, step_verdicts
from forecast_dojo.training.export import encode_messages
from forecast_dojo.trajectory import load_records
from tests.conftest import require_smollm2, tiny_llama

torch = pytest.importorskip("torch")
llm = require_smollm2()

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer():
    """SmolLM2's tokenizer with the tool chat template."""
    return llm.load_tokenizer("smollm2")


class UniformModel(torch.nn.Module):
    """A causal LM that gives every token of its vocabulary the same logit at every position."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # a parameter, for the device

    def forward(self, ids):
        return SimpleNamespace(logits=torch.zeros(ids.shape[0], ids.shape[1], self.vocab_size))


def _before_final_turn(log: Path):
    record = next(r for r in load_records(log) if final_turn_index(r) is not None)
    return record.messages[: final_turn_index(record)]


def test_a_uniform_model_gives_each_token_one_over_the_vocabulary(teacher_steps: Path, tokenizer) -> None:
    messages = _before_final_turn(teacher_steps)
    vocab = len(tokenizer)
    logprob = continuation_logprob(UniformModel(vocab), tokenizer, messages, NO_BEARING)
    n_tokens = len(tokenizer(NO_BEARING, add_special_tokens=False)["input_ids"])
    assert logprob == pytest.approx(-n_tokens * math.log(vocab), rel=1e-5)
    with pytest.raises(UsageError, match="empty"):
        continuation_logprob(UniformModel(vocab), tokenizer, messages, "")


def test_the_log_probability_is_the_chain_of_next_token_probabilities(teacher_steps: Path, tokenizer) -> None:
    model = tiny_llama(len(tokenizer)).eval()
    messages = _before_final_turn(teacher_steps)
    prompt = tokenizer.apply_chat_template(
        encode_messages([dict(m) for m in messages]),
        chat_template=llm.TOOL_CHAT_TEMPLATE, add_generation_prompt=True, tokenize=False,
    )  # fmt: skip
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    expected = 0.0
    for token in tokenizer(prompt + NO_BEARING, add_special_tokens=False)["input_ids"][len(ids) :]:
        with torch.no_grad():
            next_logits = model(torch.tensor([ids])).logits[0, -1]
        expected += float(torch.log_softmax(next_logits, dim=-1)[token])
        ids = [*ids, token]
    assert continuation_logprob(model, tokenizer, messages, NO_BEARING) == pytest.approx(expected, abs=1e-4)


def test_every_teacher_step_is_probed_and_summarized(teacher_steps: Path, tokenizer) -> None:
    records = load_records(teacher_steps)
    probes = probe_no_bearing(UniformModel(len(tokenizer)), tokenizer, teacher_steps, progress=False)
    assert len(probes) == len(records)
    by_key = {(r.event_id, r.step, r.rollout): step_verdicts(r) for r in records}
    for probe in probes:
        verdicts = by_key[(probe.event_id, probe.step, probe.rollout)]
        assert probe.teacher_weighed == any(v.weighed for v in verdicts.verdicts)
        assert probe.teacher_no_bearing == verdicts.no_bearing
        assert 0.0 < probe.p_no_bearing < 1e-6  # one over the vocabulary per token
    summary = summarize_probes(probes)
    assert summary["weighed"]["steps"] + summary["not_weighed"]["steps"] == len(records)
    assert summary["weighed"]["steps"] > 0 and summary["weighed"]["above_half"] == 0
    assert len(summary["probes"]) == len(records)
    assert (
        len(probe_no_bearing(UniformModel(len(tokenizer)), tokenizer, records, limit=2, progress=False)) == 2
    )
    with pytest.raises(DataError, match="no step"):
        probe_no_bearing(UniformModel(len(tokenizer)), tokenizer, [r.replace(messages=[]) for r in records])


def test_the_script_probes_a_checkpoint(teacher_steps: Path, tokenizer, tmp_path: Path) -> None:
    model_dir = llm.save_checkpoint(tiny_llama(len(tokenizer)), tokenizer, tmp_path / "tiny")
    out = tmp_path / "gate.json"
    script = [sys.executable, str(REPO / "evaluation" / "gate_probe.py"), "--teacher", str(teacher_steps)]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [*script, "--model", str(model_dir), "--limit", "3", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mean P(no bearing)" in done.stdout
    summary = json.loads(out.read_text())
    assert len(summary["probes"]) == 3 and all(0 < p["p_no_bearing"] < 1 for p in summary["probes"])
    missing = subprocess.run(
        [*script, "--model", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=600, env=env
    )
    assert missing.returncode == 2 and "error:" in missing.stderr
