"""The env's share of an LLM rollout's wall time, in process and served, against an OpenAI-compatible server.

The policy is :class:`forecast_dojo.agents.OpenAIAgent` (the ``openai`` client, native tool calls)
talking to the scripted OpenAI-compatible server of the test suite
(``forecast_dojo.testing.ScriptedChatServer``, on 127.0.0.1: one ``search`` per forecast
step, then a uniform ``submit_forecast``). What is simulated is the model only: the server sleeps
``--latency`` seconds before each reply (0 = an infinitely fast model, the worst case for the env's
share; a latency equal to a real model's turn time stands in for that model's generation). Everything
else is real: the env (in process, or ``forecast-dojo serve`` in its own process through
``ForecastDojoClient``), the agent's request building, JSON and HTTP.

share = (time inside ``env.reset`` + ``env.step`` calls, or their round trips when served) / the
rollout's wall time (first reset to the last step's answer, the model's calls included), over every
episode played. One rollout at a time, through one session held for the whole run (as a trainer
holds its sessions; the in-process env is likewise built once); the same events for every row. Beside it, the
env's CPU per turn (in process: this process's CPU inside the calls; served: the client's inside the
calls plus the server process's) and the share that CPU gives against the simulated latency, which is
what the wall share would be on a machine where the env never waits for a CPU.

    python benchmarks/rollout_share.py                          # latencies 0, 0.4 and 1.2 s per turn
    python benchmarks/rollout_share.py --latency 0 0.4 --episodes 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's benchmarks and forecast_dojo

from benchmarks.serve import open_client, process_cpu_s, start_server  # noqa: E402
from forecast_dojo.agents.openai_agent import OpenAIAgent, OpenAIConfig  # noqa: E402
from forecast_dojo.integrations.openenv import observation_dict  # noqa: E402
from forecast_dojo.registration import make  # noqa: E402
from forecast_dojo.testing import ScriptedChatServer, serve_scripted_chat  # noqa: E402

TARGET = 0.01  # the env's share of a rollout (issue 20)


class SlowChatServer(ScriptedChatServer):
    """The scripted server, answering each chat request after ``latency_s`` (the simulated generation)."""

    requests: list[dict] = []


def chat_server(latency_s: float) -> tuple[Any, str]:
    SlowChatServer.latency_s = latency_s
    SlowChatServer.requests = []
    return serve_scripted_chat(SlowChatServer)


def agent_for(url: str, tools: list[dict[str, Any]]) -> OpenAIAgent:
    return OpenAIAgent(OpenAIConfig(url, "scripted", api_key="x", timeout_s=60.0, max_retries=0), tools=tools)


def rollout_in_process(env: Any, chat_url: str, events: list[str]) -> tuple[float, float, float, int]:
    """(env seconds, env CPU seconds, wall seconds, steps) for ``events`` played in process."""
    env_s, cpu_s, turns = 0.0, 0.0, 0
    start = time.perf_counter()
    for event_id in events:
        agent = agent_for(chat_url, env.tool_schemas())
        t, c = time.perf_counter(), time.process_time()
        observation, _ = env.reset(event_id)
        env_s, cpu_s = env_s + time.perf_counter() - t, cpu_s + time.process_time() - c
        done = False
        while not done:
            action = agent.act(observation)
            t, c = time.perf_counter(), time.process_time()
            observation, _, terminated, truncated, _ = env.step(action)
            env_s, cpu_s = env_s + time.perf_counter() - t, cpu_s + time.process_time() - c
            turns += 1
            done = terminated or truncated
        assert not agent.failures, agent.failures
    return env_s, cpu_s, time.perf_counter() - start, turns


def rollout_served(
    client: Any, pid: int, tools: list[dict[str, Any]], chat_url: str, events: list[str]
) -> tuple[float, float, float, int]:
    """(round-trip seconds, env CPU seconds, wall seconds, steps) for ``events`` played through one session.

    The session is the client's, opened before (as a trainer holds its sessions; the in-process env is
    built before its rollouts too). The env's CPU: this process's during the calls (the client's) plus
    the server process's over the rollout.
    """
    env_s, cpu_s, turns = 0.0, 0.0, 0
    start, server_cpu = time.perf_counter(), process_cpu_s(pid)
    for event_id in events:
        agent = agent_for(chat_url, tools)
        t, c = time.perf_counter(), time.process_time()
        result = client.reset(event_id=event_id)
        env_s, cpu_s = env_s + time.perf_counter() - t, cpu_s + time.process_time() - c
        while not result.done:
            action = agent.act(observation_dict(result.observation))
            t, c = time.perf_counter(), time.process_time()
            result = client.step(action)
            env_s, cpu_s = env_s + time.perf_counter() - t, cpu_s + time.process_time() - c
            turns += 1
        assert not agent.failures, agent.failures
    cpu_s += process_cpu_s(pid) - server_cpu
    return env_s, cpu_s, time.perf_counter() - start, turns


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="Synthetic-v0")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.4, 1.2], help="seconds per turn")
    parser.add_argument(
        "--episodes", type=int, default=1, help="episodes per row (the first training events)"
    )
    parser.add_argument(
        "--threaded", action="store_true", help="serve with --threaded (every env call in a thread)"
    )
    parser.add_argument(
        "--client", choices=("blocking", "openenv"), default="blocking", help="as benchmarks/serve.py"
    )
    args = parser.parse_args()
    args.server_code, args.no_timings = str(REPO), True

    env = make(args.spec, embedder=args.embedder, python_runner=None, split="train")
    tools = env.tool_schemas()
    events = [e.id for e in env.events][: args.episodes]
    process, url = start_server(args, 1)
    client = open_client(url, args.client)
    rows = []
    try:
        for latency in args.latency:
            server, chat_url = chat_server(latency)
            try:
                rollout_in_process(env, chat_url, events[:1])  # warm both paths (first-call costs)
                rollout_served(client, process.pid, tools, chat_url, events[:1])
                for name, play in (
                    ("in-process", lambda: rollout_in_process(env, chat_url, events)),  # noqa: B023
                    ("served", lambda: rollout_served(client, process.pid, tools, chat_url, events)),  # noqa: B023
                ):
                    SlowChatServer.requests = []
                    env_s, cpu_s, wall_s, turns = play()
                    calls = len(SlowChatServer.requests)
                    rows.append((latency, name, turns, calls, env_s, cpu_s, wall_s, load()))
            finally:
                server.shutdown()
                server.server_close()
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=30)
        env.close()

    print(
        f"{os.cpu_count()} CPUs; spec {args.spec}, embedder {args.embedder}, {len(events)} episode(s) per row "
        f"({', '.join(events)}); policy OpenAIAgent against the scripted chat server on 127.0.0.1; "
        f"server{' --threaded' if args.threaded else ''}, client {args.client}"
    )
    header = (
        f"{'latency s/turn':>14} {'env':>10} {'turns':>6} {'chat calls':>10} | {'env ms/turn':>11} "
        f"{'rollout s':>9} | {'env share':>9} | {'env CPU ms/turn':>15} {'CPU share':>9} | {'load 1/5/15 min':>16}"
    )
    print(header)
    print("-" * len(header))
    for latency, name, turns, calls, env_s, cpu_s, wall_s, after in rows:
        cpu_turn = cpu_s / turns
        estimate = f"{cpu_turn / (cpu_turn + latency):>9.2%}" if latency else f"{'-':>9}"
        print(
            f"{latency:>14.2f} {name:>10} {turns:>6} {calls:>10} | {env_s / turns * 1000:>11.2f} {wall_s:>9.2f} | "
            f"{env_s / wall_s:>9.2%} | {cpu_turn * 1000:>15.2f} {estimate} | {after:>16}"
        )
    print(
        "CPU share: env CPU per turn / (env CPU per turn + the simulated latency), the share where the env "
        "never waits for a CPU"
    )
    for latency, name, _, _, env_s, _, wall_s, _ in rows:
        verdict = "met" if env_s / wall_s < TARGET else "not met"
        print(
            f"goal: env share < {TARGET:.0%} at {latency:.2f} s per turn, {name}: {env_s / wall_s:.2%} ({verdict})"
        )


if __name__ == "__main__":
    main()
