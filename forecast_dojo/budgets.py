"""Per-step limits of an environment: tool calls, turns and python wall-clock time before the agent must submit."""

from __future__ import annotations

from dataclasses import dataclass

from forecast_dojo.errors import ConfigError


@dataclass(frozen=True)
class Budgets:
    """Per-step limits. A research turn is one ``env.step`` call; tool calls count every call but the submission."""

    max_tool_calls: int = 8
    max_turns: int = 10
    # Wall-clock seconds of python (all calls together) per forecast step; each call also has its own timeout.
    max_python_seconds: float = 20.0

    def __post_init__(self) -> None:
        if self.max_tool_calls < 0 or self.max_turns < 1:
            raise ConfigError("budgets need max_tool_calls >= 0 and max_turns >= 1")
        if not (
            isinstance(self.max_python_seconds, int | float) and 0 < self.max_python_seconds < float("inf")
        ):
            raise ConfigError(
                f"max_python_seconds must be a positive number, got {self.max_python_seconds!r}"
            )
