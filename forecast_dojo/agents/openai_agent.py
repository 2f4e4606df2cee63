"""An agent for any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, llama.cpp server, hosted APIs).

Each turn sends the current step's transcript (what ``env.conversation()`` holds, rebuilt from the
observations) with the env's tool schemas, and returns the server's assistant message as an env
action with its token usage. Two tool modes:

* ``native`` (default): tools go in the request's ``tools`` field and the server returns
  ``tool_calls``; tool results go back as ``role: tool`` messages.
* ``text``: no ``tools`` field; the model calls tools with ``<tool_call>{json}</tool_call>`` blocks in its
  text, as the env's system prompt describes, and tool results go back as user messages wrapped in
  ``<tool_response>`` (the rendering of ``agents.llm.TOOL_CHAT_TEMPLATE``). This works with any chat
  template (e.g. llama.cpp's plain ``chatml``), including servers without tool-call parsing.

Outgoing messages are cleaned for strict servers by :func:`to_openai_messages` (no ``tool_calls: []``,
no ``name: null``, arguments as JSON strings). Transient failures (429, 5xx, timeouts, connection
errors, empty ``choices``) are retried with exponential backoff; a request that still fails becomes an
empty assistant turn (the env answers it with a notice, and its budget ends the step with the
uniform fallback), counted in :attr:`OpenAIAgent.failures`. Nothing a server returns raises.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.agents.base import ConversationAgent
from forecast_dojo.errors import ConfigError
from forecast_dojo.spaces import Observation

TOOL_MODES = ("native", "text")
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach and sample from an OpenAI-compatible server.

    Attributes:
        base_url: the server's ``/v1`` URL, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server expects.
        api_key: the key (servers on 127.0.0.1 usually accept any); ``None`` reads ``OPENAI_API_KEY``.
        temperature: sampling temperature.
        max_tokens: completion tokens per turn.
        timeout_s: seconds per request before it counts as a (retryable) timeout.
        max_retries: retries of a transient failure before the turn is given up.
        backoff_s: first backoff; doubled on each retry (capped at 30 s).
        concurrency: requests in flight at once to this ``base_url`` (shared by all agents in the process).
        tool_mode: ``native`` or ``text`` (see module docstring).
        seed: optional sampling seed sent to the server.
        extra_body: extra JSON fields for the request (server-specific options).
    """

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    concurrency: int = 4
    tool_mode: str = "native"
    seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tool_mode not in TOOL_MODES:
            raise ConfigError(f"tool_mode must be one of {TOOL_MODES}, not {self.tool_mode!r}")
        if self.concurrency < 1 or self.max_retries < 0 or self.max_tokens < 1:
            raise ConfigError("concurrency and max_tokens must be >= 1, max_retries >= 0")


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def to_openai_messages(
    messages: Sequence[Mapping[str, Any]], tool_mode: str = "native"
) -> list[dict[str, Any]]:
    """Messages as a strict OpenAI-compatible server accepts them.

    Keeps only the keys the API defines for each role and drops empty or null ones (no
    ``tool_calls: []``, no ``name: null``); tool-call arguments become JSON strings. In ``text`` mode,
    assistant tool calls are written into the content as ``<tool_call>`` blocks and tool results
    become user messages wrapped in ``<tool_response>``, so no tool fields remain at all.

    Args:
        messages: chat messages in the env's form (``role``, ``content``, ``tool_calls``,
            ``tool_call_id``, ``name``; extra keys are ignored).
        tool_mode: ``native`` or ``text``.

    Returns:
        New message dicts; the input is not modified.
    """
    if tool_mode not in TOOL_MODES:
        raise ConfigError(f"tool_mode must be one of {TOOL_MODES}, not {tool_mode!r}")
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "assistant":
            calls = [c for c in (message.get("tool_calls") or []) if isinstance(c, dict)]
            if tool_mode == "text":
                blocks = [
                    "<tool_call>"
                    + json.dumps(
                        {
                            "name": (c.get("function") or {}).get("name", ""),
                            "arguments": _decoded((c.get("function") or {}).get("arguments")),
                        },
                        ensure_ascii=False,
                    )
                    + "</tool_call>"
                    for c in calls
                ]
                out.append({"role": "assistant", "content": "\n".join([content, *blocks]).strip()})
                continue
            clean: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                clean["tool_calls"] = [
                    {
                        "id": c.get("id") or f"call_{index}",
                        "type": "function",
                        "function": {
                            "name": (c.get("function") or {}).get("name", ""),
                            "arguments": _arguments_text((c.get("function") or {}).get("arguments")),
                        },
                    }
                    for index, c in enumerate(calls)
                ]
            out.append(clean)
        elif role == "tool":
            if tool_mode == "text" or not message.get("tool_call_id"):
                out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
            else:
                out.append({"role": "tool", "tool_call_id": str(message["tool_call_id"]), "content": content})
        elif role in ("system", "user", "developer"):
            out.append({"role": role, "content": content})
        else:
            out.append({"role": "user", "content": content})
    return out


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments if arguments is not None else {}


def message_to_action(message: Any, usage: Any = None) -> dict[str, Any]:
    """A chat-completions message (the client's object or a dict) and its usage as an env action dict.

    Tool calls without an id get a fresh unique one, so the transcript the agent keeps and the one
    the env logs name the same calls. A refusal with no content becomes the content.

    Args:
        message: ``response.choices[0].message`` (``ChatCompletionMessage``) or an equivalent dict.
        usage: ``response.usage`` (object or dict) or None.

    Returns:
        ``{"role": "assistant", "content", "tool_calls"?, "usage"?}``.
    """
    data = message.model_dump() if hasattr(message, "model_dump") else dict(message or {})
    content = data.get("content")
    if not isinstance(content, str) or not content:
        content = data.get("refusal") if isinstance(data.get("refusal"), str) else ""
    action: dict[str, Any] = {"role": "assistant", "content": content}
    calls = []
    for raw in data.get("tool_calls") or []:
        if not isinstance(raw, dict):
            continue
        function = raw.get("function")
        if not isinstance(function, dict):
            function = {}
        calls.append(
            {
                "id": raw.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": function.get("name"), "arguments": function.get("arguments")},
            }
        )
    if calls:
        action["tool_calls"] = calls
    if usage is not None:
        numbers = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        action["usage"] = {
            k: int(numbers[k])
            for k in ("prompt_tokens", "completion_tokens")
            if isinstance(numbers.get(k), int)
        }
    return action


def _semaphore(base_url: str, limit: int) -> threading.BoundedSemaphore:
    with _semaphores_lock:
        return _semaphores.setdefault((base_url, limit), threading.BoundedSemaphore(limit))


class OpenAIAgent(ConversationAgent):
    """Chat-completions agent (see module docstring); thread-safe to run one instance per episode in parallel.

    Args:
        config: server and sampling settings.
        tools: the env's tool schemas (``env.tool_schemas()``); sent in ``native`` mode.
        name: the agent's name in logs and tables.
        client: an ``openai.OpenAI``-like client (default: one built from ``config``).
    """

    def __init__(
        self,
        config: OpenAIConfig,
        tools: list[dict[str, Any]] | None = None,
        *,
        name: str | None = None,
        client: Any = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.tools = list(tools or [])
        self.name = name or f"openai:{config.model}"
        self.failures: list[str] = []
        self.retries = 0
        self.requests = 0
        if client is None:
            import openai

            client = openai.OpenAI(
                base_url=config.base_url,
                api_key=config.api_key or _env_key(),
                timeout=config.timeout_s,
                max_retries=0,  # retried here, with our own backoff and accounting
            )
        self.client = client

    def request(self) -> dict[str, Any]:
        """The keyword arguments of the next ``chat.completions.create`` call."""
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": to_openai_messages(self.messages, self.config.tool_mode),
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if self.config.tool_mode == "native" and self.tools:
            kwargs["tools"] = self.tools
        if self.config.seed is not None:
            kwargs["seed"] = self.config.seed
        if self.config.extra_body:
            kwargs["extra_body"] = dict(self.config.extra_body)
        return kwargs

    def respond(self, observation: Observation) -> dict[str, Any]:
        """One completion for the step transcript so far, as an env action (never raises on server errors)."""
        kwargs = self.request()
        delay = self.config.backoff_s
        last_error = "no attempt"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self.retries += 1
                time.sleep(min(delay, 30.0))
                delay *= 2
            self.requests += 1
            try:
                with _semaphore(self.config.base_url, self.config.concurrency):
                    response = self.client.chat.completions.create(**kwargs)
            except Exception as err:  # noqa: BLE001 - classified below; nothing a server does may crash a run
                last_error = f"{type(err).__name__}: {err}"[:500]
                if _retryable(err):
                    continue
                break
            choices = getattr(response, "choices", None) or []
            if not choices or getattr(choices[0], "message", None) is None:
                last_error = "the server returned no choices"
                continue
            return message_to_action(choices[0].message, getattr(response, "usage", None))
        self.failures.append(last_error)
        return {"role": "assistant", "content": ""}


def _retryable(err: Exception) -> bool:
    import openai

    if isinstance(err, openai.APITimeoutError | openai.APIConnectionError):
        return True
    status = getattr(err, "status_code", None)
    return isinstance(status, int) and (status in RETRYABLE_STATUS or status >= 500)


def _env_key() -> str:
    import os

    return os.environ.get("OPENAI_API_KEY") or "EMPTY"
