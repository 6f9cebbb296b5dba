"""Every model request's task is the latest user instruction before it (issue 25, item 1), in the
three transcript formats: a chat of three instructions with tool calls between them, shaped as
the official openai and anthropic SDKs send it. Tool results (chat `tool` messages, Anthropic
`tool_result` blocks in a user message, Responses `function_call_output` items) are no
instruction: the request after them keeps the instruction before them."""

from __future__ import annotations

from typing import Any

from api.transcripts import map_transcript
from tests.transcripts.support import RECEIVED_AT, of_type

FIRST = "Find why the login test fails."
SECOND = "Now run the migrations against staging."
THIRD = "Finally open a pull request for the fix."

TOOL = {"name": "bash", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}


def _chat() -> dict[str, Any]:
    def call(call_id: str, cmd: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "{cmd}"}}'}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"output of {cmd}"},
        ]
    return {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": TOOL}],
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": FIRST},
            *call("call_a1", "pytest tests/test_login.py"),
            *call("call_a2", "cat login.py"),
            {"role": "assistant", "content": "The session cookie expired."},
            {"role": "user", "content": [{"type": "text", "text": SECOND}]},
            *call("call_b1", "manage.py migrate"),
            {"role": "assistant", "content": "Migrated."},
            {"role": "user", "content": THIRD},
            *call("call_c1", "gh pr create"),
            {"role": "assistant", "content": "Opened."},
        ],
    }


def _anthropic() -> dict[str, Any]:
    def call(call_id: str, cmd: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": [
                {"type": "text", "text": "Running it."},
                {"type": "tool_use", "id": call_id, "name": "bash", "input": {"cmd": cmd}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": f"output of {cmd}"}]},
        ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a coding agent.",
        "tools": [{"name": "bash", "description": TOOL["description"], "input_schema": TOOL["parameters"]}],
        "messages": [
            {"role": "user", "content": FIRST},
            *call("toolu_a1", "pytest tests/test_login.py"),
            *call("toolu_a2", "cat login.py"),
            {"role": "assistant", "content": [{"type": "text", "text": "The session cookie expired."}]},
            {"role": "user", "content": [{"type": "text", "text": SECOND}]},
            *call("toolu_b1", "manage.py migrate"),
            {"role": "assistant", "content": "Migrated."},
            {"role": "user", "content": THIRD},
            *call("toolu_c1", "gh pr create"),
            {"role": "assistant", "content": [{"type": "text", "text": "Opened."}]},
        ],
    }


def _responses() -> dict[str, Any]:
    def call(call_id: str, cmd: str) -> list[dict[str, Any]]:
        return [
            {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "bash",
             "arguments": f'{{"cmd": "{cmd}"}}', "status": "completed"},
            {"type": "function_call_output", "call_id": call_id, "output": f"output of {cmd}"},
        ]

    def said(text: str) -> dict[str, Any]:
        return {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {
        "model": "gpt-4.1",
        "instructions": "You are a coding agent.",
        "tools": [{"type": "function", **TOOL, "strict": False}],
        "input": [
            {"role": "user", "content": FIRST},
            *call("call_a1", "pytest tests/test_login.py"),
            *call("call_a2", "cat login.py"),
            said("The session cookie expired."),
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SECOND}]},
            *call("call_b1", "manage.py migrate"),
            said("Migrated."),
            {"role": "user", "content": THIRD},
            *call("call_c1", "gh pr create"),
            said("Opened."),
        ],
    }


def _tasks_and_calls(body: dict[str, Any]) -> list[tuple[str | None, list[str]]]:
    mapped = map_transcript(body, received_at=RECEIVED_AT)
    calls = of_type(mapped, "tool_call")
    return [(turn.get("task_message"), [call["call_id"] for call in calls if call["turn_index"] == turn["index"]])
            for turn in of_type(mapped, "turn")]


def test_openai_chat_each_request_has_the_latest_instruction_before_it():
    assert _tasks_and_calls(_chat()) == [
        (FIRST, ["call_a1"]), (FIRST, ["call_a2"]), (FIRST, []),
        (SECOND, ["call_b1"]), (SECOND, []),
        (THIRD, ["call_c1"]), (THIRD, []),
    ]


def test_anthropic_each_request_has_the_latest_instruction_not_a_tool_result():
    assert _tasks_and_calls(_anthropic()) == [
        (FIRST, ["toolu_a1"]), (FIRST, ["toolu_a2"]), (FIRST, []),
        (SECOND, ["toolu_b1"]), (SECOND, []),
        (THIRD, ["toolu_c1"]), (THIRD, []),
    ]


def test_openai_responses_each_request_has_the_latest_instruction_before_it():
    # A run of output items is one request: a function_call and the assistant message after its
    # output are two, as in the other formats.
    assert _tasks_and_calls(_responses()) == [
        (FIRST, ["call_a1"]), (FIRST, ["call_a2"]), (FIRST, []),
        (SECOND, ["call_b1"]), (SECOND, []),
        (THIRD, ["call_c1"]), (THIRD, []),
    ]


def test_the_new_messages_of_a_turn_still_hold_only_what_is_new_at_it():
    turns = of_type(map_transcript(_chat(), received_at=RECEIVED_AT), "turn")

    assert [turn["messages"] for turn in turns][:4] == [
        [{"role": "user", "content": FIRST}], [], [{"role": "assistant", "content": "The session cookie expired."}],
        [{"role": "user", "content": SECOND}],
    ]


def test_a_request_before_any_user_message_has_no_task():
    body = {"messages": [{"role": "system", "content": "Start by listing the files."},
                         {"role": "assistant", "content": "Listing."},
                         {"role": "user", "content": FIRST},
                         {"role": "assistant", "content": "Done."}]}

    assert [task for task, _ in _tasks_and_calls(body)] == [None, FIRST]
