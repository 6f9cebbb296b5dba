"""Two servers with the same tools behind toolscope-mcp (issue 27): npm's server-memory twice,
each with its own memory file. Every tool is listed once per server, prefixed with the server's
name and otherwise as the server defines it, and each call reaches its own server: what one
stores, the other does not see, as when each is called directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
MEMORY = str(REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin" / "mcp-server-memory")
ENTITY = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}


async def session_of(parameters: StdioServerParameters, work: Any) -> Any:
    with open("/dev/null", "w") as errlog:
        async with stdio_client(parameters, errlog=errlog) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            return await work(session)


def test_same_named_tools_of_two_servers_are_prefixed_and_reach_their_own_server(tmp_path):
    async def direct(session: ClientSession) -> dict[str, Any]:
        tools = {tool.name: tool.model_dump(by_alias=True, exclude_none=True)
                 for tool in (await session.list_tools()).tools}
        created = await session.call_tool("create_entities", {"entities": [ENTITY]})
        return {"tools": tools, "created": created.model_dump(mode="json", exclude_none=True)}

    async def through(session: ClientSession) -> dict[str, Any]:
        tools = {tool.name: tool.model_dump(by_alias=True, exclude_none=True)
                 for tool in (await session.list_tools()).tools}
        created = await session.call_tool("work_create_entities", {"entities": [ENTITY]})
        graphs = {server: (await session.call_tool(f"{server}_read_graph", {})).structured_content
                  for server in ("work", "home")}
        return {"tools": tools, "created": created.model_dump(mode="json", exclude_none=True), "graphs": graphs}

    files = {name: tmp_path / f"{name}.jsonl" for name in ("direct", "work", "home")}
    before = anyio.run(session_of, StdioServerParameters(
        command=MEMORY, env={"MEMORY_FILE_PATH": str(files["direct"])}), direct)
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {
        server: {"command": MEMORY, "env": {"MEMORY_FILE_PATH": str(files[server])}} for server in ("work", "home")}}))
    after = anyio.run(session_of, StdioServerParameters(command=str(BIN / "toolscope-mcp"),
                                                        args=["--config", str(config)]), through)

    assert len(before["tools"]) >= 9
    for server in ("work", "home"):
        for name, tool in before["tools"].items():
            assert after["tools"][f"{server}_{name}"] == tool | {"name": f"{server}_{name}"}
    assert after["created"] == before["created"]
    assert [entity["name"] for entity in after["graphs"]["work"]["entities"]] == ["Ada"]
    assert after["graphs"]["home"]["entities"] == []
    assert "Ada" in files["work"].read_text() and not files["home"].exists()
