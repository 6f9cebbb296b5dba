"""The Anthropic Messages fixture, event by event, and Anthropic-specific mapping rules."""

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

FIXTURE = "anthropic.json"


def test_the_fixture_is_detected_as_anthropic_and_keeps_its_session_id():
    mapped = map_fixture(FIXTURE)

    assert "format" not in load_fixture(FIXTURE)
    assert mapped.format == "anthropic"
    assert mapped.session_id == "claude-code-7f3a91"
    assert mapped.events[0]["id"] == "claude-code-7f3a91"


def test_the_start_time_is_normalised_to_utc_and_turns_carry_no_time_of_their_own():
    mapped = map_fixture(FIXTURE)
    turns = of_type(mapped, "turn")

    assert mapped.events[0]["timestamp"] == "2026-11-22T10:30:00Z"
    assert [(turn["timestamp"], turn["timed"]) for turn in turns] == [("2026-11-22T10:30:00Z", False)] * 7


def test_one_turn_per_assistant_message_with_ids_from_the_session():
    turns = of_type(map_fixture(FIXTURE), "turn")

    assert [turn["id"] for turn in turns] == [f"claude-code-7f3a91:t{i}" for i in range(7)]
    assert {turn["model"] for turn in turns} == {"claude-sonnet-4-5-20250929"}


def test_the_system_blocks_are_joined_into_the_system_prompt():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    expected = body["system"][0]["text"] + "\n" + body["system"][1]["text"]

    assert all(turn["system_prompt"] == expected for turn in turns)


def test_tools_are_full_definitions_without_provider_extras():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")
    expected = [
        {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"], "source": ""}
        for t in body["tools"]
    ]

    assert "cache_control" in body["tools"][-1]
    assert all(turn["tools"] == expected for turn in turns)


def test_messages_hold_text_blocks_only_thinking_and_tool_blocks_are_left_out():
    body = load_fixture(FIXTURE)
    turns = of_type(map_fixture(FIXTURE), "turn")

    assert turns[0]["task_message"] == body["messages"][0]["content"]
    assert [turn["messages"] for turn in turns] == [
        [
            {"role": "user", "content": body["messages"][0]["content"]},
            {"role": "assistant", "content": "I'll read the failing test and the pagination module first."},
        ],
        [],
        [{"role": "assistant", "content": body["messages"][5]["content"][0]["text"]}],
        [],
        [{"role": "user", "content": "Please don't change the tests themselves."}],
        [{"role": "assistant", "content": body["messages"][11]["content"][0]["text"]}],
        [
            {"role": "user", "content": "Thanks. Run the whole suite too before I merge."},
            {"role": "assistant", "content": "Running the whole suite."},
        ],
    ]


def test_tool_calls_with_turns_and_statuses():
    # "": the result has no is_error, so the transcript does not say; the worker reads the text.
    assert call_summary(map_fixture(FIXTURE)) == [
        (0, "toolu_01A09q90qw90lq917835lq9", "read_file", ""),
        (0, "toolu_01B7Kx2mWq4Tn8Lz5cVp3RdY", "read_file", ""),
        (1, "toolu_01C4Hs9Qe1Vb6Mn3Xk8Jw2Ta", "run_tests", "ok"),
        (2, "toolu_01D8Ry5Kc2Pf7Zt4Gv1Nm6Lx", "edit_file", "error"),
        (3, "toolu_01E2Wn6Xb9Jh3Qs7Fd5Kc1Vm", "git_diff", "unknown_tool"),
        (3, "toolu_01F5Tm8Lq3Ya6Ue9Rc2Hx4Bn", "edit_file", ""),
        (4, "toolu_01G9Pk4Dz7Wc2Ns5Jb8Qf3Ht", "run_tests", ""),
        (6, "toolu_01H3Lx6Vn1Qe8Ta5Mr9Yc2Kd", "run_tests", ""),
    ]


def test_an_explicit_is_error_is_sent_as_the_status_with_its_source():
    calls = calls_by_id(map_fixture(FIXTURE))

    assert calls["toolu_01C4Hs9Qe1Vb6Mn3Xk8Jw2Ta"]["status_from"] == "is_error flag"  # is_error: false
    assert calls["toolu_01D8Ry5Kc2Pf7Zt4Gv1Nm6Lx"]["status_from"] == "is_error flag"  # is_error: true
    assert "status_from" not in calls["toolu_01A09q90qw90lq917835lq9"]


def test_arguments_are_the_tool_use_input_objects():
    body = load_fixture(FIXTURE)
    calls = calls_by_id(map_fixture(FIXTURE))

    assert calls["toolu_01A09q90qw90lq917835lq9"]["arguments"] == {"path": "tests/test_pagination.py"}
    assert calls["toolu_01F5Tm8Lq3Ya6Ue9Rc2Hx4Bn"]["arguments"] == body["messages"][7]["content"][1]["input"]
    assert calls["toolu_01H3Lx6Vn1Qe8Ta5Mr9Yc2Kd"]["arguments"] == {}


def test_outputs_join_text_blocks_and_take_plain_strings_as_they_are():
    body = load_fixture(FIXTURE)
    calls = calls_by_id(map_fixture(FIXTURE))
    log = calls["toolu_01C4Hs9Qe1Vb6Mn3Xk8Jw2Ta"]["output"]

    assert calls["toolu_01A09q90qw90lq917835lq9"]["output"] == body["messages"][2]["content"][0]["content"][0]["text"]
    assert log == body["messages"][4]["content"][0]["content"]
    assert len(log) > 3000
    assert log.rstrip().endswith("1 failed, 4 passed, 2 warnings in 0.31s ====================")
    assert calls["toolu_01D8Ry5Kc2Pf7Zt4Gv1Nm6Lx"]["output"].startswith("Error: old_string not found")


def test_a_call_without_a_result_yet_has_no_output():
    call = calls_by_id(map_fixture(FIXTURE))["toolu_01H3Lx6Vn1Qe8Ta5Mr9Yc2Kd"]

    assert "output" not in call
    assert "status" not in call


def test_unknown_tool_wins_over_the_error_flag_of_its_result():
    body = load_fixture(FIXTURE)
    result = body["messages"][8]["content"][0]

    assert result["tool_use_id"] == "toolu_01E2Wn6Xb9Jh3Qs7Fd5Kc1Vm"
    assert result["is_error"] is True
    assert calls_by_id(map_fixture(FIXTURE))[result["tool_use_id"]]["status"] == "unknown_tool"


def test_a_tool_result_without_content_gives_an_empty_output():
    body = {"messages": [
        {"role": "user", "content": "touch it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "touch", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]}
    call = of_type(map_transcript(body, received_at=RECEIVED_AT), "tool_call")[0]

    assert call["output"] == ""
    assert "status" not in call


def test_the_minimal_fixture_maps_to_exactly_a_session_and_one_turn():
    mapped = map_fixture("anthropic_minimal.json")
    sid = mapped.session_id

    assert mapped.format == "anthropic"
    assert mapped.events == [
        {"type": "session", "id": sid, "action": "start", "model": "claude-haiku-4-5",
         "timestamp": "2026-11-23T08:00:00Z"},
        {
            "type": "turn",
            "id": f"{sid}:t0",
            "session_id": sid,
            "index": 0,
            "timestamp": "2026-11-23T08:00:00Z",
            "timed": False,
            "model": "claude-haiku-4-5",
            "system_prompt": "Answer in one sentence.",
            "task_message": "What does HTTP status 429 mean?",
            "messages": [
                {"role": "user", "content": "What does HTTP status 429 mean?"},
                {"role": "assistant", "content": "The client sent too many requests and should retry later."},
            ],
        },
        {"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end",
         "timestamp": "2026-11-23T08:00:00Z"},
    ]
