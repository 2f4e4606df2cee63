"""GRPO with TRL's ``GRPOTrainer``: one forecast step per prompt, the env's tools, the step's proper score as reward.

How the env meets TRL's ``environment_factory`` API:

* a dataset row is one forecast step: ``prompt`` (the env's own ``[system, user]`` messages for that
  state), ``event_id``, ``step``, ``notebook`` (the carried notebook in memory-on mode, or None),
  ``outcomes`` and ``outcome_index`` (for plain reward functions; never shown to the model). Every
  completion of a group starts from the identical state: :meth:`ForecastStepEnv.reset` replays the
  step with ``env.reset(event_id, options={"step", "notebook"})`` and checks that the env's prompt is
  exactly the row's prompt;
* the tools are methods generated from the env's own typed tool functions
  (:func:`forecast_dojo.tools.tool_interface`): the env's enabled tools in its memory mode (``python``
  only when the sandbox is available), with exactly the env's schemas (memory off: ``submit_forecast``
  has no ``notebook`` parameter; memory on: the notebook's structure is described), each one
  ``env.step`` with one call, so the env's budgets, validation and leakage checks all apply;
* ``submit_forecast`` ends the episode: the env moves to its next step, but its prompt is never
  returned into the rollout, and every later call is refused (and changes nothing: the reward was
  fixed at the submission);
* :meth:`ForecastStepEnv.get_reward` is the step's proper score, or uniform's score minus a penalty
  for an invalid or missing forecast (see :mod:`forecast_dojo.training.rewards`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from forecast_dojo.errors import ConfigError, DataError
from forecast_dojo.tools import tool_interface
from forecast_dojo.training.arguments import JsonObject
from forecast_dojo.training.rewards import INVALID_PENALTY, MISSING_PENALTY, Submission, step_reward

REFUSED = "Refused: this forecast step already ended with your submission. Do not call any more tools."


def _prompt_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


class ForecastStepEnv:
    """One forecast step of a :class:`~forecast_dojo.env.ForecastDojoEnv` as a TRL environment.

    TRL exposes every public method except ``reset`` and ``get_reward`` as a tool; their docstrings
    and type hints become the tool schemas. Those methods are generated from the env's tool functions
    (:func:`forecast_dojo.tools.tool_interface`) for the env's memory mode and enabled tools, so
    ``ForecastStepEnv(env)`` is an instance of a subclass made for them (:func:`step_env_class`), and
    its tools' schemas are ``env.tool_schemas()`` (without ``python``, which
    :class:`ForecastStepEnvWithPython` adds).
    """

    python_tool: ClassVar[bool] = False
    tool_names: ClassVar[tuple[str, ...]] = ()  # the generated subclass's tools

    def __new__(cls, env: Any, **options: Any) -> ForecastStepEnv:
        """An instance of the subclass whose tool methods are ``env``'s tools (:func:`step_env_class`)."""
        if not cls.__dict__.get("_generated", False):  # not yet a generated subclass: pick the one for env
            cls = step_env_class(cls, env.memory, exposed_tools(env, python=cls.python_tool))
        return super().__new__(cls)

    def __init__(
        self,
        env: Any,
        *,
        rule: str = "brier",
        invalid_penalty: float = INVALID_PENALTY,
        missing_penalty: float = MISSING_PENALTY,
    ) -> None:
        self.env = env
        self.rule = rule
        self.invalid_penalty = invalid_penalty
        self.missing_penalty = missing_penalty
        self.ended = True
        self.event: Any = None
        self.outcome: dict[str, Any] | None = None
        self.calls = 0

    def reset(
        self, event_id: str, step: int, notebook: str | None = None, prompt: Any = None, **_: Any
    ) -> None:
        """Replay forecast step ``step`` of ``event_id`` (with the carried ``notebook``); the row holds the prompt.

        Returns None: TRL renders the row's ``prompt``, which must equal the env's prompt for this state.
        """
        options: dict[str, Any] = {"step": int(step)}
        if notebook:
            options["notebook"] = json.loads(notebook) if isinstance(notebook, str) else notebook
        observation, _ = self.env.reset(event_id, options=options)
        if prompt is not None and _prompt_messages(prompt) != _prompt_messages(observation["messages"]):
            raise DataError(
                f"the dataset's prompt for {event_id!r} step {step} differs from the env's: rebuild the dataset "
                "with build_grpo_dataset for this env"
            )
        self.event = self.env.event
        self.ended = False
        self.outcome = None
        self.calls = 0
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.ended:
            return REFUSED
        self.calls += 1
        action = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ],
        }
        observation, _, _, _, info = self.env.step(action)
        if info["step_ended"]:
            # The env has moved on (its observation is the next step's prompt): none of it enters the rollout.
            self.ended = True
            self.outcome = {
                "valid": info["valid"],
                "flags": list(info["flags"]),
                "forecast": info["forecast"],
                "scores": dict(info.get("scores") or {}),  # of the recorded forecast (uniform when invalid)
            }
            if "no_submission" in info["flags"]:
                return "The step ended without a forecast (budget spent). Do not call any more tools."
            if not info["valid"]:
                return "Invalid forecast: the uniform distribution was recorded. The step is over."
            return "Forecast recorded. The step is over."
        return "\n\n".join(m["content"] for m in observation["messages"])

    def _submission(self) -> Submission:
        """What the rollout submitted: the valid forecast, or why it is missing (``missing`` / ``invalid``)."""
        if self.outcome is None or "no_submission" in self.outcome["flags"]:
            return Submission(None, "missing")
        if not self.outcome["valid"]:
            return Submission(None, "invalid")
        return Submission(tuple(self.outcome["forecast"]), None)

    def get_reward(self) -> float:
        """The step's proper score; uniform's score minus a penalty for an invalid or missing forecast."""
        event = self.event
        submission = self._submission()
        return step_reward(
            submission,
            event.outcome_index,
            len(event.outcomes),
            rule=self.rule,
            invalid_penalty=self.invalid_penalty,
            missing_penalty=self.missing_penalty,
        )


class ForecastStepEnvWithPython(ForecastStepEnv):
    """:class:`ForecastStepEnv` plus the sandboxed ``python`` tool when the env enables it (use only where the sandbox works)."""

    python_tool: ClassVar[bool] = True


def exposed_tools(env: Any, *, python: bool) -> tuple[str, ...]:
    """The env's enabled tools that a GRPO rollout gets: all of them, ``python`` only if ``python``."""
    return tuple(name for name in env.enabled_tools if python or name != "python")


def _call_tool(owner: ForecastStepEnv, name: str, arguments: dict[str, Any]) -> str:
    return owner._call(name, arguments)


_STEP_ENV_CLASSES: dict[tuple[type, str, tuple[str, ...]], type] = {}


def step_env_class(base: type[ForecastStepEnv], memory: str, tools: tuple[str, ...]) -> type[ForecastStepEnv]:
    """The subclass of ``base`` whose public methods are ``tools`` as memory mode ``memory`` shows them.

    Args:
        base: :class:`ForecastStepEnv` or :class:`ForecastStepEnvWithPython` (or a user subclass).
        memory: The env's memory mode.
        tools: The tool names, in the env's order.

    Returns:
        The class (cached: the same arguments give the same class).
    """
    cached = _STEP_ENV_CLASSES.get((base, memory, tools))
    if cached is not None:
        return cached
    methods = {name: tool_interface(name, memory).function(_call_tool) for name in tools}
    label = f"{base.__name__}[{memory}: {', '.join(tools)}]"
    namespace: dict[str, Any] = {
        "tool_names": tools,
        "_generated": True,
        "__module__": base.__module__,
        "__qualname__": label,
        "__doc__": base.__doc__,
        **methods,
    }
    generated = type(label, (base,), namespace)
    _STEP_ENV_CLASSES[(base, memory, tools)] = generated
    return generated


def grpo_tool_schemas(step_env: ForecastStepEnv) -> list[dict[str, Any]]:
    """The tool schemas TRL renders for ``step_env``: ``get_json_schema`` of each public method, as TRL lists them.

    Args:
        step_env: A :class:`ForecastStepEnv`.

    Returns:
        One schema per tool method, in the env's tool order.
    """
    from transformers.utils import get_json_schema

    names = [
        name
        for name, _ in inspect.getmembers(type(step_env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    order = {name: i for i, name in enumerate(step_env.env.enabled_tools)}
    return [get_json_schema(getattr(step_env, name)) for name in sorted(names, key=order.__getitem__)]


def environment_factory(
    make_env: Callable[[], Any], *, python: bool | None = None, **options: Any
) -> Callable[[], ForecastStepEnv]:
    """A zero-argument factory of :class:`ForecastStepEnv` for ``GRPOTrainer(environment_factory=...)``.

    Args:
        make_env: builds the underlying env (same events, memory mode and tools as the dataset's).
        python: expose the python tool; default: when ``forecast_dojo.sandbox`` reports a working sandbox.
        **options: ``rule``, ``invalid_penalty``, ``missing_penalty``.

    Returns:
        The factory.
    """
    if python is None:
        from forecast_dojo.sandbox import sandbox_available

        python = sandbox_available()[0]
    cls = ForecastStepEnvWithPython if python else ForecastStepEnv

    def factory() -> ForecastStepEnv:
        return cls(make_env(), **options)

    return factory


def notebooks_from_logs(logs: Iterable[str | Path], prompt: str | None = None) -> dict[tuple[str, int], str]:
    """The notebook each logged step started from, per (event, step) (the first log wins).

    Args:
        logs: run directories or folders of them.
        prompt: the env's prompt profile: a log of another profile is refused (never a mix).
    """
    from forecast_dojo.trajectory import find_run_dirs, load_records

    notebooks: dict[tuple[str, int], str] = {}
    for run_dir in find_run_dirs(logs):
        for record in load_records(run_dir):
            if prompt is not None and record.prompt != prompt:
                raise ConfigError(
                    f"{run_dir}: logged with the {record.prompt!r} prompt profile, the env uses {prompt!r}: "
                    "seed GRPO prompts from logs of the same profile"
                )
            if record.memory == "notebook" and record.notebook_in:
                notebooks.setdefault((record.event_id, record.step), record.notebook_in)
    return notebooks


def build_grpo_dataset(
    env: Any,
    event_ids: Sequence[str],
    *,
    notebooks: dict[tuple[str, int], str] | None = None,
) -> Any:
    """One row per forecast step of ``event_ids``, with the prompt the env shows in that state.

    Args:
        env: the env the trainer's environments replicate (same memory mode).
        event_ids: training events only (see ``forecast_dojo.synthetic.split``).
        notebooks: carried notebooks per (event, step), e.g. :func:`notebooks_from_logs` of a teacher's
            memory-on log; steps without one start with no notebook.

    Returns:
        A ``datasets.Dataset`` with ``prompt``, ``event_id``, ``step``, ``notebook``, ``outcomes``,
        ``outcome_index``.
    """
    from datasets import Dataset

    rows = []
    for event_id in event_ids:
        event = next(e for e in env.events if e.id == event_id)
        for step in range(event.n_steps):
            notebook = (notebooks or {}).get((event_id, step)) if env.memory == "notebook" else None
            options: dict[str, Any] = {"step": step}
            if notebook:
                options["notebook"] = json.loads(notebook)
            observation, _ = env.reset(event_id, options=options)
            rows.append(
                {
                    "prompt": _prompt_messages(observation["messages"]),
                    "event_id": event_id,
                    "step": step,
                    "notebook": notebook,
                    "outcomes": list(event.outcomes),
                    "outcome_index": event.outcome_index,
                }
            )
    return Dataset.from_list(rows)


def set_response_template(tokenizer: Any) -> Any:
    """Tell ``tokenizer.parse_response`` how :data:`TOOL_CHAT_TEMPLATE` writes a reply (ChatML + ``<tool_call>``).

    TRL parses tool calls out of generated text with it; it recognizes only stock templates.
    """
    from trl.chat_template_utils import qwen3_template

    tokenizer.response_template = dict(
        qwen3_template
    )  # same wire format: <tool_call>{json}</tool_call>, <|im_end|>
    return tokenizer


@dataclass
class GRPOArguments:
    """Arguments of a GRPO run (CPU-sized defaults; see docs/training.md for a GPU recipe).

    Attributes:
        model: ``"smollm2"``, an HF model id or a checkpoint (e.g. an SFT output).
        spec: the environment (a shipped spec name, a gym id or a ``.toml`` path): its training split gives
            the prompts, its prompt profile, budgets, tools and world (e.g. ``train_events``) the rollouts.
        output_dir: where the checkpoint goes.
        memory: the env's memory mode.
        prompt: the env's prompt profile (``default`` or ``compact``; empty: the spec's); ``notebook_logs``
            must match it.
        events: training event ids (default: the synthetic world's training split).
        notebook_logs: memory-on logs whose carried notebooks seed the prompts.
        max_steps: optimizer steps.
        num_generations: completions per prompt (the group).
        per_device_train_batch_size: completions per device batch (a multiple of ``num_generations``).
        max_completion_length: tokens per rollout, tool results included.
        max_tool_calling_iterations: tool rounds per rollout.
        learning_rate: the learning rate.
        temperature: sampling temperature.
        rule: the proper score used as reward.
        invalid_penalty: subtracted from uniform's score for an invalid forecast.
        missing_penalty: subtracted from uniform's score when nothing was submitted.
        python: expose the python tool (None: when the sandbox works).
        embedder: the synthetic world's embedder (empty: the spec's).
        seed: the seed.
        use_vllm: generate with vLLM (GPU).
        use_cpu: force the CPU.
        extra: further ``GRPOConfig`` fields.
    """

    model: str = "smollm2"
    spec: str = "Synthetic-v0"
    output_dir: str = "grpo-out"
    memory: str = "none"
    prompt: str = ""
    events: list[str] = field(default_factory=list)
    notebook_logs: list[str] = field(default_factory=list)
    max_steps: int = 10
    num_generations: int = 4
    per_device_train_batch_size: int = 4
    max_completion_length: int = 512
    max_tool_calling_iterations: int = 4
    learning_rate: float = 1e-6
    temperature: float = 1.0
    rule: str = "brier"
    invalid_penalty: float = INVALID_PENALTY
    missing_penalty: float = MISSING_PENALTY
    python: bool | None = None
    embedder: str = ""
    seed: int = 0
    use_vllm: bool = False
    use_cpu: bool = False
    extra: JsonObject = field(default_factory=JsonObject)


def grpo_config(args: GRPOArguments) -> Any:
    """The ``trl.GRPOConfig`` these arguments describe."""
    import torch
    from trl import GRPOConfig

    options: dict[str, Any] = {
        "output_dir": str(Path(args.output_dir) / "trainer"),
        "max_steps": args.max_steps,
        "num_generations": args.num_generations,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "max_completion_length": args.max_completion_length,
        "max_tool_calling_iterations": args.max_tool_calling_iterations,
        "learning_rate": args.learning_rate,
        "temperature": args.temperature,
        "bf16": False,
        "gradient_checkpointing": False,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "seed": args.seed,
        "use_vllm": args.use_vllm,
        "use_cpu": args.use_cpu or not torch.cuda.is_available(),
    }
    options.update(args.extra)  # e.g. {"bf16": true}: extra overrides the defaults above
    return GRPOConfig(**options)


def train_grpo(
    args: GRPOArguments,
    *,
    make_env: Callable[[], Any] | None = None,
    model: Any = None,
    tokenizer: Any = None,
) -> Path:
    """Run GRPO on forecast steps of training events and save a playable checkpoint.

    Args:
        args: the run's arguments.
        make_env: builds the env (default: the synthetic world, ``args.memory``, no logging).
        model: an already loaded model (default ``load_model(args.model)``).
        tokenizer: its tokenizer (default ``load_tokenizer(args.model)``).

    Returns:
        The checkpoint directory (with ``grpo_run.json``: arguments, steps, rewards, wall time).
    """
    from trl import GRPOTrainer

    from forecast_dojo.agents.llm import load_model, load_tokenizer
    from forecast_dojo.training.checkpoint import train_and_save

    from_spec = make_env is None
    if make_env is None:
        from forecast_dojo.registration import make

        overrides = {"embedder": args.embedder} if args.embedder else {}
        if args.prompt:
            overrides["prompt"] = args.prompt

        def make_env() -> Any:
            return make(args.spec, memory=args.memory, split="train", **overrides)

    env = make_env()
    events = list(args.events)
    if from_spec:
        # the env holds the spec's training split only: any other event is refused by name
        outside = sorted(set(events) - {e.id for e in env.events})
        if outside:
            raise ConfigError(
                f"refusing events outside the training split of {args.spec} (held-out or unknown): {outside}"
            )
    if not events:
        events = [e.id for e in env.events]
    prompt = getattr(env, "prompt", "default")
    notebooks = notebooks_from_logs(args.notebook_logs, prompt) if args.notebook_logs else None
    dataset = build_grpo_dataset(env, events, notebooks=notebooks)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(args.model)
    set_response_template(tokenizer)
    tokenizer.padding_side = "left"
    model = model if model is not None else load_model(args.model)
    factory = environment_factory(
        make_env,
        python=args.python,
        rule=args.rule,
        invalid_penalty=args.invalid_penalty,
        missing_penalty=args.missing_penalty,
    )
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(args),
        train_dataset=dataset,
        processing_class=tokenizer,
        # TRL's protocol types reset as `reset(**kwargs)`; it calls it with the row's columns as keywords,
        # which ForecastStepEnv.reset names explicitly.
        environment_factory=factory,  # type: ignore[arg-type]
    )
    return train_and_save(trainer, tokenizer, args, "grpo_run.json", prompts=len(dataset))
