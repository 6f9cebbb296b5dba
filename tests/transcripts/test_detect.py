"""Which provider format a transcript is, when the body names none or names one."""

from __future__ import annotations

import pytest

from api.transcripts import TranscriptError, detect_format, map_transcript
from tests.transcripts.support import RECEIVED_AT, load_fixture

PLAIN = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("openai_chat.json", "openai_chat"),
        ("anthropic.json", "anthropic"),
        ("openai_responses.json", "openai_responses"),
        ("openai_chat_minimal.json", "openai_chat"),
        ("anthropic_minimal.json", "anthropic"),
        ("openai_responses_minimal.json", "openai_responses"),
    ],
)
def test_every_fixture_is_detected_without_its_format(fixture, expected):
    body = load_fixture(fixture)
    body.pop("format", None)

    assert map_transcript(body, received_at=RECEIVED_AT).format == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"input": []}, ("openai_responses", "`input` is a list of items")),
        ({"input": "hello"}, ("openai_responses", "`input` is a string")),
        ({"system": "Be brief.", "messages": PLAIN}, ("anthropic", "it has a top-level `system`")),
        ({"tools": [{"name": "ls", "input_schema": {}}], "messages": PLAIN},
         ("anthropic", "its tools have `input_schema`")),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]},
         ("anthropic", "messages[0] has a tool_result block")),
        ({"messages": [*PLAIN, {"role": "assistant", "content": [{"type": "tool_use", "id": "x"}]}]},
         ("anthropic", "messages[2] has a tool_use block")),
        ({"messages": [{"role": "tool", "tool_call_id": "x", "content": ""}]},
         ("openai_chat", "messages[0] has the role 'tool'")),
        ({"messages": [{"role": "assistant", "tool_calls": []}]}, ("openai_chat", "messages[0] has `tool_calls`")),
        ({"tools": [{"type": "function", "function": {"name": "ls"}}], "messages": PLAIN},
         ("openai_chat", "its tools have `function`")),
        ({"messages": PLAIN}, ("openai_chat", None)),
    ],
)
def test_each_shape_signal_picks_its_format(body, expected):
    assert detect_format(body) == expected


def test_plain_chat_may_be_declared_as_any_messages_format():
    body = {"format": "anthropic", "messages": PLAIN}

    assert map_transcript(body, received_at=RECEIVED_AT).format == "anthropic"


def test_a_matching_given_format_is_kept():
    body = load_fixture("anthropic.json") | {"format": "anthropic"}

    assert map_transcript(body, received_at=RECEIVED_AT).format == "anthropic"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"format": "anthropic", "input": [{"role": "user", "content": "hi"}]}, "has `input` and no `messages`"),
        ({"format": "openai_responses", "messages": PLAIN}, "has `messages` and no `input`"),
        ({"format": "openai_chat", "system": "Be brief.", "messages": PLAIN}, "top-level `system`"),
        ({"format": "anthropic", "messages": [{"role": "tool", "tool_call_id": "x", "content": ""}]},
         "the role 'tool'"),
        ({"format": "gemini", "messages": PLAIN}, "must be one of openai_chat, anthropic, openai_responses"),
    ],
)
def test_a_given_format_that_contradicts_the_body_is_rejected(body, fragment):
    with pytest.raises(TranscriptError) as caught:
        map_transcript(body, received_at=RECEIVED_AT)

    assert caught.value.path == "format"
    assert fragment in caught.value.message


def test_a_body_with_neither_messages_nor_input_names_messages():
    with pytest.raises(TranscriptError) as caught:
        map_transcript({"tools": []}, received_at=RECEIVED_AT)

    assert caught.value.path == "messages"
    assert "`input`" in caught.value.message
