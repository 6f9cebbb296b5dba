"""Tools that run only as MCP tasks, through toolscope-mcp (issue 27, item 8): npm's
server-everything's `simulate-research-query` declares `execution.taskSupport: "required"`.
Called directly without a task it refuses; the gateway lists it as a plain tool, runs the task
itself (`tools/call` with `task`, then `tasks/result`), relays the task's elicitation to the
client, and answers with the report the server gives when the task is run directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
EVERYTHING = [str(REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"), "stdio"]
TOOL = "simulate-research-query"


async def clarify(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person behind the client picks an interpretation of an ambiguous topic."""
    return types.ElicitResult(action="accept", content={"interpretation": "programming"})


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def direct() -> dict[str, Any]:
    """The server called directly: a plain call, then the task run by hand."""

    async def main() -> dict[str, Any]:
        with open("/dev/null", "w") as errlog:
            async with stdio_client(StdioServerParameters(command=EVERYTHING[0], args=EVERYTHING[1:]),
                                    errlog=errlog) as (r, w):
                dispatcher = JSONRPCDispatcher(r, w)
                async with ClientSession(dispatcher=dispatcher, elicitation_callback=clarify) as session:
                    await session.initialize()
                    listed = next(t for t in (await session.list_tools()).tools if t.name == TOOL)
                    plain = await session.call_tool(TOOL, {"topic": "bees"})
                    reports = []
                    for arguments in ({"topic": "bees"}, {"topic": "python", "ambiguous": True}):
                        created = types.CreateTaskResult.model_validate(await dispatcher.send_raw_request(
                            "tools/call", {"name": TOOL, "arguments": arguments, "task": {"ttl": 60000}}, {}))
                        reports.append(text(await session.send_request(types.GetTaskPayloadRequest(
                            params=types.GetTaskPayloadRequestParams(task_id=created.task.task_id)),
                            types.CallToolResult)))
                    return {"listed": listed.model_dump(by_alias=True, exclude_none=True), "plain": plain,
                            "reports": reports}

    return anyio.run(main)


def through(config: Path) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with open("/dev/null", "w") as errlog:
            async with stdio_client(StdioServerParameters(command=str(BIN / "toolscope-mcp"),
                                                          args=["--config", str(config)]), errlog=errlog) as (r, w), \
                    ClientSession(r, w, elicitation_callback=clarify) as session:
                await session.initialize()
                listed = next(t for t in (await session.list_tools()).tools if t.name == TOOL)
                results = [await session.call_tool(TOOL, arguments)
                           for arguments in ({"topic": "bees"}, {"topic": "python", "ambiguous": True})]
                # A cancelled call cancels its task; the gateway goes on serving.
                with anyio.move_on_after(0.5):
                    await session.call_tool(TOOL, {"topic": "cancelled"})
                after = await session.call_tool("echo", {"message": "still here"})
                return {"listed": listed.model_dump(by_alias=True, exclude_none=True),
                        "errors": [result.is_error for result in results], "reports": [text(r) for r in results],
                        "after": text(after)}

    return anyio.run(main)


def test_a_tool_that_runs_only_as_a_task_answers_through_the_gateway_as_its_task_does_directly(tmp_path):
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": EVERYTHING[0], "args": EVERYTHING[1:]}}}))
    before, after = direct(), through(config)
    # Directly, a plain call cannot run it: it needs a task.
    assert before["listed"]["execution"] == {"taskSupport": "required"}
    assert before["plain"].is_error and "task" in text(before["plain"])
    # Through the gateway it is a plain tool (the gateway offers no tasks; it runs them itself)...
    assert "execution" not in after["listed"]
    assert {k: v for k, v in after["listed"].items() if k != "execution"} == {
        k: v for k, v in before["listed"].items() if k != "execution"}
    # ...which answers with the report of the task run directly, the elicitation relayed.
    assert after["errors"] == [False, False]
    assert after["reports"] == before["reports"]
    assert "# Research Report: bees" in after["reports"][0]
    assert "Clarification**: programming" in after["reports"][1]
    assert after["after"] == "Echo: still here"
