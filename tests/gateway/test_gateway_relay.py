"""A server's requests to the client through toolscope-mcp (issue 27, item 2): npm's
server-everything shows the tools that need sampling, elicitation and roots when its client
offers them, and they work through the gateway as they do directly. The client is the official
Python client; its sampling, elicitation and roots answers stand for the host application's (the
model and the person are the host's, not the gateway's). Over stdio and over Streamable HTTP,
where the gateway's requests to the client travel in the call's own response stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway import serving

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
NPM_BIN = REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin"
NEEDING = ("get-roots-list", "trigger-elicitation-request", "trigger-sampling-request")


class Host:
    """What the client application answers, and what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompt = params.messages[0].content
        self.asked.append(f"sampling: {getattr(prompt, 'text', '')}")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris, of course."),
                                         model="host-model")

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(f"elicitation: {params.message}")
        return types.ElicitResult(action="decline")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project", name="project")])


def use(command: str, args: list[str], *, offer: bool = True, url: str = "") -> dict[str, Any]:
    """Call the tools that need the client's capabilities: over stdio (`command`), or over
    Streamable HTTP (`url`)."""
    host = Host()
    callbacks = ({"sampling_callback": host.sampling, "elicitation_callback": host.elicitation,
                  "list_roots_callback": host.roots} if offer else {})

    async def main() -> dict[str, Any]:
        with open("/dev/null", "w") as errlog:
            transport = (streamable_http_client(url) if url else
                         stdio_client(StdioServerParameters(command=command, args=args), errlog=errlog))
            async with transport as (r, w), ClientSession(r, w, **callbacks) as session:
                await session.initialize()
                names = [tool.name for tool in (await session.list_tools()).tools]
                answers = {}
                for name, arguments in (("trigger-sampling-request", {"prompt": "Capital of France?"}),
                                        ("trigger-elicitation-request", {}), ("get-roots-list", {})):
                    if name in names:
                        result = await session.call_tool(name, arguments)
                        answers[name] = (result.is_error, [block.model_dump(mode="json") for block in result.content])
                return {"names": names, "answers": answers, "asked": host.asked}

    return anyio.run(main)


def asked(use: dict[str, Any]) -> tuple[list[str], int]:
    """What the host was asked in order, roots apart: server-everything asks for roots on its own
    350 ms after it is initialized (before the gateway's client is there, or amid the calls), and
    once only, so when it asks is timing, not behaviour."""
    return [ask for ask in use["asked"] if ask != "roots"], use["asked"].count("roots")


def test_sampling_elicitation_and_roots_reach_the_client_as_directly(tmp_path):
    everything = [str(NPM_BIN / "mcp-server-everything"), "stdio"]
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything[0], "args": everything[1:]}}}))
    gateway = [str(BIN / "toolscope-mcp"), "--config", str(config)]
    direct, through = use(everything[0], everything[1:]), use(gateway[0], gateway[1:])
    assert set(NEEDING) <= set(direct["names"]) and set(NEEDING) <= set(through["names"])
    assert through["answers"] == direct["answers"]
    assert asked(through) == asked(direct) and "Capital of France?" in direct["asked"][0]
    assert "Paris, of course." in json.dumps(direct["answers"]["trigger-sampling-request"])
    assert "file:///srv/project" in json.dumps(direct["answers"]["get-roots-list"])


def test_they_reach_a_client_over_streamable_http_as_directly(tmp_path):
    everything = [str(NPM_BIN / "mcp-server-everything"), "stdio"]
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything[0], "args": everything[1:]}}}))
    direct = use(everything[0], everything[1:])
    with serving.http_gateway(config, tmp_path / "gateway.log") as url:
        through = use("", [], url=url)
    assert set(NEEDING) <= set(through["names"])
    assert through["answers"] == direct["answers"]
    assert asked(through) == asked(direct)
    assert "Paris, of course." in json.dumps(through["answers"]["trigger-sampling-request"])


def test_a_client_without_them_gets_an_error_the_model_can_read(tmp_path):
    everything = [str(NPM_BIN / "mcp-server-everything"), "stdio"]
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything[0], "args": everything[1:]}}}))
    through = use(str(BIN / "toolscope-mcp"), ["--config", str(config)], offer=False)
    # The gateway offers them upstream, so the tools are listed; the client cannot answer.
    error, blocks = through["answers"]["trigger-sampling-request"]
    assert error  # the server reports the failed sampling as a tool error
    assert "does not support sampling" in json.dumps(blocks)
