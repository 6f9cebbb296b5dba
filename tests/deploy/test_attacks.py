"""Attacks on the stack run as production runs it (issue 24): granian's web workers, the Celery
worker, simulator and beat from docker-compose.yml, on PostgreSQL and Redis.

Each attack is sent while another project ingests; it must not kill a web worker (their pids stay
the same), must keep every web worker's resident memory under 300 MB, and the other project's
requests must all succeed. Timings are measured in bench/attacks.py, not asserted here.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.attacks import bodies
from tests.attacks.procfs import children, rss_bytes
from tests.deploy.conftest import START_TIMEOUT, Stack, create_key

pytestmark = pytest.mark.slow
RSS_LIMIT = 300 * 1024 * 1024


def send(stack: Stack, path: str, body: bytes, key: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{stack.port}{path}", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {key}", **headers})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - http://127.0.0.1
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def ingest_one(stack: Stack, key: str) -> int:
    session = uuid.uuid4().hex
    events = [{"type": "session", "id": session, "agent_name": "victim"},
              {"type": "tool_call", "id": uuid.uuid4().hex, "session_id": session, "tool_name": "read_file",
               "status": "ok", "output": "hello"}]
    status, _ = send(stack, "/api/v1/ingest", json.dumps({"events": events}).encode(), key,
                     {"Content-Type": "application/json"})
    return status


class Watch:
    """The web workers' pids and the largest resident set each reached, sampled every 20 ms."""

    def __init__(self, stack: Stack) -> None:
        self.granian = stack.processes["web"].pid
        self.workers = children(self.granian)
        self.seen: set[int] = set(self.workers)
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for pid in children(self.granian):
                self.seen.add(pid)
                self.peak[pid] = max(self.peak.get(pid, 0), rss_bytes(pid))
            time.sleep(0.02)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def victim_ingesting(stack: Stack, key: str) -> Iterator[list[int]]:
    """Another project sends small batches, one after the other, until the block ends."""
    statuses: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            statuses.append(ingest_one(stack, key))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield statuses
    finally:
        stop.set()
        thread.join(timeout=130)


@pytest.fixture
def ready(stack: Stack) -> Stack:
    stack.poll_readyz(lambda status, _: status == 200, START_TIMEOUT, "web did not become ready")
    return stack


Send = Callable[[], tuple[int, bytes]]


def attack(stack: Stack, sends: list[Send]) -> tuple[list[tuple[int, bytes]], Watch, list[int]]:
    victim = create_key(stack, f"victim-{uuid.uuid4().hex[:6]}")
    assert ingest_one(stack, victim) == 202
    with Watch(stack) as watch, victim_ingesting(stack, victim) as statuses, ThreadPoolExecutor(len(sends)) as pool:
        answers = list(pool.map(lambda call: call(), sends))
    return answers, watch, statuses


def assert_survived(watch: Watch, statuses: list[int]) -> None:
    assert len(watch.workers) == 2 and watch.seen == watch.workers, "a web worker died and was respawned"
    peaks = {pid: round(size / 2**20) for pid, size in watch.peak.items()}
    assert max(watch.peak.values()) < RSS_LIMIT, f"web worker RSS peaks (MB): {peaks}"
    assert statuses and set(statuses) == {202}, statuses


def test_four_otlp_gzip_bombs_at_once_are_refused_and_no_worker_grows_or_dies(ready: Stack) -> None:
    key = create_key(ready, "attacker")
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    shapes = [bodies.empty_spans, bodies.one_span_of_events, bodies.one_span_of_attributes, bodies.one_array_attribute]
    sends = [lambda build=build: send(ready, "/api/v1/otlp/v1/traces", bodies.gzipped(build()), key, headers)
             for build in shapes]
    sends.append(lambda: send(ready, "/api/v1/otlp/v1/logs", bodies.gzipped(bodies.empty_log_records()), key, headers))
    sends.append(lambda: send(ready, "/api/v1/otlp/v1/traces", gzip.compress(bodies.json_empty_spans()), key,
                              {"Content-Type": "application/json", "Content-Encoding": "gzip"}))
    answers, watch, statuses = attack(ready, sends)
    for status, body in answers[:-1]:
        assert status == 413 and "per request" in Status.FromString(body).message
    assert answers[-1][0] == 413 and "per request" in json.loads(answers[-1][1])["detail"]
    assert_survived(watch, statuses)


def test_requests_within_the_limits_but_heavy_are_stored_and_no_worker_grows_or_dies(ready: Stack) -> None:
    key = create_key(ready, "heavy")
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    sends = [lambda build=build: send(ready, "/api/v1/otlp/v1/traces", bodies.gzipped(build()), key, headers)
             for build in (bodies.messages_of_empty_objects, bodies.spans_at_the_limit)]
    answers, watch, statuses = attack(ready, sends)
    for status, body in answers:
        assert status == 200, body[:300]
        assert ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
    assert_survived(watch, statuses)
