"""Action parsing: OpenAI dicts, text tool calls, and never an exception."""

from hypothesis import given
from hypothesis import strategies as st

from forecast_dojo.actions import parse_action


def test_openai_dict_with_string_and_dict_arguments():
    parsed = parse_action(
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [
                {
                    "id": "x1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "a"}'},
                },
                {"type": "function", "function": {"name": "read", "arguments": {"doc_id": "d"}}},
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3},
        }
    )
    assert (
        parsed.error is None
        and parsed.content == "ok"
        and parsed.usage == {"prompt_tokens": 10, "completion_tokens": 3}
    )
    assert [(c.id, c.name, c.arguments) for c in parsed.tool_calls] == [
        ("x1", "search", {"query": "a"}),
        ("call_1", "read", {"doc_id": "d"}),
    ]
    message = parsed.message()
    assert message["tool_calls"][1]["function"]["arguments"] == '{"doc_id": "d"}'


def test_text_tool_calls_and_content():
    parsed = parse_action(
        'Thinking.\n<tool_call>{"name": "search", "arguments": {"query": "été “quoted”"}}</tool_call>'
    )
    assert parsed.content == "Thinking."
    assert parsed.tool_calls[0].arguments == {"query": "été “quoted”"}


def test_dict_content_with_text_tool_calls_is_parsed():
    parsed = parse_action(
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>',
        }
    )
    assert parsed.tool_calls[0].name == "python"


@given(
    st.one_of(st.text(), st.none(), st.integers(), st.dictionaries(st.text(), st.text()), st.lists(st.text()))
)
def test_parse_never_raises(value):
    parsed = parse_action(value)
    assert isinstance(parsed.content, str)


def test_usage_keeps_the_logged_counts_and_drops_the_rest():
    """``constrained_tokens`` reaches the record; other keys and bad values (bools, negatives, text) do not."""
    parsed = parse_action(
        {
            "role": "assistant",
            "content": "ok",
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": True,
                "constrained_tokens": 2,
                "total_tokens": 12,
                "reasoning_tokens": -1,
            },
        }
    )
    assert parsed.usage == {"prompt_tokens": 10, "constrained_tokens": 2}
    assert (
        parse_action({"role": "assistant", "content": "ok", "usage": {"constrained_tokens": "2"}}).usage == {}
    )
