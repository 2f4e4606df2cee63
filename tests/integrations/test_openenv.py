"""forecast-dojo serve for real on 127.0.0.1: concurrent clients play whole episodes, hostile turns, cap, reaping."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("openenv")
pytest.importorskip("uvicorn")

from forecast_dojo.agents import EvidenceAgent  # noqa: E402
from forecast_dojo.errors import CapacityError, ServeError, SessionClosedError  # noqa: E402
from forecast_dojo.integrations.openenv import (  # noqa: E402
    INFO_KEYS,
    TIMING_PHASES,
    TIMINGS_ROUTE,
    BackgroundServer,
    ForecastDojoClient,
    create_app,
    fetch_facts,
    observation_dict,
)
from tests.conftest import REPO_ROOT  # noqa: E402


@pytest.fixture(scope="module")
def synthetic_factory(synthetic_cache: Path):
    """Envs over the synthetic world's training split (hashing embedder, python off)."""
    from forecast_dojo.registration import make

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
        yield lambda: make("Synthetic-v0", embedder="hashing", python_runner=None, split="train")


@pytest.fixture(scope="module")
def server(synthetic_factory):
    with BackgroundServer(create_app(synthetic_factory, max_sessions=4, spec="Synthetic-v0")) as running:
        yield running


def play_in_process(env, event_id: str) -> list[float]:
    agent = EvidenceAgent()
    observation, _ = env.reset(event_id)
    rewards, done = [], False
    while not done:
        observation, reward, terminated, truncated, info = env.step(agent.act(observation))
        rewards.append(reward)
        done = terminated or truncated
    return rewards


def play_served(url: str, event_id: str, seen: list) -> list[float]:
    agent = EvidenceAgent()
    with ForecastDojoClient(base_url=url) as client:
        result = client.reset(event_id=event_id)
        rewards = []
        while not result.done:
            result = client.step(agent.act(observation_dict(result.observation)))
            rewards.append(result.reward)
            seen.append(result.observation)
    return rewards


def test_four_concurrent_clients_play_whole_episodes_as_in_process(server, synthetic_factory):
    facts = fetch_facts(server.url)
    assert facts["split"] == "train" and facts["memory"] == "none" and len(facts["event_ids"]) == 20
    events = facts["event_ids"][:4]
    results: dict[str, list[float]] = {}
    seen: list = []
    errors: list[BaseException] = []

    def worker(event_id: str) -> None:
        try:
            results[event_id] = play_served(server.url, event_id, seen)
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(e,)) for e in events]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    env = synthetic_factory()
    for event_id in events:
        expected = play_in_process(env, event_id)
        assert results[event_id] == pytest.approx(expected), event_id
        assert (
            len(results[event_id]) > facts["n_steps"][event_id]
        )  # research turns plus one submission per step
    # what a served observation carries: the env's fields and the trainer's info, never outcome or length
    for observation in seen:
        assert set(observation.info) <= set(INFO_KEYS)
        assert observation.n_steps is None and observation.outcomes and observation.question
        assert not {"n_steps", "record", "outcome", "outcome_index"} & set(observation.info)
    ended = [o for o in seen if o.info.get("step_ended")]
    assert ended and all(set(o.info["scores"]) == {"brier", "log", "spherical"} for o in ended)
    assert fetch_facts(server.url)["active_sessions"] == 0  # every client closed its session


HOSTILE = [
    "not a tool call at all",
    '<tool_call>{"name": "search", "arguments": {"query": </tool_call>',
    {"role": "assistant", "content": None, "tool_calls": "everything"},
    {"message": {"tool_calls": [{"function": {"name": "rm -rf", "arguments": "{}"}}]}, "extra": 1},
    ["a", "list", {"of": "things"}],
    12345,
    None,
    "\ud800 lone surrogate " + "x" * 200_000,
    {"tool_calls": [{"function": {"name": "submit_forecast", "arguments": {"probabilities": [1e308, -1]}}}]},
    json.loads("[" * 500 + "]" * 500),
]


def test_hostile_turns_never_kill_the_session_or_the_server(server):
    with ForecastDojoClient(base_url=server.url) as client:
        first = client.reset(event_id=fetch_facts(server.url)["event_ids"][0])
        turns = first.observation.budget_left["turns"]
        for action in HOSTILE[: turns - 1]:
            result = client.step(action)
            assert result.reward == 0.0 or result.observation.info["step_ended"]
            assert result.observation.messages  # an error message or notice for the model
        with pytest.raises(ServeError, match="unknown event id 'nope' in this environment's train split"):
            client.reset(event_id="nope")
        with pytest.raises(ServeError, match="unknown reset options"):
            client.reset(bogus=1)
        client.reset(step=0)  # the session is still there
        state = client.state()
        assert state.step_count == 0
    # and so is the server
    with ForecastDojoClient(base_url=server.url) as client:
        assert client.reset(seed=3).observation.question


def test_a_step_after_the_episode_is_an_error_and_the_session_survives(make_tiny_env):
    app = create_app(lambda: make_tiny_env(), max_sessions=1)
    with BackgroundServer(app) as running, ForecastDojoClient(base_url=running.url) as client:
        with pytest.raises(ServeError, match="call reset"):
            client.step("hello")
        result = client.reset(event_id="harbor", step=2)  # the last step of 3
        result = client.step(
            {
                "tool_calls": [
                    {"function": {"name": "submit_forecast", "arguments": {"probabilities": [0.8, 0.2]}}}
                ]
            }
        )
        assert result.done and result.reward == pytest.approx(-2 * 0.2**2)
        with pytest.raises(ServeError, match="episode is over"):
            client.step("again")
        assert not client.reset(event_id="mayor").done


def test_the_session_cap_and_idle_reaping(make_tiny_env):
    # an idle timeout with slack for a loaded machine
    app = create_app(lambda: make_tiny_env(), max_sessions=2, idle_timeout_s=2.0)
    with BackgroundServer(app) as running:
        first, second = ForecastDojoClient(base_url=running.url), ForecastDojoClient(base_url=running.url)
        first.reset(event_id="harbor")
        second.reset(event_id="mayor")
        third = ForecastDojoClient(base_url=running.url)
        with pytest.raises(CapacityError, match="max-sessions"):
            third.reset(event_id="harbor")
        assert fetch_facts(running.url)["active_sessions"] == 2
        # kept busy, the first survives; the idle second is closed
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if first.step(
                "thinking"
            ).done:  # a turn without a tool call each time: the episode ends, start again
                first.reset(event_id="harbor")
            time.sleep(0.05)
        assert fetch_facts(running.url)["active_sessions"] == 1
        with pytest.raises(SessionClosedError, match="reconnect"):
            second.step("are you there?")
        # the freed slot serves a new session; the reaped client reconnects with a reset
        assert third.reset(event_id="harbor").observation.event_id == "harbor"
        with pytest.raises(CapacityError):
            second.reset(event_id="mayor")
        third.close()
        assert second.reset(event_id="mayor").observation.event_id == "mayor"
        for client in (first, second):
            client.close()


def test_request_timings_split_each_request_and_are_off_by_default(make_tiny_env):
    import urllib.error
    import urllib.request

    untimed = create_app(lambda: make_tiny_env(), max_sessions=1)
    with BackgroundServer(untimed) as running, pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(running.url + TIMINGS_ROUTE)
    timed = create_app(lambda: make_tiny_env(), max_sessions=1, timings=True)
    with BackgroundServer(timed) as running, ForecastDojoClient(base_url=running.url) as client:
        client.reset(event_id="harbor")
        client.step('<tool_call>{"name": "search", "arguments": {"query": "Harbor Act"}}</tool_call>')
        client.step("thinking")
        with urllib.request.urlopen(running.url + TIMINGS_ROUTE) as response:
            summary = json.loads(response.read())
        counts = {phase: summary[phase]["count"] for phase in TIMING_PHASES}
        assert counts == dict.fromkeys(TIMING_PHASES, 3)  # one reset, two steps
        mean = {phase: summary[phase]["mean_ms"] for phase in TIMING_PHASES}
        assert (
            0 < mean["env"] <= mean["call"] < mean["handler"]
        )  # env.step inside the call inside the handler
        assert mean["queue"] + mean["call"] + mean["resume"] <= mean["handler"]
        urllib.request.urlopen(urllib.request.Request(running.url + TIMINGS_ROUTE, method="DELETE")).close()
        with urllib.request.urlopen(running.url + TIMINGS_ROUTE) as response:
            assert json.loads(response.read())["handler"]["count"] == 0


def test_the_server_does_not_compress_messages(make_tiny_env):
    """Per-message deflate cost the server and the client ~0.4 ms per step for a few KB saved (benchmarks/serve.py)."""
    from websockets.sync.client import connect

    app = create_app(lambda: make_tiny_env(), max_sessions=1)
    with BackgroundServer(app) as running, connect(running.url.replace("http", "ws") + "/ws") as ws:
        assert "Sec-WebSocket-Extensions" not in ws.response.headers  # the client's deflate offer declined
        ws.send(json.dumps({"type": "reset", "data": {"event_id": "harbor"}}))
        assert json.loads(ws.recv())["data"]["observation"]["event_id"] == "harbor"


def test_refused_configurations(make_tiny_env):
    with pytest.raises(ValueError, match="max_sessions"):
        create_app(lambda: make_tiny_env(), max_sessions=0)
    with pytest.raises(ValueError, match="idle_timeout_s"):
        create_app(lambda: make_tiny_env(), idle_timeout_s=0)
    with pytest.raises(ServeError, match="is `forecast-dojo serve` running"):
        ForecastDojoClient(base_url="http://127.0.0.1:9").reset()


@pytest.mark.slow
def test_the_serve_command_serves_a_spec(synthetic_cache):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {**os.environ, "FORECAST_DOJO_CACHE": str(synthetic_cache), "PYTHONPATH": str(REPO_ROOT)}
    command = [
        sys.executable,
        "-m",
        "forecast_dojo.cli",
        "serve",
        "--spec",
        "Synthetic-v0",
        "--port",
        str(port),
    ]
    command += ["--embedder", "hashing", "--no-python", "--max-sessions", "2", "--idle-timeout", "30"]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        url = f"http://127.0.0.1:{port}"
        # a server at nice 15 beside a training run took over 120 s to start
        deadline = time.monotonic() + 600
        while True:
            try:
                facts = fetch_facts(url, timeout_s=1)
                break
            except ServeError:
                assert process.poll() is None, process.communicate()[1][-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.5)
        assert (
            facts["spec"] == "Synthetic-v0" and facts["max_sessions"] == 2 and "python" not in facts["tools"]
        )
        with ForecastDojoClient(base_url=url) as client:
            result = client.reset(seed=0)
            k = len(result.observation.outcomes)
            result = client.step(
                f'<tool_call>{{"name": "submit_forecast", "arguments": {{"probabilities": {[1 / k] * k}}}}}</tool_call>'
            )
            assert result.observation.info["step_ended"] and result.observation.info["valid"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_request_timings_stay_bounded_with_exact_counts():
    """A long-lived server's timings keep the last ``window`` samples; counts and totals stay exact."""
    from forecast_dojo.integrations.openenv import RequestTimings

    timings = RequestTimings(window=3)
    for seconds in (1.0, 2.0, 3.0, 4.0, 5.0):
        timings.add("env", seconds)
    env = timings.summary()["env"]
    assert (env["count"], env["total_s"], env["mean_ms"]) == (5, 15.0, 3000.0)
    assert env["p50_ms"] == 4000.0 and len(timings._samples["env"]) == 3
    timings.clear()
    assert timings.summary()["env"]["count"] == 0


def test_short_calls_run_on_the_event_loop_and_python_in_the_session_thread(make_tiny_env):
    """No thread hand-off for a reset or a search/read/submit turn; a python turn waits in the session's thread."""
    threads: list[tuple[str, str]] = []

    def runner(code: str, now) -> tuple[str, str | None]:
        threads.append(("python", threading.current_thread().name))
        return "42\n", None

    def make_env():
        env = make_tiny_env(python_runner=runner)
        step, reset = env.step, env.reset

        def traced_step(action):
            threads.append(("step", threading.current_thread().name))
            return step(action)

        def traced_reset(*args, **kwargs):
            threads.append(("reset", threading.current_thread().name))
            return reset(*args, **kwargs)

        env.step, env.reset = traced_step, traced_reset
        return env

    search = '<tool_call>{"name": "search", "arguments": {"query": "Harbor Act"}}</tool_call>'
    python = '<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>'
    for threaded in (False, True):
        threads.clear()
        app = create_app(make_env, max_sessions=1, threaded=threaded)
        with BackgroundServer(app) as running, ForecastDojoClient(base_url=running.url) as client:
            client.reset(event_id="harbor")  # the session took a pre-built env: nothing to build
            client.reset(event_id="harbor")
            client.step(search)
            result = client.step(python)
            assert "42" in json.dumps(result.observation.messages)
        loop = "forecast-dojo-serve"  # BackgroundServer's thread runs the event loop
        where = [(what, name == loop) for what, name in threads]
        if threaded:
            assert not any(on_loop for _, on_loop in where), threads
        else:
            assert where == [
                ("reset", True),
                ("reset", True),
                ("step", True),
                ("step", False),
                ("python", False),
            ], threads


def test_waiting_tools():
    from forecast_dojo.corpus.embedders import HashingEmbedder
    from forecast_dojo.integrations.openenv import waiting_tools

    class Neural:  # any embedder but the hashing and static ones may release the GIL and wait
        pass

    def env(tools, embedder):
        retriever = SimpleNamespace(embed_query=SimpleNamespace(embedder=embedder))
        return SimpleNamespace(enabled_tools=tools, gateway=SimpleNamespace(retriever=retriever))

    assert waiting_tools(env(("search", "read", "submit_forecast"), HashingEmbedder())) == frozenset()
    assert waiting_tools(env(("search", "python"), HashingEmbedder())) == {"python"}
    assert waiting_tools(env(("search", "python"), Neural())) == {"python", "search"}
    assert waiting_tools(env(("read",), Neural())) == frozenset()


def test_the_client_speaks_openenvs_protocol_to_a_stock_openenv_server(make_tiny_env):
    """The blocking client against OpenEnv's own HTTPEnvServer (no forecast-dojo server code) and back."""
    import asyncio
    import functools

    from fastapi import FastAPI
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.types import ConcurrencyConfig

    from forecast_dojo.integrations.openenv import (
        AsyncForecastDojoClient,
        ForecastAction,
        ForecastObservation,
        ServedForecastEnv,
    )

    stock = HTTPEnvServer(
        functools.partial(ServedForecastEnv, lambda: make_tiny_env()),
        ForecastAction,
        ForecastObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=2),
    )
    app = FastAPI()
    stock.register_routes(app, mode="production")
    turn = {
        "tool_calls": [{"function": {"name": "submit_forecast", "arguments": {"probabilities": [0.8, 0.2]}}}]
    }
    with BackgroundServer(app) as running:
        with ForecastDojoClient(base_url=running.url) as client:
            first = client.reset(event_id="harbor", step=2)
            assert first.observation.event_id == "harbor" and not first.done
            result = client.step(turn)
            assert result.done and result.reward == pytest.approx(-2 * 0.2**2)
            assert client.state().step_count == 1
            with pytest.raises(ServeError, match="episode is over"):
                client.step("again")

        async def play() -> float | None:  # OpenEnv's asyncio client gets the same
            async with AsyncForecastDojoClient(base_url=running.url) as remote:
                await remote.reset(event_id="harbor", step=2)
                return (await remote.step(turn)).reward

        assert asyncio.run(play()) == pytest.approx(result.reward)


def test_many_clients_dropping_at_once_close_their_sessions_quietly(make_tiny_env):
    """Clients that vanish mid-request (sockets reset while their step runs) free their slots; no ASGI error is logged."""
    import logging
    import socket
    import struct

    from forecast_dojo.integrations.wsclient import BlockingWebSocket

    def slow_runner(code: str, now) -> tuple[str, str | None]:
        time.sleep(0.5)  # the answer is sent after its client is gone
        return "done\n", None

    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.ERROR)
    handler.emit = records.append  # type: ignore[method-assign]
    app = create_app(lambda: make_tiny_env(python_runner=slow_runner), max_sessions=12)
    running = BackgroundServer(app)  # uvicorn configures its loggers here: listen after it did
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn", "uvicorn.asgi")]
    for logger in loggers:
        logger.addHandler(handler)
    python = {"message": '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'}
    try:
        with running:
            sockets = []
            for _ in range(12):
                ws = BlockingWebSocket(running.url.replace("http", "ws") + "/ws")
                ws.send(json.dumps({"type": "reset", "data": {"event_id": "harbor"}}))
                json.loads(ws.recv(timeout_s=60))
                ws.send(json.dumps({"type": "step", "data": python}))
                sockets.append(ws._sock)
            for sock in sockets:  # RST, not a close handshake, while the steps run
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            deadline = time.monotonic() + 60
            while fetch_facts(running.url)["active_sessions"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fetch_facts(running.url)["active_sessions"] == 0
            with ForecastDojoClient(base_url=running.url) as client:  # the server goes on
                assert client.reset(event_id="mayor").observation.event_id == "mayor"
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert not [r.getMessage() for r in records], [r.getMessage() for r in records]


class TrackedFactory:
    """Builds tiny envs; records the thread of every build and closes; ``gate`` holds builds until set."""

    def __init__(self, make_tiny_env, gate: threading.Event | None = None) -> None:
        self.make_tiny_env = make_tiny_env
        self.gate = gate
        self.threads: list[str] = []
        self.started = threading.Event()
        self.envs: list = []
        self.calls_in: list[str] = []  # (what, thread) of each traced reset

    def __call__(self):
        self.threads.append(threading.current_thread().name)
        self.started.set()
        if self.gate is not None and len(self.threads) > 1:  # the probe is never held
            assert self.gate.wait(timeout=60)
        env = self.make_tiny_env()
        reset = env.reset

        def traced_reset(*args, **kwargs):
            self.calls_in.append(threading.current_thread().name)
            return reset(*args, **kwargs)

        env.reset = traced_reset
        env.closed = False
        close = env.close

        def tracked_close():
            env.closed = True
            close()

        env.close = tracked_close
        self.envs.append(env)
        return env


def wait_for(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_session_takes_a_warm_env_and_its_first_reset_builds_nothing(make_tiny_env):
    factory = TrackedFactory(make_tiny_env)
    app = create_app(factory, max_sessions=2, warm=2, timings=True)
    assert factory.threads == ["MainThread"]  # the probe: it is the pool's first env
    with BackgroundServer(app) as running:
        wait_for(lambda: fetch_facts(running.url)["warm"]["ready"] == 2)
        facts = fetch_facts(running.url)
        assert facts["active_sessions"] == 0 and facts["warm"]["size"] == 2  # pooled envs hold no slot
        with (
            ForecastDojoClient(base_url=running.url) as first,
            ForecastDojoClient(base_url=running.url) as second,
        ):
            for client in (first, second):
                assert client.reset(event_id="harbor").observation.event_id == "harbor"
            # the first resets ran on the event loop (nothing to build); no request built an env
            assert factory.calls_in == ["forecast-dojo-serve"] * 2
            with urllib_get(running.url + TIMINGS_ROUTE) as response:
                assert json.loads(response.read())["build"]["count"] == 0
            assert fetch_facts(running.url)["warm"]["taken"] == 2
            # the pool refills in the background while the sessions go on; it never holds more than its size
            wait_for(lambda: fetch_facts(running.url)["warm"]["ready"] == 2)
        assert factory.threads[1:] == ["forecast-dojo-env-pool"] * (len(factory.threads) - 1)
        assert len(factory.threads) == 4  # the probe, one more to fill, two refills
    assert all(env.closed for env in factory.envs)  # the sessions' envs, and the pooled ones at shutdown


def test_without_a_warm_env_a_session_builds_its_env_as_it_opens(make_tiny_env):
    gate = threading.Event()
    factory = TrackedFactory(make_tiny_env, gate=gate)
    app = create_app(factory, max_sessions=1, warm=0, timings=True)
    with BackgroundServer(app) as running:
        assert fetch_facts(running.url)["warm"] == {
            "size": 0,
            "ready": 0,
            "taken": 0,
            "missed": 0,
            "built": 0,
        }
        factory.started.clear()
        client = ForecastDojoClient(base_url=running.url).connect()  # no request sent
        assert factory.started.wait(timeout=60)  # the build started when the session opened
        assert factory.threads[-1].startswith("ThreadPoolExecutor")  # in the session's thread
        answers: list = []
        reset = threading.Thread(target=lambda: answers.append(client.reset(event_id="mayor")))
        reset.start()  # sent while the build is held: it waits behind the build in the session's thread
        time.sleep(0.3)
        assert not answers
        gate.set()
        reset.join(timeout=60)
        assert answers[0].observation.event_id == "mayor"
        assert factory.calls_in == [factory.threads[-1]]  # not on the event loop: the env was not built yet
        with urllib_get(running.url + TIMINGS_ROUTE) as response:
            assert json.loads(response.read())["build"]["count"] == 0  # built outside any request
        client.close()
        assert len(factory.threads) == 2  # the probe (closed: no pool) and the session's env


def test_a_session_that_leaves_while_its_env_is_built_frees_its_slot_and_closes_the_env(make_tiny_env):
    gate = threading.Event()
    factory = TrackedFactory(make_tiny_env, gate=gate)
    app = create_app(factory, max_sessions=1, warm=0)
    with BackgroundServer(app) as running:
        client = ForecastDojoClient(base_url=running.url).connect()
        assert factory.started.wait(timeout=60)
        client.close()
        gate.set()
        wait_for(lambda: fetch_facts(running.url)["active_sessions"] == 0)
        wait_for(lambda: len(factory.envs) == 2 and factory.envs[-1].closed)
        with ForecastDojoClient(base_url=running.url) as again:  # the slot serves a new session
            assert again.reset(event_id="harbor").observation.event_id == "harbor"


def test_a_bad_warm_is_refused(make_tiny_env):
    with pytest.raises(ValueError, match="warm"):
        create_app(lambda: make_tiny_env(), warm=-1)


def urllib_get(url: str):
    import urllib.request

    return urllib.request.urlopen(url, timeout=30)
