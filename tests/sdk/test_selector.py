"""ToolSelector in an agent loop: selection per mode, tool_search answered locally, outputs
prepared under the policy's duplicate and compaction rules, per-tool settings applied."""

from __future__ import annotations

import pytest
from toolscope_agent import ToolSelector
from toolscope_agent.engine.arguments import ToolArgumentsError

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file from the workspace.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"name": "bash", "description": "Run a shell command.", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"]}},
    {"name": "git_diff", "description": "Show the working tree diff.", "inputSchema": {"type": "object"}},
    {"name": "git_commit", "description": "Commit staged changes.", "input_schema": {"type": "object"}},
    {"name": "run_tests", "description": "Run the test suite.", "input_schema": {"type": "object"}},
    {"name": "tool_search", "description": "Find tools by what they do.", "input_schema": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]


def policy(mode: str, **selection) -> dict:
    return {
        "selection": {"mode": mode, "allowed": None, "always_on": ["read_file", "bash"],
                      "groups": {"git": ["git_diff", "git_commit"], "testing": ["run_tests"]},
                      "context_rules": [{"name": "tests", "keywords": ["test"], "regex": None, "groups": ["testing"]}],
                      "progressive": {"hint_prefix": "$"}, "tool_search": {"top_k": 2, "max_top_k": 20},
                      "sticky_discovered": True, **selection},
        "outputs": {"duplicates": {"suppress": True},
                    "compaction": [{"tools": "bash", "max_tokens": 80, "strategy": "head_tail"}]},
        "tools": {"bash": {"redact": ["env"], "on_schema_error": "coerce"},
                  "read_file": {"on_schema_error": "raise"}},
    }


def names(tools: list[dict]) -> list[str]:
    return [tool.get("name") or tool["function"]["name"] for tool in tools]


def test_context_rules_send_the_always_on_set_and_the_matching_groups():
    selector = ToolSelector(TOOLS, policy("context_rules"))
    assert names(selector.tools("fix the failing test")) == ["read_file", "bash", "run_tests"]
    assert names(selector.tools("update the latest docs")) == ["read_file", "bash"]


def test_called_tools_stay_in_later_turns():
    selector = ToolSelector(TOOLS, policy("context_rules"))
    selector.observe("", [{"name": "git_diff", "arguments": {}}])
    assert "git_diff" in names(selector.tools("anything", format="anthropic"))


def test_tool_search_results_join_from_the_next_turn():
    selector = ToolSelector(TOOLS, policy("tool_search", always_on=["tool_search"]))
    assert names(selector.tools("")) == ["tool_search"]
    selector.observe("", [{"name": "tool_search", "arguments": {"query": "git diff"}}])
    sent = names(selector.tools(""))
    assert "tool_search" in sent and "git_diff" in sent
    assert selector.state.loaded[0] == "git_diff" and len(selector.state.loaded) <= 2


def test_progressive_mode_sends_a_menu_and_activates_hinted_tools():
    selector = ToolSelector(TOOLS, policy("progressive"))
    first = selector.select("")
    assert "git_commit" in (first.menu or "")
    assert "git_commit" not in first.names
    selector.observe("I need $git_commit next.")
    assert "git_commit" in selector.select("").names


def test_a_repeated_output_becomes_a_placeholder_and_a_long_one_is_compacted():
    selector = ToolSelector(TOOLS, policy("all"))
    text = "def add(a, b):\n    return a + b\n"
    assert selector.prepare_output("read_file", "call_1", text) == text
    placeholder = selector.prepare_output("read_file", "call_2", text + "  \n")
    assert placeholder != text and "call_1" in placeholder
    log = "".join(f"line {n} of a long build log\n" for n in range(200))
    compacted = selector.prepare_output("bash", "call_3", log)
    assert compacted.startswith("line 0") and compacted.endswith("line 199 of a long build log\n")
    assert selector.counter(compacted) <= 80


def test_per_tool_settings_redact_and_check_arguments():
    selector = ToolSelector(TOOLS, policy("all"))
    assert selector.redact("bash", {"command": "ls", "env": {"TOKEN": "x"}}) == {"command": "ls", "env": "[REDACTED]"}
    coerced = selector.check_arguments("bash", {"command": "ls", "timeout": "30"})
    assert coerced.ok and coerced.arguments["timeout"] == 30
    with pytest.raises(ToolArgumentsError):
        selector.check_arguments("read_file", {"path": 5})


def test_search_answers_what_the_tool_search_tool_returns():
    selector = ToolSelector(TOOLS, policy("tool_search"))
    hits = selector.search("run the tests")
    assert hits and hits[0].name == "run_tests"
    assert len(hits) <= 2


def test_tool_search_mode_adds_toolscopes_search_tool_to_a_catalog_without_one():
    catalog = [tool for tool in TOOLS if names([tool]) != ["tool_search"]]
    selector = ToolSelector(catalog, policy("tool_search", always_on=["read_file"]))
    sent = selector.tools("", format="anthropic")
    assert names(sent) == ["read_file", "tool_search"]
    assert sent[1]["input_schema"]["required"] == ["query"] and "tools" in sent[1]["description"]
    selector.observe("", [{"name": "tool_search", "arguments": {"query": "run the test suite"}}])
    assert "run_tests" in names(selector.tools(""))
    # The agent's own search tool is kept as it defined it; other modes add nothing.
    own = ToolSelector(TOOLS, policy("tool_search", always_on=["tool_search"])).tools("", format="anthropic")
    assert own == [{"name": "tool_search", "description": "Find tools by what they do.",
                    "input_schema": TOOLS[-1]["input_schema"]}]
    assert "tool_search" not in names(ToolSelector(catalog, policy("context_rules")).tools(""))


def test_a_search_under_deferred_loading_answers_with_what_the_provider_loads():
    from anthropic.types import ToolResultBlockParam
    from openai.types.responses.response_input_item_param import ResponseToolSearchOutputItemParamParam

    from tests.sdk_types import validated

    deferring = policy("tool_search", always_on=["read_file", "tool_search"],
                       tool_search={"top_k": 2, "max_top_k": 20, "defer_loading": True})
    selector = ToolSelector(TOOLS, deferring)
    sent = selector.tools("", format="anthropic")
    assert [tool["name"] for tool in sent if not tool.get("defer_loading")] == ["read_file", "tool_search"]
    references = selector.search_answer("commit my staged changes", format="anthropic")
    assert references[0] == {"type": "tool_reference", "tool_name": "git_commit"} and len(references) == 2
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": references}]
    assert validated(ToolResultBlockParam, result) == result
    output = selector.search_answer("commit my staged changes", format="openai_responses", call_id="call_7")
    assert output["call_id"] == "call_7" and output["tools"][0]["name"] == "git_commit"
    assert validated(ResponseToolSearchOutputItemParamParam, [output]) == [output]
    # Observed, the tool found is in the conversation: the list at the head stays the same.
    selector.observe("", [{"name": "tool_search", "arguments": {"query": "commit my staged changes"}}])
    assert selector.tools("", format="anthropic") == sent
    # Without deferred loading (or in Chat Completions), the text answer.
    plain = ToolSelector(TOOLS, policy("tool_search", always_on=["read_file", "tool_search"]))
    assert plain.search_answer("commit my staged changes").startswith("Tools found:\ngit_commit")
    assert selector.search_answer("commit my staged changes", format="openai").startswith("Tools found:")
