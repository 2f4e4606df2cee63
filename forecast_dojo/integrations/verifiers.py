"""forecast-dojo as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ environment (verifiers 0.4, v1 API).

``load_environment(**kwargs)`` returns a ``verifiers.v1.Env``:

- **Rows**: its taskset (:class:`ForecastDojoTaskset`) holds one task per (event, forecast step) of the
  env's **training** split, each with the prompt the env shows at that step (the system prompt and
  the question, exactly ``env.reset(event_id, options={"step": step})``'s messages; no outcome).
- **Episode** (:meth:`ForecastDojoVerifiersEnv.run`): the env plays the user. The agent's reply is
  the assistant turn ``env.step`` takes (the env's tools, ``search``/``read``/``submit_forecast``, are
  called with the ``<tool_call>`` blocks its prompt describes); the env's answer (tool output, a budget
  notice, an error message for a malformed reply) is the next user turn, until the step ends.
- **Reward** (``proper_score`` on the trace): the step's proper score of the submitted forecast; an
  invalid or missing forecast gets uniform's score minus the GRPO adapter's penalty
  (:func:`forecast_dojo.training.rewards.step_reward`, the same function and the same defaults).

verifiers resolves tasksets by importable top-level module names, so the taskset is also registered
as the module ``forecast_dojo_verifiers`` (:data:`TASKSET_ID`) once this module is imported.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from forecast_dojo.errors import ConfigError
from forecast_dojo.training.rewards import INVALID_PENALTY, MISSING_PENALTY, Submission, step_reward

TASKSET_ID = "forecast_dojo_verifiers"
REWARD_NAME = "proper_score"


class ForecastStepData(vf.TaskData):
    """One forecast step of a training event: where the env resets (the outcome stays in the env)."""

    event_id: str
    step: int
    outcomes: list[str]
    notebook: str | None = None


class ForecastStepTask(vf.Task[ForecastStepData]):
    """One forecast step as a verifiers task."""


class ForecastDojoTasksetConfig(vf.TasksetConfig):
    """The taskset's configuration: which env (a spec and its overrides) and which of its training events."""

    id: str = TASKSET_ID
    spec: str = "Synthetic-v0"
    events: list[str] = Field(default_factory=list)
    env_kwargs: dict[str, Any] = Field(default_factory=dict)


def _spec_env_factory(config: ForecastDojoTasksetConfig) -> Callable[[], Any]:
    from forecast_dojo.registration import make

    def make_env() -> Any:
        return make(config.spec, **{"split": "train", **config.env_kwargs})

    return make_env


class ForecastDojoTaskset(vf.Taskset[ForecastStepTask, ForecastDojoTasksetConfig]):
    """One task per (event, forecast step) of the env's training split."""

    make_env: Callable[[], Any] | None = None  # set by load_environment; default: the config's spec

    def env_factory(self) -> Callable[[], Any]:
        """The zero-argument env factory (the one ``load_environment`` was given, else the config's spec)."""
        return self.make_env or _spec_env_factory(self.config)

    def load(self) -> Iterator[ForecastStepTask]:
        """The tasks, with the prompt the env shows at each step.

        Raises:
            ConfigError: The env does not hold a training split, or an event outside it is asked for.
        """
        env = self.env_factory()()
        try:
            if env.split != "train":
                raise ConfigError(
                    f"the verifiers environment trains on the training split; this env holds {env.split!r}"
                )
            held = {event.id: event for event in env.events}
            chosen = list(self.config.events) or list(held)
            unknown = sorted(set(chosen) - set(held))
            if unknown:
                raise ConfigError(f"no training event(s) {unknown} in this env (its split holds {len(held)})")
            for event_id in chosen:
                for step in range(held[event_id].n_steps):
                    observation, _ = env.reset(event_id, options={"step": step})
                    messages = observation["messages"]
                    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
                    prompt = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
                    data = ForecastStepData(
                        id=f"{event_id}@{step}",
                        name=f"{event_id}@{step}",
                        prompt=prompt,
                        system_prompt=system or None,
                        event_id=event_id,
                        step=step,
                        outcomes=list(observation["outcomes"]),
                    )
                    yield ForecastStepTask(data, self.config.task)
        finally:
            env.close()


class ForecastDojoEnvConfig(vf.EnvConfig):
    """The environment's configuration: the taskset, the one ``player`` seat, and the reward's rule and penalties."""

    taskset: ForecastDojoTasksetConfig = ForecastDojoTasksetConfig()
    player: vf.AgentConfig = vf.AgentConfig()
    rule: str = "brier"
    invalid_penalty: float = INVALID_PENALTY
    missing_penalty: float = MISSING_PENALTY


def submission_of(info: dict[str, Any] | None) -> Submission:
    """What a step submitted, from the env's info when the step ended (None: it never ended)."""
    if info is None or "no_submission" in info["flags"]:
        return Submission(None, "missing")
    if not info["valid"]:
        return Submission(None, "invalid")
    return Submission(tuple(info["forecast"]), None)


def assistant_turn(segment: Any) -> Any:
    """A segment's reply as ``env.step`` takes it: the text, or the OpenAI message when it holds native tool calls."""
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            if not message.tool_calls:
                break
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
            return {"role": "assistant", "content": message.content or "", "tool_calls": calls}
    return segment.last_reply


def _user_turn(observation: dict[str, Any]) -> str:
    return "\n\n".join(str(m.get("content") or "") for m in observation["messages"])


class ForecastDojoVerifiersEnv(vf.Env[ForecastDojoEnvConfig]):
    """A forecast step per episode: the env answers each reply until the step ends; the reward is its proper score."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        """Play one forecast step: the ``player`` seat's replies are ``env.step``'s assistant turns."""
        data: Any = task.data
        taskset: Any = self.taskset
        env = await asyncio.to_thread(taskset.env_factory())
        try:
            options: dict[str, Any] = {"step": int(data.step)}
            if data.notebook:
                options["notebook"] = json.loads(data.notebook)
            await asyncio.to_thread(env.reset, data.event_id, options=options)
            event = env.event
            ended: dict[str, Any] | None = None
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # a prompted task: the player speaks first
                while not segment.terminated:
                    observation, _, _, _, info = await asyncio.to_thread(env.step, assistant_turn(segment))
                    if info["step_ended"]:
                        ended = info
                        break
                    segment = await interaction.turn(_user_turn(observation))
                reward = step_reward(
                    submission_of(ended),
                    event.outcome_index,
                    len(event.outcomes),
                    rule=self.config.rule,
                    invalid_penalty=self.config.invalid_penalty,
                    missing_penalty=self.config.missing_penalty,
                )
                interaction.trace.record_reward(REWARD_NAME, reward)
        finally:
            env.close()


__all__ = ["ForecastDojoTaskset", "ForecastDojoVerifiersEnv"]
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])  # verifiers imports tasksets by top-level name


def load_environment(
    spec: str = "Synthetic-v0",
    *,
    events: list[str] | None = None,
    make_env: Callable[[], Any] | None = None,
    player: vf.AgentConfig | dict[str, Any] | None = None,
    rule: str = "brier",
    invalid_penalty: float = INVALID_PENALTY,
    missing_penalty: float = MISSING_PENALTY,
    **env_kwargs: Any,
) -> ForecastDojoVerifiersEnv:
    """The verifiers environment of a spec's training split (what ``vf`` / prime-rl load by name).

    Args:
        spec: The env spec (a shipped name, a gym id or a .toml path); its training split is used.
        events: Some of its training events (default: all).
        make_env: Build the env yourself instead (it must hold a ``train`` split); overrides ``spec``.
        player: The seat's verifiers ``AgentConfig`` (model, client, harness, runtime); default: the
            chat-only ``null`` harness (the env's tools are called in the reply text).
        rule: The proper score (``brier`` or ``log``), as the GRPO adapter.
        invalid_penalty: Subtracted from uniform's score for an invalid forecast.
        missing_penalty: Subtracted from uniform's score when nothing was submitted.
        **env_kwargs: Overrides for ``forecast_dojo.make(spec, ...)`` (memory, embedder, budgets, ...).

    Returns:
        The environment; ``env.taskset`` iterates its tasks.
    """
    taskset = ForecastDojoTasksetConfig(spec=spec, events=list(events or []), env_kwargs=env_kwargs)
    config = ForecastDojoEnvConfig(
        taskset=taskset,
        player=player
        if isinstance(player, vf.AgentConfig)
        else vf.AgentConfig.model_validate(player or {"harness": {"id": "null"}}),
        rule=rule,
        invalid_penalty=invalid_penalty,
        missing_penalty=missing_penalty,
    )
    environment = ForecastDojoVerifiersEnv(config)
    if make_env is not None:
        environment.taskset.make_env = make_env
    return environment
