"""Gymnasium spaces for chat-shaped environments.

``gymnasium.spaces.Text`` only accepts a fixed character set (no accented letters, no curly quotes),
which real news and model output break at once; these spaces accept any Unicode text.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

import numpy as np
from gymnasium.spaces import Space

from forecast_dojo.messages import ChatMessage

Action = dict[str, Any] | str
"""One assistant turn: an OpenAI-style message dict, or text with ``<tool_call>`` blocks."""


class Observation(TypedDict):
    """What the agent sees after ``reset`` and each ``step`` (see the env's module docstring)."""

    messages: list[ChatMessage]
    event_id: str
    forecast_date: str
    step: int
    n_steps: NotRequired[int]


_SAMPLE_ALPHABET = list('abcdefghijklmnopqrstuvwxyz ÀéüñçøßŁ“”‘’—…{}[]":,0123456789<>/')


class UnicodeText(Space[str]):
    """Any ``str`` of at most ``max_length`` characters."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None) -> None:
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class ChatMessages(Space[list]):
    """A list of chat messages: dicts with a ``role`` in ``roles`` and ``content`` a ``str``."""

    roles = ("system", "user", "assistant", "tool")

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(dtype=object, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(
            isinstance(m, dict) and m.get("role") in self.roles and isinstance(m.get("content"), str)
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        text = UnicodeText(seed=int(self.np_random.integers(2**31)))
        return [{"role": "user", "content": text.sample()}]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatMessages)


class AssistantTurn(Space[Any]):
    """An agent action: an OpenAI-style assistant message dict, or a string (tool calls in ``<tool_call>`` blocks).

    ``contains`` accepts both shapes; the env turns anything malformed into an error message for the agent.
    """

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(dtype=object, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) or (
            isinstance(x, dict) and isinstance(x.get("content", ""), (str, type(None)))
        )

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random text, sometimes wrapped as a (usually malformed) tool call: useful for robustness checks."""
        text = UnicodeText(seed=int(self.np_random.integers(2**31))).sample()
        if self.np_random.random() < 0.5:
            return f"<tool_call>{text}</tool_call>"
        return text

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssistantTurn)
