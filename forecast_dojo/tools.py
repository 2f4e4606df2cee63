"""The agent's tools: plain typed methods with docstrings, bound to one forecast step.

Their JSON schemas are generated from the signatures and docstrings
(``transformers.utils.get_json_schema``), so a tool is described exactly once: :func:`tool_interface`
gives a tool's name, description and typed parameters as one memory mode shows them (memory off:
``submit_forecast`` has no ``notebook`` parameter), and both :func:`tool_schemas` and GRPO's tool
methods (:mod:`forecast_dojo.training.grpo`) are generated from it. A generated schema is cached on
disk (``$FORECAST_DOJO_CACHE/tool-schemas``, keyed by a digest of the interface and the transformers
version), so building an env imports neither transformers nor torch once the cache holds the schemas
(the generator imports both: about 2 s quiet, far more on shared cores). Every text a tool
returns comes through the step's :class:`~forecast_dojo.gateway.CutoffView`, and every result
records the latest ``available_at`` it exposed, which the env checks against the cutoff.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import inspect
import json
import logging
import math
import re
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from forecast_dojo.atomic import write_text_atomic
from forecast_dojo.errors import NotFoundError, UntrustedInputError
from forecast_dojo.gateway import CutoffView, LeakageError
from forecast_dojo.graph import parse_graph
from forecast_dojo.notebook import Notebook, NotebookError, parse_notebook, schema_words
from forecast_dojo.paths import cache_root
from forecast_dojo.schema import (
    SchemaError,
    as_number,
    check_distribution,
    outcome_index,
    values_in_outcome_order,
)
from forecast_dojo.scoring import read_free_form, round_distribution, softmax, uniform
from forecast_dojo.timeutil import from_micros
from forecast_dojo.untrusted import preview

SNIPPET_CHARS = 500
COMPACT_SNIPPET_CHARS = 200  # the compact prompt profile's search results: id, date, title, a short snippet
MAX_TOP_K = 20
MAX_READ_CHARS = 20_000
MAX_QUERY_CHARS = 2_000
MAX_DOC_ID_CHARS = 512
MAX_OFFSET = 10**9
MAX_CODE_CHARS = 20_000
MAX_RATIONALE_CHARS = 4_000
MAX_CITATIONS = 50
NO_FORECAST_ERROR = "submit_forecast needs probabilities (or log_odds, or evidence)"
# |log odds| (and |log likelihood ratio| of one piece of evidence) above this is refused (e^100: no
# forecast needs more, and exp() stays finite)
MAX_LOG_ODDS = 100.0
MAX_EVIDENCE = 100  # pieces of evidence in one submit_forecast(evidence=...)
INTERNAL_ERROR_PREFIX = "internal error in tool"
SUBMIT_FORECAST = "submit_forecast"  # the tool that ends a step: the one spelling of its name
TOOL_NAMES = ("search", "read", "python", SUBMIT_FORECAST)
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]?(?=\s|$)")
UNIFORM_READ_ERROR = "no readable document with that id: read only ids returned by search in this step"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the text for the agent plus what the log and the leakage check need."""

    content: str
    error: str | None = None
    doc_ids: tuple[str, ...] = ()
    max_available_us: int | None = None
    forecast: tuple[float, ...] | None = None
    labels: tuple[str, ...] | None = None  # a free-form forecast's proposed outcomes (``forecast`` is theirs)
    forecast_error: str | None = None
    notebook: Notebook | None = None
    rationale: str | None = None
    submitted: bool = False


def read_probabilities(value: Any, outcomes: Sequence[str]) -> tuple[tuple[float, ...] | None, str | None]:
    """A submitted ``probabilities`` argument as the env reads it: ``{label: p}`` or a list in outcome order.

    The one probability reader: ``submit_forecast`` and the TRL reward functions
    (:mod:`forecast_dojo.training.rewards`) both use it.

    Args:
        value: The argument as decoded from JSON (anything a model can write).
        outcomes: The event's outcome labels, in order.

    Returns:
        ``(forecast, None)`` when valid (tiny rounding renormalized), else ``(None, error)``.
    """
    values, error = values_in_outcome_order(value, outcomes, "probabilities")
    if values is None:
        return None, error
    try:
        return check_distribution(values, len(outcomes), where="probabilities"), None
    except SchemaError as err:
        return None, str(err)


def _bounded_number(value: Any, name: str) -> tuple[float | None, str | None]:
    """``value`` as a finite float with ``|value| <= MAX_LOG_ODDS``, else ``(None, error)``."""
    number = as_number(value)
    if not math.isfinite(number) or abs(number) > MAX_LOG_ODDS:
        return (
            None,
            f"{name} must be finite numbers between -{MAX_LOG_ODDS:g} and {MAX_LOG_ODDS:g}, got {preview(value)}",
        )
    return number, None


def _log_odds_values(value: Any, outcomes: Sequence[str]) -> tuple[list[float] | None, str | None]:
    """The numbers of a ``log_odds`` argument in outcome order, checked (see :func:`read_log_odds`)."""
    if not outcomes:
        return None, "log_odds needs listed outcomes; propose outcomes with probabilities instead"
    values, error = values_in_outcome_order(value, outcomes, "log_odds")
    if values is None:
        return None, error
    if len(values) != len(outcomes):
        return None, f"log_odds: expected {len(outcomes)} numbers, got {len(values)}"
    numbers = []
    for v in values:
        number, error = _bounded_number(v, "log_odds")
        if number is None:
            return None, error
        numbers.append(number)
    return numbers, None


def read_log_odds(value: Any, outcomes: Sequence[str]) -> tuple[tuple[float, ...] | None, str | None]:
    """A submitted ``log_odds`` argument as the env reads it: ``{label: x}`` or a list in outcome order.

    The forecast is the softmax of the log odds (natural logarithms, any common offset):
    ``p_i = e^x_i / sum_j e^x_j``. Log odds of 0 for every outcome are the uniform forecast; evidence
    summed as log likelihood ratios from a uniform prior gives the posterior. An agent that weighs
    evidence in log odds need not normalize probabilities itself.

    Args:
        value: The argument as decoded from JSON (anything a model can write).
        outcomes: The event's outcome labels, in order (a free-form question has none: refused).

    Returns:
        ``(forecast, None)`` when valid, else ``(None, error)``.
    """
    numbers, error = _log_odds_values(value, outcomes)
    return (None, error) if numbers is None else (tuple(softmax(numbers)), None)


def read_evidence(value: Any, outcomes: Sequence[str]) -> tuple[tuple[float, ...] | None, str | None]:
    """A submitted ``evidence`` argument summed per outcome: ``[[label, log likelihood ratio], ...]``.

    Each piece of evidence names the outcome a report favours and how strongly, as a natural log
    likelihood ratio (the log of how much likelier the report is if that outcome comes than if not);
    the env adds it to that outcome's log odds. Summing is the env's job, so an agent that weighs
    reports one at a time never adds numbers itself. An empty list is no evidence (all sums 0).

    Args:
        value: The argument as decoded from JSON (anything a model can write).
        outcomes: The event's outcome labels, in order (a free-form question has none: refused).

    Returns:
        ``(sums, None)`` with one sum per outcome when valid, else ``(None, error)``.
    """
    if not outcomes:
        return None, "evidence needs listed outcomes; propose outcomes with probabilities instead"
    if not isinstance(value, list):
        return None, 'evidence must be a list of [label, log likelihood ratio] pairs, e.g. [["Yes", 1]]'
    if len(value) > MAX_EVIDENCE:
        return None, f"evidence has {len(value)} pieces; the cap is {MAX_EVIDENCE}"
    sums = [0.0] * len(outcomes)
    for piece in value:
        if not (isinstance(piece, list) and len(piece) == 2 and isinstance(piece[0], str)):
            return None, f"each piece of evidence must be a [label, number] pair, got {preview(piece)}"
        label, strength = piece
        index = outcome_index(label, outcomes)
        if index is None:
            return None, f"evidence names {preview(label)}, not one of {list(outcomes)}"
        number, error = _bounded_number(strength, "evidence strengths")
        if number is None:
            return None, error
        sums[index] += number
    return tuple(sums), None


def read_forecast(
    arguments: dict[str, Any], outcomes: Sequence[str]
) -> tuple[tuple[float, ...] | None, str | None]:
    """The forecast of ``submit_forecast`` arguments with listed outcomes.

    Either ``probabilities``, or log odds: ``log_odds`` (0 for every outcome when not given) plus the
    sums of ``evidence``, normalized by a softmax. The one reader of a submitted forecast:
    ``submit_forecast`` and the TRL reward functions (:mod:`forecast_dojo.training.rewards`) both use it.

    Args:
        arguments: The call's decoded arguments.
        outcomes: The event's outcome labels, in order.

    Returns:
        ``(forecast, None)`` when valid, else ``(None, error)``.
    """
    given = [name for name in ("probabilities", "log_odds", "evidence") if arguments.get(name) is not None]
    if not given:
        return None, NO_FORECAST_ERROR
    if "probabilities" in given:
        if len(given) > 1:
            return None, "give probabilities, or log_odds and evidence, not both"
        return read_probabilities(arguments["probabilities"], outcomes)
    logits = [0.0] * len(outcomes)
    if "log_odds" in given:
        numbers, error = _log_odds_values(arguments["log_odds"], outcomes)
        if numbers is None:
            return None, error
        logits = numbers
    if "evidence" in given:
        sums, error = read_evidence(arguments["evidence"], outcomes)
        if sums is None:
            return None, error
        logits = [x + y for x, y in zip(logits, sums, strict=True)]
    return tuple(softmax(logits)), None


def citations_error(value: Any) -> str | None:
    """Why a ``citations`` argument of ``submit_forecast`` is malformed, or None when it is fine (or absent).

    Args:
        value: The argument as decoded from JSON (anything a model can write).

    Returns:
        The error shown to the agent, or None. Whether a cited id exists or is visible is never said
        (that would let an agent probe for documents after the cutoff); evaluation checks it.
    """
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "citations must be a list of document id strings"
    if len(value) > MAX_CITATIONS:
        return f"citations has {len(value)} ids; the cap is {MAX_CITATIONS}"
    if any(len(v) > MAX_DOC_ID_CHARS for v in value):
        return f"a cited id is longer than {MAX_DOC_ID_CHARS} characters"
    return None


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """At most ``limit`` characters of ``text``, cut after the last complete sentence that fits."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends:
        return head[: ends[-1]]
    cut = head[: limit - 1].rsplit(" ", 1)[0]
    return cut + "\u2026"


def _day(micros: int) -> str:
    return from_micros(micros).date().isoformat()


_COMPACT_HIT = re.compile(r"^\[(?P<id>.+?)\] (?P<date>\d{4}-\d{2}-\d{2}) (?P<title>.*)$")


def compact_search_results(results: list[dict[str, Any]]) -> str:
    """Search results as the compact profile shows them: per hit ``[id] date title`` and a snippet line."""
    if not results:
        return "(no results)"
    lines = []
    for hit in results:
        lines.append(f"[{hit['id']}] {hit['date']} {' '.join(str(hit['title']).split())}".rstrip())
        lines.append(hit["snippet"])
    return "\n".join(lines)


def parse_search_results(content: str) -> list[dict[str, Any]] | None:
    """The hits of a search result text in either profile's form (``id``, ``date``, ``title``, ``snippet``).

    Returns:
        The hits (the default profile's JSON objects as they are), or None when ``content`` is not a
        search result (an error message, say).
    """
    if content.startswith("["):
        try:
            value = json.loads(content)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(hit, dict) and "id" in hit for hit in value):
            return value
    if content == "(no results)":
        return []
    lines = content.split("\n")
    hits: list[dict[str, Any]] = []
    for head, body in zip(lines[0::2], lines[1::2], strict=False):
        match = _COMPACT_HIT.match(head)
        if match is None:
            return None
        hits.append({"id": match["id"], "date": match["date"], "title": match["title"], "snippet": body})
    return hits if hits and len(lines) == 2 * len(hits) else None


def _takes_timeout(runner: Callable[..., Any]) -> bool:
    """Whether a python runner accepts the ``timeout_s`` keyword (the sandbox's does; simple callables need not)."""
    try:
        parameters = inspect.signature(runner).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "timeout_s" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class ForecastTools:
    """The tools of one forecast step. ``surfaced`` holds the ids that searches returned in this step."""

    def __init__(
        self,
        view: CutoffView,
        outcomes: tuple[str, ...],
        forecast_date: date,
        *,
        memory: str = "none",
        python_runner: Callable[..., tuple[str, str | None]] | None = None,
        now: datetime | None = None,
        python_seconds: float | None = None,
        compact: bool = False,
    ) -> None:
        self.view = view
        self.compact = compact  # the compact prompt profile: shorter search results
        self.outcomes = outcomes
        self.forecast_date = forecast_date
        self.memory = memory
        self.python_runner = python_runner
        # Wall-clock seconds of python this step may use in all (None: no budget), and how many it used.
        # A runner that takes ``timeout_s`` gets the rest of the budget as its call's timeout.
        self.python_seconds = python_seconds
        self.python_seconds_used = 0.0
        self._runner_takes_timeout = python_runner is not None and _takes_timeout(python_runner)
        # What the python sandbox's clock reads: the step's cutoff (midnight UTC of the date if not given).
        self.now = now or datetime(forecast_date.year, forecast_date.month, forecast_date.day, tzinfo=UTC)
        self.surfaced: set[str] = set()

    # ------------------------------------------------------------------ the tools

    def search(self, query: str, top_k: int = 10) -> ToolResult:
        """Search the news archive for documents available before the forecast date.

        Args:
            query: What to look for, in plain words (names, places, topics).
            top_k: How many results to return, from 1 to 20.
        """
        if not isinstance(query, str) or not query.strip():
            return ToolResult("", error="query must be a non-empty string")
        if len(query) > MAX_QUERY_CHARS:
            return ToolResult(
                "", error=f"query is {len(query)} characters long; the cap is {MAX_QUERY_CHARS}"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            return ToolResult("", error=f"top_k must be an integer from 1 to {MAX_TOP_K}")
        rows = self.view.search(query.strip(), top_k)
        corpus = self.view.corpus
        results, ids, latest = [], [], None
        for row, score in rows:
            doc_id = corpus.field("id", row)
            available = int(corpus.available_us[row])
            latest = available if latest is None else max(latest, available)
            ids.append(doc_id)
            hit = {
                "id": doc_id,
                "title": corpus.field("title", row) or "",
                "date": _day(int(self.view.published_us[row])),
                "source": corpus.field("source", row),
                "score": round(score, 4),
                "snippet": snippet(corpus.text(row)),
            }
            if self.compact:
                hit = {
                    "id": doc_id,
                    "date": hit["date"],
                    "title": hit["title"],
                    "snippet": snippet(corpus.text(row), COMPACT_SNIPPET_CHARS),
                }
            results.append(hit)
        self.surfaced.update(ids)
        content = compact_search_results(results) if self.compact else json.dumps(results, ensure_ascii=False)
        return ToolResult(content, doc_ids=tuple(ids), max_available_us=latest)

    def read(self, doc_id: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> ToolResult:
        """Read the full text of a document that a search in this step returned, one page at a time.

        Args:
            doc_id: The id of a search result.
            offset: Character offset to start from (use the previous page's next_offset).
            limit: Maximum number of characters to return, up to 20000.
        """
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
            return ToolResult("", error=f"offset must be an integer from 0 to {MAX_OFFSET}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_READ_CHARS:
            return ToolResult("", error=f"limit must be an integer from 1 to {MAX_READ_CHARS}")
        readable = isinstance(doc_id, str) and len(doc_id) <= MAX_DOC_ID_CHARS and doc_id in self.surfaced
        document = self.view.get(doc_id) if readable else None
        if document is None:
            return ToolResult("", error=UNIFORM_READ_ERROR)
        page = document.text[offset : offset + limit]
        end = offset + len(page)
        payload = {
            "id": document.doc_id,
            "title": document.title,
            "date": _day(document.published_us),
            "source": document.source,
            "url": document.url,
            "offset": offset,
            "text": page,
            "next_offset": end if end < len(document.text) else None,
        }
        return ToolResult(
            json.dumps(payload, ensure_ascii=False),
            doc_ids=(document.doc_id,),
            max_available_us=document.available_us,
        )

    def python(self, code: str) -> ToolResult:
        """Run Python code in an isolated sandbox (no network, no files, time and memory limits) and get its output.

        Args:
            code: A complete Python program; print what you want to see.
        """
        if not isinstance(code, str) or not code.strip():
            return ToolResult("", error="code must be a non-empty string")
        if len(code) > MAX_CODE_CHARS:
            return ToolResult("", error=f"code is {len(code)} characters long; the cap is {MAX_CODE_CHARS}")
        if self.python_runner is None:
            return ToolResult("", error="the python tool is disabled in this environment")
        if self.python_seconds is None:
            output, error = self.python_runner(code, self.now)
            return ToolResult(output, error=error)
        left = self.python_seconds - self.python_seconds_used
        if left <= 0:
            return ToolResult(
                "",
                error=f"the python time budget of this step ({self.python_seconds:g} s) is spent; "
                "nothing was run",
            )
        started = time.monotonic()
        try:
            if self._runner_takes_timeout:
                output, error = self.python_runner(code, self.now, timeout_s=left)
            else:
                output, error = self.python_runner(code, self.now)
        finally:
            self.python_seconds_used += time.monotonic() - started
        return ToolResult(output, error=error)

    def submit_forecast(
        self,
        probabilities: dict[str, float] | list[float] | None = None,
        log_odds: dict[str, float] | list[float] | None = None,
        evidence: list[list[str | float]] | None = None,
        notebook: dict | None = None,
        rationale: str | None = None,
        citations: list[str] | None = None,
        graph: dict | None = None,
    ) -> ToolResult:
        """Submit your final probability forecast for this step; this ends the step.

        Args:
            probabilities: Probability per outcome: {label: p} or a list in the listed order; sums to 1.
            log_odds: Or log odds per outcome, same forms; the forecast is their softmax.
            evidence: Or (added to log_odds, 0 each if not given) [label, log likelihood ratio] pairs, one per report weighed; the env sums them.
            notebook: Memory mode only: your belief notebook to carry to the next step (its description is rendered from forecast_dojo.notebook.SCHEMA).
            rationale: A short explanation of the forecast (logged, not scored).
            citations: Optional: the ids of the documents the forecast rests on (logged, not scored).
            graph: Optional: a small dated causal graph of your reasoning, {"events": [{"id", "date": "YYYY-MM-DD", "text"}], "links": [{"from", "to": an event id or "outcome", "sign": "+" or "-"}]} (logged, not scored).
        """
        citation_error = citations_error(citations)
        if citation_error is not None:
            return ToolResult("", error=f"{citation_error}; forecast not submitted")
        if graph is not None:
            try:
                parse_graph(graph)
            except UntrustedInputError as err:
                return ToolResult("", error=f"graph rejected, forecast not submitted: {err}")
        labels = None
        in_log_odds = log_odds is not None or evidence is not None
        if probabilities is None and not in_log_odds:
            return ToolResult("", error=f"{NO_FORECAST_ERROR}; forecast not submitted")
        if self.outcomes or in_log_odds:
            forecast, forecast_error = read_forecast(
                {"probabilities": probabilities, "log_odds": log_odds, "evidence": evidence}, self.outcomes
            )
        else:  # a free-form question: the agent proposes the outcomes
            proposal, forecast_error = read_free_form(probabilities)
            if proposal is not None and not proposal:
                proposal, forecast_error = None, "propose at least one outcome"
            forecast = tuple(proposal.values()) if proposal is not None else None
            labels = tuple(proposal) if proposal is not None else None
        parsed_notebook = None
        if self.memory == "notebook" and notebook is not None:
            # a notebook without an assessment carries the forecast this call records (uniform for an
            # invalid forecast of a fixed-outcome question, as the env records; none for a free-form one)
            kept = forecast if forecast is not None or not self.outcomes else uniform(len(self.outcomes))
            assessment = (  # rounded as the "forecast recorded" line reads it
                None
                if kept is None
                else dict(zip(labels or self.outcomes, round_distribution(kept), strict=True))
            )
            try:
                parsed_notebook = parse_notebook(
                    notebook, self.outcomes, forecast_date=self.forecast_date, forecast=assessment
                )
            except NotebookError as err:
                return ToolResult("", error=f"notebook rejected, forecast not submitted: {err}")
        if rationale is not None and not isinstance(rationale, str):
            rationale = json.dumps(rationale, ensure_ascii=False)
        if rationale is not None and len(rationale) > MAX_RATIONALE_CHARS:
            return ToolResult(
                "",
                error=f"rationale is {len(rationale)} characters long (the cap is {MAX_RATIONALE_CHARS}); "
                "forecast not submitted",
            )
        fallback = "the uniform distribution" if self.outcomes else "no forecast (score 0)"
        if forecast_error is not None:
            message = f"invalid forecast ({forecast_error}); {fallback} was recorded instead"
        elif in_log_odds and forecast is not None:  # say what the log odds came to
            recorded = ", ".join(f"{label} {p:.2f}" for label, p in zip(self.outcomes, forecast, strict=True))
            message = f"forecast recorded: {recorded}"
        else:
            message = "forecast recorded"
        return ToolResult(
            message,
            forecast=forecast,
            labels=labels,
            forecast_error=forecast_error,
            notebook=parsed_notebook,
            rationale=rationale,
            submitted=True,
        )

    # ------------------------------------------------------------------ plumbing

    def functions(self) -> dict[str, Callable[..., ToolResult]]:
        """Every tool by name, as bound methods of this toolbox."""
        return {name: getattr(self, name) for name in TOOL_NAMES}

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool by name with keyword arguments, turning every misuse into an error result."""
        return call_tool(self.functions(), name, arguments)


def call_tool(
    functions: dict[str, Callable[..., ToolResult]], name: str, arguments: dict[str, Any]
) -> ToolResult:
    """Run one of ``functions`` by name with keyword arguments, turning every misuse into an error result.

    Unknown tools, unexpected or missing arguments and any exception but a :class:`LeakageError` (which
    must stop the run) become a :class:`ToolResult` with an ``error``, never an exception.

    Args:
        functions: The tools by name (bound methods).
        name: The tool the agent called.
        arguments: Its decoded keyword arguments.

    Returns:
        The tool's result or the error.
    """
    function = functions.get(name)
    if function is None:
        return ToolResult("", error=f"unknown tool {preview(name)}; available: {', '.join(functions)}")
    signature = inspect.signature(function)
    unknown = sorted(set(arguments) - set(signature.parameters))
    if unknown:
        return ToolResult(
            "",
            error=f"{name} got unexpected argument(s) {preview(unknown)}; it takes {list(signature.parameters)}",
        )
    missing = [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty and p.name not in arguments
    ]
    if missing:
        return ToolResult("", error=f"{name} is missing required argument(s) {missing}")
    try:
        return function(**arguments)
    except LeakageError:
        raise
    except Exception as err:  # noqa: BLE001 - last resort: a tool bug must not end the episode
        logger.exception("tool %s failed", name)
        return ToolResult(
            "", error=f"{INTERNAL_ERROR_PREFIX} {name} ({type(err).__name__}); try other arguments"
        )


MEMORY_ONLY_PARAMETERS = {SUBMIT_FORECAST: ("notebook",)}
"""Parameters a tool offers only in memory-on mode (``memory="notebook"``)."""


@dataclass(frozen=True)
class ToolInterface:
    """What an agent is shown of one tool in one memory mode: the single source of its schema.

    Attributes:
        name: The tool's name.
        doc: Its Google-style docstring (description and ``Args:``), as the schema generator reads it.
        parameters: Its parameters (no ``self``), with defaults.
        hints: The parameters' type hints (no return hint: the schema describes only what a model writes).
    """

    name: str
    doc: str
    parameters: tuple[inspect.Parameter, ...]
    hints: dict[str, Any]

    def function(self, body: Callable[[Any, str, dict[str, Any]], Any]) -> Callable[..., Any]:
        """A method named like the tool, with its signature, type hints and docstring, running ``body``.

        Calling it as ``method(owner, *args, **kwargs)`` runs ``body(owner, name, arguments)`` where
        ``arguments`` maps parameter names to the values given (positional ones by the declared order;
        defaults are left to the tool, unknown keywords are passed on for the tool to refuse).

        Args:
            body: What a call does (e.g. one ``env.step`` with the call).

        Returns:
            The function; ``transformers.utils.get_json_schema`` of it (or of it bound to an instance)
            is exactly this tool's schema.
        """
        name = self.name
        names = [p.name for p in self.parameters]

        def method(owner: Any, *args: Any, **kwargs: Any) -> Any:
            if len(args) > len(names):
                raise TypeError(f"{name}() takes {len(names)} positional arguments, got {len(args)}")
            arguments = dict(zip(names, args, strict=False))
            repeated = sorted(set(arguments) & set(kwargs))
            if repeated:
                raise TypeError(f"{name}() got multiple values for {repeated}")
            arguments.update(kwargs)
            return body(owner, name, arguments)

        receiver = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        method.__name__ = method.__qualname__ = name
        method.__doc__ = self.doc
        method.__signature__ = inspect.Signature([receiver, *self.parameters])  # type: ignore[attr-defined]
        method.__annotations__ = dict(self.hints)
        return method


def _edit_argument(doc: str, argument: str, description: str | None) -> str:
    """A Google-style docstring with one argument's entry replaced by ``description`` (None: removed).

    The entry is its ``argument:`` line and any deeper-indented continuation lines.
    """
    out: list[str] = []
    skipping: int | None = None
    for line in doc.splitlines():
        indent = len(line) - len(line.lstrip())
        if skipping is not None:
            if line.strip() and indent > skipping:
                continue
            skipping = None
        if line.strip().startswith((f"{argument}:", f"{argument} (")):
            skipping = indent
            if description is not None:
                out.append(f"{line[:indent]}{argument}: {description}")
            continue
        out.append(line)
    return "\n".join(out)


def _rendered_descriptions(name: str, memory: str) -> dict[str, str]:
    """Parameter descriptions rendered from another module's single definition (the notebook's schema)."""
    if name == SUBMIT_FORECAST and memory == "notebook":
        return {
            "notebook": f"Memory mode only: your belief notebook to carry to the next step, {schema_words()}."
        }
    return {}


@functools.lru_cache(maxsize=16)
def tool_interface(name: str, memory: str = "none") -> ToolInterface:
    """The interface of tool ``name`` as memory mode ``memory`` shows it (see :class:`ToolInterface`).

    Args:
        name: One of :data:`TOOL_NAMES`.
        memory: ``"none"`` or ``"notebook"``; parameters in :data:`MEMORY_ONLY_PARAMETERS` appear only
            with ``"notebook"``.

    Returns:
        The interface, generated from the :class:`ForecastTools` method.
    """
    if name not in TOOL_NAMES:
        raise NotFoundError(f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}")
    method = getattr(ForecastTools, name)
    hidden = () if memory == "notebook" else MEMORY_ONLY_PARAMETERS.get(name, ())
    doc = inspect.getdoc(method) or ""
    for argument in hidden:
        doc = _edit_argument(doc, argument, None)
    for argument, description in _rendered_descriptions(name, memory).items():
        doc = _edit_argument(doc, argument, description)
    all_hints = typing.get_type_hints(method)
    parameters = tuple(
        p.replace(annotation=all_hints[p.name])
        for p in list(inspect.signature(method).parameters.values())[1:]
        if p.name not in hidden
    )
    hints = {p.name: all_hints[p.name] for p in parameters}
    return ToolInterface(name=name, doc=doc, parameters=parameters, hints=hints)


def _schema_only(owner: Any, name: str, arguments: dict[str, Any]) -> Any:
    raise TypeError(f"{name}: a schema template, not a callable tool")


@functools.lru_cache(maxsize=8)
def _tool_schemas_json(memory: str, enabled: tuple[str, ...]) -> str:
    return json.dumps(_generate_tool_schemas(memory, enabled))


def tool_schemas(memory: str = "none", enabled: tuple[str, ...] = TOOL_NAMES) -> list[dict[str, Any]]:
    """OpenAI-style tool schemas, generated from the tool methods' signatures and docstrings (cached)."""
    return json.loads(_tool_schemas_json(memory, tuple(enabled)))


def _generate_tool_schemas(memory: str, enabled: tuple[str, ...]) -> list[dict[str, Any]]:
    return [tool_schema(tool_interface(name, memory)) for name in TOOL_NAMES if name in enabled]


SCHEMA_CACHE_DIR = "tool-schemas"


def schema_cache_path(interface: ToolInterface) -> Path:
    """Where the generated schema of ``interface`` is cached: a file named by a digest of what it depends on.

    The digest covers the tool's name, docstring, parameters (names, kinds, defaults, type hints) and the
    installed transformers version (the generator), so any edit of a tool, or another generator, gets
    a new file and never a stale schema.
    """
    try:
        generator = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        generator = "absent"
    key = json.dumps(
        [
            interface.name,
            interface.doc,
            [
                (p.name, str(p.kind), repr(p.default), repr(interface.hints[p.name]))
                for p in interface.parameters
            ],
            generator,
        ]
    )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return cache_root() / SCHEMA_CACHE_DIR / f"{interface.name}-{digest}.json"


def tool_schema(interface: ToolInterface) -> dict[str, Any]:
    """The OpenAI-style schema ``transformers.utils.get_json_schema`` generates for ``interface`` (cached on disk).

    A cached file that cannot be read or parsed is regenerated; a cache that cannot be written (a
    read-only home) only costs the generation again next time.
    """
    path = schema_cache_path(interface)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(cached, dict) and cached.get("function", {}).get("name") == interface.name:
            return cached
    except (OSError, ValueError):
        pass
    from transformers.utils import get_json_schema

    schema: dict[str, Any] = get_json_schema(interface.function(_schema_only))
    # A concurrent reader sees the old file or the whole new one; a read-only cache costs the generation again.
    with contextlib.suppress(OSError):
        write_text_atomic(path, json.dumps(schema))
    return schema
