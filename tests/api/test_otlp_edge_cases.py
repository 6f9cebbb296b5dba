"""OTLP requests nobody's exporter sends but anybody can (issue 24, item 3): attribute JSON nested
past any sane depth, values of the wrong type, numbers longer than Python reads. Each is a 200
(the span stored, its unreadable attribute kept as text or the span rejected with its reason in
partial_success) or a 400 naming what is wrong; never a 500."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from tests.api.conftest import KeyClient
from tests.api.test_otlp import START, TRACE, process, request, span
from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch, ToolCall, Turn

DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
LONG_NUMBER = "1" * 5000


@pytest.fixture
def otlp(project):
    return KeyClient(make_key(project, scopes=["ingest"]).secret)


def post(client, signal: str, body: bytes, content_type: str = "application/x-protobuf"):
    return client.generic("POST", f"/api/v1/otlp/v1/{signal}", body, content_type=content_type)


def chat(**attributes):
    return span(TRACE, bytes.fromhex("b7ad6b7169203331"), "chat gpt-4o", START,
                **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 42, **attributes})


def tool(**attributes):
    return span(TRACE, bytes.fromhex("b7ad6b7169203332"), "execute_tool bash", START + 10, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "gen_ai.tool.call.id": "c1",
        **attributes})


def openinference(kind: str, **attributes):
    return span(TRACE, bytes.fromhex("b7ad6b7169203333"), kind.lower(), START + 20,
                **{"openinference.span.kind": kind, **attributes})


CASES = {
    "messages nested 5,000 deep": chat(**{"gen_ai.input.messages": DEEP}),
    "message objects nested 5,000 deep": chat(**{"gen_ai.input.messages": f'[{{"role":"user","parts":{DEEP}}}]'}),
    "tool definitions nested 5,000 deep": chat(**{"gen_ai.tool.definitions": DEEP}),
    "a tool schema nested 5,000 deep": chat(**{"gen_ai.tool.definitions": json.dumps(
        [{"name": "x", "parameters": "PLACEHOLDER"}]).replace('"PLACEHOLDER"', DEEP_OBJECT)}),
    "arguments nested 5,000 deep": tool(**{"gen_ai.tool.call.arguments": DEEP_OBJECT}),
    "arguments of a 5,000-digit number": tool(**{"gen_ai.tool.call.arguments": LONG_NUMBER}),
    "messages of a 5,000-digit number": chat(**{"gen_ai.input.messages": f"[{LONG_NUMBER}]"}),
    "openinference schema nested 5,000 deep": openinference("LLM", **{
        "llm.tools.0.tool.json_schema": DEEP_OBJECT}),
    "openinference schema that is a number": openinference("LLM", **{"llm.tools.0.tool.json_schema": 7}),
    "openinference call arguments nested deep": openinference("LLM", **{
        "llm.input_messages.0.message.role": "assistant",
        "llm.input_messages.0.message.tool_calls.0.tool_call.id": "c9",
        "llm.input_messages.0.message.tool_calls.0.tool_call.function.name": "bash",
        "llm.input_messages.0.message.tool_calls.0.tool_call.function.arguments": DEEP_OBJECT,
        "llm.input_messages.1.message.role": "tool", "llm.input_messages.1.message.tool_call_id": "c9",
        "llm.input_messages.1.message.content": "done"}),
    "openinference tool input nested deep": openinference("TOOL", **{"tool.name": "bash", "input.value": DEEP}),
    "indexed function parameters nested deep": span(TRACE, bytes.fromhex("b7ad6b7169203334"), "openai.chat", START, **{
        "llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
        "llm.request.functions.0.name": "f", "llm.request.functions.0.parameters": DEEP_OBJECT}),
    "an attribute key of 5,000 digits": chat(**{LONG_NUMBER: LONG_NUMBER}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unreadable_attributes_are_never_a_500(otlp, project, name):
    response = post(otlp, "traces", request(CASES[name]).SerializeToString())
    assert response.status_code == 200, response.content[:500]
    answer = ExportTraceServiceResponse.FromString(response.content)
    if answer.partial_success.rejected_spans:
        assert "events[" in answer.partial_success.error_message  # the reason names the field
    process(project)
    assert not IngestBatch.objects.filter(project=project).exclude(status="done").exists()


def test_arguments_too_deep_to_read_are_kept_as_text(otlp, project):
    post(otlp, "traces", request(tool(**{"gen_ai.tool.call.arguments": DEEP_OBJECT})).SerializeToString())
    process(project)
    assert ToolCall.objects.get(project=project).arguments == {"arguments": DEEP_OBJECT}


def test_a_turn_whose_messages_cannot_be_read_is_still_stored_with_its_usage(otlp, project):
    post(otlp, "traces", request(chat(**{"gen_ai.input.messages": DEEP})).SerializeToString())
    process(project)
    assert Turn.objects.get(project=project).input_tokens == 42


def test_claude_code_tool_input_nested_deep_is_never_a_500(otlp, project):
    attributes = {"event.name": "tool_result", "session.id": "s-1", "event.sequence": "2", "tool_name": "Bash",
                  "success": "true", "tool_use_id": "toolu_01", "tool_input": DEEP_OBJECT}
    record = LogRecord(time_unix_nano=START, body=AnyValue(string_value="claude_code.tool_result"),
                       attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()])
    body = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[record])])])
    response = post(otlp, "logs", body.SerializeToString())
    assert response.status_code == 200
    assert ExportLogsServiceResponse.FromString(response.content).partial_success.rejected_log_records == 0
    process(project)
    assert ToolCall.objects.get(project=project).tool_name == "Bash"


@pytest.mark.parametrize("value", [
    {"intValue": LONG_NUMBER}, {"intValue": int(LONG_NUMBER[:30])}, {"doubleValue": "1e999999"},
    {"stringValue": 12}, {"arrayValue": {"values": "x"}}, {"kvlistValue": []},
])
def test_json_attribute_values_of_the_wrong_kind_are_a_400_or_a_200(otlp, value):
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": TRACE.hex(), "spanId": "b7ad6b7169203331", "name": "chat",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                       {"key": "gen_ai.usage.input_tokens", "value": value}]}]}]}]}
    response = post(otlp, "traces", json.dumps(body).encode(), "application/json")
    assert response.status_code in (200, 400), response.content[:300]


def test_a_json_attribute_key_that_is_a_5000_digit_number_is_a_400(otlp):
    body = ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + TRACE.hex() + '","spanId":"b7ad6b7169203331",'
            '"attributes":[{"key":' + LONG_NUMBER + ',"value":{"stringValue":"x"}}]}]}]}]}')
    response = post(otlp, "traces", body.encode(), "application/json")
    assert response.status_code == 400


def test_messages_holding_more_objects_than_may_be_parsed_are_unreadable(otlp, project):
    user = '{"role": "user", "parts": [{"type": "text", "content": "hi"}]}'
    many = "[" + ",".join([user] + ["{}"] * 300_000) + "]"  # read, the task would be "hi"
    response = post(otlp, "traces", request(chat(**{"gen_ai.input.messages": many})).SerializeToString())
    assert response.status_code == 200
    process(project)
    turn = Turn.objects.get(project=project)
    assert turn.input_tokens == 42 and turn.task_message == ""
