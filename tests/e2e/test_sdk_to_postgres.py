"""The SDK, a real HTTP server, a real Celery worker on Redis, and rows in PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolscope_agent import Client

from tests.e2e.conftest import ResponseDroppingProxy, wait_for
from tests.factories import make_key, make_project
from toolscope.telemetry.models import BatchStatus, IngestBatch, Session, ToolCall, Turn

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
pytestmark = pytest.mark.slow

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}


def all_batches_done(count: int | None = None) -> bool:
    batches = IngestBatch.objects.all()
    if count is not None and batches.count() < count:
        return False
    return batches.exists() and not batches.exclude(status=BatchStatus.DONE).exists()


@pytest.fixture
def key():
    return make_key(make_project("e2e")).secret


def test_a_recorded_session_reaches_postgres_through_the_worker(live_server, worker, key):
    client = Client(live_server.url, key, flush_interval=0.1)

    @client.tool()
    def read_file(path: str) -> str:
        return f"contents of {path}\n"

    with client.session(agent_name="coder", model="gpt-4o") as session:
        session.turn(tools=[READ_FILE], usage={"input_tokens": 900, "output_tokens": 30},
                     task_message="Read the README")
        read_file("README.md")
        session.turn(tools=[READ_FILE], usage={"input_tokens": 1400, "output_tokens": 12})
        session.tool_call("bash", {"command": "ls"}, output="a.py\n", status="unknown_tool")
    assert client.close(timeout=20)
    assert client.stats.failed == 0 and client.stats.dropped == 0

    wait_for(all_batches_done, message="the worker to process every batch")
    stored = Session.objects.get(client_id=session.id)
    assert (stored.agent_name, stored.model) == ("coder", "gpt-4o")
    assert stored.ended_at is not None
    assert list(Turn.objects.filter(session=stored).values_list("index", "input_tokens")) == [(0, 900), (1, 1400)]
    calls = ToolCall.objects.filter(session=stored).order_by("started_at")
    assert [(c.tool_name, c.turn_index, c.status) for c in calls] == [
        ("read_file", 0, "ok"), ("bash", 1, "unknown_tool")]
    assert calls[0].output == "contents of README.md\n" and calls[0].arguments == {"path": "README.md"}


@pytest.mark.parametrize("name", ["openai_chat", "anthropic", "openai_responses"])
def test_transcripts_of_every_format_become_rows(live_server, worker, key, name):
    client = Client(live_server.url, key)
    answer = client.upload_transcript(json.loads((FIXTURES / f"{name}.json").read_text()))
    client.close()
    assert answer["format"] == name and answer["rejected"] == 0
    wait_for(all_batches_done, message="the transcript batch to be processed")
    session = Session.objects.get(client_id=answer["session_id"])
    assert Turn.objects.filter(session=session).count() >= 3
    assert ToolCall.objects.filter(session=session).count() == sum(
        1 for result in answer["results"] if result["id"].startswith(f"{session.client_id}:call:"))


def test_a_batch_retried_after_a_lost_response_creates_no_duplicates(live_server, worker, key):
    host, port = live_server.url.removeprefix("http://").split(":")
    proxy = ResponseDroppingProxy((host, int(port)), drop=1)
    client = Client(f"http://127.0.0.1:{proxy.port}", key, flush_interval=0.1, backoff_base=0.05)
    with client.session(agent_name="flaky") as session:
        session.turn(usage={"input_tokens": 10})
        for n in range(20):
            session.tool_call("read_file", {"path": f"f{n}.py"}, output=f"file {n}")
    assert client.close(timeout=20)
    proxy.close()

    assert client.stats.retried >= 1, "the first response was lost, so the batch was sent again"
    wait_for(lambda: all_batches_done(count=2), message="both deliveries to be processed")
    stored = Session.objects.get(client_id=session.id)
    assert ToolCall.objects.filter(session=stored).count() == 20
    assert Turn.objects.filter(session=stored).count() == 1
