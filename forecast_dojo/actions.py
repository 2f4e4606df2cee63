"""Parsing an agent's turn into text and tool calls.

An action is one assistant turn, either

* an OpenAI chat-format dict: ``{"role": "assistant", "content": ..., "tool_calls": [{"id": ...,
  "type": "function", "function": {"name": ..., "arguments": <dict or JSON string>}}], "usage": {...}}``
  (``usage`` with ``prompt_tokens``/``completion_tokens`` is optional and only logged), or
* a plain string in which each tool call is written as (the Hermes / Qwen convention, which TRL's
  chat templates emit)::

      <tool_call>{"name": "search", "arguments": {"query": "harbor reform vote"}}</tool_call>

Nothing here raises on bad input: every problem becomes an ``error`` that the env shows the agent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.messages import ChatMessage, chat_message, tool_call_message

TOOL_CALL_PATTERN = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
MAX_ACTION_CHARS = 200_000


@dataclass(frozen=True)
class ToolCall:
    """One requested call; ``arguments`` is None when they could not be decoded (see ``error``)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    error: str | None = None


@dataclass(frozen=True)
class ParsedAction:
    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def message(self) -> ChatMessage:
        """The canonical assistant message for the transcript (arguments as JSON strings, as OpenAI does)."""
        return chat_message(
            "assistant",
            self.content,
            tool_calls=[tool_call_message(c.id, c.name, c.raw_arguments) for c in self.tool_calls],
        )


def _decode_arguments(raw: Any) -> tuple[dict[str, Any] | None, str, str | None]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False, sort_keys=True), None
    if raw is None or raw == "":
        return {}, "{}", None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as err:
            return None, raw, f"arguments are not valid JSON ({err.msg} at position {err.pos})"
        if not isinstance(value, dict):
            return None, raw, "arguments must be a JSON object"
        return value, json.dumps(value, ensure_ascii=False, sort_keys=True), None
    return None, str(raw), f"arguments must be a JSON object, not {type(raw).__name__}"


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        k: int(v)
        for k, v in raw.items()
        if k in ("prompt_tokens", "completion_tokens") and isinstance(v, int) and v >= 0
    }


def _call(index: int, call_id: Any, name: Any, raw_arguments: Any, id_prefix: str) -> ToolCall:
    cid = call_id if isinstance(call_id, str) and call_id else f"{id_prefix}{index}"
    if not isinstance(name, str) or not name:
        return ToolCall(
            cid,
            str(name or ""),
            None,
            json.dumps(raw_arguments, default=str),
            "tool call has no function name",
        )
    arguments, raw, error = _decode_arguments(raw_arguments)
    return ToolCall(cid, name, arguments, raw, error)


def parse_text(text: str, id_prefix: str = "call_") -> ParsedAction:
    """Parse a plain-text turn with ``<tool_call>{json}</tool_call>`` blocks."""
    calls = []
    for index, match in enumerate(TOOL_CALL_PATTERN.finditer(text)):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError as err:
            calls.append(
                ToolCall(
                    f"{id_prefix}{index}",
                    "",
                    None,
                    match.group(1),
                    f"tool call is not valid JSON ({err.msg})",
                )
            )
            continue
        if not isinstance(payload, dict):
            calls.append(
                ToolCall(f"{id_prefix}{index}", "", None, match.group(1), "tool call must be a JSON object")
            )
            continue
        calls.append(
            _call(index, payload.get("id"), payload.get("name"), payload.get("arguments"), id_prefix)
        )
    content = TOOL_CALL_PATTERN.sub("", text).strip()
    return ParsedAction(content=content, tool_calls=tuple(calls))


def parse_action(action: Any, id_prefix: str = "call_") -> ParsedAction:
    """Turn an env action (dict or str) into a :class:`ParsedAction`; never raises."""
    if isinstance(action, str):
        if len(action) > MAX_ACTION_CHARS:
            return ParsedAction("", (), error=f"the turn is longer than {MAX_ACTION_CHARS} characters")
        return parse_text(action, id_prefix)
    if not isinstance(action, dict):
        return ParsedAction(
            "",
            (),
            error=f"an action must be an assistant message dict or a string, not {type(action).__name__}",
        )
    content = action.get("content") or ""
    if not isinstance(content, str):
        return ParsedAction("", (), error="the message 'content' must be a string")
    if len(content) > MAX_ACTION_CHARS:
        return ParsedAction("", (), error=f"the turn is longer than {MAX_ACTION_CHARS} characters")
    raw_calls = action.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return ParsedAction(content, (), _usage(action.get("usage")), error="'tool_calls' must be a list")
    if not raw_calls and TOOL_CALL_PATTERN.search(content):
        parsed = parse_text(content, id_prefix)
        return ParsedAction(parsed.content, parsed.tool_calls, _usage(action.get("usage")))
    calls = []
    for index, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            calls.append(
                ToolCall(
                    f"{id_prefix}{index}",
                    "",
                    None,
                    json.dumps(raw, default=str),
                    "tool call has no 'function' object",
                )
            )
            continue
        calls.append(_call(index, raw.get("id"), function.get("name"), function.get("arguments"), id_prefix))
    return ParsedAction(content.strip(), tuple(calls), _usage(action.get("usage")))
