"""A key of project A can neither write into nor read from project B, whatever the body says."""

from __future__ import annotations

import pytest

from tests.factories import make_key, make_session, make_tool_call, make_turn
from toolscope.policies.models import Tool
from toolscope.telemetry.models import IngestBatch, Session, ToolCall
from toolscope.telemetry.services.processing import batch_process


@pytest.fixture
def b_rows(other_project):
    session = make_session(other_project, client_id="shared-id", agent_name="b-agent")
    turn = make_turn(session, client_id="shared-id:t0")
    make_tool_call(turn, client_id="shared-id:c0", output="B's output")
    Tool.objects.create(project=other_project, name="read_file", description="B's tool")
    return session


@pytest.mark.django_db
def test_ids_of_another_project_neither_collide_nor_leak(api, project, other_project, b_rows):
    events = [
        {"type": "session", "id": "shared-id", "agent_name": "a-agent", "project": "globex",
         "project_id": other_project.pk},
        {"type": "turn", "id": "shared-id:t0", "session_id": "shared-id", "index": 0},
        {"type": "tool_call", "id": "shared-id:c0", "session_id": "shared-id", "turn_index": 0,
         "tool_name": "read_file", "output": "A's output"},
    ]
    response = api.post_json("/api/v1/ingest", {"events": events})
    # B's ids are not reported as duplicates: A learns nothing about B.
    assert [r["status"] for r in response.json()["results"]] == ["accepted"] * 3
    batch = IngestBatch.objects.get()
    assert batch.project == project
    assert all("project" not in e and "project_id" not in e for e in batch.payload["events"])
    batch_process(batch_id=batch.pk)

    b_session = Session.objects.get(project=other_project)
    assert b_session.agent_name == "b-agent" and b_session.turns.count() == 1
    assert ToolCall.objects.get(project=other_project).output == "B's output"
    a_call = ToolCall.objects.get(project=project)
    assert a_call.output == "A's output" and a_call.session.project == project


@pytest.mark.django_db
def test_catalog_writes_and_reads_stay_in_the_keys_project(api_for, project, other_project, b_rows):
    key = make_key(project, scopes=["ingest", "policy:read"])
    client = api_for(key.secret)
    response = client.put("/api/v1/tools", {"tools": [{"name": "read_file", "description": "A's tool"}]},
                          format="json")
    assert response.status_code == 200
    assert Tool.objects.get(project=other_project).description == "B's tool"
    listed = client.get("/api/v1/tools").json()["tools"]
    assert [t["description"] for t in listed] == ["A's tool"]
