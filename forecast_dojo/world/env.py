"""``WorldEnv``: FutureSim's setting, one episode = a calendar of simulated days over many open questions.

Contract:

* ``reset(seed=None, options=None)`` opens the calendar's first day. Every question opens on the day
  of its first forecast cutoff and leaves the open set after its last (:mod:`forecast_dojo.world.calendar`).
* ``step(action)`` takes one assistant turn (an OpenAI message dict or text with ``<tool_call>``
  blocks) and runs its calls in order: ``search``/``read``/``python`` (the fixed-date env's tools,
  gated at the day's start by the same :class:`~forecast_dojo.gateway.TemporalGateway`),
  ``read_question``, ``submit_forecasts`` (partial updates; forecasts stand until revised),
  ``next_day``, and in memory mode ``write_memory``/``read_memory``. ``next_day`` (or the day's budget
  running out) ends the day: every open question is scored with its standing forecast by
  :func:`forecast_dojo.scoring.free_form_score` (no forecast scores 0; on fixed outcomes it is
  ``1 - brier_loss``), and the next day's ``[system, user]`` prompt starts a fresh conversation.
  Nothing carries over but the standing forecasts and, in ``memory="files"`` mode, the dated memory
  files the agent wrote.
* Reward (``reward``): ``per-day`` (the day's summed scores when it ends, a dense signal),
  ``time-weighted`` (each question's daily score divided by its number of open days, so the episode
  total is the sum of per-question mean scores) or ``final`` (0 until the end, then each question's
  score on its last open day). 0 on turns that do not end a day.
* ``info`` (researcher-facing, never for the agent): at a day's end ``day_scores`` and ``records``
  (one :class:`~forecast_dojo.records.StepRecord` per open question, also written to ``log_dir``); at
  the episode's end ``scores`` and ``accuracy``: ``{question_id: {day: value}}``.
* Budgets (:class:`WorldBudgets`): research tool calls, turns and python seconds per day; optionally
  turns and tool calls per episode (once spent, the remaining days are scored with the standing
  forecasts and the episode terminates).
* The observation never holds an answer, a resolution date or the number of days left.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
from gymnasium import spaces

from forecast_dojo._version import __version__
from forecast_dojo.actions import ToolCall
from forecast_dojo.corpus.retrieval import Retriever
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError, EpisodeError, ResetError
from forecast_dojo.events.sibling_leak import sibling_leak_audit
from forecast_dojo.gateway import CutoffView
from forecast_dojo.messages import ChatMessage, chat_message, normalize_message
from forecast_dojo.records import StepRecord
from forecast_dojo.sandbox import sandbox_python_runner
from forecast_dojo.schema import Event
from forecast_dojo.scoring import answer_matches, free_form_score, top1_accuracy
from forecast_dojo.spaces import AssistantTurn, ChatMessages, UnicodeText
from forecast_dojo.timeutil import iso
from forecast_dojo.tools import ForecastTools, ToolResult, call_tool
from forecast_dojo.turns import TurnEnv, budget_left_space, rollout_option
from forecast_dojo.world.calendar import Calendar, day_instant
from forecast_dojo.world.prompts import day_prompt, world_system_prompt
from forecast_dojo.world.spaces import (
    MAX_OPEN_QUESTIONS,
    MemoryFiles,
    OpenQuestion,
    OpenQuestions,
    StandingForecasts,
    WorldObservation,
)
from forecast_dojo.world.tools import (
    MEMORY_MODES,
    MEMORY_TOOLS,
    RESEARCH_TOOLS,
    WORLD_TOOLS,
    WorldTools,
    world_tool_schemas,
)

REWARD_MODES = ("per-day", "time-weighted", "final")
SIBLING_LEAK_MODES = ("flag", "exclude")  # a question whose answer a co-open question's text names
MAX_DAYS = 100_000
BUDGET_NOTE = "(Yesterday's budget ran out before you called next_day; the day ended there.)"

PythonRunner = Callable[[str, datetime], tuple[str, "str | None"]]


@dataclass(frozen=True)
class WorldBudgets:
    """Limits of a world-mode episode.

    Attributes:
        max_tool_calls: Research tool calls (search, read, python) per day.
        max_turns: Turns per day; the last one ends the day (calls after it are refused except the world tools).
        max_python_seconds: Python wall-clock seconds per day.
        max_episode_turns: Turns in the whole episode (None: no limit).
        max_episode_tool_calls: Research tool calls in the whole episode (None: no limit).
    """

    max_tool_calls: int = 8
    max_turns: int = 10
    max_python_seconds: float = 20.0
    max_episode_turns: int | None = None
    max_episode_tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_turns", "max_episode_turns", "max_episode_tool_calls"):
            value = getattr(self, name)
            optional = name.startswith("max_episode")
            if value is None and optional:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (0 if name == "max_tool_calls" else 1)
            ):
                raise ConfigError(f"world budgets: {name} must be a positive integer, got {value!r}")
        seconds = self.max_python_seconds
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds < float("inf")
        ):
            raise ConfigError(f"world budgets: max_python_seconds must be a positive number, got {seconds!r}")


class WorldEnv(TurnEnv, gym.Env[WorldObservation, Any]):
    """A gymnasium environment over a calendar of open questions (see the module docstring).

    Args:
        events: The questions (fixed-outcome and free-form).
        corpus: The dated corpus.
        retriever: The retriever over it (the same objects the fixed-date env uses).
        start: The first day (default: the first question's first day).
        end: The last day (default: the last question's last day).
        memory: ``none`` or ``files``.
        reward: One of :data:`REWARD_MODES`.
        budgets: The limits (:class:`WorldBudgets`).
        tools: The research tools, a subset of ``("search", "read", "python")``.
        python_runner: Runs the python tool (default: the sandbox); None disables it.
        log_dir: Where the step records go (one per question per day), or None.
        run_metadata: Extra fields of the log's ``run.json``.
        name: The calendar's name (the observation's ``event_id``).
        skip_empty_days: Leave out days on which no question is open.
        render_mode: None or ``"ansi"``.
        sibling_leaks: ``flag`` (records of a question whose answer a co-open question's text names
            carry the flag ``sibling_leak``) or ``exclude`` (such questions leave the calendar).
        judge: ``judge(outcome, answer) -> bool`` for free-form outcomes that do not match the answer
            by normal form (:class:`forecast_dojo.world.judge.AnswerJudge`); None: normal form and aliases only.
    """

    metadata = {"render_modes": ["ansi"]}
    budgets: WorldBudgets
    # The current day's state (set by _begin_day).
    _tools: WorldTools
    _research: ForecastTools
    _open: dict[str, Event]

    def __init__(
        self,
        events: Sequence[Event],
        corpus: Corpus,
        retriever: Retriever,
        *,
        start: date | None = None,
        end: date | None = None,
        memory: str = "none",
        reward: str = "per-day",
        budgets: WorldBudgets | None = None,
        tools: Sequence[str] = RESEARCH_TOOLS,
        python_runner: PythonRunner | None = sandbox_python_runner,
        log_dir: str | Path | None = None,
        run_metadata: dict[str, Any] | None = None,
        name: str = "calendar",
        skip_empty_days: bool = True,
        render_mode: str | None = None,
        sibling_leaks: str = "flag",
        judge: Callable[[str, str], bool] | None = None,
    ) -> None:
        if sibling_leaks not in SIBLING_LEAK_MODES:
            raise ConfigError(f"sibling_leaks must be one of {SIBLING_LEAK_MODES}, not {sibling_leaks!r}")
        if memory not in MEMORY_MODES:
            raise ConfigError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
        if reward not in REWARD_MODES:
            raise ConfigError(f"reward must be one of {REWARD_MODES}, not {reward!r}")
        unknown = set(tools) - set(RESEARCH_TOOLS)
        if unknown:
            raise ConfigError(f"world tools must be a subset of {RESEARCH_TOOLS}, got {sorted(unknown)}")
        self.calendar = Calendar.from_events(events, start, end, skip_empty_days=skip_empty_days)
        self.sibling_leaks = self._audit_siblings()
        if sibling_leaks == "exclude" and self.sibling_leaks["leaking_ids"]:
            leaking = set(self.sibling_leaks["leaking_ids"])
            kept = [e for e in self.calendar.events if e.id not in leaking]
            self.calendar = Calendar(tuple(kept), self.calendar.start, self.calendar.end, skip_empty_days)
        self._leaking = (
            frozenset(self.sibling_leaks["leaking_ids"]) if sibling_leaks == "flag" else frozenset()
        )
        if len(self.calendar.days) > MAX_DAYS:
            raise ConfigError(f"a calendar of {len(self.calendar.days)} days; the limit is {MAX_DAYS}")
        if len(self.calendar.events) > MAX_OPEN_QUESTIONS:
            raise ConfigError(f"{len(self.calendar.events)} questions; the limit is {MAX_OPEN_QUESTIONS}")
        self.name = name
        self.judge = (
            judge  # free-form paraphrases (e.g. forecast_dojo.world.judge.AnswerJudge); a grader only
        )
        self._set_up(corpus, retriever, memory, render_mode)
        self.reward_mode = reward
        self.budgets = budgets or WorldBudgets()
        self.research_tools = tuple(t for t in RESEARCH_TOOLS if t in tools)
        self.python_runner = python_runner if "python" in self.research_tools else None
        # Any question's screened documents stay hidden all episode: one view serves every open question.
        self._hidden = frozenset(doc for e in self.calendar.events for doc in e.excluded_doc_ids)
        self._by_id = {e.id: e for e in self.calendar.events}
        self._schemas = world_tool_schemas(memory, self.research_tools)
        self._system_prompt = world_system_prompt(memory, self._schemas)
        self._world_tools = tuple(n for n in WORLD_TOOLS if memory == "files" or n not in MEMORY_TOOLS)
        metadata = {
            "package_version": __version__,
            "mode": "world",
            "calendar": {
                "name": name,
                "start": self.calendar.start.isoformat(),
                "end": self.calendar.end.isoformat(),
                "n_days": len(self.calendar.days),
                "n_questions": len(self.calendar.events),
            },
            "corpus_content_hash": corpus.content_hash,
            "retriever": getattr(retriever, "name", type(retriever).__name__),
            "memory": memory,
            "reward": reward,
            "budgets": {
                k: getattr(self.budgets, k)
                for k in ("max_tool_calls", "max_turns", "max_episode_turns", "max_episode_tool_calls")
            },
            "tools": list(self.research_tools),
            "sibling_leaks": {
                "mode": sibling_leaks,
                "leaking_questions": self.sibling_leaks["leaking_questions"],
            },
            **(run_metadata or {}),
        }
        self._open_run(metadata, log_dir)
        self.action_space = AssistantTurn()
        self.observation_space = cast(
            "spaces.Space[WorldObservation]",
            spaces.Dict(
                {
                    "messages": ChatMessages(),
                    "event_id": UnicodeText(max_length=512),
                    "step": spaces.Discrete(MAX_DAYS),
                    "day": UnicodeText(max_length=10),
                    "open_questions": OpenQuestions(),
                    "forecasts": StandingForecasts(),
                    "memory": UnicodeText(max_length=16),
                    "memory_files": MemoryFiles(),
                    "budget_left": budget_left_space(self.budgets.max_tool_calls, self.budgets.max_turns),
                }
            ),
        )
        self._done = True
        self._day_index = 0

    # ------------------------------------------------------------------ public API

    @property
    def day(self) -> date:
        """The current simulated day."""
        return self.calendar.days[self._day_index]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[WorldObservation, dict[str, Any]]:
        """Start the calendar at its first day.

        Args:
            seed: Seeds ``self.np_random`` (the calendar itself is fixed).
            options: ``rollout`` (the attempt index written into the records, default 0).

        Returns:
            The first day's observation and the info.

        Raises:
            ResetError: Unknown or invalid options.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"rollout"}
        if unknown:
            raise ResetError(f"unknown reset options {sorted(unknown)}; allowed: rollout")
        rollout = rollout_option(options)
        self._rollout = rollout
        self._done = False
        self._standing: dict[str, dict[str, float]] = {}
        self._memory_files: dict[str, str] = {}
        self._scores: dict[str, dict[str, float]] = {e.id: {} for e in self.calendar.events}
        self._accuracy: dict[str, dict[str, float]] = {e.id: {} for e in self.calendar.events}
        self._episode_turns = 0
        self._episode_tool_calls = 0
        self._final_total = 0.0
        self._begin_day(0, None)
        leaks = {k: self.sibling_leaks[k] for k in ("leaking_questions", "leak_rate", "leaking_ids")}
        return self._observation(self._messages), self._info(day_ended=False, sibling_leaks=leaks)

    def step(self, action: Any) -> tuple[WorldObservation, float, bool, bool, dict[str, Any]]:
        """Take one assistant turn; ``next_day`` or a spent budget ends the day (see the module docstring).

        Args:
            action: An OpenAI-style assistant message or text with ``<tool_call>`` blocks; anything
                malformed becomes an error message to the agent, never an exception.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._done:
            raise EpisodeError("the episode is over (or never started): call reset() first")
        self._turns += 1
        self._episode_turns += 1
        parsed = self._parse_turn(action, f"call_{self._day_index}_{self._turns}_")
        new, _ = self._run_calls(
            parsed, self._run_tool, lambda _: self._tools.advance, "the day already ended with next_day"
        )
        if not parsed.tool_calls and not parsed.error:
            new.append(
                chat_message(
                    "user", "No tool call found. Research, submit_forecasts, or call next_day to end the day."
                )
            )
        self._messages.extend(new)
        episode_spent = self._episode_budget_spent()
        if self._tools.advance or self._forced or episode_spent:
            flags = [] if self._tools.advance else ["day_budget_spent"]
            return self._end_day(new, flags, episode_spent=episode_spent)
        if self._budget_spent():
            self._forced = True
            notice = chat_message(
                "user",
                "Today's budget is spent: only submit_forecasts, read_question and next_day run now "
                "(memory tools too); your next turn ends the day.",
            )
            self._messages.append(notice)
            new.append(notice)
        return self._observation(new), 0.0, False, False, self._info(day_ended=False)

    def _audit_siblings(self) -> dict[str, Any]:
        """The cross-question leak audit over questions open on a common day (researcher-facing)."""
        spans = {e.id: self.calendar.span(e.id) for e in self.calendar.events}

        def together(a: Event, b: Event) -> bool:
            (a0, a1), (b0, b1) = spans[a.id], spans[b.id]
            return a0 <= b1 and b0 <= a1

        return sibling_leak_audit(self.calendar.events, together=together)

    # ------------------------------------------------------------------ day mechanics

    def _begin_day(self, index: int, note: str | None) -> None:
        self._day_index = index
        day = self.calendar.days[index]
        self._day_started = time.perf_counter()
        self._open = {e.id: e for e in self.calendar.open_on(day)}
        instant = day_instant(day)
        self._view: CutoffView = self.gateway.at(instant, hidden_ids=self._hidden)
        self._research = ForecastTools(
            self._view,
            (),
            day,
            python_runner=self.python_runner,
            now=instant,
            python_seconds=self.budgets.max_python_seconds,
        )
        self._tools = WorldTools(
            self.calendar,
            day,
            self._open,
            self._standing,
            memory=self.memory,
            memory_files=self._memory_files,
        )
        prompt = day_prompt(
            day.isoformat(),
            self._open_questions(),
            self._open_forecasts(),
            (self.budgets.max_tool_calls, self.budgets.max_turns),
            self.memory,
            dict(self._memory_files),
            note=note,
        )
        self._open_transcript(prompt)

    def _episode_budget_spent(self) -> bool:
        turns, calls = self.budgets.max_episode_turns, self.budgets.max_episode_tool_calls
        return (turns is not None and self._episode_turns >= turns) or (
            calls is not None and self._episode_tool_calls >= calls
        )

    def _run_tool(self, call: ToolCall) -> ToolResult:
        enabled = (*self.research_tools, *self._world_tools)
        if call.error is not None:
            result = ToolResult("", error=call.error)
        elif call.name not in enabled:
            result = ToolResult("", error=f"unknown tool {call.name!r}; available: {', '.join(enabled)}")
        elif call.name in self.research_tools and (
            self._forced or self._tool_calls >= self.budgets.max_tool_calls
        ):
            result = ToolResult(
                "", error="today's research budget is spent: submit_forecasts or call next_day"
            )
        else:
            assert call.arguments is not None
            if call.name in self.research_tools:
                self._tool_calls += 1
                self._episode_tool_calls += 1
                result = self._research.call(call.name, call.arguments)
                if result.max_available_us is not None:
                    self._view.assert_before_cutoff(result.max_available_us)
            else:
                result = call_tool(self._tools.functions(), call.name, call.arguments)
        self._log_call(call, result)
        return result

    def _score_day(self, index: int, flags: list[str]) -> tuple[float, list[StepRecord], dict[str, float]]:
        """Score every question open on day ``index`` with its standing forecast; the day's reward and records."""
        day = self.calendar.days[index]
        key = day.isoformat()
        reward = 0.0
        records: list[StepRecord] = []
        day_scores: dict[str, float] = {}
        for event in self.calendar.open_on(day):
            forecast = self._standing.get(event.id, {})
            score = free_form_score(forecast, event.answer, event.aliases, judge=self.judge)
            accuracy = top1_accuracy(forecast, event.answer, event.aliases, judge=self.judge)
            self._scores[event.id][key] = score
            self._accuracy[event.id][key] = accuracy
            day_scores[event.id] = score
            open_days = self.calendar.open_days(event.id)
            if self.reward_mode == "per-day":
                reward += score
            elif self.reward_mode == "time-weighted":
                reward += score / len(open_days)
            elif day == open_days[-1]:  # final: the standing forecast when the question resolves
                self._final_total += score
            records.append(
                self._record(
                    event, day, open_days.index(day), len(open_days), forecast, score, accuracy, flags
                )
            )
        return reward, records, day_scores

    def _end_day(
        self, new: list[ChatMessage], flags: list[str], *, episode_spent: bool = False
    ) -> tuple[WorldObservation, float, bool, bool, dict[str, Any]]:
        reward, records, day_scores = self._score_day(self._day_index, flags)
        last = len(self.calendar.days) - 1
        if episode_spent:
            # The episode's budget is spent: the remaining days are lived with the standing forecasts.
            self._tools.updated = set()
            for index in range(self._day_index + 1, last + 1):
                self._day_index = index
                more, more_records, _ = self._score_day(index, ["episode_budget_spent"])
                reward += more
                records += more_records
        logged = [self._write(r) for r in records]
        ended_day = self.calendar.days[self._day_index].isoformat()
        extra: dict[str, Any] = {
            "day_scores": day_scores,
            "ended_day": ended_day,
            "records": records,
            "logged": all(ok for ok, _ in logged),
        }
        errors = [message for ok, message in logged if not ok and message]
        if errors:
            extra["log_error"] = errors[-1]
        if self._day_index >= last:
            self._done = True
            if self.reward_mode == "final":
                reward += self._final_total
            extra["scores"] = copy.deepcopy(self._scores)
            extra["accuracy"] = copy.deepcopy(self._accuracy)
            extra["episode_budget_spent"] = episode_spent
            obs = self._observation(new)
            return obs, reward, True, False, self._info(day_ended=True, **extra)
        self._begin_day(self._day_index + 1, BUDGET_NOTE if "day_budget_spent" in flags else None)
        return (
            self._observation(list(self._messages)),
            reward,
            False,
            False,
            self._info(day_ended=True, **extra),
        )

    def _record(
        self,
        event: Event,
        day: date,
        step: int,
        n_steps: int,
        forecast: dict[str, float],
        score: float,
        accuracy: float,
        flags: list[str],
    ) -> StepRecord:
        """One question's record for one day: the standing forecast scored (the transcript only on days it changed)."""
        updated = event.id in self._tools.updated
        labels = list(event.outcomes) if not event.free_form else list(forecast)
        index = next((i for i, o in enumerate(labels) if answer_matches(o, event.answer, event.aliases)), -1)
        own_flags = list(flags) + (["updated"] if updated else []) + ([] if forecast else ["no_forecast"])
        own_flags += ["sibling_leak"] if event.id in self._leaking else []
        return StepRecord(
            run_id=self.run_id,
            event_id=event.id,
            rollout=self._rollout,
            step=step,
            n_steps=n_steps,
            cutoff=iso(day_instant(day)),
            forecast_date=day.isoformat(),
            agent=self.agent_name,
            source=event.source,
            memory=self.memory,
            messages=[normalize_message(m) for m in self._messages] if updated else [],
            tools=copy.deepcopy(self._schemas) if updated else [],
            tool_calls=list(self._tool_log) if updated else [],
            notebook_in=None,
            notebook_out=self._memory_files.get(day.isoformat()) if self.memory == "files" else None,
            outcomes=labels,
            forecast=[float(forecast.get(label, 0.0)) for label in labels],
            valid=bool(forecast),
            flags=own_flags,
            scores={"free_form": score, "accuracy": accuracy},
            reward=score,
            outcome=event.answer,
            outcome_index=index,
            budgets=self._budget_used(),
            tokens=dict(self._usage) if updated else {"prompt_tokens": None, "completion_tokens": None},
            n_visible=self._view.n_visible,
            wall_time_s=round(time.perf_counter() - self._day_started, 6),
        )

    def _write(self, record: StepRecord) -> tuple[bool, str | None]:
        if self._log_dir is None:
            return True, None
        outcome = self._log_record(record)
        return outcome.written, None if outcome.written else outcome.message()

    # ------------------------------------------------------------------ observation helpers

    def _open_questions(self) -> list[OpenQuestion]:
        day = self.day
        out: list[OpenQuestion] = []
        for event in self._open.values():
            question = self.calendar.text_on(event, day)[0]
            out.append(
                {
                    "id": event.id,
                    "question": question,
                    "outcomes": list(event.outcomes),
                    "free_form": event.free_form,
                    "days_open": (day - self.calendar.span(event.id)[0]).days,
                }
            )
        return out

    def _open_forecasts(self) -> dict[str, dict[str, float]]:
        return {qid: dict(f) for qid, f in self._standing.items() if qid in self._open}

    def _observation(self, messages: list[ChatMessage]) -> WorldObservation:
        return {
            "messages": copy.deepcopy(messages),
            "event_id": self.name,
            "step": self._day_index,
            "day": self.day.isoformat(),
            "open_questions": self._open_questions(),
            "forecasts": self._open_forecasts(),
            "memory": self.memory,
            "memory_files": dict(self._memory_files),
            "budget_left": self._budget_left(),
        }

    def _info(self, *, day_ended: bool, **extra: Any) -> dict[str, Any]:
        records = extra.pop("records", None)
        info = {
            "day": self.day.isoformat(),
            "day_index": self._day_index,
            "n_days": len(self.calendar.days),
            "turn": self._turns,
            "tool_calls_used": self._tool_calls,
            "budget_spent": self._forced,
            "day_ended": day_ended,
            "n_open": len(self._open),
            "n_visible": self._view.n_visible,
        }
        info.update(copy.deepcopy(extra))
        if records is not None:
            info["records"] = records
        return info
