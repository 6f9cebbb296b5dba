"""Policy modes through toolscope-mcp without a toolscope (the configuration's own `policy`), with
real mcp-server-git and mcp-server-time behind it and the official client in front: progressive
mode's menu and activation, a tool's `max_result_tokens`, an unknown tool, and a tool the policy
does not allow."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


def run_with(tmp_path: Path, policy: dict[str, Any], script: Any) -> Any:
    repository = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repository)], check=True, env=env)
    for n in range(30):
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", f"Step {n} of the plan"], cwd=repository,
                       check=True, env=env)
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"policy": policy, "mcpServers": {
        "git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(repository)]},
        "time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}}))

    async def main() -> Any:
        changed: list[str] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.append(message.method)

        params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)])
        async with stdio_client(params) as (read, write), ClientSession(read, write, message_handler=on_message) as s:
            await s.initialize()
            return await script(s, changed, str(repository))

    return anyio.run(main)


def names(listed: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in listed.tools]


def test_progressive_mode_lists_a_menu_and_activates_what_is_asked(tmp_path):
    policy = {"selection": {"mode": "progressive", "always_on": ["git_status"]}}

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        first = await session.list_tools()
        menu = next(tool for tool in first.tools if tool.name == "activate_tools")
        answer = await session.call_tool("activate_tools", {"names": ["git_log", "no_such_tool"]})
        with anyio.fail_after(10):
            while not changed:
                await anyio.sleep(0.02)
        return names(first), menu.description, answer.content[0].text, names(await session.list_tools())

    first, menu, answer, after = run_with(tmp_path, policy, script)
    assert first == ["git_status", "activate_tools"]
    assert "- git_log: " in menu and "- convert_time: " in menu and "- git_status" not in menu
    assert answer == "Added: git_log. Not tools here: no_such_tool."
    assert after == ["git_status", "git_log", "activate_tools"]


def test_max_result_tokens_shortens_and_the_original_is_retrievable(tmp_path):
    policy = {"selection": {"mode": "all"}, "tools": {"git_log": {"max_result_tokens": 60}},
              "outputs": {"duplicates": {"suppress": False}}}

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        listed = names(await session.list_tools())
        short = (await session.call_tool("git_log", {"repo_path": repository, "max_count": 30})).content[0].text
        artifact = short.split('retrieve_tool_output(id="')[1].split('"')[0]
        original = (await session.call_tool("retrieve_tool_output", {"id": artifact})).content[0].text
        again = (await session.call_tool("git_log", {"repo_path": repository, "max_count": 30})).content[0].text
        return listed, short, original, again

    listed, short, original, again = run_with(tmp_path, policy, script)
    assert listed[-1] == "retrieve_tool_output" and len(listed) == 15  # 12 git + 2 time tools
    assert short.count("Step ") < 30 and all(f"Step {n} of the plan" in original for n in range(30))
    assert again == short  # duplicates not suppressed: compacted alike, no placeholder


def test_an_unknown_tool_is_an_error_the_model_can_read_and_a_left_out_one_is_forwarded(tmp_path):
    policy = {"selection": {"mode": "context_rules", "always_on": ["get_current_time"],
                            "allowed": ["get_current_time", "convert_time"]}}

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        listed = names(await session.list_tools())
        unknown = await session.call_tool("no_such_tool", {})
        converted = await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                             "target_timezone": "Asia/Tokyo"})
        with anyio.fail_after(10):
            while not changed:
                await anyio.sleep(0.02)
        # Not allowed at all: still forwarded (a client that kept an old list must not be stuck).
        status = await session.call_tool("git_status", {"repo_path": repository})
        return listed, unknown, converted, status, names(await session.list_tools())

    listed, unknown, converted, status, after = run_with(tmp_path, policy, script)
    assert listed == ["get_current_time", "tool_search"]  # convert_time is left out: the search reaches it
    assert unknown.is_error
    assert unknown.content[0].text == "There is no tool named no_such_tool. Use one of the tools listed."
    assert not converted.is_error and "Asia/Tokyo" in converted.content[0].text
    assert not status.is_error and "On branch main" in status.content[0].text
    # convert_time was called: sent from then on (sticky); git_status is not allowed: never listed.
    # Nothing allowed is left out any more, so no search either.
    assert after == ["get_current_time", "convert_time"]


def test_a_client_on_the_stateless_protocol_is_told_of_loads_and_asked_for_approval(tmp_path):
    """mcp.Client picks the 2026-07-28 protocol: no server-to-client requests and no unsolicited
    notifications. The gateway publishes list changes to its `subscriptions/listen` stream and
    asks for approval with an InputRequiredResult, which the client answers by retrying."""
    from mcp import Client

    policy = {"selection": {"mode": "tool_search", "always_on": []},
              "tools": {"git_create_branch": {"requires_approval": True}}}
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        config = tmp_path / "gateway.json"  # the same gateway, reached by the high-level client
        params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)])
        async with Client(params, elicitation_callback=approve) as client:
            before = [tool.name for tool in (await client.list_tools()).tools]
            async with client.listen(tools_list_changed=True) as events:
                await client.call_tool("tool_search", {"query": "create a new git branch"})
                with anyio.fail_after(10):
                    async for _ in events:
                        break
            after = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
            created = await client.call_tool("git_create_branch", {"repo_path": repository,
                                                                   "branch_name": "from-modern"})
            return client.protocol_version, before, after, created

    protocol, before, after, created = run_with(tmp_path, policy, script)
    assert protocol == "2026-07-28" and before == ["tool_search"] and "git_create_branch" in after
    assert not created.is_error and "from-modern" in created.content[0].text
    assert len(asked) == 1 and "git_create_branch" in asked[0]


def test_a_call_that_a_rule_is_keyed_by_sends_list_changed_and_lists_the_rules_tools(tmp_path):
    """A context rule with `after_tools` (issue 25, item 6): once the agent called git_status
    through the gateway, the rule's group is listed, and the client is told its tools changed."""
    policy = {"selection": {"mode": "context_rules", "always_on": ["git_status"],
                            "groups": {"history": ["git_log", "git_show"]},
                            "context_rules": [{"name": "after status", "keywords": [], "after_tools": ["git_status"],
                                               "groups": ["history"]}]}}

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        before = names(await session.list_tools())
        status = await session.call_tool("git_status", {"repo_path": repository})
        with anyio.fail_after(10):
            while not changed:
                await anyio.sleep(0.05)
        return before, status, names(await session.list_tools()), list(changed)

    before, status, after, changed = run_with(tmp_path, policy, script)
    # Tools are left out, so toolscope's search is listed too (issue 27, item 9).
    assert before == ["git_status", "tool_search"] and not status.is_error
    assert sorted(after) == ["git_log", "git_show", "git_status", "tool_search"]
    assert changed == ["notifications/tools/list_changed"]


def test_a_context_rules_policy_through_mcp_lists_the_search_never_nothing(tmp_path):
    """Issue 27, item 9: MCP carries no task message, so a rule keyed by words never fires through
    the gateway. With nothing always on, the demo's kind of policy listed no tool of the servers;
    now the search is listed, and what it finds is loaded and callable."""
    policy = {"selection": {"mode": "context_rules", "always_on": [],
                            "groups": {"history": ["git_log", "git_show"]},
                            "context_rules": [{"name": "history", "keywords": ["history", "log"],
                                               "groups": ["history"]}]}}

    async def script(session: ClientSession, changed: list[str], repository: str) -> tuple[Any, ...]:
        before = names(await session.list_tools())
        found = await session.call_tool("tool_search", {"query": "show the commit log history"})
        with anyio.fail_after(10):
            while not changed:
                await anyio.sleep(0.05)
        after = names(await session.list_tools())
        log = await session.call_tool("git_log", {"repo_path": repository, "max_count": 2})
        return before, found, after, log

    before, found, after, log = run_with(tmp_path, policy, script)
    assert before == ["tool_search"]
    assert not found.is_error and "git_log" in found.content[0].text
    assert "git_log" in after and "tool_search" in after
    assert not log.is_error and "Step 29 of the plan" in log.content[0].text
