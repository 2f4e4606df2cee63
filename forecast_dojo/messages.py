"""Chat messages: one shape and one constructor for every message the env, the parser and the log handle.

A message has exactly the keys ``role``, ``content``, ``tool_calls``, ``tool_call_id`` and ``name``
(the OpenAI chat format with the optional keys always present, which is also what ``datasets`` needs
to load a log with one schema). Build messages with :func:`chat_message`; never hand-write the dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from forecast_dojo.untrusted import UntrustedInputError, loads

Role = Literal["system", "user", "assistant", "tool"]


class FunctionCall(TypedDict):
    """The ``function`` part of a tool call: a name and its arguments (a JSON string or a decoded dict)."""

    name: str
    arguments: Any


class ToolCallMessage(TypedDict):
    """One tool call inside an assistant message (OpenAI chat format)."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(TypedDict):
    """One chat message with all five keys present (``None`` where a key does not apply)."""

    role: Role
    content: str
    tool_calls: list[ToolCallMessage] | None
    tool_call_id: str | None
    name: str | None


def chat_message(
    role: Role,
    content: str,
    *,
    tool_calls: list[ToolCallMessage] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
) -> ChatMessage:
    """Build a chat message.

    Args:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: The message text.
        tool_calls: The calls of an assistant turn, if any.
        tool_call_id: For a tool message, the id of the call it answers.
        name: For a tool message, the tool's name.

    Returns:
        The message, with all five keys.
    """
    return {
        "role": role,
        "content": content,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "name": name,
    }


def tool_call_message(call_id: str, name: str, arguments: Any) -> ToolCallMessage:
    """One tool call of an assistant message.

    Args:
        call_id: The call's id (tool results refer to it).
        name: The tool's name.
        arguments: A JSON string (as OpenAI sends) or a decoded dict (as chat templates render).

    Returns:
        The tool call in OpenAI chat format.
    """
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def decoded_arguments(arguments: Any) -> Any:
    """Tool-call arguments as chat templates expect them: a dict when they are a JSON object, else as sent.

    Args:
        arguments: The arguments as the agent wrote them.

    Returns:
        A dict for a JSON object (or a dict already), otherwise ``arguments`` unchanged.
    """
    if isinstance(arguments, str):
        try:  # as the env read them: clean strings, bounded nesting and numbers, strict JSON
            value = loads(arguments, max_chars=max(len(arguments), 1))
        except UntrustedInputError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments


def normalize_message(message: Mapping[str, Any]) -> ChatMessage:
    """A message with exactly the five keys and tool-call arguments decoded (the form the log stores).

    Tool-call arguments are stored decoded (a dict), the form TRL and Hugging Face chat templates
    render; ``datasets`` keeps their mixed shapes exactly (a ``Json`` feature).

    Args:
        message: Any chat message dict (missing optional keys are allowed).

    Returns:
        The normalized message.
    """
    calls = message.get("tool_calls") or None
    if calls is not None:
        calls = [
            tool_call_message(c["id"], c["function"]["name"], decoded_arguments(c["function"]["arguments"]))
            for c in calls
        ]
    return chat_message(
        message["role"],
        message.get("content") or "",
        tool_calls=calls,
        tool_call_id=message.get("tool_call_id"),
        name=message.get("name"),
    )
