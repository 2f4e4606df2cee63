"""The text the agent sees in world mode: the system prompt and each day's opening message.

Only what is known on the day goes in: the date, the open questions (as their text stood that day),
their outcomes (or that they are free-form), how many days each has been open, the agent's own
standing forecasts, the day's budget and, in memory mode, the memory files it wrote. Never an
answer, a resolution date, the number of days left or anything from ``Event.extra``.
"""

from __future__ import annotations

import json
from typing import Any

from forecast_dojo.world.spaces import OpenQuestion

MEMORY_PROMPT_CHARS = 8_000  # the most recent memory files shown in the day's prompt, at most this much text

WORLD_SYSTEM_PROMPT = """You are a careful forecaster living through a simulated calendar, one day at a time.

Rules:
- Each day you see only news available before that day begins; treat the day as "today". Later news does not exist for you.
- Several questions are open at once. Questions open on their own dates and leave the list once they resolve; you are never told the answers.
- Use the tools to research: search the news archive, read documents a search returned{python}; read_question shows a question's background and resolution criteria.
- Record or revise forecasts with submit_forecasts; you may update any subset of the open questions. A forecast stands until you revise it. For a question with listed outcomes give a probability for each (summing to 1); for a free-form question propose your own outcomes (probabilities summing to at most 1).
- Every open question is scored every day against the answer that becomes known later (1 - (1 - p(answer))^2 - sum of p(other)^2; no forecast scores 0), so a good forecast made early counts on every day it stands.
- Call next_day when you have used today's news; the day's budget ending also ends the day.
{memory_rule}
To call a tool, either use your tool-calling interface, or write one block per call in your reply:
<tool_call>{{"name": "submit_forecasts", "arguments": {{"forecasts": {{"question-id": {{"Yes": 0.6, "No": 0.4}}}}}}}}</tool_call>

Tools:
{tools}"""

MEMORY_RULES = {
    "none": "- Each day starts from scratch: nothing but your standing forecasts carries over.",
    "files": (
        "- Memory: each day starts from scratch except for your standing forecasts and your memory files. "
        "write_memory saves today's file (memory/YYYY-MM-DD.txt); the next days show your latest files and "
        "read_memory reads older ones. Only what you write carries over."
    ),
}


def world_system_prompt(memory: str, schemas: list[dict[str, Any]]) -> str:
    """The system message of world mode, with the tool schemas inlined as JSON.

    Args:
        memory: ``none`` or ``files``.
        schemas: The enabled tools' OpenAI schemas.

    Returns:
        The system text.
    """
    names = {schema["function"]["name"] for schema in schemas}
    return WORLD_SYSTEM_PROMPT.format(
        python=", run Python for calculations" if "python" in names else "",
        memory_rule=MEMORY_RULES[memory],
        tools="\n".join(json.dumps(schema["function"], ensure_ascii=False) for schema in schemas),
    )


def day_prompt(
    day: str,
    questions: list[OpenQuestion],
    forecasts: dict[str, dict[str, float]],
    budget: tuple[int, int],
    memory: str,
    memory_files: dict[str, str],
    *,
    note: str | None = None,
) -> str:
    """The user message that opens a day.

    Args:
        day: The date (``YYYY-MM-DD``).
        questions: The open questions (as in the observation).
        forecasts: The standing forecasts of the open questions.
        budget: (tool calls, turns) for the day.
        memory: ``none`` or ``files``.
        memory_files: The memory files written before today (memory mode).
        note: A line about the day before (e.g. that its budget ran out).

    Returns:
        The prompt text.
    """
    lines = [f"Today is {day}. You see only documents available before {day}T00:00:00Z.", ""]
    if note:
        lines += [note, ""]
    lines.append(f"Open questions ({len(questions)}):")
    for q in questions:
        kind = (
            "free-form: propose outcomes"
            if q["free_form"]
            else "outcomes: " + json.dumps(q["outcomes"], ensure_ascii=False)
        )
        opened = "opened today" if q["days_open"] == 0 else f"open for {q['days_open']} days"
        standing = forecasts.get(q["id"])
        mine = json.dumps(standing, ensure_ascii=False) if standing is not None else "none"
        lines.append(f"- [{q['id']}] {q['question']} ({kind}; {opened}; your forecast: {mine})")
    lines += [
        "",
        f"Budget for today: {budget[0]} research tool calls and {budget[1]} turns.",
    ]
    if memory == "files":
        lines.append("")
        if not memory_files:
            lines.append("Your memory files: (none yet)")
        else:
            shown: list[str] = []
            used = 0
            for name in sorted(memory_files, reverse=True):
                text = memory_files[name]
                if used + len(text) > MEMORY_PROMPT_CHARS and shown:
                    break
                shown.append(f"memory/{name}.txt:\n{text}")
                used += len(text)
            older = len(memory_files) - len(shown)
            lines.append(
                "Your latest memory files" + (f" ({older} older: read_memory)" if older else "") + ":"
            )
            lines += list(reversed(shown))
    return "\n".join(lines)
