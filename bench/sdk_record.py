"""Cost of recording one tool call on the agent's thread (toolscope_agent).

Times N `session.tool_call(...)` calls (realistic arguments, a 2 KB output) one by one with
perf_counter_ns and prints mean, p50, p99, p99.9 and max in microseconds, for:

- server/10k:  the exporter posts to a local HTTP server answering 202, default options (a burst
               this size overflows the 10,000-event queue: most calls are dropped and counted);
- server/big:  the same with a queue for every event, so the exporter thread encodes, compresses
               and posts throughout, competing with the caller for the GIL;
- unreachable: the exporter points at a port nobody listens on, queue for every event (the
               caller's cost alone: the exporter sits in its backoff);
- decorator:   the same calls through an `@client.tool` function (server, big queue), i.e. the
               decorator's overhead on top of the tool itself.

Run: .venv/bin/python bench/sdk_record.py [--calls 200000] [--no-gc]

The tails (p99.9, max) are dominated by CPython's cyclic GC walking the backlog of queued event
dicts (--no-gc shows it) and by GIL hand-overs with the exporter thread; a real agent's queue
holds a handful of events.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import socket
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toolscope_agent import Client

OUTPUT = ("def handler(request):\n    return respond(request.json(), status=200)  # line of code\n" * 40)[:2048]
ARGUMENTS = {"path": "src/toolscope/api/views.py", "start_line": 120, "end_line": 180, "encoding": "utf-8"}


class _Accepting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"accepted": 0, "duplicates": 0, "rejected": 0, "results": []}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accepting)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _measure(calls: int, record: Callable[[int], object]) -> list[int]:
    timings = [0] * calls
    clock = time.perf_counter_ns
    for i in range(calls):
        started = clock()
        record(i)
        timings[i] = clock() - started
    return timings


def _report(label: str, timings: list[int], client: Client, wall: float) -> None:
    ordered = sorted(timings)
    n = len(ordered)

    def pct(p: float) -> float:
        return ordered[min(n - 1, int(p * n))] / 1000

    stats = client.stats
    print(
        f"{label:<12} calls={n:>7}  mean={statistics.fmean(timings) / 1000:6.2f} µs  "
        f"p50={pct(0.50):6.2f}  p99={pct(0.99):6.2f}  p99.9={pct(0.999):8.2f}  max={ordered[-1] / 1000:9.1f} µs  "
        f"| wall {wall:5.2f} s; sent={stats.sent} dropped={stats.dropped} queued={stats.queued}"
    )


def _tool_calls(client: Client, calls: int) -> tuple[list[int], float]:
    with client.session(agent_name="bench", model="gpt-4o") as s:
        s.turn()

        def record(i: int) -> object:
            return s.tool_call("read_file", ARGUMENTS, output=OUTPUT, duration_ms=3.2, call_id=f"call_{i}")

        started = time.perf_counter()
        timings = _measure(calls, record)
        return timings, time.perf_counter() - started


def run(calls: int) -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    server = _serve()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    big_queue = calls + 10

    # 1. A local server answering 202 with the default options: a burst this size overflows the
    #    10,000-event queue, so most calls take the "dropped" path.
    client = Client(url, "bench-key")
    timings, wall = _tool_calls(client, calls)
    client.flush()
    _report("server/10k", timings, client, wall)
    client.close()

    # 2. The same with a queue for everything: the exporter encodes, compresses and posts all the
    #    time, competing with the caller for the GIL.
    client = Client(url, "bench-key", max_queue_size=big_queue)
    timings, wall = _tool_calls(client, calls)
    client.flush()
    _report("server/big", timings, client, wall)
    client.close()

    # 3. Nobody listening, a queue for everything: the caller's cost alone (the exporter sits in
    #    its backoff).
    client = Client(f"http://127.0.0.1:{_unused_port()}", "bench-key", max_queue_size=big_queue, backoff_base=30.0)
    timings, wall = _tool_calls(client, calls)
    _report("unreachable", timings, client, wall)
    client.close(timeout=0)

    # 4. Through the decorator (server, big queue); the tool itself returns a constant.
    client = Client(url, "bench-key", max_queue_size=big_queue)

    @client.tool()
    def read_file(path: str, start_line: int, end_line: int, encoding: str = "utf-8") -> str:
        return OUTPUT

    with client.session(agent_name="bench", model="gpt-4o") as s:
        s.turn()
        started = time.perf_counter()
        timings = _measure(calls, lambda i: read_file(**ARGUMENTS))
        wall = time.perf_counter() - started
    client.flush()
    _report("decorator", timings, client, wall)
    client.close()
    server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="disable the cyclic GC while measuring (shows how much of the tail is GC pauses over the backlog)",
    )
    options = parser.parse_args()
    if options.no_gc:
        gc.disable()
    print(f"toolscope_agent record bench: {options.calls} calls per mode, GC {'off' if options.no_gc else 'on'}")
    run(options.calls)


if __name__ == "__main__":
    main()
