"""toolscope-mcp over Streamable HTTP, both ways: a gateway serving HTTP (the official client's
streamable HTTP transport in front, real mcp-server-git and mcp-server-time behind), and a
gateway over stdio whose upstream is that HTTP gateway, following its `tools/list_changed`.
The policy is the configuration's own (`policy`, no toolscope): a tool_search policy.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway import serving

pytestmark = pytest.mark.slow

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
POLICY = {"selection": {"mode": "tool_search", "always_on": [], "tool_search": {"top_k": 2, "ranker": "bm25f-2"}}}


@pytest.fixture
def http_gateway(tmp_path) -> Iterator[str]:
    """The gateway serving Streamable HTTP on a free port; its URL."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    config = tmp_path / "http.json"
    config.write_text(json.dumps({"policy": POLICY, "mcpServers": {
        "git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(tmp_path / "repo")]},
        "time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}}))
    with serving.http_gateway(config, tmp_path / "http-gateway.log") as url:
        yield url


class Notified:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1

    async def reached(self, count: int) -> None:
        with anyio.fail_after(10):
            while self.count < count:
                await anyio.sleep(0.02)


def names(listed: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in listed.tools]


async def search_then_call(session: ClientSession, notified: Notified) -> tuple[list[str], list[str], str]:
    before = names(await session.list_tools())
    await session.call_tool("tool_search", {"query": "current time in a time zone"})
    await notified.reached(1)
    after = names(await session.list_tools())
    result = await session.call_tool("get_current_time", {"timezone": "Europe/Berlin"})
    assert not result.is_error
    return before, after, result.content[0].text


def test_clients_reach_the_gateway_over_streamable_http(http_gateway):
    async def run() -> tuple[Any, ...]:
        notified = Notified()
        async with streamable_http_client(http_gateway) as (read, write), ClientSession(
                read, write, message_handler=notified) as session:
            init = await session.initialize()
            return (init.server_info.name, init.capabilities.tools.list_changed,
                    *await search_then_call(session, notified))

    server, list_changed, before, after, answer = anyio.run(run)
    assert server == "toolscope-mcp" and list_changed is True
    assert before == ["tool_search"]
    assert "get_current_time" in after and len(after) == 3  # the search's top 2, and the search tool
    assert "Europe/Berlin" in answer


def test_a_gateway_follows_an_http_upstream_and_its_list_changes(http_gateway, tmp_path):
    """The stdio gateway's upstream is the HTTP gateway: its tool_search is forwarded there, which
    loads tools and says so; the stdio gateway lists again and tells its own client."""
    config = tmp_path / "stdio.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"type": "http", "url": http_gateway}}}))

    async def run() -> tuple[list[str], list[str], str]:
        notified = Notified()
        params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)])
        async with stdio_client(params) as (read, write), ClientSession(read, write, message_handler=notified) as s:
            await s.initialize()
            return await search_then_call(s, notified)

    before, after, answer = anyio.run(run)
    assert before == ["tool_search"] and "get_current_time" in after and "Europe/Berlin" in answer


def test_a_server_that_does_not_start_is_left_out_and_the_others_serve(tmp_path):
    config = tmp_path / "broken.json"
    config.write_text(json.dumps({"mcpServers": {
        "gone": {"command": str(tmp_path / "no-such-server")},
        "time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}}))

    async def run() -> list[str]:
        params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)])
        async with stdio_client(params, errlog=(tmp_path / "stderr.log").open("w")) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            return names(await session.list_tools())

    assert anyio.run(run) == ["get_current_time", "convert_time"]
    assert "upstream gone did not start, its tools are left out" in (tmp_path / "stderr.log").read_text()
