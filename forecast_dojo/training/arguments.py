"""Argument types shared by the training scripts' dataclasses (parsed by ``transformers.HfArgumentParser``)."""

from __future__ import annotations

from typing import Any

from forecast_dojo.errors import UsageError
from forecast_dojo.schema import decode_json_text


class JsonObject(dict[str, Any]):
    """A ``dict`` that a command-line flag writes as a JSON object: ``--extra '{"bf16": true}'``.

    ``HfArgumentParser`` calls a field's type on the flag's text, so a ``dict``-typed field cannot be
    set from the command line; this type parses the text. In Python, pass a plain dict.

    Raises:
        ValueError: the text is not JSON or not a JSON object.
    """

    def __init__(self, value: str | dict[str, Any] | None = None) -> None:
        if isinstance(value, str):
            text = value
            value = decode_json_text(text, lambda err: UsageError(f"not JSON: {text!r} ({err})"))
            if not isinstance(value, dict):
                raise UsageError(f"expected a JSON object such as '{{\"bf16\": true}}', got {value!r}")
        super().__init__(value or {})
