"""The step record: one typed, versioned record per scored forecast step.

The env builds a :class:`StepRecord` once when a step ends and hands the same object to the
trajectory log (``steps.jsonl``, one ``to_dict()`` per line) and to the caller
(``info["record"]``). Every consumer (metrics, reports, SFT export, GRPO) reads records, from memory
or with :func:`forecast_dojo.trajectory.load_records`; reference forecasters that need no env
(uniform, market, oracle) get records too, from :meth:`StepRecord.reference`.

Records are researcher-facing: they hold the outcome, the scores and the episode length, and must
never be shown to an agent. All instants are ISO 8601 UTC strings ending in ``Z``. ``wall_time_s``
is the only field that is not a function of (configuration, seed, actions); :meth:`StepRecord.same_as`
and :meth:`StepRecord.deterministic_dict` leave it out.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.errors import RecordFormatError as RecordFormatError
from forecast_dojo.messages import ChatMessage
from forecast_dojo.schema import Event
from forecast_dojo.scoring import all_scores
from forecast_dojo.timeutil import iso

STEP_RECORD_VERSION = 2
"""Version 1: the untyped dicts written before records existed (no ``format_version`` key).
Version 2 adds ``format_version``, ``rollout``, ``agent``, ``source`` and ``wall_time_s``."""

NON_DETERMINISTIC_FIELDS = ("wall_time_s",)


def spent_tokens(tokens: Mapping[str, Any] | None) -> int:
    """The tokens a step spent: its prompt plus completion tokens (0 for counts not reported).

    A record's ``tokens`` may hold counts that are parts of these (``constrained_tokens``), so this,
    not a sum over the dict, is the one reader of a step's cost.
    """
    tokens = tokens or {}
    return int(tokens.get("prompt_tokens") or 0) + int(tokens.get("completion_tokens") or 0)


@dataclass(frozen=True, kw_only=True)
class ToolCallRecord:
    """One tool call of a step as the log keeps it.

    Attributes:
        id: The call id (tool messages refer to it).
        name: The tool name as the agent wrote it.
        arguments: The arguments, decoded to a dict when they were a JSON object, else as sent.
        result: The first characters of what the tool returned (the full text is in ``messages``).
        doc_ids: Documents the call exposed (search hits, the document read).
        error: The error shown to the agent, or None.
    """

    id: str
    name: str
    arguments: Any
    result: str
    doc_ids: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return {
            "id": self.id,
            "name": self.name,
            "arguments": copy.deepcopy(self.arguments),
            "result": self.result,
            "doc_ids": list(self.doc_ids),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallRecord:
        """Read the form written by :meth:`to_dict`."""
        return cls(
            id=data["id"],
            name=data["name"],
            arguments=data.get("arguments"),
            result=data.get("result") or "",
            doc_ids=list(data.get("doc_ids") or []),
            error=data.get("error"),
        )


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """Everything about one scored forecast step (see the module docstring and ``notes``: field list).

    Attributes:
        format_version: :data:`STEP_RECORD_VERSION` for records built by this version.
        run_id: The run the step belongs to (deterministic from the env configuration), or None.
        event_id: The event.
        rollout: Index of this attempt at (event, step) within the run (several rollouts per step for GRPO).
        step: The forecast step (0-based).
        n_steps: How many forecast steps the event has (researcher-facing; agents do not see it).
        cutoff: The step's cutoff instant (ISO 8601 UTC, ``Z``): documents available strictly before it are visible.
        forecast_date: The cutoff's date (``YYYY-MM-DD``).
        agent: The agent's name where known (``run_metadata["agent"]`` or the reference forecaster's name).
        source: The event's source (e.g. ``forecastbench:manifold``, ``synthetic``).
        memory: ``none`` or ``notebook``; None for a reference forecast that no env produced.
        prompt: The prompt profile the step was played in (``default`` or ``compact``; logs written
            before profiles existed read as ``default``).
        messages: The step's whole transcript (system, prompt, turns, tool results).
        tools: The OpenAI tool schemas the agent was offered.
        tool_calls: Every call of the step, in order.
        notebook_in: The notebook carried into the step (JSON), or None.
        notebook_out: The notebook submitted with the forecast (JSON), or None.
        outcomes: The outcome labels, in order.
        forecast: The scored distribution (the uniform one when the agent's was missing or invalid).
        valid: Whether the agent's own forecast was valid and scored.
        flags: ``invalid_forecast``, ``no_submission``, ``no_notebook``.
        forecast_error: Why a submitted forecast was invalid, or None.
        rationale: The rationale passed to ``submit_forecast``, or None.
        scores: ``brier`` (negative loss), ``log``, ``spherical``: higher is better.
        reward: The env's reward for the step (one of ``scores``).
        outcome: The realized label.
        outcome_index: Its index in ``outcomes``.
        market: The market's probabilities at or before the cutoff, or None.
        budgets: ``max_tool_calls``, ``max_turns``, ``tool_calls_used``, ``turns_used`` (None for references).
        tokens: ``prompt_tokens`` and ``completion_tokens`` summed over the step's turns (None where unknown);
            for an agent decoded under a constraint (``--local-constrain-labels``) also
            ``constrained_tokens``: of the completion tokens, those the constraint chose over the
            model's own first choice (0: the model's reply as it would have written it). Read the
            tokens spent with :func:`spent_tokens`, never by summing the dict.
        n_visible: How many corpus documents were visible at the cutoff (None for references).
        wall_time_s: Seconds from the step's start to its end (the only non-deterministic field).
    """

    format_version: int = STEP_RECORD_VERSION
    run_id: str | None = None
    event_id: str
    rollout: int = 0
    step: int
    n_steps: int
    cutoff: str
    forecast_date: str
    agent: str | None = None
    source: str = ""
    memory: str | None = None
    prompt: str = "default"
    messages: list[ChatMessage] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    notebook_in: str | None = None
    notebook_out: str | None = None
    outcomes: list[str]
    forecast: list[float]
    valid: bool = True
    flags: list[str] = field(default_factory=list)
    forecast_error: str | None = None
    rationale: str | None = None
    scores: dict[str, float]
    reward: float
    outcome: str
    outcome_index: int
    market: list[float] | None = None
    budgets: dict[str, int] | None = None
    tokens: dict[str, int | None] = field(
        default_factory=lambda: {"prompt_tokens": None, "completion_tokens": None}
    )
    n_visible: int | None = None
    wall_time_s: float = 0.0

    @property
    def key(self) -> tuple[str | None, str, int, int]:
        """(run_id, event_id, step, rollout): what identifies a record within a log."""
        return (self.run_id, self.event_id, self.step, self.rollout)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form written to ``steps.jsonl`` (every field, in declaration order)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            value = [call.to_dict() for call in value] if f.name == "tool_calls" else copy.deepcopy(value)
            out[f.name] = value
        return out

    def deterministic_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without the wall-clock field: equal for equal configuration, seed and actions."""
        out = self.to_dict()
        for name in NON_DETERMINISTIC_FIELDS:
            out.pop(name)
        return out

    def same_as(self, other: StepRecord) -> bool:
        """Equality that ignores ``wall_time_s``."""
        return self.deterministic_dict() == other.deterministic_dict()

    def replace(self, **changes: Any) -> StepRecord:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        """Read a record written by :meth:`to_dict` (this version) or by the untyped version-1 log.

        Args:
            data: One decoded line of ``steps.jsonl`` (or a row of ``load_steps``).

        Returns:
            The record.

        Raises:
            RecordFormatError: For an unknown version or missing required fields.
        """
        if not isinstance(data, Mapping):
            raise RecordFormatError(f"a step record must be a JSON object, not {type(data).__name__}")
        version = data.get("format_version", 1)
        if version not in (1, STEP_RECORD_VERSION):
            raise RecordFormatError(
                f"step record format version {version!r} is not supported (this library reads 1 and "
                f"{STEP_RECORD_VERSION}); upgrade forecast-dojo"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["format_version"] = STEP_RECORD_VERSION
        values["tool_calls"] = [ToolCallRecord.from_dict(c) for c in data.get("tool_calls") or []]
        if version == 1 and isinstance(values.get("cutoff"), str):
            values["cutoff"] = values["cutoff"].replace("+00:00", "Z")
        try:
            return cls(**values)
        except TypeError as err:
            raise RecordFormatError(f"not a step record ({err})") from err

    @classmethod
    def reference(
        cls,
        event: Event,
        step: int,
        forecast: Sequence[float],
        *,
        agent: str,
        reward: str = "brier",
        run_id: str | None = None,
    ) -> StepRecord:
        """The record of a forecast that no env produced (uniform, market and oracle baselines).

        Args:
            event: The event.
            step: The forecast step.
            forecast: The distribution over ``event.outcomes``.
            agent: The reference forecaster's name.
            reward: Which score is the ``reward``.
            run_id: The run it belongs to, if any.

        Returns:
            A record with no transcript, scored like an env step.
        """
        cutoff = event.cutoffs[step]
        scores = all_scores(forecast, event.outcome_index)
        market = event.market_at(cutoff)
        return cls(
            run_id=run_id,
            event_id=event.id,
            step=step,
            n_steps=event.n_steps,
            cutoff=iso(cutoff),
            forecast_date=cutoff.date().isoformat(),
            agent=agent,
            source=event.source,
            outcomes=list(event.outcomes),
            forecast=[float(p) for p in forecast],
            scores=scores,
            reward=scores[reward],
            outcome=event.outcome,
            outcome_index=event.outcome_index,
            market=list(market) if market is not None else None,
        )
