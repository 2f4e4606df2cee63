"""The system prompt names exactly the tools the env offers."""

from __future__ import annotations

import pytest

from forecast_dojo.prompts import research_rule


@pytest.mark.parametrize(
    ("tools", "says", "never"),
    [
        (
            ("search", "read", "python", "submit_forecast"),
            ["search the news", "read documents", "run Python"],
            [],
        ),
        (("search", "read", "submit_forecast"), ["search the news", "read documents"], ["Python"]),
        (("submit_forecast",), ["no research tools"], ["search the news", "Python", '"name": "search"']),
    ],
)
def test_system_prompt_names_only_the_enabled_tools(make_tiny_env, tools, says, never) -> None:
    env = make_tiny_env(tools=tools)
    observation, _ = env.reset(env.events[0].id)
    system = observation["messages"][0]["content"]
    assert all(text in system for text in says)
    assert not any(text in system for text in never)


def test_a_turn_without_a_call_is_answered_for_the_tools_at_hand(make_tiny_env) -> None:
    env = make_tiny_env(tools=("submit_forecast",))
    env.reset(env.events[0].id)
    observation, *_ = env.step("I think yes.")
    assert (
        observation["messages"][-1]["content"]
        == "No tool call found. Call submit_forecast to finish this step."
    )
    env = make_tiny_env()
    env.reset(env.events[0].id)
    observation, *_ = env.step("I think yes.")
    assert "Research with the tools" in observation["messages"][-1]["content"]


def test_research_rule_lists_in_a_fixed_order() -> None:
    assert research_rule(["read", "search"]) == (
        "- Use the tools to research: search the news archive, and read documents that a search returned."
    )


# ----------------------------------------------------------------------------- the compact profile


def synthetic_specs() -> list:
    from forecast_dojo.registration import DojoSpec, builtin_spec_paths

    return [path for path in builtin_spec_paths() if DojoSpec.from_toml(path).world == "synthetic"]


def test_the_default_profile_is_the_full_text_and_compact_is_short(make_tiny_env) -> None:
    default, compact = make_tiny_env(memory="notebook"), make_tiny_env(memory="notebook", prompt="compact")
    full = default.reset("harbor")[0]["messages"][0]["content"]
    short = compact.reset("harbor")[0]["messages"][0]["content"]
    assert '"parameters"' in full and full.count('{"name": "search", "description"') == 1  # schemas inlined
    assert '"parameters"' not in short and '"description"' not in short  # the schemas go only through tools=
    assert len(short) < len(full) / 3
    assert [line.split("(")[0] for line in short.splitlines() if line.startswith("- ")] == [
        "- search",
        "- read",
        "- python",
        "- submit_forecast",
    ]  # one line per enabled tool
    assert compact.tool_schemas() == default.tool_schemas()
    assert '"assessment": {label: probability}' in full and '"doc_ids"' in short  # rendered from SCHEMA
    assert '"assessment"' not in short  # compact: the env fills it with the forecast submitted
    assert "prompt" not in default.run_metadata and compact.run_metadata["prompt"] == "compact"
    assert compact.run_id != default.run_id


def test_the_notebook_schema_has_one_source() -> None:
    from forecast_dojo.notebook import NOTEBOOK_KEYS, parse_notebook, schema_shape, schema_words
    from forecast_dojo.prompts import MEMORY_RULES
    from forecast_dojo.tools import tool_schemas

    assert schema_shape() in MEMORY_RULES["notebook"]
    described = tool_schemas("notebook")[-1]["function"]["parameters"]["properties"]["notebook"][
        "description"
    ]
    assert schema_words() in described and all(f'"{key}"' in described for key in NOTEBOOK_KEYS)
    with pytest.raises(ValueError, match="allowed: assessment, evidence, open_questions"):
        parse_notebook({"assessment": {"Yes": 1.0, "No": 0.0}, "extra": 1}, ("Yes", "No"))


def test_an_unknown_profile_is_refused(make_tiny_env) -> None:
    with pytest.raises(ValueError, match="prompt must be one of"):
        make_tiny_env(prompt="tiny")


def test_compact_search_results_show_id_date_title_and_a_short_snippet(make_tiny_env) -> None:
    from forecast_dojo.tools import COMPACT_SNIPPET_CHARS, parse_search_results

    env = make_tiny_env(prompt="compact")
    env.reset("harbor")
    obs, *_ = env.step(
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "search", "arguments": {"query": "Harbor Act", "top_k": 5}}}]}
    )  # fmt: skip
    content = obs["messages"][-1]["content"]
    hits = parse_search_results(content)
    assert hits and len(hits) == 5 and not content.startswith("[{")
    assert all(set(hit) == {"id", "date", "title", "snippet"} for hit in hits)
    assert all(len(hit["snippet"]) <= COMPACT_SNIPPET_CHARS and hit["date"] < "2030-01-11" for hit in hits)
    assert '"score"' not in content and "source" not in content
    assert parse_search_results("Error: query must be a non-empty string") is None
    default = make_tiny_env()
    default.reset("harbor")
    obs, *_ = default.step(
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "search", "arguments": {"query": "Harbor Act", "top_k": 5}}}]}
    )  # fmt: skip
    assert [h["id"] for h in parse_search_results(obs["messages"][-1]["content"])] == [h["id"] for h in hits]


@pytest.mark.parametrize("memory", ["none", "notebook"])
def test_the_compact_first_prompt_fits_400_smollm2_tokens(synthetic_cache, monkeypatch, memory) -> None:
    """Every shipped synthetic spec, every event: system + first prompt with tools=, SmolLM2's real tokenizer."""
    from forecast_dojo.agents.llm import TOOL_CHAT_TEMPLATE, load_smollm2_tokenizer, smollm2_path
    from forecast_dojo.registration import make

    try:
        smollm2_path()
    except FileNotFoundError as err:
        pytest.skip(str(err))

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    tokenizer = load_smollm2_tokenizer()
    specs = synthetic_specs()
    assert len(specs) >= 2
    for path in specs:
        env = make(path, embedder="hashing", memory=memory, prompt="compact", python_runner=None)
        assert "python" in env.enabled_tools  # the spec's own tools: the python line counts too
        longest = 0
        for event in env.events:
            messages = env.reset(event.id)[0]["messages"]
            for template in (TOOL_CHAT_TEMPLATE, None):  # ours (load_tokenizer) and SmolLM2's own
                ids = tokenizer.apply_chat_template(
                    messages,
                    tools=env.tool_schemas(),
                    chat_template=template,
                    tokenize=True,
                    return_dict=False,
                )
                longest = max(longest, len(ids))
        assert longest <= 400, f"{path.name} memory={memory}: {longest} tokens"


def test_run_with_the_compact_profile(synthetic_cache, tmp_path, monkeypatch, capsys) -> None:
    """``forecast-dojo run --prompt compact``: the logs and run.json name the profile; agents play it."""
    import json

    from forecast_dojo.cli import main

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    out = tmp_path / "run"
    argv = ["run", "--embedder", "hashing", "--no-python", "--max-events", "2", "--prompt", "compact"]
    assert main([*argv, "--agents", "evidence-oracle", "--modes", "notebook", "--out", str(out)]) == 0
    run = json.loads((out / "evidence-oracle-notebook" / "run.json").read_text())
    assert run["prompt"] == "compact"
    records = [
        json.loads(line)
        for line in (out / "evidence-oracle-notebook" / "steps.jsonl").read_text().splitlines()
    ]
    assert records and {r["prompt"] for r in records} == {"compact"} and all(r["valid"] for r in records)
    assert all(r["messages"][0]["content"].startswith("Only news before") for r in records)
    assert all(r["notebook_out"] for r in records)  # it read the compact search results and kept a notebook
    capsys.readouterr()
