"""Local rollouts: forecast steps and turns per minute of SmolLM2-135M playing synthetic episodes, env included.

Baseline (same run, same episodes, same model): the code of a named git commit
(``--baseline-commit``, default: main before lockstep batching) exported to a temporary folder,
playing one episode at a time in float32 (``main-c1-fp32``) or at ``--concurrency 32`` in bfloat16
(``main-c32-bf16``). Against it, the lockstep path of this tree (``--concurrency`` 8, 32 and 64,
bfloat16 and float32 weights; ``c32-fp32-labels``: with the evidence-label constraint of
``--local-constrain-labels``, whose cost is its difference from ``c32-fp32``). Since 2026-12-06 the
memory-free episodes of a study are single forecast steps, so the steps of one event play side by side. Each configuration runs in a fresh
subprocess through :func:`forecast_dojo.evaluation.study.run_study` (what ``forecast-dojo run
--agents smollm2 --concurrency N --local-dtype D`` runs); the timer covers the study only (env
resets and steps, prompt rendering, generation, logging), not loading the model or the world.

    python benchmarks/rollouts.py                                    # the table
    python benchmarks/rollouts.py --events 32 --max-turns 2 --modes c32-bf16 c32-fp32
    python benchmarks/rollouts.py --prompt compact                   # once the compact profile exists

Goal (issue 17): >= 60 forecast steps per minute at ``--concurrency 32`` on 2 cores.
The issue set that goal beside a reference it measured on a 2-core machine with AMX: plain HF
``generate`` on a batch of 32 prompts of 400 tokens, exactly 80 new tokens each, bfloat16 weights, no
env: 160 turns per minute, "about 71 two-turn steps per minute". ``reference-b32-bf16`` runs that
workload here, in its own process on the same model (prompts cut from the events' own texts; the
content does not change the work, as every row writes exactly 80 tokens), so each table says what
this machine's generation alone allows; the ``x reference`` column compares every row's turns
per minute with it.
Each row also gives the steps' mean reward (the env's default, the Brier score negated): a faster
path must not change what the model writes (greedy runs of the same code differ by about 0.02, as
thread timing decides which turns share a batch and bfloat16 near-ties resolve either way).
The load average (``os.getloadavg``) is printed beside every row: the cores may be shared.

Each played row also gives the **ideal round** of its own turns (``ideal steps/min``): after the study,
in the same process, the model's forward alone runs one lockstep round shaped like the study's mean
turn (as many rows as ``--concurrency``, each computing the mean computed prompt tokens of a turn on a
cache of the mean cached tokens, then writing the mean new tokens; every row the same length, so no
padding and no row idles, no env, no sampling, no Python between forwards but the loop). A path that
batches perfectly and costs nothing around the forward pass would reach that rate; it bounds what any
scheduling can give on this machine for these episodes, model and dtype. Computed and cached tokens
come from the batcher's own counts (``GenerationBatcher.stats``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_COMMIT = "6b5df17"  # main before lockstep batching (GenerationBatcher without lockstep or prefix reuse)

# mode -> (code, concurrency, dtype)
MODES = {
    "main-c1-fp32": ("baseline", 1, "float32"),
    "c1-fp32": ("tree", 1, "float32"),
    "c1-bf16": ("tree", 1, "bfloat16"),
    "c8-bf16": ("tree", 8, "bfloat16"),
    "c8-fp32": ("tree", 8, "float32"),
    "c32-bf16": ("tree", 32, "bfloat16"),
    "c32-fp32": ("tree", 32, "float32"),
    "c64-bf16": ("tree", 64, "bfloat16"),
    "c64-fp32": ("tree", 64, "float32"),
    "c32-fp32-labels": ("tree", 32, "float32"),  # decoded with the evidence-label constraint
    "main-c32-bf16": ("baseline", 32, "bfloat16"),
    "reference-b32-bf16": ("reference", 32, "bfloat16"),
    "reference-b32-fp32": ("reference", 32, "float32"),  # the float32 figure: 76 turns per minute
}
REFERENCE_PROMPT_TOKENS = 400  # issue 17's reference workload: 32 prompts of 400 tokens, 80 new tokens each
REFERENCE_NEW_TOKENS = 80


def reference_child(args: argparse.Namespace) -> None:
    """Issue 17's reference workload in its own process: one HF ``generate`` call, no env; print one JSON line.

    32 prompts of exactly :data:`REFERENCE_PROMPT_TOKENS` tokens, so no padding (a chat-rendered user
    turn cut from the synthetic events' questions and backgrounds, then the assistant header), each
    forced to write exactly :data:`REFERENCE_NEW_TOKENS` tokens (``min_new_tokens``), greedy, the
    weights cast to the mode's dtype. A two-token warm-up call runs first, outside the timer.
    """
    import torch

    from forecast_dojo.agents.llm import load_model, load_tokenizer
    from forecast_dojo.registration import make

    _, batch, dtype = MODES[args.child]
    t0 = time.perf_counter()
    tokenizer = load_tokenizer(args.model)
    model = load_model(args.model, dtype=getattr(torch, dtype)).eval()
    probe = make("Synthetic-v0", seed=0, embedder="hashing")
    texts = [f"{event.question} {event.background}" for event in probe.events]
    probe.close()
    head = tokenizer("<|im_start|>user\n", add_special_tokens=False)["input_ids"]
    tail = tokenizer("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    rows = []
    for i in range(batch):  # row i: events i, i+1, ... until the prompt is long enough
        body: list[int] = []
        j = i
        while len(head) + len(body) + len(tail) < REFERENCE_PROMPT_TOKENS:
            body += tokenizer(texts[j % len(texts)] + " ", add_special_tokens=False)["input_ids"]
            j += 1
        rows.append(head + body[: REFERENCE_PROMPT_TOKENS - len(head) - len(tail)] + tail)
    input_ids = torch.tensor(rows)
    attention_mask = torch.ones_like(input_ids)
    options = {"do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        model.generate(
            input_ids=input_ids[:2, -32:],
            attention_mask=attention_mask[:2, -32:],
            max_new_tokens=2,
            **options,
        )
        setup_s = time.perf_counter() - t0
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=REFERENCE_NEW_TOKENS,
            min_new_tokens=REFERENCE_NEW_TOKENS,
            **options,
        )
        wall = time.perf_counter() - t0
    new_tokens = (out.shape[1] - input_ids.shape[1]) * batch
    row = {
        "mode": args.child,
        "episodes": 0,
        "steps": 0,
        "turns": batch,
        "valid": 0,
        "mean_reward": None,
        "prompt_tokens": int(attention_mask.sum()),
        "completion_tokens": int(new_tokens),
        "wall_s": wall,
        "setup_s": setup_s,
        "steps_per_min": 60 * batch / wall / 2,  # the convention: a forecast step is two such turns
        "turns_per_min": 60 * batch / wall,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "stopped_at_time_limit": False,
    }
    print("RESULT " + json.dumps(row), flush=True)


def ideal_round(model: object, rows: int, cached: int, computed: int, new: int) -> float:
    """Seconds the model's forward alone takes for one ideal lockstep round (no padding, no idle row, no env).

    ``rows`` turns, each computing ``computed`` prompt tokens on a cache of ``cached`` tokens (made
    outside the timer) and then writing ``new`` tokens, greedy: one forward for the prompt (which
    gives the first new token) and ``new - 1`` one-token forwards. Token ids are random; the work of a
    dense model does not depend on them.
    """
    import torch
    from transformers import DynamicCache

    vocab = model.config.vocab_size  # type: ignore[attr-defined]
    draw = torch.Generator().manual_seed(0)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)  # type: ignore[attr-defined]
        if cached:
            model(torch.randint(0, vocab, (rows, cached), generator=draw), cache=cache, logits_to_keep=1)  # type: ignore[operator]
        fresh = torch.randint(0, vocab, (rows, max(computed, 1)), generator=draw)
        start = time.perf_counter()
        logits = model(fresh, cache=cache, logits_to_keep=1).logits  # type: ignore[operator]
        for _ in range(new - 1):
            logits = model(logits[:, -1:].argmax(-1), cache=cache).logits  # type: ignore[operator]
        return time.perf_counter() - start


def child(args: argparse.Namespace) -> None:
    """One configuration in its own process: play the episodes, print one JSON line."""
    from forecast_dojo.agents.llm import TransformersAgent
    from forecast_dojo.evaluation.study import log_dir, run_study
    from forecast_dojo.registration import DojoSpec, make
    from forecast_dojo.synthetic.split import synthetic_split

    code, concurrency, dtype = MODES[args.child]
    if code == "reference":
        reference_child(args)
        return
    options = {
        "name": "smollm2",
        "dtype": dtype,
        "batch_size": concurrency,
        "max_new_tokens": args.max_new_tokens,
    }
    if args.child.endswith("-labels"):  # forecast-dojo run --local-constrain-labels
        options["constrain_labels"] = True
    t0 = time.perf_counter()
    # load the model once, outside the timer (its batcher's counts shape the ideal round below)
    loaded = TransformersAgent.from_pretrained(args.model, **options)
    extra: dict = {"prompt": args.prompt} if args.prompt else {}
    budgets = {"max_tool_calls": args.max_tool_calls} if args.max_tool_calls else {}
    if "split" in {f.name for f in dataclasses.fields(DojoSpec)}:  # newer trees hold one split per env
        extra["split"] = "all"

    def make_env(mode: str, metadata: dict) -> object:
        return make(
            "Synthetic-v0",
            memory="none",
            seed=0,
            embedder=args.embedder,
            max_turns=args.max_turns,
            tools=tuple(args.tools),
            **budgets,
            run_metadata=metadata,
            **extra,
        )

    probe = make_env("none", {})
    split = synthetic_split(0)
    ids = list(split.held_out) + list(split.train)  # held-out events first
    events = [e for e in sorted(probe.events, key=lambda e: ids.index(e.id)) if e.id in ids][: args.events]
    probe.close()
    setup_s = time.perf_counter() - t0
    load = os.getloadavg()[0]
    steps_file = log_dir(Path(args.out), "smollm2", "none") / "steps.jsonl"
    t0 = time.perf_counter()

    def report(partial: bool, end: tuple[float, float] | None = None) -> None:
        """Print the row; ``end``: the study's end time and load, when work followed it."""
        finished, load_after = end or (time.perf_counter(), os.getloadavg()[0])
        wall = finished - t0
        lines = steps_file.read_text().splitlines(keepends=True) if steps_file.exists() else []
        records = [json.loads(line) for line in lines if line.endswith("\n")]  # complete records
        turns = sum(r["budgets"]["turns_used"] for r in records)
        rewards = [r["reward"] for r in records if r.get("reward") is not None]
        row = {
            "mode": args.child,
            "episodes": len(events),
            "steps": len(records),
            "turns": turns,
            "valid": sum(bool(r.get("valid")) for r in records),
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,  # -Brier: what the path wrote
            "prompt_tokens": sum(r["tokens"]["prompt_tokens"] or 0 for r in records),
            "completion_tokens": sum(r["tokens"]["completion_tokens"] or 0 for r in records),
            "wall_s": wall,
            "setup_s": setup_s,
            "steps_per_min": 60 * len(records) / wall,
            "turns_per_min": 60 * turns / wall,
            "load_before": load,
            "load_after": load_after,
            "stopped_at_time_limit": partial,
            **extra_row,
        }
        print("RESULT " + json.dumps(row), flush=True)

    extra_row: dict = {}
    if args.time_limit:  # report the steps done so far and stop: rates over the first time_limit seconds

        def stop() -> None:
            report(True)
            os._exit(0)

        threading.Timer(args.time_limit, stop).start()
    run_study(
        args.out,
        {"smollm2": lambda env: TransformersAgent.from_pretrained(args.model, **options)},
        ["none"],
        events,
        make_env,
        concurrency=concurrency,
        progress=False,
    )
    end = (time.perf_counter(), os.getloadavg()[0])
    if code == "tree":  # the ideal round of the study's mean turn (module docstring)
        stats = loaded.batcher.stats
        turns = max(sum(stats.batch_sizes), 1)
        shape = {
            "cached": round(stats.reused_tokens / turns),
            "computed": round((stats.prompt_tokens - stats.reused_tokens) / turns),
            "new": max(round(stats.generated_tokens / turns), 1),
        }
        steps = sum(1 for line in steps_file.read_text().splitlines() if line.strip())
        round_s = ideal_round(loaded.model, concurrency, **shape)
        ideal = {"turn": shape, "round_s": round_s, "model_turns": turns}
        ideal["turns_per_min"] = 60 * concurrency / round_s
        ideal["steps_per_min"] = ideal["turns_per_min"] * steps / turns if steps else None
        extra_row["ideal"] = ideal
    report(False, end)
    os._exit(0)  # the time-limit timer may still be pending


def export_commit(commit: str, into: Path) -> Path:
    """The package at ``commit`` (``git archive``), for the baseline's subprocess."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    """Run each configuration in a subprocess and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=sorted(MODES),
        default=["main-c1-fp32", "c8-bf16", "c32-bf16", "c32-fp32"],
    )
    parser.add_argument(
        "--events", type=int, default=32, help="episodes (held-out events first, then training)"
    )
    parser.add_argument(
        "--baseline-events", type=int, help="episodes for the one-at-a-time modes (default: --events)"
    )
    parser.add_argument("--max-turns", type=int, default=2, help="turns per forecast step (the env's budget)")
    parser.add_argument(
        "--max-tool-calls",
        type=int,
        help="tool calls per forecast step (default: Synthetic-v0's 8; training/experiment.py plays 3). The"
        " prompt shows this budget, and a student may copy it (the nineteenth run's asks for top_k = the budget)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=128, help="tokens per turn at most")
    parser.add_argument("--prompt", help="the env's prompt profile (e.g. compact), if this tree has one")
    parser.add_argument(
        "--embedder", default="minilm", help="the synthetic world's embedder (minilm: real env time)"
    )
    parser.add_argument(
        "--tools",
        nargs="+",
        default=["search", "read", "submit_forecast"],
        help="the env's tools (training/experiment.py plays search submit_forecast since 2026-12-07)",
    )
    parser.add_argument("--baseline-commit", default=BASE_COMMIT)
    parser.add_argument(
        "--time-limit", type=float, help="seconds per configuration: rates over the steps done by then"
    )
    parser.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (the GGUF, de-quantized at each load) or the same model saved by save_checkpoint (loads faster)",
    )
    parser.add_argument("--child", choices=sorted(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        baseline_tree = None
        for mode in args.modes:
            code, concurrency, _ = MODES[mode]
            if code == "baseline" and baseline_tree is None:
                baseline_tree = export_commit(args.baseline_commit, Path(tmp, "baseline"))
            events = args.baseline_events if (concurrency == 1 and args.baseline_events) else args.events
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                mode,
                "--out",
                str(Path(tmp, mode)),
            ]
            command += ["--events", str(events), "--max-turns", str(args.max_turns)]
            command += ["--max-new-tokens", str(args.max_new_tokens), "--embedder", args.embedder]
            command += ["--model", args.model, "--tools", *args.tools]
            if args.time_limit:
                command += ["--time-limit", str(args.time_limit)]
            if args.prompt:
                command += ["--prompt", args.prompt]
            if args.max_tool_calls:
                command += ["--max-tool-calls", str(args.max_tool_calls)]
            root = baseline_tree if code == "baseline" else REPO
            env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
            print(f"# {mode}: {' '.join(command[1:])} (PYTHONPATH={root})", flush=True)
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{mode} failed (exit {done.returncode})")
            row = json.loads(lines[-1].removeprefix("RESULT "))
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]["steps_per_min"]
    reference = next((r["turns_per_min"] for r in rows if MODES[r["mode"]][0] == "reference"), None)
    print(
        f"\nSmolLM2-135M ({args.model}), synthetic world, memory-free, max {args.max_turns} turns and "
        f"{args.max_tool_calls or 'the spec default of'} tool calls per step, "
        f"max {args.max_new_tokens} new tokens per turn, prompt profile {args.prompt or 'default'}"
    )
    print(
        "| mode | episodes | steps | turns | valid | mean reward (-Brier) | prompt tok/step | new tok/step | wall s "
        "| steps/min | turns/min "
        f"| x {rows[0]['mode']} (steps) | x reference (turns) | ideal steps/min | x ideal | load (before, after) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    if reference:
        print(
            f"(reference-*: no env and no episodes; its token columns are per turn, its steps/min half its turns/min; "
            f"{REFERENCE_PROMPT_TOKENS} prompt and exactly {REFERENCE_NEW_TOKENS} new tokens per turn)"
        )
    for r in rows:
        steps = max(r["steps"], 1) if r["steps"] else max(r["turns"], 1)  # the reference: per turn
        versus_reference = f"{r['turns_per_min'] / reference:.2f}" if reference else "-"
        ideal = (r.get("ideal") or {}).get("steps_per_min")
        versus_ideal = f"{r['steps_per_min'] / ideal:.2f}" if ideal else "-"
        print(
            f"| {r['mode']} | {r['episodes']} | {r['steps']} | {r['turns']} | {r['valid']} "
            f"| {'-' if r.get('mean_reward') is None else format(r['mean_reward'], '.3f')} "
            f"| {r['prompt_tokens'] / steps:.0f} | {r['completion_tokens'] / steps:.0f} | {r['wall_s']:.0f} "
            f"| {r['steps_per_min']:.1f} | {r['turns_per_min']:.1f} | {r['steps_per_min'] / base if base else float('nan'):.1f} "
            f"| {versus_reference} | {'-' if not ideal else format(ideal, '.1f')} | {versus_ideal} "
            f"| {r['load_before']:.1f}, {r['load_after']:.1f} |"
        )
    for r in rows:
        if r.get("ideal"):
            turn = r["ideal"]["turn"]
            print(
                f"ideal round of {r['mode']}: {MODES[r['mode']][1]} rows x ({turn['computed']} computed prompt tokens "
                f"on {turn['cached']} cached, then {turn['new']} new) in {r['ideal']['round_s']:.1f} s by the "
                f"forward alone; {r['ideal']['model_turns']} model turns for {r['steps']} steps"
            )


if __name__ == "__main__":
    main()
