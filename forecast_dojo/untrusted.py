"""Reading values a model wrote: text, JSON and Python objects that may be hostile.

Everything an agent writes enters the library through :mod:`forecast_dojo.actions` (and, for the
notebook, :mod:`forecast_dojo.notebook`), which pass it through these functions first, so nothing
downstream ever sees

* a lone UTF-16 surrogate (it becomes U+FFFD: no encoder, tokenizer or log writer fails on it),
* nesting deeper than :data:`MAX_DEPTH` (no recursion limit is reached),
* an integer with more than :data:`MAX_INT_DIGITS` digits, or a NaN or infinite number (no
  ``int``/``str`` conversion limit, no float overflow, every value is strict JSON),
* a value that is not JSON (sets, bytes, objects, non-string keys, circular containers), or
* more than a given number of characters in all (shared structures count every time they occur).

Each violation raises :class:`UntrustedInputError` whose message says what to fix and states the cap.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

from forecast_dojo.errors import UntrustedInputError as UntrustedInputError

MAX_DEPTH = 32
MAX_INT_DIGITS = 100
PREVIEW_CHARS = 80


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a surrogate pair becomes its character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short, always-printable description of ``value`` for an error message (never raises).

    Strings are quoted and cut to ``limit`` characters; numbers too long to print are described by
    their size; other values by their type (and length).
    """
    try:
        if isinstance(value, str):
            text = clean_text(value)
            return repr(text if len(text) <= limit else text[:limit] + "\u2026")
        if isinstance(value, bool) or value is None:
            return repr(value)
        if isinstance(value, int):
            if value.bit_length() > 14_000:  # beyond Python's 4,300-digit str() limit
                return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
            text = str(value)
            return text if len(text) <= limit else f"an integer of {len(text.lstrip('-'))} digits"
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, (list, tuple, dict, set, frozenset)):
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value[:10]):
                shown = ", ".join(preview(v, max(8, limit // 4)) for v in value[:10])
                text = f"[{shown}{', ...' if len(value) > 10 else ''}]"
                if len(text) <= 2 * limit:
                    return text
            return f"a {type(value).__name__} of {len(value)} items"
        return f"a value of type {type(value).__name__}"
    except Exception:  # noqa: BLE001 - describing a hostile object must never fail
        return "an unprintable value"


def _reject_constant(token: str) -> Any:
    raise UntrustedInputError(f"{token} is not a JSON number; write a finite number")


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise UntrustedInputError(f"a number has more than {MAX_INT_DIGITS} digits")
    return int(digits)


def loads(text: str, *, max_chars: int, what: str = "value") -> Any:
    """Decode agent-written JSON text into a clean JSON value (see :func:`to_json_value`).

    Raises:
        UntrustedInputError: not JSON, too long, too deep, NaN/Infinity, a number over
            :data:`MAX_INT_DIGITS` digits, or the decoded value breaks :func:`to_json_value`'s rules.
    """
    if len(text) > max_chars:
        raise UntrustedInputError(f"{what} is {len(text)} characters long; the cap is {max_chars}")
    text = clean_text(text)
    try:
        value = json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise UntrustedInputError(f"{what}: not valid JSON ({err.msg} at position {err.pos})") from None
    except UntrustedInputError as err:
        raise UntrustedInputError(f"{what}: {err}") from None
    except RecursionError:
        raise UntrustedInputError(f"{what}: nested too deeply; the cap is {MAX_DEPTH} levels") from None
    except ValueError as err:  # e.g. a number the float parser refuses
        raise UntrustedInputError(f"{what}: not valid JSON ({err})") from None
    return to_json_value(value, max_chars=max_chars, what=what)


def read_json(value: Any, *, max_chars: int, what: str = "value") -> Any:
    """A clean JSON value from JSON text (:func:`loads`) or from an already decoded value (:func:`to_json_value`).

    Raises:
        UntrustedInputError: as those two do.
    """
    if isinstance(value, str):
        return loads(value, max_chars=max_chars, what=what)
    return to_json_value(value, max_chars=max_chars, what=what)


def to_json_value(value: Any, *, max_chars: int, what: str = "value") -> Any:
    """A copy of ``value`` built only of plain JSON values, with clean strings.

    Plain JSON values: ``dict`` (string keys), ``list``, ``str``, finite ``float``, ``int`` of at most
    :data:`MAX_INT_DIGITS` digits, ``bool`` and ``None``.

    Tuples become lists; other numbers (numpy scalars) become ``int``/``float``. The size counts one
    per node plus every string's length and must stay within ``max_chars``; nesting within
    :data:`MAX_DEPTH`. Circular containers hit the depth cap.

    Raises:
        UntrustedInputError: with a message that names the problem and the cap.
    """
    budget = [max_chars]

    def spend(n: int) -> None:
        budget[0] -= n
        if budget[0] < 0:
            raise UntrustedInputError(f"{what}: too long; the cap is {max_chars} characters")

    def walk(item: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise UntrustedInputError(f"{what}: nested too deeply; the cap is {MAX_DEPTH} levels")
        spend(1)
        if item is None or isinstance(item, bool):
            return item
        if isinstance(item, str):
            spend(len(item))
            return clean_text(str.__str__(item))
        if isinstance(item, int):
            if item.bit_length() > MAX_INT_DIGITS * 3.33:
                raise UntrustedInputError(f"{what}: a number has more than {MAX_INT_DIGITS} digits")
            return int(item)
        if isinstance(item, float) or (
            isinstance(item, numbers.Real) and not isinstance(item, numbers.Integral)
        ):
            number = float(item)
            if not math.isfinite(number):
                raise UntrustedInputError(f"{what}: {number} is not a JSON number; write a finite number")
            return number
        if isinstance(item, numbers.Integral):
            return walk(int(item), depth)
        if isinstance(item, dict):
            out = {}
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise UntrustedInputError(
                        f"{what}: a key of type {type(key).__name__}; JSON object keys are strings"
                    )
                spend(len(key))
                out[clean_text(str.__str__(key))] = walk(sub, depth + 1)
            return out
        if isinstance(item, (list, tuple)):
            return [walk(sub, depth + 1) for sub in item]
        raise UntrustedInputError(f"{what}: {preview(item)}, which is not JSON")

    try:
        return walk(value, 0)
    except RecursionError:  # only reachable when called already deep in the stack
        raise UntrustedInputError(f"{what}: nested too deeply; the cap is {MAX_DEPTH} levels") from None
