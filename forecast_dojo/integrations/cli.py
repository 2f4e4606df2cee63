"""``forecast-dojo serve``: the env as an OpenEnv server (see :mod:`forecast_dojo.integrations.openenv`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from forecast_dojo.arguments import Flag, add_dataclass_arguments, dataclass_from_arguments
from forecast_dojo.errors import UsageError


@dataclass(frozen=True)
class ServeArguments:
    """What ``forecast-dojo serve`` serves and how.

    Attributes:
        spec: The environment: a shipped spec name, a gym id or a .toml path.
        host: The address to bind (0.0.0.0 serves other machines).
        port: The port.
        max_sessions: Sessions (one env each) held at once; one more gets a CAPACITY_REACHED error.
        idle_timeout: Close a session idle for this many seconds (0: never).
        split: The events served: train (the default: what trainers use), eval or all.
        memory: The memory mode (empty: the spec's).
        embedder: The synthetic world's embedder (empty: the spec's).
        prompt: The prompt profile, default or compact (empty: the spec's).
        no_python: Disable the sandboxed python tool.
        timings: Time every request on the server and serve the summary at GET /forecast_dojo/timings (benchmarks).
        threaded: Run every env call in its session's thread (by default short calls run on the event loop).
        warm: Envs kept built ahead of new sessions (at most max-sessions; refilled while the server is quiet;
            about 20 KB each on the synthetic world); 0: each session builds its own as it opens.
    """

    spec: str = "Synthetic-v0"
    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 16
    idle_timeout: float = 600.0
    split: str = "train"
    memory: str = ""
    embedder: str = ""
    prompt: str = ""
    no_python: bool = False
    timings: bool = False
    threaded: bool = False
    warm: int = 4


SERVE_FLAGS = {"split": Flag(choices=("train", "eval", "all"))}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve`` command to the ``forecast-dojo`` parser."""
    parser = subparsers.add_parser(
        "serve",
        help="serve the env over OpenEnv (WebSocket sessions) for trainers on this or other machines",
        description="Serve an environment spec over OpenEnv's WebSocket protocol: one env per session, at most "
        "--max-sessions at once, idle sessions closed after --idle-timeout seconds. Clients: "
        "forecast_dojo.integrations.openenv.ForecastDojoClient, or remote_environment_factory for TRL's "
        "GRPOTrainer. Needs the serve extra (pip install 'forecast-dojo[serve]').",
    )
    add_dataclass_arguments(parser, ServeArguments, flags=SERVE_FLAGS)
    parser.set_defaults(func=serve_command)


def env_factory(args: ServeArguments) -> Any:
    """The zero-argument env factory the arguments describe."""
    from forecast_dojo.registration import make, resolve_spec

    overrides: dict[str, Any] = {"split": args.split}
    for key in ("memory", "embedder", "prompt"):
        if getattr(args, key):
            overrides[key] = getattr(args, key)
    if args.no_python:
        overrides["tools"] = tuple(t for t in resolve_spec(args.spec).tools if t != "python")
        overrides["python_runner"] = None

    def make_env() -> Any:
        return make(args.spec, **overrides)

    return make_env


def serve_command(namespace: argparse.Namespace) -> int:
    """Serve until interrupted."""
    args = dataclass_from_arguments(ServeArguments, namespace, flags=SERVE_FLAGS)
    if args.max_sessions < 1 or args.idle_timeout < 0 or not 0 <= args.port < 65536 or args.warm < 0:
        raise UsageError(
            "--max-sessions must be >= 1, --idle-timeout >= 0, --warm >= 0 and --port in [0, 65535]"
        )
    try:
        from forecast_dojo.integrations.openenv import serve
    except ModuleNotFoundError as err:
        raise UsageError(
            f"serving needs the serve extra: pip install 'forecast-dojo[serve]' ({err})"
        ) from err
    serve(
        env_factory(args),
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout or None,
        spec=args.spec,
        timings=args.timings,
        threaded=args.threaded,
        warm=args.warm,
    )
    return 0
