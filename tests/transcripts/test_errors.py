"""Malformed transcripts are rejected with a TranscriptError that points at the offending value."""

from __future__ import annotations

import pytest

from api.transcripts import TranscriptError, map_transcript
from tests.transcripts.support import RECEIVED_AT

USER = {"role": "user", "content": "go"}
CHAT_TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]


def _chat_call(**function: object) -> dict:
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": function}]}


def _tool_use(**block: object) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", **block}]}


def _function_call(**item: object) -> dict:
    return {"type": "function_call", **item}


CASES = {
    "body not an object": ([USER], "", "JSON object"),
    "messages not a list": ({"messages": {"role": "user"}}, "messages", "must be a list"),
    "message not an object": ({"messages": [USER, "hi"]}, "messages[1]", "must be an object"),
    "message without role": ({"messages": [USER, {"content": "hi"}]}, "messages[1].role", "needs a role"),
    "role not a string": ({"messages": [{"role": 1, "content": "hi"}]}, "messages[0].role", "must be a string"),
    "unknown chat role": ({"messages": [{"role": "function", "name": "ls", "content": "x"}]},
                          "messages[0].role", "unknown role 'function'"),
    "system role in anthropic messages": ({"format": "anthropic", "messages": [{"role": "system", "content": "x"}]},
                                          "messages[0].role", "unknown role 'system'"),
    "content a number": ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content",
                         "string or a list"),
    "content part without type": ({"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
                                  "messages[0].content[0].type", "must be a string"),
    "text part text not a string": ({"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]},
                                    "messages[0].content[0].text", "must be a string"),
    "tool_calls not a list": ({"messages": [USER, {"role": "assistant", "tool_calls": {}}]},
                              "messages[1].tool_calls", "must be a list"),
    "tool call without name": ({"messages": [USER, _chat_call(arguments="{}")]},
                               "messages[1].tool_calls[0].function.name", "must be a string"),
    "tool call with empty name": ({"messages": [USER, _chat_call(name="", arguments="{}")]},
                                  "messages[1].tool_calls[0].function.name", "must not be empty"),
    "tool call arguments a number": ({"messages": [USER, _chat_call(name="ls", arguments=3)]},
                                     "messages[1].tool_calls[0].function.arguments", "JSON string or an object"),
    "tool call without function": ({"messages": [USER, {"role": "assistant", "tool_calls": [{"id": "c1"}]}]},
                                   "messages[1].tool_calls[0].function", "must be an object"),
    "tool call of another type": (
        {"messages": [USER, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "custom", "custom": {}}]}]},
        "messages[1].tool_calls[0].type", "unsupported tool call type 'custom'"),
    "chat result for an unknown call": (
        {"messages": [USER, _chat_call(name="ls", arguments="{}"),
                      {"role": "tool", "tool_call_id": "c9", "content": "x"}]},
        "messages[2].tool_call_id", "no earlier tool call has the id 'c9'"),
    "chat result before its call": (
        {"messages": [USER, {"role": "tool", "tool_call_id": "c1", "content": "x"},
                      _chat_call(name="ls", arguments="{}")]},
        "messages[1].tool_call_id", "no earlier tool call"),
    "chat result without call id": ({"messages": [USER, _chat_call(name="ls", arguments="{}"),
                                                  {"role": "tool", "content": "x"}]},
                                    "messages[2].tool_call_id", "must be a string"),
    "duplicate call id": ({"messages": [USER, _chat_call(name="ls", arguments="{}"),
                                        {"role": "tool", "tool_call_id": "c1", "content": "x"},
                                        _chat_call(name="ls", arguments="{}")]},
                          "messages[3].tool_calls[0].id", "duplicate tool call id 'c1'"),
    "second result for one call": ({"messages": [USER, _chat_call(name="ls", arguments="{}"),
                                                 {"role": "tool", "tool_call_id": "c1", "content": "x"},
                                                 {"role": "tool", "tool_call_id": "c1", "content": "y"}]},
                                   "messages[3].tool_call_id", "a second result"),
    "anthropic result for an unknown call": (
        {"messages": [USER, _tool_use(id="t1", name="ls", input={}),
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x"}]}]},
        "messages[2].content[0].tool_use_id", "no earlier tool call has the id 't2'"),
    "anthropic input not an object": ({"messages": [USER, _tool_use(id="t1", name="ls", input="{}")]},
                                      "messages[1].content[0].input", "must be an object"),
    "anthropic tool_use without id": ({"messages": [USER, _tool_use(name="ls", input={})]},
                                      "messages[1].content[0].id", "must be a string"),
    "anthropic is_error not a boolean": (
        {"messages": [USER, _tool_use(id="t1", name="ls", input={}),
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": "yes"}]}]},
        "messages[2].content[0].is_error", "must be a boolean"),
    "anthropic tool_use from the user": ({"messages": [{"role": "user", "content": [
        {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}]},
                                         "messages[0].content[0].type", "belongs in an assistant message"),
    "anthropic message without content": ({"system": "x", "messages": [{"role": "user"}]},
                                          "messages[0].content", "needs content"),
    "anthropic system a number": ({"format": "anthropic", "system": 5, "messages": [USER]}, "system",
                                  "string or a list"),
    "responses item not an object": ({"input": ["hi"]}, "input[0]", "must be an object"),
    "responses unknown role": ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "unknown role"),
    "responses call without call_id": ({"input": [USER, _function_call(name="ls", arguments="{}")]},
                                       "input[1].call_id", "must be a string"),
    "responses call name not a string": ({"input": [USER, _function_call(call_id="c1", name=["ls"], arguments="{}")]},
                                         "input[1].name", "must be a string"),
    "responses output for an unknown call": (
        {"input": [USER, {"type": "function_call_output", "call_id": "c1", "output": "x"}]},
        "input[1].call_id", "no earlier tool call"),
    "responses output a number": (
        {"input": [USER, _function_call(call_id="c1", name="ls", arguments="{}"),
                   {"type": "function_call_output", "call_id": "c1", "output": 3}]},
        "input[2].output", "string or a list"),
    "responses instructions a list": ({"instructions": ["x"], "input": [USER]}, "instructions", "must be a string"),
    "tools not a list": ({"tools": {"ls": {}}, "messages": [USER]}, "tools", "must be a list"),
    "chat tool without name": ({"tools": [{"type": "function", "function": {"parameters": {}}}], "messages": [USER]},
                               "tools[0].function.name", "must be a string"),
    "anthropic tool without name": ({"tools": [{"input_schema": {}}], "messages": [USER]}, "tools[0].name",
                                    "must be a string"),
    "tool description a number": ({"tools": [{"name": "ls", "description": 1, "input_schema": {}}],
                                   "messages": [USER]}, "tools[0].description", "must be a string"),
    "session_id not a string": ({"session_id": 12, "messages": [USER]}, "session_id", "must be a string"),
    "session_id empty": ({"session_id": "", "messages": [USER]}, "session_id", "must not be empty"),
    "session_id too long": ({"session_id": "s" * 161, "messages": [USER]}, "session_id", "at most 160"),
    "call id too long for an event id": ({"messages": [USER, {"role": "assistant", "tool_calls": [
        {"id": "c" * 190, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}]},
                                         "messages[1].tool_calls[0].id", "too long"),
    "timestamp not ISO": ({"timestamp": "yesterday", "messages": [USER]}, "timestamp", "ISO 8601"),
    "timestamp without zone": ({"timestamp": "2026-11-22T10:00:00", "messages": [USER]}, "timestamp", "time zone"),
    "timestamp a boolean": ({"timestamp": True, "messages": [USER]}, "timestamp", "ISO 8601 string or a number"),
    "metadata not an object": ({"metadata": [], "messages": [USER]}, "metadata", "must be an object"),
    "model not a string": ({"model": 4, "messages": [USER]}, "model", "must be a string"),
    "agent_name too long": ({"agent_name": "a" * 201, "messages": [USER]}, "agent_name", "at most 200"),
}


@pytest.mark.parametrize(("body", "path", "fragment"), list(CASES.values()), ids=list(CASES))
def test_malformed_input_names_the_path(body, path, fragment):
    with pytest.raises(TranscriptError) as caught:
        map_transcript(body, received_at=RECEIVED_AT)

    assert caught.value.path == path
    assert fragment in caught.value.message


def test_the_error_reads_as_path_and_message_and_is_a_value_error():
    error = TranscriptError("must be a list, not object", "messages")

    assert isinstance(error, ValueError)
    assert str(error) == "messages: must be a list, not object"
    assert str(TranscriptError("the body must be a JSON object", "")) == "the body must be a JSON object"


def test_a_known_tool_list_does_not_excuse_a_malformed_call():
    body = {"tools": CHAT_TOOLS, "messages": [USER, _chat_call(name="ls")]}

    with pytest.raises(TranscriptError) as caught:
        map_transcript(body, received_at=RECEIVED_AT)

    assert caught.value.path == "messages[1].tool_calls[0].function.arguments"
