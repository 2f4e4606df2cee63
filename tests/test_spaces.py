"""The custom gymnasium spaces: readable reprs (a user prints ``env.observation_space``)."""

from __future__ import annotations

import re

from forecast_dojo.spaces import AssistantTurn, ChatMessages, TextList, UnicodeText


def test_custom_spaces_print_their_parameters() -> None:
    assert repr(UnicodeText(12, nullable=True)) == "UnicodeText(max_length=12, nullable=True)"
    assert repr(TextList(max_items=8, max_length=200)) == "TextList(max_items=8, max_length=200)"
    assert repr(ChatMessages()) == "ChatMessages()"
    assert repr(AssistantTurn()) == "AssistantTurn()"


def test_the_envs_spaces_print_without_object_addresses(make_tiny_env) -> None:
    env = make_tiny_env()
    for space in (env.observation_space, env.action_space):
        text = repr(space)
        assert not re.search(r"object at 0x[0-9a-f]+", text), text
    text = repr(env.observation_space)
    assert "'messages': ChatMessages()" in text
    assert "'outcomes': TextList(max_items=" in text
    assert repr(env.action_space) == "AssistantTurn()"
