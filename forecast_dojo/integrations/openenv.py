"""The env as an OpenEnv server (``forecast-dojo serve``), its client, and TRL rollouts through servers.

Server (:func:`create_app`, :func:`serve`): OpenEnv's WebSocket protocol (``/ws``; plus ``/health``,
``/schema``, ``/metadata`` and ``/forecast_dojo``, the served env's facts). Each WebSocket connection is
a **session** with its own env (:class:`ServedForecastEnv`, which declares
``SUPPORTS_CONCURRENT_SESSIONS``, so TRL with ``num_generations > 1`` can hold several), run in its own
thread; at most ``max_sessions`` at once (a client past the cap gets :class:`~forecast_dojo.errors.CapacityError`);
a session idle for more than ``idle_timeout_s`` is closed and its slot freed (its client then gets
:class:`~forecast_dojo.errors.SessionClosedError`). The stateless HTTP ``/reset`` and ``/step`` routes
are not served: an episode needs its session.

Wire types: :class:`ForecastAction` is one assistant turn exactly as ``env.step`` takes it (an OpenAI
chat message dict, or text with ``<tool_call>`` blocks); any JSON a client sends is accepted as a turn,
so model output never fails validation and ``env.step`` turns it into an error message for the model.
:class:`ForecastObservation` carries the env's observation fields (``messages``, ``question``,
``outcomes``, ``budget_left``, ...) and ``info``: the researcher's subset of the step's info (flags,
validity, the forecast, its scores once the step ended), never the outcome, the step record or the
episode length.

Client (:class:`ForecastDojoClient`): synchronous; ``reset(**options)`` and ``step(action)`` return an
OpenEnv ``StepResult`` with ``.observation``, ``.reward`` and ``.done``. :class:`RemoteForecastEnv`
makes a server look like the env to :class:`~forecast_dojo.training.grpo.ForecastStepEnv`, so
:func:`remote_environment_factory` gives TRL's ``GRPOTrainer`` rollouts that run on one or several
servers (the multi-machine story), with the GRPO adapter's penalties for invalid or missing forecasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import socket
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
    WSErrorCode,
)
from openenv.core.utils import convert_to_ws_url
from pydantic import Field, model_validator

from forecast_dojo._version import __version__
from forecast_dojo.actions import parse_action
from forecast_dojo.errors import CapacityError, ConfigError, ServeError, SessionClosedError
from forecast_dojo.integrations.envpool import EnvPool
from forecast_dojo.integrations.wsclient import BlockingWebSocket
from forecast_dojo.training.grpo import ForecastStepEnv, _prompt_messages
from forecast_dojo.training.rewards import step_reward

log = logging.getLogger(__name__)

# The step info a served observation carries (for the trainer; the model never sees it). Left out on purpose:
# ``n_steps`` (the episode length), ``record`` (it holds the outcome), ``n_visible``.
INFO_KEYS = (
    "event_id",
    "step",
    "turn",
    "tool_calls_used",
    "budget_spent",
    "step_ended",
    "finished_step",
    "cutoff",
    "forecast",
    "valid",
    "flags",
    "scores",
    "logged",
    "log_error",
)
SESSION_CLOSED = "This session was closed by the server"
FACTS_ROUTE = "/forecast_dojo"
TIMINGS_ROUTE = "/forecast_dojo/timings"
# uvicorn's WebSocket settings: large observations pass; no per-message deflate (observations are a few KB
# of text, and compressing each one cost the server and the client about 0.4 ms per step: benchmarks/serve.py).
WS_OPTIONS: dict[str, Any] = {"ws_max_size": 64 * 1024 * 1024, "ws_per_message_deflate": False}
# What a request's time is split into (server side, ``--timings``): see :class:`RequestTimings`.
TIMING_PHASES = ("handler", "queue", "call", "env", "resume")
BUILD_PHASE = (
    "build"  # a session's env built inside its first reset (part of ``call``; only requests that build)
)
TIMING_WINDOW = 100_000  # samples per phase kept for the percentiles
# Envs a server keeps built ahead of new sessions (``--warm``): a trainer's burst of rollouts at once takes
# them; each holds ~20 KB of its own on the synthetic world (the corpus and its index are shared).
DEFAULT_WARM = 4


class RequestTimings:
    """Server-side timing of every WebSocket request (``forecast-dojo serve --timings``), in seconds.

    Phases: ``handler`` (the request's message received -> its answer sent, what the server adds to a
    round trip), ``queue`` (handed to the session's thread -> that thread starts it: waiting for a CPU
    and the GIL), ``call`` (the session thread's work: ``env.step`` / ``env.reset`` and building the
    observation), ``env`` (``env.step`` / ``env.reset`` alone), ``resume`` (the call returned -> the event
    loop takes the answer up again). What the handler spends besides queue, call and resume is the
    protocol's: parsing and validating the message, serializing the answer, the WebSocket send.
    ``build`` (:data:`BUILD_PHASE`) is recorded only by a request that built its session's env (a first
    reset that found no pre-built env): that time is part of its ``call``.
    """

    def __init__(self, window: int = TIMING_WINDOW) -> None:
        self._lock = threading.Lock()
        # counts and totals are exact; the percentiles read the last ``window`` samples (a long-lived
        # server's memory stays bounded)
        phases = (*TIMING_PHASES, BUILD_PHASE)
        self._samples: dict[str, deque[float]] = {phase: deque(maxlen=window) for phase in phases}
        self._counts = dict.fromkeys(phases, 0)
        self._totals = dict.fromkeys(phases, 0.0)

    def add(self, phase: str, seconds: float) -> None:
        """Record one request's time in ``phase``."""
        with self._lock:
            self._samples[phase].append(seconds)
            self._counts[phase] += 1
            self._totals[phase] += seconds

    def clear(self) -> None:
        """Forget what was recorded."""
        with self._lock:
            for phase, samples in self._samples.items():
                samples.clear()
                self._counts[phase] = 0
                self._totals[phase] = 0.0

    def summary(self) -> dict[str, dict[str, float]]:
        """Per phase: ``count``, ``total_s``, ``mean_ms`` (all requests), ``p50_ms``, ``p95_ms`` (the last ``window``)."""
        with self._lock:
            samples = {phase: sorted(values) for phase, values in self._samples.items()}
            counts, totals = dict(self._counts), dict(self._totals)
        out: dict[str, dict[str, float]] = {}
        for phase, values in samples.items():
            n, total = counts[phase], totals[phase]
            out[phase] = {
                "count": n,
                "total_s": total,
                "mean_ms": total / n * 1000 if n else 0.0,
                "p50_ms": values[len(values) // 2] * 1000 if values else 0.0,
                "p95_ms": values[min(len(values) - 1, int(0.95 * len(values)))] * 1000 if values else 0.0,
            }
        return out


class _TimingMiddleware:
    """ASGI middleware: each WebSocket message received -> the next message sent is one request's ``handler`` time."""

    def __init__(self, app: Any, timings: RequestTimings) -> None:
        self.app = app
        self.timings = timings

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        received: float | None = None

        async def timed_receive() -> Any:
            nonlocal received
            message = await receive()
            if message.get("type") == "websocket.receive":
                received = time.perf_counter()
            return message

        async def timed_send(message: Any) -> None:
            nonlocal received
            await send(message)
            if message.get("type") == "websocket.send" and received is not None:
                self.timings.add("handler", time.perf_counter() - received)
                received = None

        await self.app(scope, timed_receive, timed_send)


class _QuietDisconnectMiddleware:
    """ASGI middleware: a WebSocket session whose client vanished ends quietly, not as "Exception in ASGI application".

    When a client disconnects while its request runs (a trainer killed mid-rollout: many at once),
    OpenEnv's handler fails sending the answer, then fails again sending an error about that, and the
    error escapes to uvicorn, which logs a traceback. The session is closed either way (the handler's
    ``finally``); an error raised after the client is known to be gone (a ``websocket.disconnect``
    received, or a send that failed) is logged at debug level. Errors while the client is there still
    propagate.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        gone = False

        async def watched_receive() -> Any:
            nonlocal gone
            message = await receive()
            if message.get("type") == "websocket.disconnect":
                gone = True
            return message

        async def watched_send(message: Any) -> None:
            nonlocal gone
            try:
                await send(message)
            except Exception:
                gone = True
                raise

        try:
            await self.app(scope, watched_receive, watched_send)
        except Exception as err:
            if not gone:
                raise
            log.debug("a client left during its request; its session was closed (%r)", err)


class ForecastAction(Action):
    """One assistant turn, as ``env.step`` takes it: an OpenAI chat message dict, or text with ``<tool_call>`` blocks.

    Any JSON value is accepted: a payload that is not ``{"message": ...}`` is itself the turn (a bare
    assistant message dict works), and whatever it holds reaches ``env.step``, which never raises on it.
    """

    message: Any = Field(
        ...,  # required in the schema, so schema-driven clients (verifiers' OpenEnv taskset) send text as the turn
        description="the assistant turn: a chat message dict or text with <tool_call> blocks",
    )

    @model_validator(mode="before")
    @classmethod
    def _as_turn(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and "message" in data
            and set(data) <= {"message", "metadata"}
            and isinstance(data.get("metadata", {}), dict)
        ):
            return data
        return {"message": data}


class ForecastObservation(Observation):
    """The env's observation fields (``forecast_dojo.spaces.Observation``) plus the trainer's ``info``."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the new chat messages")
    event_id: str = ""
    step: int = 0
    forecast_date: str = ""
    question: str = ""
    outcomes: list[str] = Field(default_factory=list)
    memory: str = "none"
    budget_left: dict[str, int] = Field(default_factory=dict)
    notebook: str | None = None
    n_steps: int | None = Field(default=None, description="only with show_episode_length (ablations)")
    info: dict[str, Any] = Field(
        default_factory=dict,
        description="the step's info for the trainer (never the outcome or episode length)",
    )


def _observation(
    observation: dict[str, Any], info: dict[str, Any], reward: float | None, done: bool
) -> ForecastObservation:
    fields = {k: v for k, v in observation.items() if k in ForecastObservation.model_fields}
    return ForecastObservation(
        **fields, info={k: info[k] for k in INFO_KEYS if k in info}, reward=reward, done=done
    )


def waiting_tools(env: Any) -> frozenset[str]:
    """The env's tools whose calls may wait on something other than this process's Python code.

    ``python`` (a sandboxed subprocess, seconds) and ``search`` when its query embedder is a neural
    model (torch, which releases the GIL while it computes). Other tools (``read``, ``submit_forecast``,
    a search with the hashing or static embedder or BM25) are pure Python or short numpy over the
    loaded corpus: on the server they run on the event loop (:meth:`ServedForecastEnv.runs_inline`).
    """
    from forecast_dojo.corpus.embedders import HashingEmbedder, StaticMiniLMEmbedder

    tools = set(getattr(env, "enabled_tools", ())) & {"python", "search"}
    retriever = getattr(getattr(env, "gateway", None), "retriever", None)
    embedder = getattr(getattr(retriever, "embed_query", None), "embedder", None)
    if embedder is None or isinstance(embedder, HashingEmbedder | StaticMiniLMEmbedder):
        tools.discard("search")  # BM25, or an embedder that is a table lookup and a small matmul
    return frozenset(tools)


class ServedForecastEnv(Environment[ForecastAction, ForecastObservation, State]):
    """One session's env on the server.

    Constructing one is cheap (OpenEnv also builds throwaway instances, for ``/metadata``); the env
    itself comes, when the session opens, from the server's pool of pre-built envs (:meth:`adopt`), or
    is built then in the session's thread (:meth:`prepare`), overlapping whatever the client does
    before its first reset; failing both (or outside a session) ``make_env()`` is called at the first
    reset.

    Args:
        make_env: Builds the env (a :class:`~forecast_dojo.env.ForecastDojoEnv`).
        timings: Where ``env.step`` / ``env.reset`` times go (``--timings``; None: not timed).
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = (
        True  # one env per session, nothing shared but read-only data
    )

    def __init__(self, make_env: Callable[[], Any], timings: RequestTimings | None = None) -> None:
        super().__init__()
        self._make_env = make_env
        self._timings = timings
        self._env: Any = None  # built lazily: the server also builds throwaway instances (for /metadata)
        self._closed = False
        self._turns = 0
        self._episode_id: str | None = None
        self._waiting_tools: frozenset[str] = frozenset()  # tools whose calls may wait: see runs_inline
        self.busy = False  # inside reset/step: the idle reaper leaves the session alone

    def _install(self, env: Any) -> None:
        # _waiting_tools first: runs_inline (on the event loop) reads _env, then _waiting_tools
        self._waiting_tools = waiting_tools(env)
        self._env = env

    def adopt(self, env: Any) -> None:
        """Take a pre-built env (the server's pool) for this session; closed at once if the session is."""
        if self._closed or self._env is not None:
            env.close()
            return
        self._install(env)

    @property
    def built(self) -> bool:
        """Whether the session's env exists (its first reset then builds nothing)."""
        return self._env is not None

    def prepare(self) -> None:
        """Build the session's env now (in the session's thread, when the session opens), unless it has one.

        A failure is left for the first reset, which builds again and reports the error to the client.
        """
        if self._closed or self._env is not None:
            return
        try:
            env = self._make_env()
        except Exception as err:
            log.debug("building a session's env when it opened failed (its first reset retries): %r", err)
            return
        if self._closed:  # closed meanwhile (the client left)
            env.close()
        else:
            self._install(env)

    def _live(self) -> Any:
        if self._closed:
            raise SessionClosedError(
                f"{SESSION_CLOSED} (idle for longer than the server's --idle-timeout, or shutting down): "
                "reconnect to start a new session"
            )
        if self._env is None:
            start = time.perf_counter()
            self._install(self._make_env())
            if self._timings is not None:
                self._timings.add(BUILD_PHASE, time.perf_counter() - start)
        return self._env

    def runs_inline(self, method: str, args: Sequence[Any]) -> bool:
        """Whether this call of ``reset`` / ``step`` is short enough to run on the server's event loop.

        Short: a reset of the session's env once it is built, and a step whose turn calls none of the
        tools that may wait (:func:`waiting_tools`: ``python`` runs a subprocess; a search whose query
        embedder is a neural model runs torch). Those calls, and any call before the env is built (the
        first reset builds it), run in the session's own thread, so other sessions go on meanwhile.
        """
        if self._env is None or self._closed:
            return False
        if method == "reset":
            return True
        if method != "step" or not args or not isinstance(args[0], ForecastAction):
            return False
        if not self._waiting_tools:
            return True
        parsed = parse_action(args[0].message)  # never raises
        return not any(call.name in self._waiting_tools for call in parsed.tool_calls)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        event_id: str | None = None,
        **options: Any,
    ) -> ForecastObservation:
        """``env.reset(event_id, seed=seed, options=options)``: options ``step``, ``notebook``, ``rollout``, ...

        Raises:
            ResetError: Options the env refuses (the client gets the message).
            UnknownEventError: An event outside the served split.
        """
        self.busy = True
        try:
            env = self._live()
            options = {k: v for k, v in options.items() if v is not None}
            start = time.perf_counter()
            observation, info = env.reset(event_id, seed=seed, options=options)
            if self._timings is not None:
                self._timings.add("env", time.perf_counter() - start)
            self._turns = 0
            self._episode_id = episode_id or f"{observation['event_id']}@{observation['step']}"
            return _observation(observation, info, None, False)
        finally:
            self.busy = False

    def step(
        self, action: ForecastAction, timeout_s: float | None = None, **kwargs: Any
    ) -> ForecastObservation:
        """``env.step(action.message)``: never raises on what the turn holds.

        Raises:
            EpisodeError: A step before ``reset`` or after the episode ended (the client's mistake).
        """
        self.busy = True
        try:
            env = self._live()
            start = time.perf_counter()
            observation, reward, terminated, truncated, info = env.step(action.message)
            if self._timings is not None:
                self._timings.add("env", time.perf_counter() - start)
            self._turns += 1
            return _observation(observation, info, float(reward), bool(terminated or truncated))
        finally:
            self.busy = False

    @property
    def state(self) -> State:
        """The episode id (``event@first step``) and the turns taken since the reset."""
        return State(episode_id=self._episode_id, step_count=self._turns)

    def get_metadata(self) -> EnvironmentMetadata:
        """The server's name, description and version."""
        return EnvironmentMetadata(
            name="forecast-dojo",
            description="Replayable forecasting episodes: research with search/read, then submit_forecast",
            version=__version__,
        )

    def close(self) -> None:
        """Close the env; the session's later requests get a :class:`SessionClosedError` message."""
        self._closed = True
        if self._env is not None:
            self._env.close()


class _ForecastServer(HTTPEnvServer):
    """OpenEnv's server, with an idle reaper that checks as often as a short timeout needs and spares busy sessions.

    A new session's env comes from ``pool`` (pre-built envs, :class:`~forecast_dojo.integrations.envpool.EnvPool`)
    or is built in the session's thread as the session opens. With ``timings`` it also times each
    request's hop to the session's thread and back (:class:`RequestTimings`).
    """

    timings: RequestTimings | None = None
    inline: bool = True  # short env calls run on the event loop (ServedForecastEnv.runs_inline)
    pool: EnvPool | None = None

    async def _create_session(self) -> tuple[str, Environment]:
        session_id, env = await super()._create_session()
        pool = self.pool
        if isinstance(env, ServedForecastEnv):
            warm = pool.take() if pool is not None else None
            if warm is not None:
                env.adopt(warm)
            else:  # build it now in the session's thread: the first reset queues behind it there
                executor = self._session_executors.get(session_id, self._executor)
                asyncio.get_running_loop().run_in_executor(executor, env.prepare)  # never raises
        if pool is not None:
            pool.touch()
        return session_id, env

    async def _run_in_session_executor(
        self, session_id: str, func: Callable[..., Observation], *args: Any, **kwargs: Any
    ) -> Observation:
        pool = self.pool
        if pool is None:
            return await self._run_env_call(session_id, func, *args, **kwargs)
        pool.touch()  # the pool refills only while no env call starts or ends
        try:
            return await self._run_env_call(session_id, func, *args, **kwargs)
        finally:
            pool.touch()

    async def _run_env_call(
        self, session_id: str, func: Callable[..., Observation], *args: Any, **kwargs: Any
    ) -> Observation:
        timings = self.timings
        owner = getattr(func, "__self__", None)
        if (
            self.inline
            and isinstance(owner, ServedForecastEnv)
            and owner.runs_inline(getattr(func, "__name__", ""), args)
        ):
            # No hop to the session's thread and back: two thread wake-ups fewer per request.
            if timings is None:
                return func(*args, **kwargs)
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                timings.add("queue", 0.0)
                timings.add("call", time.perf_counter() - start)
                timings.add("resume", 0.0)
        if timings is None:
            return await super()._run_in_session_executor(session_id, func, *args, **kwargs)
        executor = self._session_executors.get(session_id, self._executor)
        marks: list[float] = []

        def call() -> Observation:
            marks.append(time.perf_counter())
            try:
                return func(*args, **kwargs)
            finally:
                marks.append(time.perf_counter())

        submitted = time.perf_counter()
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, call)
        finally:
            resumed = time.perf_counter()
            if len(marks) == 2:
                timings.add("queue", marks[0] - submitted)
                timings.add("call", marks[1] - marks[0])
                timings.add("resume", resumed - marks[1])

    async def _reap_idle_sessions(self) -> None:
        timeout = self._session_idle_timeout_s
        if timeout is None:
            return
        interval = min(max(timeout / 4, 0.05), 5.0)  # openenv's own waits at least 5 s between checks
        while True:
            try:
                await asyncio.sleep(interval)
                async with self._session_lock:
                    now = time.time()
                    stale = [
                        sid
                        for sid, info in self._session_info.items()
                        if now - info.last_activity_at > timeout
                        and not getattr(self._sessions.get(sid), "busy", False)
                    ]
                for sid in stale:
                    log.info("closing session %s: idle for more than %.1f s", sid, timeout)
                    await self._destroy_session(sid)
            except asyncio.CancelledError:
                break
            except Exception as err:  # keep reaping: one failed close must not stop the loop
                log.warning("idle-session reaper: %s", err)


def served_facts(env: Any, spec: str | None = None) -> dict[str, Any]:
    """What ``GET /forecast_dojo`` returns: the served env's configuration (no outcome).

    Episode lengths (``n_steps`` per event, for building a GRPO dataset) are listed only for a training
    split: an evaluation split's lengths would reveal early resolutions.
    """
    facts: dict[str, Any] = {
        "name": "forecast-dojo",
        "version": __version__,
        "spec": spec,
        "split": env.split,
        "memory": env.memory,
        "reward": env.reward_name,
        "prompt": env.prompt,
        "tools": list(env.enabled_tools),
        "tool_schemas": env.tool_schemas(),
        "budgets": {"max_tool_calls": env.budgets.max_tool_calls, "max_turns": env.budgets.max_turns},
        "event_ids": [e.id for e in env.events],
    }
    if env.split == "train":
        facts["n_steps"] = {e.id: e.n_steps for e in env.events}
    return facts


def create_app(
    make_env: Callable[[], Any],
    *,
    max_sessions: int = 16,
    idle_timeout_s: float | None = 600.0,
    spec: str | None = None,
    timings: bool = False,
    threaded: bool = False,
    warm: int = DEFAULT_WARM,
) -> Any:
    """The FastAPI app that serves ``make_env``'s env, one env per WebSocket session.

    Args:
        make_env: Builds one env; called once here (a bad spec fails before serving; that env is the
            pool's first) and once per session.
        max_sessions: Sessions held at once; one more gets a ``CAPACITY_REACHED`` error.
        idle_timeout_s: Close a session idle for longer (None: never).
        spec: The spec's name, reported at ``/forecast_dojo``.
        timings: Time every request on the server (:class:`RequestTimings`) and serve the summary at
            ``GET /forecast_dojo/timings`` (``DELETE`` clears it); a diagnostic for benchmarks.
        threaded: Run every env call in its session's thread. By default the short ones (a reset of a
            built env, a step that calls no tool that may wait: :meth:`ServedForecastEnv.runs_inline`)
            run on the event loop, which saves two thread hand-offs per request; each holds the loop
            for its duration (1-3 ms on the synthetic world), as it would hold the GIL in a thread.
        warm: Envs kept built ahead of new sessions (:class:`~forecast_dojo.integrations.envpool.EnvPool`,
            refilled in a background thread while the server is quiet; at most ``max_sessions``): a
            session that opens takes one, so its first reset builds nothing. 0: each session builds
            its own as it opens.

    Returns:
        The app (serve it with uvicorn: :func:`serve`, or :class:`BackgroundServer` in a thread).

    Raises:
        ConfigError: ``max_sessions < 1``, a non-positive ``idle_timeout_s`` or a negative ``warm``.
    """
    from fastapi import FastAPI

    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigError(f"max_sessions must be a positive integer, not {max_sessions!r}")
    if idle_timeout_s is not None and not idle_timeout_s > 0:
        raise ConfigError(f"idle_timeout_s must be positive (or None: never), not {idle_timeout_s!r}")
    if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
        raise ConfigError(f"warm must be a non-negative integer, not {warm!r}")
    probe = make_env()
    facts = served_facts(probe, spec)
    pool = EnvPool(
        make_env, min(warm, max_sessions), initial=[probe]
    )  # the probe is never reset: a fresh env
    recorder = RequestTimings() if timings else None
    server = _ForecastServer(
        functools.partial(ServedForecastEnv, make_env, timings=recorder),
        ForecastAction,
        ForecastObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
        ),
    )
    server.inline = not threaded
    server.pool = pool if pool.size else None
    app = FastAPI(title="forecast-dojo", version=__version__, description="forecast-dojo served over OpenEnv")
    server.register_routes(app, mode="production")  # /ws, /health, /schema, /metadata: no stateless /step

    async def start_pool() -> None:
        pool.start()

    async def stop_pool() -> None:
        await asyncio.get_running_loop().run_in_executor(None, pool.close)

    app.router.on_startup.append(start_pool)
    app.router.on_shutdown.append(stop_pool)

    @app.get(FACTS_ROUTE)
    def facts_route() -> dict[str, Any]:
        return {
            **facts,
            "active_sessions": server.active_sessions,
            "max_sessions": max_sessions,
            "warm": pool.stats(),
        }

    if recorder is not None:
        server.timings = recorder
        app.add_middleware(_TimingMiddleware, timings=recorder)

        @app.get(TIMINGS_ROUTE)
        def timings_route() -> dict[str, Any]:
            return recorder.summary()

        @app.delete(TIMINGS_ROUTE)
        def clear_timings_route() -> dict[str, Any]:
            recorder.clear()
            return {"cleared": True}

    app.add_middleware(_QuietDisconnectMiddleware)
    app.state.forecast_server = server
    return app


def serve(
    make_env: Callable[[], Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 16,
    idle_timeout_s: float | None = 600.0,
    spec: str | None = None,
    timings: bool = False,
    threaded: bool = False,
    warm: int = DEFAULT_WARM,
) -> None:
    """Serve the env with uvicorn until interrupted (what ``forecast-dojo serve`` runs).

    Args:
        make_env: Builds one env per session.
        host: The address to bind (``0.0.0.0`` to serve other machines).
        port: The port.
        max_sessions: Sessions held at once.
        idle_timeout_s: Close a session idle for longer (None: never).
        spec: The spec's name, reported at ``/forecast_dojo``.
        timings: Time every request (``GET /forecast_dojo/timings``; see :func:`create_app`).
        threaded: Run every env call in its session's thread (see :func:`create_app`).
        warm: Envs kept built ahead of new sessions (see :func:`create_app`).
    """
    import uvicorn

    app = create_app(
        make_env,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout_s,
        spec=spec,
        timings=timings,
        threaded=threaded,
        warm=warm,
    )
    print(
        f"forecast-dojo serve: {spec or 'env'} on ws://{host}:{port}/ws "
        f"(max {max_sessions} sessions, idle timeout {idle_timeout_s} s, {min(warm, max_sessions)} envs kept warm)",
        flush=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", **WS_OPTIONS)


class BackgroundServer:
    """Serve an app on ``host:port`` (0: a free port) in a daemon thread; a context manager (tests, benchmarks).

    Args:
        app: The app (:func:`create_app`).
        host: The address to bind.
        port: The port (0: any free one; :attr:`url` says which).
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.host = host
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(app, log_level="warning", **WS_OPTIONS)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            daemon=True,
            name="forecast-dojo-serve",
        )

    @property
    def url(self) -> str:
        """``http://host:port``: what :class:`ForecastDojoClient` takes."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        """Start serving; returns once the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ServeError(f"the server on {self.url} did not start", "CONNECTION")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fetch_facts(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """``GET /forecast_dojo`` of a server: its spec, split, memory mode, tools, schemas, sessions."""
    url = base_url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1) + FACTS_ROUTE
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            facts: dict[str, Any] = json.loads(response.read())
    except OSError as err:
        raise ServeError(
            f"cannot reach {url}: {err} (is `forecast-dojo serve` running there?)", "CONNECTION"
        ) from err
    return facts


def _step_payload(action: Any) -> dict[str, Any]:
    """A step message's data: ``{"message": <the turn>}`` (an openai message object as its dict)."""
    if isinstance(action, ForecastAction):
        return {"message": action.message}
    if hasattr(action, "model_dump"):  # the openai client's message object
        action = action.model_dump(mode="json", exclude_none=True)
    return {"message": action}


def _parse_result(payload: dict[str, Any]) -> StepResult[ForecastObservation]:
    reward = payload.get("reward")
    done = bool(payload.get("done", False))
    observation = ForecastObservation(**payload.get("observation", {}), reward=reward, done=done)
    return StepResult(observation=observation, reward=reward, done=done)


def _served_error(response: dict[str, Any], url: str) -> tuple[ServeError, bool]:
    """The error a server's ``error`` answer means, and whether the server closed the session with it."""
    data = response.get("data", {})
    code = str(data.get("code", "UNKNOWN"))
    text = str(data.get("message", "unknown error"))
    if code == WSErrorCode.CAPACITY_REACHED:  # the server closed it; a later call reconnects
        return CapacityError(
            f"{url}: {text} (the server's --max-sessions; retry later or add a server)", code
        ), True
    if text.startswith(SESSION_CLOSED):
        return SessionClosedError(text, code), True
    return ServeError(text, code), False


class AsyncForecastDojoClient(EnvClient[ForecastAction, ForecastObservation, State]):
    """OpenEnv's async WebSocket client for a forecast-dojo server (:class:`ForecastDojoClient` is the sync one)."""

    def _step_payload(self, action: Any) -> dict[str, Any]:
        return _step_payload(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ForecastObservation]:
        return _parse_result(payload)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)

    async def connect(self) -> AsyncForecastDojoClient:
        """Open the session's WebSocket.

        Raises:
            ServeError: No server answers at the URL.
        """
        try:
            await super().connect()
        except ConnectionError as err:
            raise ServeError(f"{err} (is `forecast-dojo serve` running there?)", "CONNECTION") from err
        return self

    async def disconnect(self) -> None:
        """End the session: ask the server to close it and let the server close the connection first."""
        ws: Any = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):  # already gone
                await ws.send(json.dumps({"type": "close"}))
                await asyncio.wait_for(ws.wait_closed(), timeout=2.0)
        await self._drop()

    async def _send(self, message: dict[str, Any]) -> None:
        await self._ensure_connected()
        assert self._ws is not None
        await self._ws.send(json.dumps(message, default=str))  # anything a model wrote is sent as text

    async def _drop(self) -> None:
        ws: Any = self._ws  # type: ignore[has-type]
        self._ws = None
        if ws is not None:
            with contextlib.suppress(Exception):  # already closed by the server
                await ws.close()

    async def _last_words(self) -> dict[str, Any] | None:
        """The message a server sent before closing the connection (None if it sent none), then drop it."""
        ws: Any = self._ws
        message: dict[str, Any] | None = None
        if ws is not None:
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), timeout=1.0))
            except Exception:  # nothing was left to read
                message = None
        await self._drop()
        return message

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        response: dict[str, Any] | None = None
        try:
            await self._send(message)
            response = await self._receive()
        except (TimeoutError, ConnectionClosed, OSError) as err:
            # A server at capacity answers the connection with an error and closes it at once: read that answer.
            response = await self._last_words()
            if response is None:
                raise ServeError(f"lost the session on {self._ws_url}: {err!r}", "CONNECTION") from err
        if response.get("type") != "error":
            return response
        error, closed = _served_error(response, self._ws_url)
        if closed:
            await self._drop()
        raise error


class ForecastDojoClient:
    """A synchronous client of ``forecast-dojo serve``: one session (one env) per client.

    It speaks OpenEnv's WebSocket protocol (``/ws``: ``reset``, ``step``, ``state`` and ``close``
    messages, as OpenEnv's ``EnvClient``), over a connection driven in the calling thread
    (:class:`~forecast_dojo.integrations.wsclient.BlockingWebSocket`): a round trip wakes no other
    thread (OpenEnv's ``SyncEnvClient`` hands every call to an event-loop thread and back). One thread
    at a time per client (calls from several threads are serialized). :class:`AsyncForecastDojoClient`
    is the asyncio one.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000`` (or ``ws://...``).
        connect_timeout_s: Seconds for the connection and the handshake.
        message_timeout_s: Seconds to wait for an answer (a ``step`` that runs python may take long).
        max_message_size_mb: The largest answer accepted.

    Example::

        with ForecastDojoClient(base_url="http://127.0.0.1:8000") as client:
            result = client.reset(event_id="syn-0006")
            while not result.done:
                result = client.step(my_policy(result.observation))  # an assistant turn
    """

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_message_size_mb: float = 100.0,
    ) -> None:
        self.base_url = base_url
        self._ws_url = f"{convert_to_ws_url(base_url)}/ws"
        self._connect_timeout = connect_timeout_s
        self._message_timeout = message_timeout_s
        self._max_message_size = int(max_message_size_mb * 1024 * 1024)
        self._ws: BlockingWebSocket | None = None
        self._lock = threading.Lock()
        self._async: AsyncForecastDojoClient | None = None

    @property
    def async_client(self) -> AsyncForecastDojoClient:
        """An asyncio client of the same server (its own connection: a separate session)."""
        if self._async is None:
            self._async = AsyncForecastDojoClient(
                self.base_url,
                connect_timeout_s=self._connect_timeout,
                message_timeout_s=self._message_timeout,
                max_message_size_mb=self._max_message_size / 1024 / 1024,
            )
        return self._async

    def connect(self) -> ForecastDojoClient:
        """Open the session's WebSocket (the first request does it too).

        Raises:
            ServeError: No server answers at the URL.
        """
        with self._lock:
            self._connect()
        return self

    def _connect(self) -> BlockingWebSocket:
        if self._ws is None:
            try:
                self._ws = BlockingWebSocket(
                    self._ws_url, open_timeout_s=self._connect_timeout, max_size=self._max_message_size
                )
            except (ConnectionError, TimeoutError) as err:
                raise ServeError(
                    f"Failed to connect to {self._ws_url}: {err} (is `forecast-dojo serve` running there?)",
                    "CONNECTION",
                ) from err
        return self._ws

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.close(timeout_s=0.0)

    def _last_words(self) -> dict[str, Any] | None:
        """The message a server sent before closing the connection (None if it sent none), then drop it."""
        ws = self._ws
        message: dict[str, Any] | None = None
        if ws is not None:
            try:
                message = json.loads(ws.recv(timeout_s=1.0))
            except Exception:  # nothing was left to read
                message = None
        self._drop()
        return message

    def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            ws = self._connect()
            response: dict[str, Any] | None = None
            try:
                ws.send(json.dumps(message, default=str))  # anything a model wrote is sent as text
                response = json.loads(ws.recv(timeout_s=self._message_timeout))
            except (TimeoutError, OSError) as err:
                # A server at capacity answers the connection with an error and closes it at once: read that
                # answer. After a timeout the connection is dropped (a late answer would answer the next call).
                response = self._last_words()
                if response is None:
                    raise ServeError(f"lost the session on {self._ws_url}: {err!r}", "CONNECTION") from err
            if response.get("type") != "error":
                return response
            error, closed = _served_error(response, self._ws_url)
            if closed:
                self._drop()
            raise error

    def reset(
        self,
        *,
        event_id: str | None = None,
        step: int | None = None,
        notebook: Any = None,
        seed: int | None = None,
        rollout: int | None = None,
        **options: Any,
    ) -> StepResult[ForecastObservation]:
        """Start an episode, as ``env.reset(event_id, seed=seed, options={step, notebook, rollout, ...})``.

        Raises:
            ServeError: The server refused (an unknown event, a bad option: the env's message).
            CapacityError: The server holds its maximum of sessions.
        """
        data = {"event_id": event_id, "step": step, "notebook": notebook, "seed": seed, "rollout": rollout}
        data.update(options)
        data = {k: v for k, v in data.items() if v is not None}
        return _parse_result(self._send_and_receive({"type": "reset", "data": data}).get("data", {}))

    def step(self, action: Any, **kwargs: Any) -> StepResult[ForecastObservation]:
        """One assistant turn (a chat message dict, text, or a :class:`ForecastAction`)."""
        message = {"type": "step", "data": _step_payload(action)}
        return _parse_result(self._send_and_receive(message).get("data", {}))

    def state(self) -> State:
        """The session's episode id and the turns taken since its reset."""
        return State(**self._send_and_receive({"type": "state"}).get("data", {}))

    def disconnect(self) -> None:
        """End the session: ask the server to close it and let the server close the connection first."""
        with self._lock:
            ws, self._ws = self._ws, None
            if ws is not None:
                with contextlib.suppress(Exception):  # already gone
                    ws.send(json.dumps({"type": "close"}))
                ws.close(timeout_s=2.0)

    def close(self) -> None:
        """Close the session (a later call opens a new one)."""
        self.disconnect()

    def facts(self) -> dict[str, Any]:
        """The server's ``/forecast_dojo`` facts (spec, split, memory, tools, schemas, sessions)."""
        return fetch_facts(self.base_url)

    def __enter__(self) -> ForecastDojoClient:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            with contextlib.suppress(Exception):
                ws._sock.close()


def observation_dict(observation: ForecastObservation) -> dict[str, Any]:
    """A served observation as the env's observation dict (``forecast_dojo.spaces.Observation``)."""
    data = observation.model_dump(exclude={"reward", "done", "metadata", "info", "n_steps"})
    if observation.n_steps is not None:
        data["n_steps"] = observation.n_steps
    return data


class RemoteForecastEnv:
    """A served env with the env's own ``reset``/``step`` signatures (what the GRPO adapter drives).

    Args:
        base_url: The server.
        **options: :class:`ForecastDojoClient` options.
    """

    def __init__(self, base_url: str, **options: Any) -> None:
        self.base_url = base_url
        self.facts = fetch_facts(base_url)
        self.memory: str = self.facts["memory"]
        self.enabled_tools: tuple[str, ...] = tuple(self.facts["tools"])
        self.split: str = self.facts["split"]
        self.outcomes: list[str] = []
        self.event: Any = None  # the outcome stays on the server
        self.client = ForecastDojoClient(base_url, **options)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The served env's tool schemas."""
        return list(self.facts["tool_schemas"])

    def reset(
        self, event_id: str | None = None, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """As ``ForecastDojoEnv.reset``: ``(observation, info)``."""
        result = self.client.reset(event_id=event_id, seed=seed, **(options or {}))
        self.outcomes = list(result.observation.outcomes)
        return observation_dict(result.observation), dict(result.observation.info)

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """As ``ForecastDojoEnv.step``: ``(observation, reward, terminated, truncated, info)``."""
        result = self.client.step(action)
        info = dict(result.observation.info)
        return (
            observation_dict(result.observation),
            float(result.reward or 0.0),
            bool(result.done),
            False,
            info,
        )

    def close(self) -> None:
        """Close the session."""
        self.client.close()


class RemoteForecastStepEnv(ForecastStepEnv):
    """:class:`~forecast_dojo.training.grpo.ForecastStepEnv` over a :class:`RemoteForecastEnv`.

    The reward is the server's proper score of the submitted forecast; an invalid or missing one gets
    uniform's score minus the adapter's penalty (:func:`~forecast_dojo.training.rewards.step_reward`):
    uniform's score is the same whatever the outcome, so the client computes it without knowing the outcome.
    """

    def get_reward(self) -> float:
        """The step's proper score (from the server); uniform's score minus a penalty if invalid or missing."""
        submission = self._submission()
        if submission.forecast is not None and self.outcome is not None:
            return float(self.outcome["scores"][self.rule])
        return step_reward(
            submission,
            0,  # any index: uniform scores the same against every outcome
            len(self.env.outcomes),
            rule=self.rule,
            invalid_penalty=self.invalid_penalty,
            missing_penalty=self.missing_penalty,
        )


class RemoteForecastStepEnvWithPython(RemoteForecastStepEnv):
    """:class:`RemoteForecastStepEnv` plus the served env's sandboxed ``python`` tool."""

    python_tool: ClassVar[bool] = True


SAME_ENV_KEYS = (
    "spec",
    "split",
    "memory",
    "reward",
    "prompt",
    "tools",
    "tool_schemas",
    "budgets",
    "event_ids",
)


def check_same_env(urls: Sequence[str]) -> dict[str, Any]:
    """The servers' facts, checked to be the same env (spec, split, memory, tools, budgets, events).

    Raises:
        ConfigError: Two servers serve different envs (their rollouts would not match the dataset's prompts).
    """
    first = fetch_facts(urls[0])
    for url in urls[1:]:
        facts = fetch_facts(url)
        differ = [k for k in SAME_ENV_KEYS if facts.get(k) != first.get(k)]
        if differ:
            raise ConfigError(
                f"{url} serves another env than {urls[0]} (differs in {differ}): serve one spec everywhere"
            )
    return first


def remote_environment_factory(
    base_urls: str | Sequence[str], *, python: bool = False, **options: Any
) -> Callable[[], ForecastStepEnv]:
    """A zero-argument factory for ``GRPOTrainer(environment_factory=...)`` whose envs live on servers.

    Each new environment opens a session on the next server in turn (round robin), so several servers
    (on several machines) share one trainer's rollouts; each server needs ``--max-sessions`` of at
    least its share of the rollouts generated at once.

    Args:
        base_urls: One server URL or several.
        python: Expose the served env's ``python`` tool (when its sandbox works there).
        **options: ``rule``, ``invalid_penalty``, ``missing_penalty`` (as the in-process adapter).

    Returns:
        The factory.
    """
    urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
    if not urls:
        raise ConfigError("remote_environment_factory needs at least one server URL")
    check_same_env(urls)
    turn = itertools.count()
    cls = RemoteForecastStepEnvWithPython if python else RemoteForecastStepEnv

    def factory() -> ForecastStepEnv:
        return cls(RemoteForecastEnv(urls[next(turn) % len(urls)]), **options)

    return factory


def build_remote_dataset(
    base_url: str,
    event_ids: Sequence[str] | None = None,
    *,
    notebooks: dict[tuple[str, int], str] | None = None,
) -> Any:
    """One GRPO row per forecast step of the server's training events, with the prompt the server shows.

    Args:
        base_url: A server of a ``train`` split (``forecast-dojo serve --split train``, the default).
        event_ids: Some of its events (default: all).
        notebooks: Carried notebooks per (event, step) (memory-on), as for ``build_grpo_dataset``.

    Returns:
        A ``datasets.Dataset`` with ``prompt``, ``event_id``, ``step``, ``notebook``, ``outcomes``.

    Raises:
        ConfigError: The server does not serve a training split, or an event it does not hold.
    """
    from datasets import Dataset

    facts = fetch_facts(base_url)
    if facts["split"] != "train" or "n_steps" not in facts:
        raise ConfigError(
            f"{base_url} serves the {facts['split']!r} split: GRPO prompts come from a training split "
            "(forecast-dojo serve --split train)"
        )
    lengths: dict[str, int] = facts["n_steps"]
    chosen = list(event_ids) if event_ids is not None else list(lengths)
    unknown = sorted(set(chosen) - set(lengths))
    if unknown:
        raise ConfigError(f"{base_url} holds no training event(s) {unknown}")
    rows = []
    with ForecastDojoClient(base_url) as client:
        for event_id in chosen:
            for step in range(lengths[event_id]):
                notebook = (notebooks or {}).get((event_id, step)) if facts["memory"] == "notebook" else None
                observation = client.reset(event_id=event_id, step=step, notebook=notebook).observation
                rows.append(
                    {
                        "prompt": _prompt_messages(observation.messages),
                        "event_id": event_id,
                        "step": step,
                        "notebook": notebook,
                        "outcomes": list(observation.outcomes),
                    }
                )
    return Dataset.from_list(rows)
