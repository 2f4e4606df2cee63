"""The local-LLM agent and its chat template, with a tiny random Llama on SmolLM2's real tokenizer."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.llm import TOOL_CHAT_TEMPLATE, TransformersAgent
from tests.conftest import require_smollm2, tiny_llama

llm = require_smollm2()


@pytest.fixture(scope="module")
def tokenizer():
    return llm.load_smollm2_tokenizer()


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    return tiny_llama(len(tokenizer), pad_token_id=None).eval()  # LlamaConfig's default: no padding row


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
    from forecast_dojo import chat_template, training

    assert (
        TOOL_CHAT_TEMPLATE is chat_template.TOOL_CHAT_TEMPLATE is training.TOOL_CHAT_TEMPLATE
    )  # one template
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


def test_assistant_mask_covers_exactly_the_assistant_turns(tokenizer):
    """``{% generation %}`` marks each assistant turn's text, calls and <|im_end|>: nothing else."""
    from forecast_dojo.agents.llm import load_tokenizer

    tok = load_tokenizer("smollm2")
    turns = [
        "",
        "Two sources agree.",
    ]
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q"},
        {
            "role": "assistant",
            "content": turns[0],
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}
            ],
        },
        {"role": "tool", "content": "[]", "tool_call_id": "c", "name": "search"},
        {"role": "user", "content": "notice"},
        {
            "role": "assistant",
            "content": turns[1],
            "tool_calls": [
                {
                    "id": "d",
                    "type": "function",
                    "function": {"name": "submit_forecast", "arguments": '{"probabilities": [0.7, 0.3]}'},
                }
            ],
        },
    ]
    out = tok.apply_chat_template(
        messages, return_assistant_tokens_mask=True, return_dict=True, tokenize=True
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    spans, current = [], []
    for token, flag in zip(ids, mask, strict=True):
        if flag:
            current.append(token)
        elif current:
            spans.append(tok.decode(current))
            current = []
    if current:
        spans.append(tok.decode(current))
    assert spans == [
        '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call><|im_end|>',
        'Two sources agree.\n<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": [0.7, 0.3]}}</tool_call><|im_end|>',
    ]
    # TRL agrees: the template keeps prefixes, renders tool calls, and trains the end-of-turn token.
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
        supports_tool_calling,
    )

    assert is_chat_template_prefix_preserving(tok) and supports_tool_calling(tok)
    assert is_chat_template_stop_token_trained(tok)


def test_saved_checkpoint_has_no_quantization_and_plays_an_episode(
    make_tiny_env, tiny_model, tokenizer, tmp_path
):
    """save_checkpoint -> TransformersAgent.from_pretrained(path) completes an episode; load_model trains it again."""
    import torch

    from forecast_dojo.agents.llm import load_model, save_checkpoint, strip_quantization
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.prompts import Budgets

    tiny_model.config.quantization_config = {"quant_method": "gguf"}  # what a GGUF load leaves behind
    tiny_model.is_quantized = True
    path = save_checkpoint(strip_quantization(tiny_model), tokenizer, tmp_path / "ckpt")
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    assert (
        json.loads((path / "tokenizer_config.json").read_text()).get("chat_template")
        or (path / "chat_template.jinja").exists()
    )

    agent = TransformersAgent.from_pretrained(path, max_new_tokens=8)
    assert agent.name == f"hf:{path}"
    env = make_tiny_env(memory="none", budgets=Budgets(max_tool_calls=1, max_turns=2))
    rows = run_episode(env, agent, "mayor")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]

    again = load_model(path)
    assert getattr(again, "hf_quantizer", None) is None and not getattr(again, "is_quantized", False)
    assert all(p.requires_grad for p in again.parameters())
    for a, b in zip(again.parameters(), tiny_model.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_smollm2_loads_trainable_without_gguf_quantization():
    """The de-quantized SmolLM2 is a plain float model: the Trainer's quantization check passes."""
    from transformers.trainer_utils import validate_quantization_for_training

    from forecast_dojo.agents.llm import load_model

    model = load_model("smollm2")
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "quantization_config", None)
    assert "quantization_config" not in model.config.to_dict()
    validate_quantization_for_training(model)  # raises "purely quantized" before the fix


def test_pretrained_agents_share_one_batcher_and_load_in_bfloat16(
    make_tiny_env, tiny_model, tokenizer, tmp_path
):
    """`forecast-dojo run --agents hf:<path> --concurrency N --local-dtype bfloat16` builds agents like these."""
    import torch

    from forecast_dojo.agents.llm import pretrained_agent, save_checkpoint
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.prompts import Budgets

    path = save_checkpoint(tiny_model, tokenizer, tmp_path / "ckpt")
    first, second = (
        pretrained_agent(path, dtype="bfloat16", batch_size=4, max_new_tokens=8) for _ in range(2)
    )
    assert first.batcher is not None and first.batcher is second.batcher and first.batcher.max_batch == 4
    assert first.model.dtype == torch.bfloat16
    alone = pretrained_agent(path, max_new_tokens=8)  # no --concurrency: its own batches of one
    assert alone.batcher is not first.batcher and alone.batcher.max_batch == 1
    env = make_tiny_env(memory="none", budgets=Budgets(max_tool_calls=1, max_turns=2))
    rows = run_episode(env, first, "mayor")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert first.batcher.batch_sizes  # the episode's replies went through the batcher
    with pytest.raises(ValueError, match="dtype"):
        pretrained_agent(path, dtype="float8")


def test_released_models_are_loaded_again_by_the_next_agent(tiny_model, tokenizer, tmp_path):
    """`training/experiment.py` releases the evaluation's models before it trains GRPO in the same process."""
    import weakref

    from forecast_dojo.agents.llm import pretrained_agent, release_shared_models, save_checkpoint

    path = save_checkpoint(tiny_model, tokenizer, tmp_path / "ckpt")
    agent = pretrained_agent(path, batch_size=4, max_new_tokens=8)
    model, batcher = weakref.ref(agent.model), weakref.ref(agent.batcher)
    assert pretrained_agent(path, batch_size=4).model is model()  # kept for the next agent
    del agent
    release_shared_models()
    assert model() is None and batcher() is None  # nothing holds them any more: their memory is free
    again = pretrained_agent(path, batch_size=4, max_new_tokens=8)
    assert again.batcher is not None and again.batcher.max_batch == 4


def test_lockstep_episodes_give_the_same_greedy_turns_as_one_at_a_time(
    make_tiny_env, tiny_model, tokenizer, tmp_path
):
    """Episodes played in threads on one batcher (lockstep batches, cached prefixes, episodes of different
    lengths) write exactly the turns that plain, uncached, one-at-a-time generation writes."""
    import threading

    from forecast_dojo.agents.llm import generation_batcher
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.prompts import Budgets
    from tests.conftest import tiny_events

    events = [e.id for e in tiny_events()]
    n_steps = {e.id: e.n_steps for e in tiny_events()}
    assert len(set(n_steps.values())) > 1  # the episodes end at different times

    def play(make_agent, folder: str, concurrent: bool) -> dict[str, list[list[str]]]:
        def one(event_id: str) -> None:
            env = make_tiny_env(
                memory="none",
                budgets=Budgets(max_tool_calls=1, max_turns=2),
                log_dir=tmp_path / folder / event_id,
            )
            run_episode(env, make_agent(), event_id)
            env.close()

        if concurrent:
            threads = [threading.Thread(target=one, args=(e,)) for e in events]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=300)
        else:
            for e in events:
                one(e)
        turns = {}
        for e in events:
            records = [
                json.loads(x) for x in (tmp_path / folder / e / "steps.jsonl").read_text().splitlines()
            ]
            turns[e] = [[m["content"] for m in r["messages"] if m["role"] == "assistant"] for r in records]
        return turns

    def reference_agent() -> TransformersAgent:
        plain = generation_batcher(tiny_model, tokenizer, max_batch=1, wait_s=0.0, reuse_prefix=False)
        return TransformersAgent(tiny_model, tokenizer, max_new_tokens=8, batcher=plain)

    shared = generation_batcher(tiny_model, tokenizer, max_batch=8, wait_s=5.0)
    batched = play(
        lambda: TransformersAgent(tiny_model, tokenizer, max_new_tokens=8, batcher=shared), "b", True
    )
    assert batched == play(reference_agent, "a", False)
    assert all(len(batched[e]) == n_steps[e] for e in events)
    assert max(shared.batch_sizes) == len(events) and shared.batch_sizes[-1] < len(events)
    assert shared.stats.reused_tokens > 0.5 * shared.stats.prompt_tokens  # system prompt and earlier turns
    assert not shared._cache and not shared._live  # ended episodes freed their caches


def test_hub_kernels_are_off_unless_the_user_asks_for_them(monkeypatch):
    """transformers 5 fetched Hub kernels at from_pretrained and model.train(): offline, that failed on a GPU."""
    import transformers

    from forecast_dojo.agents.llm import _kernel_options

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    expected = {"use_kernels": False} if int(transformers.__version__.split(".")[0]) >= 5 else {}
    assert _kernel_options() == expected
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")
    assert _kernel_options() == {}
