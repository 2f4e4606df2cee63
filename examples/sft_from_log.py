"""SFT from a trajectory log: a teacher plays training events, the log becomes a dataset, TRL fine-tunes.

    python examples/sft_from_log.py --out runs/sft-example                 # SmolLM2-135M, 3 teacher events
    python examples/sft_from_log.py --embedder hashing --model PATH --max-steps 2 --events 2   # quick

Read top to bottom: (1) fit the honest scripted agent's cue weights on training events and let it play
them in memory-on mode, logging every step; (2) export the log as an SFT dataset (training events
only, every assistant turn kept); (3) fine-tune with TRL's SFTTrainer on the assistant turns; (4) the
checkpoint is an agent: ``forecast-dojo run --agents hf:<out>/model``. Before training it prints what
the SFT will cost (steps, sequences, tokens, estimated minutes on this CPU).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import forecast_dojo
from forecast_dojo.agents.honest import HonestEvidenceAgent, fit_cue_model
from forecast_dojo.evaluation.runner import run_episodes
from forecast_dojo.synthetic.split import synthetic_split
from forecast_dojo.training import ExportConfig, export_sft
from forecast_dojo.training.sft import SFTArguments, train_sft


def main(argv: list[str] | None = None) -> None:
    """Teacher log -> SFT dataset -> fine-tuned checkpoint, on the synthetic world's training events."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/sft-example"), help="where everything goes")
    parser.add_argument("--embedder", default="minilm", help="synthetic world embedder (minilm or hashing)")
    parser.add_argument("--model", default="smollm2", help="student: smollm2, an HF model id or a checkpoint")
    parser.add_argument("--events", type=int, default=3, help="training events the teacher plays")
    parser.add_argument("--max-steps", type=int, default=8, help="SFT optimizer steps (1 sequence each)")
    parser.add_argument(
        "--max-length",
        type=int,
        default=SFTArguments().max_length,
        help="token budget of the export and of SFT (default: the SFT default, 1,024)",
    )
    parser.add_argument(
        "--prompt", default="compact", help="prompt profile: compact (small models, default) or default"
    )
    args = parser.parse_args(argv)

    # 1. The teacher: cue weights fitted on training events only, then a logged memory-on play of them.
    train_ids = list(synthetic_split(0).train[: args.events])
    fit_env = forecast_dojo.make(
        "Synthetic-v0", embedder=args.embedder, python_runner=None, prompt=args.prompt
    )
    cue_model = fit_cue_model(fit_env, train_ids)
    fit_env.close()
    teacher_log = args.out / "teacher"
    env = forecast_dojo.make(
        "SyntheticNotebook-v0",
        embedder=args.embedder,
        python_runner=None,
        prompt=args.prompt,
        log_dir=teacher_log,
        run_metadata={"agent": "honest"},
    )
    rows = run_episodes(env, lambda: HonestEvidenceAgent(cue_model), train_ids, progress=False, resume=True)
    env.close()
    print(f"teacher: {len(rows)} forecast steps logged in {teacher_log}")

    # 2. The log as an SFT dataset (held-out events would be refused; long tool results are shortened).
    dataset = export_sft([teacher_log], args.out / "data", ExportConfig(max_tokens=args.max_length))
    print(f"dataset: {len(dataset)} rows with columns {sorted(dataset.column_names)[:4]}...")

    # 3. SFT on the assistant turns only (bf16 autocast, the CPU default); it prints its cost first.
    #    The checkpoint holds model, tokenizer and chat template.
    checkpoint = train_sft(
        SFTArguments(
            model=args.model,
            data=[str(args.out / "data")],
            output_dir=str(args.out / "model"),
            max_steps=args.max_steps,
            gradient_accumulation_steps=1,
            max_length=args.max_length,
        )
    )
    print(f"checkpoint: {checkpoint}  (play it: forecast-dojo run --agents hf:{checkpoint})")


if __name__ == "__main__":
    main()
