"""Gymnasium spaces for chat-shaped environments.

``gymnasium.spaces.Text`` only accepts a fixed character set (no accented letters, no curly quotes),
which real news and model output break at once; these spaces accept any Unicode text.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, TypeVar

import numpy as np
from gymnasium.spaces import Space

from forecast_dojo.messages import ChatMessage

Action = dict[str, Any] | str
"""One assistant turn: an OpenAI-style message dict, or text with ``<tool_call>`` blocks."""


class BudgetLeft(TypedDict):
    """What is left of the step's budgets: tool calls (0 once the env demands a submission) and turns."""

    tool_calls: int
    turns: int


class Observation(TypedDict):
    """What the agent sees after ``reset`` and each ``step``: everything a policy legitimately knows.

    ``messages`` are the new chat messages (a new step starts with ``[system, user]``, the prompt that
    renders the other fields for a language model); the other keys hold the same facts structured, so
    no agent needs to parse the prompt. ``notebook`` is the notebook carried into the step (JSON) in
    memory-on mode, else None. ``n_steps`` is present only when the env was built with
    ``show_episode_length=True`` (an ablation): by default nothing agent-facing says how many steps
    the episode has or which step is the last, since that schedule can reveal the outcome.
    """

    messages: list[ChatMessage]
    event_id: str
    step: int
    forecast_date: str
    question: str
    outcomes: list[str]
    memory: str
    budget_left: BudgetLeft
    notebook: str | None
    n_steps: NotRequired[int]


_V = TypeVar("_V")


class TextSpace(Space[_V]):
    """The base of these spaces: values are text or JSON-like, so not flattenable to a numpy array.

    Two spaces are equal when they are of the same class with the same :meth:`parameters`, which
    their ``repr`` also shows.
    """

    def __init__(self, seed: int | np.random.Generator | None = None, *, dtype: Any = object) -> None:
        super().__init__(dtype=dtype, seed=seed)

    def parameters(self) -> dict[str, Any]:
        """The space's parameters (none by default)."""
        return {}

    @property
    def is_np_flattenable(self) -> bool:
        """False: text cannot be flattened to a numpy array."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.parameters().items())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and other.parameters() == self.parameters()


_SAMPLE_ALPHABET = list('abcdefghijklmnopqrstuvwxyz ÀéüñçøßŁ“”‘’—…{}[]":,0123456789<>/')


class UnicodeText(TextSpace[str]):
    """Any ``str`` of at most ``max_length`` characters (or None too, when ``nullable``)."""

    def __init__(
        self,
        max_length: int = 1_000_000,
        seed: int | np.random.Generator | None = None,
        *,
        nullable: bool = False,
    ) -> None:
        self.max_length = max_length
        self.nullable = nullable
        super().__init__(seed, dtype=str)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a string of at most ``max_length`` characters (or None if nullable)."""
        if x is None:
            return self.nullable
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of up to 64 characters (accents, curly quotes, JSON punctuation)."""
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    def parameters(self) -> dict[str, Any]:
        """``max_length`` and ``nullable``."""
        return {"max_length": self.max_length, "nullable": self.nullable}


class TextList(TextSpace[list]):
    """A list of at most ``max_items`` strings (e.g. outcome labels)."""

    def __init__(
        self, max_items: int = 64, max_length: int = 10_000, seed: int | np.random.Generator | None = None
    ) -> None:
        self.max_items = max_items
        self.max_length = max_length
        super().__init__(seed)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a list of at most ``max_items`` strings of at most ``max_length`` characters."""
        return (
            isinstance(x, list)
            and len(x) <= self.max_items
            and all(isinstance(v, str) and len(v) <= self.max_length for v in x)
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[str]:
        """Two to four random labels."""
        text = UnicodeText(max_length=min(self.max_length, 64), seed=int(self.np_random.integers(2**31)))
        return [text.sample() for _ in range(int(self.np_random.integers(2, 5)))]

    def parameters(self) -> dict[str, Any]:
        """``max_items`` and ``max_length``."""
        return {"max_items": self.max_items, "max_length": self.max_length}


class ChatMessages(TextSpace[list]):
    """A list of chat messages: dicts with a ``role`` in ``roles`` and ``content`` a ``str``."""

    roles = ("system", "user", "assistant", "tool")

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a list of message dicts with a known role and string content."""
        return isinstance(x, list) and all(
            isinstance(m, dict) and m.get("role") in self.roles and isinstance(m.get("content"), str)
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        """One random user message."""
        text = UnicodeText(seed=int(self.np_random.integers(2**31)))
        return [{"role": "user", "content": text.sample()}]


class AssistantTurn(TextSpace[Any]):
    """An agent action: an OpenAI-style assistant message dict, or a string (tool calls in ``<tool_call>`` blocks).

    ``contains`` accepts both shapes; the env turns anything malformed into an error message for the agent.
    """

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a string or a dict whose ``content`` is a string or None."""
        return isinstance(x, str) or (
            isinstance(x, dict) and isinstance(x.get("content", ""), (str, type(None)))
        )

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random text, sometimes wrapped as a (usually malformed) tool call: useful for robustness checks."""
        text = UnicodeText(seed=int(self.np_random.integers(2**31))).sample()
        if self.np_random.random() < 0.5:
            return f"<tool_call>{text}</tool_call>"
        return text
