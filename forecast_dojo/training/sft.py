"""Supervised fine-tuning on exported trajectories with TRL's ``SFTTrainer``.

:class:`SFTArguments` holds every choice (model, data, CPU-sized defaults, optional LoRA);
:func:`train_sft` trains and saves a checkpoint (model, tokenizer, :data:`TOOL_CHAT_TEMPLATE`, no
quantization config) that ``TransformersAgent.from_pretrained(path)`` and
``forecast-dojo run --agents hf:<path>`` play, and that :func:`train_sft` can train again.

Only assistant turns carry loss (``assistant_only_loss=True``: the template's ``{% generation %}``
markers), and the data is exported so every transcript fits ``max_length``: SFTTrainer's truncation,
which keeps the start and cuts the end (the answer), never fires.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.agents.llm import SMOLLM2, load_model, load_tokenizer, native_bfloat16
from forecast_dojo.errors import ConfigError, InputNotFoundError
from forecast_dojo.training.arguments import JsonObject
from forecast_dojo.training.checkpoint import train_and_save
from forecast_dojo.trajectory import STEPS_FILE

LOSS_HEADS = ("model", "trl")


@dataclass
class SFTArguments:
    """Arguments of an SFT run (CPU-sized compact defaults: SmolLM2-135M, batch 1 x 4, 1,024 tokens, bf16).

    Attributes:
        model: ``"smollm2"`` (the offline SmolLM2-135M-Instruct), an HF model id or a checkpoint path.
        data: an export directory or ``train.parquet`` (``forecast-dojo export sft``), or trajectory log
            directories, exported on the fly with the default filters and ``max_length`` as budget.
        output_dir: where the checkpoint goes (``output_dir/trainer`` holds the Trainer's own files).
        max_steps: optimizer steps (-1: ``num_train_epochs`` over the data).
        num_train_epochs: epochs when ``max_steps`` is -1.
        per_device_train_batch_size: sequences per forward pass.
        gradient_accumulation_steps: forward passes per optimizer step.
        learning_rate: peak learning rate (linear decay, ``warmup_ratio`` warm-up).
        warmup_ratio: the share of steps spent warming up.
        max_length: tokens per sequence; the export shortens tool results to fit it (1,024: the compact
            prompt profile's budget; the default profile's records need 2,048).
        bf16: bfloat16 autocast (default: where bfloat16 is native, a GPU or a CPU with AMX/AVX-512
            BF16, where it was faster than float32, ``benchmarks/sft.py``; emulated elsewhere).
        gradient_checkpointing: recompute activations in the backward pass (on by default, as in TRL's
            ``SFTConfig``): at the compact defaults on a 2-core CPU, peak RSS 3.6-3.8 GiB against 4.3
            without it, for 27 % more time per step (``benchmarks/sft.py``, docs/training.md); turn
            it off where memory is plentiful and time is not.
        lora_rank: train a LoRA adapter of this rank (needs ``peft``) instead of every weight; 0: full.
        lora_alpha: LoRA scaling.
        lora_dropout: LoRA dropout.
        seed: the Trainer's seed.
        logging_steps: log the loss every N steps.
        use_cpu: force the CPU even when an accelerator is present.
        loss_head: ``"model"`` (default): the loss is the model's own forward, its LM head and
            cross-entropy, under bf16 autocast where ``bf16``, the head run only where the next
            token is scored; ``"trl"``: TRL's fused chunked LM head,
            whose vocabulary products run in float32 on a CPU. Both give the same loss (to 7e-6 on
            SmolLM2-135M; docs/training.md); ``"model"`` was about 20 % faster per step and 0.5 GB
            smaller on a CPU (``benchmarks/sft.py``), and ``"trl"`` also logs the per-token entropy.
        extra: further ``SFTConfig`` fields (e.g. ``{"lr_scheduler_type": "cosine"}``).
    """

    model: str = SMOLLM2
    data: list[str] = field(default_factory=list)
    output_dir: str = "sft-out"
    max_steps: int = -1
    num_train_epochs: float = 1.0
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 4
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.05
    max_length: int = 1024
    bf16: bool = field(default_factory=native_bfloat16)
    gradient_checkpointing: bool = True
    lora_rank: int = 0
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    seed: int = 0
    logging_steps: int = 1
    use_cpu: bool = False
    loss_head: str = "model"
    extra: JsonObject = field(default_factory=JsonObject)

    def __post_init__(self) -> None:
        if self.loss_head not in LOSS_HEADS:
            raise ConfigError(f"loss_head must be one of {LOSS_HEADS}, not {self.loss_head!r}")


def load_training_data(data: list[str], max_length: int, tokenizer: Any) -> Any:
    """The SFT dataset: export directories / parquet files as they are, log directories exported now."""
    from datasets import concatenate_datasets

    from forecast_dojo.training.export import ExportConfig, export_sft, load_sft_dataset

    if not data:
        raise ConfigError("no training data: give export directories, parquet files or trajectory logs")
    parts = []
    logs = []
    for item in data:
        path = Path(item)
        if path.suffix == ".parquet" or (path / "train.parquet").is_file():
            parts.append(load_sft_dataset(path))
        elif (path / STEPS_FILE).is_file() or path.name == STEPS_FILE or any(path.glob(f"*/{STEPS_FILE}")):
            logs.append(path)
        else:
            raise InputNotFoundError(f"{path}: neither an export (train.parquet) nor a trajectory log")
    if logs:
        parts.append(export_sft(logs, None, ExportConfig(max_tokens=max_length), tokenizer=tokenizer))
    dataset = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
    if "prompt" in dataset.column_names and len(dataset) and isinstance(dataset[0]["prompt"], str):
        # the export's prompt-profile name ("compact"): TRL would take a "prompt" column for a prompt
        # of a prompt-completion dataset and refuse assistant_only_loss
        dataset = dataset.remove_columns("prompt")
    return dataset


# Training cost on this machine's CPU (2 cores, quiet), seconds per token per parameter, without
# gradient checkpointing: SmolLM2-135M (134.5 M parameters) at the compact defaults (batch 1 x 4,
# 1,024 tokens, 842 tokens per sequence on average), 12.84 s per step with bf16 autocast
# (benchmarks/sft.py ``ours-no-gc``, 2026-12-04); float32 23.78 s per step with checkpointing
# (``ours-fp32``, 2026-12-05), divided by the checkpointing factor below. A step's cost grows about
# linearly with tokens and parameters; shared cores make it slower.
_BENCH_TOKENS_PER_STEP = 4 * 32_836 / 39
# Gradient checkpointing recomputes the forward pass in the backward one: time per step with it over
# time without it (``ours``, 16.36 s, against ``ours-no-gc``, 12.84 s, in one run).
GRADIENT_CHECKPOINTING_TIME = 16.36 / 12.84
CPU_SECONDS_PER_TOKEN_PARAM = {
    True: 12.84 / (_BENCH_TOKENS_PER_STEP * 134.5e6),
    False: 23.78 / GRADIENT_CHECKPOINTING_TIME / (_BENCH_TOKENS_PER_STEP * 134.5e6),
}


@dataclass(frozen=True)
class SFTCost:
    """What an SFT run will cost, printed before it starts.

    Attributes:
        steps: optimizer steps.
        sequences: sequences trained on (steps x batch x accumulation, or rows x epochs).
        tokens: tokens trained on (each sequence counted at most ``max_length``).
        mean_tokens: mean tokens per sequence.
        seconds: estimated wall time on the CPU (None on an accelerator: not calibrated).
    """

    steps: int
    sequences: int
    tokens: int
    mean_tokens: float
    seconds: float | None

    def describe(self) -> str:
        """One line for people: steps, sequences, tokens and the estimated time."""
        when = (
            f"estimated {self.seconds / 60:.1f} min on this CPU (benchmarks/sft.py rate; slower when the cores are shared)"
            if self.seconds is not None
            else "no time estimate on an accelerator"
        )
        return (
            f"SFT: {self.steps} optimizer steps, {self.sequences} sequences, ~{self.tokens:,} tokens "
            f"({self.mean_tokens:,.0f} per sequence); {when}"
        )


def estimate_sft_cost(
    args: SFTArguments, dataset: Any, tokenizer: Any, n_parameters: int, *, sample: int = 512
) -> SFTCost:
    """The steps, sequences, tokens and (CPU) wall time ``train_sft`` will spend on ``dataset``.

    Args:
        args: the run's arguments (steps or epochs, batch, accumulation, ``max_length``, bf16).
        dataset: the SFT rows (``messages`` and ``tools`` as the export writes them).
        tokenizer: the tokenizer with the chat template the trainer uses.
        n_parameters: the model's trainable parameter count (the cost per token grows with it).
        sample: tokenize at most this many rows to estimate the mean length.

    Returns:
        The estimate.
    """
    import torch

    rows = len(dataset)
    lengths = []
    for row in dataset.select(range(min(rows, sample))):
        tools = json.loads(row["tools"]) if isinstance(row.get("tools"), str) else row.get("tools")
        ids = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        lengths.append(min(len(ids), args.max_length))
    mean = sum(lengths) / len(lengths) if lengths else 0.0
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
    if args.max_steps > 0:
        steps = args.max_steps
        sequences = steps * per_step
    else:
        steps = math.ceil(
            math.ceil(rows / args.per_device_train_batch_size) / args.gradient_accumulation_steps
        )
        steps = math.ceil(steps * args.num_train_epochs)
        sequences = math.ceil(rows * args.num_train_epochs)
    tokens = round(mean * sequences)
    on_cpu = args.use_cpu or not torch.cuda.is_available()
    seconds = tokens * n_parameters * CPU_SECONDS_PER_TOKEN_PARAM[bool(args.bf16)] if on_cpu else None
    if seconds is not None and args.gradient_checkpointing:
        seconds *= GRADIENT_CHECKPOINTING_TIME
    return SFTCost(steps, sequences, tokens, mean, seconds)


def sft_config(args: SFTArguments) -> Any:
    """The ``trl.SFTConfig`` these arguments describe."""
    import torch
    from trl import SFTConfig

    use_cpu = args.use_cpu or not torch.cuda.is_available()
    options: dict[str, Any] = dict(
        output_dir=str(Path(args.output_dir) / "trainer"),
        max_steps=args.max_steps,
        num_train_epochs=args.num_train_epochs,
        per_device_train_batch_size=args.per_device_train_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_ratio,
        max_length=args.max_length,
        assistant_only_loss=True,
        bf16=args.bf16,
        gradient_checkpointing=args.gradient_checkpointing,
        seed=args.seed,
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to=[],
        use_cpu=use_cpu,
        dataloader_num_workers=0,
    )
    options.update(args.extra)  # e.g. {"bf16": true}: extra overrides the defaults above
    return SFTConfig(**options)


def peft_config(args: SFTArguments) -> Any:
    """A LoRA ``peft.LoraConfig`` on every linear layer, or None for full fine-tuning."""
    if args.lora_rank <= 0:
        return None
    try:
        from peft import LoraConfig
    except ImportError as err:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "LoRA needs peft: pip install 'forecast-dojo[train]' (or pip install peft)"
        ) from err
    return LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _takes_logits_to_keep(model: Any) -> bool:
    """Whether the (possibly PEFT-wrapped) model's forward takes ``logits_to_keep``."""
    import inspect

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(inner, "module", inner)  # an accelerate/DDP wrapper
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return False


def sft_trainer_class(loss_head: str) -> type:
    """The trainer class of ``loss_head`` (see :class:`SFTArguments`): ``SFTTrainer`` or a subclass."""
    from trl import SFTTrainer

    if loss_head == "trl":
        return SFTTrainer
    if loss_head != "model":
        raise ConfigError(f"loss_head must be one of {LOSS_HEADS}, not {loss_head!r}")
    import torch
    from transformers import Trainer
    from transformers.loss.loss_utils import fixed_cross_entropy

    class ModelHeadSFTTrainer(SFTTrainer):
        """``SFTTrainer`` whose loss is the model's own forward: its LM head and cross-entropy.

        The labels are SFTTrainer's (``-100`` outside the assistant turns). The LM head runs only at
        the positions whose next token is scored (``logits_to_keep`` as a boolean mask, where the
        model takes one): in a compact record about a fifth of the tokens are the assistant's, and
        the head's ``[tokens, vocabulary]`` logits, their float32 copy and their gradient are the
        largest tensors of a step. The loss is the model's own (``ForCausalLMLoss``: float32
        cross-entropy, summed and divided by ``num_items_in_batch`` when the Trainer gives it, else
        averaged), so it equals the full head's. A model whose forward takes no ``logits_to_keep``
        gets the full head through ``Trainer.compute_loss``, as does a run with label smoothing or a
        ``compute_loss_func``. The token accuracy and token count are
        logged as SFTTrainer logs them; the entropy is not (a softmax over the vocabulary).
        """

        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            inputs["use_cache"] = False
            labels = inputs.get("labels")
            # Label smoothing or a custom loss function: Trainer's own path, over the full head.
            custom = getattr(self, "label_smoother", None) or getattr(self, "compute_loss_func", None)
            if labels is None or custom is not None or not _takes_logits_to_keep(model):
                loss, outputs = Trainer.compute_loss(
                    self, model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
                )
                targets, logits = None, None
                if labels is not None:
                    scored = labels[:, 1:] != -100
                    targets, logits = labels[:, 1:][scored], outputs.logits[:, :-1][scored]
            else:
                forward = {k: v for k, v in inputs.items() if k != "labels"}
                keep = torch.zeros_like(labels, dtype=torch.bool)
                keep[:, :-1] = labels[:, 1:] != -100  # position i predicts token i + 1
                outputs = model(**forward, logits_to_keep=keep)
                logits, targets = outputs.logits, labels[:, 1:][keep[:, :-1]]
                logits = logits.reshape(-1, logits.shape[-1])
                loss = fixed_cross_entropy(logits.float(), targets, num_items_in_batch)  # as ForCausalLMLoss
            metrics = getattr(self, "_metrics", None)
            if metrics is not None and targets is not None and logits is not None:
                mode = "train" if model.training else "eval"
                with torch.no_grad():
                    n_scored = int(targets.numel())
                    correct = int((logits.argmax(dim=-1) == targets).sum()) if n_scored else 0
                    metrics[mode]["mean_token_accuracy"].append(correct / n_scored if n_scored else 0.0)
                if mode == "train" and "attention_mask" in inputs and hasattr(self, "_total_train_tokens"):
                    self._total_train_tokens += int(inputs["attention_mask"].sum())
                    metrics[mode]["num_tokens"] = [self._total_train_tokens]
            return (loss, outputs) if return_outputs else loss

    return ModelHeadSFTTrainer


def train_sft(args: SFTArguments, *, model: Any = None, tokenizer: Any = None) -> Path:
    """Fine-tune ``args.model`` on ``args.data`` and save a playable checkpoint in ``args.output_dir``.

    Args:
        args: the run's arguments.
        model: an already loaded model to train instead of loading ``args.model`` (tests, notebooks).
        tokenizer: its tokenizer (default ``load_tokenizer(args.model)``).

    Returns:
        The checkpoint directory (also holding ``sft_run.json``: arguments, steps, loss, wall time).
    """
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(args.model)
    from forecast_dojo.chat_template import TOOL_CHAT_TEMPLATE

    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = load_training_data(args.data, args.max_length, tokenizer)
    model = model if model is not None else load_model(args.model)
    n_parameters = sum(p.numel() for p in model.parameters())
    if args.lora_rank > 0:  # an adapter trains few weights, but every token still runs the whole model
        n_parameters = round(n_parameters * 1.1)
    cost = estimate_sft_cost(args, dataset, tokenizer, n_parameters)
    print(cost.describe(), flush=True)
    trainer = sft_trainer_class(args.loss_head)(
        model=model,
        args=sft_config(args),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config(args),
    )
    return train_and_save(
        trainer, tokenizer, args, "sft_run.json", rows=len(dataset), estimate=dataclasses.asdict(cost)
    )
