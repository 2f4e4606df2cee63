"""Served rollouts against the in-process env: per-step overhead and steps/s at 1, 4 and 16 sessions.

Baseline, measured in the same run: the in-process env (``forecast_dojo.make``), one env per thread,
the same episodes and the same scripted agent (``EvidenceAgent``). Served: ``forecast-dojo serve`` in
its own process on 127.0.0.1, one ``ForecastDojoClient`` session per thread. A "step" is one
``env.step`` call (one assistant turn); its latency is the time inside ``env.step`` in process and
the client's round trip when served, so the difference is what serving adds (JSON, WebSocket, the
server's executor hop). steps/s counts every turn of every session over the wall time (agent included).

    python benchmarks/serve.py                                  # hashing embedder, 1/4/16 sessions
    python benchmarks/serve.py --sessions 1 4 16 --episodes 4 --embedder hashing
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from forecast_dojo.agents import EvidenceAgent
from forecast_dojo.errors import ServeError
from forecast_dojo.integrations.openenv import ForecastDojoClient, fetch_facts, observation_dict
from forecast_dojo.registration import make

TARGET_MS = 2.0  # added per step at 16 sessions
REPO = Path(__file__).resolve().parents[1]


def in_process(make_env: Any, events: list[str]) -> list[float]:
    """Play ``events`` in process; the latency (ms) of every env.step."""
    env = make_env()
    latencies = []
    for event_id in events:
        agent = EvidenceAgent()
        observation, _ = env.reset(event_id)
        done = False
        while not done:
            action = agent.act(observation)
            start = time.perf_counter()
            observation, _, terminated, truncated, _ = env.step(action)
            latencies.append((time.perf_counter() - start) * 1000)
            done = terminated or truncated
    env.close()
    return latencies


def served(url: str, events: list[str]) -> list[float]:
    """Play ``events`` through one session; the round trip (ms) of every step."""
    latencies = []
    with ForecastDojoClient(base_url=url) as client:
        for event_id in events:
            agent = EvidenceAgent()
            result = client.reset(event_id=event_id)
            while not result.done:
                action = agent.act(observation_dict(result.observation))
                start = time.perf_counter()
                result = client.step(action)
                latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def run_sessions(
    play: Any, target: Any, n: int, event_ids: list[str], episodes: int
) -> tuple[list[float], float]:
    """``n`` threads, each playing ``episodes`` events (a different rotation per thread); latencies and wall s."""
    results: list[list[float]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        events = [event_ids[(i + k) % len(event_ids)] for k in range(episodes)]
        try:
            results[i] = play(target, events)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return [x for r in results for x in r], wall


def start_server(args: argparse.Namespace, max_sessions: int) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "forecast_dojo.cli", "serve", "--spec", args.spec, "--port", str(port)]
    command += ["--embedder", args.embedder, "--no-python", "--max-sessions", str(max_sessions)]
    environment = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            fetch_facts(url, timeout_s=1)
            return process, url
        except ServeError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="Synthetic-v0")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per session")
    args = parser.parse_args()

    def make_env() -> Any:
        return make(args.spec, embedder=args.embedder, python_runner=None, split="train")

    probe = make_env()
    event_ids = [e.id for e in probe.events]
    process, url = start_server(args, max(args.sessions))
    rows = []
    try:
        served(url, event_ids[:1])  # warm the server (its first session builds an env)
        for n in args.sessions:
            local, local_wall = run_sessions(in_process, make_env, n, event_ids, args.episodes)
            remote, remote_wall = run_sessions(served, url, n, event_ids, args.episodes)
            assert len(local) == len(remote), (len(local), len(remote))  # the same episodes, turn for turn
            rows.append((n, len(local), local, local_wall, remote, remote_wall))
    finally:
        process.terminate()
        process.wait(timeout=30)

    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs; spec {args.spec}, "
        f"embedder {args.embedder}, {args.episodes} episodes per session (scripted EvidenceAgent)"
    )
    header = (
        f"{'sessions':>8} {'steps':>6} | {'in-process ms/step':>18} {'steps/s':>8} | "
        f"{'served ms/step':>14} {'steps/s':>8} | {'added ms/step (mean, p50)':>25}"
    )
    print(header)
    print("-" * len(header))
    for n, steps, local, local_wall, remote, remote_wall in rows:
        added_mean = statistics.fmean(remote) - statistics.fmean(local)
        added_p50 = statistics.median(remote) - statistics.median(local)
        print(
            f"{n:>8} {steps:>6} | {statistics.fmean(local):>18.2f} {steps / local_wall:>8.1f} | "
            f"{statistics.fmean(remote):>14.2f} {steps / remote_wall:>8.1f} | "
            f"{added_mean:>+12.2f}, {added_p50:>+10.2f}"
        )
    last = rows[-1]
    added = statistics.fmean(last[4]) - statistics.fmean(last[2])
    verdict = "met" if added <= TARGET_MS else "not met"
    print(f"goal: <= {TARGET_MS} ms added per step at {last[0]} sessions: {added:+.2f} ms ({verdict})")


if __name__ == "__main__":
    main()
