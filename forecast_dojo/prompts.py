"""The text the agent sees at the start of each forecast step.

Only fields of the event that are known before the question resolves go in here: never the outcome,
the resolution instant, the market series, the number of steps (unless an ablation asks for it) or
anything from ``Event.extra``. The prompt renders the observation's structured fields for language
models; agents that are not language models read those fields instead (nothing parses the prompt).
"""

from __future__ import annotations

import json
from typing import Any

from forecast_dojo.budgets import Budgets
from forecast_dojo.errors import ConfigError
from forecast_dojo.notebook import Notebook, schema_shape
from forecast_dojo.schema import MAX_FREE_FORM_OUTCOMES, Event
from forecast_dojo.timeutil import iso

__all__ = [
    "PROMPT_PROFILES",
    "Budgets",
    "check_profile",
    "research_rule",
    "step_prompt",
    "system_prompt",
]

# "default": the full text for large models (rules in words, the tool schemas inlined as JSON).
# "compact": for small models (<= 400 SmolLM2 tokens before any tool result): one line per tool, the
# schemas reach the model only through ``tools=`` / the chat template, compact search results.
PROMPT_PROFILES = ("default", "compact")


# A free-form question (no listed outcomes): what the step prompt says instead of the outcome list.
FREE_FORM_OUTCOMES = (
    "Free-form question: no outcomes are listed. Propose the answers you consider possible "
    f"(at most {MAX_FREE_FORM_OUTCOMES}), each with its probability; they may sum to less than 1 "
    "(the rest is 'something else'), never more."
)
FREE_FORM_ANSWER = (
    'Answer by calling submit_forecast with probabilities as an object {"your proposed answer": p, ...}. '
    "Score: 1 - (1 - p(the answer))^2 - the sum of p^2 over your other proposals."
)
FREE_FORM_COMPACT = f"Outcomes: free-form; propose up to {MAX_FREE_FORM_OUTCOMES} answers as {{answer: p}}, summing to at most 1"


def check_profile(profile: str) -> str:
    """``profile`` if it is one of :data:`PROMPT_PROFILES`, else a ConfigError naming them."""
    if profile not in PROMPT_PROFILES:
        raise ConfigError(f"prompt must be one of {PROMPT_PROFILES}, not {profile!r}")
    return profile


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
        f"`notebook` argument of submit_forecast: {schema_shape()}. Keep it short; it is capped in size."
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


COMPACT_SYSTEM_PROMPT = """Only news before the forecast date exists. Proper scoring: give honest probabilities.
{tools_rule}
{tools}{memory_rule}"""

COMPACT_MEMORY_RULES = {
    "none": "",
    "notebook": f"\nThe next date sees only submit_forecast's notebook: {schema_shape(compact=True)}",
}
SUBMIT_PURPOSE = "ends the step"


def tool_line(schema: dict[str, Any]) -> str:
    """One line for a tool: ``- name(required, optional?): what it is for``."""
    function = schema["function"]
    parameters = function.get("parameters", {})
    required = set(parameters.get("required", []))
    arguments = ", ".join(
        name if name in required else f"{name}?" for name in parameters.get("properties", {})
    )
    name = function["name"]
    purpose = RESEARCH_TOOLS.get(name) or (SUBMIT_PURPOSE if name == "submit_forecast" else None)
    if purpose is None:  # a tool this module has no phrase for: the first sentence of its description
        purpose = function.get("description", "").strip().split(". ")[0].rstrip(".")
    return f"- {name}({arguments}): {purpose}"


def system_prompt(memory: str, schemas: list[dict[str, Any]], profile: str = "default") -> str:
    """The system message of a prompt profile.

    ``default``: rules, the memory mode's rules, the tool-call convention and the tool schemas as JSON.
    ``compact``: a few lines, one per tool (its schema reaches the model through ``tools=``, never twice).

    Args:
        memory: ``none`` or ``notebook``.
        schemas: the enabled tools' OpenAI schemas.
        profile: one of :data:`PROMPT_PROFILES`.

    Returns:
        The system text.
    """
    if check_profile(profile) == "compact":
        return compact_system_prompt(memory, schemas)
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


def compact_system_prompt(memory: str, schemas: list[dict[str, Any]]) -> str:
    """The compact profile's system message (see :func:`system_prompt`)."""
    names = [schema["function"]["name"] for schema in schemas]
    tools_rule = (
        'Tools, called as <tool_call>{"name": ..., "arguments": {...}}</tool_call>:'
        if any(name != "submit_forecast" for name in names)
        else 'No research tools here: answer with <tool_call>{"name": "submit_forecast", "arguments": {...}}</tool_call>:'
    )
    return COMPACT_SYSTEM_PROMPT.format(
        tools_rule=tools_rule,
        tools="\n".join(tool_line(schema) for schema in schemas),
        memory_rule=COMPACT_MEMORY_RULES[memory],
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
    profile: str = "default",
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
        profile: one of :data:`PROMPT_PROFILES` (``compact``: the same facts in fewer words).

    Returns:
        The prompt text.
    """
    compact = check_profile(profile) == "compact"
    lines = (_compact_lines if compact else _default_lines)(event, step, budgets, show_episode_length)
    if memory == "notebook":
        if compact:
            lines.append("Notebook: " + ("(none)" if notebook is None else notebook.to_json(drop_empty=True)))
        elif notebook is None:
            lines += ["", "Your notebook from the previous forecast date: (none)"]
        else:
            lines += ["", "Your notebook from the previous forecast date:", notebook.to_json()]
        if notebook_note:
            lines.append(notebook_note)
    return "\n".join(lines)


def _default_lines(event: Event, step: int, budgets: Budgets, show_episode_length: bool) -> list[str]:
    """The default profile's step prompt up to the notebook."""
    cutoff = event.cutoffs[step]
    question, background, criteria = event.text_at(step)  # the texts as they stood at this cutoff
    lines = [
        f"Question: {question}",
        "",
        FREE_FORM_OUTCOMES
        if event.free_form
        else f"Possible outcomes (exactly one will happen): {json.dumps(list(event.outcomes), ensure_ascii=False)}",
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
        FREE_FORM_ANSWER
        if event.free_form
        else "Answer by calling submit_forecast with probabilities for "
        + ", ".join(json.dumps(o, ensure_ascii=False) for o in event.outcomes)
        + ".",
    ]
    return lines


def _compact_lines(event: Event, step: int, budgets: Budgets, show_episode_length: bool) -> list[str]:
    """The compact profile's step prompt up to the notebook: the facts of the default one, nothing else."""
    cutoff = event.cutoffs[step]
    question, background, criteria = event.text_at(step)
    labels = ", ".join(json.dumps(o, ensure_ascii=False) for o in event.outcomes)
    lines = [f"Question: {question}", FREE_FORM_COMPACT if event.free_form else f"Outcomes: {labels}"]
    if background.strip():
        lines.append(f"Background: {background.strip()}")
    if criteria.strip():
        lines.append(f"Resolution: {criteria.strip()}")
    midnight = (cutoff.hour, cutoff.minute, cutoff.second, cutoff.microsecond) == (0, 0, 0, 0)
    lines += [
        # No close or resolution date, as in the default profile (nor, to save tokens, the opening date).
        f"Forecast date: {cutoff.date().isoformat() if midnight else iso(cutoff)}"
        + (f" (step {step + 1} of {event.n_steps})" if show_episode_length else "")
        + ".",
        f"Budget: {budgets.max_tool_calls} tool calls, {budgets.max_turns} turns.",
    ]
    return lines
