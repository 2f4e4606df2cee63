"""What an agent is to this library: something that maps an observation to one assistant turn.

Agents see observations only (never the env, its info dict or rewards), which is what keeps
evaluation honest: an agent cannot peek at scores or outcomes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from forecast_dojo.messages import chat_message
from forecast_dojo.spaces import Action, Observation


@runtime_checkable
class Agent(Protocol):
    """Anything with a ``name`` and ``act(observation) -> action``."""

    name: str

    def act(self, observation: Observation) -> Action:
        """One assistant turn for the observation."""
        ...


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """One assistant message that calls one tool (OpenAI chat format)."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}],
    }


class ConversationAgent:
    """Keeps the transcript of the current forecast step and starts afresh when the step changes.

    Subclasses implement :meth:`respond`, which sees the whole step transcript.
    """

    name = "conversation"

    def __init__(self) -> None:
        self.messages: list[Mapping[str, Any]] = []
        self._position: tuple[str, int] | None = None

    def act(self, observation: Observation) -> Action:
        """Record the new messages (a new step starts a fresh transcript) and respond."""
        position = (observation["event_id"], int(observation["step"]))
        if position != self._position:
            self._position = position
            self.messages = []
            self.on_new_step(observation)
        self.messages.extend(observation["messages"])
        action = self.respond(observation)
        self.messages.append(action if isinstance(action, dict) else chat_message("assistant", action))
        return action

    def on_new_step(self, observation: Observation) -> None:
        """Hook: a new forecast step (and so a fresh context) begins."""

    def respond(self, observation: Observation) -> Action:
        """The turn for the current transcript (``self.messages``); subclasses implement it."""
        raise NotImplementedError
