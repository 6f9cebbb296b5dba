"""The OpenAI Chat Completions fixture, event by event, and chat-specific mapping rules."""

from __future__ import annotations

import re

from api.transcripts import map_transcript
from tests.transcripts.support import (
    RECEIVED_AT,
    call_summary,
    calls_by_id,
    load_fixture,
    map_fixture,
    of_type,
    tool_message,
)

FIXTURE = "openai_chat.json"


def test_the_fixture_is_detected_as_openai_chat_with_a_derived_session_id():
    body = load_fixture(FIXTURE)
    mapped = map_fixture(FIXTURE)

    assert "format" not in body
    assert mapped.format == "openai_chat"
    assert re.fullmatch(r"tr-[0-9a-f]{24}", mapped.session_id)


def test_events_come_in_order_session_then_each_turn_followed_by_its_calls():
    mapped = map_fixture(FIXTURE)
    sid = mapped.session_id

    assert [event["id"] for event in mapped.events] == [
        sid,
        f"{sid}:t0", f"{sid}:call:call_Rk2dW9cXq1TmB7vJ0aLpZ3sN", f"{sid}:call:call_8FhQe3VnY6uKd2oPzS5wGx1M",
        f"{sid}:t1", f"{sid}:call:call_Jt4mN0bXc7rQa9eWv2kLy5uH",
        f"{sid}:t2", f"{sid}:call:call_Pz6Lk1sDw8fYh3nMq0tRe4cV",
        f"{sid}:t3", f"{sid}:call:call_Vb3Xn7qKe2mTj5wRa8sLd0fG", f"{sid}:call:call_Hc9Yp4uZr6bNw1kEq3xMt7aS",
        f"{sid}:t4", f"{sid}:call:call_Ws5Gd2hJm9pVc4yTn6bQk8eL",
        f"{sid}:t5",
        f"{sid}:t6", f"{sid}:call:call_Qn1Fs8vBa3eKx6rHj0mPw2tY",
        f"{sid}:t7",
        f"{sid}:end",
    ]


def test_the_session_event_carries_the_body_labels_and_timestamp():
    mapped = map_fixture(FIXTURE)

    assert mapped.events[0] == {
        "type": "session",
        "id": mapped.session_id,
        "action": "start",
        "agent_name": "coder",
        "model": "gpt-4o-2024-08-06",
        "metadata": {"repo": "acme/api", "branch": "fix/last-page"},
        "timestamp": "2026-11-22T10:00:00Z",
    }


def test_one_turn_per_assistant_message_with_no_time_of_its_own():
    turns = of_type(map_fixture(FIXTURE), "turn")

    assert [turn["index"] for turn in turns] == list(range(8))
    assert [(turn["timestamp"], turn["timed"]) for turn in turns] == [("2026-11-22T10:00:00Z", False)] * 8
    assert {turn["model"] for turn in turns} == {"gpt-4o-2024-08-06"}


def test_every_turn_advertises_the_transcript_tools_as_full_definitions():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    expected = [
        {
            "name": tool["function"]["name"],
            "description": tool["function"]["description"],
            "input_schema": tool["function"]["parameters"],
            "source": "",
        }
        for tool in body["tools"]
    ]

    assert [tool["name"] for tool in expected] == ["read_file", "search_code", "edit_file", "run_tests"]
    assert all(turn["tools"] == expected for turn in turns)


def test_system_prompt_on_every_turn_and_task_message_the_latest_user_message():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")

    assert all(turn["system_prompt"] == body["messages"][0]["content"] for turn in turns)
    first, second = body["messages"][1]["content"], body["messages"][15]["content"][0]["text"]
    assert [turn["task_message"] for turn in turns] == [first] * 6 + [second] * 2


def test_each_turn_lists_the_text_messages_new_at_that_turn():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    text = {index: message["content"] for index, message in enumerate(body["messages"])}

    assert [turn["messages"] for turn in turns] == [
        [{"role": "user", "content": text[1]}, {"role": "assistant", "content": text[2]}],
        [],
        [{"role": "assistant", "content": text[7]}],
        [],
        [],
        [{"role": "assistant", "content": text[14]}],
        [{"role": "user", "content": "Thanks. Run the whole suite too before I merge."}],
        [{"role": "assistant", "content": text[18][0]["text"]}],
    ]


def test_tool_calls_belong_to_the_turn_that_asked_for_them_with_their_status():
    assert call_summary(map_fixture(FIXTURE)) == [
        (0, "call_Rk2dW9cXq1TmB7vJ0aLpZ3sN", "read_file", ""),
        (0, "call_8FhQe3VnY6uKd2oPzS5wGx1M", "read_file", ""),
        (1, "call_Jt4mN0bXc7rQa9eWv2kLy5uH", "run_tests", ""),
        (2, "call_Pz6Lk1sDw8fYh3nMq0tRe4cV", "edit_file", ""),
        (3, "call_Vb3Xn7qKe2mTj5wRa8sLd0fG", "git_diff", "unknown_tool"),
        (3, "call_Hc9Yp4uZr6bNw1kEq3xMt7aS", "edit_file", ""),
        (4, "call_Ws5Gd2hJm9pVc4yTn6bQk8eL", "run_tests", ""),
        (6, "call_Qn1Fs8vBa3eKx6rHj0mPw2tY", "run_tests", ""),
    ]


def test_arguments_are_parsed_from_their_json_strings():
    calls = calls_by_id(map_fixture(FIXTURE))

    assert calls["call_Rk2dW9cXq1TmB7vJ0aLpZ3sN"]["arguments"] == {"path": "tests/test_pagination.py"}
    assert calls["call_Pz6Lk1sDw8fYh3nMq0tRe4cV"]["arguments"] == {
        "path": "src/acme_api/pagination.py",
        "old_string": "    return total // per_page",
        "new_string": "    return -(-total_items // per_page)",
    }
    assert calls["call_Qn1Fs8vBa3eKx6rHj0mPw2tY"]["arguments"] == {}


def test_outputs_are_the_tool_messages_text_with_parts_joined():
    body = load_fixture(FIXTURE)
    calls = calls_by_id(map_fixture(FIXTURE))
    log = calls["call_Jt4mN0bXc7rQa9eWv2kLy5uH"]["output"]

    assert log == tool_message(body, "call_Jt4mN0bXc7rQa9eWv2kLy5uH")
    assert len(log) > 3000
    assert "1 failed, 4 passed" in log
    assert calls["call_Pz6Lk1sDw8fYh3nMq0tRe4cV"]["output"].startswith("Error: old_string not found")
    assert calls["call_Hc9Yp4uZr6bNw1kEq3xMt7aS"]["output"] == (
        "Edited src/acme_api/pagination.py.\n1 line changed."
    )


def test_chat_has_no_error_flag_so_the_mapping_sends_no_status_and_the_worker_reads_the_text():
    call = calls_by_id(map_fixture(FIXTURE))["call_Pz6Lk1sDw8fYh3nMq0tRe4cV"]

    assert call["output"].startswith("Error:")
    assert "status" not in call


def test_tool_calls_carry_their_turn_timestamp_and_session():
    mapped = map_fixture(FIXTURE)
    turn_time = {turn["index"]: turn["timestamp"] for turn in of_type(mapped, "turn")}

    for call in of_type(mapped, "tool_call"):
        assert call["timestamp"] == turn_time[call["turn_index"]]
        assert call["session_id"] == mapped.session_id


def test_developer_messages_and_later_system_messages_extend_the_system_prompt():
    body = {"messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": [{"type": "text", "text": "Now answer in French."}]},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "bonjour"},
    ]}
    turns = of_type(map_transcript(body, received_at=RECEIVED_AT), "turn")

    assert [turn["system_prompt"] for turn in turns] == ["Be brief.", "Be brief.\n\nNow answer in French."]


def test_refusals_count_as_assistant_text_and_non_text_parts_are_skipped():
    body = {"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ]},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    ]}
    turn = of_type(map_transcript(body, received_at=RECEIVED_AT), "turn")[0]

    assert turn["messages"] == [
        {"role": "user", "content": "What is in this picture?"},
        {"role": "assistant", "content": "I can't help with that."},
    ]


def test_the_minimal_fixture_maps_to_exactly_a_session_and_one_turn():
    body = load_fixture("openai_chat_minimal.json")
    mapped = map_fixture("openai_chat_minimal.json")
    sid = mapped.session_id

    assert mapped.format == "openai_chat"
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
                {"role": "assistant", "content": body["messages"][1]["content"]},
            ],
        },
        {"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end",
         "timestamp": "2026-11-23T08:00:00Z"},
    ]
