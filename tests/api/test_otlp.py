"""OTLP/HTTP in (issue 16): spans produced by the real OpenTelemetry GenAI instrumentation of the
official openai client (opentelemetry-instrumentation-openai-v2) against a fake provider on
127.0.0.1, sent to a live toolscope by the OpenTelemetry SDK's own exporters, protobuf and JSON,
unchanged; then processed into sessions, turns and tool calls."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from tests.api.conftest import KeyClient
from tests.factories import make_key, make_project
from toolscope.telemetry.models import IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import batch_process

pytestmark = pytest.mark.slow
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


class FakeOpenAI(BaseHTTPRequestHandler):
    """Chat Completions: asks for read_file first, answers once the tool result is in."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if any(message.get("role") == "tool" for message in body["messages"]):
            message, finish = {"role": "assistant", "content": "The README says hello."}, "stop"
        else:
            message, finish = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "README.md"})}}]}, "tool_calls"
        data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
                           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                           "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def run_agent(provider: str, exporter: Any, monkeypatch, *, content: bool, instrumentation: str = "gen_ai") -> None:
    """A two-request agent loop with the openai client, instrumented (the OpenTelemetry GenAI
    instrumentation, or OpenInference's in a session), its spans exported once."""
    from contextlib import nullcontext

    import openai
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if instrumentation == "gen_ai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        session = nullcontext()
    elif instrumentation == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        session = nullcontext()
        monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true" if content else "false")
    else:
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai import OpenAIInstrumentor
        session = using_session("research-run-7")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY" if content else "NO_CONTENT")
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "research-agent"}))
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        client = openai.OpenAI(base_url=provider, api_key="sk-test")
        tracer = tracer_provider.get_tracer("agent")
        with session, tracer.start_as_current_span("invoke_agent research-agent"):
            messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a research agent."},
                                              {"role": "user", "content": "What is in README.md?"}]
            first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": "call_1", "content": "hello"})
            client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        assert tracer_provider.force_flush(10_000)
    finally:
        instrumentor.uninstrument()
        tracer_provider.shutdown()


def exporter(kind: str, url: str, key: str) -> Any:
    from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufExporter

    endpoint, headers = f"{url}/api/v1/otlp/v1/traces", {"Authorization": f"Bearer {key}"}
    if kind == "protobuf":
        return ProtobufExporter(endpoint=endpoint, headers=headers, compression=Compression.Gzip)
    return JsonExporter(endpoint=endpoint, headers=headers)


def process(project) -> None:
    for batch_id in IngestBatch.objects.filter(project=project, status="pending").values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_sdks_exporter_sends_genai_spans_that_become_a_session_turns_and_calls(
        live_server, transactional_db, provider, monkeypatch, encoding):
    project = make_project(f"otlp-{encoding}")
    key = make_key(project, scopes=["ingest"]).secret
    run_agent(provider, exporter(encoding, live_server.url, key), monkeypatch, content=True)
    batch = IngestBatch.objects.get(project=project)
    assert batch.kind == "otlp" and batch.event_count == 4  # session, 2 turns, 1 call
    process(project)
    session = Session.objects.get(project=project)
    assert len(session.client_id) == 32 and session.agent_name == "research-agent" and session.model == "gpt-4o"
    assert session.metadata == {"source": "otlp", "conventions": "gen_ai", "content_captured": True}
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [(turn.index, turn.input_tokens, turn.output_tokens) for turn in turns] == [(0, 120, 15), (1, 120, 15)]
    assert turns[0].task_message == "What is in README.md?" and turns[0].system_prompt_tokens > 0
    # The second request only brings the tool's result: no new words, though it works on the same task.
    assert turns[1].task_message == turns[0].task_message
    assert (turns[0].new_message_tokens > 0, turns[1].new_message_tokens) == (True, 0)
    call = ToolCall.objects.get(session=session)
    assert (call.tool_name, call.turn_index, call.call_id, call.status) == ("read_file", 0, "call_1", "ok")
    assert (call.arguments, call.output) == ({"path": "README.md"}, "hello")
    assert call.turn_id == turns[0].pk


def test_without_captured_content_the_turns_are_kept_and_the_session_says_it_is_partial(
        live_server, transactional_db, provider, monkeypatch):
    project = make_project("otlp-bare")
    run_agent(provider, exporter("protobuf", live_server.url, make_key(project, scopes=["ingest"]).secret),
              monkeypatch, content=False)
    process(project)
    session = Session.objects.get(project=project)
    assert session.metadata["content_captured"] is False
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert len(turns) == 2 and turns[0].index < turns[1].index and turns[0].input_tokens == 120
    assert not ToolCall.objects.filter(session=session).exists()  # no content, no calls to read


def span(trace: bytes, span_id: bytes, name: str, start: int, **attributes: Any) -> ProtoSpan:
    values = []
    for key, value in attributes.items():
        any_value = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        values.append(KeyValue(key=key, value=any_value))
    return ProtoSpan(trace_id=trace, span_id=span_id, name=name, start_time_unix_nano=start,
                     end_time_unix_nano=start + 5_000_000, attributes=values)


def request(*spans: ProtoSpan) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])


@pytest.fixture
def otlp(project):
    return KeyClient(make_key(project, scopes=["ingest"]).secret)


def post(client, body: bytes, content_type: str = "application/x-protobuf", **extra):
    return client.generic("POST", "/api/v1/otlp/v1/traces", body, content_type=content_type, **extra)


TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
START = 1_795_000_000_000_000_000


def test_re_sent_spans_create_nothing_twice_and_a_rejected_one_is_a_partial_success(otlp, project):
    body = request(
        span(TRACE, bytes.fromhex("b7ad6b7169203331"), "execute_tool bash", START, **{
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"command": "make"}', "gen_ai.tool.call.result": "built"}),
        span(TRACE, bytes.fromhex("b7ad6b7169203332"), "execute_tool bash", START + 10, **{
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "gen_ai.tool.call.id": "c2",
            "gen_ai.tool.call.arguments": '{"a": ' * 70 + "1" + "}" * 70}),  # nested past 64 levels
        span(TRACE, bytes.fromhex("b7ad6b7169203333"), "GET /health", START + 20, **{"http.method": "GET"}),
    ).SerializeToString()
    first = post(otlp, gzip.compress(body), HTTP_CONTENT_ENCODING="gzip")
    assert first.status_code == 200 and first["Content-Type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(first.content)
    assert answer.partial_success.rejected_spans == 1 and "events[2].arguments" in answer.partial_success.error_message
    process(project)
    again = ExportTraceServiceResponse.FromString(post(otlp, body).content)  # an exporter's retry
    assert again.partial_success.rejected_spans == 1
    process(project)
    call = ToolCall.objects.get(project=project)  # one row, however often it was sent
    assert (call.client_id, call.tool_name, call.arguments, call.output) == (
        f"{TRACE.hex()}:c1", "bash", {"command": "make"}, "built")


def test_json_ids_are_hex_and_the_answer_is_json(otlp, project):
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": TRACE.hex(), "spanId": "b7ad6b7169203331", "name": "chat gpt-4o", "kind": 3,
        "startTimeUnixNano": str(START), "endTimeUnixNano": str(START + 1_000_000),
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                       {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "42"}},
                       {"key": "gen_ai.conversation.id", "value": {"stringValue": "conv-9"}}]}]}]}]}
    response = post(otlp, json.dumps(body).encode(), "application/json")
    assert response.status_code == 200 and response.json() == {}
    process(project)
    turn = Turn.objects.get(session__client_id="conv-9")
    assert (turn.client_id, turn.input_tokens) == ("b7ad6b7169203331", 42)


@pytest.mark.parametrize(("body", "content_type"), [
    (b"\xff\xff not protobuf", "application/x-protobuf"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json"),
    (b"[1, 2]", "application/json"),
])
def test_a_body_that_is_not_an_export_request_is_a_400_with_a_status(otlp, body, content_type):
    from google.protobuf import json_format
    from google.rpc.status_pb2 import Status

    response = post(otlp, body, content_type)
    assert response.status_code == 400 and response["Content-Type"] == content_type
    status = (Status.FromString(response.content) if content_type == "application/x-protobuf"
              else json_format.Parse(response.content, Status()))
    assert status.code == 3 and "not an OTLP trace export request" in status.message


def test_the_key_and_its_scope_are_required(project):
    body = request().SerializeToString()
    assert post(KeyClient(None), body).status_code == 401
    assert post(KeyClient(make_key(project, scopes=["read"]).secret), body).status_code == 403
    assert post(KeyClient(make_key(project, scopes=["ingest"]).secret), body, "text/plain").status_code == 415


def test_openinference_spans_become_the_same_session_turns_and_calls(live_server, transactional_db, provider,
                                                                     monkeypatch):
    project = make_project("otlp-openinference")
    run_agent(provider, exporter("protobuf", live_server.url, make_key(project, scopes=["ingest"]).secret),
              monkeypatch, content=True, instrumentation="openinference")
    process(project)
    session = Session.objects.get(project=project)
    assert session.client_id == "research-run-7" and session.agent_name == "research-agent"
    assert session.metadata["conventions"] == "openinference" and session.model == "gpt-4o"
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [(turn.index, turn.input_tokens, turn.output_tokens) for turn in turns] == [(0, 120, 15), (1, 120, 15)]
    # OpenInference records the tools advertised: their schema tokens are counted.
    assert turns[0].advertised_set.tool_count == 1 and turns[0].schema_tokens > 0
    call = ToolCall.objects.get(session=session)
    assert (call.tool_name, call.turn_index, call.arguments, call.output) == ("read_file", 0, {"path": "README.md"},
                                                                             "hello")


def test_openllmetry_spans_carry_the_tool_definitions_too(live_server, transactional_db, provider, monkeypatch):
    """Traceloop's OpenLLMetry instrumentation writes the current GenAI attributes, with
    `gen_ai.tool.definitions`: the advertised schemas are counted."""
    project = make_project("otlp-openllmetry")
    run_agent(provider, exporter("json", live_server.url, make_key(project, scopes=["ingest"]).secret),
              monkeypatch, content=True, instrumentation="openllmetry")
    process(project)
    session = Session.objects.get(project=project)
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [(turn.index, turn.input_tokens) for turn in turns] == [(0, 120), (1, 120)]
    assert turns[1].advertised_set.tools[0]["name"] == "read_file" and turns[1].schema_tokens > 0
    call = ToolCall.objects.get(session=session)
    assert (call.tool_name, call.arguments, call.output) == ("read_file", {"path": "README.md"}, "hello")


# Claude Code's log events as its monitoring documentation and real exports show them: the body
# is the prefixed name, `event.name` the bare one; before v2.1.122 every number was a string, and
# tool_result's still are.
SESSION = "5f2b6c1e-9a41-4c0e-8b1d-2f7e0c3a9d10"


def claude_code_records(numbers_as_strings: bool) -> list[tuple[str, dict[str, Any]]]:
    def number(value: int) -> int | str:
        return str(value) if numbers_as_strings else value

    common = {"session.id": SESSION, "user.id": "a1b2c3", "terminal.type": "vscode"}
    return [
        ("user_prompt", {**common, "event.sequence": 0, "prompt.id": "p-1", "prompt_length": "29",
                         "prompt": "Why does the login test fail?", "event.timestamp": "2026-11-26T09:00:00.000Z"}),
        ("api_request", {**common, "event.sequence": 1, "prompt.id": "p-1", "model": "claude-sonnet-4-5",
                         "input_tokens": number(18_200), "output_tokens": number(310),
                         "cache_read_tokens": number(9_000),
                         "cache_creation_tokens": number(0), "cost_usd": 0.061, "duration_ms": number(4_120),
                         "request_id": "req_011A", "event.timestamp": "2026-11-26T09:00:01.000Z"}),
        ("tool_result", {**common, "event.sequence": 2, "prompt.id": "p-1", "tool_name": "Bash", "success": "true",
                         "duration_ms": "840", "tool_result_size_bytes": "2048", "tool_use_id": "toolu_01",
                         "tool_input": json.dumps({"command": "pytest tests/test_login.py"}),
                         "event.timestamp": "2026-11-26T09:00:06.000Z"}),
        ("tool_decision", {**common, "event.sequence": 3, "prompt.id": "p-1", "tool_name": "Write",
                           "tool_use_id": "toolu_02", "decision": "reject", "source": "user_reject",
                           "event.timestamp": "2026-11-26T09:00:07.000Z"}),
        ("api_request", {**common, "event.sequence": 4, "prompt.id": "p-1", "model": "claude-sonnet-4-5",
                         "input_tokens": number(19_400), "output_tokens": number(120),
                         "cache_read_tokens": number(18_000), "cache_creation_tokens": number(1_300),
                         "duration_ms": number(2_050), "request_id": "req_011B",
                         "event.timestamp": "2026-11-26T09:00:09.000Z"}),
        ("tool_result", {**common, "event.sequence": 5, "prompt.id": "p-1", "tool_name": "Read", "success": "false",
                         "duration_ms": "12", "error": "File does not exist.", "tool_use_id": "toolu_03",
                         "event.timestamp": "2026-11-26T09:00:10.000Z"}),
    ]


@pytest.mark.parametrize(("encoding", "numbers_as_strings"), [("protobuf", False), ("json", True)])
def test_claude_code_log_events_become_turns_and_calls(live_server, transactional_db, encoding, numbers_as_strings):
    from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter as JsonLogExporter
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as ProtobufLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    project = make_project(f"claude-code-{encoding}")
    key = make_key(project, scopes=["ingest"]).secret
    endpoint, headers = f"{live_server.url}/api/v1/otlp/v1/logs", {"Authorization": f"Bearer {key}"}
    log_exporter = (ProtobufLogExporter if encoding == "protobuf" else JsonLogExporter)(endpoint=endpoint,
                                                                                      headers=headers)
    provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code", "service.version": "2.1.241"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    logger = provider.get_logger("com.anthropic.claude_code.events", "2.1.241")
    for name, attributes in claude_code_records(numbers_as_strings):
        logger.emit(body=f"claude_code.{name}", attributes={"event.name": name, **attributes})
    assert provider.force_flush(10_000)
    provider.shutdown()
    process(project)
    session = Session.objects.get(project=project)
    assert (session.client_id, session.agent_name, session.model) == (SESSION, "claude-code", "claude-sonnet-4-5")
    assert session.metadata == {"source": "otlp", "conventions": "claude_code", "content_captured": False}
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [(t.index, t.input_tokens, t.output_tokens, t.cached_tokens, t.cache_write_tokens) for t in turns] == [
        (1, 18_200, 310, 9_000, 0), (4, 19_400, 120, 18_000, 1_300)]
    assert turns[0].task_message == "Why does the login test fail?" and turns[0].latency_ms == 4_120
    calls = {call.call_id: call for call in ToolCall.objects.filter(session=session)}
    assert (calls["toolu_01"].tool_name, calls["toolu_01"].status, calls["toolu_01"].turn_index) == ("Bash", "ok", 1)
    assert calls["toolu_01"].arguments == {"command": "pytest tests/test_login.py"}
    assert calls["toolu_01"].duration_ms == 840 and calls["toolu_01"].output == ""  # Claude Code sends sizes only
    assert (calls["toolu_02"].tool_name, calls["toolu_02"].status) == ("Write", "denied")
    assert (calls["toolu_03"].status, calls["toolu_03"].error, calls["toolu_03"].turn_index) == (
        "error", "File does not exist.", 4)


def test_the_older_indexed_shape_of_a_real_openllmetry_export_is_mapped(otlp, project):
    """tests/fixtures/otlp/openllmetry-0.54.0.pb: the export request of opentelemetry-instrumentation-
    openai 0.54.0 (the last with gen_ai.prompt.N.*), captured by capture_openllmetry.py beside it."""
    from pathlib import Path

    body = (Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "openllmetry-0.54.0.pb").read_bytes()
    response = post(otlp, body)
    assert response.status_code == 200
    assert ExportTraceServiceResponse.FromString(response.content).partial_success.rejected_spans == 0
    process(project)
    session = Session.objects.get(project=project)
    assert session.agent_name == "weather-agent" and session.metadata["conventions"] == "gen_ai_indexed"
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [(turn.index, turn.input_tokens, turn.output_tokens) for turn in turns] == [(0, 42, 17), (1, 42, 17)]
    assert turns[0].task_message == "Weather in Paris?" and turns[0].advertised_set.tools[0]["name"] == "get_weather"
    call = ToolCall.objects.get(session=session)
    assert (call.tool_name, call.call_id, call.arguments, call.output, call.turn_index) == (
        "get_weather", "call_A1", {"city": "Paris"}, '{"temp_c": 21}', 0)


# Issue 28, item 3: the openai-v2 instrumentation records no tool definitions. Its turns carry
# what the project knows, marked as inferred, rather than no schema at all.
def _agent_turns(project) -> list[Turn]:
    session = Session.objects.filter(project=project).latest("started_at")  # the last agent run
    return list(Turn.objects.filter(session=session).select_related("advertised_set").order_by("index"))


def test_openai_v2_turns_carry_the_registered_catalog_marked_as_inferred(
        live_server, transactional_db, provider, monkeypatch):
    from toolscope_agent import Client

    project = make_project("otlp-inferred-catalog")
    key = make_key(project, scopes=["ingest"]).secret
    Client(live_server.url, api_key=key).register_tools(TOOLS)
    run_agent(provider, exporter("protobuf", live_server.url, key), monkeypatch, content=True)
    process(project)
    turns = _agent_turns(project)
    assert [turn.tools_from for turn in turns] == ["catalog", "catalog"]
    assert [tool["name"] for tool in turns[0].advertised_set.tools] == ["read_file"]
    registered = project.tools.get(name="read_file").schema_tokens
    assert registered > 0 and [turn.schema_tokens for turn in turns] == [registered, registered]


def test_openai_v2_turns_carry_what_their_agent_last_advertised(live_server, transactional_db, provider, monkeypatch):
    """The same agent (service.name) traced once by OpenLLMetry, which records definitions: the
    openai-v2 turns after it carry that set, not the whole catalog."""
    project = make_project("otlp-inferred-agent")
    key = make_key(project, scopes=["ingest"]).secret
    KeyClient(key).post("/api/v1/ingest", {"events": [{"type": "catalog", "id": "c1", "tools": [
        {"name": "delete_everything", "description": "Not this agent's", "input_schema": {"type": "object"}}]}]},
        format="json")
    run_agent(provider, exporter("json", live_server.url, key), monkeypatch, content=True,
              instrumentation="openllmetry")
    process(project)
    sent = Turn.objects.get(project=project, index=0)
    assert sent.tools_from == "" and sent.schema_tokens > 0
    run_agent(provider, exporter("protobuf", live_server.url, key), monkeypatch, content=True)
    process(project)
    turns = _agent_turns(project)
    assert [(turn.tools_from, turn.advertised_set_id) for turn in turns] == [("agent", sent.advertised_set_id)] * 2
    assert [turn.schema_tokens for turn in turns] == [sent.schema_tokens] * 2


def test_openai_v2_turns_with_nothing_to_infer_from_say_so_on_the_session_page(
        live_server, transactional_db, provider, monkeypatch, client):
    from django.urls import reverse

    from tests.factories import make_member

    project = make_project("otlp-inferred-none")
    run_agent(provider, exporter("protobuf", live_server.url, make_key(project, scopes=["ingest"]).secret),
              monkeypatch, content=True)
    process(project)
    turns = _agent_turns(project)
    assert [(turn.tools_from, turn.advertised_set_id, turn.schema_tokens) for turn in turns] == [
        ("unknown", None, 0)] * 2
    client.force_login(make_member(project).user)
    page = client.get(reverse("dashboard:session", args=[project.slug, turns[0].session.client_id]))
    assert "sent no tool definitions" in page.content.decode()
