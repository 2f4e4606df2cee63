"""What the fixed-date env and the world env share about one assistant turn.

Both envs (:class:`forecast_dojo.env.ForecastDojoEnv` and :class:`forecast_dojo.world.env.WorldEnv`)
take a turn the same way: parse whatever the model wrote without raising, run its tool calls in order
until one of them ends the step (a forecast, ``next_day``), answer every call with a tool message,
log each call in the step's tool log and write each step record through a lazily opened
:class:`~forecast_dojo.trajectory.LogSink`. :class:`TurnEnv` holds that shared mechanics; each env
keeps what is its own (what ends a step, its budgets, its records and its observation).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from gymnasium import spaces

from forecast_dojo.actions import ParsedAction, ToolCall, parse_action
from forecast_dojo.corpus.retrieval import Retriever
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError, ResetError
from forecast_dojo.gateway import TemporalGateway
from forecast_dojo.messages import ChatMessage, chat_message, decoded_arguments
from forecast_dojo.records import StepRecord, ToolCallRecord
from forecast_dojo.spaces import BudgetLeft
from forecast_dojo.tools import ToolResult
from forecast_dojo.trajectory import LogOutcome, LogSink, LogWriteError, run_id_for

RESULT_SUMMARY_CHARS = 300  # how much of a tool's result a step record's tool log keeps


def tool_result_text(result: ToolResult) -> str:
    """The tool message's text: the result, or the error followed by whatever the tool returned.

    Args:
        result: A tool's result.

    Returns:
        The text the agent reads.
    """
    if result.error is None:
        return result.content
    return f"Error: {result.error}\n{result.content}".rstrip("\n")


def budget_left_space(max_tool_calls: int, max_turns: int) -> spaces.Dict:
    """The observation's ``budget_left`` space: tool calls and turns left in the step (or day).

    Args:
        max_tool_calls: The step's tool-call budget.
        max_turns: The step's turn budget.

    Returns:
        A ``Dict`` space of two ``Discrete`` counts.
    """
    return spaces.Dict(
        {"tool_calls": spaces.Discrete(max_tool_calls + 1), "turns": spaces.Discrete(max_turns + 1)}
    )


def budget_left(max_tool_calls: int, max_turns: int, tool_calls: int, turns: int, forced: bool) -> BudgetLeft:
    """The observation's ``budget_left``: what is left of the step's (or day's) budgets.

    Args:
        max_tool_calls: The tool-call budget.
        max_turns: The turn budget.
        tool_calls: Tool calls used.
        turns: Turns used.
        forced: The budget is spent and only the step-ending tools run (no tool calls left).

    Returns:
        ``{"tool_calls": ..., "turns": ...}``, never negative.
    """
    return {
        "tool_calls": 0 if forced else max(0, max_tool_calls - tool_calls),
        "turns": max(0, max_turns - turns),
    }


def rollout_option(options: Mapping[str, Any]) -> int:
    """The ``rollout`` reset option: the attempt index written into the records (default 0).

    Args:
        options: The reset options.

    Returns:
        The index.

    Raises:
        ResetError: Not a non-negative integer.
    """
    rollout = options.get("rollout", 0)
    if isinstance(rollout, bool) or not isinstance(rollout, int) or rollout < 0:
        raise ResetError("options['rollout'] must be a non-negative integer")
    return rollout


class TurnBudgets(Protocol):
    """What both envs' budgets say about one step (or day): its tool calls and turns."""

    @property
    def max_tool_calls(self) -> int:
        """Tool calls per step (or day)."""
        ...

    @property
    def max_turns(self) -> int:
        """Turns per step (or day)."""
        ...


class TurnEnv:
    """The turn, transcript and log plumbing the two envs share (a mixin before ``gymnasium.Env``).

    The env sets, before its first turn, ``render_mode``, ``budgets``, ``_schemas``, ``_system_prompt``
    and (through :meth:`_open_run`) the run's metadata, id and log; and per step (through
    :meth:`_open_transcript`) ``_messages``, ``_usage``, ``_tool_log`` and the budget counters.
    """

    render_mode: str | None
    corpus: Corpus
    gateway: TemporalGateway
    memory: str
    run_metadata: dict[str, Any]
    run_id: str
    agent_name: str | None
    _schemas: list[dict[str, Any]]
    _log_dir: Path | None
    _log: LogSink | None
    _messages: list[ChatMessage]
    _usage: dict[str, int | None]
    _tool_log: list[ToolCallRecord]
    budgets: TurnBudgets
    _system_prompt: str
    _turns: int  # turns taken in the step (or day)
    _tool_calls: int  # tool calls counted against the step's (or day's) budget
    _forced: bool  # the budget is spent: only the step-ending tools run

    def _set_up(self, corpus: Corpus, retriever: Retriever, memory: str, render_mode: str | None) -> None:
        """Set the corpus, the temporal gateway over it, the memory mode and the render mode.

        Raises:
            ConfigError: A render mode other than None or ``"ansi"``.
        """
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.corpus = corpus
        self.gateway = TemporalGateway(corpus, retriever)
        self.memory = memory
        self.render_mode = render_mode

    def _open_run(self, metadata: dict[str, Any], log_dir: str | Path | None) -> None:
        """Set the run's metadata, its id (a hash of it), the agent's name and where the log goes (opened later)."""
        self.run_metadata = metadata
        self.run_id = run_id_for(metadata)
        self.agent_name = metadata.get("agent")
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._log = None

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style schemas of the enabled tools, generated from the tool functions (for servers and TRL)."""
        return copy.deepcopy(self._schemas)

    def conversation(self) -> list[ChatMessage]:
        """The current step's (in world mode: day's) whole transcript so far: system, prompt, turns, tool results."""
        return copy.deepcopy(self._messages)

    @property
    def log_dir(self) -> Path | None:
        """The trajectory log directory, or None when the env does not log."""
        return self._log_dir

    def render(self) -> str | None:
        """The current step's (or day's) transcript as text (``render_mode="ansi"``), else None."""
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(f"[{m['role']}] {m['content']}" for m in self._messages)

    def close(self) -> None:
        """Close the trajectory log, if any (records a full disk held back are written now, or a warning says they are lost)."""
        if self._log is not None:
            log, self._log = self._log, None
            try:
                log.close()
            except LogWriteError as err:
                warnings.warn(str(err), RuntimeWarning, stacklevel=2)

    # ------------------------------------------------------------------ budgets

    def _open_transcript(self, prompt: str) -> None:
        """Start a step (or day): its budgets unspent, nothing counted or logged, the system prompt and ``prompt``."""
        self._turns = 0
        self._tool_calls = 0
        self._forced = False
        self._usage = {"prompt_tokens": None, "completion_tokens": None}
        self._tool_log = []
        self._messages = [chat_message("system", self._system_prompt), chat_message("user", prompt)]

    def _budget_spent(self) -> bool:
        """The step's (or day's) turns or tool calls are used up."""
        return self._turns >= self.budgets.max_turns or self._tool_calls >= self.budgets.max_tool_calls

    def _budget_left(self) -> BudgetLeft:
        """The observation's ``budget_left`` now (:func:`budget_left`)."""
        budgets = self.budgets
        return budget_left(
            budgets.max_tool_calls, budgets.max_turns, self._tool_calls, self._turns, self._forced
        )

    def _budget_used(self) -> dict[str, int]:
        """A step record's ``budgets``: the step's (or day's) limits and what was used of them."""
        return {
            "max_tool_calls": self.budgets.max_tool_calls,
            "max_turns": self.budgets.max_turns,
            "tool_calls_used": self._tool_calls,
            "turns_used": self._turns,
        }

    # ------------------------------------------------------------------ turn mechanics

    def _parse_turn(self, action: Any, id_prefix: str) -> ParsedAction:
        """Parse one assistant turn (never raises), append it to the transcript and count its tokens."""
        parsed = parse_action(action, id_prefix=id_prefix)
        self._messages.append(parsed.message())
        for key, value in parsed.usage.items():
            self._usage[key] = (self._usage.get(key) or 0) + value
        return parsed

    def _run_calls(
        self,
        parsed: ParsedAction,
        run: Callable[[ToolCall], ToolResult],
        ends: Callable[[ToolResult], bool],
        not_run: str,
    ) -> tuple[list[ChatMessage], ToolResult | None]:
        """Run a turn's calls in order until one ends the step; every call is answered.

        Args:
            parsed: The parsed turn.
            run: Runs one call (the env's budget and gate checks included).
            ends: Whether a result ends the step.
            not_run: Why the calls after the ending one are not run (the tool message says ``not run: ...``).

        Returns:
            The new messages (a parse error's notice, then one tool message per call) and the result
            that ended the step, or None.
        """
        new: list[ChatMessage] = []
        if parsed.error:
            new.append(chat_message("user", f"Error: {parsed.error}"))
        ending: ToolResult | None = None
        for call in parsed.tool_calls:
            if ending is not None:
                new.append(self._tool_message(call, f"not run: {not_run}"))
                continue
            result = run(call)
            if ends(result):
                ending = result
            new.append(self._tool_message(call, tool_result_text(result)))
        return new, ending

    def _log_call(self, call: ToolCall, result: ToolResult) -> None:
        """Add a call and (the start of) its result to the step's tool log."""
        self._tool_log.append(
            ToolCallRecord(
                id=call.id,
                name=call.name,
                arguments=decoded_arguments(call.raw_arguments),
                result=(result.content or "")[:RESULT_SUMMARY_CHARS],
                doc_ids=list(result.doc_ids),
                error=result.error,
            )
        )

    def _log_record(self, record: StepRecord) -> LogOutcome:
        """Write a record to the log (opened on first use); an I/O failure is reported, never raised."""
        assert self._log_dir is not None
        if self._log is None:
            self._log = LogSink(self._log_dir, self.run_metadata, run_id=self.run_id)
        return self._log.write(record)

    @staticmethod
    def _tool_message(call: ToolCall, content: str) -> ChatMessage:
        return chat_message("tool", content, tool_call_id=call.id, name=call.name)
