"""The end of every training run: train, save a playable checkpoint, write the run's summary next to it.

:func:`forecast_dojo.training.sft.train_sft` and :func:`forecast_dojo.training.grpo.train_grpo` both end
here, so their checkpoints and ``*_run.json`` summaries have one shape.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from forecast_dojo.atomic import write_json_atomic

RESUME_LAST = "last"


def resume_point(trainer_args: Any) -> str | None:
    """The Trainer checkpoint to resume from (None: start afresh).

    ``resume_from_checkpoint`` as given, or for ``"last"`` the newest ``checkpoint-N`` in
    ``output_dir`` (None when there is none yet).
    """
    resume = getattr(trainer_args, "resume_from_checkpoint", None)
    if resume != RESUME_LAST:
        return resume
    from transformers.trainer_utils import get_last_checkpoint

    folder = Path(trainer_args.output_dir)
    return get_last_checkpoint(str(folder)) if folder.is_dir() else None


def train_and_save(trainer: Any, tokenizer: Any, args: Any, summary_name: str, **counts: Any) -> Path:
    """Run ``trainer.train()``, save the checkpoint in ``args.output_dir`` and its summary beside it.

    With ``resume_from_checkpoint="last"`` in the trainer's arguments (e.g. ``extra=`` of the
    arguments dataclass) a run continues from the newest Trainer checkpoint of its ``output_dir``
    (written with ``save_strategy="steps"``): a killed run loses only the steps since that save.

    Args:
        trainer: A TRL trainer (``SFTTrainer``, ``GRPOTrainer``), ready to train.
        tokenizer: The tokenizer saved with the model (with the training chat template).
        args: The run's arguments dataclass (``output_dir`` names the checkpoint directory).
        summary_name: The summary's file name in the checkpoint (``sft_run.json``, ``grpo_run.json``).
        **counts: What the run trained on (e.g. ``rows=`` or ``prompts=``), stored in the summary.

    Returns:
        The checkpoint directory; ``summary_name`` in it holds the arguments, the counts, the optimizer
        steps, the training loss, the wall time and the trainer's log history.
    """
    from forecast_dojo.agents.llm import save_checkpoint

    resumed_from = resume_point(trainer.args)
    if resumed_from is not None:
        print(f"resuming from {resumed_from}", flush=True)
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resumed_from)
    wall = time.perf_counter() - started
    out = save_checkpoint(trainer.model, tokenizer, args.output_dir)
    summary = {
        "arguments": dataclasses.asdict(args),
        **counts,
        "global_step": result.global_step,
        "training_loss": result.training_loss,
        "wall_seconds": round(wall, 1),  # this process's training only, when resumed
        "resumed_from": resumed_from,
        "log_history": trainer.state.log_history,
    }
    write_json_atomic(out / summary_name, summary, default=str)
    return out
