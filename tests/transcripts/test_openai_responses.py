"""The OpenAI Responses fixture, event by event, and how runs of output items become turns."""

from __future__ import annotations

from api.transcripts import map_transcript
from tests.transcripts.support import (
    RECEIVED_AT,
    call_summary,
    calls_by_id,
    load_fixture,
    map_fixture,
    of_type,
)

FIXTURE = "openai_responses.json"


def _map(items: list[dict], **extra: object) -> list[dict]:
    return map_transcript({"input": items, **extra}, received_at=RECEIVED_AT).events


def test_the_fixture_keeps_its_given_format_and_epoch_timestamp():
    mapped = map_fixture(FIXTURE)

    assert load_fixture(FIXTURE)["format"] == "openai_responses"
    assert mapped.format == "openai_responses"
    assert mapped.events[0]["timestamp"] == "2026-11-22T12:00:00Z"
    assert [(t["timestamp"], t["timed"]) for t in of_type(mapped, "turn")] == [("2026-11-22T12:00:00Z", False)] * 6


def test_instructions_and_developer_messages_make_the_system_prompt():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    expected = body["instructions"] + "\n\n" + "Never push to a remote branch; the user merges."

    assert all(turn["system_prompt"] == expected for turn in turns)


def test_function_tools_are_advertised_and_built_in_tools_are_skipped():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    expected = [
        {"name": t["name"], "description": t["description"], "input_schema": t["parameters"], "source": ""}
        for t in body["tools"] if t["type"] == "function"
    ]

    assert {"type": "web_search_preview"} in body["tools"]
    assert len(expected) == 4
    assert all(turn["tools"] == expected for turn in turns)


def test_one_turn_per_run_of_output_items():
    turns = of_type(map_fixture(FIXTURE), "turn")
    fix_summary = load_fixture(FIXTURE)["input"][19]["content"][0]["text"]

    assert [turn["index"] for turn in turns] == list(range(6))
    assert turns[0]["task_message"].startswith("tests/test_pagination.py::test_last_page_has_remaining_items")
    assert [turn["messages"] for turn in turns] == [
        [{"role": "user", "content": turns[0]["task_message"]}],
        [],
        [{"role": "assistant", "content": "`page_count` uses floor division, so the partial last page is "
                                          "dropped. Rounding it up."}],
        [],
        [],
        [{"role": "assistant", "content": fix_summary}],
    ]


def test_tool_calls_with_turns_and_statuses():
    assert call_summary(map_fixture(FIXTURE)) == [
        (0, "call_a1B2c3D4e5F6g7H8", "read_file", ""),
        (0, "call_i9J0k1L2m3N4o5P6", "read_file", ""),
        (1, "call_q7R8s9T0u1V2w3X4", "run_tests", ""),
        (2, "call_y5Z6a7B8c9D0e1F2", "edit_file", "schema_error"),
        (3, "call_g3H4i5J6k7L8m9N0", "git_diff", "unknown_tool"),
        (3, "call_o1P2q3R4s5T6u7V8", "edit_file", ""),
        (4, "call_w9X0y1Z2a3B4c5D6", "run_tests", ""),
    ]


def test_invalid_json_arguments_are_kept_raw():
    body = load_fixture(FIXTURE)
    call = calls_by_id(map_fixture(FIXTURE))["call_y5Z6a7B8c9D0e1F2"]

    assert call["arguments"] == {"_raw": body["input"][11]["arguments"]}
    assert call["output"].startswith("Error: arguments are not valid JSON")


def test_arguments_parsed_and_outputs_joined():
    body = load_fixture(FIXTURE)
    calls = calls_by_id(map_fixture(FIXTURE))

    assert calls["call_o1P2q3R4s5T6u7V8"]["arguments"] == {
        "path": "src/acme_api/pagination.py",
        "old_string": "    return total_items // per_page",
        "new_string": "    return -(-total_items // per_page)",
    }
    assert calls["call_o1P2q3R4s5T6u7V8"]["output"] == "Edited src/acme_api/pagination.py.\n1 line changed."
    assert calls["call_q7R8s9T0u1V2w3X4"]["output"] == body["input"][8]["output"]
    assert len(calls["call_q7R8s9T0u1V2w3X4"]["output"]) > 3000


def test_a_user_message_between_output_items_splits_the_turn():
    events = _map([
        {"role": "user", "content": "list the files"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"role": "user", "content": "and the hidden ones"},
        {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": '{"all": true}'},
    ])

    assert [(e["turn_index"], e["call_id"]) for e in events if e["type"] == "tool_call"] == [(0, "c1"), (1, "c2")]
    assert [e["messages"] for e in events if e["type"] == "turn"] == [
        [{"role": "user", "content": "list the files"}],
        [{"role": "user", "content": "and the hidden ones"}],
    ]


def test_reasoning_text_and_calls_of_one_response_are_one_turn():
    events = _map([
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "item_reference", "id": "msg_0"},
    ])

    assert [e["index"] for e in events if e["type"] == "turn"] == [0]
    assert events[1]["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Looking."}]


def test_a_string_input_is_one_user_message_and_no_model_request_yet():
    events = map_transcript({"format": "openai_responses", "input": "hello"}, received_at=RECEIVED_AT).events

    assert [event["type"] for event in events] == ["session", "session"]  # its start and end


def test_the_minimal_fixture_maps_to_exactly_a_session_and_one_turn():
    mapped = map_fixture("openai_responses_minimal.json")
    sid = mapped.session_id

    assert mapped.format == "openai_responses"
    assert mapped.events == [
        {"type": "session", "id": sid, "action": "start", "timestamp": "2026-11-23T08:00:00Z"},
        {
            "type": "turn",
            "id": f"{sid}:t0",
            "session_id": sid,
            "index": 0,
            "timestamp": "2026-11-23T08:00:00Z",
            "timed": False,
            "task_message": "What does HTTP status 429 mean?",
            "messages": [
                {"role": "user", "content": "What does HTTP status 429 mean?"},
                {"role": "assistant", "content": "Too Many Requests: slow down and retry later."},
            ],
        },
        {"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end",
         "timestamp": "2026-11-23T08:00:00Z"},
    ]
