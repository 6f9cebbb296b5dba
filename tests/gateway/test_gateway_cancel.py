"""A call the client cancels is recorded (issue 27, item 8): the gateway in process, served over
the MCP SDK's in-memory streams to the official Python client, npm's server-everything behind it
running a long operation; toolscope's side is a recording stand-in for the SDK client (what the
gateway hands it is the point here: the live tests cover its delivery)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.memory import create_client_server_memory_streams
from toolscope_agent.gateway.config import parse_config
from toolscope_agent.gateway.server import Gateway

pytestmark = pytest.mark.slow

NPM_BIN = Path(__file__).resolve().parent / "npm" / "node_modules" / ".bin"


class Recorded:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def start(self) -> None: ...
    def end(self) -> None: ...
    def turn(self, **fields: Any) -> None: ...

    def tool_call(self, name: str, arguments: Any, **fields: Any) -> None:
        self.calls.append({"name": name, "arguments": arguments, **fields})


class RecordingClient:
    def __init__(self) -> None:
        self.recorded = Recorded()

    def session(self, **fields: Any) -> Recorded:
        return self.recorded

    def register_tools(self, catalog: Any) -> None: ...
    def flush(self, timeout: float | None = None) -> bool:
        return True


def test_a_call_the_client_cancels_is_recorded_as_cancelled():
    config = parse_config({"mcpServers": {"everything": {"command": str(NPM_BIN / "mcp-server-everything"),
                                                           "args": ["stdio"]}}}, {})
    client = RecordingClient()
    gateway = Gateway(config, policy={"selection": {"mode": "all"}}, client=client)  # type: ignore[arg-type]
    server = gateway.server()

    async def main() -> None:
        async with create_client_server_memory_streams() as (client_streams, server_streams), \
                anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: server.run(*server_streams, server.create_initialization_options()))
            async with ClientSession(*client_streams) as session:
                await session.initialize()
                await session.list_tools()
                with anyio.move_on_after(1.5):  # the operation takes 10 s: the client gives up first
                    await session.call_tool("trigger-long-running-operation", {"duration": 10, "steps": 5})
                with anyio.fail_after(10):
                    while not client.recorded.calls:
                        await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()

    anyio.run(main)
    [call] = client.recorded.calls
    assert call["name"] == "trigger-long-running-operation" and call["status"] == "error"
    assert call["output"] == "cancelled by the client" and call["duration_ms"] >= 1000
