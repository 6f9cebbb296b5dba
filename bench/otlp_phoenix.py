"""OTLP load beside Arize Phoenix (issue 16): the same 50,000 GenAI spans to both, in one run.

The load (as the issue describes Phoenix's published figure): traces of 20 LLM spans
(`gen_ai.operation.name` chat, each carrying ~6 KB of `gen_ai.tool.definitions`, usage and short
input/output messages) with 1-2 `execute_tool` spans after each, 1,000 traces, cut into export
requests of 512 spans (the OTel SDK's default batch), protobuf, built once with
opentelemetry-proto and sent byte for byte alike to both servers by 4 concurrent clients.

- accepted: spans / the time until every request was answered 2xx;
- processed: spans / the time until every span is queryable: for toolscope every stored batch
  done (sessions, turns and calls written by the Celery workers), for Phoenix its span count
  (GraphQL) reaching the total.

toolscope runs as production does here: the compose web command (granian, WEB_CONCURRENCY) and
Celery workers on PostgreSQL. Phoenix runs `phoenix serve` from a virtualenv of its own
(--phoenix-venv, default /tmp/phoenix-venv: python3 -m venv /tmp/phoenix-venv &&
/tmp/phoenix-venv/bin/pip install arize-phoenix), SQLite in a scratch working directory.

    .venv/bin/python bench/otlp_phoenix.py [--spans 50000] [--clients 4] [--workers 2] [--skip-phoenix]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _stack import (
    _stop,
    celery_worker,
    compose_web,
    create_key,
    free_port,
    manage,
    scratch_database,
    stack_env,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

LLM_PER_TRACE = 20
REQUEST_SPANS = 512


def tool_definitions(rng: random.Random) -> str:
    """~6 KB of tool definitions, as an agent with a dozen tools advertises them."""
    tools = []
    while len(json.dumps(tools)) < 6000:
        name = f"tool_{len(tools)}_{rng.choice(['read', 'write', 'search', 'run', 'list'])}"
        tools.append({"type": "function", "name": name,
                      "description": "Does one thing to the workspace and reports what it did, briefly.",
                      "parameters": {"type": "object", "properties": {
                          "path": {"type": "string", "description": "A path relative to the workspace root."},
                          "query": {"type": "string", "description": "What to look for, in a few words."},
                          "limit": {"type": "integer", "description": "At most this many results."}},
                          "required": ["path"]}})
    return json.dumps(tools)


def _attrs(**values: Any) -> list[KeyValue]:
    out = []
    for key, value in values.items():
        key = key.replace("__", ".")
        if isinstance(value, int):
            out.append(KeyValue(key=key, value=AnyValue(int_value=value)))
        else:
            out.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return out


def build_load(total: int, seed: int = 7) -> list[bytes]:
    """Export requests of REQUEST_SPANS spans each, `total` spans in all."""
    rng = random.Random(seed)
    definitions = tool_definitions(rng)
    spans: list[Span] = []
    now = time.time_ns() - 3600 * 10**9
    trace_number = 0
    while len(spans) < total:
        trace_number += 1
        trace = rng.randbytes(16)
        start = now + trace_number * 10**9
        history = [{"role": "user", "parts": [{"type": "text", "content": f"Fix issue #{trace_number}"}]}]
        for turn in range(LLM_PER_TRACE):
            if len(spans) >= total:
                break
            calls = rng.choice([1, 2])
            ids = [f"call_{trace_number}_{turn}_{n}" for n in range(calls)]
            output = [{"role": "assistant", "parts": [
                {"type": "tool_call", "id": call_id, "name": "tool_0_read", "arguments": {"path": "src/app.py"}}
                for call_id in ids]}]
            spans.append(Span(trace_id=trace, span_id=rng.randbytes(8), name="chat gpt-4o", kind=3,
                              start_time_unix_nano=start, end_time_unix_nano=start + 800_000_000,
                              attributes=_attrs(gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                                                gen_ai__provider__name="openai",
                                                gen_ai__usage__input_tokens=rng.randint(4000, 9000),
                                                gen_ai__usage__output_tokens=rng.randint(50, 400),
                                                gen_ai__tool__definitions=definitions,
                                                gen_ai__input__messages=json.dumps(history),
                                                gen_ai__output__messages=json.dumps(output))))
            start += 900_000_000
            for call_id in ids:
                if len(spans) >= total:
                    break
                spans.append(Span(trace_id=trace, span_id=rng.randbytes(8), name="execute_tool tool_0_read",
                                  kind=1, start_time_unix_nano=start, end_time_unix_nano=start + 20_000_000,
                                  attributes=_attrs(gen_ai__operation__name="execute_tool",
                                                    gen_ai__tool__name="tool_0_read", gen_ai__tool__call__id=call_id,
                                                    gen_ai__tool__call__arguments='{"path": "src/app.py"}',
                                                    gen_ai__tool__call__result="def app():\n    return 1\n" * 12)))
                start += 30_000_000
            history += output
            history += [{"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                                    "response": "def app():\n    return 1\n" * 12}]}
                        for call_id in ids]
    resource = Resource(attributes=_attrs(service__name="bench-agent"))
    return [ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource, scope_spans=[
        ScopeSpans(spans=spans[start:start + REQUEST_SPANS])])]).SerializeToString()
        for start in range(0, len(spans), REQUEST_SPANS)]


def send(url: str, bodies: list[bytes], clients: int, headers: dict[str, str]) -> float:
    """Seconds until every body was answered 2xx (retried on 429/503, as exporters do)."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    failures: list[str] = []

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                for _ in range(20):
                    response = http.post(url, content=body, headers={
                        "Content-Type": "application/x-protobuf", **headers})
                    if response.status_code < 300:
                        break
                    if response.status_code not in (429, 502, 503):
                        failures.append(f"{response.status_code} {response.text[:200]}")
                        break
                    time.sleep(float(response.headers.get("Retry-After", "1")))

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, the first: {failures[0]}")
    return time.perf_counter() - started


def wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.25)


def run_toolscope(bodies: list[bytes], total: int, clients: int, workers: int, logs: Path) -> dict[str, float]:
    with scratch_database() as database_url:
        queue_name = f"bench-otlp-{os.getpid()}"
        env = stack_env(database_url, INGEST_QUEUE=queue_name, WEB_CONCURRENCY="2")
        manage(env, "migrate", "--noinput")
        key = create_key(env)
        conninfo = database_url

        def batches_done() -> bool:
            with psycopg.connect(conninfo) as conn:
                row = conn.execute("SELECT count(*) FILTER (WHERE status <> 'done'), count(*) "
                                   "FROM telemetry_ingestbatch").fetchone()
            return row is not None and row[0] == 0 and row[1] == len(bodies)

        with compose_web(env, log=logs / "web.log") as (base, _), \
                celery_worker(env, queue=queue_name, log=logs / "worker.log", concurrency=workers):
            started = time.perf_counter()
            accepted = send(f"{base}/api/v1/otlp/v1/traces", bodies, clients, {"Authorization": f"Bearer {key}"})
            wait(batches_done, 1800, "toolscope's workers")
            processed = time.perf_counter() - started
        with psycopg.connect(conninfo) as conn:
            counts = conn.execute("SELECT (SELECT count(*) FROM telemetry_turn), "
                                  "(SELECT count(*) FROM telemetry_toolcall)").fetchone()
    return {"accepted_s": accepted, "processed_s": processed, "turns": counts[0], "calls": counts[1]}


def phoenix_spans(base: str) -> int:
    query = "{ projects { edges { node { name recordCount } } } }"
    response = httpx.post(f"{base}/graphql", json={"query": query}, timeout=30)
    edges = response.json()["data"]["projects"]["edges"]
    return sum(edge["node"]["recordCount"] for edge in edges)


def run_phoenix(bodies: list[bytes], total: int, clients: int, venv: Path, logs: Path) -> dict[str, float]:
    port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as workdir:
        env = {**os.environ, "PHOENIX_WORKING_DIR": workdir, "PHOENIX_PORT": str(port), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_GRPC_PORT": str(grpc_port)}
        log = (logs / "phoenix.log").open("w")
        process = subprocess.Popen([str(venv / "bin" / "phoenix"), "serve"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            wait(lambda: _up(base), 180, "phoenix to start")
            started = time.perf_counter()
            accepted = send(f"{base}/v1/traces", bodies, clients, {})
            wait(lambda: phoenix_spans(base) >= total, 3600, "phoenix to store every span")
            processed = time.perf_counter() - started
        finally:
            _stop(process)
            log.close()
    return {"accepted_s": accepted, "processed_s": processed}


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="toolscope's Celery worker processes")
    parser.add_argument("--phoenix-venv", type=Path, default=Path(tempfile.gettempdir()) / "phoenix-venv")
    parser.add_argument("--skip-phoenix", action="store_true")
    args = parser.parse_args()
    bodies = build_load(args.spans)
    size = sum(map(len, bodies))
    print(f"{args.spans:,} spans in {len(bodies)} requests, {size / 1e6:.1f} MB of protobuf")
    with tempfile.TemporaryDirectory() as logs:
        results = {"toolscope": run_toolscope(bodies, args.spans, args.clients, args.workers, Path(logs))}
        if not args.skip_phoenix:
            results["phoenix"] = run_phoenix(bodies, args.spans, args.clients, args.phoenix_venv, Path(logs))
    print("\n| server | accepted in | spans/s accepted | queryable after | spans/s processed |")
    print("| --- | --- | --- | --- | --- |")
    for name, figures in results.items():
        print(f"| {name} | {figures['accepted_s']:.1f} s | {args.spans / figures['accepted_s']:,.0f} | "
              f"{figures['processed_s']:.1f} s | {args.spans / figures['processed_s']:,.0f} |")
    if "phoenix" in results:
        ratio = results["phoenix"]["processed_s"] / results["toolscope"]["processed_s"]
        print(f"\ntoolscope processes the load {ratio:.1f}x faster than Phoenix")
    print(f"toolscope wrote {results['toolscope']['turns']:,} turns and {results['toolscope']['calls']:,} tool calls")


if __name__ == "__main__":
    main()
