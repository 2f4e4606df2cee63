"""SFT at the CPU defaults: peak RSS, seconds per optimizer step, and the data path's share of the time.

Baseline (same run, same tokens): bare TRL, i.e. ``SFTTrainer`` on the already tokenized sequences
(``input_ids`` + ``assistant_masks``) with the same ``SFTConfig``, so it skips our export and TRL's own
chat-template tokenization. Each configuration runs in a fresh subprocess so its peak RSS is its own.
Modes: ``ours`` (the ``SFTArguments`` defaults: the model's own LM head and cross-entropy),
``bare-trl`` (TRL's ``SFTTrainer`` with its fused chunked LM head), ``ours-trl-head`` (our data path
with TRL's head, ``loss_head="trl"``: ``ours-trl-head`` against ``bare-trl`` is the data path's
share, ``ours`` against ``ours-trl-head`` the head's), ``ours-fp32`` (bf16 off), ``ours-bf16`` (bf16
on), ``ours-b2`` (2 sequences per forward pass, 2 accumulation steps), ``ours-lora`` (rank 16) and
``ours-full-logits`` (the model's head at every position, as before 2026-12-03 afternoon: against
``ours``, what running the head only where the next token is scored saves), ``ours-no-gc``
(without gradient checkpointing, the default until 2026-12-04: against ``ours``, what recomputing
the activations in the backward pass costs and saves), ``ours-gc`` (checkpointing whatever the
default) and ``ours-gc-fp32`` (checkpointing in float32: no bfloat16 copies of the weights).

    python benchmarks/sft.py                 # SmolLM2-135M, 3 optimizer steps per configuration
    python benchmarks/sft.py --steps 5 --events 8 --max-length 1024 --export-max-tokens 2048

``--export-max-tokens`` (default: ``--max-length``) is the export's budget; a larger one keeps records
longer than ``--max-length``, which TRL then truncates (the cost of a step is that of its tokens).

Goals (issues 11, 17): peak RSS <= 4 GB at the defaults; data path <= 10 % of the time of bare TRL.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / ".benchmarks" / "sft-results.jsonl"  # every configuration's raw measurements, appended


def make_logs(out: Path, n_events: int, embedder: str, prompt: str = "compact") -> list[Path]:
    """Scripted EvidenceAgent trajectories on training events of the synthetic world, both memory modes."""
    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.evaluation.runner import run_episodes
    from forecast_dojo.registration import make
    from forecast_dojo.synthetic.split import synthetic_split

    events = list(synthetic_split(0).train[:n_events])
    logs = []
    for memory in ("none", "notebook"):
        log = out / f"evidence-{memory}"
        env = make(
            "Synthetic-v0", memory=memory, embedder=embedder, log_dir=log, python_runner=None, prompt=prompt
        )
        run_episodes(env, EvidenceAgent, events, progress=False)
        env.close()
        logs.append(log)
    return logs


def child(mode: str, data: str, model: str, steps: int, out: str, max_length: int) -> None:
    """One configuration, in its own process; prints a JSON line with its measurements."""
    from transformers import TrainerCallback

    from forecast_dojo.training import sft
    from forecast_dojo.training.sft import SFTArguments, peft_config, sft_config, sft_trainer_class

    if mode == "ours-full-logits":  # the model's head at every position (its full-head fallback)
        sft._takes_logits_to_keep = lambda _model: False

    step_times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step_times.append(time.perf_counter() - self.t0)

    from forecast_dojo.agents.llm import load_model, load_tokenizer
    from forecast_dojo.training.export import load_sft_dataset

    # Bare TRL gets tokenized rows; TRL builds labels from their ``assistant_masks`` column (the same
    # loss), and refuses ``assistant_only_loss=True`` for a dataset that is not conversational.
    extra = {"assistant_only_loss": False} if mode == "bare-trl" else {}
    defaults = SFTArguments()
    args = SFTArguments(
        model=model,
        data=[data],
        output_dir=out,
        max_steps=steps,
        max_length=max_length,
        bf16={"ours-fp32": False, "ours-gc-fp32": False, "ours-bf16": True}.get(mode, defaults.bf16),
        per_device_train_batch_size=2 if mode == "ours-b2" else defaults.per_device_train_batch_size,
        gradient_accumulation_steps=2 if mode == "ours-b2" else defaults.gradient_accumulation_steps,
        lora_rank=16 if mode == "ours-lora" else 0,
        gradient_checkpointing={"ours-gc": True, "ours-gc-fp32": True, "ours-no-gc": False}.get(
            mode, defaults.gradient_checkpointing
        ),
        loss_head="trl" if mode in ("bare-trl", "ours-trl-head") else defaults.loss_head,
        extra=extra,
    )
    tokenizer = load_tokenizer(model)
    loaded_model = load_model(model)
    t0 = time.perf_counter()
    dataset = load_sft_dataset(data)
    if mode == "bare-trl":
        # The same tokens, prepared once outside the trainer (what the data path costs is this work).
        def encode(row):
            tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
            out = tokenizer.apply_chat_template(  # as TRL tokenizes a conversational row, tools included
                row["messages"],
                tools=tools,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,
            )
            return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}

        dataset = dataset.map(encode, remove_columns=dataset.column_names)
        prepared = time.perf_counter() - t0
        t0 = time.perf_counter()
    else:
        prepared = 0.0
    trainer = sft_trainer_class(args.loss_head)(
        model=loaded_model,
        args=sft_config(args),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Timer()],
        peft_config=peft_config(args),
    )
    setup = time.perf_counter() - t0  # loading the export + TRL's tokenization (bare: nothing to tokenize)
    before_train_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # model, data, trainer
    t1 = time.perf_counter()
    trainer.train()
    train_wall = time.perf_counter() - t1
    lengths = [len(x) for x in trainer.train_dataset["input_ids"]]
    tokens = sum(lengths)
    result = json.dumps(
        {
            "mode": mode,
            "rows": len(dataset),
            "tokens": tokens,
            "max_tokens": max(lengths),
            "sequences_per_step": args.per_device_train_batch_size * args.gradient_accumulation_steps,
            "bf16": args.bf16,
            "loss_head": args.loss_head,
            "setup_s": setup,
            "pre_tokenize_s": prepared,
            "train_s": train_wall,
            "step_s": step_times,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
            "peak_rss_before_train_gb": before_train_gb,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load_average": os.getloadavg(),
        }
    )
    print("RESULT " + result, flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as fh:  # kept across runs (git-ignored): a stopped benchmark loses nothing
        fh.write(result + "\n")


def main() -> int:
    """Make logs, export them (timed), run each configuration in a subprocess and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per configuration")
    parser.add_argument("--events", type=int, default=6, help="training events to log")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--max-length", type=int, default=None, help="default: SFTArguments().max_length")
    parser.add_argument(
        "--prompt", default="compact", help="the teacher's prompt profile (compact or default)"
    )
    parser.add_argument("--export-max-tokens", type=int, default=None, help="default: --max-length")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["ours", "ours-trl-head", "bare-trl", "ours-fp32", "ours-b2"],
        help="ours, ours-full-logits, ours-no-gc, ours-gc, ours-gc-fp32, ours-trl-head, bare-trl, ours-fp32, ours-bf16, ours-b2 "
        "(batch 2 x 2), ours-lora (rank 16)",
    )
    parser.add_argument("--child", nargs=4, metavar=("MODE", "DATA", "MODEL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    from forecast_dojo.training.sft import SFTArguments

    max_length = args.max_length or SFTArguments().max_length
    if args.child:
        mode, data, model, out = args.child
        child(mode, data, model, args.steps, out, max_length)
        return 0

    from forecast_dojo.training.export import ExportConfig, export_sft

    export_tokens = args.export_max_tokens or max_length

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        logs = make_logs(tmp_path / "logs", args.events, args.embedder, args.prompt)
        log_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        exported = export_sft(logs, tmp_path / "data", ExportConfig(max_tokens=export_tokens))
        export_s = time.perf_counter() - t0
        print(f"export at {export_tokens} tokens: {len(exported)} records kept")
        results = []
        for mode in args.modes:
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--steps",
                    str(args.steps),
                    "--max-length",
                    str(max_length),
                    "--child",
                    mode,
                    str(tmp_path / "data"),
                    args.model,
                    str(tmp_path / mode),
                ],
                capture_output=True,
                text=True,
                env={"PYTHONPATH": str(REPO), **os.environ},
            )
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{mode} failed")
            results.append(json.loads(line.removeprefix("RESULT ")))
            print(line, flush=True)  # each configuration's raw measurements as soon as it ends

    print(
        f"\nteacher logs: {log_s:.1f} s; export ({results[0]['rows']} rows, {results[0]['tokens']:,} tokens "
        f"after truncation to {max_length}, longest {results[0]['max_tokens']}): {export_s:.1f} s"
    )
    print(
        f"{'mode':<13} {'peak RSS GB':>11} {'setup s':>8} {'s/step (median)':>16} {'train s':>8} {'seq/step':>8} {'bf16':>5}"
    )
    by_mode = {}
    for r in results:
        steps = sorted(r["step_s"][1:] or r["step_s"])  # the first step warms up
        median = steps[len(steps) // 2]
        by_mode[r["mode"]] = (r, median)
        print(
            f"{r['mode']:<13} {r['peak_rss_gb']:>11.2f} {r['setup_s'] + r['pre_tokenize_s']:>8.1f} {median:>16.2f} "
            f"{r['train_s']:>8.1f} {r['sequences_per_step']:>8} {r['bf16']!s:>5}"
        )
    # The data path's share compares like with like: our path with TRL's head against bare TRL.
    same_head = "ours-trl-head" if "ours-trl-head" in by_mode else None
    if same_head and "bare-trl" in by_mode:
        ours, ours_step = by_mode[same_head]
        bare, bare_step = by_mode["bare-trl"]
        ours_total = export_s + ours["setup_s"] + ours["train_s"]
        bare_total = bare["setup_s"] + bare["pre_tokenize_s"] + bare["train_s"]
        print(
            f"data path: per step {ours_step - bare_step:+.2f} s ({(ours_step - bare_step) / bare_step:+.1%} of bare TRL's step); "
            f"whole run incl. export {ours_total - bare_total:+.1f} s ({(ours_total - bare_total) / bare_total:+.1%})"
        )
    if "ours" in by_mode and "ours-trl-head" in by_mode:
        model_step, trl_step = by_mode["ours"][1], by_mode["ours-trl-head"][1]
        print(
            f"the model's own head against TRL's: per step {model_step - trl_step:+.2f} s ({(model_step - trl_step) / trl_step:+.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
