"""Per-step limits of an environment: how many tool calls and turns an agent has before it must submit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budgets:
    """Per-step limits. A research turn is one ``env.step`` call; tool calls count every call but the submission."""

    max_tool_calls: int = 8
    max_turns: int = 10

    def __post_init__(self) -> None:
        if self.max_tool_calls < 0 or self.max_turns < 1:
            raise ValueError("budgets need max_tool_calls >= 0 and max_turns >= 1")
