"""What toolscope-proxy adds to a model request (issue 29: "first byte not delayed").

One run, a provider on 127.0.0.1 (tests/proxy/provider.py: OpenAI Chat Completions as the API
answers it, streamed with 8 events, or whole) and three ways to it, side by side, round-robin in
rounds of ROUND requests so that drift of the machine touches them alike:

- direct: httpx to the provider;
- observe: through `toolscope-proxy --mode observe` (the console script, its own process), which
  records every request through the SDK's exporter to a stub on 127.0.0.1 that accepts every
  batch (202);
- enforce: the same with `--mode enforce` and a context-rules policy served by the stub, so each
  request is also parsed, selected and re-rendered (40 tools in, 6 sent).

Each request carries 40 tool definitions and a 20-message conversation (~30 KB). Reported per
way: time to the first byte of a streamed answer and to the whole answer, p50 / p90 / p99, and
what the proxy adds over direct at p50 and p99.

    .venv/bin/python bench/proxy_latency.py [--requests 600]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.proxy.provider import Provider, app, serving  # noqa: E402

BIN = REPO / ".venv" / "bin"
ROUND = 20
TOOLS = [{"type": "function", "function": {
    "name": f"tool_{n:02d}", "description": f"Tool number {n}: does one thing to a file of the repository.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "a path"},
                                                    "mode": {"type": "string", "enum": ["a", "b", "c"]}},
                   "required": ["path"]}}} for n in range(40)]
POLICY = {"schema_version": 1, "version": 1, "label": "production", "selection": {
    "mode": "context_rules", "allowed": None, "always_on": [f"tool_{n:02d}" for n in range(4)],
    "groups": {"tests": ["tool_10", "tool_11"]},
    "context_rules": [{"name": "tests", "keywords": ["tests"], "regex": None, "groups": ["tests"]}],
    "progressive": {"hint_prefix": "$"}, "tool_search": {"top_k": 8, "max_top_k": 20, "ranker": "bm25f-2"},
    "sticky_discovered": True}, "outputs": {"duplicates": {"suppress": True}, "compaction": []}, "tools": {}}


def conversation(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 40}]
    for turn in range(9):
        messages.append({"role": "user", "content": f"Step {turn} of request {n}: look at the file. " * 8})
        messages.append({"role": "assistant", "content": "I looked at it and it holds what you said. " * 8})
    messages.append({"role": "user", "content": f"Now run the tests, request {n}."})
    return messages


class Stub(BaseHTTPRequestHandler):
    """toolscope, as far as the proxy asks: the policy, and ingest that takes everything."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps(POLICY).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("ETag", '"v1"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            data = gzip.decompress(data)
        self.send_response(202)
        body = b'{"accepted": 0}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_proxy(mode: str, upstream: str, toolscope: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "TOOLSCOPE_URL": toolscope, "TOOLSCOPE_API_KEY": "ts_bench", "HOME": str(home)}
    process = subprocess.Popen([str(BIN / "toolscope-proxy"), "--mode", mode, "--port", str(port),
                                "--openai-base-url", upstream], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def one(client: httpx.Client, base: str, n: int, stream: bool) -> tuple[float, float]:
    body = {"model": "gpt-4.1", "tools": TOOLS, "messages": conversation(n), "stream": stream}
    started = time.perf_counter()
    first = 0.0
    with client.stream("POST", f"{base}/v1/chat/completions", json=body,
                       headers={"Authorization": "Bearer sk-bench"}) as response:
        response.raise_for_status()
        for _ in response.iter_raw():
            if not first:
                first = time.perf_counter() - started
    return first * 1000, (time.perf_counter() - started) * 1000


def quantiles(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100)
    return statistics.median(values), cuts[89], cuts[98]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=600, help="per way and kind (streamed, whole)")
    args = parser.parse_args()
    provider = Provider()
    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    toolscope = f"http://127.0.0.1:{stub.server_address[1]}"
    with serving(app(provider)) as upstream, tempfile.TemporaryDirectory() as home:
        proxies = {mode: start_proxy(mode, upstream, toolscope, Path(home) / mode) for mode in ("observe", "enforce")}
        bases = {"direct": upstream, **{mode: base for mode, (_, base) in proxies.items()}}
        results: dict[tuple[str, bool], list[tuple[float, float]]] = {(way, s): [] for way in bases
                                                                     for s in (True, False)}
        try:
            with httpx.Client(timeout=60) as client:
                for base in bases.values():  # warm up: connections, policy fetch, imports
                    for stream in (True, False):
                        for n in range(5):
                            one(client, base, n, stream)
                n = 0
                while n < args.requests:
                    for way, base in bases.items():
                        for stream in (True, False):
                            for k in range(ROUND):
                                results[(way, stream)].append(one(client, base, n + k, stream))
                    n += ROUND
        finally:
            for process, _ in proxies.values():
                process.terminate()
                process.wait(timeout=30)
    sent = len(provider.received[-1].body.get("tools", []))  # the last request was enforce's
    print(f"{args.requests} requests per way and kind; 40 tools and 20 messages each "
          f"({len(json.dumps({'tools': TOOLS, 'messages': conversation(0)})):,} bytes); load {os.getloadavg()[0]:.2f}")
    print(f"tools enforce sent upstream: {sent} of {len(TOOLS)}")
    print("| way | streamed: first byte p50 / p90 / p99 (ms) | streamed: whole p50 / p99 "
          "| whole answer p50 / p90 / p99 |")
    print("| --- | --- | --- | --- |")
    direct = {stream: results[("direct", stream)] for stream in (True, False)}
    for way in bases:
        first = quantiles([f for f, _ in results[(way, True)]])
        whole_stream = quantiles([w for _, w in results[(way, True)]])
        whole = quantiles([w for _, w in results[(way, False)]])
        print(f"| {way} | {first[0]:.2f} / {first[1]:.2f} / {first[2]:.2f} | {whole_stream[0]:.2f} / "
              f"{whole_stream[2]:.2f} | {whole[0]:.2f} / {whole[1]:.2f} / {whole[2]:.2f} |")
    for way in ("observe", "enforce"):
        d_first = quantiles([f for f, _ in direct[True]])
        w_first = quantiles([f for f, _ in results[(way, True)]])
        d_whole = quantiles([w for _, w in direct[False]])
        w_whole = quantiles([w for _, w in results[(way, False)]])
        print(f"{way}: adds {w_first[0] - d_first[0]:+.2f} ms p50 / {w_first[2] - d_first[2]:+.2f} ms p99 to the "
              f"first byte, {w_whole[0] - d_whole[0]:+.2f} ms p50 / {w_whole[2] - d_whole[2]:+.2f} ms p99 to a whole "
              f"answer")


if __name__ == "__main__":
    main()
