"""Per-tool-call overhead of the environment, and episode throughput with a scripted policy.

Baseline, measured in the same run: the bare work a tool call cannot avoid (the retriever's ranking
for ``search``, fetching the text for ``read``, scoring for ``submit``). Overhead = env.step time
minus that baseline: parsing, the gateway's checks, result formatting, logging, observation copies.
Query embeddings are warmed first, so embedding time is excluded (it belongs to the embedder).

    python benchmarks/env_overhead.py                 # synthetic world, MiniLM (cached after first build)
    python benchmarks/env_overhead.py --embedder hashing --repeats 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable

from forecast_dojo.agents import EvidenceAgent
from forecast_dojo.agents.base import tool_call
from forecast_dojo.evaluation.runner import run_episode
from forecast_dojo.registration import make
from forecast_dojo.scoring import all_scores

TARGET_MS = 2.0


def timed(function: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as log_dir:
        env = make("Synthetic-v0", embedder=args.embedder, python_runner=None, log_dir=log_dir)
        event = sorted(env.events, key=lambda e: e.id)[0]
        query = event.question
        env.reset(event.id)
        view = env._view  # the step's gateway view, for the baseline
        retriever = env.gateway.retriever
        retriever.search(query, view.n_visible, 10)  # warm the query-embedding cache

        obs, *_ = env.step(tool_call("search", query=query, top_k=10))
        doc_id = json.loads(obs["messages"][0]["content"])[0]["id"]
        row = env.corpus.row_of(doc_id)

        rows = []
        # search: env.step vs. the retriever's own ranking of the visible prefix
        env_search = []
        bare_search = timed(lambda: retriever.search(query, view.n_visible, 10), args.repeats)
        read_bare = timed(lambda: env.corpus.text(row), args.repeats)
        env_read, env_submit = [], []
        submit_bare = timed(lambda: all_scores((0.5, 0.5), 0), args.repeats)
        for _ in range(args.repeats):
            env.reset(event.id)
            start = time.perf_counter()
            env.step(tool_call("search", query=query, top_k=10))
            env_search.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            env.step(tool_call("read", doc_id=doc_id))
            env_read.append((time.perf_counter() - start) * 1000)
            probabilities = [1.0 / len(event.outcomes)] * len(event.outcomes)
            start = time.perf_counter()
            env.step(tool_call("submit_forecast", probabilities=probabilities))
            env_submit.append((time.perf_counter() - start) * 1000)
        for name, env_ms, bare_ms in (
            ("search", env_search, bare_search),
            ("read", env_read, read_bare),
            ("submit_forecast", env_submit, submit_bare),
        ):
            overhead = p50(env_ms) - p50(bare_ms)
            rows.append((name, p50(env_ms), p50(bare_ms), overhead, "yes" if overhead <= TARGET_MS else "NO"))

        print(
            f"\nEnv overhead per tool call ({args.repeats} repeats, p50, corpus of {len(env.corpus)} docs, embedder {args.embedder})"
        )
        print(f"{'tool':<16} {'env.step ms':>12} {'baseline ms':>12} {'overhead ms':>12} {'<= 2 ms':>8}")
        for name, env_p50, bare_p50, overhead, ok in rows:
            print(f"{name:<16} {env_p50:>12.3f} {bare_p50:>12.3f} {overhead:>12.3f} {ok:>8}")
        print(
            "baseline: search = retriever.search on the visible prefix; read = corpus text fetch; submit = scoring"
        )

        events = sorted(env.events, key=lambda e: e.id)[: args.episodes]
        for e in events:  # warm query embeddings so throughput measures the env, not the embedder
            run_episode(env, EvidenceAgent(), e.id)
        start = time.perf_counter()
        steps = sum(len(run_episode(env, EvidenceAgent(), e.id)) for e in events)
        seconds = time.perf_counter() - start
        print(
            f"\nEpisode throughput, scripted EvidenceAgent, warm embeddings: {len(events) / seconds:.1f} episodes/s, {steps / seconds:.1f} forecast steps/s"
        )
        env.close()


if __name__ == "__main__":
    main()
