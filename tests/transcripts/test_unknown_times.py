"""No invented data: times a transcript does not carry are stored as unknown and drawn as order;
a transcript's session ends when it was received."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import charts
from tests.api.conftest import api, ingest_key  # noqa: F401  (fixtures)
from tests.transcripts.support import load_fixture
from toolscope.telemetry.models import IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import batch_process

URL = "/api/v1/transcripts"


def _post_and_process(api, body: dict) -> None:  # noqa: F811  (api is a fixture)
    response = api.post_json(URL, body)
    assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["openai_chat", "anthropic", "openai_responses"])
def test_transcript_turns_and_calls_are_stored_with_unknown_times(api, name):  # noqa: F811
    body = load_fixture(f"{name}.json")
    _post_and_process(api, body)
    session = Session.objects.get()

    assert Turn.objects.count() > 1
    assert set(Turn.objects.values_list("time_known", flat=True)) == {False}
    assert set(ToolCall.objects.values_list("time_known", flat=True)) == {False}
    # Counted in the hour the transcript states (its start), not spread over invented seconds.
    assert set(Turn.objects.values_list("started_at", flat=True)) == {session.started_at}


@pytest.mark.django_db
def test_a_transcript_session_ends_when_it_was_received(api):  # noqa: F811
    body = load_fixture("openai_chat.json")
    before = timezone.now()
    _post_and_process(api, body)
    after = timezone.now()
    session = Session.objects.get()

    assert session.started_at.isoformat() == "2026-11-22T10:00:00+00:00"  # the body's timestamp
    assert session.ended_at is not None
    assert before <= session.ended_at <= after


@pytest.mark.django_db
def test_without_a_body_timestamp_the_session_starts_and_ends_at_its_receipt(api):  # noqa: F811
    body = load_fixture("openai_chat.json")
    del body["timestamp"]
    _post_and_process(api, body)
    session = Session.objects.get()

    assert session.ended_at == session.started_at


@pytest.mark.django_db
def test_ingest_events_keep_their_times(api):  # noqa: F811
    events = [
        {"type": "turn", "id": "t0", "session_id": "s", "index": 0, "timestamp": "2026-11-22T10:00:00Z"},
        {"type": "tool_call", "id": "c0", "session_id": "s", "turn_index": 0, "tool_name": "ls",
         "timestamp": "2026-11-22T10:00:03Z"},
    ]
    assert api.post_json("/api/v1/ingest", {"events": events}).status_code == 202
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)

    assert Turn.objects.get().time_known is True
    assert ToolCall.objects.get().time_known is True
    assert Session.objects.get().ended_at is None  # a live agent's session ends when it says so


def test_the_timeline_draws_order_when_times_are_unknown():
    calls = [{"turn_index": 0, "tool_name": "bash", "status": "ok", "duration_ms": None, "offset_s": None},
             {"turn_index": 1, "tool_name": "grep", "status": "error", "duration_ms": None, "offset_s": None}]
    figure = charts.session_timeline(calls)
    bar = figure.data[0]

    assert list(bar.base) == [0, 1]
    assert list(bar.x) == [0.9, 0.9]
    assert figure.layout.xaxis.title.text == "order of the calls"
    assert "in order" in figure.layout.title.text


@pytest.mark.django_db
def test_the_session_page_draws_order_and_names_each_calls_rule(api, project, member):  # noqa: F811
    body = load_fixture("mcp_errors_openai_chat.json")
    _post_and_process(api, body)
    client = Client()
    client.force_login(member)

    response = client.get(reverse("dashboard:session", args=[project.slug, body["session_id"]]))
    page = html.unescape(response.content.decode())

    assert response.status_code == 200
    assert "time unknown" in page
    assert "Tool calls in order (the source records no times)" in page
    assert "seconds since the session started" not in page
    assert "pattern: MCP tool error" in page
    assert "pattern: MCP error" in page
    assert "2 error text, not flagged" in page  # calls 06 and 07, apart from the 4 errors
    assert "4 not ok" in page


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["openai_chat", "anthropic"])
def test_an_assistant_messages_timestamp_is_its_requests_time(api, name):  # noqa: F811
    """A host that logs each message's time (Claude Code's transcripts do) gives each request its
    own; one without takes the time of the request before it, marked unknown."""
    body = load_fixture(f"{name}.json")
    assistants = [message for message in body["messages"] if message["role"] == "assistant"]
    assistants[0]["timestamp"] = "2026-11-22T10:00:05Z"
    assistants[1]["timestamp"] = 1_795_341_700  # epoch seconds: 2026-11-22T10:01:40Z
    _post_and_process(api, body)
    turns = list(Turn.objects.order_by("index").values_list("started_at", "time_known"))
    assert [(moment.isoformat(), known) for moment, known in turns[:3]] == [
        ("2026-11-22T10:00:05+00:00", True), ("2026-11-22T10:01:40+00:00", True),
        ("2026-11-22T10:01:40+00:00", False)]
    # A call is stamped with its turn's time; when it ran is not stored.
    first = ToolCall.objects.filter(turn_index=0).values_list("started_at", "time_known").first()
    if first is not None:
        assert (first[0].isoformat(), first[1]) == ("2026-11-22T10:00:05+00:00", False)


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yesterday", "2026-11-22T10:00:05", True, {"at": 1}])
def test_a_bad_timestamp_is_a_400_naming_it(api, value):  # noqa: F811
    body = load_fixture("openai_chat.json")
    position = next(n for n, message in enumerate(body["messages"]) if message["role"] == "assistant")
    body["messages"][position]["timestamp"] = value
    response = api.post_json(URL, body)
    assert response.status_code == 400
    assert f"messages[{position}].timestamp" in str(response.json())
    assert not IngestBatch.objects.exists()
