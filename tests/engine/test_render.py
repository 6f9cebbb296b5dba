"""Rendering selections for providers (engine/render.py), menus, and what a selection costs."""

from __future__ import annotations

import json

import pytest
from toolscope_agent.engine.render import (
    ANTHROPIC_SEARCH_TOOLS,
    SEARCH_TOOL,
    first_sentence,
    menu_text,
    render,
    render_anthropic,
    render_openai,
    render_openai_responses,
    render_plain,
    selection_cost,
)
from toolscope_agent.engine.selection import Selection, SessionState, select_tools
from toolscope_agent.engine.tokens import approximate_counter, render_tool_openai

from tests.sdk_types import validated

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
CATALOG = [
    {"name": "read_file", "description": "Read a file. Returns text.", "input_schema": SCHEMA},
    {"name": "tool_search", "description": "Find tools.", "input_schema": SCHEMA},
    {"name": "git_diff", "description": "", "input_schema": SCHEMA},
    {"name": "web_fetch", "description": "Fetch a URL.\n\nMore.", "input_schema": SCHEMA, "source": "mcp:web"},
]
SEARCH_POLICY = {"selection": {"mode": "tool_search", "always_on": ["read_file", "tool_search"]}}


def selection(mode: str = "tool_search") -> Selection:
    doc = {"selection": {**SEARCH_POLICY["selection"], "mode": mode}}
    return select_tools(CATALOG, doc, SessionState())


def test_openai_entries_are_chat_completions_functions():
    tools = render_openai(selection("all"))
    assert tools[0] == {"type": "function", "function": {
        "name": "read_file", "description": "Read a file. Returns text.", "parameters": SCHEMA}}
    assert tools[2] == {"type": "function", "function": {"name": "git_diff", "parameters": SCHEMA}}
    assert [t["function"]["name"] for t in tools] == [t["name"] for t in CATALOG]


def test_openai_rendering_is_what_tokens_counts():
    for entry, tool in zip(render_openai(selection("all")), CATALOG, strict=True):
        counted = render_tool_openai(tool["name"], tool["description"], tool["input_schema"])
        assert json.loads(counted) == entry


def test_anthropic_and_plain_entries():
    assert render_anthropic(selection()) == [
        {"name": "read_file", "description": "Read a file. Returns text.", "input_schema": SCHEMA},
        {"name": "tool_search", "description": "Find tools.", "input_schema": SCHEMA},
    ]
    plain = render_plain(selection("all"))
    assert plain[2] == {"name": "git_diff", "description": "", "input_schema": SCHEMA}
    assert "source" not in plain[3]


def test_provider_search_defers_the_rest_and_swaps_in_anthropics_search_tool():
    tools = render_anthropic(selection(), provider_search=True)
    assert tools[0] == {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    assert [t["name"] for t in tools[1:]] == ["read_file", "git_diff", "web_fetch"]  # ours is dropped
    assert "defer_loading" not in tools[1]
    assert tools[2] == {"name": "git_diff", "input_schema": SCHEMA, "defer_loading": True}
    assert tools[3]["defer_loading"] is True
    bm25 = render_anthropic(selection(), provider_search=True, search_variant="bm25")
    assert bm25[0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    bm25[0]["name"] = "changed"
    assert ANTHROPIC_SEARCH_TOOLS["bm25"]["name"] == "tool_search_tool_bm25"


def test_provider_search_with_nothing_deferred_adds_no_search_tool():
    tools = render_anthropic(selection("all"), provider_search=True)
    assert [t["name"] for t in tools] == ["read_file", "git_diff", "web_fetch"]
    with pytest.raises(ValueError, match="search_variant"):
        render_anthropic(selection(), provider_search=True, search_variant="vector")


def test_menu_lists_each_tool_once_marks_active_ones_and_says_how_to_activate():
    menu = menu_text([*CATALOG, {"name": "read_file", "description": "dup"}, {"description": "no name"}],
                     {"git_diff"}, hint_prefix="$")
    assert menu.splitlines() == [
        "Tools you can use (write $name to load a tool's full schema; lines marked * are loaded):",
        "- read_file: Read a file.",
        "- tool_search: Find tools.",
        "* git_diff (active)",
        "- web_fetch: Fetch a URL.",
    ]
    assert menu_text([], set()) == ""
    assert menu_text([{"name": "x", "description": ""}], set()).endswith("\n- x")


def test_menu_reflects_catalog_changes_despite_its_cache():
    catalog = [dict(tool) for tool in CATALOG]
    before = menu_text(catalog, set())
    catalog[0]["description"] = "Open a file."
    after = menu_text(catalog, set())
    assert "- read_file: Read a file." in before and "- read_file: Open a file." in after


@pytest.mark.parametrize(("text", "sentence"), [
    ("Read a file. Then more.", "Read a file."),
    ("Use file.read or v1.2 to go! Next", "Use file.read or v1.2 to go!"),
    ("Wrapped\nline sentence. Next.", "Wrapped line sentence."),
    ("First paragraph without a stop\n\nSecond paragraph.", "First paragraph without a stop"),
    ("  ", ""),
    ("word " * 60, ("word " * 31).strip() + "…"),
])
def test_first_sentence(text, sentence):
    assert first_sentence(text) == sentence
    assert len(first_sentence(text)) <= 160


def test_selection_cost_counts_the_sent_tools_and_the_menu():
    chosen = selection("progressive")
    assert chosen.menu
    expected = sum(approximate_counter(render_tool_openai(t["name"], t["description"], t["input_schema"]))
                   for t in chosen.tools) + approximate_counter(chosen.menu)
    assert selection_cost(chosen, approximate_counter) == expected
    assert selection_cost(selection("all"), approximate_counter, "anthropic") > selection_cost(
        selection(), approximate_counter, "anthropic")


def test_responses_entries_are_responses_functions_and_the_sdks_type():
    from openai.types.responses import ToolParam

    tools = render_openai_responses(selection("all"))
    assert tools[0] == {"type": "function", "name": "read_file", "description": "Read a file. Returns text.",
                        "parameters": SCHEMA, "strict": False}
    assert tools[2] == {"type": "function", "name": "git_diff", "parameters": SCHEMA, "strict": False}
    assert validated(ToolParam, tools) == tools


def test_responses_provider_search_defers_the_rest_in_the_policys_groups_as_namespaces():
    """OpenAI's own deferred loading: the hosted tool_search, the tools sent, then what the policy
    would not send with defer_loading, a policy group's in a namespace of its name."""
    from openai.types.responses import ToolParam
    from openai.types.responses.namespace_tool_param import Tool as NamespacedTool

    tools = render_openai_responses(selection(), provider_search=True, groups={"web": ["web_fetch", "nope"]})
    assert tools[0] == {"type": "tool_search"}
    assert [entry.get("name") for entry in tools] == [None, "read_file", "web", "git_diff"]
    assert tools[2] == {"type": "namespace", "name": "web", "description": "web: web_fetch", "tools": [
        {"type": "function", "name": "web_fetch", "description": "Fetch a URL.\n\nMore.", "parameters": SCHEMA,
         "strict": False, "defer_loading": True}]}
    assert tools[3] == {"type": "function", "name": "git_diff", "parameters": SCHEMA, "strict": False,
                        "defer_loading": True}
    # A namespace's tools are checked as its own type, the entries around them as the Responses
    # tools. (The panic first met here was a TypeAdapter freed before its lazy iterators were read:
    # tests/sdk_types.validated holds it.)
    inside = tools[2]["tools"]
    assert validated(NamespacedTool, inside) == inside
    shallow = [{**entry, "tools": []} if entry.get("type") == "namespace" else entry for entry in tools]
    assert validated(ToolParam, shallow) == shallow
    # Nothing deferred, nothing to search: no search tool at all (toolscope's is the provider's part).
    assert render_openai_responses(selection("all"), provider_search=True) == [
        entry for entry in render_openai_responses(selection("all")) if entry["name"] != "tool_search"]


def test_anthropic_provider_search_is_the_sdks_type():
    from anthropic.types import ToolUnionParam

    tools = render_anthropic(selection(), provider_search=True, search_variant="bm25")
    assert validated(ToolUnionParam, tools) == tools


@pytest.mark.parametrize("format", ["openai", "anthropic", "openai_responses", "plain"])
def test_render_dispatches_each_format_as_the_policy_asks(format):
    policy = {"selection": {**SEARCH_POLICY["selection"], "tool_search": {"provider_search": True},
                            "groups": {"web": ["web_fetch"]}}}
    chosen = select_tools(CATALOG, policy, SessionState())
    expected = {"openai": render_openai(chosen), "anthropic": render_anthropic(chosen, provider_search=True),
                "openai_responses": render_openai_responses(chosen, provider_search=True,
                                                            groups={"web": ["web_fetch"]}),
                "plain": render_plain(chosen)}[format]
    assert render(chosen, format, policy) == expected
    with pytest.raises(ValueError, match="unknown format"):
        render(chosen, "gemini", policy)


SEARCH_DESCRIPTION, SEARCH_PARAMETERS = SEARCH_TOOL["description"], SEARCH_TOOL["input_schema"]
DEFER_POLICY = {"selection": {"mode": "tool_search", "always_on": ["read_file", "tool_search"],
                              "tool_search": {"defer_loading": True}}}


def test_deferred_loading_with_toolscopes_search_keeps_one_list_whatever_a_search_loads():
    from anthropic.types import ToolUnionParam

    state = SessionState()
    first = render(select_tools(CATALOG, DEFER_POLICY, state), "anthropic", DEFER_POLICY)
    # toolscope's tool_search stays (a client-side search), every other tool is deferred
    assert [(t["name"], t.get("defer_loading", False)) for t in first] == [
        ("read_file", False), ("tool_search", False), ("git_diff", True), ("web_fetch", True)]
    assert validated(ToolUnionParam, first) == first
    # the search loaded web_fetch and the model called it: inside the conversation, the list is the same
    state.observe("", [{"name": "tool_search", "results": ["web_fetch"]}, {"name": "web_fetch"}])
    chosen = select_tools(CATALOG, DEFER_POLICY, state)
    assert chosen.reasons["web_fetch"] in ("loaded", "discovered")
    assert render(chosen, "anthropic", DEFER_POLICY) == first
    # the provider's own search wins when both are asked: its tool replaces toolscope's
    both = {"selection": {**DEFER_POLICY["selection"], "tool_search": {"defer_loading": True,
                                                                       "provider_search": True}}}
    assert render(chosen, "anthropic", both)[0] == ANTHROPIC_SEARCH_TOOLS["regex"]


def test_a_client_side_search_answers_with_what_each_provider_loads():
    from anthropic.types import ToolResultBlockParam
    from openai.types.responses import ToolParam
    from openai.types.responses.response_input_item_param import ResponseToolSearchOutputItemParamParam
    from toolscope_agent.engine.render import search_output, search_references

    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": search_references(["web_fetch"])}]
    assert validated(ToolResultBlockParam, result) == result
    assert result[0]["content"] == [{"type": "tool_reference", "tool_name": "web_fetch"}]
    tools = render(select_tools(CATALOG, DEFER_POLICY, SessionState()), "openai_responses", DEFER_POLICY)
    assert tools[0] == {"type": "tool_search", "execution": "client", "description": SEARCH_DESCRIPTION,
                        "parameters": SEARCH_PARAMETERS}
    assert [t.get("name") for t in tools[1:]] == ["read_file", "git_diff", "web_fetch"]
    assert [t.get("defer_loading", False) for t in tools[1:]] == [False, True, True]
    assert validated(ToolParam, tools) == tools
    answer = [search_output("call_1", [CATALOG[3]])]
    assert validated(ResponseToolSearchOutputItemParamParam, answer) == answer
    assert answer[0]["tools"][0]["name"] == "web_fetch"
    # Chat Completions has no deferred loading: the tools sent
    assert render(select_tools(CATALOG, DEFER_POLICY, SessionState()), "openai", DEFER_POLICY) == render_openai(
        select_tools(CATALOG, DEFER_POLICY, SessionState()))
