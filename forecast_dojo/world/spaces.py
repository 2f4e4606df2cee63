"""Gymnasium spaces of world mode's structured observation: open questions, standing forecasts, memory files."""

from __future__ import annotations

import math
from typing import Any, TypedDict

from forecast_dojo.messages import ChatMessage
from forecast_dojo.schema import (
    MAX_EVENT_ID_CHARS,
    MAX_FREE_FORM_OUTCOMES,
    MAX_LABEL_CHARS,
    MAX_OUTCOMES,
    MAX_QUESTION_CHARS,
)
from forecast_dojo.spaces import BudgetLeft, TextSpace, UnicodeText

MAX_OPEN_QUESTIONS = 4_096
MAX_MEMORY_CHARS = 4_000  # one day's memory file
MAX_MEMORY_FILES = 100_000


class OpenQuestion(TypedDict):
    """One open question as the agent sees it.

    ``outcomes`` lists the fixed outcome labels, or is empty for a free-form question (``free_form``
    True: the agent proposes outcomes); ``days_open`` counts the days since it opened (0 on its first).
    """

    id: str
    question: str
    outcomes: list[str]
    free_form: bool
    days_open: int


class WorldObservation(TypedDict):
    """What the agent sees in world mode (see :class:`forecast_dojo.world.WorldEnv`).

    ``event_id`` is the calendar's name and ``step`` the number of the day from the start (so
    per-step agents such as :class:`~forecast_dojo.agents.ConversationAgent` start a fresh context each
    day); nothing says how many days the calendar has.
    """

    messages: list[ChatMessage]
    event_id: str
    step: int
    day: str
    open_questions: list[OpenQuestion]
    forecasts: dict[str, dict[str, float]]
    memory: str
    memory_files: dict[str, str]
    budget_left: BudgetLeft


class OpenQuestions(TextSpace[list]):
    """A list of :class:`OpenQuestion` dicts within the events schema's size limits."""

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a list of open-question dicts with the documented keys and sizes."""
        if not isinstance(x, list) or len(x) > MAX_OPEN_QUESTIONS:
            return False
        for q in x:
            if not isinstance(q, dict) or set(q) != {"id", "question", "outcomes", "free_form", "days_open"}:
                return False
            if not (isinstance(q["id"], str) and len(q["id"]) <= MAX_EVENT_ID_CHARS):
                return False
            if not (isinstance(q["question"], str) and len(q["question"]) <= MAX_QUESTION_CHARS):
                return False
            outcomes = q["outcomes"]
            if not isinstance(outcomes, list) or len(outcomes) > MAX_OUTCOMES:
                return False
            if not all(isinstance(o, str) and len(o) <= MAX_LABEL_CHARS for o in outcomes):
                return False
            if not isinstance(q["free_form"], bool) or q["free_form"] != (not outcomes):
                return False
            if isinstance(q["days_open"], bool) or not isinstance(q["days_open"], int) or q["days_open"] < 0:
                return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> list[OpenQuestion]:
        """One or two random questions (one binary, maybe one free-form)."""
        text = UnicodeText(max_length=64, seed=int(self.np_random.integers(2**31)))
        out: list[OpenQuestion] = [
            {
                "id": "q0",
                "question": text.sample(),
                "outcomes": ["Yes", "No"],
                "free_form": False,
                "days_open": 0,
            }
        ]
        if self.np_random.random() < 0.5:
            out.append(
                {"id": "q1", "question": text.sample(), "outcomes": [], "free_form": True, "days_open": 3}
            )
        return out


class StandingForecasts(TextSpace[dict]):
    """``{question_id: {outcome: probability}}``: probabilities in [0, 1], labels within the schema's limits."""

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a mapping of question ids to label -> probability mappings."""
        if not isinstance(x, dict) or len(x) > MAX_OPEN_QUESTIONS:
            return False
        for key, forecast in x.items():
            if not (isinstance(key, str) and len(key) <= MAX_EVENT_ID_CHARS and isinstance(forecast, dict)):
                return False
            if len(forecast) > max(MAX_OUTCOMES, MAX_FREE_FORM_OUTCOMES):
                return False
            for label, p in forecast.items():
                if not (isinstance(label, str) and len(label) <= MAX_LABEL_CHARS):
                    return False
                if not isinstance(p, float) or not math.isfinite(p) or not 0.0 <= p <= 1.0:
                    return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, dict[str, float]]:
        """A random forecast for one binary question."""
        p = float(self.np_random.random())
        return {"q0": {"Yes": p, "No": 1.0 - p}}


class MemoryFiles(TextSpace[dict]):
    """``{"YYYY-MM-DD": text}``: the dated memory files the agent wrote (each at most :data:`MAX_MEMORY_CHARS`)."""

    def contains(self, x: Any) -> bool:
        """Whether ``x`` maps ISO dates to texts within the size cap."""
        return (
            isinstance(x, dict)
            and len(x) <= MAX_MEMORY_FILES
            and all(
                isinstance(k, str) and len(k) == 10 and isinstance(v, str) and len(v) <= MAX_MEMORY_CHARS
                for k, v in x.items()
            )
        )

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, str]:
        """One random file."""
        return {"2031-01-01": UnicodeText(max_length=64, seed=int(self.np_random.integers(2**31))).sample()}
