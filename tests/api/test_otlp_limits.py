"""An OTLP request's work is bounded by what it holds (issue 24, items 1 and 3): decompression
bombs are refused before anything is built from them, in the request's encoding, and malformed
exports are 400s naming what is wrong, never 500s."""

from __future__ import annotations

import gzip
import json

import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.api.conftest import KeyClient
from tests.attacks import bodies
from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch

PROTOBUF = "application/x-protobuf"


@pytest.fixture
def otlp(project):
    return KeyClient(make_key(project, scopes=["ingest"]).secret)


def post(client, signal: str, body: bytes, content_type: str = PROTOBUF, **extra):
    return client.generic("POST", f"/api/v1/otlp/v1/{signal}", body, content_type=content_type, **extra)


@pytest.mark.parametrize("name", sorted(bodies.PROTOBUF_BOMBS))
def test_a_gzip_bomb_is_refused_with_413_in_protobuf_naming_the_limit(otlp, project, name):
    signal, build = bodies.PROTOBUF_BOMBS[name]
    body = bodies.gzipped(build())
    assert len(body) < 12_000
    response = post(otlp, signal, body, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"] == PROTOBUF and response["X-Request-ID"]
    status = Status.FromString(response.content)
    assert status.code == 8  # RESOURCE_EXHAUSTED
    assert "the limit is 10,000" in status.message or "the limit is 200,000" in status.message
    assert not IngestBatch.objects.filter(project=project).exists()


def test_the_json_bomb_is_refused_with_413_in_json(otlp, project):
    response = post(otlp, "traces", gzip.compress(bodies.json_empty_spans()), "application/json",
                    HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large" and "JSON objects and arrays" in response.json()["detail"]


def test_the_limits_are_settings_and_a_request_at_the_limit_is_stored(otlp, project, settings):
    settings.OTLP_MAX_ITEMS = 3
    at_limit = post(otlp, "traces", bodies.empty_spans(3))
    assert at_limit.status_code == 200
    assert ExportTraceServiceResponse.FromString(at_limit.content).partial_success.rejected_spans == 0
    over = post(otlp, "traces", bodies.empty_spans(4))
    assert over.status_code == 413 and "more than 3 spans" in Status.FromString(over.content).message
    logs = post(otlp, "logs", bodies.empty_log_records(4))
    assert logs.status_code == 413 and "more than 3 log records" in Status.FromString(logs.content).message
    settings.OTLP_MAX_VALUES = 7  # the resource's and the scope's entries count too
    values = post(otlp, "traces", bodies.one_span_of_attributes(6))
    assert values.status_code == 413 and "200,000" not in Status.FromString(values.content).message
    assert post(otlp, "traces", bodies.one_span_of_attributes(5)).status_code == 200


@pytest.mark.parametrize(("body", "where"), [
    ({"resourceSpans": "abc"}, "resourceSpans must be a list, not a string"),
    ({"resourceSpans": [1]}, "resourceSpans[0] must be an object, not a number"),
    ({"resourceSpans": [{"scopeSpans": {"spans": []}}]}, "resourceSpans[0].scopeSpans must be a list, not an object"),
    ({"resourceSpans": [{"scopeSpans": [None]}]}, "resourceSpans[0].scopeSpans[0] must be an object, not null"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]}, "resourceSpans[0].scopeSpans[0].spans must be a list"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [[]]}]}]}, "resourceSpans[0].scopeSpans[0].spans[0] must be an"),
])
def test_json_exports_of_the_wrong_shape_are_400s_naming_the_field(otlp, body, where):
    response = post(otlp, "traces", json.dumps(body).encode(), "application/json")
    assert response.status_code == 400
    status = json_format.Parse(response.content, Status())
    assert status.code == 3 and where in status.message


@pytest.mark.parametrize(("body", "where"), [
    ({"resourceLogs": "abc"}, "resourceLogs must be a list"),
    ({"resourceLogs": [{"scopeLogs": [{"logRecords": [7]}]}]}, "resourceLogs[0].scopeLogs[0].logRecords[0] must be"),
])
def test_json_log_exports_of_the_wrong_shape_are_400s_naming_the_field(otlp, body, where):
    response = post(otlp, "logs", json.dumps(body).encode(), "application/json")
    assert response.status_code == 400 and where in json_format.Parse(response.content, Status()).message


def test_errors_answer_in_the_request_encoding(otlp, project, settings):
    settings.INGEST_MAX_BODY_BYTES = 2048
    too_big = post(otlp, "traces", b"\x0a\x00" * 2000)
    assert too_big.status_code == 413 and too_big["Content-Type"] == PROTOBUF
    assert "exceeds the limit" in Status.FromString(too_big.content).message
    unauthorised = post(KeyClient(None), "traces", b"")
    assert unauthorised.status_code == 401 and Status.FromString(unauthorised.content).code == 16
    forbidden = post(KeyClient(make_key(project, scopes=["read"]).secret), "logs", b"")
    assert forbidden.status_code == 403 and Status.FromString(forbidden.content).code == 7
    as_json = post(KeyClient(None), "traces", b"{}", "application/json")
    assert as_json.status_code == 401 and as_json.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(("signal", "answer"), [("traces", ExportTraceServiceResponse),
                                                 ("logs", ExportLogsServiceResponse)])
def test_an_empty_body_is_answered_in_the_encoding_it_declared(otlp, signal, answer):
    as_json = post(otlp, signal, b"", "application/json")
    assert as_json.status_code == 200 and as_json["Content-Type"] == "application/json" and as_json.json() == {}
    as_protobuf = post(otlp, signal, b"")
    assert as_protobuf.status_code == 200 and answer.FromString(as_protobuf.content) == answer()


def test_values_nested_too_deep_are_a_400(otlp):
    value = b""
    for _ in range(40):  # AnyValue.array_value (5) -> ArrayValue.values (1) -> AnyValue ...
        value = bodies._field(0x2A, bodies._field(0x0A, value))
    body = bodies._request(bodies._field(0x12, bodies._field(0x4A, bodies._field(0x12, value))))
    response = post(otlp, "traces", body)
    assert response.status_code == 400 and "nested deeper than 32" in Status.FromString(response.content).message


@pytest.mark.parametrize("path", ["/api/v1/ingest", "/api/v1/transcripts", "/api/v1/policy/resolve"])
def test_a_json_body_of_empty_objects_is_refused_before_it_is_parsed(project, path):
    client = KeyClient(make_key(project, scopes=["ingest", "policy:read"]).secret)
    body = b"[" + b",".join([b"{}"] * 1_600_000) + b"]"
    response = client.generic("POST", path, gzip.compress(body), content_type="application/json",
                              HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert response.json()["detail"].startswith("The body holds more than 500,000 JSON objects and arrays")


def test_braces_inside_strings_are_not_counted(otlp, settings):
    settings.INGEST_MAX_JSON_CONTAINERS = 1000
    text = '{"[' * 5000
    event = {"type": "session", "id": "s1", "metadata": {"note": text}}
    response = otlp.post_json("/api/v1/ingest", {"events": [event]})
    assert response.status_code == 202, response.content


def test_json_exports_over_the_span_limit_are_413s(otlp, settings):
    settings.OTLP_MAX_ITEMS = 2
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}]}]}
    response = post(otlp, "traces", json.dumps(body).encode(), "application/json")
    assert response.status_code == 413 and "more than 2 spans" in response.json()["detail"]
