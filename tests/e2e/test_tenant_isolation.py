"""No tenant can slow another: while one project's batch is stuck (here: waiting on a row lock
held elsewhere, the way a slow or poisoned batch holds a worker until its time limit), that
project's other batches wait their turn without occupying a worker process, and another
project's batch is processed at once by the worker's other process."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

from tests.api.conftest import KeyClient
from tests.e2e.conftest import WorkerProcess, wait_for
from tests.factories import make_key, make_project
from toolscope.policies.models import Tool
from toolscope.telemetry.models import BatchStatus, IngestBatch, ToolCall, Turn

pytestmark = pytest.mark.slow

TOOL = {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}


def a_batch(n: int) -> dict:
    """Project A's batch: its tool definition waits on the held row; the turn index is the
    issue's poison (the budget walked every index up to it)."""
    return {"events": [
        {"type": "turn", "id": f"a{n}:t", "session_id": f"a{n}", "index": 2_000_000_000, "tools": [TOOL]},
        {"type": "tool_call", "id": f"a{n}:c", "session_id": f"a{n}", "turn_index": 0, "tool_name": "read_file",
         "output": "x\n" * 100},
    ]}


B_BATCH = {"events": [{"type": "tool_call", "id": "b:c", "session_id": "b", "turn_index": 0, "tool_name": "bash",
                       "output": "ok"}]}


def status(batch_id: int) -> str:
    return IngestBatch.objects.values_list("status", flat=True).get(pk=batch_id)


@pytest.fixture
def two_process_worker(ingest_queue, transactional_db, tmp_path):
    process = WorkerProcess(ingest_queue, tmp_path / "worker.log", concurrency=2).start()
    try:
        yield process
    finally:
        process.kill()


def test_a_projects_stuck_batches_do_not_hold_up_another_projects_batch(two_process_worker, capsys):
    project_a, project_b = make_project("tenant-a"), make_project("tenant-b")
    api_a = KeyClient(make_key(project_a, scopes=["ingest"]).secret)
    api_b = KeyClient(make_key(project_b, scopes=["ingest"]).secret)
    Tool.objects.create(project=project_a, name="read_file", description="old", input_schema={})
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"]) as blocker:
        blocker.execute("SELECT id FROM policies_tool WHERE project_id = %s FOR UPDATE", [project_a.pk])
        first = api_a.post_json("/api/v1/ingest", a_batch(0)).json()["batch_id"]
        wait_for(lambda: status(first) == BatchStatus.PROCESSING, 30, "A's first batch to be taken")
        # A's next batches would wait on the same row: each would hold a worker process.
        rest = [api_a.post_json("/api/v1/ingest", a_batch(n)).json()["batch_id"] for n in range(1, 4)]
        sent = time.monotonic()
        b_batch = api_b.post_json("/api/v1/ingest", B_BATCH).json()["batch_id"]
        wait_for(lambda: status(b_batch) == BatchStatus.DONE, 30, "B's batch while A's is stuck")
        delay = time.monotonic() - sent
        assert status(first) == BatchStatus.PROCESSING  # still stuck: B did not wait for it
        assert all(status(batch) != BatchStatus.DONE for batch in rest)
        blocker.rollback()
    wait_for(lambda: all(status(batch) == BatchStatus.DONE for batch in [first, *rest]), 60, "A's batches")
    assert Turn.objects.filter(project=project_a).count() == 4
    assert ToolCall.objects.filter(project=project_a).count() == 4
    assert ToolCall.objects.filter(project=project_b).count() == 1
    with capsys.disabled():
        print(f"\nB's batch was processed {delay:.2f} s after it was accepted, with A stuck")  # noqa: T201
