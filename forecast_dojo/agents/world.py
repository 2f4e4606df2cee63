"""A scripted world-mode agent: researches new questions, revises its forecasts weekly, advances the day.

It reads only its observations (``open_questions``, ``forecasts``, ``budget_left`` and the tool
results in ``messages``) and weighs search snippets with the fixed-date evidence reader
(:func:`forecast_dojo.agents.scripted.favoured_outcome`): each snippet sentence that favours an
outcome counts one vote, and the forecast is the votes plus one per outcome, normalized. Free-form
questions get no forecast from it (it cannot name candidates), which scores 0 on them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from forecast_dojo.agents.base import ConversationAgent
from forecast_dojo.agents.scripted import favoured_outcome
from forecast_dojo.tools import parse_search_results

_SENTENCES = re.compile(r"(?<=[.!?])\s+")


class WorldScriptedAgent(ConversationAgent):
    """Each day: one search per question that is new or due for revision, then ``submit_forecasts`` and ``next_day``.

    Args:
        revise_every: Re-research a question every this many days it has been open.
        top_k: Search hits per question.
        name: The agent's name in logs.
    """

    def __init__(self, revise_every: int = 7, top_k: int = 5, name: str = "world-scripted") -> None:
        super().__init__()
        self.revise_every = revise_every
        self.top_k = top_k
        self.name = name
        self._queue: list[dict[str, Any]] = []
        self._pending: dict[str, dict[str, float]] = {}
        self._current: dict[str, Any] | None = None

    def on_new_step(self, observation: Any) -> None:
        """A new day: queue the questions to research (new ones, and those due for revision)."""
        standing = observation["forecasts"]
        due = [
            q
            for q in observation["open_questions"]
            if not q["free_form"]
            and (q["id"] not in standing or (q["days_open"] > 0 and q["days_open"] % self.revise_every == 0))
        ]
        self._queue = due[: observation["budget_left"]["tool_calls"]]
        self._pending = {}
        self._current = None

    def respond(self, observation: Any) -> dict[str, Any]:
        """The next call: a search, or the day's submissions and ``next_day``."""
        if self._current is not None:
            tool_texts = [m["content"] for m in observation["messages"] if m["role"] == "tool"]
            hits = parse_search_results(tool_texts[-1]) if tool_texts else None
            self._pending[self._current["id"]] = self._forecast(self._current, hits or [])
            self._current = None
        if self._queue and observation["budget_left"]["tool_calls"] > 0:
            self._current = self._queue.pop(0)
            return _message([("search", {"query": self._current["question"], "top_k": self.top_k})])
        calls: list[tuple[str, dict[str, Any]]] = []
        if self._pending:
            calls.append(("submit_forecasts", {"forecasts": self._pending}))
            self._pending = {}
        calls.append(("next_day", {}))
        return _message(calls)

    @staticmethod
    def _forecast(question: dict[str, Any], hits: list[dict[str, Any]]) -> dict[str, float]:
        outcomes = list(question["outcomes"])
        votes = [1.0] * len(outcomes)
        for hit in hits:
            for sentence in _SENTENCES.split(str(hit.get("snippet", ""))):
                index = favoured_outcome(sentence, question["question"], outcomes)
                if index is not None:
                    votes[index] += 1.0
        total = sum(votes)
        return {label: v / total for label, v in zip(outcomes, votes, strict=True)}


def _message(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"w{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }


class WorldUniformAgent(ConversationAgent):
    """The floor: the uniform forecast on every new fixed-outcome question, nothing on free-form ones, then ``next_day``."""

    name = "world-uniform"

    def respond(self, observation: Any) -> dict[str, Any]:
        """Submit uniform forecasts for the questions without one, and end the day."""
        new = {
            q["id"]: {label: 1.0 / len(q["outcomes"]) for label in q["outcomes"]}
            for q in observation["open_questions"]
            if not q["free_form"] and q["id"] not in observation["forecasts"]
        }
        calls: list[tuple[str, dict[str, Any]]] = [("submit_forecasts", {"forecasts": new})] if new else []
        return _message([*calls, ("next_day", {})])


class WorldIdleAgent(ConversationAgent):
    """Never forecasts: calls ``next_day`` every day (every question scores 0)."""

    name = "world-idle"

    def respond(self, observation: Any) -> dict[str, Any]:
        """End the day."""
        return _message([("next_day", {})])
