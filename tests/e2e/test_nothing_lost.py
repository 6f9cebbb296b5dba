"""Nothing accepted is lost: a worker killed mid-batch, or the broker down while agents send,
delays processing and never drops or doubles an event."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import psycopg
import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.stack import Stack
from tests.factories import make_key, make_project
from toolscope.policies.models import Tool
from toolscope.telemetry.models import BatchStatus, IngestBatch, ToolCall

pytestmark = pytest.mark.slow


def tool_calls(session: str, count: int) -> list[dict]:
    return [{"type": "tool_call", "id": f"{session}:c{n}", "session_id": session, "turn_index": n // 10,
             "tool_name": "read_file", "arguments": {"path": f"src/{n}.py"}, "output": f"line {n}\n" * 50}
            for n in range(count)]


def post(stack: Stack, key: str, events: list[dict]) -> httpx.Response:
    return httpx.post(f"{stack.base_url}/api/v1/ingest", json={"events": events},
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)


def all_done(expected_batches: int) -> bool:
    statuses = list(IngestBatch.objects.values_list("status", flat=True))
    return len(statuses) == expected_batches and all(s == BatchStatus.DONE for s in statuses)


@contextmanager
def batch_held_mid_processing(stack: Stack, name: str, calls: int) -> Iterator[tuple[psycopg.Connection, str]]:
    """A project's batch of `calls` tool calls that the worker has claimed and that waits inside
    its transaction (its session, turn and calls not committed): its turn's tool definition waits
    on the tool's row, which the yielded connection holds until it rolls back; and the project's key."""
    project = make_project(name)
    key = make_key(project).secret
    Tool.objects.create(project=project, name="read_file", description="old", input_schema={})
    turn = {"type": "turn", "id": "s1:t0", "session_id": "s1", "index": 0,
            "tools": [{"name": "read_file", "description": "new", "input_schema": {"type": "object"}}]}
    db = stack.env["DATABASE_URL"].replace("postgres://", "postgresql://")
    with psycopg.connect(db) as blocker:
        blocker.execute("SELECT id FROM policies_tool WHERE name = 'read_file' FOR UPDATE")
        assert post(stack, key, [turn, *tool_calls("s1", calls)]).status_code == 202
        wait_for(lambda: IngestBatch.objects.filter(status=BatchStatus.PROCESSING).exists(), 30,
                 "the worker to claim the batch")
        yield blocker, key


def test_a_worker_killed_mid_batch_loses_and_doubles_nothing(stack):
    with batch_held_mid_processing(stack, "resilience", 300) as (blocker, _):
        stack.worker.stop(signal.SIGKILL)
        blocker.rollback()

    assert ToolCall.objects.count() == 0, "the killed worker's transaction was rolled back"
    stack.restart_worker()
    # The sweeper (beat, every second) re-delivers the batch left processing by the dead worker.
    wait_for(lambda: all_done(1), 60, "the sweeper and the new worker to finish the batch")
    batch = IngestBatch.objects.get()
    assert batch.attempts >= 2
    assert ToolCall.objects.count() == 300
    assert ToolCall.objects.values("client_id").distinct().count() == 300


def test_with_the_broker_down_the_api_keeps_accepting_and_the_sweeper_delivers(stack):
    key = make_key(make_project("broker-down")).secret
    stack.redis.stop()
    answers = [post(stack, key, tool_calls(f"s{n}", 50)) for n in range(5)]
    assert [a.status_code for a in answers] == [202] * 5
    assert IngestBatch.objects.filter(status=BatchStatus.PENDING).count() == 5

    stack.start_redis()
    wait_for(lambda: all_done(5), 90, "every batch accepted while the broker was down to be processed")
    assert ToolCall.objects.count() == 250
