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
    # The session's start and end events are idempotent upserts; the rest are duplicates.
    assert again["accepted"] == 2
    assert again["duplicates"] == first["accepted"] - 2
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


def _chat(turns: int) -> dict:
    """An OpenAI chat transcript of `turns` model requests, each calling one tool: 1 session event,
    then a turn and a tool_call event per request."""
    messages = [{"role": "user", "content": "go"}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    return {"session_id": "long", "messages": messages}


@pytest.mark.django_db
def test_a_transcript_longer_than_a_batch_is_stored_as_several_in_one_answer(api, settings):
    settings.INGEST_MAX_EVENTS = 10
    one = api.post_json(URL, _chat(4)).json()  # start + 4 x 2 + end = 10 events: one batch
    assert one["batch_ids"] == [one["batch_id"]]
    response = api.post_json(URL, {**_chat(12), "session_id": "longer"})  # 26 events
    assert response.status_code == 202
    answer = response.json()
    assert answer["accepted"] == 26 and answer["batch_id"] == answer["batch_ids"][0]
    batches = [IngestBatch.objects.get(pk=pk) for pk in answer["batch_ids"]]
    assert [b.event_count for b in batches] == [9, 10, 7]  # cut before a turn, never between it and its call
    assert [e["type"] for e in batches[1].payload["events"]][:2] == ["turn", "tool_call"]
    process_all()
    session = Session.objects.get(client_id="longer")
    assert (session.turn_count, session.tool_call_count) == (12, 12) and session.ended_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize(("arguments", "stored", "status"), [
    ('{"n": 123456789012345678901234567890}', {"n": pytest.approx(1.2345678901234568e29)}, "ok"),  # a float
    ('{"s": "\\ud800"}', {"_raw": '{"s": "\\ud800"}'}, "schema_error"),  # a lone surrogate
    ('{"x": NaN}', {"_raw": '{"x": NaN}'}, "schema_error"),  # not JSON
])
def test_arguments_the_database_cannot_hold_are_kept_as_text(api, arguments, stored, status):
    body = {"session_id": "odd", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
    response = api.post_json(URL, body)
    assert response.status_code == 202, response.json()
    process_all()
    call = ToolCall.objects.get()
    assert (call.arguments, call.status) == (stored, status)


# Found by the API fuzzer: a field the detected format does not read was ignored whatever it held.
@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value"), [("instructions", {}), ("input", {}), ("tools", "x"),
                                              ("metadata", [])])
def test_a_top_level_field_of_the_wrong_type_is_400_whichever_format_reads_it(api, field, value):
    response = api.post_json(URL, {**fixture("openai_chat"), field: value})
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_each_turn_stores_its_own_task_but_counts_only_its_new_messages(api):
    """Issue 25, item 1: a later instruction is the task of the requests after it. A turn that
    carries an earlier instruction as its task has nothing new to count."""
    body = fixture("openai_chat")
    response = api.post_json(URL, body)
    assert response.status_code == 202, response.json()
    process_all()
    turns = list(Turn.objects.order_by("index").values_list("task_message", "messages", "new_message_tokens"))
    first, second = body["messages"][1]["content"], body["messages"][15]["content"][0]["text"]

    assert [task for task, _, _ in turns] == [first] * 6 + [second] * 2
    assert [tokens > 0 for _, messages, tokens in turns] == [bool(messages) for _, messages, _ in turns]
    assert [index for index, (_, messages, _) in enumerate(turns) if not messages] == [1, 3, 4]


@pytest.mark.django_db
def test_usage_stored_beside_an_assistant_message_is_the_turns_usage(api):
    """Hosts that keep the response's usage next to the message it produced (Claude Code's
    transcripts do) give each request its provider figures, cache reads and writes apart: in
    Anthropic's shape (input excludes the cache) and OpenAI's (prompt tokens include it)."""
    anthropic = {"format": "anthropic", "session_id": "usage-a", "model": "claude-sonnet-4-5", "system": "Be brief.",
                 "messages": [
                     {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello", "usage": {
                         "input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 2000,
                         "cache_creation_input_tokens": 150, "cache_creation": {"ephemeral_1h_input_tokens": 50,
                                                                                "ephemeral_5m_input_tokens": 100}}},
                     {"role": "user", "content": "again"},
                     {"role": "assistant", "content": "hello again"}]}
    chat = {"format": "openai_chat", "session_id": "usage-o", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "usage": {
            "prompt_tokens": 1500, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 1024}}}]}
    for body in (anthropic, chat):
        response = api.post_json(URL, body)
        assert response.status_code == 202, response.json()
    process_all()
    first, second = Turn.objects.filter(session__client_id="usage-a").order_by("index")
    assert (first.input_tokens, first.output_tokens, first.cached_tokens, first.cache_write_tokens,
            first.cache_write_1h_tokens) == (2162, 30, 2000, 150, 50)
    assert (second.input_tokens, second.cached_tokens) == (None, None)  # nothing stored: nothing reported
    (turn,) = Turn.objects.filter(session__client_id="usage-o")
    assert (turn.input_tokens, turn.output_tokens, turn.cached_tokens, turn.cache_write_tokens) == (
        1500, 20, 1024, None)


@pytest.mark.django_db
def test_usage_that_is_not_an_object_is_400_naming_it(api):
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "usage": 7}]}
    response = api.post_json(URL, body)
    assert response.status_code == 400 and response.json()["field"] == "messages[1].usage"
