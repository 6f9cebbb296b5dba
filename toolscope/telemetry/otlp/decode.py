"""OTLP/HTTP trace export requests, protobuf or JSON, decoded with opentelemetry-proto into plain
spans: ids as hex, attributes as Python values, times in nanoseconds.

OTLP/JSON is protobuf's JSON mapping with two differences the spec makes: trace and span ids are
hex strings (the mapping has base64 for bytes), and enums may be integers. Ids are turned into
base64 before `json_format.Parse`, which handles the rest (lowerCamelCase names, int64 as
strings, unknown fields ignored).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from toolscope.telemetry.otlp.budget import Budget, count_json, count_json_containers, count_protobuf

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR


class OtlpDecodeError(ValueError):
    """The body is not an OTLP export request in the encoding it declares."""


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    resource: dict[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def failed(self) -> bool:
        return self.status_code == STATUS_ERROR


def decode_traces(body: bytes, encoding: str, budget: Budget) -> list[Span]:
    """The spans of an ExportTraceServiceRequest body in `encoding` (PROTOBUF or JSON); OverBudget
    when it holds more than `budget`, found before anything is built."""
    request = _parse(ExportTraceServiceRequest(), body, encoding, "trace", ("resourceSpans", "scopeSpans", "spans"),
                     budget, "Span")
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(Span(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
                    name=span.name, kind=span.kind, start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano, attributes=_attributes(span.attributes),
                    status_code=span.status.code, status_message=span.status.message, resource=resource,
                    events=tuple((event.name, _attributes(event.attributes)) for event in span.events)))
    return spans


@dataclass(frozen=True)
class LogRecord:
    body: Any
    attributes: dict[str, Any]
    time_ns: int
    trace_id: str = ""
    span_id: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def decode_logs(body: bytes, encoding: str, budget: Budget) -> list[LogRecord]:
    """The log records of an ExportLogsServiceRequest body in `encoding` (PROTOBUF or JSON);
    OverBudget when it holds more than `budget`, found before anything is built."""
    request = _parse(ExportLogsServiceRequest(), body, encoding, "logs", ("resourceLogs", "scopeLogs", "logRecords"),
                     budget, "LogRecord")
    records = []
    for resource_logs in request.resource_logs:
        resource = _attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                records.append(LogRecord(
                    body=_value(record.body), attributes=_attributes(record.attributes),
                    time_ns=record.time_unix_nano or record.observed_time_unix_nano,
                    trace_id=record.trace_id.hex(), span_id=record.span_id.hex(), resource=resource,
                    scope=scope_logs.scope.name))
    return records


def encode_response(rejected: int, message: str, encoding: str, *, logs: bool = False) -> bytes:
    """An ExportTraceServiceResponse (ExportLogsServiceResponse with `logs`): `partial_success`
    when spans (log records) were rejected."""
    response: Any = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
    if rejected or message:
        if logs:
            response.partial_success.rejected_log_records = rejected
        else:
            response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    if encoding == PROTOBUF:
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()


def encode_status(code: int, message: str, encoding: str) -> bytes:
    """A google.rpc.Status, the body OTLP/HTTP gives a failed request."""
    from google.rpc.status_pb2 import Status

    status = Status(code=code, message=message)
    if encoding == PROTOBUF:
        return status.SerializeToString()
    return json_format.MessageToJson(status, indent=None).encode()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _parse(request: Any, body: bytes, encoding: str, signal: str, path: tuple[str, str, str], budget: Budget,
           item: str) -> Any:
    """`request` read from `body` once its items and values are counted within `budget`: protobuf,
    or OTLP/JSON whose hex ids (on the items at `path`: resource, scope and item keys, and their
    links) become the base64 the protobuf mapping reads."""
    try:
        if encoding == PROTOBUF:
            count_protobuf(body, request, budget, item)
            request.ParseFromString(body)
        else:
            count_json_containers(body, budget)
            data = orjson.loads(body)
            if not isinstance(data, dict):
                raise OtlpDecodeError(f"The body must be a JSON object with {path[0]}")
            count_json(data, path, budget)
            resources, scopes, items = path
            for resource in data.get(resources) or []:
                for scope in resource.get(scopes) or []:
                    for entry in scope.get(items) or []:
                        _convert_ids(entry)
                        for link in entry.get("links") or []:
                            if isinstance(link, dict):
                                _convert_ids(link)
            json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, ValueError, TypeError, RecursionError, orjson.JSONDecodeError) as exc:
        raise OtlpDecodeError(f"The body is not an OTLP {signal} export request ({encoding}): {exc}") from None
    return request


def _convert_ids(node: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value:
            try:
                node[key] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                try:  # already base64 (a client following the plain protobuf mapping)
                    base64.b64decode(value, validate=True)
                except binascii.Error:
                    raise OtlpDecodeError(f"{key} {value!r} is neither hex nor base64") from None
