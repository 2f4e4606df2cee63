"""Parsing an agent's turn into text and tool calls.

An action is one assistant turn, either

* an OpenAI chat-format dict: ``{"role": "assistant", "content": ..., "tool_calls": [{"id": ...,
  "type": "function", "function": {"name": ..., "arguments": <dict or JSON string>}}], "usage": {...}}``
  (``usage`` with ``prompt_tokens``/``completion_tokens`` is optional and only logged); the OpenAI
  client's message objects (anything with ``model_dump()``, e.g. ``ChatCompletionMessage``) and whole
  ``ChatCompletion`` responses (the first choice's message, with the response's ``usage``) are read
  as that dict; or
* a plain string in which each tool call is written as (the Hermes / Qwen convention, which TRL's
  chat templates emit)::

      <tool_call>{"name": "search", "arguments": {"query": "harbor reform vote"}}</tool_call>

Nothing here raises on any input: every problem becomes an ``error`` that the env shows the agent.
Every string the agent wrote is cleaned on the way in (lone surrogates become U+FFFD) and every
size is capped (:data:`MAX_ACTION_CHARS` for the whole turn, :data:`MAX_TOOL_CALLS_PER_TURN` calls,
:data:`MAX_NAME_CHARS` for a tool name, :data:`MAX_ID_CHARS` for a call id, nesting and numbers as in
:mod:`forecast_dojo.untrusted`), so nothing downstream ever sees a value it could fail on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.messages import ChatMessage, chat_message, tool_call_message
from forecast_dojo.untrusted import UntrustedInputError, clean_text, loads, preview, read_json, to_json_value

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
MAX_ACTION_CHARS = 200_000
MAX_TOOL_CALLS_PER_TURN = 32
MAX_NAME_CHARS = 64
MAX_ID_CHARS = 128


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
    """One assistant turn, read: its text, its tool calls, token usage, and a turn-level error."""

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
    """(arguments, their canonical JSON text, error) of a call's ``arguments`` (dict, JSON text or None)."""
    if raw is None or raw == "":
        return {}, "{}", None
    try:
        value = read_json(raw, max_chars=MAX_ACTION_CHARS, what="arguments")
    except UntrustedInputError as err:
        shown = clean_text(raw) if isinstance(raw, str) else f"<{type(raw).__name__}>"
        return None, shown, str(err)
    if not isinstance(value, dict):
        return None, json.dumps(value, ensure_ascii=False), "arguments must be a JSON object"
    return value, json.dumps(value, ensure_ascii=False), None  # the model's own key order, as it wrote it


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "constrained_tokens")
"""The token counts of an action's ``usage`` that reach the step record (``constrained_tokens``: of the
completion tokens, those a decoding constraint chose over the model's first choice; local constrained agents only)."""


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        k: int(v)
        for k, v in raw.items()
        if k in USAGE_KEYS and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53
    }


def _call(index: int, call_id: Any, name: Any, raw_arguments: Any, id_prefix: str) -> ToolCall:
    cid = (
        clean_text(call_id)
        if isinstance(call_id, str) and call_id and len(call_id) <= MAX_ID_CHARS
        else f"{id_prefix}{index}"
    )
    if not isinstance(name, str) or not name:
        _, raw, _ = _decode_arguments(raw_arguments)
        return ToolCall(cid, "", None, raw, "tool call has no function name")
    if len(name) > MAX_NAME_CHARS:
        _, raw, _ = _decode_arguments(raw_arguments)
        return ToolCall(
            cid,
            clean_text(name[:MAX_NAME_CHARS]),
            None,
            raw,
            f"tool name is {len(name)} characters long; the cap is {MAX_NAME_CHARS}",
        )
    arguments, raw, error = _decode_arguments(raw_arguments)
    return ToolCall(cid, clean_text(name), arguments, raw, error)


def _blocks(text: str) -> tuple[str, list[str]]:
    """The text outside ``<tool_call>...</tool_call>`` blocks and the blocks' payloads (linear time)."""
    outside, payloads, pos = [], [], 0
    while True:
        start = text.find(TOOL_CALL_OPEN, pos)
        if start < 0:
            break
        end = text.find(TOOL_CALL_CLOSE, start + len(TOOL_CALL_OPEN))
        if end < 0:
            break
        outside.append(text[pos:start])
        payloads.append(text[start + len(TOOL_CALL_OPEN) : end].strip())
        pos = end + len(TOOL_CALL_CLOSE)
    outside.append(text[pos:])
    return "".join(outside).strip(), payloads


def _too_many_calls(n: int) -> str:
    return (
        f"the turn has {n} tool calls; at most {MAX_TOOL_CALLS_PER_TURN} run per turn, the rest were ignored"
    )


def parse_text(text: str, id_prefix: str = "call_") -> ParsedAction:
    """Parse a plain-text turn with ``<tool_call>{json}</tool_call>`` blocks (never raises)."""
    text = clean_text(text)
    if len(text) > MAX_ACTION_CHARS:
        return ParsedAction(
            "", (), error=f"the turn is {len(text)} characters long; the cap is {MAX_ACTION_CHARS}"
        )
    content, payloads = _blocks(text)
    calls = []
    for index, payload_text in enumerate(payloads[:MAX_TOOL_CALLS_PER_TURN]):
        cid = f"{id_prefix}{index}"
        try:
            payload = loads(payload_text, max_chars=MAX_ACTION_CHARS, what="tool call")
        except UntrustedInputError as err:
            calls.append(ToolCall(cid, "", None, payload_text, str(err)))
            continue
        if not isinstance(payload, dict):
            calls.append(ToolCall(cid, "", None, payload_text, "tool call must be a JSON object"))
            continue
        calls.append(
            _call(index, payload.get("id"), payload.get("name"), payload.get("arguments"), id_prefix)
        )
    error = _too_many_calls(len(payloads)) if len(payloads) > MAX_TOOL_CALLS_PER_TURN else None
    return ParsedAction(content=content, tool_calls=tuple(calls), error=error)


def _as_dict(action: Any) -> Any:
    """An OpenAI client object (pydantic ``model_dump()``) or whole response as a plain message dict."""
    if not isinstance(action, (str, dict)) and callable(getattr(action, "model_dump", None)):
        action = action.model_dump()
    if isinstance(action, dict) and "choices" in action and "role" not in action:
        choices = action.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if isinstance(message, dict):
            return {**message, "usage": action.get("usage", message.get("usage"))}
    return action


def _content_text(content: Any) -> str | None:
    """The text of a message's ``content``: a string, None, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _parse_message(action: dict[str, Any], id_prefix: str) -> ParsedAction:
    usage = _usage(action.get("usage"))
    content = _content_text(action.get("content"))
    if content is None:
        return ParsedAction("", (), usage, error="the message 'content' must be a string")
    if len(content) > MAX_ACTION_CHARS:
        return ParsedAction(
            "", (), usage, error=f"the turn is {len(content)} characters long; the cap is {MAX_ACTION_CHARS}"
        )
    content = clean_text(content)
    raw_calls = action.get("tool_calls") or []
    if not isinstance(raw_calls, (list, tuple)):
        return ParsedAction(content.strip(), (), usage, error="'tool_calls' must be a list")
    if not raw_calls and TOOL_CALL_OPEN in content:
        parsed = parse_text(content, id_prefix)
        return ParsedAction(parsed.content, parsed.tool_calls, usage, parsed.error)
    try:
        # One size and shape check over everything the calls carry (strings, nesting, numbers, cycles).
        raw_calls = to_json_value(
            list(raw_calls), max_chars=MAX_ACTION_CHARS - len(content), what="tool_calls"
        )
    except UntrustedInputError as err:
        return ParsedAction(content.strip(), (), usage, error=str(err))
    calls = []
    for index, raw in enumerate(raw_calls[:MAX_TOOL_CALLS_PER_TURN]):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            calls.append(
                ToolCall(
                    f"{id_prefix}{index}",
                    "",
                    None,
                    json.dumps(raw, ensure_ascii=False),
                    "tool call has no 'function' object",
                )
            )
            continue
        calls.append(_call(index, raw.get("id"), function.get("name"), function.get("arguments"), id_prefix))
    error = _too_many_calls(len(raw_calls)) if len(raw_calls) > MAX_TOOL_CALLS_PER_TURN else None
    return ParsedAction(content.strip(), tuple(calls), usage, error)


def parse_action(action: Any, id_prefix: str = "call_") -> ParsedAction:
    """Turn an env action (str, dict, or OpenAI client message) into a :class:`ParsedAction`; never raises."""
    try:
        if isinstance(action, str):
            return parse_text(action, id_prefix)
        action = _as_dict(action)
        if not isinstance(action, dict):
            return ParsedAction(
                "",
                (),
                error="an action must be an assistant message (a dict or an OpenAI message object) or a string, "
                f"not {preview(action)}",
            )
        return _parse_message(action, id_prefix)
    except Exception as err:  # noqa: BLE001 - last resort: an object whose own methods fail
        return ParsedAction("", (), error=f"the action could not be read ({type(err).__name__})")
