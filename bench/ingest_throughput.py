"""Ingest throughput: tool_call events accepted per second through POST /api/v1/ingest.

500-event batches of tool_call events with 2 KB outputs and realistic arguments, every id unique,
sent by concurrent keep-alive clients to gunicorn on this machine, PostgreSQL on the same box.

    .venv/bin/python bench/ingest_throughput.py [--seconds 20] [--workers 3] [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time

import httpx
from _stack import create_key, gunicorn, manage, percentile, scratch_database, stack_env

BATCH = 500
WORDS = ("def", "return", "import", "self", "value", "config", "request", "assert", "None", "for",
         "PASSED", "FAILED", "tests/test_api.py::test_list", "0.02s", "src/app/models.py:42", "=")


def output_2kb(rng: random.Random) -> str:
    text = []
    size = 0
    while size < 2048:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        text.append(line)
        size += len(line) + 1
    return "\n".join(text)[:2048]


def body_template(rng: random.Random) -> str:
    """A batch with a placeholder in every id, filled per request so ids never repeat."""
    events = []
    for i in range(BATCH):
        session = f"__B__-s{i // 50}"
        events.append({
            "type": "tool_call", "id": f"{session}:c{i}", "session_id": session, "turn_index": i % 50 // 3,
            "call_id": f"call_{i}", "tool_name": rng.choice(["read_file", "bash", "grep", "edit_file"]),
            "arguments": {"path": f"src/module_{i % 37}.py", "offset": i % 200, "limit": 400,
                          "pattern": "def .*_handler\\("},
            "output": output_2kb(rng), "status": "ok", "duration_ms": round(rng.uniform(2, 900), 1),
            "timestamp": "2026-11-22T10:00:00Z",
        })
    return json.dumps({"events": events})


def client_loop(base, key, template, deadline, counter, latencies, errors):
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"}, timeout=30) as http:
        while time.monotonic() < deadline:
            with counter["lock"]:
                counter["n"] += 1
                n = counter["n"]
            body = template.replace("__B__", f"b{n}")
            started = time.perf_counter()
            response = http.post("/api/v1/ingest", content=body)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 202 or response.json()["accepted"] != BATCH:
                errors.append(response.status_code)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    template = body_template(random.Random(7))
    with scratch_database() as database_url:
        env = stack_env(database_url)
        manage(env, "migrate", "-v0")
        key = create_key(env)
        with gunicorn(env, workers=args.workers, threads=args.threads) as base:
            # Warm up every worker (connections, imports).
            for _ in range(args.workers * 2):
                httpx.post(f"{base}/api/v1/ingest", content=template.replace("__B__", "warm" + str(_)),
                           headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                           timeout=30)
            counter = {"n": 0, "lock": threading.Lock()}
            latencies: list[float] = []
            errors: list[int] = []
            deadline = time.monotonic() + args.seconds
            started = time.monotonic()
            threads = [threading.Thread(target=client_loop,
                                        args=(base, key, template, deadline, counter, latencies, errors))
                       for _ in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
    events = len(latencies) * BATCH
    print(f"gunicorn workers={args.workers} threads={args.threads} clients={args.clients} "
          f"seconds={elapsed:.1f} body={len(template) / 1e6:.2f} MB/request")
    print(f"requests={len(latencies)} errors={len(errors)} events/s={events / elapsed:,.0f}")
    print(f"latency ms p50={percentile(latencies, 0.5) * 1000:.0f} p99={percentile(latencies, 0.99) * 1000:.0f} "
          f"max={max(latencies) * 1000:.0f}")


if __name__ == "__main__":
    main()
