"""``ForecastDojoEnv``: one resolved event per episode, one forecast step per cutoff.

Contract (see README for the full version):

* ``reset(event_id=None, *, seed=None, options=None)`` opens step ``options.get("step", 0)``.
  The observation's ``messages`` are the system prompt and the step's question prompt.
* ``step(action)`` takes one assistant turn (OpenAI message dict or text with ``<tool_call>`` blocks),
  runs its tool calls in order and returns the new messages: tool results and notices, or, when the
  turn ended the step, the next step's prompt. When ``obs["step"]`` changes, the agent starts a
  fresh conversation from ``obs["messages"]``: nothing else carries over (in ``memory="notebook"``
  mode the prompt includes the notebook the agent submitted).
* The observation also carries, structured, what the prompt says: ``question``, ``outcomes``,
  ``forecast_date``, ``memory``, ``budget_left`` and the carried ``notebook`` (see
  :class:`forecast_dojo.spaces.Observation`). It does NOT say how many steps the episode has or
  which step is the last: an episode's schedule (it ends early when the question resolves early)
  can reveal the outcome. ``info["n_steps"]`` has it for the researcher; ``show_episode_length=True``
  puts it back into the observation and the prompt, for ablations only.
* Reward is 0 on research turns and a proper score of the forecast when a step ends;
  ``terminated`` is True after the last step. ``info`` holds scores and flags for the researcher and
  must never be fed back to the agent.
* A free-form question (no fixed outcomes, :attr:`forecast_dojo.schema.Event.free_form`) lists no
  outcomes: the agent proposes ``{outcome: p}`` (summing to at most 1) and the step's score and
  reward is :func:`forecast_dojo.scoring.free_form_score` whatever the ``reward`` rule (an invalid or
  missing forecast is no forecast, 0); ``info["proposed"]`` holds the proposal, and the record the
  answer first and the other proposals after it (:func:`forecast_dojo.scoring.free_form_distribution`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
from gymnasium import spaces

from forecast_dojo._version import __version__
from forecast_dojo.actions import ToolCall
from forecast_dojo.budgets import Budgets
from forecast_dojo.corpus.retrieval import Retriever
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError, EpisodeError, ResetError, UnknownEventError
from forecast_dojo.events.schedule import near_resolution_event
from forecast_dojo.events.split import SPLITS
from forecast_dojo.messages import ChatMessage, chat_message, normalize_message
from forecast_dojo.notebook import Notebook, NotebookError, parse_notebook
from forecast_dojo.prompts import check_profile, step_prompt, system_prompt
from forecast_dojo.records import StepRecord
from forecast_dojo.sandbox import sandbox_python_runner
from forecast_dojo.schema import MAX_EVENT_ID_CHARS, MAX_LABEL_CHARS, MAX_OUTCOMES, MAX_QUESTION_CHARS, Event
from forecast_dojo.scoring import (
    SCORING_RULES,
    all_scores,
    free_form_distribution,
    free_form_score,
    top1_accuracy,
    uniform,
)
from forecast_dojo.spaces import (
    Action,
    AssistantTurn,
    ChatMessages,
    Observation,
    TextList,
    UnicodeText,
)
from forecast_dojo.timeutil import iso
from forecast_dojo.tools import SUBMIT_FORECAST, TOOL_NAMES, ForecastTools, ToolResult, tool_schemas
from forecast_dojo.turns import TurnEnv, budget_left_space, rollout_option

MEMORY_MODES = ("none", "notebook")
SCHEDULES = ("cutoffs", "near-resolution")  # the events' own cutoffs, or the near-resolution topline
MAX_STEPS_PER_EVENT = 64
NO_NOTEBOOK_NOTE = (
    "(You did not submit a valid notebook at the previous forecast date, so none was carried over.)"
)

PythonRunner = Callable[[str, datetime], tuple[str, "str | None"]]  # (code, step cutoff) -> (output, error)


class ForecastDojoEnv(TurnEnv, gym.Env[Observation, Action]):
    """A gymnasium environment over resolved events and a dated corpus (see module docstring).

    Episode statistics are left to ``gymnasium.wrappers.RecordEpisodeStatistics`` (the env never
    writes ``info["episode"]``). Logging stays in the env (``log_dir``) rather than in a wrapper: the
    record needs the env's internals (transcript, tool log, budgets, the visible-document count), the
    log header needs its configuration (corpus hash, spec), and in an ``AsyncVectorEnv`` each worker
    must write its own log, which ``log_dir`` in the env factory gives without extra plumbing; a
    wrapper would only forward ``info["record"]`` to the same writer.
    """

    metadata = {"render_modes": ["ansi"]}
    budgets: Budgets

    def __init__(
        self,
        events: Sequence[Event],
        corpus: Corpus,
        retriever: Retriever,
        *,
        memory: str = "none",
        reward: str = "brier",
        budgets: Budgets | None = None,
        tools: Sequence[str] = TOOL_NAMES,
        python_runner: PythonRunner | None = sandbox_python_runner,
        log_dir: str | Path | None = None,
        run_metadata: dict[str, Any] | None = None,
        render_mode: str | None = None,
        show_episode_length: bool = False,
        split: str = "all",
        prompt: str = "default",
        schedule: str = "cutoffs",
        judge: Callable[[str, str], bool] | None = None,
    ) -> None:
        if not events:
            raise ConfigError("an environment needs at least one event")
        if memory not in MEMORY_MODES:
            raise ConfigError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
        if reward not in SCORING_RULES:
            raise ConfigError(f"reward must be one of {sorted(SCORING_RULES)}, not {reward!r}")
        unknown_tools = set(tools) - set(TOOL_NAMES)
        if unknown_tools or SUBMIT_FORECAST not in tools:
            raise ConfigError(f"tools must be a subset of {TOOL_NAMES} that includes submit_forecast")
        self.prompt = check_profile(prompt)
        if schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
        # "near-resolution" (a topline, never the default): each event is one step a day before it resolved
        self.schedule = schedule
        # free-form questions: judge(outcome, answer) for paraphrases the normal form misses (a grader only)
        self.judge = judge
        self.events = list(events) if schedule == "cutoffs" else [near_resolution_event(e) for e in events]
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {SPLITS}, not {split!r}")
        self.split = split  # which part of its source's events ``events`` is (train, eval or all)
        self._by_id = {e.id: e for e in self.events}
        if len(self._by_id) != len(self.events):
            raise ConfigError("duplicate event ids")
        too_long = [e.id for e in self.events if e.n_steps > MAX_STEPS_PER_EVENT]
        if too_long:
            raise ConfigError(f"events with more than {MAX_STEPS_PER_EVENT} steps: {too_long[:5]}")
        self._set_up(corpus, retriever, memory, render_mode)
        self.reward_name = reward
        self.budgets = budgets or Budgets()
        self.enabled_tools = tuple(t for t in TOOL_NAMES if t in tools)
        self.python_runner = python_runner if "python" in self.enabled_tools else None
        self.show_episode_length = bool(show_episode_length)
        metadata = {
            "package_version": __version__,
            "corpus_content_hash": corpus.content_hash,
            "corpus_embedder": corpus.embedder_name,
            "retriever": getattr(retriever, "name", type(retriever).__name__),
            "memory": memory,
            "reward": reward,
            "budgets": {"max_tool_calls": self.budgets.max_tool_calls, "max_turns": self.budgets.max_turns},
            "tools": list(self.enabled_tools),
            "n_events": len(self.events),
            **({"show_episode_length": True} if self.show_episode_length else {}),
            **({"prompt": self.prompt} if self.prompt != "default" else {}),  # the default keeps its run id
            **({"schedule": schedule} if schedule != "cutoffs" else {}),
            **(run_metadata or {}),
        }
        self._open_run(metadata, log_dir)
        self._schemas = tool_schemas(memory, self.enabled_tools)
        self._system_prompt = system_prompt(memory, self._schemas, self.prompt)

        self.action_space = AssistantTurn()
        observation_spaces: dict[str, spaces.Space[Any]] = {
            "messages": ChatMessages(),
            # The size limits an Event enforces on construction (forecast_dojo.schema), so every
            # loaded event's observations lie inside this space.
            "event_id": UnicodeText(max_length=MAX_EVENT_ID_CHARS),
            "step": spaces.Discrete(MAX_STEPS_PER_EVENT),
            "forecast_date": UnicodeText(max_length=10),
            "question": UnicodeText(max_length=MAX_QUESTION_CHARS),
            "outcomes": TextList(max_items=MAX_OUTCOMES, max_length=MAX_LABEL_CHARS),
            "memory": UnicodeText(max_length=16),
            "budget_left": budget_left_space(self.budgets.max_tool_calls, self.budgets.max_turns),
            "notebook": UnicodeText(nullable=True),
        }
        if self.show_episode_length:
            observation_spaces["n_steps"] = spaces.Discrete(MAX_STEPS_PER_EVENT + 1)
        # gymnasium types a Dict space's samples as dict[str, Any]; this one's are exactly an Observation.
        self.observation_space = cast("spaces.Space[Observation]", spaces.Dict(observation_spaces))
        self._event: Event | None = None
        self._done = True

    # ------------------------------------------------------------------ public API

    @property
    def event(self) -> Event | None:
        """The current episode's event (None before the first reset)."""
        return self._event

    def reset(
        self, event_id: str | None = None, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode (one event) at a forecast step.

        Args:
            event_id: The event; without one (and without ``options["event_id"]``) it is drawn from
                ``self.np_random`` (deterministic per seed).
            seed: Seeds ``self.np_random``.
            options: ``event_id``; ``step`` (start at step k, to replay one forecast step);
                ``notebook`` (the notebook to start from, memory-on mode); ``notebook_missing``
                (memory-on, no ``notebook``: the previous step submitted none, and the prompt says so
                as it does inside an episode; resuming a cut episode); ``rollout`` (the attempt index
                written into the step records, default 0).

        Returns:
            The observation (the step's ``[system, user]`` prompt and its structured fields) and the info.

        Raises:
            UnknownEventError: An event id the env does not hold (the message names the env's split).
            ValueError: Unknown or invalid options.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"event_id", "step", "notebook", "notebook_missing", "rollout"}
        if unknown:
            raise ResetError(
                f"unknown reset options {sorted(unknown)}; "
                "allowed: event_id, step, notebook, notebook_missing, rollout"
            )
        rollout = rollout_option(options)
        event_id = event_id if event_id is not None else options.get("event_id")
        if event_id is None:
            event = self.events[int(self.np_random.integers(len(self.events)))]
        elif event_id in self._by_id:
            event = self._by_id[event_id]
        elif self.split != "all":
            raise UnknownEventError(
                f"unknown event id {event_id!r} in this environment's {self.split} split "
                f"({len(self.events)} events); make the env with split='all' (or the split that holds it)"
            )
        else:
            raise UnknownEventError(
                f"unknown event id {event_id!r} ({len(self.events)} events in this environment)"
            )
        start = options.get("step", 0)
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < event.n_steps:
            raise ResetError(
                f"options['step'] must be an integer in [0, {event.n_steps}) for event {event.id!r}"
            )
        notebook = None
        if options.get("notebook") is not None:
            if self.memory != "notebook":
                raise ResetError("options['notebook'] needs memory='notebook'")
            try:
                notebook = parse_notebook(
                    options["notebook"], event.outcomes, forecast_date=event.cutoffs[start].date()
                )
            except NotebookError as err:
                raise ResetError(f"options['notebook'] is not a valid notebook: {err}") from err
        missing = options.get("notebook_missing", False)
        if not isinstance(missing, bool) or (missing and (self.memory != "notebook" or notebook is not None)):
            raise ResetError(
                "options['notebook_missing'] is a bool, True only with memory='notebook' and no notebook"
            )
        self._event = event
        self._rollout = rollout
        self._done = False
        self._begin_step(start, notebook, NO_NOTEBOOK_NOTE if missing and start > 0 else None)
        return self._observation(self._messages), self._info(step_ended=False)

    def step(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Take one assistant turn: run its tool calls in order; a submission (or a spent budget) ends the step.

        Args:
            action: An OpenAI-style assistant message dict or text with ``<tool_call>`` blocks; anything
                malformed becomes an error message to the agent, never an exception.

        Returns:
            ``(observation, reward, terminated, truncated, info)``; at a step's end ``info["record"]``
            is its :class:`~forecast_dojo.records.StepRecord`.
        """
        if self._done or self._event is None:
            raise EpisodeError("the episode is over (or never started): call reset() first")
        self._turns += 1
        parsed = self._parse_turn(action, f"call_{self._step}_{self._turns}_")
        new, submission = self._run_calls(
            parsed,
            self._run_tool,
            lambda result: result.submitted,
            "the step already ended with your forecast",
        )
        if not parsed.tool_calls and not parsed.error:
            new.append(
                self._notice(
                    "No tool call found. Research with the tools, or call submit_forecast to finish this step."
                    if len(self.enabled_tools) > 1
                    else "No tool call found. Call submit_forecast to finish this step."
                )
            )
        self._messages.extend(new)

        if submission is None and self._forced:
            # The agent was told to submit and did not: record the uniform fallback and move on.
            submission = ToolResult("", forecast=None, submitted=True)
            return self._end_step(submission, new, fallback=True)
        elif submission is None and self._budget_spent():
            self._forced = True
            notice = self._notice(
                "Budget spent for this step: call submit_forecast now. Any other tool call will be refused."
            )
            self._messages.append(notice)
            new.append(notice)

        if submission is None:
            return self._observation(new), 0.0, False, False, self._info(step_ended=False)
        return self._end_step(submission, new)

    # ------------------------------------------------------------------ step mechanics

    def _begin_step(self, step: int, notebook: Notebook | None, note: str | None) -> None:
        event = self._event
        assert event is not None
        self._step = step
        self._notebook_in = notebook
        self._step_started = time.perf_counter()
        cutoff = event.cutoffs[step]
        hidden = frozenset(event.excluded_doc_ids)
        self._view = self.gateway.at(cutoff, hidden_ids=hidden)
        runner = self.python_runner if "python" in self.enabled_tools else None
        self._tools = ForecastTools(
            self._view,
            event.outcomes,
            cutoff.date(),
            memory=self.memory,
            python_runner=runner,
            now=cutoff,
            python_seconds=self.budgets.max_python_seconds,
            compact=self.prompt == "compact",
        )
        prompt = step_prompt(
            event,
            step,
            self.budgets,
            self.memory,
            notebook if self.memory == "notebook" else None,
            note,
            show_episode_length=self.show_episode_length,
            profile=self.prompt,
        )
        self._open_transcript(prompt)

    def _run_tool(self, call: ToolCall) -> ToolResult:
        if call.error is not None:
            result = ToolResult("", error=call.error)
        elif call.name not in self.enabled_tools:
            result = ToolResult(
                "", error=f"unknown tool {call.name!r}; available: {', '.join(self.enabled_tools)}"
            )
        elif call.name != SUBMIT_FORECAST and (
            self._forced or self._tool_calls >= self.budgets.max_tool_calls
        ):
            result = ToolResult("", error="tool budget spent for this step: call submit_forecast now")
        else:
            if call.name != SUBMIT_FORECAST:
                self._tool_calls += 1
            assert call.arguments is not None
            result = self._tools.call(call.name, call.arguments)
            if result.max_available_us is not None:
                self._view.assert_before_cutoff(result.max_available_us)
        self._log_call(call, result)
        return result

    def _end_step(
        self, submission: ToolResult, new: list[ChatMessage], *, fallback: bool = False
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        event = self._event
        assert event is not None
        flags: list[str] = []
        if fallback:  # the budget ran out and the agent did not submit
            flags.append("no_submission")
        if submission.forecast is None:
            if submission.forecast_error is not None:
                flags.append("invalid_forecast")
            # no valid forecast: the uniform one (a free-form question: none, which scores 0)
            forecast = uniform(len(event.outcomes)) if not event.free_form else ()
        else:
            forecast = submission.forecast
        notebook_out = submission.notebook if self.memory == "notebook" else None
        if self.memory == "notebook" and notebook_out is None:
            flags.append("no_notebook")
        proposed: dict[str, float] = {}
        if event.free_form:
            proposed = dict(zip(submission.labels or (), forecast, strict=True))
            labels, pooled = free_form_distribution(proposed, event.answer, event.aliases, judge=self.judge)
            scores = {
                "free_form": free_form_score(proposed, event.answer, event.aliases, judge=self.judge),
                "top1_accuracy": top1_accuracy(proposed, event.answer, event.aliases, judge=self.judge),
                **all_scores(pooled, 0),
            }
            # a free-form step's reward is its free-form score, whatever the rule
            reward = scores["free_form"]
        else:
            labels, pooled = list(event.outcomes), list(forecast)
            scores = all_scores(forecast, event.outcome_index)
            reward = scores[self.reward_name]
        record = self._step_record(labels, pooled, flags, scores, reward, submission)
        step_info = {
            **({"proposed": proposed} if event.free_form else {}),
            "forecast": list(forecast),
            "valid": submission.forecast is not None,
            "flags": flags,
            "scores": scores,
            "cutoff": record.cutoff,
            **self._write(record),
        }
        finished_step = self._step
        if self._step + 1 >= event.n_steps:
            self._done = True
            info = self._info(step_ended=True, **step_info)
            info["record"] = record
            obs = self._observation(new)
            obs["step"] = finished_step
            return obs, reward, True, False, info
        note = NO_NOTEBOOK_NOTE if self.memory == "notebook" and notebook_out is None else None
        self._begin_step(self._step + 1, notebook_out, note)
        info = self._info(step_ended=True, finished_step=finished_step, **step_info)
        info["record"] = record
        return self._observation(list(self._messages)), reward, False, False, info

    def _step_record(
        self,
        outcomes: list[str],
        forecast: list[float],
        flags: list[str],
        scores: dict[str, float],
        reward: float,
        submission: ToolResult,
    ) -> StepRecord:
        """The step's one record: what the log writes and ``info["record"]`` returns.

        ``outcomes`` and ``forecast`` are the event's labels and the scored distribution; of a
        free-form question, :func:`~forecast_dojo.scoring.free_form_distribution` (the answer first,
        the other proposals after it), so the K-outcome metrics read it like any record.
        """
        event = self._event
        assert event is not None
        cutoff = event.cutoffs[self._step]
        market = event.market_at(cutoff)
        return StepRecord(
            run_id=self.run_id,
            event_id=event.id,
            rollout=self._rollout,
            step=self._step,
            n_steps=event.n_steps,
            cutoff=iso(cutoff),
            forecast_date=cutoff.date().isoformat(),
            agent=self.agent_name,
            source=event.source,
            memory=self.memory,
            prompt=self.prompt,
            messages=[normalize_message(m) for m in self._messages],
            tools=copy.deepcopy(self._schemas),
            tool_calls=list(self._tool_log),
            notebook_in=self._notebook_in.to_json() if self._notebook_in else None,
            notebook_out=submission.notebook.to_json() if submission.notebook else None,
            outcomes=list(outcomes),
            forecast=list(forecast),
            valid=submission.forecast is not None,
            flags=list(flags),
            forecast_error=submission.forecast_error,
            rationale=submission.rationale,
            scores=dict(scores),
            reward=reward,
            outcome=event.answer,
            outcome_index=0 if event.free_form else event.outcome_index,
            market=list(market) if market is not None else None,
            budgets=self._budget_used(),
            tokens=dict(self._usage),
            n_visible=self._view.n_visible,
            wall_time_s=round(time.perf_counter() - self._step_started, 6),
        )

    def _write(self, record: StepRecord) -> dict[str, Any]:
        """Log the record; the step's info fields: ``logged``, and ``log_error`` when it is not in the log."""
        if self._log_dir is None:
            return {}
        outcome = self._log_record(record)  # an I/O failure is reported, never raised: the step still ends
        return {"logged": outcome.written} | ({"log_error": outcome.message()} if not outcome.written else {})

    # ------------------------------------------------------------------ observation helpers

    @staticmethod
    def _notice(text: str) -> ChatMessage:
        return chat_message("user", text)

    def _observation(self, messages: list[ChatMessage]) -> Observation:
        event = self._event
        assert event is not None
        notebook = self._notebook_in if self.memory == "notebook" else None
        observation: Observation = {
            "messages": copy.deepcopy(messages),
            "event_id": event.id,
            "step": self._step,
            "forecast_date": event.cutoffs[self._step].date().isoformat(),
            "question": event.text_at(self._step)[0],  # as it stood at this cutoff, like the prompt
            "outcomes": list(event.outcomes),
            "memory": self.memory,
            "budget_left": self._budget_left(),
            "notebook": notebook.to_json() if notebook is not None else None,
        }
        if self.show_episode_length:
            observation["n_steps"] = event.n_steps
        return observation

    def _info(self, *, step_ended: bool, **extra: Any) -> dict[str, Any]:
        event = self._event
        assert event is not None
        info = {
            "event_id": event.id,
            "step": self._step,
            "n_steps": event.n_steps,
            "turn": self._turns,
            "tool_calls_used": self._tool_calls,
            "budget_spent": self._forced,
            "step_ended": step_ended,
            "n_visible": self._view.n_visible,
        }
        info.update(copy.deepcopy(extra))
        return info
