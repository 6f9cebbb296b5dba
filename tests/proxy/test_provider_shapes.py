"""The fake provider's answers are what the providers send: every body and every streamed event
validated against the official SDKs' own types (pinned openai and anthropic), so the proxy's tests
read real shapes. (It found OpenAI's usage details now carrying `cache_write_tokens`, required in
Responses, which toolscope read nowhere.)"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.proxy import provider as fake

TOOL = ("call_1", "read_file", {"path": "README.md"})
BODY = {"model": "m", "stream_options": {"include_usage": True}, "tools": [
    {"type": "function", "name": "read_file", "parameters": {"type": "object"}, "strict": False,
     "description": "Read."}]}
CASES = [
    (fake.chat, fake.chat_events, TypeAdapter(ChatCompletion), TypeAdapter(ChatCompletionChunk)),
    (fake.responses, fake.responses_events, TypeAdapter(Response), TypeAdapter(ResponseStreamEvent)),
    (fake.messages, fake.messages_events, TypeAdapter(Message), TypeAdapter(RawMessageStreamEvent)),
]


def strict(adapter: TypeAdapter[Any], value: dict[str, Any]) -> None:
    """Validated as the SDK's type: every field the type requires is there, with its type (the
    SDKs' models keep unknown fields, so an extra one is not caught here)."""
    adapter.validate_python(value)


@pytest.mark.parametrize(("whole", "events", "body_type", "event_type"), CASES)
@pytest.mark.parametrize("tool", [TOOL, None])
def test_bodies_and_events_are_the_sdks_types(whole, events, body_type, event_type, tool):
    strict(body_type, whole(BODY, tool))
    streamed = events(BODY, tool)
    assert streamed
    for event in streamed:
        strict(event_type, event)
