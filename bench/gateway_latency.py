"""Latency the MCP gateway adds to a `tools/call` (issue 15). Goal: < 2 ms added at p50.

One run, three connections held open side by side, each driven by the official MCP client
(`ClientSession` over stdio), calling mcp-server-time's `get_current_time` (real server, PyPI):

- direct: the client starts mcp-server-time itself;
- gateway: the client starts `toolscope-mcp` (console script), which starts mcp-server-time; the
  configuration's own policy (context_rules, a compaction rule on the tool, duplicates
  suppressed), so every output goes through the output rules;
- gateway + telemetry: the same with a toolscope section pointing at a local stub on 127.0.0.1
  that serves the policy and accepts every batch (202), so each call is also recorded through
  the SDK's exporter.

Calls go round-robin in rounds of ROUND per connection, so drift of the machine touches all
three alike. Reported: p50, p90, p99 and mean per connection, and what the gateway adds over
direct at p50 and p99.

    .venv/bin/python bench/gateway_latency.py [--calls 3000]
    PYTHONPATH=/tmp/worktree/sdk .venv/bin/python bench/gateway_latency.py   # another build
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

BIN = Path(__file__).resolve().parents[1] / ".venv" / "bin"
ROUND = 50
WARMUP = 100
POLICY = {"schema_version": 1, "version": 1, "etag": '"bench"',
          "selection": {"mode": "context_rules", "always_on": ["get_current_time"]},
          "outputs": {"duplicates": {"suppress": True},
                      "compaction": [{"tools": "get_current_time", "max_tokens": 400, "strategy": "head_tail"}]}}


class Stub(BaseHTTPRequestHandler):
    """toolscope as the gateway sees it: the policy, and 202 for every batch."""

    events = 0

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", '"bench"')
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200, POLICY)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        Stub.events += len(json.loads(raw).get("events", []))
        self._answer(202, {"results": []})

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(200, {"results": []})


async def connect(stack: AsyncExitStack, command: str, args: list[str]) -> Any:
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.stdio import get_default_environment

    # The SDK passes a child only a few variables: PYTHONPATH too, so that a build on it (an
    # earlier commit's worktree, say) is what runs.
    env = get_default_environment() | {key: os.environ[key] for key in ("PYTHONPATH",) if key in os.environ}
    read, write = await stack.enter_async_context(stdio_client(StdioServerParameters(command=command, args=args,
                                                                                     env=env)))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def measure(calls: int, workdir: Path, stub_url: str) -> dict[str, list[float]]:
    time_server = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    servers = {"time": {"command": time_server[0], "args": time_server[1:]}}
    plain = workdir / "gateway.json"
    plain.write_text(json.dumps({"mcpServers": servers, "policy": POLICY}))
    recorded = workdir / "gateway-telemetry.json"
    recorded.write_text(json.dumps({"mcpServers": servers, "toolscope": {
        "url": stub_url, "apiKey": "tsk_bench", "cacheDir": str(workdir / "cache")}}))
    async with AsyncExitStack() as stack:
        sessions = {
            "direct": await connect(stack, time_server[0], time_server[1:]),
            "gateway": await connect(stack, str(BIN / "toolscope-mcp"), ["--config", str(plain)]),
            "gateway + telemetry": await connect(stack, str(BIN / "toolscope-mcp"), ["--config", str(recorded)]),
        }
        for session in sessions.values():
            await session.list_tools()
            for _ in range(WARMUP):
                await session.call_tool("get_current_time", {"timezone": "UTC"})
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(calls // ROUND):
            for name, session in sessions.items():
                for _ in range(ROUND):
                    started = time.perf_counter()
                    result = await session.call_tool("get_current_time", {"timezone": "Europe/Paris"})
                    times[name].append((time.perf_counter() - started) * 1000)
                    assert not result.is_error
        return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000, help="calls per connection")
    args = parser.parse_args()
    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as work:
        times = anyio.run(measure, args.calls, Path(work), f"http://127.0.0.1:{stub.server_address[1]}")
    stub.shutdown()
    direct = times["direct"]
    print(f"{args.calls} calls per connection, rounds of {ROUND}; the stub received {Stub.events} events\n")
    print("| connection | p50 | p90 | p99 | mean | added p50 | added p99 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, values in times.items():
        added = "" if name == "direct" else (
            f"{percentile(values, 0.5) - percentile(direct, 0.5):+.2f} ms | "
            f"{percentile(values, 0.99) - percentile(direct, 0.99):+.2f} ms")
        print(f"| {name} | {percentile(values, 0.5):.2f} ms | {percentile(values, 0.9):.2f} ms | "
              f"{percentile(values, 0.99):.2f} ms | {statistics.fmean(values):.2f} ms | {added or '- | -'} |")


if __name__ == "__main__":
    main()
