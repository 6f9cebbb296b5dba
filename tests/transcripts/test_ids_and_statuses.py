"""Deterministic ids and timestamps, and the status rules of tool calls."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest

from api.transcripts import map_transcript
from tests.transcripts.support import RECEIVED_AT, load_fixture, of_type

FIXTURES = ["openai_chat.json", "anthropic.json", "openai_responses.json"]


def _ids(body: dict, received_at: datetime = RECEIVED_AT) -> list[str]:
    return [event["id"] for event in map_transcript(body, received_at=received_at).events]


def of_type_pair(events: list[dict]) -> tuple[list[dict], list[dict]]:
    return [e for e in events if e["type"] == "turn"], [e for e in events if e["type"] == "tool_call"]


def _chat_call(name: str, arguments: object, tools: list | None = None) -> dict:
    body: dict = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
    ]}
    if tools is not None:
        body["tools"] = tools
    return of_type(map_transcript(body, received_at=RECEIVED_AT), "tool_call")[0]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_same_transcript_maps_to_the_same_events(fixture):
    first = map_transcript(load_fixture(fixture), received_at=RECEIVED_AT)
    again = map_transcript(load_fixture(fixture), received_at=RECEIVED_AT + timedelta(hours=5))

    # The end is the receipt; everything else follows from the body alone.
    assert again.events[:-1] == first.events[:-1]
    assert [e["id"] for e in again.events] == [e["id"] for e in first.events]
    assert len({event["id"] for event in first.events}) == len(first.events)


def test_without_a_timestamp_only_the_times_follow_the_receipt():
    body = load_fixture("openai_chat.json")
    del body["timestamp"]
    later = RECEIVED_AT + timedelta(days=1)

    assert _ids(body) == _ids(body, later)
    turns = of_type(map_transcript(body, received_at=later), "turn")
    assert [turn["timestamp"] for turn in turns[:2]] == ["2026-11-24T08:00:00Z", "2026-11-24T08:00:00Z"]


def test_the_derived_session_id_ignores_labels_format_and_key_order():
    body = load_fixture("openai_chat.json")
    relabelled = body | {"model": "gpt-4.1", "agent_name": "other", "metadata": {}, "format": "openai_chat",
                         "timestamp": "2027-01-01T00:00:00Z"}
    reordered = json.loads(json.dumps(body, sort_keys=True))

    assert _ids(relabelled) == _ids(body)
    assert _ids(reordered) == _ids(body)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_a_different_conversation_gets_a_different_session_id(fixture):
    body = load_fixture(fixture)
    body.pop("session_id", None)
    changed = copy.deepcopy(body)
    changed["tools"] = changed["tools"][:-1]

    assert _ids(changed)[0] != _ids(body)[0]
    assert _ids(changed)[0].startswith("tr-")


def test_one_changed_message_changes_the_session_id():
    body = load_fixture("openai_chat_minimal.json")
    changed = copy.deepcopy(body)
    changed["messages"][0]["content"] += "?"

    assert _ids(changed)[0] != _ids(body)[0]


def test_a_given_session_id_prefixes_every_event_id():
    body = load_fixture("openai_responses.json") | {"session_id": "run-42"}
    ids = _ids(body)

    assert ids[:4] == ["run-42", "run-42:t0", "run-42:call:call_a1B2c3D4e5F6g7H8", "run-42:call:call_i9J0k1L2m3N4o5P6"]
    assert all(event["session_id"] == "run-42" for event in map_transcript(body, received_at=RECEIVED_AT).events[1:])


def test_mapping_leaves_the_body_untouched_and_events_are_plain_json():
    body = load_fixture("anthropic.json")
    snapshot = copy.deepcopy(body)
    events = map_transcript(body, received_at=RECEIVED_AT).events

    assert body == snapshot
    assert json.loads(json.dumps(events)) == events


def test_changing_an_event_changes_neither_the_body_nor_other_events():
    body = load_fixture("anthropic.json")
    snapshot = copy.deepcopy(body)
    events = map_transcript(body, received_at=RECEIVED_AT).events
    turns, calls = of_type_pair(events)

    calls[0]["arguments"]["path"] = "[REDACTED]"
    turns[0]["tools"][0]["input_schema"]["properties"].clear()

    assert body == snapshot
    assert calls[1]["arguments"]["path"] != "[REDACTED]"


def test_turns_share_one_copy_of_the_tools_and_the_system_prompt():
    """What ingest validates and redacts once for the whole session (services/ingest.py)."""
    body = load_fixture("anthropic.json")
    turns, _ = of_type_pair(map_transcript(body, received_at=RECEIVED_AT).events)

    assert len(turns) > 2
    assert all(turn["tools"] is turns[0]["tools"] for turn in turns)
    assert turns[0]["tools"] is not body["tools"]
    assert all(turn["system_prompt"] is turns[0]["system_prompt"] for turn in turns)


def test_a_naive_received_at_is_taken_as_utc():
    events = map_transcript(load_fixture("openai_chat_minimal.json"), received_at=datetime(2026, 1, 2, 3, 4, 5)).events

    assert events[0]["timestamp"] == "2026-01-02T03:04:05Z"


def test_received_at_in_another_zone_is_written_in_utc():
    start = datetime(2026, 1, 2, 3, 0, tzinfo=UTC).astimezone()
    events = map_transcript(load_fixture("openai_chat_minimal.json"), received_at=start).events

    assert events[1]["timestamp"] == "2026-01-02T03:00:00Z"


@pytest.mark.parametrize("raw", ["{", "", "[1, 2]", "42", "null"])
def test_arguments_that_are_not_a_json_object_are_a_schema_error(raw):
    call = _chat_call("ls", raw)

    assert call["status"] == "schema_error"
    assert call["arguments"] == {"_raw": raw}


def test_arguments_sent_already_parsed_are_kept():
    assert _chat_call("ls", {"path": "."})["arguments"] == {"path": "."}


def test_without_a_tools_list_no_call_is_unknown():
    assert "status" not in _chat_call("anything", "{}")  # the worker classifies its output


def test_with_an_empty_tools_list_every_call_is_unknown():
    call = _chat_call("ls", "{}", tools=[])

    assert call["status"] == "unknown_tool"


def test_unknown_tool_wins_over_schema_error():
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]

    assert _chat_call("rm", "{", tools=tools)["status"] == "unknown_tool"
    assert _chat_call("ls", "{", tools=tools)["status"] == "schema_error"


def test_an_is_error_result_makes_the_call_an_error():
    body = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom",
                                      "is_error": True}]},
    ]}
    call = of_type(map_transcript(body, received_at=RECEIVED_AT), "tool_call")[0]

    assert call["status"] == "error"
    assert call["output"] == "boom"


def test_trailing_user_messages_without_a_model_request_make_no_turn():
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                         {"role": "user", "content": "still there?"}]}
    turns = of_type(map_transcript(body, received_at=RECEIVED_AT), "turn")

    assert len(turns) == 1
    assert all(m["content"] != "still there?" for m in turns[0]["messages"])
