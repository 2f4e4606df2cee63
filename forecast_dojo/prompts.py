"""The text the agent sees at the start of each forecast step.

Only fields of the event that are known before the question resolves go in here: never the outcome,
the resolution instant, the market series, the number of steps (unless an ablation asks for it) or
anything from ``Event.extra``. The prompt renders the observation's structured fields for language
models; agents that are not language models read those fields instead (nothing parses the prompt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from forecast_dojo.errors import ConfigError
from forecast_dojo.notebook import Notebook
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import iso


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
            raise ConfigError(f"max_python_seconds must be a positive number, got {self.max_python_seconds!r}")


SYSTEM_PROMPT = """You are a careful forecaster. You will forecast the outcome of a question as of a fixed forecast date.

Rules:
- You can only see news available before the forecast date; treat that date as "today".
{research_rule}
- Finish every step by calling submit_forecast with a probability for each outcome (they must sum to 1). Your forecast is scored with a proper scoring rule, so report your honest beliefs.
{memory_rules}
To call a tool, either use your tool-calling interface, or write one block per call in your reply:
{example_call}

Tools:
{tools}"""

MEMORY_RULES = {
    "none": "- Each forecast date starts from scratch: nothing from earlier dates is carried over.",
    "notebook": (
        "- Memory: nothing from earlier forecast dates is carried over except your belief notebook. Pass it as the "
        '`notebook` argument of submit_forecast: {"assessment": {label: probability}, "evidence": [{"claim": ..., '
        '"date": "YYYY-MM-DD", "doc_ids": [...]}], "open_questions": [...]}. Keep it short; it is capped in size.'
    ),
}


RESEARCH_TOOLS = {
    "search": "search the news archive",
    "read": "read documents that a search returned",
    "python": "run Python for calculations",
}


def research_rule(tool_names: list[str]) -> str:
    """The rule line that names exactly the research tools this env offers (none in a no-tools run)."""
    uses = [RESEARCH_TOOLS[name] for name in RESEARCH_TOOLS if name in tool_names]
    if not uses:
        return "- You have no research tools here: forecast from what you know as of the forecast date."
    listed = uses[0] if len(uses) == 1 else ", ".join(uses[:-1]) + ", and " + uses[-1]
    return f"- Use the tools to research: {listed}."


def system_prompt(memory: str, schemas: list[dict[str, Any]]) -> str:
    """The system message: rules, the memory mode's rules, the tool-call convention and the tool schemas."""
    names = [schema["function"]["name"] for schema in schemas]
    tools = "\n".join(json.dumps(schema["function"], ensure_ascii=False) for schema in schemas)
    example = (
        '<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>'
        if "search" in names
        else '<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": {...}}}</tool_call>'
    )
    return SYSTEM_PROMPT.format(
        memory_rules=MEMORY_RULES[memory],
        tools=tools,
        research_rule=research_rule(names),
        example_call=example,
    )


def step_prompt(
    event: Event,
    step: int,
    budgets: Budgets,
    memory: str,
    notebook: Notebook | None,
    notebook_note: str | None = None,
    *,
    show_episode_length: bool = False,
) -> str:
    """The user message that opens step ``step`` of ``event``.

    Args:
        event: The event.
        step: The forecast step.
        budgets: The per-step budgets.
        memory: ``none`` or ``notebook``.
        notebook: The notebook carried into the step (notebook mode).
        notebook_note: A note shown under the notebook (e.g. why none was carried).
        show_episode_length: Say "step k of n" (an ablation only: by default the prompt never says
            how many steps the episode has or which is the last, since an episode that ends early
            tells that the question resolved early).

    Returns:
        The prompt text.
    """
    cutoff = event.cutoffs[step]
    question, background, criteria = event.text_at(step)  # the texts as they stood at this cutoff
    lines = [
        f"Question: {question}",
        "",
        f"Possible outcomes (exactly one will happen): {json.dumps(list(event.outcomes), ensure_ascii=False)}",
    ]
    if background.strip():
        lines += ["", f"Background: {background.strip()}"]
    if criteria.strip():
        lines += ["", f"Resolution criteria: {criteria.strip()}"]
    lines += [
        "",
        f"Forecast date: {cutoff.date().isoformat()}"
        + (f" (step {step + 1} of {event.n_steps})" if show_episode_length else "")
        + f". You see only documents available before {iso(cutoff)}; later news does not exist for you.",
        # No close or resolution date: a market that closed early would reveal when (and so whether) it happened.
        f"Question opened: {event.open_at.date().isoformat()}.",
        f"Budget for this step: {budgets.max_tool_calls} tool calls and {budgets.max_turns} turns; then you must submit.",
        "Answer by calling submit_forecast with probabilities for "
        + ", ".join(json.dumps(o, ensure_ascii=False) for o in event.outcomes)
        + ".",
    ]
    if memory == "notebook":
        lines.append("")
        if notebook is None:
            lines.append("Your notebook from the previous forecast date: (none)")
        else:
            lines.append("Your notebook from the previous forecast date:")
            lines.append(notebook.to_json())
        if notebook_note:
            lines.append(notebook_note)
    return "\n".join(lines)
