"""How long a client waits for `initialize` from toolscope-mcp in front of five real servers
(issue 27, item 7): npm's server-everything, server-filesystem, server-memory twice, and PyPI's
mcp-server-time, started by the gateway. Before 2026-12-04 they were started one after another;
now all at once.

    .venv/bin/python bench/gateway_startup.py [--runs 5] [--gateway PATH]

`--gateway` runs another build of the console script (e.g. a wrapper that sets PYTHONPATH to an
older checkout's sdk/), so two versions are timed in the same session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
NPM = REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin"


def config(directory: Path) -> Path:
    servers = {
        "everything": {"command": str(NPM / "mcp-server-everything"), "args": ["stdio"]},
        "files": {"command": str(NPM / "mcp-server-filesystem"), "args": [str(directory)]},
        "memory": {"command": str(NPM / "mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(directory / "a.jsonl")}},
        "memory2": {"command": str(NPM / "mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(directory / "b.jsonl")}},
        "time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]},
    }
    path = directory / "gateway.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


async def once(gateway: str, path: Path) -> tuple[float, int]:
    began = time.perf_counter()
    params = StdioServerParameters(command=gateway, args=["--config", str(path)])
    with open("/dev/null", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ready = time.perf_counter() - began
            tools = len((await session.list_tools()).tools)
    return ready, tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gateway", default=str(BIN / "toolscope-mcp"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = config(Path(scratch))
        times = []
        for _ in range(args.runs):
            seconds, tools = anyio.run(once, args.gateway, path)
            times.append(seconds)
    print(f"{args.gateway}: initialize after {statistics.median(times):.2f} s (median of {args.runs}; "
          f"min {min(times):.2f}, max {max(times):.2f}), {tools} tools listed")


if __name__ == "__main__":
    main()
