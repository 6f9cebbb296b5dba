"""A turn is its span (issue 24, item 4): two model requests with the same history in different
exports (a retry, two branches of one conversation) share their place in the conversation but
are two turns, each with its usage; and a batch says `stored` only for what is stored."""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import KeyClient
from tests.api.test_otlp import START, TRACE, process, request, span
from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch, Turn
from toolscope.telemetry.selectors import batch_outcome

HISTORY = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Fix the login test"}]}])


@pytest.fixture
def otlp(project):
    return KeyClient(make_key(project, scopes=["ingest"]).secret)


def chat(span_id: str, start: int, input_tokens: int):
    return span(TRACE, bytes.fromhex(span_id), "chat gpt-4o", start, **{
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-1", "gen_ai.input.messages": HISTORY,
        "gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": 7})


def export(otlp, *spans) -> int:
    response = otlp.generic("POST", "/api/v1/otlp/v1/traces", request(*spans).SerializeToString(),
                            content_type="application/x-protobuf")
    assert response.status_code == 200
    return IngestBatch.objects.latest("pk").pk


def test_two_requests_with_one_history_in_two_exports_are_two_turns(otlp, project):
    first = export(otlp, chat("b7ad6b7169203331", START, 1000))
    process(project)
    second = export(otlp, chat("b7ad6b7169203332", START + 5_000_000_000, 1200))  # the retry, a new span
    process(project)
    turns = list(Turn.objects.filter(project=project).order_by("started_at"))
    assert [(turn.client_id, turn.index, turn.input_tokens) for turn in turns] == [
        ("b7ad6b7169203331", 0, 1000), ("b7ad6b7169203332", 0, 1200)]
    for batch_id in (first, second):
        outcome = batch_outcome(project_id=project.pk, batch_id=batch_id)
        turn_ids = {event["id"] for event in outcome["events"] if event["type"] == "turn"}
        assert turn_ids and all(event["outcome"] == "stored" for event in outcome["events"])
        assert turn_ids <= set(Turn.objects.filter(project=project).values_list("client_id", flat=True))


def test_the_same_span_sent_again_is_still_one_turn(otlp, project):
    export(otlp, chat("b7ad6b7169203331", START, 1000))
    process(project)
    export(otlp, chat("b7ad6b7169203331", START, 1000))
    process(project)
    assert Turn.objects.filter(project=project).count() == 1


def test_turns_sharing_an_index_each_have_a_budget_and_do_not_add_up_their_history(otlp, project):
    export(otlp, chat("b7ad6b7169203331", START, 1000))
    export(otlp, chat("b7ad6b7169203332", START + 1, 1200))
    process(project)
    first, second = Turn.objects.filter(project=project).order_by("started_at")
    assert first.index == second.index == 0
    assert first.message_tokens == second.message_tokens == first.new_message_tokens > 0
    assert first.estimated_input_tokens == second.estimated_input_tokens
