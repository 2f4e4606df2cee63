"""SFT: the documented snippet runs as written, train_sft trains and saves a playable checkpoint, the script runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "training.md"
README = REPO / "README.md"


def documented_snippet(path: Path = README) -> str:
    """The python block under ``<!-- snippet: sft`` in the README (or in docs/training.md)."""
    text = path.read_text()
    start = text.index("<!-- snippet: sft")
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match is not None
    return match.group(1)


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["TRL_EXPERIMENTAL_SILENCE"] = "1"
    return env


def tiny_sft_arguments(teacher_log, tiny_model_dir: Path, tmp_path: Path, **overrides):
    """The teacher log exported to ``tmp_path/data`` and SFTArguments for the tiny Llama on it."""
    from forecast_dojo.training.export import ExportConfig, export_sft
    from forecast_dojo.training.sft import SFTArguments

    export_sft(teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True))
    defaults = dict(
        model=str(tiny_model_dir),
        data=[str(tmp_path / "data")],
        output_dir=str(tmp_path / "ckpt"),
        gradient_accumulation_steps=1,
        max_length=2048,
        learning_rate=1e-3,
        use_cpu=True,
    )
    return SFTArguments(**{**defaults, **overrides})


@pytest.fixture
def synthetic_teacher_log(make_synthetic_env, tmp_path):
    """EvidenceAgent on two training and one held-out synthetic event, logged where the snippet looks."""
    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.synthetic.split import synthetic_split

    split = synthetic_split(0)
    log = tmp_path / "runs" / "teacher" / "honest-notebook"
    env = make_synthetic_env(memory="notebook", log_dir=log, run_metadata={"agent": "evidence"})
    for event_id in (*split.train[:2], split.held_out[0]):
        run_episode(env, EvidenceAgent(), event_id)
    env.close()
    return log, split


@pytest.mark.slow
def test_readme_and_training_doc_show_the_same_sft_snippet():
    assert documented_snippet(README) == documented_snippet(DOC)


def test_documented_sft_snippet_runs_as_written(synthetic_teacher_log, tiny_model_dir, tmp_path):
    """Exactly the docs/README block; only its MODEL and MAX_STEPS parameters are substituted."""
    _, split = synthetic_teacher_log
    snippet = documented_snippet()
    assert 'MODEL = "smollm2"' in snippet and "MAX_STEPS = 50" in snippet
    code = snippet.replace('MODEL = "smollm2"', f"MODEL = {str(tiny_model_dir)!r}").replace(
        "MAX_STEPS = 50", "MAX_STEPS = 2"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**subprocess_env(), "FORECAST_DOJO_CACHE": os.environ.get("FORECAST_DOJO_CACHE", "")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "refused" in result.stdout and split.held_out[0] in result.stdout
    checkpoint = tmp_path / "runs" / "sft-model"
    assert "quantization_config" not in json.loads((checkpoint / "config.json").read_text())
    from forecast_dojo.training import load_sft_dataset

    kept = set(load_sft_dataset(tmp_path / "runs" / "sft-data")["event_id"])
    assert kept and kept <= set(
        split.train[:2]
    )  # long notebook steps may not fit 2,048 tokens: dropped, counted


@pytest.mark.slow
def test_train_sft_saves_a_checkpoint_that_plays_and_trains_again(
    teacher_log, tiny_model_dir, tmp_path, make_tiny_env
):
    from forecast_dojo.agents.llm import TransformersAgent
    from forecast_dojo.evaluation.runner import run_episode
    from forecast_dojo.prompts import Budgets
    from forecast_dojo.training.sft import SFTArguments, train_sft

    args = tiny_sft_arguments(teacher_log, tiny_model_dir, tmp_path, max_steps=3)
    out = train_sft(args)
    run = json.loads((out / "sft_run.json").read_text())
    assert run["global_step"] == 3 and run["training_loss"] > 0
    losses = [entry["loss"] for entry in run["log_history"] if "loss" in entry]
    assert len(losses) == 3

    agent = TransformersAgent.from_pretrained(out, max_new_tokens=8)
    env = make_tiny_env(memory="notebook", budgets=Budgets(max_tool_calls=1, max_turns=2))
    rows = run_episode(env, agent, "harbor")
    assert [r["step"] for r in rows] == [0, 1, 2]

    # The checkpoint is a training starting point again (no quantization config, same template).
    again = train_sft(
        SFTArguments(
            **{**vars(args), "model": str(out), "output_dir": str(tmp_path / "ckpt2"), "max_steps": 1}
        )
    )
    assert json.loads((again / "sft_run.json").read_text())["global_step"] == 1


@pytest.mark.slow
def test_lora_adapter_is_merged_into_a_plain_checkpoint(teacher_log, tiny_model_dir, tmp_path):
    pytest.importorskip("peft")
    from forecast_dojo.training.export import ExportConfig, export_sft
    from forecast_dojo.training.sft import SFTArguments, train_sft

    export_sft(teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True))
    out = train_sft(
        SFTArguments(
            model=str(tiny_model_dir),
            data=[str(tmp_path / "data")],
            output_dir=str(tmp_path / "lora"),
            max_steps=1,
            max_length=2048,
            lora_rank=4,
            use_cpu=True,
            gradient_accumulation_steps=1,
        )
    )
    assert not (out / "adapter_config.json").exists() and (out / "config.json").exists()


@pytest.mark.slow
def test_sft_script_smoke(teacher_log, tiny_model_dir, tmp_path):
    from forecast_dojo.training.export import ExportConfig, export_sft

    export_sft(teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True))
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "training" / "sft.py"),
            "--model",
            str(tiny_model_dir),
            "--data",
            str(tmp_path / "data"),
            "--output_dir",
            str(tmp_path / "out"),
            "--max_steps",
            "2",
            "--gradient_accumulation_steps",
            "1",
            "--max_length",
            "2048",
            "--use_cpu",
        ],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checkpoint:" in result.stdout and (tmp_path / "out" / "model.safetensors").exists()


def test_sft_cost_is_estimated_from_the_data_and_the_arguments(teacher_log, tokenizer, tmp_path):
    from forecast_dojo.agents.llm import native_bfloat16
    from forecast_dojo.training.export import ExportConfig, export_sft
    from forecast_dojo.training.sft import GRADIENT_CHECKPOINTING_TIME, SFTArguments, estimate_sft_cost

    dataset = export_sft(
        teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True)
    )
    rows = len(dataset)
    assert rows > 0
    defaults = SFTArguments()
    # the compact CPU defaults; bf16 only where it is native (emulated, and slower, on AVX2-only CPUs);
    # gradient checkpointing on, as in TRL's SFTConfig (the 4 GB memory goal of issue 17)
    assert (defaults.max_length, defaults.bf16, defaults.gradient_checkpointing) == (
        1024,
        native_bfloat16(),
        True,
    )
    by_steps = estimate_sft_cost(
        SFTArguments(max_steps=5, bf16=True), dataset, tokenizer, 135_000_000, sample=rows
    )
    assert (by_steps.steps, by_steps.sequences) == (5, 20)  # batch 1 x 4 accumulation
    assert 0 < by_steps.mean_tokens <= 1024 and by_steps.tokens == round(by_steps.mean_tokens * 20)
    assert by_steps.seconds is not None and by_steps.seconds > 0
    assert "5 optimizer steps" in by_steps.describe() and "min" in by_steps.describe()
    longer = estimate_sft_cost(SFTArguments(max_steps=5, max_length=2048), dataset, tokenizer, 135_000_000)
    assert longer.mean_tokens >= by_steps.mean_tokens
    epochs = SFTArguments(num_train_epochs=2, per_device_train_batch_size=1, gradient_accumulation_steps=2)
    by_epochs = estimate_sft_cost(epochs, dataset, tokenizer, 135_000_000)
    assert by_epochs.sequences == 2 * rows and by_epochs.steps == 2 * -(-rows // 2)
    fp32 = estimate_sft_cost(SFTArguments(max_steps=5, bf16=False), dataset, tokenizer, 135_000_000)
    small = estimate_sft_cost(SFTArguments(max_steps=5, bf16=True), dataset, tokenizer, 3_000_000)
    assert fp32.seconds is not None and small.seconds is not None
    assert fp32.seconds > by_steps.seconds > small.seconds
    no_gc = estimate_sft_cost(
        SFTArguments(max_steps=5, bf16=True, gradient_checkpointing=False), dataset, tokenizer, 135_000_000
    )
    assert no_gc.tokens == by_steps.tokens and no_gc.seconds is not None
    assert by_steps.seconds == pytest.approx(no_gc.seconds * GRADIENT_CHECKPOINTING_TIME)


def test_model_head_loss_equals_trls_fused_head_on_the_same_batch(
    teacher_log, tiny_model_dir, tokenizer, tmp_path
):
    """``loss_head="model"`` (the default) trains on the loss TRL's fused chunked head computes."""
    import torch

    from forecast_dojo.agents.llm import load_model
    from forecast_dojo.training.export import ExportConfig, export_sft
    from forecast_dojo.training.sft import SFTArguments, load_training_data, sft_config, sft_trainer_class

    export_sft(teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True))
    losses = {}
    for head in ("model", "trl"):
        args = SFTArguments(
            model=str(tiny_model_dir),
            data=[str(tmp_path / "data")],
            output_dir=str(tmp_path / head),
            max_steps=1,
            per_device_train_batch_size=2,
            max_length=2048,
            bf16=False,
            use_cpu=True,
            loss_head=head,
        )
        trainer = sft_trainer_class(head)(
            model=load_model(str(tiny_model_dir)),
            args=sft_config(args),
            train_dataset=load_training_data(args.data, args.max_length, tokenizer),
            processing_class=tokenizer,
        )
        batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
        assert int((batch["labels"] != -100).sum()) > 0
        trainer.model.train()  # no dropout in the tiny Llama; train mode logs the train metrics
        with torch.no_grad():
            losses[head] = float(trainer.compute_loss(trainer.model, dict(batch)))
        if head == "model":
            metrics = trainer._metrics["train"]
            assert len(metrics["mean_token_accuracy"]) == 1 and 0 <= metrics["mean_token_accuracy"][0] <= 1
            assert metrics["num_tokens"] == [int(batch["attention_mask"].sum())]
    assert losses["model"] == pytest.approx(losses["trl"], rel=1e-5)


def test_model_head_scores_only_the_scored_positions_with_the_full_heads_loss_and_gradients(
    teacher_log, tiny_model_dir, tokenizer, tmp_path, monkeypatch
):
    """The head runs where the next token is scored; loss and gradients equal the full head's."""
    import torch

    from forecast_dojo.agents.llm import load_model
    from forecast_dojo.training import sft
    from forecast_dojo.training.export import ExportConfig, export_sft

    export_sft(teacher_log(), tmp_path / "data", ExportConfig(max_tokens=2048, assume_all_training=True))
    args = sft.SFTArguments(
        model=str(tiny_model_dir),
        data=[str(tmp_path / "data")],
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,  # two rows of different lengths: padding and two label masks
        max_length=2048,
        bf16=False,
        use_cpu=True,
    )
    trainer = sft.sft_trainer_class("model")(
        model=load_model(str(tiny_model_dir)),
        args=sft.sft_config(args),
        train_dataset=sft.load_training_data(args.data, args.max_length, tokenizer),
        processing_class=tokenizer,
    )
    model = trainer.model
    model.train()
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    scored = int((batch["labels"][:, 1:] != -100).sum())
    assert 0 < scored < batch["labels"].numel() // 2  # most positions are not scored
    assert sft._takes_logits_to_keep(model)

    def loss_and_grads(compute):
        model.zero_grad()
        loss = compute()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return float(loss.detach()), grads

    for items in (None, torch.tensor(scored + 3)):  # averaged, and summed over a larger accumulation
        full_loss, full_grads = loss_and_grads(
            lambda n=items: model(**batch, num_items_in_batch=n, use_cache=False).loss
        )
        kept_loss, kept_grads = loss_and_grads(
            lambda n=items: trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
        )
        assert kept_loss == pytest.approx(full_loss, rel=1e-6)
        assert set(kept_grads) == set(full_grads)
        for name, grad in full_grads.items():
            torch.testing.assert_close(kept_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)

    _, outputs = trainer.compute_loss(model, dict(batch), return_outputs=True)
    assert outputs.logits.shape[0] == scored  # the head ran on the scored positions only

    # Label smoothing takes Trainer's own path (the full head), which applies it.
    from transformers.trainer_pt_utils import LabelSmoother

    trainer.label_smoother = LabelSmoother(epsilon=0.1)
    with torch.no_grad():
        smoothed = float(trainer.compute_loss(model, dict(batch)))
        unlabelled = {k: v for k, v in batch.items() if k != "labels"}
        expected = float(LabelSmoother(epsilon=0.1)(model(**unlabelled), batch["labels"], shift_labels=True))
        plain = float(model(**batch, use_cache=False).loss)
    assert smoothed == pytest.approx(expected, rel=1e-6) and smoothed != pytest.approx(plain, rel=1e-6)
    trainer.label_smoother = None

    # A model that takes no logits_to_keep gets the full head, with the same loss.
    monkeypatch.setattr(sft, "_takes_logits_to_keep", lambda _model: False)
    with torch.no_grad():
        fallback = float(trainer.compute_loss(model, dict(batch)))
    with torch.no_grad():
        reference = float(model(**batch, use_cache=False).loss)
    assert fallback == pytest.approx(reference, rel=1e-6)


def test_unknown_loss_head_is_refused():
    from forecast_dojo.errors import ConfigError
    from forecast_dojo.training.sft import SFTArguments

    with pytest.raises(ConfigError, match="loss_head"):
        SFTArguments(loss_head="fused")


@pytest.mark.slow
def test_a_stopped_sft_run_resumes_from_its_last_trainer_checkpoint(teacher_log, tiny_model_dir, tmp_path):
    """``resume_from_checkpoint="last"``: the second call continues the first's checkpoint, not step 0."""
    from forecast_dojo.training.sft import SFTArguments, train_sft

    checkpoints = {
        "save_strategy": "steps",
        "save_steps": 1,
        "save_total_limit": 1,
        "resume_from_checkpoint": "last",
    }
    args = tiny_sft_arguments(teacher_log, tiny_model_dir, tmp_path, max_steps=1, extra=checkpoints)
    first = json.loads((train_sft(args) / "sft_run.json").read_text())
    assert first["resumed_from"] is None and first["global_step"] == 1
    assert (tmp_path / "ckpt" / "trainer" / "checkpoint-1").is_dir()

    again = json.loads(
        (train_sft(SFTArguments(**{**vars(args), "max_steps": 2})) / "sft_run.json").read_text()
    )
    assert again["resumed_from"].endswith("checkpoint-1") and again["global_step"] == 2
    step_loss = {entry["step"]: entry["loss"] for entry in again["log_history"] if "loss" in entry}
    first_loss = {entry["step"]: entry["loss"] for entry in first["log_history"] if "loss" in entry}
    assert step_loss[1] == first_loss[1]  # carried over from the checkpoint, not trained again
    assert sorted(step_loss) == [1, 2]
