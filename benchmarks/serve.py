"""Served rollouts against the in-process env: what serving adds per step at 1, 4 and 16 sessions.

Baseline, measured in the same run: the in-process env (``forecast_dojo.make``), one env per thread,
the same episodes and the same scripted agent (``EvidenceAgent``). Served: ``forecast-dojo serve
--timings`` in its own process on 127.0.0.1, one ``ForecastDojoClient`` session per thread. A "step"
is one ``env.step`` call (one assistant turn). Three views of the same runs:

- **wall**: the step's latency, timed inside ``env.step`` in process and as the client's round trip
  when served; steps/s counts every turn of every session over the wall time (agent included). With
  more sessions than CPUs this mixes serving cost with waiting for a CPU.
- **CPU**: CPU seconds per step of everything (this process: agents and clients; the server process:
  sessions, protocol, env) beyond the in-process run's CPU seconds per step (agents and envs). Robust to
  a shared machine: time spent waiting for a CPU is not CPU time. Resets are included in both runs.
- **server**: the server's own timing of each request (``GET /forecast_dojo/timings``): handler (the
  message received -> the answer sent), of which queue (waiting for the session's thread: a CPU and the
  GIL), env (``env.step`` / ``env.reset``), the rest of the session thread's call (building the
  observation), resume (back to the event loop) and protocol (the rest: parse, validate, serialize,
  send); and the client's side: round trip minus the server's handler (the client's work, the loopback
  transport and waiting for a CPU on the client side; with ``--client openenv`` its event-loop thread hop).

Both runs time the same work: a session's first reset includes building its env (in process:
``forecast_dojo.make`` then ``env.reset``; served: the reset's round trip, which builds the env unless the
session took a pre-built one from the server's pool, ``--warm``). The pool refills while the server is
quiet: the script waits for it to be full before each in-process run (no server work beside the baseline)
and after each served run, whose server CPU then includes rebuilding what its sessions took.

    python benchmarks/serve.py                                  # hashing embedder, 1/4/16 sessions
    python benchmarks/serve.py --sessions 1 4 16 --episodes 4 --embedder hashing
    python benchmarks/serve.py --server-code /path/to/other/checkout --no-timings   # another server's code
    python benchmarks/serve.py --threaded --client openenv      # the hand-offs of before: thread-hopping server and client
    python benchmarks/serve.py --warm 0                          # no pre-built envs: each session builds as it opens
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.agents import EvidenceAgent
from forecast_dojo.errors import ServeError
from forecast_dojo.integrations.openenv import (
    TIMINGS_ROUTE,
    AsyncForecastDojoClient,
    ForecastDojoClient,
    fetch_facts,
    observation_dict,
)
from forecast_dojo.registration import make

TARGET_MS = 2.0  # added per step at 16 sessions
REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    """One configuration's measurements."""

    steps: list[float] = field(default_factory=list)  # ms per env.step (in process) or round trip (served)
    resets: list[float] = field(default_factory=list)  # the same for env.reset (all of them)
    first_resets: list[float] = field(
        default_factory=list
    )  # each session's first: it includes the env's build
    wall_s: float = 0.0
    cpu_s: float = 0.0  # this process
    server_cpu_s: float = 0.0  # the server process (served runs)
    server: dict[str, Any] = field(default_factory=dict)  # the server's request timings


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def in_process(make_env: Any, events: list[str]) -> tuple[list[float], list[float]]:
    """Play ``events`` in process; the latency (ms) of every env.step and env.reset.

    The first reset's time includes building the env, as a served session's first reset includes its build.
    """
    latencies, resets = [], []
    env = None
    for event_id in events:
        agent = EvidenceAgent()
        start = time.perf_counter()
        if env is None:
            env = make_env()
        observation, _ = env.reset(event_id)
        resets.append((time.perf_counter() - start) * 1000)
        done = False
        while not done:
            action = agent.act(observation)
            start = time.perf_counter()
            observation, _, terminated, truncated, _ = env.step(action)
            latencies.append((time.perf_counter() - start) * 1000)
            done = terminated or truncated
    if env is not None:
        env.close()
    return latencies, resets


def open_client(url: str, kind: str = "blocking") -> Any:
    """A client of ``url``: ours (``blocking``: no thread hand-off) or OpenEnv's ``SyncEnvClient`` (``openenv``).

    Timeouts with slack for a shared machine: 16 handshakes at once can take seconds there.
    """
    options = {"connect_timeout_s": 300.0, "message_timeout_s": 600.0}
    if kind == "openenv":  # the client before this change: an event loop in a background thread
        return AsyncForecastDojoClient(url, **options).sync()
    return ForecastDojoClient(base_url=url, **options)


CLIENT = "blocking"  # set from --client


def served(url: str, events: list[str]) -> tuple[list[float], list[float]]:
    """Play ``events`` through one session; the round trip (ms) of every step and reset."""
    latencies, resets = [], []
    with open_client(url, CLIENT) as client:
        for event_id in events:
            agent = EvidenceAgent()
            start = time.perf_counter()
            result = client.reset(event_id=event_id)
            resets.append((time.perf_counter() - start) * 1000)
            while not result.done:
                action = agent.act(observation_dict(result.observation))
                start = time.perf_counter()
                result = client.step(action)
                latencies.append((time.perf_counter() - start) * 1000)
    return latencies, resets


def run_sessions(play: Any, target: Any, n: int, event_ids: list[str], episodes: int) -> Run:
    """``n`` threads, each playing ``episodes`` events (a different rotation per thread)."""
    results: list[tuple[list[float], list[float]]] = [([], []) for _ in range(n)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        events = [event_ids[(i + k) % len(event_ids)] for k in range(episodes)]
        try:
            results[i] = play(target, events)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    cpu = time.process_time()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run = Run(wall_s=time.perf_counter() - start, cpu_s=time.process_time() - cpu)
    if errors:
        raise errors[0]
    run.steps = [x for r in results for x in r[0]]
    run.resets = [x for r in results for x in r[1]]
    run.first_resets = [r[1][0] for r in results if r[1]]
    return run


def timings(url: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(url + TIMINGS_ROUTE, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def wait_for_warm_envs(url: str, timeout_s: float = 600.0) -> None:
    """Until the server's pool of pre-built envs is full (a server without one: at once)."""
    deadline = time.monotonic() + timeout_s
    while True:
        warm = fetch_facts(url).get("warm")
        if not isinstance(warm, dict) or warm["ready"] >= warm["size"] or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def start_server(args: argparse.Namespace, max_sessions: int) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "forecast_dojo.cli", "serve", "--spec", args.spec, "--port", str(port)]
    command += ["--embedder", args.embedder, "--no-python", "--max-sessions", str(max_sessions)]
    if not args.no_timings:
        command.append("--timings")
    if getattr(args, "threaded", False):
        command.append("--threaded")
    if getattr(args, "warm", None) is not None:
        command += ["--warm", str(args.warm)]
    code = str(Path(args.server_code).resolve())
    environment = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # cwd: ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH; run from another
    # checkout's root, the server would import that checkout's code, not ``--server-code``'s
    process = subprocess.Popen(command, env=environment, cwd=code, stdout=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 1800  # a server at nice 15 beside a training run can take minutes to start
    while True:
        try:
            fetch_facts(url, timeout_s=5)
            return process, url
        except ServeError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.terminate()
                raise
            time.sleep(0.5)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="Synthetic-v0")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per session")
    parser.add_argument(
        "--server-code", default=str(REPO), help="the checkout the server runs (default: this one)"
    )
    parser.add_argument("--no-timings", action="store_true", help="a server without --timings (older code)")
    parser.add_argument(
        "--threaded",
        action="store_true",
        help="serve with --threaded: every env call in its session's thread",
    )
    parser.add_argument(
        "--client",
        choices=("blocking", "openenv"),
        default="blocking",
        help="ForecastDojoClient (blocking) or OpenEnv's SyncEnvClient over AsyncForecastDojoClient (openenv)",
    )
    parser.add_argument(
        "--warm",
        type=int,
        default=None,
        help="the server's --warm (envs built ahead of sessions; default: the server's own default)",
    )
    args = parser.parse_args()
    global CLIENT
    CLIENT = args.client

    def make_env() -> Any:
        return make(args.spec, embedder=args.embedder, python_runner=None, split="train")

    probe = make_env()
    event_ids = [e.id for e in probe.events]
    process, url = start_server(args, max(args.sessions))
    rows: list[tuple[int, Run, Run, str]] = []
    started = load()
    try:
        served(url, event_ids[:1])  # warm the server up (imports, caches)
        for n in args.sessions:
            wait_for_warm_envs(url)  # no server work beside the in-process run
            local = run_sessions(in_process, make_env, n, event_ids, args.episodes)
            if not args.no_timings:
                timings(url, "DELETE")
            server_cpu = process_cpu_s(process.pid)
            remote = run_sessions(served, url, n, event_ids, args.episodes)
            remote.server = {} if args.no_timings else timings(url)
            wait_for_warm_envs(url)  # the server's CPU includes rebuilding the envs its sessions took
            remote.server_cpu_s = process_cpu_s(process.pid) - server_cpu
            assert len(local.steps) == len(remote.steps), "the same episodes, turn for turn"
            rows.append((n, local, remote, load()))
    finally:
        process.terminate()
        process.wait(timeout=30)

    print(
        f"load average {started} at the start, {load()} at the end (1/5/15 min); {os.cpu_count()} CPUs; "
        f"spec {args.spec}, embedder {args.embedder}, {args.episodes} episodes per session (scripted "
        f"EvidenceAgent); server code {args.server_code}{' --threaded' if args.threaded else ''}"
        f"{'' if args.warm is None else f' --warm {args.warm}'}; client {args.client}"
    )
    print("\nwall clock (ms per step; steps/s over the wall time, agents included)")
    header = (
        f"{'sessions':>8} {'steps':>6} | {'in-process ms/step':>18} {'steps/s':>8} | "
        f"{'served ms/step':>14} {'steps/s':>8} | {'added ms/step (mean, p50)':>25} | {'load 1 min':>10}"
    )
    print(header)
    print("-" * len(header))
    for n, local, remote, after in rows:
        added_mean = statistics.fmean(remote.steps) - statistics.fmean(local.steps)
        added_p50 = statistics.median(remote.steps) - statistics.median(local.steps)
        print(
            f"{n:>8} {len(local.steps):>6} | {statistics.fmean(local.steps):>18.2f} "
            f"{len(local.steps) / local.wall_s:>8.1f} | {statistics.fmean(remote.steps):>14.2f} "
            f"{len(remote.steps) / remote.wall_s:>8.1f} | {added_mean:>+12.2f}, {added_p50:>+10.2f} | "
            f"{after.split()[0]:>10}"
        )

    print(
        "\nresets (ms; a session's first includes building its env: make + reset in process, unless served from the pool)"
    )
    header = (
        f"{'sessions':>8} | {'in-process first':>16} {'later':>8} | {'served first':>12} {'later':>8} | "
        f"{'added first':>11} {'later':>8}"
    )
    print(header)
    print("-" * len(header))
    for n, local, remote, _ in rows:
        values = []
        for run in (local, remote):
            later = sorted(run.resets)
            for first in run.first_resets:  # the same values: drop one occurrence each
                later.remove(first)
            values.append(
                (statistics.fmean(run.first_resets), statistics.fmean(later) if later else float("nan"))
            )
        (lf, ll), (rf, rl) = values
        print(
            f"{n:>8} | {lf:>16.2f} {ll:>8.2f} | {rf:>12.2f} {rl:>8.2f} | {rf - lf:>+11.2f} {rl - ll:>+8.2f}"
        )

    print("\nCPU (ms of CPU per step, resets and agents included; served = clients + server process)")
    header = (
        f"{'sessions':>8} | {'in-process':>10} | {'served clients':>14} {'server':>8} {'total':>8} | "
        f"{'added CPU ms/step':>17}"
    )
    print(header)
    print("-" * len(header))
    for n, local, remote, _ in rows:
        steps = len(local.steps)
        local_ms = local.cpu_s / steps * 1000
        client_ms = remote.cpu_s / steps * 1000
        server_ms = remote.server_cpu_s / steps * 1000
        print(
            f"{n:>8} | {local_ms:>10.2f} | {client_ms:>14.2f} {server_ms:>8.2f} {client_ms + server_ms:>8.2f} | "
            f"{client_ms + server_ms - local_ms:>+17.2f}"
        )

    if not args.no_timings:
        print("\nserver side (mean ms per request: steps and resets) and the client's side of a step")
        phases = ("handler", "queue", "env", "build", "call-env", "resume", "protocol", "client+net")
        header = f"{'sessions':>8} {'requests':>8} | " + " ".join(f"{p:>10}" for p in phases)
        print(header)
        print("-" * len(header))
        for n, _, remote, _ in rows:
            t = {k: v["mean_ms"] for k, v in remote.server.items()}
            count = remote.server["handler"]["count"]
            # builds inside a request (first resets without a pre-built env), spread over all requests
            build = remote.server.get("build", {}).get("total_s", 0.0) * 1000 / max(count, 1)
            values = {
                "handler": t["handler"],
                "queue": t["queue"],
                "env": t["env"],
                "build": build,
                "call-env": t["call"] - t["env"] - build,
                "resume": t["resume"],
                "protocol": t["handler"] - t["queue"] - t["call"] - t["resume"],
                # a request's round trip (steps and resets) minus the server's handler time
                "client+net": statistics.fmean(remote.steps + remote.resets) - t["handler"],
            }
            print(f"{n:>8} {count:>8} | " + " ".join(f"{values[p]:>10.3f}" for p in phases))

    n, local, remote, _ = rows[-1]
    added = statistics.fmean(remote.steps) - statistics.fmean(local.steps)
    added_cpu = (remote.cpu_s + remote.server_cpu_s - local.cpu_s) / len(local.steps) * 1000
    for name, value in (("wall clock", added), ("CPU", added_cpu)):
        verdict = "met" if value <= TARGET_MS else "not met"
        print(f"goal: <= {TARGET_MS} ms added per step at {n} sessions, {name}: {value:+.2f} ms ({verdict})")


if __name__ == "__main__":
    main()
