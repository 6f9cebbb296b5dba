"""POST /api/v1/transcripts: each provider's conversation becomes sessions, turns and tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolscope.telemetry.models import IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import batch_process

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
URL = "/api/v1/transcripts"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def process_all():
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["openai_chat", "anthropic", "openai_responses"])
def test_each_format_is_detected_and_stored_as_rows(api, name):
    response = api.post_json(URL, fixture(name))
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["format"] == name
    assert body["rejected"] == 0
    process_all()
    session = Session.objects.get(client_id=body["session_id"])
    turns = Turn.objects.filter(session=session)
    calls = ToolCall.objects.filter(session=session)
    assert turns.count() >= 3 and calls.count() >= 3
    assert calls.filter(status="unknown_tool").exists()
    assert all(call.turn_id is not None for call in calls)
    assert max(len(call.output) for call in calls) > 2000


@pytest.mark.django_db
def test_resending_a_transcript_creates_nothing_twice(api):
    first = api.post_json(URL, fixture("anthropic")).json()
    process_all()
    counts = (Turn.objects.count(), ToolCall.objects.count())
    again = api.post_json(URL, fixture("anthropic")).json()
    assert again["accepted"] == 1  # the session event is an idempotent upsert; the rest are duplicates
    assert again["duplicates"] == first["accepted"] - 1
    process_all()
    assert (Turn.objects.count(), ToolCall.objects.count()) == counts


@pytest.mark.django_db
def test_a_malformed_transcript_is_400_naming_the_path(api):
    body = {"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}
    response = api.post_json(URL, body)
    assert response.status_code == 400
    assert response.json()["field"] == "messages[1].role"
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_a_format_that_contradicts_the_body_is_400(api):
    response = api.post_json(URL, {**fixture("openai_responses"), "format": "anthropic"})
    assert response.status_code == 400
    assert response.json()["field"] == "format"
