"""Reading agent-written values: cleaning, caps and the shape of JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_dojo.untrusted import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    UntrustedInputError,
    clean_text,
    loads,
    preview,
    to_json_value,
)


def test_clean_text_replaces_lone_surrogates_and_joins_pairs():
    assert clean_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert clean_text("\ud83d\ude00") == "\U0001f600"
    assert clean_text("plain été") == "plain été"


@given(st.text(st.characters(exclude_categories=())))
def test_clean_text_always_encodes(text):
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    assert len(cleaned) <= len(text)


def test_loads_decodes_escaped_surrogates_clean():
    assert loads('{"q": "\\ud800 x \\ud83d\\ude00"}', max_chars=100) == {"q": "\ufffd x \U0001f600"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "nested too deeply"),
        ("9" * (MAX_INT_DIGITS + 1), f"more than {MAX_INT_DIGITS} digits"),
        ("-" + "9" * 5000, f"more than {MAX_INT_DIGITS} digits"),
        ('{"p": NaN}', "NaN is not a JSON number"),
        ("[Infinity]", "Infinity is not a JSON number"),
        ("1e999", "inf is not a JSON number"),
        ("{", "not valid JSON"),
    ],
)
def test_loads_refusals_say_what_and_the_cap(text, message):
    with pytest.raises(UntrustedInputError, match=message):
        loads(text, max_chars=100_000)
    with pytest.raises(UntrustedInputError, match="is 101 characters long; the cap is 100"):
        loads("x" * 101, max_chars=100)


def test_to_json_value_shapes_python_objects():
    assert to_json_value({"a": (1, 2.5, None, True)}, max_chars=100) == {"a": [1, 2.5, None, True]}
    circular: list = []
    circular.append(circular)
    shared: list = []
    for _ in range(40):
        shared = [shared, shared]  # 2**40 nodes by reference, 40 levels deep
    for value, message in [
        ({1: "a"}, "a key of type int"),
        ({"a": {1}}, "a set of 1 items, which is not JSON"),
        ([b"x"], "a value of type bytes"),
        (circular, "nested too deeply"),
        (shared, "nested too deeply"),
        ({"a": "x" * 200}, "too long; the cap is 100 characters"),
        ([10**MAX_INT_DIGITS * 10], "digits"),
        ([float("nan")], "nan is not a JSON number"),
    ]:
        with pytest.raises(UntrustedInputError, match=message):
            to_json_value(value, max_chars=100)
    wide: list = [[]] * 30
    for _ in range(5):
        wide = [wide] * 30  # shallow but 30**6 nodes by reference: the size cap counts each
    with pytest.raises(UntrustedInputError, match="too long"):
        to_json_value(wide, max_chars=100_000)


def test_preview_is_short_and_never_raises():
    class Hostile:
        def __repr__(self):
            raise RuntimeError

        def __len__(self):
            raise RuntimeError

    assert preview("x" * 1000).endswith("\u2026'") and len(preview("x" * 1000)) < 90
    assert preview(10**5000) == "an integer of about 5000 digits"
    assert preview(Hostile()) == "a value of type Hostile"
    assert preview(["a", "b"]) == "['a', 'b']"
    assert json.dumps(preview("\ud800")).encode()
