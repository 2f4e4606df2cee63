"""The local-LLM agent and its chat template, with a tiny random Llama on SmolLM2's real tokenizer."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.llm import TOOL_CHAT_TEMPLATE, TransformersAgent

pytest.importorskip("gguf")
llm = pytest.importorskip("forecast_dojo.agents.llm")
try:
    llm.smollm2_path()
except FileNotFoundError as err:  # pragma: no cover - depends on the optional package
    pytest.skip(str(err), allow_module_level=True)


@pytest.fixture(scope="module")
def tokenizer():
    return llm.load_smollm2_tokenizer()


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
    )
    return LlamaForCausalLM(config).eval()


def test_template_renders_tool_calls_and_results(tokenizer):
    messages = [
        {"role": "system", "content": "S", "tool_calls": None, "tool_call_id": None, "name": None},
        {"role": "user", "content": "Q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "search", "arguments": {"query": "é"}}}
            ],
        },
        {"role": "tool", "content": "[]", "tool_call_id": "c", "name": "search"},
        {
            "role": "assistant",
            "content": "done",
            "tool_calls": [
                {
                    "id": "d",
                    "type": "function",
                    "function": {"name": "submit_forecast", "arguments": '{"probabilities": [0.5, 0.5]}'},
                }
            ],
        },
    ]
    text = tokenizer.apply_chat_template(messages, chat_template=TOOL_CHAT_TEMPLATE, tokenize=False)
    assert text == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "search", "arguments": {"query": "é"}}</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n"
        '<|im_start|>assistant\ndone\n<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": [0.5, 0.5]}}</tool_call><|im_end|>\n'
    )
    # What the template writes is what the env parses back.
    from forecast_dojo.actions import parse_action

    turn = text.split("<|im_start|>assistant\n")[-1].removesuffix("<|im_end|>\n")
    parsed = parse_action(turn)
    assert parsed.content == "done" and parsed.tool_calls[0].arguments == {"probabilities": [0.5, 0.5]}


def test_llm_agent_plays_whole_episodes_and_reports_tokens(make_tiny_env, tiny_model, tokenizer, tmp_path):
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.prompts import Budgets

    env = make_tiny_env(memory="notebook", budgets=Budgets(max_tool_calls=2, max_turns=2), log_dir=tmp_path)
    agent = TransformersAgent(tiny_model, tokenizer, max_new_tokens=8, name="tiny")
    rows = run_episode(env, agent, "harbor")
    env.close()
    assert [r["step"] for r in rows] == [0, 1, 2]
    records = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert all(r["tokens"]["prompt_tokens"] > 100 and r["tokens"]["completion_tokens"] > 0 for r in records)


def test_logged_trajectories_train_with_trl_sft(make_tiny_env, tiny_model, tokenizer, tmp_path):
    """The log is an SFT dataset as it stands: TRL trains on it without any conversion."""
    from trl import SFTConfig, SFTTrainer

    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.trajectory import load_steps

    env = make_tiny_env(memory="notebook", log_dir=tmp_path / "log")
    run_episode(env, EvidenceAgent(), "mayor")
    env.close()
    dataset = load_steps(tmp_path / "log").select_columns(["messages"])
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        max_length=2048,
        assistant_only_loss=False,
        use_cpu=True,
    )
    trainer = SFTTrainer(model=tiny_model, args=config, train_dataset=dataset, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 2 and result.training_loss > 0
