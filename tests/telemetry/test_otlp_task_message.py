"""An OTLP inference span's task is the latest user instruction of its input history (issue 25,
item 1), not the first: in a multi-turn chat every request carries the instruction it works on.
A user message holding only tool results (Anthropic's `tool_result` blocks, read as
`tool_call_response` parts) is no instruction, nor is a `tool` message. The same holds for the
OpenInference and older indexed shapes, which genai.py reads as GenAI spans."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from toolscope.telemetry.otlp.decode import Span
from toolscope.telemetry.otlp.genai import genai_events
from toolscope.telemetry.otlp.openinference import as_genai

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


def test_openinference_list_content_is_read_as_the_instrumentation_writes_it(monkeypatch):
    """The OpenInference OpenAI instrumentation, on a real client against a fake provider on
    127.0.0.1, writes list content as `message.contents.N.message_content.text`: the task is the
    latest user message's text parts, and a tool message's parts are its response."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.api.test_otlp import TOOLS, FakeOpenAI

    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="sk-test")
        client.chat.completions.create(model="gpt-4o", tools=TOOLS, messages=[
            {"role": "user", "content": [{"type": "text", "text": FIRST}]},
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": [{"type": "text", "text": SECOND}, {"type": "text", "text": "Quickly."}]},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                  "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "migrated"}]}])
    finally:
        instrumentor.uninstrument()
        server.shutdown()
    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes)
    assert attributes["llm.input_messages.2.message.contents.0.message_content.text"] == SECOND
    assert _task(attributes) == f"{SECOND}\nQuickly."
    messages = json.loads(as_genai(_span(attributes)).attributes["gen_ai.input.messages"])
    assert messages[4]["parts"] == [{"type": "tool_call_response", "id": "call_1", "response": "migrated"}]


def test_the_new_messages_are_the_users_words_after_the_models_last_answer():
    def turn(history):
        (event,) = [e for e in genai_events([_span({"gen_ai.operation.name": "chat",
                                                    "gen_ai.input.messages": json.dumps(history)})])
                    if e["type"] == "turn"]
        return event

    first = [_text("system", "You are a coding agent."), _text("user", FIRST)]
    assert turn(first)["messages"] == [{"role": "user", "content": FIRST}]
    results = [*first, _call("call_1"),
               {"role": "user", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "ok"}]}]
    assert turn(results)["messages"] == [] and turn(results)["task_message"] == FIRST
    assert turn([*results, _text("assistant", "Done."), _text("user", SECOND)])["messages"] == [
        {"role": "user", "content": SECOND}]


def test_cache_reads_and_writes_are_kept_apart():
    """gen_ai.usage.cache_read / cache_creation (and OpenInference's prompt_details) are billed at
    different prices: a turn keeps both (issue 26, item 2)."""
    (turn,) = [event for event in genai_events([_span({
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40,
        "gen_ai.usage.cache_read.input_tokens": 1000, "gen_ai.usage.cache_creation.input_tokens": 150})])
        if event["type"] == "turn"]
    assert turn["usage"] == {"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 1000,
                             "cache_write_tokens": 150}
    attributes = as_genai(_span({"openinference.span.kind": "LLM", "llm.token_count.prompt": 900,
                                 "llm.token_count.prompt_details.cache_read": 600,
                                 "llm.token_count.prompt_details.cache_write": 200})).attributes
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 600
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 200
