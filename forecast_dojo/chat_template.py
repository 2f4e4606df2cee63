"""The chat template of local models: ChatML with ``<tool_call>`` blocks, shared by generation and training.

Small local models (SmolLM2 ships without tool support in its template) see tools in the system
prompt the env writes and call them with ``<tool_call>{json}</tool_call>`` blocks, which the env
parses. :data:`TOOL_CHAT_TEMPLATE` renders a transcript (including logged trajectories, whose tool
arguments are dicts) in exactly that ChatML form, so generation
(:class:`~forecast_dojo.agents.llm.TransformersAgent`), the SFT export and training
(:mod:`forecast_dojo.training`) see the same text. It depends on nothing else in the package.
"""

from __future__ import annotations

# ChatML with tool calls written as <tool_call> blocks and tool results as <tool_response> blocks.
# Each assistant turn's text, calls and closing <|im_end|> sit inside {% generation %} ... {% endgeneration %},
# so ``return_assistant_tokens_mask=True`` (TRL's ``assistant_only_loss=True``) marks exactly the tokens the
# model writes; the markers render nothing.
TOOL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- generation -%}"
    "{{ message['content'] or '' }}"
    "{%- if message.get('tool_calls') -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set arguments = call['function']['arguments'] -%}"
    "{{ ('\\n' if (message['content'] or loop.index0 > 0) else '') + '<tool_call>{\"name\": \"' + call['function']['name'] + '\", \"arguments\": ' }}"
    "{{- (arguments if arguments is string else (arguments | tojson)) + '}</tool_call>' }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>' }}"
    "{%- endgeneration -%}"
    "{{ '\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

# What ends an assistant turn in this template: the end-of-turn token, or (one call per turn) the close of a call.
END_OF_TURN = "<|im_end|>"
END_OF_CALL = "</tool_call>"

__all__ = ["END_OF_CALL", "END_OF_TURN", "TOOL_CHAT_TEMPLATE"]
