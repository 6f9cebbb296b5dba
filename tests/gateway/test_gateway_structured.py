"""Compaction reaches structuredContent (issue 27, item 4): npm's server-filesystem (pinned)
behind toolscope-mcp reads a 249 KB file; the official Python client, which checks structured
content against the tool's output schema, reads it directly and through the gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
NPM_BIN = REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin"


def read_twice(params: StdioServerParameters, path: Path) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with open("/dev/null", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name: tool for tool in (await session.list_tools()).tools}
                first = await session.call_tool("read_text_file", {"path": str(path)})  # checked by the client
                again = await session.call_tool("read_text_file", {"path": str(path)})
                seen: dict[str, Any] = {"schema": tools["read_text_file"].output_schema,
                                        "first": (first.content[0].text, first.structured_content),
                                        "again": (again.content[0].text, again.structured_content)}
                if "retrieve_tool_output" in tools:
                    key = first.content[0].text.split('retrieve_tool_output(id="')[1].split('"')[0]
                    seen["original"] = (await session.call_tool("retrieve_tool_output", {"id": key})).content[0].text
                return seen

    return anyio.run(main)


def test_a_compacted_answer_shortens_its_structured_content_and_keeps_it_valid(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {n} of a long file\n" for n in range(10_000)))
    server = [str(NPM_BIN / "mcp-server-filesystem"), str(tmp_path)]
    direct = read_twice(StdioServerParameters(command=server[0], args=server[1:]), big)
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({
        "policy": {"selection": {"mode": "all"}, "tools": {"read_text_file": {"max_result_tokens": 300}},
                   "outputs": {"duplicates": {"suppress": True}, "compaction": []}},
        "mcpServers": {"files": {"command": server[0], "args": server[1:]}}}))
    through = read_twice(StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)]),
                         big)

    text, structured = direct["first"]
    assert len(text) > 240_000 and structured == {"content": text}
    short, shortened = through["first"]
    assert len(short) < 3_000 and 'retrieve_tool_output(id="' in short
    # The structured content is shortened alike (the client checked it against the output
    # schema: it is still valid), its note naming the same original.
    assert set(shortened) == {"content"} and len(shortened["content"]) < 4_000
    assert short.split('id="')[1][:16] in shortened["content"]
    assert shortened["content"].startswith("line 0 of a long file")
    assert "line 9999 of a long file" in shortened["content"]
    assert through["original"] == text  # the whole original, retrievable
    # A repeat: the placeholder in both.
    placeholder, repeated = through["again"]
    assert placeholder.startswith("[same output as") and repeated == {"content": placeholder}
    assert through["schema"] == direct["schema"]


def test_structured_content_that_would_not_fit_its_schema_shortened_is_kept_whole():
    from toolscope_agent.gateway.outputs import shortened

    original = {"content": "word " * 2_000}
    note = 'head [… cut; retrieve_tool_output(id="abc")] tail'
    free = {"type": "object", "properties": {"content": {"type": "string"}}}
    strict = {"type": "object", "properties": {"content": {"type": "string", "pattern": "^[a-z ]*$"}}}
    assert len(shortened(original, note, free)["content"]) < 300
    assert shortened(original, note, strict) == original  # a cut note would break the pattern
