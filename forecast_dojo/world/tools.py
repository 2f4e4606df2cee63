"""World mode's own tools: plain typed methods with docstrings, bound to one simulated day.

``search``, ``read`` and ``python`` are the fixed-date env's tools (:class:`forecast_dojo.tools.ForecastTools`,
gated at the day's start through the same :class:`~forecast_dojo.gateway.TemporalGateway`); this module
adds ``submit_forecasts`` (partial updates of the standing forecasts), ``read_question``, ``next_day``
and, in memory mode, ``write_memory`` / ``read_memory`` (dated files only the agent writes). Their
schemas are generated from the signatures and docstrings (:func:`world_tool_schemas`), like the
fixed-date tools'. A misuse is a tool error, never an exception.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import date
from typing import Any

from forecast_dojo.errors import NotFoundError, StateError
from forecast_dojo.schema import Event
from forecast_dojo.scoring import read_free_form
from forecast_dojo.tools import ToolResult, read_probabilities, tool_schemas
from forecast_dojo.untrusted import preview
from forecast_dojo.world.calendar import Calendar
from forecast_dojo.world.spaces import MAX_MEMORY_CHARS

RESEARCH_TOOLS = ("search", "read", "python")
WORLD_TOOLS = ("read_question", "submit_forecasts", "next_day", "write_memory", "read_memory")
MEMORY_TOOLS = ("write_memory", "read_memory")
NEXT_DAY = "next_day"
MEMORY_MODES = ("none", "files")


@dataclass(eq=False)
class WorldTools:
    """The world-mode tools of one simulated day; they change the env's state held by reference.

    Attributes:
        calendar: The episode's calendar.
        day: The simulated day.
        open_questions: The questions open on the day, by id.
        standing: The standing forecasts (``{question_id: {outcome: p}}``), updated in place.
        memory: ``none`` or ``files``.
        memory_files: The agent's dated memory files, updated in place (memory mode only).
        updated: The questions whose forecast changed this day (set by the tools).
        advance: ``next_day`` was called (set by the tools).
    """

    calendar: Calendar
    day: date
    open_questions: dict[str, Event]
    standing: dict[str, dict[str, float]]
    _: KW_ONLY
    memory: str = "none"
    memory_files: dict[str, str] = field(default_factory=dict)
    updated: set[str] = field(default_factory=set, init=False)
    advance: bool = field(default=False, init=False)

    def read_question(self, question_id: str) -> ToolResult:
        """Read an open question's full text: question, outcomes, background and resolution criteria as of today.

        Args:
            question_id: The id of an open question.
        """
        event = self.open_questions.get(question_id) if isinstance(question_id, str) else None
        if event is None:
            return ToolResult("", error=f"no open question with id {preview(question_id)}")
        question, background, criteria = self.calendar.text_on(event, self.day)
        payload = {
            "id": event.id,
            "question": question,
            "outcomes": list(event.outcomes) if not event.free_form else "free-form: propose outcomes",
            "background": background,
            "resolution_criteria": criteria,
            "opened": self.calendar.span(event.id)[0].isoformat(),
        }
        return ToolResult(json.dumps(payload, ensure_ascii=False))

    def submit_forecasts(self, forecasts: dict[str, dict[str, float]]) -> ToolResult:
        """Submit or revise forecasts for any of the open questions; the others keep their standing forecasts.

        Args:
            forecasts: Question id -> {outcome: probability}. For a question with listed outcomes, give every listed outcome (they must sum to 1); for a free-form question, propose outcomes with probabilities that sum to at most 1. An empty object withdraws a question's forecast.
        """
        if not isinstance(forecasts, dict) or not forecasts:
            return ToolResult(
                "", error="forecasts must be a non-empty object {question_id: {outcome: probability}}"
            )
        recorded: list[str] = []
        problems: list[str] = []
        for question_id, value in forecasts.items():
            event = self.open_questions.get(question_id)
            if event is None:
                problems.append(f"{preview(question_id)}: not an open question")
                continue
            if isinstance(value, dict) and not value:
                self.standing.pop(question_id, None)
                self.updated.add(question_id)
                recorded.append(f"{question_id} (withdrawn)")
                continue
            if event.free_form:
                forecast, error = read_free_form(value)
            else:
                if not isinstance(value, dict):
                    forecast, error = None, "must be an object {outcome label: probability}"
                else:
                    vector, error = read_probabilities(value, event.outcomes)
                    forecast = dict(zip(event.outcomes, vector, strict=True)) if vector is not None else None
            if forecast is None:
                problems.append(f"{question_id}: {error}")
                continue
            self.standing[question_id] = forecast
            self.updated.add(question_id)
            recorded.append(question_id)
        content = "recorded: " + (", ".join(recorded) if recorded else "nothing")
        if problems:
            return ToolResult(content, error="rejected (the standing forecast stays): " + "; ".join(problems))
        return ToolResult(content)

    def next_day(self) -> ToolResult:
        """End today: your standing forecasts are scored for today and the next day begins."""
        self.advance = True
        return ToolResult("the day ends; your standing forecasts carry over")

    def write_memory(self, text: str) -> ToolResult:
        """Memory mode only: write today's memory file (it replaces what you wrote earlier today); later days see it.

        Args:
            text: What you want to remember, at most 4000 characters.
        """
        if self.memory != "files":
            return ToolResult("", error="memory is off in this environment")
        if not isinstance(text, str):
            return ToolResult("", error="text must be a string")
        if len(text) > MAX_MEMORY_CHARS:
            return ToolResult("", error=f"text is {len(text)} characters long; the cap is {MAX_MEMORY_CHARS}")
        self.memory_files[self.day.isoformat()] = text
        return ToolResult(f"memory/{self.day.isoformat()}.txt written ({len(text)} characters)")

    def read_memory(self, day: str) -> ToolResult:
        """Memory mode only: read the memory file you wrote on an earlier day.

        Args:
            day: Its date, YYYY-MM-DD.
        """
        if self.memory != "files":
            return ToolResult("", error="memory is off in this environment")
        text = self.memory_files.get(day) if isinstance(day, str) else None
        if text is None:
            written = sorted(self.memory_files)
            return ToolResult("", error=f"no memory file for {preview(day)}; you wrote: {written[-10:]}")
        return ToolResult(text)

    def functions(self) -> dict[str, Callable[..., ToolResult]]:
        """Every world tool by name, as bound methods."""
        return {name: getattr(self, name) for name in WORLD_TOOLS}


def _schema_function(name: str) -> Callable[..., Any]:
    """A stand-in with the tool's signature and docstring but no return hint (schemas describe inputs only)."""
    method = getattr(WorldTools, name)
    hints = typing.get_type_hints(method)
    hints.pop("return", None)

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise StateError(f"{name}: a schema template, not a callable tool")

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = inspect.getdoc(method)
    parameters = list(inspect.signature(method).parameters.values())[1:]
    stand_in.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    stand_in.__annotations__ = hints
    return stand_in


@functools.lru_cache(maxsize=16)
def _world_schemas_json(memory: str, research: tuple[str, ...]) -> str:
    from transformers.utils import get_json_schema

    schemas = tool_schemas("none", research) if research else []
    names = [n for n in WORLD_TOOLS if memory == "files" or n not in MEMORY_TOOLS]
    schemas += [get_json_schema(_schema_function(name)) for name in names]
    return json.dumps(schemas)


def world_tool_schemas(
    memory: str = "none", research: tuple[str, ...] = RESEARCH_TOOLS
) -> list[dict[str, Any]]:
    """OpenAI-style schemas of world mode's tools: the research tools, then the world tools (cached).

    Args:
        memory: ``none`` or ``files`` (``files`` adds ``write_memory`` and ``read_memory``).
        research: The enabled research tools, a subset of :data:`RESEARCH_TOOLS`.

    Returns:
        The schemas, generated from the tool methods' signatures and docstrings.
    """
    unknown = set(research) - set(RESEARCH_TOOLS)
    if unknown:
        raise NotFoundError(f"unknown research tools {sorted(unknown)}; known: {RESEARCH_TOOLS}")
    ordered = tuple(name for name in RESEARCH_TOOLS if name in research)
    return json.loads(_world_schemas_json(memory, ordered))
