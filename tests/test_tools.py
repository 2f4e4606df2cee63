"""Tool helpers: snippets and generated schemas."""

from __future__ import annotations

import inspect

from forecast_dojo.tools import TOOL_NAMES, ForecastTools, snippet, tool_schemas


def test_snippet_cuts_at_a_sentence_end_within_500_characters():
    text = "First sentence here. " * 30
    cut = snippet(text)
    assert len(cut) <= 500 and cut.endswith("here.")
    assert snippet("Short text.") == "Short text."
    unbroken = "word " * 200
    assert len(snippet(unbroken)) <= 500 and snippet(unbroken).endswith("\u2026")
    quoted = ("He said \u201cyes.\u201d " * 40).strip()
    assert snippet(quoted).endswith("\u201d")


def test_schemas_are_generated_from_the_signatures():
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas("notebook")}
    assert list(schemas) == list(TOOL_NAMES)
    for name, schema in schemas.items():
        parameters = [p for p in inspect.signature(getattr(ForecastTools, name)).parameters if p != "self"]
        assert list(schema["parameters"]["properties"]) == parameters
        assert schema["description"]
    assert schemas["search"]["parameters"]["required"] == ["query"]
    assert "notebook" not in tool_schemas("none")[3]["function"]["parameters"]["properties"]
    assert [s["function"]["name"] for s in tool_schemas("none", ("search", "submit_forecast"))] == [
        "search",
        "submit_forecast",
    ]
