"""toolscope-proxy under 200 concurrent streams in one process (issue 29, Must show): time to
first byte beside direct, and the proxy's memory per open stream.

A provider on 127.0.0.1 (tests/proxy/provider.py, in a process of its own) streams each Chat
Completions answer as 8 events 0.25 s apart (2 s a stream), so that every stream is open at once. N clients (asyncio,
httpx) each open one stream at the same moment, directly and then through `toolscope-proxy
--mode enforce` (its own process, telemetry to a stub toolscope on 127.0.0.1 that takes every
batch, a context-rules policy). Reported: time to first byte p50 / p99 for each, and the proxy's
resident memory before the streams and at their peak, per stream.

    .venv/bin/python bench/proxy_streams.py [--streams 200]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from proxy_latency import TOOLS, Stub, conversation, free_port, start_proxy  # noqa: E402

GAP = 0.25
PROVIDER = """
import sys
sys.path.insert(0, {repo!r})
import uvicorn
from tests.proxy.provider import Provider, app
uvicorn.run(app(Provider(event_gap={gap})), host="127.0.0.1", port={port}, log_level="warning")
"""


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def stream(client: httpx.AsyncClient, base: str, n: int, start: asyncio.Event, delay: float) -> float:
    body = {"model": "gpt-4.1", "tools": TOOLS, "messages": conversation(n), "stream": True}
    await start.wait()
    await asyncio.sleep(delay)
    began = time.perf_counter()
    first = 0.0
    async with client.stream("POST", f"{base}/v1/chat/completions", json=body,
                             headers={"Authorization": "Bearer sk-bench"}) as response:
        response.raise_for_status()
        async for _ in response.aiter_raw():
            if not first:
                first = time.perf_counter() - began
    return first * 1000


async def wave(base: str, count: int, on_peak=None, spread: float = 0.0) -> list[float]:
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        start = asyncio.Event()
        tasks = [asyncio.create_task(stream(client, base, n, start, spread * n / count)) for n in range(count)]
        await asyncio.sleep(0.2)
        start.set()
        peak = None
        if on_peak is not None:
            await asyncio.sleep(spread + GAP * 2)  # every stream open
            peak = on_peak()
        firsts = await asyncio.gather(*tasks)
    if peak is not None:
        wave.peak = peak  # type: ignore[attr-defined]
    return list(firsts)


def quantiles(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), statistics.quantiles(values, n=100)[98]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--spread", type=float, default=0.0,
                        help="seconds over which the streams start (0: all at once; a stream lasts 2 s)")
    args = parser.parse_args()
    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    port = free_port()
    provider = subprocess.Popen([sys.executable, "-c", PROVIDER.format(repo=str(REPO), gap=GAP, port=port)])
    upstream = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        wait_listening(port)
        process, base = start_proxy("enforce", upstream, f"http://127.0.0.1:{stub.server_address[1]}", Path(home))
        try:
            asyncio.run(wave(base, 5))  # warm up: policy fetched, imports done
            direct = asyncio.run(wave(upstream, args.streams, spread=args.spread))
            idle = rss_kib(process.pid)
            proxied = asyncio.run(wave(base, args.streams, on_peak=lambda: rss_kib(process.pid), spread=args.spread))
            peak = wave.peak  # type: ignore[attr-defined]
            after = rss_kib(process.pid)
        finally:
            for running in (process, provider):
                running.terminate()
                running.wait(timeout=30)
    d50, d99 = quantiles(direct)
    p50, p99 = quantiles(proxied)
    print(f"{args.streams} streams started over {args.spread} s, 8 events {GAP} s apart each; "
          "requests of 40 tools and 20 messages")
    print(f"time to first byte, direct:  p50 {d50:.1f} ms, p99 {d99:.1f} ms")
    print(f"time to first byte, proxied: p50 {p50:.1f} ms, p99 {p99:.1f} ms (adds {p50 - d50:+.1f} / {p99 - d99:+.1f})")
    print(f"proxy RSS: {idle / 1024:.1f} MiB before, {peak / 1024:.1f} MiB with every stream open, "
          f"{after / 1024:.1f} MiB after: {(peak - idle) / args.streams:.0f} KiB per open stream")


if __name__ == "__main__":
    main()
