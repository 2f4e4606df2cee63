"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests, examples and benchmarks (no model).

:class:`ScriptedChatServer` answers ``POST .../chat/completions`` as an OpenAI-compatible server would,
with native tool calls: the first turn of a forecast step searches once, every later turn submits the
uniform forecast over the outcomes the step's prompt lists. :func:`serve_scripted_chat` runs it in a
daemon thread. ``latency_s`` (a subclass attribute) delays each answer, a stand-in for a model's
generation time (``benchmarks/rollout_share.py``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


class ScriptedChatServer(BaseHTTPRequestHandler):
    """A stand-in for an OpenAI-compatible server: searches once per step, then submits uniform.

    ``requests`` collects every request body (with its ``path``); ``latency_s`` delays each answer.
    """

    requests: ClassVar[list[dict[str, Any]]] = []
    latency_s: ClassVar[float] = 0.0

    def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
        """One chat completion: a ``search`` call on a step's first turn, else a uniform ``submit_forecast``."""
        if self.latency_s:
            time.sleep(self.latency_s)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        messages = body["messages"]
        if messages[-1]["role"] == "user" and len(messages) == 2:
            call = {"name": "search", "arguments": json.dumps({"query": "latest news", "top_k": 3})}
        else:
            prompt = messages[1]["content"]
            match = re.search(r"exactly one will happen\): (\[.*\])", prompt)
            outcomes = json.loads(match.group(1)) if match else ["yes", "no"]
            probabilities = [1 / len(outcomes)] * len(outcomes)
            call = {"name": "submit_forecast", "arguments": json.dumps({"probabilities": probabilities})}
        reply = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": f"call_{len(self.requests)}", "type": "function", "function": call}
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


def serve_scripted_chat(
    handler: type[ScriptedChatServer] = ScriptedChatServer,
) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``handler`` on a free port of 127.0.0.1 in a daemon thread.

    Returns:
        The server (``shutdown()`` and ``server_close()`` it) and its OpenAI base URL (``.../v1``).
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="scripted-chat").start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
