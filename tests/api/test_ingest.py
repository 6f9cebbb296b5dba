"""POST /api/v1/ingest: validation, per-event results, durability, duplicates."""

from __future__ import annotations

import pytest
from django.db import connection

from toolscope.telemetry.models import IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import batch_process

URL = "/api/v1/ingest"


def session_event(sid="s1", **extra):
    return {"type": "session", "id": sid, "agent_name": "coder", "model": "gpt-4o", **extra}


def turn_event(sid="s1", index=0, **extra):
    return {"type": "turn", "id": f"{sid}:t{index}", "session_id": sid, "index": index,
            "usage": {"input_tokens": 1200, "output_tokens": 40}, **extra}


def call_event(sid="s1", n=0, **extra):
    return {"type": "tool_call", "id": f"{sid}:c{n}", "session_id": sid, "turn_index": 0,
            "tool_name": "read_file", "arguments": {"path": "a.py"}, "output": "print(1)\n", **extra}


def process_all():
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


@pytest.mark.django_db(transaction=True)
def test_a_valid_batch_is_stored_before_the_202_and_processed_into_rows(api):
    response = api.post_json(URL, {"events": [session_event(), turn_event(), call_event()]})
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["accepted"] == 3 and body["rejected"] == 0
    assert [r["status"] for r in body["results"]] == ["accepted"] * 3
    batch = IngestBatch.objects.get(pk=body["batch_id"])
    assert batch.event_count == 3

    process_all()
    session = Session.objects.get(client_id="s1")
    assert (session.agent_name, session.model) == ("coder", "gpt-4o")
    turn = Turn.objects.get(session=session, index=0)
    assert turn.input_tokens == 1200
    call = ToolCall.objects.get(client_id="s1:c0")
    assert call.turn == turn and call.output == "print(1)\n"


@pytest.mark.django_db
def test_a_mixed_batch_keeps_the_valid_events_and_names_the_bad_field(api):
    events = [session_event(), turn_event(index="first"), call_event(status="exploded")]
    response = api.post_json(URL, {"events": events})
    assert response.status_code == 202
    results = response.json()["results"]
    assert results[0] == {"id": "s1", "status": "accepted"}
    assert results[1]["status"] == "rejected" and results[1]["path"] == "events[1].index"
    assert results[2]["path"] == "events[2].status" and "must be one of" in results[2]["reason"]
    stored = IngestBatch.objects.get().payload["events"]
    assert [e["id"] for e in stored] == ["s1"]


@pytest.mark.django_db
def test_resending_events_answers_duplicate_and_creates_nothing_twice(api):
    events = [session_event(), turn_event(), call_event()]
    api.post_json(URL, {"events": events})
    process_all()
    again = api.post_json(URL, {"events": events})
    assert again.status_code == 202
    assert [r["status"] for r in again.json()["results"]] == ["accepted", "duplicate", "duplicate"]
    process_all()
    assert Session.objects.count() == 1 and Turn.objects.count() == 1 and ToolCall.objects.count() == 1


@pytest.mark.django_db
def test_a_batch_processed_twice_creates_nothing_twice(api):
    api.post_json(URL, {"events": [session_event(), turn_event(), call_event()]})
    batch = IngestBatch.objects.get()
    # Same payload stored twice, as a client retry after a lost response would do before processing.
    IngestBatch.objects.create(project=batch.project, payload=batch.payload, event_count=3)
    process_all()
    assert (Session.objects.count(), Turn.objects.count(), ToolCall.objects.count()) == (1, 1, 1)


@pytest.mark.django_db
def test_the_same_event_twice_in_one_batch_is_a_duplicate(api):
    response = api.post_json(URL, {"events": [call_event(), call_event()]})
    assert [r["status"] for r in response.json()["results"]] == ["accepted", "duplicate"]


@pytest.mark.django_db
def test_gzip_bodies_are_accepted(api):
    response = api.post_json(URL, {"events": [session_event()]}, gzipped=True)
    assert response.status_code == 202
    assert IngestBatch.objects.count() == 1


@pytest.mark.django_db
def test_tool_calls_before_their_session_and_turn_are_linked_when_those_arrive(api):
    api.post_json(URL, {"events": [call_event()]})
    process_all()
    api.post_json(URL, {"events": [session_event(), turn_event()]})
    process_all()
    call = ToolCall.objects.get()
    assert call.turn is not None and call.turn.index == 0
    assert call.session.agent_name == "coder"


@pytest.mark.django_db
def test_session_end_sets_ended_at(api):
    api.post_json(URL, {"events": [session_event(timestamp="2026-11-22T10:00:00Z"),
                                   session_event(sid="s1:end", session_id="s1", action="end",
                                                 timestamp="2026-11-22T10:05:00Z")]})
    process_all()
    session = Session.objects.get()
    assert (session.ended_at - session.started_at).total_seconds() == 300


@pytest.mark.django_db
def test_turn_tool_definitions_enter_the_catalog(api):
    tool = {"name": "grep", "description": "Search", "input_schema": {"type": "object"}}
    api.post_json(URL, {"events": [turn_event(tools=[tool])]})
    process_all()
    turn = Turn.objects.get()
    from toolscope.policies.models import Tool

    stored = Tool.objects.get(name="grep")
    assert turn.advertised_set.tools == [{"name": "grep", "schema_hash": stored.schema_hash}]


@pytest.mark.django_db
def test_ingest_writes_one_row_on_the_request_path(api, django_assert_max_num_queries):
    events = [call_event(n=i) for i in range(200)]
    with django_assert_max_num_queries(8):
        response = api.post_json(URL, {"events": events})
    assert response.status_code == 202
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM telemetry_toolcall")
        assert cursor.fetchone()[0] == 0
