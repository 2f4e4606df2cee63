"""Generation without the env: plain HF ``generate`` against the lockstep ``GenerationBatcher``, per dtype.

Baseline (same run, same prompts, same model): one ``model.generate`` call on a left-padded batch of
``--batch`` prompts. Against it, the same prompts sent from ``--batch`` threads to one
:class:`~forecast_dojo.agents.batching.GenerationBatcher` (what ``forecast-dojo run --concurrency N``
uses), whose rows stop after ``</tool_call>`` or ``<|im_end|>``. Each dtype loads the model afresh.

It also prints what bounds both: the machine's float32 matrix-product rate (a 3,000 x 576 x 1,536
product, the shape of SmolLM2's MLP on a batch of prompts) and whether bfloat16 is native here
(:func:`forecast_dojo.agents.llm.native_bfloat16`). A 135M model costs about 0.27 GFLOP per prompt
token, so prefill runs at about (GFLOP/s) / 0.27 tokens per second.

    python benchmarks/generation.py --model /path/to/smollm2-hf --batch 8 --dtypes float32 bfloat16

The load average (``os.getloadavg``) is printed beside every row: the cores may be shared.
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def matmul_gflops(threads: int) -> float:
    """The float32 rate of one ``[3000, 576] @ [576, 1536]`` product, best of three, on ``threads`` threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, w = torch.randn(3000, 576), torch.randn(576, 1536)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(5):
            a @ w
        best = min(best, time.perf_counter() - started)
    torch.set_num_threads(before)
    return 5 * 2 * 3000 * 576 * 1536 / best / 1e9


def main() -> None:
    """Print the table."""
    import torch

    from forecast_dojo.agents.llm import generation_batcher, load_model, load_tokenizer, native_bfloat16

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="a checkpoint folder or 'smollm2'")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args()

    print(
        f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"native bfloat16: {native_bfloat16()}, threads {torch.get_num_threads()}"
    )
    print(
        f"float32 matmul: {matmul_gflops(1):.1f} GFLOP/s on 1 thread, "
        f"{matmul_gflops(torch.get_num_threads()):.1f} on {torch.get_num_threads()}; load {os.getloadavg()}"
    )
    tokenizer = load_tokenizer(args.model)
    system = "You are a forecaster. Use the tools, then submit a forecast. " * 30
    prompts = [
        tokenizer(f"{system} Question {i}: will event {i} happen? Answer with one tool call.")["input_ids"]
        for i in range(args.batch)
    ]
    print(f"{args.batch} prompts of {len(prompts[0])} tokens, {args.new_tokens} new tokens at most\n")
    print("| dtype | path | turns | new tokens | wall s | turns/min | load (before, after) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.dtypes:
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]
        model, pad = load_model(args.model, dtype=dtype).eval(), tokenizer.pad_token_id or 0
        ids = torch.tensor(prompts, device=model.device)  # a model on a GPU generates there
        load = os.getloadavg()[0]
        started = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
        wall = time.perf_counter() - started
        new = int((out[:, ids.shape[1] :] != pad).sum())
        print(
            f"| {name} | plain generate (baseline) | {args.batch} | {new} | {wall:.1f} | "
            f"{60 * args.batch / wall:.1f} | {load:.1f}, {os.getloadavg()[0]:.1f} |",
            flush=True,
        )

        batcher = generation_batcher(model, tokenizer, max_batch=args.batch)
        sessions = [batcher.new_session() for _ in prompts]
        results: list[list[int]] = [[] for _ in prompts]

        def play(i: int, batcher=batcher, sessions=sessions, results=results) -> None:  # noqa: ANN001
            results[i] = batcher.generate(
                prompts[i], session=sessions[i], max_new_tokens=args.new_tokens, do_sample=False
            )

        load = os.getloadavg()[0]
        started = time.perf_counter()
        threads = [threading.Thread(target=play, args=(i,)) for i in range(len(prompts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        print(
            f"| {name} | GenerationBatcher, {args.batch} threads | {args.batch} | "
            f"{sum(map(len, results))} | {wall:.1f} | {60 * args.batch / wall:.1f} | "
            f"{load:.1f}, {os.getloadavg()[0]:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
