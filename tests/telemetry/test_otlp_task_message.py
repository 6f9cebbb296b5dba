"""An OTLP inference span's task is the latest user instruction of its input history (issue 25,
item 1), not the first: in a multi-turn chat every request carries the instruction it works on.
A user message holding only tool results (Anthropic's `tool_result` blocks, read as
`tool_call_response` parts) is no instruction, nor is a `tool` message. The same holds for the
OpenInference and older indexed shapes, which genai.py reads as GenAI spans."""

from __future__ import annotations

import json
from typing import Any

from toolscope.telemetry.otlp.decode import Span
from toolscope.telemetry.otlp.genai import genai_events

FIRST = "Find why the login test fails."
SECOND = "Now run the migrations against staging."


def _span(attributes: dict[str, Any]) -> Span:
    return Span(trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331", parent_span_id="",
                name="chat", kind=3, start_ns=1_795_000_000_000_000_000, end_ns=1_795_000_001_000_000_000,
                attributes=attributes, status_code=0, status_message="")


def _task(attributes: dict[str, Any]) -> str | None:
    turns = [event for event in genai_events([_span(attributes)]) if event["type"] == "turn"]
    assert len(turns) == 1
    return turns[0].get("task_message")


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _call(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": "bash",
                                            "arguments": {"cmd": "ls"}}]}


def test_the_second_user_message_of_the_history_is_the_task():
    history = [_text("system", "You are a coding agent."), _text("user", FIRST), _call("call_1"),
               {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "ok"}]},
               _text("assistant", "The cookie expired."), _text("user", SECOND), _call("call_2"),
               {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_2", "response": "ok"}]}]

    assert _task({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(history)}) == SECOND


def test_a_user_message_of_tool_results_only_is_no_instruction():
    # Anthropic's instrumentation: the tool results come back in a user message.
    history = [_text("user", FIRST), _call("toolu_1"),
               {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": "ok"}]},
               _text("assistant", "Done."), _text("user", SECOND), _call("toolu_2"),
               {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_2", "response": "ok"}]}]

    assert _task({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(history)}) == SECOND


def test_a_history_without_a_user_text_has_no_task():
    history = [_text("system", "You are a coding agent."), _call("call_1"),
               {"role": "user", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "ok"}]}]

    assert _task({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(history)}) is None


def test_openinference_spans_take_the_latest_user_message_too():
    attributes = {"openinference.span.kind": "LLM", "session.id": "conv-1"}
    for index, (role, content) in enumerate([("user", FIRST), ("assistant", "Looking."), ("user", SECOND),
                                             ("tool", "ok")]):
        attributes[f"llm.input_messages.{index}.message.role"] = role
        attributes[f"llm.input_messages.{index}.message.content"] = content
    attributes["llm.input_messages.3.message.tool_call_id"] = "call_1"

    assert _task(attributes) == SECOND


def test_older_indexed_spans_take_the_latest_user_message_too():
    attributes = {"llm.request.type": "chat", "gen_ai.system": "openai"}
    for index, (role, content) in enumerate([("user", FIRST), ("assistant", "Looking."), ("user", SECOND),
                                             ("tool", "ok")]):
        attributes[f"gen_ai.prompt.{index}.role"] = role
        attributes[f"gen_ai.prompt.{index}.content"] = content
    attributes["gen_ai.prompt.3.tool_call_id"] = "call_1"

    assert _task(attributes) == SECOND
